/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming reader. Files are framed here with a bitwise CRC32C of the
 * test's own, and every configuration (io_uring or pread, O_DIRECT or not,
 * chunks down to one byte) must hand out exactly the records written. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <liburing.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dpp/error.h"
#include "ref_tfrecord.h"
#include "test_tmpdir.h"
#include "format/tfindex.h"
#include "format/tfrecord.h"
#include "worker/reader.h"

#define MAX_RECORDS 256

/* A file image built in memory: records and where they start. */
typedef struct image {
    uint8_t *data;
    size_t len, cap;
    size_t n;
    uint64_t off[MAX_RECORDS + 1]; /* off[n] = len */
    size_t plen[MAX_RECORDS];
} image_t;

static void image_reserve(image_t *im, size_t more)
{
    if (im->len + more <= im->cap)
        return;
    im->cap = (im->len + more) * 2;
    im->data = realloc(im->data, im->cap);
    assert_non_null(im->data);
}

static uint8_t payload_byte(size_t rec, size_t i)
{
    return (uint8_t)(rec * 31 + i * 7 + (i >> 8));
}

/* Appends a record with the given length field (normally the payload
 * length) and a patterned payload. */
static void image_add_len(image_t *im, uint64_t length_field, size_t plen)
{
    assert_true(im->n < MAX_RECORDS);
    image_reserve(im, plen + 16);
    uint8_t *p = im->data + im->len;
    put_le(p, length_field, 8);
    put_le(p + 8, ref_mask(ref_crc(p, 8)), 4);
    for (size_t i = 0; i < plen; i++)
        p[12 + i] = payload_byte(im->n, i);
    put_le(p + 12 + plen, ref_mask(ref_crc(p + 12, plen)), 4);
    im->off[im->n] = im->len;
    im->plen[im->n] = plen;
    im->n++;
    im->len += plen + 16;
    im->off[im->n] = im->len;
}

static void image_add(image_t *im, size_t plen)
{
    image_add_len(im, plen, plen);
}

/* Sizes from empty to a few KiB, including ones around header sizes. */
static void image_standard(image_t *im, size_t nrec)
{
    static const size_t sizes[] = {0, 1, 5, 11, 12, 100, 700, 4096, 3000, 16, 4080, 2};
    for (size_t i = 0; i < nrec; i++)
        image_add(im, sizes[i % (sizeof sizes / sizeof sizes[0])] + (i / 12) * 13);
}

static void image_free(image_t *im)
{
    free(im->data);
    memset(im, 0, sizeof *im);
}

static char tmpdir[PATH_MAX];

static void path_in(char *out, size_t outlen, const char *dir, const char *name)
{
    assert_true((size_t)snprintf(out, outlen, "%s/%s", dir, name) < outlen);
}

static void write_file(const char *path, const uint8_t *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        assert_true(n > 0);
        done += (size_t)n;
    }
    assert_int_equal(close(fd), 0);
}

/* Reads [start, end) and checks it gives records first..last-1 of im, then
 * want_end (0, or an error at want_off) twice. */
static void check_range(const dpp_reader_config_t *cfg, const char *path, const image_t *im,
                        uint64_t start, uint64_t end, size_t first, size_t last, int want_end,
                        uint64_t want_off)
{
    dpp_reader_t *r;
    assert_int_equal(dpp_reader_new(&r, cfg), 0);
    assert_int_equal(dpp_reader_open(r, path, start, end), 0);
    for (size_t i = first; i < last; i++) {
        const uint8_t *p = NULL;
        size_t len = 0;
        uint64_t off = 0;
        int rc = dpp_reader_next(r, &p, &len, &off);
        if (rc != 1)
            fail_msg("record %zu: got %d (%s) at %llu", i, rc, dpp_strerror(rc),
                     (unsigned long long)off);
        assert_int_equal(off, im->off[i]);
        assert_int_equal(len, im->plen[i]);
        assert_memory_equal(p, im->data + im->off[i] + 12, len);
    }
    for (int k = 0; k < 2; k++) {
        const uint8_t *p;
        size_t len;
        uint64_t off = 0;
        assert_int_equal(dpp_reader_next(r, &p, &len, &off), want_end);
        assert_int_equal(off, want_end ? want_off : im->off[last]);
    }
    dpp_reader_close(r);
    dpp_reader_free(r);
}

static void check_all(const dpp_reader_config_t *cfg, const char *path, const image_t *im)
{
    check_range(cfg, path, im, 0, UINT64_MAX, 0, im->n, 0, 0);
}

/* The configurations every good file is read with. */
static const dpp_reader_config_t configs[] = {
    {0},
    {.force_pread = 1},
    {.chunk_bytes = 1, .depth = 1},
    {.chunk_bytes = 1, .depth = 3, .force_pread = 1},
    {.chunk_bytes = 5, .depth = 2},
    {.chunk_bytes = 64, .depth = 4},
    {.chunk_bytes = 64, .depth = 4, .force_pread = 1},
    {.chunk_bytes = 1000, .depth = 8},
    {.chunk_bytes = 4096, .depth = 2},
    {.chunk_bytes = 4096, .depth = 2, .direct = 1},
    {.chunk_bytes = 5000, .depth = 3, .direct = 1, .force_pread = 1},
    {.chunk_bytes = 3, .depth = 1, .direct = 1},
};
#define NCONFIGS (sizeof configs / sizeof configs[0])

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(tmpdir, "reader");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static void test_whole_file_every_config(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    image_standard(&im, 60);
    image_add(&im, 100000); /* far bigger than most chunk sizes */
    image_add(&im, 3);
    path_in(path, sizeof path, tmpdir, "whole.tfrecord");
    write_file(path, im.data, im.len);
    for (size_t c = 0; c < NCONFIGS; c++)
        check_all(&configs[c], path, &im);
    image_free(&im);
}

/* uring and pread give the same records, and straddling records are copied.
 * The uring side must really use the ring: a kernel that refuses io_uring
 * (probed here with liburing itself) is the one reason to skip. */
static void test_uring_matches_pread(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    unsetenv("DPP_FORCE_PREAD");
    struct io_uring probe;
    int prc = io_uring_queue_init(4, &probe, 0);
    if (prc < 0) {
        print_message("skipped: the kernel refuses io_uring (io_uring_queue_init: %s)\n",
                      strerror(-prc));
        skip();
    }
    io_uring_queue_exit(&probe);
    image_standard(&im, 40);
    path_in(path, sizeof path, tmpdir, "same.tfrecord");
    write_file(path, im.data, im.len);
    dpp_reader_config_t cu = {.chunk_bytes = 256, .depth = 3}, cp = cu;
    cp.force_pread = 1;
    dpp_reader_t *ru, *rp;
    assert_int_equal(dpp_reader_new(&ru, &cu), 0);
    assert_int_equal(dpp_reader_new(&rp, &cp), 0);
    assert_int_equal(dpp_reader_uses_uring(ru), 1);
    assert_int_equal(dpp_reader_uses_uring(rp), 0);
    assert_int_equal(dpp_reader_open(ru, path, 0, UINT64_MAX), 0);
    assert_int_equal(dpp_reader_open(rp, path, 0, UINT64_MAX), 0);
    size_t count = 0;
    for (;;) {
        const uint8_t *pu, *pp;
        size_t lu, lp;
        uint64_t ou, op;
        int a = dpp_reader_next(ru, &pu, &lu, &ou);
        int b = dpp_reader_next(rp, &pp, &lp, &op);
        assert_int_equal(a, b);
        if (a != 1)
            break;
        assert_int_equal(ou, op);
        assert_int_equal(lu, lp);
        assert_memory_equal(pu, pp, lu);
        count++;
    }
    assert_int_equal(count, im.n);
    dpp_reader_stats_t su, sp;
    dpp_reader_get_stats(ru, &su);
    dpp_reader_get_stats(rp, &sp);
    assert_int_equal(su.records, im.n);
    assert_int_equal(sp.records, im.n);
    assert_int_equal(su.bytes_read, im.len);
    assert_int_equal(sp.bytes_read, im.len);
    assert_true(su.copied > 0);
    assert_int_equal(su.copied, sp.copied);
    dpp_reader_free(ru);
    dpp_reader_free(rp);
    image_free(&im);
}

static void test_ranges(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    image_standard(&im, 30);
    path_in(path, sizeof path, tmpdir, "ranges.tfrecord");
    write_file(path, im.data, im.len);
    static const size_t bounds[][2] = {{0, 1}, {3, 9}, {5, 5}, {12, 30}, {29, 30}, {0, 30}, {7, 8}};
    for (size_t c = 0; c < NCONFIGS; c++)
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
            size_t i = bounds[b][0], j = bounds[b][1];
            check_range(&configs[c], path, &im, im.off[i], im.off[j], i, j, 0, 0);
            if (j == im.n) /* to EOF */
                check_range(&configs[c], path, &im, im.off[i], UINT64_MAX, i, j, 0, 0);
        }
    /* A range that the file no longer holds: the missing record is truncated. */
    check_range(&configs[0], path, &im, im.off[25], im.len + 40, 25, 30, DPP_ETRUNCATED, im.len);
    check_range(&configs[1], path, &im, im.len + 16, im.len + 40, 0, 0, DPP_ETRUNCATED,
                im.len + 16);
    image_free(&im);
}

static void test_empty_file(void **state)
{
    char path[PATH_MAX];
    image_t im = {0};
    (void)state;
    path_in(path, sizeof path, tmpdir, "empty.tfrecord");
    write_file(path, NULL, 0);
    for (size_t c = 0; c < NCONFIGS; c++) {
        check_all(&configs[c], path, &im);
        check_range(&configs[c], path, &im, 0, 0, 0, 0, 0, 0);
    }
}

/* Cut anywhere inside the last record: every earlier record, then
 * "truncated record" at the last one's offset. */
static void test_truncated_everywhere(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    image_standard(&im, 4); /* sizes 0, 1, 5, 11: the last frame is 27 bytes */
    image_add(&im, 40);
    path_in(path, sizeof path, tmpdir, "trunc.tfrecord");
    static const dpp_reader_config_t cut_configs[] = {
        {.chunk_bytes = 7, .depth = 2},
        {.chunk_bytes = 7, .depth = 2, .force_pread = 1},
        {0},
        {.direct = 1},
    };
    size_t last = im.n - 1;
    for (uint64_t cut = im.off[last]; cut <= im.len; cut++) {
        write_file(path, im.data, (size_t)cut);
        for (size_t c = 0; c < sizeof cut_configs / sizeof cut_configs[0]; c++) {
            if (cut == im.off[last] || cut == im.len) {
                size_t n = cut == im.len ? im.n : last;
                check_range(&cut_configs[c], path, &im, 0, UINT64_MAX, 0, n, 0, 0);
            } else {
                check_range(&cut_configs[c], path, &im, 0, UINT64_MAX, 0, last, DPP_ETRUNCATED,
                            im.off[last]);
            }
        }
    }
    image_free(&im);
}

static void expect_next(dpp_reader_t *r, int want, uint64_t want_off)
{
    const uint8_t *p;
    size_t len;
    uint64_t off = 0;
    int rc = dpp_reader_next(r, &p, &len, &off);
    if (rc != want)
        fail_msg("got %d (%s), want %d", rc, dpp_strerror(rc), want);
    assert_int_equal(off, want_off);
}

static void test_corrupt_payload_continues(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    image_standard(&im, 6);
    im.data[im.off[2] + 12 + 1] ^= 0x40;       /* payload of record 2 */
    im.data[im.off[5] + im.plen[5] + 12] ^= 1; /* payload CRC of record 5 */
    path_in(path, sizeof path, tmpdir, "badpayload.tfrecord");
    write_file(path, im.data, im.len);
    for (size_t c = 0; c < NCONFIGS; c++) {
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, &configs[c]), 0);
        assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), 0);
        expect_next(r, 1, im.off[0]);
        expect_next(r, 1, im.off[1]);
        expect_next(r, DPP_ECORRUPT, im.off[2]);
        assert_int_equal(dpp_reader_stuck(r), 0);
        expect_next(r, 1, im.off[3]);
        expect_next(r, 1, im.off[4]);
        expect_next(r, DPP_ECORRUPT, im.off[5]);
        expect_next(r, 0, im.len);
        dpp_reader_stats_t st;
        dpp_reader_get_stats(r, &st);
        assert_int_equal(st.records, 4);
        dpp_reader_free(r);
    }
    image_free(&im);
}

/* Inserts `n` bytes of value v at `at` into im (shifting what follows):
 * the framing breaks there. Offsets of records after `at` move by n. */
static void image_insert(image_t *im, size_t at, size_t n, uint8_t v)
{
    image_reserve(im, n);
    memmove(im->data + at + n, im->data + at, im->len - at);
    memset(im->data + at, v, n);
    im->len += n;
    for (size_t i = 0; i <= im->n; i++)
        if (im->off[i] >= at)
            im->off[i] += n;
}

/* A length CRC that does not match is a gap in the framing: the reader
 * finds the next record and goes on, counting the gap; a range the gap runs
 * to the end of ends cleanly; a gap no record follows ends the data. */
static void test_corrupt_length_resyncs(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    uint64_t from, to;
    (void)state;
    image_standard(&im, 6);
    im.data[im.off[3] + 9] ^= 0x10; /* length CRC of record 3 */
    path_in(path, sizeof path, tmpdir, "badlength.tfrecord");
    write_file(path, im.data, im.len);
    for (size_t c = 0; c < NCONFIGS; c++) {
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, &configs[c]), 0);
        assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), 0);
        for (int i = 0; i < 3; i++)
            expect_next(r, 1, im.off[i]);
        assert_int_equal(dpp_reader_gaps(r, &from, &to), 0);
        expect_next(r, 1, im.off[4]);
        assert_int_equal(dpp_reader_gaps(r, &from, &to), 1);
        assert_int_equal(from, im.off[3]);
        assert_int_equal(to, im.off[4]);
        assert_int_equal(dpp_reader_stuck(r), 0);
        expect_next(r, 1, im.off[5]);
        expect_next(r, 0, im.len);
        /* a range that ends where the gap does */
        assert_int_equal(dpp_reader_open(r, path, im.off[2], im.off[4]), 0);
        expect_next(r, 1, im.off[2]);
        expect_next(r, 0, im.off[4]);
        assert_int_equal(dpp_reader_gaps(r, &from, &to), 1);
        dpp_reader_free(r);
    }
    /* the last record's length broken: the gap runs to the end */
    im.data[im.off[3] + 9] ^= 0x10;
    im.data[im.off[5] + 1] ^= 0x01;
    write_file(path, im.data, im.len);
    dpp_reader_t *r;
    assert_int_equal(dpp_reader_new(&r, NULL), 0);
    assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), 0);
    for (int i = 0; i < 5; i++)
        expect_next(r, 1, im.off[i]);
    expect_next(r, 0, im.len);
    assert_int_equal(dpp_reader_gaps(r, &from, &to), 1);
    assert_int_equal(from, im.off[5]);
    assert_int_equal(to, im.len);
    dpp_reader_free(r);
    image_free(&im);
}

/* One byte inserted inside a payload (an object store shifting a body, a
 * bad copy): that record fails its payload CRC, the next header is one byte
 * off, and records resume one byte later; nothing else is lost. */
static void test_inserted_byte(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    uint64_t from, to;
    (void)state;
    image_standard(&im, 40);
    uint64_t at = im.off[20] + 12 + im.plen[20] / 2;
    image_insert(&im, (size_t)at, 1, 0x5a);
    path_in(path, sizeof path, tmpdir, "inserted.tfrecord");
    write_file(path, im.data, im.len);
    for (size_t c = 0; c < NCONFIGS; c++) {
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, &configs[c]), 0);
        assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), 0);
        for (size_t i = 0; i < 40; i++) {
            const uint8_t *p;
            size_t len;
            uint64_t off;
            int rc = dpp_reader_next(r, &p, &len, &off);
            if (i == 20) {
                assert_int_equal(rc, DPP_ECORRUPT);
                assert_int_equal(off, im.off[20]);
                continue;
            }
            assert_int_equal(rc, 1);
            assert_int_equal(off, im.off[i]);
            assert_int_equal(len, im.plen[i]);
            assert_memory_equal(p, im.data + im.off[i] + 12, len);
        }
        expect_next(r, 0, im.len);
        assert_int_equal(dpp_reader_gaps(r, &from, &to), 1);
        assert_int_equal(to - from, 1);
        assert_int_equal(to, im.off[21]);
        dpp_reader_free(r);
    }
    image_free(&im);
}

/* Headers that check, with payloads that do not, after a break: the search
 * passes DPP_TFRECORD_RESYNC_CANDIDATES of them at most, then gives up and
 * the rest of the data is lost (stuck at the break). */
static void test_resync_gives_up(void **state)
{
    char path[PATH_MAX];
    (void)state;
    for (int extra = -1; extra <= 0; extra++) {
        image_t im = {0};
        image_standard(&im, 3);
        size_t nbad = DPP_TFRECORD_RESYNC_CANDIDATES + (size_t)extra;
        for (size_t i = 0; i < nbad + 2; i++)
            image_add(&im, 20);
        im.data[im.off[3] + 9] ^= 0x10; /* record 3's length CRC */
        for (size_t i = 4; i < 4 + nbad; i++)
            im.data[im.off[i] + 12] ^= 0x01; /* a payload that fails its CRC */
        path_in(path, sizeof path, tmpdir, "candidates.tfrecord");
        write_file(path, im.data, im.len);
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, NULL), 0);
        assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), 0);
        for (int i = 0; i < 3; i++)
            expect_next(r, 1, im.off[i]);
        if (extra < 0) {
            expect_next(r, 1, im.off[4 + nbad]); /* found after 63 false candidates */
        } else {
            expect_next(r, DPP_ECORRUPT, im.off[3]);
            assert_int_equal(dpp_reader_stuck(r), DPP_ECORRUPT);
        }
        dpp_reader_free(r);
        image_free(&im);
    }
}

/* The index scan and the reader find the same records whatever breaks the
 * framing: random bytes inserted, deleted or overwritten; every split cut
 * from the scan's index reads back exactly the index's records of it. */
static void test_scan_and_reader_agree(void **state)
{
    char path[PATH_MAX];
    uint64_t rng = 777;
    (void)state;
    path_in(path, sizeof path, tmpdir, "agree.tfrecord");
    for (int iter = 0; iter < 60; iter++) {
        image_t im = {0};
        image_standard(&im, 120);
        for (int k = 0; k < 3; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)((rng >> 33) % im.len), n = 1 + (size_t)((rng >> 20) % 40);
            switch ((rng >> 8) % 3) {
            case 0:
                image_insert(&im, at, n, (uint8_t)rng);
                break;
            case 1:
                if (at + n > im.len)
                    n = im.len - at;
                memmove(im.data + at, im.data + at + n, im.len - at - n);
                im.len -= n;
                break;
            default:
                for (size_t i = at; i < at + n && i < im.len; i++)
                    im.data[i] = (uint8_t)(rng >> (i % 50));
            }
        }
        write_file(path, im.data, im.len);
        dpp_tfindex_t idx;
        dpp_tfindex_scan_result_t tail;
        char err[256];
        assert_int_equal(dpp_tfindex_scan(path, 0, &idx, &tail, err, sizeof err), 0);
        size_t per = 1 + (size_t)(rng % 17);
        dpp_reader_config_t cfg = {.chunk_bytes = 1 + (size_t)(rng % 5000), .depth = 2};
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, &cfg), 0);
        for (size_t first = 0; first < idx.n; first += per) {
            size_t last = first + per < idx.n ? first + per : idx.n;
            uint64_t end =
                last < idx.n ? idx.offsets[last] : idx.offsets[idx.n - 1] + idx.sizes[idx.n - 1];
            assert_int_equal(dpp_reader_open(r, path, idx.offsets[first], end), 0);
            for (size_t i = first; i < last; i++) {
                const uint8_t *p;
                size_t len;
                uint64_t off;
                int rc = dpp_reader_next(r, &p, &len, &off);
                if (rc != 1 && rc != DPP_ECORRUPT)
                    fail_msg("iter %d record %zu: %d (%s)", iter, i, rc, dpp_strerror(rc));
                assert_int_equal(off, idx.offsets[i]);
                assert_int_equal(dpp_reader_stuck(r), 0);
            }
            const uint8_t *p;
            size_t len;
            uint64_t off;
            assert_int_equal(dpp_reader_next(r, &p, &len, &off), 0);
            assert_int_equal(off, end);
        }
        dpp_reader_free(r);
        dpp_tfindex_close(&idx);
        image_free(&im);
    }
}

static void test_too_big(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    image_add(&im, 10);
    image_add_len(&im, 1ull << 63, 0); /* valid length CRC, absurd length */
    path_in(path, sizeof path, tmpdir, "huge.tfrecord");
    write_file(path, im.data, im.len);
    for (size_t c = 0; c < NCONFIGS; c++)
        check_range(&configs[c], path, &im, 0, UINT64_MAX, 0, 1, DPP_ETOOBIG, im.off[1]);

    /* Just over a configured maximum, while the record itself is whole. */
    image_t im2 = {0};
    image_add(&im2, 1000);
    image_add(&im2, 1001);
    write_file(path, im2.data, im2.len);
    dpp_reader_config_t small = {.max_record = 1000, .chunk_bytes = 100};
    check_range(&small, path, &im2, 0, UINT64_MAX, 0, 1, DPP_ETOOBIG, im2.off[1]);
    small.max_record = 1001;
    check_all(&small, path, &im2);
    image_free(&im);
    image_free(&im2);
}

/* One reader, many files: ranges abandoned with reads in flight, files
 * replaced by the next open. */
static void test_reuse_across_files(void **state)
{
    image_t a = {0}, b = {0};
    char pa[PATH_MAX], pb[PATH_MAX];
    (void)state;
    image_standard(&a, 50);
    image_standard(&b, 13);
    image_add(&b, 70000);
    path_in(pa, sizeof pa, tmpdir, "a.tfrecord");
    path_in(pb, sizeof pb, tmpdir, "b.tfrecord");
    write_file(pa, a.data, a.len);
    write_file(pb, b.data, b.len);
    for (size_t c = 0; c < NCONFIGS; c++) {
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, &configs[c]), 0);
        for (int round = 0; round < 3; round++) {
            assert_int_equal(dpp_reader_open(r, pa, 0, UINT64_MAX), 0);
            expect_next(r, 1, 0);
            expect_next(r, 1, a.off[1]);
            assert_int_equal(dpp_reader_open(r, pb, b.off[2], UINT64_MAX), 0);
            for (size_t i = 2; i < b.n; i++) {
                const uint8_t *p;
                size_t len;
                uint64_t off;
                assert_int_equal(dpp_reader_next(r, &p, &len, &off), 1);
                assert_int_equal(off, b.off[i]);
                assert_int_equal(len, b.plen[i]);
                assert_memory_equal(p, b.data + b.off[i] + 12, len);
            }
            expect_next(r, 0, b.len);
            dpp_reader_close(r);
            dpp_reader_close(r); /* twice is fine */
            assert_int_equal(dpp_reader_open(r, pa, a.off[10], a.off[11]), 0);
            expect_next(r, 1, a.off[10]);
        }
        dpp_reader_free(r); /* with a file open */
    }
    image_free(&a);
    image_free(&b);
}

static void test_open_errors(void **state)
{
    char path[PATH_MAX], link[PATH_MAX], fifo[PATH_MAX];
    dpp_reader_t *r;
    const uint8_t *p;
    size_t len;
    uint64_t off;
    (void)state;
    assert_int_equal(dpp_reader_new(&r, NULL), 0);
    assert_int_equal(dpp_reader_next(r, &p, &len, &off), DPP_EINVAL); /* nothing open */
    path_in(path, sizeof path, tmpdir, "missing.tfrecord");
    assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), -ENOENT);
    assert_int_equal(dpp_reader_open(r, tmpdir, 0, UINT64_MAX), -EISDIR);
    path_in(path, sizeof path, tmpdir, "target.tfrecord");
    write_file(path, NULL, 0);
    path_in(link, sizeof link, tmpdir, "link.tfrecord");
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(dpp_reader_open(r, link, 0, UINT64_MAX), -ELOOP);
    path_in(fifo, sizeof fifo, tmpdir, "fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(dpp_reader_open(r, fifo, 0, UINT64_MAX), -EINVAL); /* and no hang */
    assert_int_equal(dpp_reader_open(r, path, 10, 5), DPP_EINVAL);
    assert_int_equal(dpp_reader_next(r, &p, &len, &off), DPP_EINVAL);
    dpp_reader_free(r);
    dpp_reader_free(NULL);

    dpp_reader_config_t bad = {.depth = DPP_READER_MAX_DEPTH + 1};
    assert_int_equal(dpp_reader_new(&r, &bad), DPP_EINVAL);
    assert_null(r);
}

/* The file shrinks while it is read: reads come back short, and the record
 * the file now ends in is truncated. */
static void test_file_shrinks(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    image_standard(&im, 40);
    path_in(path, sizeof path, tmpdir, "shrink.tfrecord");
    static const dpp_reader_config_t cfgs[] = {
        {.chunk_bytes = 64, .depth = 2},
        {.chunk_bytes = 64, .depth = 2, .force_pread = 1},
    };
    for (size_t c = 0; c < 2; c++) {
        write_file(path, im.data, im.len);
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, &cfgs[c]), 0);
        assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), 0);
        uint64_t cut = im.off[20] + 5;
        assert_int_equal(truncate(path, (off_t)cut), 0);
        for (size_t i = 0; i < 20; i++)
            expect_next(r, 1, im.off[i]);
        expect_next(r, DPP_ETRUNCATED, im.off[20]);
        expect_next(r, DPP_ETRUNCATED, im.off[20]);
        dpp_reader_free(r);
    }
    image_free(&im);
}

/* O_DIRECT in several places: where the filesystem refuses it the reader
 * falls back to buffered reads; the records are the same either way. */
static void test_direct_filesystems(void **state)
{
    image_t im = {0};
    char cwd[PATH_MAX];
    (void)state;
    image_standard(&im, 120);
    image_add(&im, 20000);
    const char *dirs[] = {tmpdir, "/dev/shm", getcwd(cwd, sizeof cwd)};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char path[PATH_MAX];
        struct stat st;
        if (dirs[d] == NULL || stat(dirs[d], &st) != 0 || access(dirs[d], W_OK) != 0)
            continue;
        snprintf(path, sizeof path, "%s/.dpp-test-reader-direct-%ld.tfrecord", dirs[d],
                 (long)getpid());
        write_file(path, im.data, im.len);
        static const dpp_reader_config_t dcfg[] = {
            {.direct = 1},
            {.direct = 1, .chunk_bytes = 4096, .depth = 3},
            {.direct = 1, .chunk_bytes = 8192, .depth = 2, .force_pread = 1},
        };
        for (size_t c = 0; c < 3; c++) {
            check_all(&dcfg[c], path, &im);
            /* Unaligned ranges read from the aligned-down start. */
            check_range(&dcfg[c], path, &im, im.off[7], im.off[90], 7, 90, 0, 0);
            check_range(&dcfg[c], path, &im, im.off[101], UINT64_MAX, 101, im.n, 0, 0);
        }
        int probe = open(path, O_RDONLY | O_DIRECT);
        print_message("O_DIRECT in %s: %s\n", dirs[d], probe >= 0 ? "supported" : "refused");
        if (probe >= 0)
            close(probe);
        unlink(path);
    }
    image_free(&im);
}

/* procfs and sysfs refuse O_DIRECT at open (EINVAL): the reader opens the
 * file buffered instead of failing. Their contents are no TFRecord, so only
 * the kind of answer is checked. */
static void test_direct_refused(void **state)
{
    static const char *files[] = {"/proc/version", "/sys/kernel/notes"};
    dpp_reader_config_t cfg = {.direct = 1};
    (void)state;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int probe = open(files[i], O_RDONLY | O_DIRECT);
        if (probe >= 0) {
            close(probe);
            continue;
        }
        if (errno != EINVAL)
            continue; /* missing here */
        for (int pread_only = 0; pread_only < 2; pread_only++) {
            dpp_reader_t *r;
            const uint8_t *p;
            size_t len;
            uint64_t off;
            cfg.force_pread = pread_only;
            assert_int_equal(dpp_reader_new(&r, &cfg), 0);
            assert_int_equal(dpp_reader_open(r, files[i], 0, UINT64_MAX), 0);
            int rc = dpp_reader_next(r, &p, &len, &off);
            assert_true(rc >= 0 || rc == DPP_ECORRUPT || rc == DPP_ETRUNCATED || rc == DPP_ETOOBIG);
            dpp_reader_free(r);
        }
    }
}

/* Random chunk sizes, depths, modes and ranges (fixed seed). */
static void test_random_configs(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    uint64_t rng = 12345;
    (void)state;
    image_standard(&im, 90);
    image_add(&im, 50000);
    image_standard(&im, 10);
    path_in(path, sizeof path, tmpdir, "random.tfrecord");
    write_file(path, im.data, im.len);
    for (int iter = 0; iter < 300; iter++) {
        uint64_t x[5];
        for (int k = 0; k < 5; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            x[k] = rng >> 33;
        }
        dpp_reader_config_t cfg = {
            .chunk_bytes = 1 + (size_t)(x[0] % 9000),
            .depth = 1 + (unsigned)(x[1] % 8),
            .force_pread = (int)(x[2] & 1),
            .direct = (x[2] & 6) == 6,
        };
        size_t i = (size_t)(x[3] % (im.n + 1)), j = (size_t)(x[4] % (im.n + 1));
        if (i > j) {
            size_t t = i;
            i = j;
            j = t;
        }
        check_range(&cfg, path, &im, im.off[i], j == im.n && (x[2] & 8) ? UINT64_MAX : im.off[j], i,
                    j, 0, 0);
    }
    image_free(&im);
}

/* dpp_reader_read_ranges: random sets of ranges of a file, every config
 * (chunk sizes that cut ranges into many pieces, depths that keep several in
 * flight, io_uring and pread), hold exactly the file's bytes (compared with
 * the bytes written); a range past the end is DPP_ETRUNCATED, too many bytes
 * DPP_ETOOBIG, a file open on the reader DPP_EINVAL; the reader still reads
 * records afterwards. */
static void test_read_ranges(void **state)
{
    image_t im = {0};
    char path[PATH_MAX];
    (void)state;
    unsetenv("DPP_FORCE_PREAD");
    image_standard(&im, 200);
    path_in(path, sizeof path, tmpdir, "ranges.bin");
    write_file(path, im.data, im.len);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint64_t x = 12345;
    for (size_t c = 0; c < NCONFIGS; c++) {
        if (configs[c].direct)
            continue; /* the caller's fd decides; these are not direct */
        dpp_reader_config_t cfg = configs[c];
        cfg.max_record = im.len; /* room for every byte of the file at once */
        dpp_reader_t *r;
        assert_int_equal(dpp_reader_new(&r, &cfg), 0);
        for (int round = 0; round < 20; round++) {
            dpp_read_range_t rr[9];
            size_t n = (size_t)(round % 9) + 1, total = 0;
            for (size_t i = 0; i < n; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                uint64_t off = (x >> 33) % im.len;
                size_t len = (size_t)((x >> 13) % (im.len - off + 1));
                if (total + len > im.len)
                    len = im.len - total;
                total += len;
                rr[i] = (dpp_read_range_t){.off = off, .len = len};
            }
            assert_int_equal(dpp_reader_read_ranges(r, fd, rr, n), 0);
            for (size_t i = 0; i < n; i++)
                if (rr[i].len)
                    assert_memory_equal(rr[i].data, im.data + rr[i].off, rr[i].len);
        }
        dpp_read_range_t past = {.off = im.len - 10, .len = 11};
        assert_int_equal(dpp_reader_read_ranges(r, fd, &past, 1), DPP_ETRUNCATED);
        dpp_read_range_t two[2] = {{.off = 0, .len = im.len}, {.off = 0, .len = 17}};
        assert_int_equal(dpp_reader_read_ranges(r, fd, two, 2), DPP_ETOOBIG);
        assert_int_equal(dpp_reader_read_ranges(r, fd, two, 1), 0);
        assert_memory_equal(two[0].data, im.data, im.len);
        check_range(&cfg, path, &im, 0, UINT64_MAX, 0, im.n, 0, 0);
        assert_int_equal(dpp_reader_open(r, path, 0, UINT64_MAX), 0);
        assert_int_equal(dpp_reader_read_ranges(r, fd, two, 1), DPP_EINVAL);
        dpp_reader_close(r);
        dpp_reader_free(r);
    }
    close(fd);
    image_free(&im);
}

static void test_memory_bound(void **state)
{
    (void)state;
    dpp_reader_config_t c = {.chunk_bytes = 1000, .depth = 3, .max_record = 5000};
    assert_int_equal(dpp_reader_memory_bound(&c), 3 * 1000 + 5000 + 16);
    c.direct = 1; /* chunks round up to 4096 */
    assert_int_equal(dpp_reader_memory_bound(&c), 3 * 4096 + 5000 + 16);
    assert_int_equal(dpp_reader_memory_bound(NULL),
                     (size_t)DPP_READER_DEFAULT_DEPTH * DPP_READER_DEFAULT_CHUNK +
                         DPP_READER_DEFAULT_MAX_RECORD + 16);
}

static void test_force_pread_env(void **state)
{
    dpp_reader_t *r;
    (void)state;
    setenv("DPP_FORCE_PREAD", "1", 1);
    assert_int_equal(dpp_reader_new(&r, NULL), 0);
    assert_int_equal(dpp_reader_uses_uring(r), 0);
    dpp_reader_free(r);
    unsetenv("DPP_FORCE_PREAD");
    assert_int_equal(dpp_reader_new(&r, NULL), 0);
    print_message("io_uring: %s\n", dpp_reader_uses_uring(r) ? "yes" : "no (pread fallback)");
    dpp_reader_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_file_every_config),
        cmocka_unit_test(test_uring_matches_pread),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_corrupt_payload_continues),
        cmocka_unit_test(test_corrupt_length_resyncs),
        cmocka_unit_test(test_inserted_byte),
        cmocka_unit_test(test_resync_gives_up),
        cmocka_unit_test(test_scan_and_reader_agree),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_reuse_across_files),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_file_shrinks),
        cmocka_unit_test(test_direct_filesystems),
        cmocka_unit_test(test_direct_refused),
        cmocka_unit_test(test_random_configs),
        cmocka_unit_test(test_memory_bound),
        cmocka_unit_test(test_read_ranges),
        cmocka_unit_test(test_force_pread_env),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
