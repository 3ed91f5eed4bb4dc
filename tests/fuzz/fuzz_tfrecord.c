// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the TFRecord reader (src/format/tfrecord.c) and the
// index builders that scan a file's framing (src/format/tfindex.c). Input:
// one byte picking the record size limit, one picking a record to restart
// from, then the file. The in-memory iterator, the iterator restarted at a
// record boundary (as a worker reads a split), dpp_tfindex_scan() and
// dpp_tfindex_scan_verify() over the same bytes written to a file must agree
// on every record boundary and on where and why reading stops; where the
// iterator stops at a length CRC mismatch, the scans resynchronise
// (tfrecord.h) where a plain search written here finds the next record.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/util.h"
#include "format/tfindex.h"
#include "format/tfrecord.h"
#include "dpp/error.h"
#include "fuzz_util.h"

/* Every record the iterator framed, with whether its payload CRC held, and
 * the framing error that stopped it (0: clean end). */
typedef struct walk {
    uint64_t *off, *size;
    uint8_t *payload_ok;
    size_t n, cap;
    int err;
    uint64_t err_off;
} walk_t;

static char file_path[4096];
static int file_fd = -1;

static void remove_file(void)
{
    if (file_path[0])
        unlink(file_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* The scans open the file by path; tmpfs makes that twice as fast. */
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || *dir == '\0')
        dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(file_path, sizeof file_path, "%s/dpp-fuzz-tfrecord-XXXXXX", dir);
    file_fd = mkstemp(file_path);
    FUZZ_CHECK(file_fd >= 0, "mkstemp %s: %s", file_path, strerror(errno));
    atexit(remove_file);
    return 0;
}

static void push(walk_t *w, uint64_t off, uint64_t size, int ok)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->off = realloc(w->off, w->cap * sizeof *w->off);
        w->size = realloc(w->size, w->cap * sizeof *w->size);
        w->payload_ok = realloc(w->payload_ok, w->cap);
        FUZZ_CHECK(w->off && w->size && w->payload_ok, "out of memory");
    }
    w->off[w->n] = off;
    w->size[w->n] = size;
    w->payload_ok[w->n] = (uint8_t)ok;
    w->n++;
}

static void walk_free(walk_t *w)
{
    free(w->off);
    free(w->size);
    free(w->payload_ok);
}

static void iterate(const uint8_t *buf, size_t len, uint64_t base, uint64_t max_record, walk_t *w)
{
    dpp_tfrecord_iter_t it;
    dpp_tfrecord_iter_init(&it, buf, len, base, max_record);
    for (;;) {
        const uint8_t *payload = NULL;
        size_t plen = 0;
        uint64_t err_off = UINT64_MAX;
        size_t before = it.off;
        int rc = dpp_tfrecord_next(&it, &payload, &plen, &err_off);
        if (rc == 1) {
            FUZZ_CHECK(payload == buf + before + 12 && plen <= max_record &&
                           it.off == before + plen + DPP_TFRECORD_OVERHEAD && it.off <= len,
                       "record at %zu: payload %zu bytes, next at %zu of %zu", before, plen,
                       (size_t)it.off, len);
            fuzz_touch(payload, plen);
            push(w, base + before, it.off - before, 1);
            continue;
        }
        if (rc == 0) {
            FUZZ_CHECK(before == len, "clean end at %zu of %zu", before, len);
            w->err = 0;
            return;
        }
        FUZZ_CHECK(rc == DPP_ECORRUPT || rc == DPP_ETRUNCATED || rc == DPP_ETOOBIG, "rc %d", rc);
        FUZZ_CHECK(err_off == base + before, "error at %llu for the record at %llu",
                   (unsigned long long)err_off, (unsigned long long)(base + before));
        if (!it.stuck) { /* payload CRC: the record is framed, reading goes on */
            FUZZ_CHECK(rc == DPP_ECORRUPT && it.off > before && it.off <= len,
                       "non-sticky error %d", rc);
            push(w, base + before, it.off - before, 0);
            continue;
        }
        uint64_t again = UINT64_MAX;
        FUZZ_CHECK(dpp_tfrecord_next(&it, &payload, &plen, &again) == rc && again == err_off,
                   "a framing error does not repeat");
        w->err = rc;
        w->err_off = err_off;
        return;
    }
}

static void write_file(const uint8_t *data, size_t size)
{
    FUZZ_CHECK(ftruncate(file_fd, 0) == 0, "ftruncate: %s", strerror(errno));
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(file_fd, data + done, size - done, (off_t)done);
        FUZZ_CHECK(n > 0, "pwrite: %s", strerror(errno));
        done += (size_t)n;
    }
}

/* Where records resume after the framing broke at `at` (format/tfrecord.h),
 * searched byte by byte over the buffer: UINT64_MAX when nowhere. */
static uint64_t search_resume(const uint8_t *d, size_t len, uint64_t at, uint64_t max_record)
{
    unsigned false_candidates = 0;
    for (uint64_t p = at + 1; p + DPP_TFRECORD_OVERHEAD <= len; p++) {
        if (dpp_crc32c_unmask(dpp_load_le32(d + p + 8)) != dpp_crc32c(0, d + p, 8))
            continue;
        uint64_t l = dpp_load_le64(d + p);
        if (l <= max_record && l <= len - p - DPP_TFRECORD_OVERHEAD &&
            dpp_crc32c_unmask(dpp_load_le32(d + p + 12 + l)) ==
                dpp_crc32c(0, d + p + 12, (size_t)l))
            return p;
        if (++false_candidates == DPP_TFRECORD_RESYNC_CANDIDATES)
            return UINT64_MAX;
    }
    return UINT64_MAX;
}

/* The records a scan indexes: the iterator's, and after each length CRC
 * mismatch the iterator's again from where records resume; *gaps counts
 * the breaks passed, *first the first one. */
static void walk_resync(const uint8_t *d, size_t len, uint64_t max_record, walk_t *w,
                        uint64_t *gaps, uint64_t *first)
{
    uint64_t base = 0;
    *gaps = 0;
    for (;;) {
        walk_t part = {0};
        iterate(d + base, len - (size_t)base, base, max_record, &part);
        for (size_t i = 0; i < part.n; i++)
            push(w, part.off[i], part.size[i], part.payload_ok[i]);
        w->err = part.err;
        w->err_off = part.err_off;
        walk_free(&part);
        if (w->err != DPP_ECORRUPT || len - w->err_off < 12 ||
            dpp_crc32c_unmask(dpp_load_le32(d + w->err_off + 8)) ==
                dpp_crc32c(0, d + w->err_off, 8))
            return; /* clean, or no length CRC mismatch */
        uint64_t next = search_resume(d, len, w->err_off, max_record);
        if (next == UINT64_MAX)
            return;
        if ((*gaps)++ == 0)
            *first = w->err_off;
        base = next;
    }
}

/* Compares a scan with the iterator's records [0, n) and the given stop. */
static void check_scan(const char *what, int rc, const dpp_tfindex_t *idx,
                       const dpp_tfindex_scan_result_t *tail, const char *err, const walk_t *w,
                       size_t n, int stop, uint64_t stop_off)
{
    FUZZ_CHECK(rc == 0, "%s: rc %d (%s)", what, rc, err);
    FUZZ_CHECK(idx->n == n, "%s: %zu records, the iterator %zu", what, idx->n, n);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(idx->offsets[i] == w->off[i] && idx->sizes[i] == w->size[i],
                   "%s: record %zu at %llu+%llu, the iterator's at %llu+%llu", what, i,
                   (unsigned long long)idx->offsets[i], (unsigned long long)idx->sizes[i],
                   (unsigned long long)w->off[i], (unsigned long long)w->size[i]);
    FUZZ_CHECK(tail->error == stop && (stop == 0 || tail->error_offset == stop_off),
               "%s: stops with %d at %llu, the iterator with %d at %llu", what, tail->error,
               (unsigned long long)tail->error_offset, stop, (unsigned long long)stop_off);
    FUZZ_CHECK(memchr(err, '\0', 256) != NULL, "%s: err not NUL-terminated", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint64_t max_record = data[0] == 0 ? UINT64_MAX : (uint64_t)data[0] * 4;
    uint8_t restart = data[1];
    data += 2;
    size -= 2;

    walk_t w = {0};
    iterate(data, size, 0, max_record, &w);

    /* A split starts at a record boundary and knows its file offset. */
    if (w.n > 0) {
        size_t k = restart % w.n;
        walk_t part = {0};
        iterate(data + w.off[k], size - (size_t)w.off[k], w.off[k], max_record, &part);
        FUZZ_CHECK(part.n == w.n - k && part.err == w.err && part.err_off == w.err_off,
                   "restarted at record %zu: %zu records and %d, whole file: %zu and %d", k, part.n,
                   part.err, w.n - k, w.err);
        for (size_t i = 0; i < part.n; i++)
            FUZZ_CHECK(part.off[i] == w.off[k + i] && part.size[i] == w.size[k + i] &&
                           part.payload_ok[i] == w.payload_ok[k + i],
                       "restarted at record %zu: record %zu differs", k, i);
        walk_free(&part);
    }

    write_file(data, size);
    uint64_t scan_max = max_record == UINT64_MAX ? 0 : max_record; /* 0: no limit */
    dpp_tfindex_t idx;
    dpp_tfindex_scan_result_t tail;
    char err[256];
    walk_t rw = {0};
    uint64_t gaps = 0, first_gap = 0;
    walk_resync(data, size, max_record, &rw, &gaps, &first_gap);
    int rc = dpp_tfindex_scan(file_path, scan_max, &idx, &tail, err, sizeof err);
    check_scan("scan", rc, &idx, &tail, err, &rw, rw.n, rw.err, rw.err_off);
    FUZZ_CHECK(tail.gaps == gaps && (gaps == 0 || tail.gap_offset == first_gap),
               "scan: %llu gaps, the search %llu", (unsigned long long)tail.gaps,
               (unsigned long long)gaps);
    dpp_tfindex_close(&idx);

    /* Verifying stops at the first payload CRC mismatch as well (gaps are
     * passed the same way: a candidate's payload is always checked). */
    walk_t vw = {0};
    size_t good = 0;
    for (; good < rw.n && rw.payload_ok[good]; good++)
        push(&vw, rw.off[good], rw.size[good], 1);
    rc = dpp_tfindex_scan_verify(file_path, scan_max, &idx, &tail, err, sizeof err);
    if (good < rw.n)
        check_scan("scan_verify", rc, &idx, &tail, err, &vw, good, DPP_ECORRUPT, rw.off[good]);
    else
        check_scan("scan_verify", rc, &idx, &tail, err, &rw, rw.n, rw.err, rw.err_off);
    dpp_tfindex_close(&idx);
    walk_free(&vw);

    /* Without a tail a stop (a gap too) is the error, and nothing is
     * returned. */
    rc = dpp_tfindex_scan(file_path, scan_max, &idx, NULL, err, sizeof err);
    FUZZ_CHECK(rc == w.err && (rc != 0 || idx.n == w.n) && (rc == 0 || idx.n == 0),
               "scan without tail: rc %d, want %d", rc, w.err);
    dpp_tfindex_close(&idx);
    walk_free(&rw);
    walk_free(&w);
    return 0;
}
