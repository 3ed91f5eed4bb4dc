// SPDX-License-Identifier: Apache-2.0
// The master's journal: round trips, torn tails cut at every byte, flipped
// bits refused or cut, zero-filled tails, huge lengths, compaction, callback
// errors.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/crc32c.h"
#include "dpp/error.h"
#include "master/journal.h"

#define HDR DPP_JOURNAL_HEADER_SIZE

/* ---- fixtures --------------------------------------------------------- */

typedef struct test_rec {
    uint8_t type;
    size_t len;
    uint8_t *data;
} test_rec_t;

static uint64_t next_rand(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* n records of random caller types and lengths 0..max_len. */
static test_rec_t *gen_records(uint64_t seed, size_t n, size_t max_len)
{
    test_rec_t *recs = dpp_xcalloc(n ? n : 1, sizeof *recs);
    for (size_t i = 0; i < n; i++) {
        recs[i].type = (uint8_t)(next_rand(&seed) % DPP_JOURNAL_SNAPSHOT_BEGIN);
        recs[i].len = (size_t)(next_rand(&seed) % (max_len + 1));
        recs[i].data = dpp_xmalloc(recs[i].len ? recs[i].len : 1);
        for (size_t b = 0; b < recs[i].len; b++)
            recs[i].data[b] = (uint8_t)next_rand(&seed);
    }
    return recs;
}

static void free_records(test_rec_t *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(recs[i].data);
    free(recs);
}

static dpp_journal_rec_t *as_journal_recs(const test_rec_t *recs, size_t n)
{
    dpp_journal_rec_t *out = dpp_xcalloc(n ? n : 1, sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = (dpp_journal_rec_t){recs[i].type, recs[i].data, recs[i].len};
    return out;
}

/* Checks every replayed record against the expected one at its index. */
typedef struct collector {
    const test_rec_t *exp;
    size_t nexp;
    size_t got;
    int mismatch;
    size_t fail_at; /* return fail_rc when this many records were seen; 0: never */
    int fail_rc;
} collector_t;

static int collect(void *arg, uint8_t type, const uint8_t *payload, size_t len)
{
    collector_t *c = arg;
    if (c->got >= c->nexp || c->exp[c->got].type != type || c->exp[c->got].len != len ||
        (len > 0 && memcmp(c->exp[c->got].data, payload, len) != 0))
        c->mismatch = 1;
    c->got++;
    if (c->fail_at != 0 && c->got == c->fail_at)
        return c->fail_rc;
    return 0;
}

static collector_t collector(const test_rec_t *exp, size_t nexp)
{
    return (collector_t){.exp = exp, .nexp = nexp};
}

/* Opens the journal in dir, which must replay exactly recs[0..n) in order,
 * closes it and returns the replay's report. */
static dpp_journal_report_t replay_all(const char *dir, const test_rec_t *recs, size_t n)
{
    dpp_journal_t *j;
    dpp_journal_report_t rep;
    collector_t c = collector(recs, n);
    assert_int_equal(dpp_journal_open(&j, dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, n);
    assert_false(c.mismatch);
    dpp_journal_close(j);
    return rep;
}

typedef struct tmpdir {
    char dir[256];
    char journal[300];
    char tmp[300];
} tmpdir_t;

static void make_dir(tmpdir_t *t)
{
    const char *base = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/dpp-journal-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->journal, sizeof t->journal, "%s/journal", t->dir);
    snprintf(t->tmp, sizeof t->tmp, "%s/journal.tmp", t->dir);
}

static void remove_dir(tmpdir_t *t)
{
    unlink(t->journal);
    unlink(t->tmp);
    assert_int_equal(rmdir(t->dir), 0);
}

static uint8_t *read_all(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t *buf = dpp_xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    close(fd);
    *size = got;
    return buf;
}

/* Overwrites the file in place: O_TRUNC would make ext4 flush the data at
 * close (auto_da_alloc), which slows the thousands of images tried here. */
static void write_all(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, buf, len, 0), (ssize_t)len);
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    close(fd);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* Writes recs[0..n) to a new journal in t->dir, alternating single and
 * batched appends, and returns the file's bytes. */
static uint8_t *build(tmpdir_t *t, const test_rec_t *recs, size_t n, size_t *size)
{
    dpp_journal_t *j;
    assert_int_equal(dpp_journal_open(&j, t->dir, NULL, NULL, NULL), 0);
    dpp_journal_rec_t *jr = as_journal_recs(recs, n);
    for (size_t i = 0; i < n;) {
        size_t batch = (i / 3) % 2 ? 3 : 1;
        if (batch > n - i)
            batch = n - i;
        if (batch == 1)
            assert_int_equal(dpp_journal_append(j, jr[i].type, jr[i].payload, jr[i].len), 0);
        else
            assert_int_equal(dpp_journal_append_many(j, jr + i, batch), 0);
        i += batch;
    }
    free(jr);
    dpp_journal_close(j);
    return read_all(t->journal, size);
}

/* Record start offsets of a well-formed file, markers included, by walking
 * the length fields; starts[n] is the file size. Returns the record count. */
static size_t walk(const uint8_t *buf, size_t size, uint64_t *starts, size_t max)
{
    size_t n = 0;
    uint64_t off = 0;
    while (off < size) {
        assert_true(n < max);
        uint32_t len = (uint32_t)buf[off + 4] | (uint32_t)buf[off + 5] << 8 |
                       (uint32_t)buf[off + 6] << 16 | (uint32_t)buf[off + 7] << 24;
        starts[n++] = off;
        off += HDR + len;
    }
    assert_int_equal(off, size);
    starts[n] = off;
    return n;
}

/* ---- tests ------------------------------------------------------------ */

static void test_empty(void **state)
{
    (void)state;
    tmpdir_t t;
    make_dir(&t);
    dpp_journal_t *j;
    dpp_journal_report_t rep;
    collector_t c = collector(NULL, 0);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(rep.records, 0);
    assert_int_equal(rep.truncated, 0);
    assert_int_equal(c.got, 0);
    struct stat st;
    assert_int_equal(stat(t.journal, &st), 0);
    mode_t mask = umask(0);
    umask(mask);
    assert_int_equal(st.st_mode & 0777, 0640 & ~mask);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(dpp_journal_append_many(j, NULL, 0), 0);
    dpp_journal_close(j);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, 0);
    assert_non_null(strstr(rep.text, "clean"));
    dpp_journal_close(j);
    dpp_journal_close(NULL);

    tmpdir_t missing = t;
    strcat(missing.dir, "/nope");
    j = (dpp_journal_t *)&c; /* must be reset to NULL */
    assert_int_equal(dpp_journal_open(&j, missing.dir, NULL, NULL, &rep), -ENOENT);
    assert_null(j);
    remove_dir(&t);
}

static void test_round_trip(void **state)
{
    (void)state;
    enum { N = 120 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(1, N, 64 << 10);
    size_t size;
    uint8_t *bytes = build(&t, recs, N, &size);

    /* The first record, byte by byte. */
    uint32_t crc = dpp_crc32c(0, &recs[0].type, 1);
    crc = dpp_crc32c(crc, recs[0].data, recs[0].len);
    assert_memory_equal(bytes, "DPJ1", 4);
    assert_int_equal(bytes[4] | bytes[5] << 8 | bytes[6] << 16 | (uint32_t)bytes[7] << 24,
                     recs[0].len);
    assert_int_equal(bytes[8] | bytes[9] << 8 | bytes[10] << 16 | (uint32_t)bytes[11] << 24,
                     dpp_crc32c_mask(crc));
    assert_int_equal(bytes[12], recs[0].type);
    assert_memory_equal(bytes + HDR, recs[0].data, recs[0].len);

    uint64_t payload = 0;
    for (size_t i = 0; i < N; i++)
        payload += recs[i].len;
    assert_int_equal(size, N * HDR + payload);

    dpp_journal_t *j;
    dpp_journal_report_t rep;
    collector_t c = collector(recs, N);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, N);
    assert_false(c.mismatch);
    assert_int_equal(rep.records, N);
    assert_int_equal(rep.bytes, size);
    assert_int_equal(rep.torn_bytes, 0);
    assert_int_equal(rep.snapshot, 0);
    dpp_journal_stats_t st;
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.records, N);
    assert_int_equal(st.payload_bytes, payload);
    assert_int_equal(st.file_size, size);
    assert_int_equal(st.snapshot_records, 0);

    /* Reserved types and oversized payloads are refused without writing;
     * the huge length must not make the journal read the payload. */
    uint8_t one = 1;
    assert_int_equal(dpp_journal_append(j, DPP_JOURNAL_SNAPSHOT_BEGIN, &one, 1), DPP_EINVAL);
    assert_int_equal(dpp_journal_append(j, DPP_JOURNAL_SNAPSHOT_END, NULL, 0), DPP_EINVAL);
    assert_int_equal(dpp_journal_append(j, 1, &one, (size_t)DPP_JOURNAL_MAX_PAYLOAD + 1),
                     DPP_ETOOBIG);
    assert_int_equal(dpp_journal_append(j, 1, NULL, 5), DPP_EINVAL);
    dpp_journal_rec_t mixed[2] = {{1, &one, 1}, {DPP_JOURNAL_SNAPSHOT_END, &one, 1}};
    assert_int_equal(dpp_journal_append_many(j, mixed, 2), DPP_EINVAL);
    assert_int_equal(file_size(t.journal), size);
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.records, N);
    assert_int_equal(st.appends, 0);
    dpp_journal_close(j);

    free(bytes);
    free_records(recs, N);
    remove_dir(&t);
}

static void test_append_many(void **state)
{
    (void)state;
    enum { N = 700 }; /* more than one writev batch */
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(2, N, 100);
    dpp_journal_rec_t *jr = as_journal_recs(recs, N);
    dpp_journal_t *j;
    assert_int_equal(dpp_journal_open(&j, t.dir, NULL, NULL, NULL), 0);
    dpp_journal_stats_t before, after;
    dpp_journal_get_stats(j, &before);
    assert_int_equal(dpp_journal_append_many(j, jr, N), 0);
    dpp_journal_get_stats(j, &after);
    assert_int_equal(after.syncs, before.syncs + 1);
    assert_int_equal(after.appends, N);
    assert_int_equal(after.file_size, file_size(t.journal));
    dpp_journal_close(j);

    replay_all(t.dir, recs, N);
    free(jr);
    free_records(recs, N);
    remove_dir(&t);
}

/* Group commit: records written one call at a time stay in the journal's
 * buffer (the file does not grow) until the flush, which writes them all
 * with one write; the sync after it has nothing left to write. A second
 * round is buffered anew, and replay finds every record in order. */
static void test_write_buffers(void **state)
{
    (void)state;
    enum { N = 500 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(3, N, 200);
    dpp_journal_rec_t *jr = as_journal_recs(recs, N);
    dpp_journal_t *j;
    assert_int_equal(dpp_journal_open(&j, t.dir, NULL, NULL, NULL), 0);
    dpp_journal_stats_t st, st0;
    dpp_journal_get_stats(j, &st0);
    for (size_t i = 0; i < N / 2; i++)
        assert_int_equal(dpp_journal_write(j, &jr[i], 1), 0);
    assert_int_equal(file_size(t.journal), 0);
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.writes, 0);
    assert_int_equal(st.records, 0);
    assert_int_equal(dpp_journal_flush(j), 0);
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.writes, 1);
    assert_int_equal(st.records, N / 2);
    assert_int_equal(st.file_size, file_size(t.journal));
    assert_int_equal(dpp_journal_sync(j), 0);
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.writes, 1);
    assert_int_equal(st.syncs, st0.syncs + 1);
    for (size_t i = N / 2; i < N; i++)
        assert_int_equal(dpp_journal_write(j, &jr[i], 1), 0);
    assert_int_equal(file_size(t.journal), st.file_size);
    assert_int_equal(dpp_journal_sync(j), 0);
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.writes, 2);
    assert_int_equal(st.syncs, st0.syncs + 2);
    assert_int_equal(st.file_size, file_size(t.journal));
    dpp_journal_close(j);

    replay_all(t.dir, recs, N);
    free(jr);
    free_records(recs, N);
    remove_dir(&t);
}

/* Cut the file at every byte offset inside its last 3 records: replay gives
 * the records wholly before the cut, the rest is cut off, and the journal
 * appends after it as if nothing happened. */
static void test_torn_every_offset(void **state)
{
    (void)state;
    enum { N = 20 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(3, N + 1, 300);
    const size_t tail_lens[3] = {40, 0, 90};
    for (size_t i = 0; i < 3; i++) {
        test_rec_t *r = &recs[N - 3 + i];
        r->len = tail_lens[i];
        r->data = dpp_xrealloc(r->data, r->len + 1);
        memset(r->data, 0x5a + (int)i, r->len);
    }
    size_t size;
    uint8_t *bytes = build(&t, recs, N, &size);
    uint64_t starts[N + 1];
    assert_int_equal(walk(bytes, size, starts, N), N);

    /* recs[N] is the record appended after the repair. */
    test_rec_t *exp = dpp_xcalloc(N + 1, sizeof *exp);
    for (uint64_t cut = starts[N - 3]; cut < size; cut++) {
        size_t whole = 0;
        while (whole < N && starts[whole + 1] <= cut)
            whole++;
        write_all(t.journal, bytes, cut);

        dpp_journal_t *j;
        dpp_journal_report_t rep;
        collector_t c = collector(recs, N);
        assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
        assert_false(c.mismatch);
        assert_int_equal(c.got, whole);
        assert_int_equal(rep.records, whole);
        assert_int_equal(rep.bytes, starts[whole]);
        assert_int_equal(rep.torn_bytes, cut - starts[whole]);
        assert_int_equal(rep.truncated, cut != starts[whole]);
        if (rep.truncated)
            assert_non_null(strstr(rep.text, "torn"));
        assert_int_equal(file_size(t.journal), starts[whole]);

        assert_int_equal(dpp_journal_append(j, recs[N].type, recs[N].data, recs[N].len), 0);
        dpp_journal_close(j);
        memcpy(exp, recs, whole * sizeof *exp);
        exp[whole] = recs[N];
        c = collector(exp, whole + 1);
        assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
        assert_false(c.mismatch);
        assert_int_equal(c.got, whole + 1);
        assert_int_equal(rep.torn_bytes, 0);
        dpp_journal_close(j);
    }
    free(exp);
    free(bytes);
    free_records(recs, N + 1);
    remove_dir(&t);
}

static void test_zero_tail(void **state)
{
    (void)state;
    enum { N = 10 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(4, N, 200);
    size_t size;
    uint8_t *bytes = build(&t, recs, N, &size);
    uint64_t starts[N + 1];
    walk(bytes, size, starts, N);

    /* 4 KiB of zeros after the last record, then after half of it. */
    uint64_t ends[2] = {size, starts[N - 1] + (starts[N] - starts[N - 1]) / 2};
    for (int k = 0; k < 2; k++) {
        size_t len = (size_t)ends[k] + 4096;
        uint8_t *buf = dpp_xcalloc(1, len);
        memcpy(buf, bytes, (size_t)ends[k]);
        write_all(t.journal, buf, len);
        free(buf);

        size_t whole = k == 0 ? N : N - 1;
        dpp_journal_t *j;
        dpp_journal_report_t rep;
        collector_t c = collector(recs, N);
        assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
        assert_false(c.mismatch);
        assert_int_equal(c.got, whole);
        assert_int_equal(rep.torn_bytes, len - starts[whole]);
        assert_true(rep.truncated);
        if (k == 0)
            assert_non_null(strstr(rep.text, "zero-filled"));
        assert_int_equal(file_size(t.journal), starts[whole]);
        dpp_journal_close(j);
    }
    free(bytes);
    free_records(recs, N);
    remove_dir(&t);
}

/* Opens the damaged image and checks the rule: damage in the last record is
 * a torn tail (prefix replayed, cut); damage anywhere else is refused with
 * its offset, nothing replayed, the file untouched. last_is_caller: the last
 * record of the file is a caller record (not a snapshot marker). */
static void check_damaged(tmpdir_t *t, const uint8_t *img, size_t size, const uint64_t *starts,
                          size_t nfile, size_t k, const test_rec_t *exp, size_t nexp,
                          int last_is_caller)
{
    write_all(t->journal, img, size);
    dpp_journal_t *j = NULL;
    dpp_journal_report_t rep;
    collector_t c = collector(exp, nexp);
    int rc = dpp_journal_open(&j, t->dir, collect, &c, &rep);
    assert_false(c.mismatch);
    if (k == nfile - 1 && last_is_caller) {
        assert_int_equal(rc, 0);
        assert_int_equal(c.got, nexp - 1);
        assert_int_equal(rep.torn_bytes, size - starts[k]);
        assert_true(rep.truncated);
        assert_int_equal(file_size(t->journal), starts[k]);
        dpp_journal_close(j);
        return;
    }
    if (rc != DPP_ECORRUPT)
        fail_msg("damage in record %zu of %zu: open returned %d (%s)", k, nfile, rc, rep.text);
    assert_null(j);
    assert_int_equal(c.got, 0);
    char at[64];
    snprintf(at, sizeof at, "byte offset %" PRIu64, starts[k]);
    if (k == nfile - 1) /* the snapshot's end marker, torn: the snapshot is unfinished */
        assert_non_null(strstr(rep.text, "no end marker"));
    else if (strstr(rep.text, at) == NULL)
        fail_msg("damage in record %zu at %" PRIu64 ": text \"%s\"", k, starts[k], rep.text);
    size_t now;
    uint8_t *after = read_all(t->journal, &now);
    assert_int_equal(now, size);
    assert_memory_equal(after, img, size);
    free(after);
}

/* Flips every bit of a small journal that begins with a snapshot, one at a
 * time (about 3,500 images). */
static void flip_all(tmpdir_t *t, const test_rec_t *exp, size_t nsnap, size_t nexp,
                     int end_with_marker)
{
    dpp_journal_t *j;
    assert_int_equal(dpp_journal_open(&j, t->dir, NULL, NULL, NULL), 0);
    dpp_journal_rec_t *jr = as_journal_recs(exp, nexp);
    assert_int_equal(dpp_journal_append_many(j, jr + nsnap, nexp - nsnap), 0);
    assert_int_equal(dpp_journal_compact(j, jr, nsnap), 0);
    if (!end_with_marker)
        assert_int_equal(dpp_journal_append_many(j, jr + nsnap, nexp - nsnap), 0);
    dpp_journal_close(j);
    free(jr);
    size_t nwant = end_with_marker ? nsnap : nexp;

    size_t size;
    uint8_t *bytes = read_all(t->journal, &size);
    uint64_t starts[64];
    size_t nfile = walk(bytes, size, starts, 63);
    assert_int_equal(nfile, nwant + 2);
    uint8_t *img = dpp_xmalloc(size);
    size_t k = 0;
    for (uint64_t b = 0; b < size; b++) {
        while (starts[k + 1] <= b)
            k++;
        for (int bit = 0; bit < 8; bit++) {
            memcpy(img, bytes, size);
            img[b] ^= (uint8_t)(1u << bit);
            check_damaged(t, img, size, starts, nfile, k, exp, nwant, !end_with_marker);
        }
    }
    free(img);
    free(bytes);
}

static void test_bit_flips(void **state)
{
    (void)state;
    enum { NSNAP = 4, NEXP = 12 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(5, NEXP, 40);
    flip_all(&t, recs, NSNAP, NEXP, 0);
    unlink(t.journal);
    flip_all(&t, recs, NSNAP, NEXP, 1);
    free_records(recs, NEXP);

    /* Big records: a sample of flips in the earlier ones is refused. */
    enum { NBIG = 8 };
    recs = gen_records(6, NBIG, 64 << 10);
    unlink(t.journal);
    size_t size;
    uint8_t *bytes = build(&t, recs, NBIG, &size);
    uint64_t starts[NBIG + 1];
    walk(bytes, size, starts, NBIG);
    uint8_t *img = dpp_xmalloc(size);
    uint64_t seed = 7;
    for (int i = 0; i < 24; i++) {
        uint64_t b = next_rand(&seed) % starts[NBIG - 1];
        size_t k = 0;
        while (starts[k + 1] <= b)
            k++;
        memcpy(img, bytes, size);
        img[b] ^= (uint8_t)(1u << (next_rand(&seed) % 8));
        check_damaged(&t, img, size, starts, NBIG, k, recs, NBIG, 1);
    }
    free(img);
    free(bytes);
    free_records(recs, NBIG);
    remove_dir(&t);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* A length field far over the limit, or at the limit with a short file, is
 * judged from the header alone: the read buffer never grows past one chunk. */
static void test_huge_length(void **state)
{
    (void)state;
    enum { N = 5 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(8, N, 100);
    size_t size;
    uint8_t *bytes = build(&t, recs, N, &size);
    uint64_t starts[N + 1];
    walk(bytes, size, starts, N);

    const uint32_t lens[] = {0xffffffffu, DPP_JOURNAL_MAX_PAYLOAD + 1, DPP_JOURNAL_MAX_PAYLOAD};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        /* As the last thing in the file: a torn tail. */
        uint8_t *img = dpp_xmalloc(size + 64);
        memcpy(img, bytes, size);
        memset(img + size, 0xab, 64);
        memcpy(img + size, "DPJ1", 4);
        put32(img + size + 4, lens[i]);
        write_all(t.journal, img, size + 64);
        dpp_journal_t *j;
        dpp_journal_report_t rep;
        collector_t c = collector(recs, N);
        assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
        assert_int_equal(c.got, N);
        assert_false(c.mismatch);
        assert_int_equal(rep.torn_bytes, 64);
        assert_true(rep.buffer_peak <= (2u << 20));
        dpp_journal_close(j);

        /* In the middle: the second record's length is replaced. */
        memcpy(img, bytes, size);
        put32(img + starts[1] + 4, lens[i]);
        write_all(t.journal, img, size);
        c = collector(recs, N);
        j = NULL;
        assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), DPP_ECORRUPT);
        assert_null(j);
        assert_int_equal(c.got, 0);
        assert_true(rep.buffer_peak <= (2u << 20));
        char at[64];
        snprintf(at, sizeof at, "bad record at byte offset %" PRIu64, starts[1]);
        assert_non_null(strstr(rep.text, at));
        free(img);
    }
    free(bytes);
    free_records(recs, N);
    remove_dir(&t);
}

/* A length over the limit is refused from the header even when the file
 * does hold that many bytes (a sparse file here, so the test writes little). */
static void test_length_over_limit(void **state)
{
    (void)state;
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(12, 2, 100);
    size_t size;
    uint8_t *bytes = build(&t, recs, 2, &size);
    uint64_t starts[3];
    walk(bytes, size, starts, 2);

    for (int followed = 0; followed < 2; followed++) {
        /* recs[0], a header claiming MAX + 1 bytes, that many zero bytes,
         * and maybe recs[1] after them. */
        uint64_t bad = starts[1];
        uint64_t total = bad + HDR + DPP_JOURNAL_MAX_PAYLOAD + 1;
        int fd = open(t.journal, O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_true(fd >= 0);
        uint8_t hdr[HDR] = {'D', 'P', 'J', '1'};
        put32(hdr + 4, DPP_JOURNAL_MAX_PAYLOAD + 1);
        assert_int_equal(pwrite(fd, bytes, bad, 0), (ssize_t)bad);
        assert_int_equal(pwrite(fd, hdr, HDR, (off_t)bad), HDR);
        assert_int_equal(ftruncate(fd, (off_t)total), 0);
        if (followed)
            assert_int_equal(pwrite(fd, bytes + bad, size - bad, (off_t)total),
                             (ssize_t)(size - bad));
        close(fd);

        dpp_journal_t *j = NULL;
        dpp_journal_report_t rep;
        collector_t c = collector(recs, 2);
        int rc = dpp_journal_open(&j, t.dir, collect, &c, &rep);
        assert_true(rep.buffer_peak <= (2u << 20));
        assert_false(c.mismatch);
        if (followed) {
            assert_int_equal(rc, DPP_ECORRUPT);
            assert_int_equal(c.got, 0);
            assert_non_null(strstr(rep.text, "length over the limit"));
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(c.got, 1);
            assert_int_equal(rep.torn_bytes, total - bad);
            assert_int_equal(file_size(t.journal), bad);
            dpp_journal_close(j);
        }
    }
    free(bytes);
    free_records(recs, 2);
    remove_dir(&t);
}

/* The search for a valid record after a bad one must look past magic bytes
 * that start no record, and takes a record image inside a payload for a real
 * one (refusing, the safe way to be wrong). */
static void test_false_magic(void **state)
{
    (void)state;
    enum { N = 4 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(13, N, 0);
    /* recs[1]: a payload with stray magics; recs[3]: a whole record image. */
    recs[1].len = 64;
    recs[1].data = dpp_xrealloc(recs[1].data, 64);
    memset(recs[1].data, 0, 64);
    memcpy(recs[1].data + 5, "DPJ1", 4);
    memcpy(recs[1].data + 30, "DPJ1\x02\x00\x00\x00", 8);
    memcpy(recs[1].data + 60, "DPJ1", 4);
    uint8_t inner[HDR + 3] = {'D', 'P', 'J', '1', 3, 0, 0, 0, 0, 0, 0, 0, 7, 'a', 'b', 'c'};
    put32(inner + 8, dpp_crc32c_mask(dpp_crc32c(0, inner + 12, 4)));
    recs[3].len = sizeof inner + 10;
    recs[3].data = dpp_xrealloc(recs[3].data, recs[3].len);
    memset(recs[3].data, 0xee, recs[3].len);
    memcpy(recs[3].data + 4, inner, sizeof inner);
    size_t size;
    uint8_t *bytes = build(&t, recs, N, &size);
    uint64_t starts[N + 1];
    walk(bytes, size, starts, N);
    uint8_t *img = dpp_xmalloc(size);

    /* recs[1]'s CRC damaged: the stray magics are passed over and recs[2]
     * is found. */
    memcpy(img, bytes, size);
    img[starts[1] + 8] ^= 1;
    check_damaged(&t, img, size, starts, N, 1, recs, N, 1);

    /* recs[1] as a torn last record: still torn despite its magics. */
    write_all(t.journal, bytes, starts[1] + HDR + 40);
    dpp_journal_t *j;
    dpp_journal_report_t rep;
    collector_t c = collector(recs, N);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, 1);
    assert_true(rep.truncated);
    dpp_journal_close(j);

    /* recs[3] torn after its inner image: refused, the file kept. */
    write_all(t.journal, bytes, starts[3] + HDR + 4 + sizeof inner);
    c = collector(recs, N);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), DPP_ECORRUPT);
    assert_int_equal(c.got, 0);
    assert_int_equal(file_size(t.journal), starts[3] + HDR + 4 + sizeof inner);

    free(img);
    free(bytes);
    free_records(recs, N);
    remove_dir(&t);
}

static void test_compaction(void **state)
{
    (void)state;
    enum { NOLD = 30, NSTATE = 5, NLATER = 4 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *old = gen_records(9, NOLD, 500);
    test_rec_t *exp = gen_records(10, NSTATE + NLATER, 500); /* state, then later appends */
    dpp_journal_rec_t *jr = as_journal_recs(exp, NSTATE + NLATER);
    size_t size;
    free(build(&t, old, NOLD, &size));

    dpp_journal_t *j;
    dpp_journal_report_t rep;
    collector_t c = collector(old, NOLD);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, NOLD);
    assert_int_equal(dpp_journal_compact(j, jr, NSTATE), 0);
    assert_int_equal(access(t.tmp, F_OK), -1);
    dpp_journal_stats_t st;
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.records, NSTATE);
    assert_int_equal(st.snapshot_records, NSTATE);
    assert_int_equal(st.compactions, 1);
    assert_int_equal(st.file_size, file_size(t.journal));
    assert_int_equal(st.snapshot_bytes, st.file_size);
    uint64_t snap_bytes = st.snapshot_bytes;
    for (size_t i = NSTATE; i < NSTATE + NLATER; i++)
        assert_int_equal(dpp_journal_append(j, jr[i].type, jr[i].payload, jr[i].len), 0);
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.records, NSTATE + NLATER);
    assert_int_equal(st.snapshot_bytes, snap_bytes);
    assert_int_equal(st.file_size, file_size(t.journal));
    dpp_journal_rec_t marker = {DPP_JOURNAL_SNAPSHOT_BEGIN, NULL, 0};
    assert_int_equal(dpp_journal_compact(j, &marker, 1), DPP_EINVAL);
    dpp_journal_close(j);

    uint8_t *bytes = read_all(t.journal, &size);
    assert_int_equal(bytes[12], DPP_JOURNAL_SNAPSHOT_BEGIN);

    c = collector(exp, NSTATE + NLATER);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, NSTATE + NLATER);
    assert_false(c.mismatch);
    assert_true(rep.snapshot);
    assert_int_equal(rep.snapshot_records, NSTATE);
    assert_int_equal(rep.records, NSTATE + NLATER);
    assert_false(rep.removed_tmp);
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.snapshot_records, NSTATE);
    assert_int_equal(st.snapshot_bytes, snap_bytes);
    dpp_journal_close(j);

    /* A compaction that crashed before its rename left a partial journal.tmp:
     * ignored and deleted. */
    write_all(t.tmp, bytes, snap_bytes / 2);
    c = collector(exp, NSTATE + NLATER);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, NSTATE + NLATER);
    assert_false(c.mismatch);
    assert_true(rep.removed_tmp);
    assert_int_equal(access(t.tmp, F_OK), -1);

    /* Compacting to an empty state, then appending. */
    assert_int_equal(dpp_journal_compact(j, NULL, 0), 0);
    assert_int_equal(dpp_journal_append(j, jr[0].type, jr[0].payload, jr[0].len), 0);
    dpp_journal_close(j);
    c = collector(exp, 1);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, 1);
    assert_false(c.mismatch);
    assert_true(rep.snapshot);
    assert_int_equal(rep.snapshot_records, 0);
    dpp_journal_close(j);

    /* A snapshot without its end marker cannot come from a crash (it is
     * synced before the rename): refused, not cut. */
    uint64_t starts[NSTATE + NLATER + 3];
    size_t nfile = walk(bytes, size, starts, NSTATE + NLATER + 2);
    assert_int_equal(nfile, NSTATE + NLATER + 2);
    for (size_t k = 1; k <= NSTATE + 1; k++) {
        uint64_t cut = starts[k] + (k % 2 ? 0 : 5);
        write_all(t.journal, bytes, cut);
        c = collector(exp, NSTATE);
        j = NULL;
        assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), DPP_ECORRUPT);
        assert_null(j);
        assert_int_equal(c.got, 0);
        assert_non_null(strstr(rep.text, "no end marker"));
        assert_int_equal(file_size(t.journal), cut);
    }
    /* A snapshot marker anywhere but at the start is damage. */
    uint8_t *img = dpp_xmalloc(2 * size);
    memcpy(img, bytes, size);
    memcpy(img + size, bytes, size);
    write_all(t.journal, img, 2 * size);
    assert_int_equal(dpp_journal_open(&j, t.dir, NULL, NULL, &rep), DPP_ECORRUPT);
    assert_non_null(strstr(rep.text, "snapshot begin marker"));
    free(img);

    free(bytes);
    free(jr);
    free_records(old, NOLD);
    free_records(exp, NSTATE + NLATER);
    remove_dir(&t);
}

/* A write that fails halfway (here: over RLIMIT_FSIZE) is cut back off the
 * file, so the journal stays usable and replay sees no damage. */
static void test_write_failure(void **state)
{
    (void)state;
    enum { N = 3 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(14, N, 0);
    recs[1].len = 5000;
    recs[1].data = dpp_xrealloc(recs[1].data, recs[1].len);
    memset(recs[1].data, 0x11, recs[1].len);
    dpp_journal_t *j;
    assert_int_equal(dpp_journal_open(&j, t.dir, NULL, NULL, NULL), 0);
    assert_int_equal(dpp_journal_append(j, recs[0].type, recs[0].data, recs[0].len), 0);
    uint64_t before = file_size(t.journal);

    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < (1u << 20)) {
        dpp_journal_close(j);
        free_records(recs, N);
        remove_dir(&t);
        skip();
    }
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = before + 1000;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = dpp_journal_append(j, recs[1].type, recs[1].data, recs[1].len);
    /* buffered, then flushed: the failed write drops every buffered record */
    dpp_journal_rec_t both[2] = {{recs[2].type, recs[2].data, recs[2].len},
                                 {recs[1].type, recs[1].data, recs[1].len}};
    assert_int_equal(dpp_journal_write(j, both, 2), 0);
    int rc_flush = dpp_journal_flush(j);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, -EFBIG);
    assert_int_equal(rc_flush, -EFBIG);
    assert_int_equal(file_size(t.journal), before);
    assert_int_equal(dpp_journal_sync(j), 0); /* nothing left to write */
    assert_int_equal(file_size(t.journal), before);
    dpp_journal_stats_t st;
    dpp_journal_get_stats(j, &st);
    assert_int_equal(st.records, 1);
    assert_int_equal(st.file_size, before);

    assert_int_equal(dpp_journal_append(j, recs[1].type, recs[1].data, recs[1].len), 0);
    assert_int_equal(dpp_journal_append(j, recs[2].type, recs[2].data, recs[2].len), 0);
    dpp_journal_close(j);
    assert_int_equal(replay_all(t.dir, recs, N).torn_bytes, 0);
    free_records(recs, N);
    remove_dir(&t);
}

static void test_callback_error(void **state)
{
    (void)state;
    enum { N = 10 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(11, N, 50);
    size_t size;
    uint8_t *bytes = build(&t, recs, N, &size);

    /* With a torn tail too: the file must stay as it was. */
    uint8_t *img = dpp_xmalloc(size + 7);
    memcpy(img, bytes, size);
    memcpy(img + size, "DPJ1\x01\x00\x00", 7);
    write_all(t.journal, img, size + 7);

    dpp_journal_t *j = NULL;
    dpp_journal_report_t rep;
    collector_t c = collector(recs, N);
    c.fail_at = 4;
    c.fail_rc = DPP_ESPEC;
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), DPP_ESPEC);
    assert_null(j);
    assert_int_equal(c.got, 4);
    assert_false(c.mismatch);
    assert_non_null(strstr(rep.text, "replay stopped"));
    assert_int_equal(file_size(t.journal), size + 7);

    c = collector(recs, N);
    assert_int_equal(dpp_journal_open(&j, t.dir, collect, &c, &rep), 0);
    assert_int_equal(c.got, N);
    assert_int_equal(rep.torn_bytes, 7);
    assert_int_equal(file_size(t.journal), size);
    dpp_journal_close(j);

    free(img);
    free(bytes);
    free_records(recs, N);
    remove_dir(&t);
}

/* The journal file unlinked or replaced under an open journal: found, and
 * a compaction writes the state where a restart will find it. */
static void test_path_gone(void **state)
{
    (void)state;
    enum { N = 20 };
    tmpdir_t t;
    make_dir(&t);
    test_rec_t *recs = gen_records(3, N, 50);
    dpp_journal_rec_t *jr = as_journal_recs(recs, N);
    dpp_journal_t *j;
    assert_int_equal(dpp_journal_open(&j, t.dir, NULL, NULL, NULL), 0);
    assert_int_equal(dpp_journal_check_path(j), 0);
    assert_int_equal(dpp_journal_append_many(j, jr, N / 2), 0);
    assert_int_equal(unlink(t.journal), 0);
    assert_int_equal(dpp_journal_check_path(j), -ENOENT);
    assert_int_equal(dpp_journal_compact(j, jr, N / 2), 0);
    assert_int_equal(dpp_journal_check_path(j), 0);
    assert_int_equal(dpp_journal_append_many(j, jr + N / 2, N - N / 2), 0);
    /* another file put at the path */
    char moved[sizeof t.journal + 8];
    snprintf(moved, sizeof moved, "%s.old", t.journal);
    assert_int_equal(rename(t.journal, moved), 0);
    FILE *f = fopen(t.journal, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(dpp_journal_check_path(j), -ESTALE);
    assert_int_equal(dpp_journal_compact(j, jr, N), 0);
    assert_int_equal(dpp_journal_check_path(j), 0);
    dpp_journal_close(j);
    assert_int_equal(unlink(moved), 0);

    replay_all(t.dir, recs, N);
    free(jr);
    free_records(recs, N);
    remove_dir(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_append_many),
        cmocka_unit_test(test_write_buffers),
        cmocka_unit_test(test_torn_every_offset),
        cmocka_unit_test(test_zero_tail),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_huge_length),
        cmocka_unit_test(test_length_over_limit),
        cmocka_unit_test(test_false_magic),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_write_failure),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_path_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
