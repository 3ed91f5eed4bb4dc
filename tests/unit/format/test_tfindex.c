/* SPDX-License-Identifier: Apache-2.0 */
/* Record index sidecars: strict parsing, scanning files framed by the test's
 * own writer (bitwise CRC32C), and write -> load round trips. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/tfindex.h"
#include "dpp/error.h"
#include "ref_tfrecord.h"
#include "test_tmpdir.h"

static char tmpdir[PATH_MAX];

/* A TFRecord file image: records of the given payload sizes. */
typedef struct image {
    uint8_t *data;
    size_t len;
    size_t n;
    uint64_t off[64], size[64];
} image_t;

static void image_build(image_t *im, const size_t *plens, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += plens[i] + 16;
    memset(im, 0, sizeof *im);
    im->data = malloc(total ? total : 1);
    assert_non_null(im->data);
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = im->data + im->len;
        put_le(p, plens[i], 8);
        put_le(p + 8, ref_mask(ref_crc(p, 8)), 4);
        for (size_t k = 0; k < plens[i]; k++)
            p[12 + k] = (uint8_t)(i + k * 13);
        put_le(p + 12 + plens[i], ref_mask(ref_crc(p + 12, plens[i])), 4);
        im->off[i] = im->len;
        im->size[i] = plens[i] + 16;
        im->len += plens[i] + 16;
    }
    im->n = n;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void tmp_path(char *out, const char *name)
{
    assert_true((size_t)snprintf(out, PATH_MAX, "%s/%s", tmpdir, name) < PATH_MAX);
}

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(tmpdir, "tfindex");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static void parse_ok(const char *text, uint64_t file_size, size_t want_n, dpp_tfindex_t *out)
{
    char err[256] = "x";
    int rc = dpp_tfindex_parse(text, strlen(text), file_size, out, err, sizeof err);
    if (rc != 0)
        fail_msg("parse \"%s\": %d %s", text, rc, err);
    assert_string_equal(err, "");
    assert_int_equal(out->n, want_n);
}

/* Fails with DPP_EINVAL and a message that starts "line N:" and holds want. */
static void parse_bad(const char *text, uint64_t file_size, size_t line, const char *want)
{
    char err[256], prefix[32];
    dpp_tfindex_t idx = {.n = 99};
    int rc = dpp_tfindex_parse(text, strlen(text), file_size, &idx, err, sizeof err);
    if (rc != DPP_EINVAL)
        fail_msg("parse \"%s\": got %d, want DPP_EINVAL", text, rc);
    snprintf(prefix, sizeof prefix, "line %zu: ", line);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || strstr(err, want) == NULL)
        fail_msg("parse \"%s\": message \"%s\", want \"%s...%s\"", text, err, prefix, want);
    assert_int_equal(idx.n, 0);
    assert_null(idx.offsets);
    assert_null(idx.sizes);
}

static void test_parse_good(void **state)
{
    dpp_tfindex_t idx;
    (void)state;
    parse_ok("0 16\n16 100\n116 20\n", 136, 3, &idx);
    assert_int_equal(idx.offsets[0], 0);
    assert_int_equal(idx.offsets[1], 16);
    assert_int_equal(idx.offsets[2], 116);
    assert_int_equal(idx.sizes[0], 16);
    assert_int_equal(idx.sizes[1], 100);
    assert_int_equal(idx.sizes[2], 20);
    dpp_tfindex_close(&idx);
    dpp_tfindex_close(&idx); /* closing an empty one is fine */

    parse_ok("0\t16\r\n16\t100\r\n", 116, 2, &idx); /* tabs and CRLF */
    dpp_tfindex_close(&idx);
    parse_ok("0 16\n16 100", 116, 2, &idx); /* no final newline */
    dpp_tfindex_close(&idx);
    parse_ok("0 16\r\n16 17", UINT64_MAX, 2, &idx); /* size unknown */
    dpp_tfindex_close(&idx);
    parse_ok("", 0, 0, &idx);
    assert_null(idx.offsets);
    dpp_tfindex_close(&idx);
    parse_ok("", UINT64_MAX, 0, &idx);
    dpp_tfindex_close(&idx);
    parse_ok("0 18446744073709551615\n", UINT64_MAX, 1, &idx); /* the largest size */
    assert_int_equal(idx.sizes[0], UINT64_MAX);
    dpp_tfindex_close(&idx);
    parse_ok("00 016\n", 16, 1, &idx); /* leading zeros are still decimal */
    dpp_tfindex_close(&idx);
    assert_int_equal(dpp_tfindex_parse(NULL, 0, 0, &idx, NULL, 0), 0);
}

static void test_parse_bad(void **state)
{
    (void)state;
    parse_bad("x 16\n", 16, 1, "offset is not a decimal number");
    parse_bad("0 16\n16 abc\n", 32, 2, "size is not a decimal number");
    parse_bad("0 16\n-16 16\n", 32, 2, "offset is not a decimal number");
    parse_bad("0 +16\n", 16, 1, "size is not a decimal number");
    parse_bad("0\n", 16, 1, "expected a space or tab");
    parse_bad("0 \n", 16, 1, "size is not a decimal number");
    parse_bad("0 16\n16\n", 32, 2, "expected a space or tab");
    parse_bad("0  16\n", 16, 1, "more than one space or tab");
    parse_bad(" 0 16\n", 16, 1, "offset is not a decimal number");
    parse_bad("0 16 7\n", 16, 1, "a space after the size");
    parse_bad("0 16x\n", 16, 1, "'x' after the size");
    parse_bad("0 16\r16 16\n", 32, 1, "carriage return without a newline");
    parse_bad("0 16\n\n16 16\n", 32, 2, "empty line");
    parse_bad("0 16\n16 16\n\n", 32, 3, "empty line");
    parse_bad("0 15\n", 15, 1, "smaller than a record's framing");
    parse_bad("8 16\n", 24, 1, "first record at offset 8, not 0");
    parse_bad("0 32\n16 16\n", 48, 2, "overlaps the previous one, which ends at 32");
    parse_bad("0 32\n32 16\n32 16\n", 64, 3, "overlaps");
    parse_bad("0 16\n20 16\n", 36, 2, "gap: record at offset 20 but the previous one ends at 16");
    parse_bad("0 16\n16 16\n", 33, 2, "the records end at 32 but the file has 33 bytes");
    parse_bad("0 16\n16 16\n", 31, 2, "the records end at 32 but the file has 31 bytes");
    parse_bad("", 100, 1, "the index is empty but the file has 100 bytes");
    parse_bad("18446744073709551616 16\n", UINT64_MAX, 1, "offset does not fit in 64 bits");
    parse_bad("0 99999999999999999999999\n", UINT64_MAX, 1, "size does not fit in 64 bits");
    parse_bad("0 18446744073709551615\n18446744073709551615 16\n", UINT64_MAX, 2, "ends past 2^64");
    static const char nul[] = "0 16\n16 16\0\n";
    char err[128];
    dpp_tfindex_t idx;
    assert_int_equal(dpp_tfindex_parse(nul, sizeof nul - 1, UINT64_MAX, &idx, err, sizeof err),
                     DPP_EINVAL);
    assert_string_equal(err, "line 2: byte 0x00 after the size (two fields a line)");
    /* A short err buffer still gets a terminated message. */
    char tiny[8];
    assert_int_equal(dpp_tfindex_parse("q", 1, 0, &idx, tiny, sizeof tiny), DPP_EINVAL);
    assert_string_equal(tiny, "line 1:");
}

static void check_index(const dpp_tfindex_t *idx, const image_t *im, size_t n)
{
    assert_int_equal(idx->n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(idx->offsets[i], im->off[i]);
        assert_int_equal(idx->sizes[i], im->size[i]);
    }
}

static const size_t sizes[] = {0, 1, 100, 70000, 5, 300000, 12, 4, 1000, 262144, 0, 33};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void test_scan(void **state)
{
    image_t im;
    char path[PATH_MAX], err[256];
    dpp_tfindex_t idx;
    dpp_tfindex_scan_result_t tail;
    (void)state;
    image_build(&im, sizes, NSIZES);
    tmp_path(path, "scan.tfrecord");
    write_file(path, im.data, im.len);
    assert_int_equal(dpp_tfindex_scan(path, 0, &idx, NULL, err, sizeof err), 0);
    check_index(&idx, &im, NSIZES);
    dpp_tfindex_close(&idx);
    assert_int_equal(dpp_tfindex_scan_verify(path, 1u << 20, &idx, &tail, err, sizeof err), 0);
    assert_int_equal(tail.error, 0);
    check_index(&idx, &im, NSIZES);
    dpp_tfindex_close(&idx);

    write_file(path, "", 0);
    assert_int_equal(dpp_tfindex_scan(path, 0, &idx, NULL, err, sizeof err), 0);
    assert_int_equal(idx.n, 0);
    dpp_tfindex_close(&idx);

    tmp_path(path, "missing.tfrecord");
    assert_int_equal(dpp_tfindex_scan(path, 0, &idx, NULL, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "cannot open"));
    assert_int_equal(dpp_tfindex_scan(tmpdir, 0, &idx, NULL, err, sizeof err), -EISDIR);
    free(im.data);
}

/* Expects the scan of data to stop at record `at` with `want`, both strictly
 * (an error) and with a tail (the records before it). */
static void scan_bad(const uint8_t *data, size_t len, const image_t *im, int verify,
                     uint64_t max_record, int want, size_t at, uint64_t at_off, const char *msg)
{
    char path[PATH_MAX], err[256];
    dpp_tfindex_t idx;
    dpp_tfindex_scan_result_t tail;
    tmp_path(path, "bad.tfrecord");
    write_file(path, data, len);
    int (*scan)(const char *, uint64_t, dpp_tfindex_t *, dpp_tfindex_scan_result_t *, char *,
                size_t) = verify ? dpp_tfindex_scan_verify : dpp_tfindex_scan;
    assert_int_equal(scan(path, max_record, &idx, NULL, err, sizeof err), want);
    assert_int_equal(idx.n, 0);
    assert_string_equal(err, msg);
    assert_int_equal(scan(path, max_record, &idx, &tail, err, sizeof err), 0);
    assert_int_equal(tail.error, want);
    assert_int_equal(tail.error_offset, at_off);
    assert_string_equal(err, msg);
    check_index(&idx, im, at);
    dpp_tfindex_close(&idx);
}

static void test_scan_corrupt_and_truncated(void **state)
{
    image_t im;
    char msg[128];
    (void)state;
    image_build(&im, sizes, NSIZES);
    uint8_t *bad = malloc(im.len);
    assert_non_null(bad);

    /* Length CRC: strictly an error; with a tail a gap that records
     * resume after (the scan finds record 5), of the last record a tail. */
    memcpy(bad, im.data, im.len);
    bad[im.off[4] + 9] ^= 1;
    char path[PATH_MAX], err[256];
    dpp_tfindex_t idx;
    dpp_tfindex_scan_result_t tail;
    tmp_path(path, "gap.tfrecord");
    write_file(path, bad, im.len);
    assert_int_equal(dpp_tfindex_scan(path, 0, &idx, NULL, err, sizeof err), DPP_ECORRUPT);
    snprintf(msg, sizeof msg, "corrupted record at offset %llu", (unsigned long long)im.off[4]);
    assert_string_equal(err, msg);
    for (int verify = 0; verify < 2; verify++) {
        assert_int_equal((verify ? dpp_tfindex_scan_verify : dpp_tfindex_scan)(
                             path, 0, &idx, &tail, err, sizeof err),
                         0);
        assert_int_equal(tail.error, 0);
        assert_int_equal(tail.gaps, 1);
        assert_int_equal(tail.gap_offset, im.off[4]);
        assert_int_equal(tail.gap_resume, im.off[5]);
        assert_int_equal(tail.gap_bytes, im.off[5] - im.off[4]);
        assert_int_equal(idx.n, NSIZES - 1);
        for (size_t i = 0, k = 0; i < NSIZES; i++) {
            if (i == 4)
                continue;
            assert_int_equal(idx.offsets[k], im.off[i]);
            assert_int_equal(idx.sizes[k], im.size[i]);
            k++;
        }
        dpp_tfindex_close(&idx);
    }
    memcpy(bad, im.data, im.len);
    bad[im.off[NSIZES - 1] + 9] ^= 1;
    snprintf(msg, sizeof msg, "corrupted record at offset %llu",
             (unsigned long long)im.off[NSIZES - 1]);
    scan_bad(bad, im.len, &im, 0, 0, DPP_ECORRUPT, NSIZES - 1, im.off[NSIZES - 1], msg);

    /* Payload CRC: only a verifying scan notices. */
    memcpy(bad, im.data, im.len);
    bad[im.off[5] + 12 + 200000] ^= 0x80;
    tmp_path(path, "payload.tfrecord");
    write_file(path, bad, im.len);
    assert_int_equal(dpp_tfindex_scan(path, 0, &idx, NULL, err, sizeof err), 0);
    check_index(&idx, &im, NSIZES);
    dpp_tfindex_close(&idx);
    snprintf(msg, sizeof msg, "corrupted record at offset %llu", (unsigned long long)im.off[5]);
    scan_bad(bad, im.len, &im, 1, 0, DPP_ECORRUPT, 5, im.off[5], msg);

    /* Truncated at every byte of the last records, header and payload. */
    for (size_t cut = im.off[NSIZES - 2] + 1; cut < im.len; cut++) {
        size_t at = cut < im.off[NSIZES - 1] ? NSIZES - 2 : NSIZES - 1;
        if (cut == im.off[NSIZES - 1])
            continue; /* a record boundary: a clean, shorter file */
        snprintf(msg, sizeof msg, "truncated record at offset %llu",
                 (unsigned long long)im.off[at]);
        scan_bad(im.data, cut, &im, cut % 2, 0, DPP_ETRUNCATED, at, im.off[at], msg);
    }

    /* Too big: a limit, and an absurd length with a valid CRC. */
    snprintf(msg, sizeof msg, "record at offset %llu exceeds the size limit",
             (unsigned long long)im.off[3]);
    scan_bad(im.data, im.len, &im, 0, 69999, DPP_ETOOBIG, 3, im.off[3], msg);
    memcpy(bad, im.data, im.len);
    put_le(bad + im.off[2], 1ull << 63, 8);
    put_le(bad + im.off[2] + 8, ref_mask(ref_crc(bad + im.off[2], 8)), 4);
    snprintf(msg, sizeof msg, "record at offset %llu exceeds the size limit",
             (unsigned long long)im.off[2]);
    scan_bad(bad, im.len, &im, 0, 1u << 20, DPP_ETOOBIG, 2, im.off[2], msg);
    /* Without a limit the same length is a truncated record, not a wrap. */
    snprintf(msg, sizeof msg, "truncated record at offset %llu", (unsigned long long)im.off[2]);
    scan_bad(bad, im.len, &im, 0, 0, DPP_ETRUNCATED, 2, im.off[2], msg);
    put_le(bad + im.off[2], UINT64_MAX, 8);
    put_le(bad + im.off[2] + 8, ref_mask(ref_crc(bad + im.off[2], 8)), 4);
    scan_bad(bad, im.len, &im, 1, 0, DPP_ETRUNCATED, 2, im.off[2], msg);
    free(bad);
    free(im.data);
}

static void test_write_load_round_trip(void **state)
{
    image_t im;
    char tf[PATH_MAX], ix[PATH_MAX], err[256];
    dpp_tfindex_t idx, back;
    (void)state;
    image_build(&im, sizes, NSIZES);
    tmp_path(tf, "rt.tfrecord");
    tmp_path(ix, "rt.tfrecord.idx");
    write_file(tf, im.data, im.len);
    assert_int_equal(dpp_tfindex_scan(tf, 0, &idx, NULL, err, sizeof err), 0);
    assert_int_equal(dpp_tfindex_write(&idx, ix), 0);
    assert_int_equal(dpp_tfindex_load(ix, im.len, &back, err, sizeof err), 0);
    check_index(&back, &im, NSIZES);
    dpp_tfindex_close(&back);

    /* The text is DALI's: "offset size\n" per record. */
    char want[2048] = "", line[64];
    for (size_t i = 0; i < NSIZES; i++) {
        snprintf(line, sizeof line, "%llu %llu\n", (unsigned long long)im.off[i],
                 (unsigned long long)im.size[i]);
        strcat(want, line);
    }
    FILE *f = fopen(ix, "rb");
    char got[2048];
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    assert_string_equal(got, want);

    /* A wrong file size is refused on load. */
    assert_int_equal(dpp_tfindex_load(ix, im.len + 1, &back, err, sizeof err), DPP_EINVAL);
    assert_non_null(strstr(err, "but the file has"));

    /* Overwrites atomically, leaves no temporary behind. */
    dpp_tfindex_t one = {.offsets = (uint64_t[]){0}, .sizes = (uint64_t[]){16}, .n = 1};
    assert_int_equal(dpp_tfindex_write(&one, ix), 0);
    assert_int_equal(dpp_tfindex_load(ix, 16, &back, err, sizeof err), 0);
    assert_int_equal(back.n, 1);
    dpp_tfindex_close(&back);
    dpp_tfindex_t empty = {0};
    assert_int_equal(dpp_tfindex_write(&empty, ix), 0);
    assert_int_equal(dpp_tfindex_load(ix, 0, &back, err, sizeof err), 0);
    assert_int_equal(back.n, 0);
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | grep -c tmp) -eq 0", tmpdir);
    assert_int_equal(system(cmd), 0);

    /* Not contiguous: refused before anything is written. */
    dpp_tfindex_t gap = {.offsets = (uint64_t[]){0, 20}, .sizes = (uint64_t[]){16, 16}, .n = 2};
    assert_int_equal(dpp_tfindex_write(&gap, ix), DPP_EINVAL);
    char nodir[PATH_MAX];
    tmp_path(nodir, "no/such/dir.idx");
    assert_int_equal(dpp_tfindex_write(&one, nodir), -ENOENT);

    /* Load errors. */
    tmp_path(ix, "missing.idx");
    assert_int_equal(dpp_tfindex_load(ix, 0, &back, err, sizeof err), -ENOENT);
    assert_int_equal(dpp_tfindex_load(tmpdir, 0, &back, err, sizeof err), DPP_EINVAL);
    tmp_path(ix, "bad.idx");
    write_file(ix, "0 16\n16 x\n", 10);
    assert_int_equal(dpp_tfindex_load(ix, UINT64_MAX, &back, err, sizeof err), DPP_EINVAL);
    assert_string_equal(err, "line 2: size is not a decimal number");
    dpp_tfindex_close(&idx);
    free(im.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_corrupt_and_truncated),
        cmocka_unit_test(test_write_load_round_trip),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
