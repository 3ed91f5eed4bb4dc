/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 and HMAC-SHA256 against the NIST and RFC 4231 vectors and against
 * Python's hashlib/hmac on random inputs; constant-time compare, getrandom,
 * and the token file reader on good, short, oversized and non-regular files. */
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

#include "crypto/hmac.h"
#include "crypto/token.h"
#include "dpp/error.h"
#include "test_tmpdir.h"

#ifndef PYTHON /* overridable to exercise the skip */
#define PYTHON "/usr/bin/python3"
#endif

static char tmpdir[PATH_MAX];
static uint64_t rng_state = 0x5eed0f4a11;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t from_hex(const char *hex, uint8_t *out)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

static void to_hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", p[i]);
    out[2 * n] = '\0';
}

static void assert_digest(const uint8_t *got, const char *want_hex)
{
    char hex[2 * DPP_SHA256_LEN + 1];
    to_hex(got, strlen(want_hex) / 2, hex);
    assert_string_equal(hex, want_hex);
}

static void tmp_path(char *out, const char *name)
{
    assert_true((size_t)snprintf(out, PATH_MAX, "%s/%s", tmpdir, name) < PATH_MAX);
}

static void write_file(const char *path, const void *data, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    /* fchmod, not the open mode: the umask must not decide the test. */
    assert_int_equal(fchmod(fd, mode), 0);
    assert_int_equal(close(fd), 0);
}

static void write_str(const char *path, const char *text, mode_t mode)
{
    write_file(path, text, strlen(text), mode);
}

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(tmpdir, "hmac");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

/* ---- SHA-256 -------------------------------------------------------------- */

static void test_sha256_nist(void **state)
{
    (void)state;
    uint8_t out[DPP_SHA256_LEN];

    /* FIPS 180-2 appendix B.1 and B.2, and the empty message. */
    dpp_sha256("abc", 3, out);
    assert_digest(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    dpp_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, out);
    assert_digest(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    dpp_sha256(NULL, 0, out);
    assert_digest(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* NIST's 896-bit example (two full blocks of input). */
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    dpp_sha256(m896, strlen(m896), out);
    assert_digest(out, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

    /* Either side of the padding boundary (the length must fit after 0x80 in
     * the last block), so it is checked even without Python. Digests of n
     * 'a's from Python's hashlib. */
    static const struct {
        size_t n;
        const char *sha;
    } pad_edges[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
    };
    char a[120];
    memset(a, 'a', sizeof a);
    for (size_t i = 0; i < sizeof pad_edges / sizeof pad_edges[0]; i++) {
        dpp_sha256(a, pad_edges[i].n, out);
        assert_digest(out, pad_edges[i].sha);
    }
}

static void test_sha256_million_a(void **state)
{
    (void)state;
    const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    uint8_t out[DPP_SHA256_LEN];
    size_t n = 1000000;
    char *a = malloc(n);
    assert_non_null(a);
    memset(a, 'a', n);

    /* FIPS 180-2 appendix B.3 */
    assert_int_equal(dpp_sha256(a, n, out), 0);
    assert_digest(out, want);
    free(a);
}

static void test_hmac_rfc4231(void **state)
{
    (void)state;
    static const char *long_data =
        "This is a test using a larger than block-size key and a larger than block-size data. "
        "The key needs to be hashed before being used by the HMAC algorithm.";
    struct {
        uint8_t key_byte; /* key is key_len copies of it ... */
        size_t key_len;
        const char *key_hex; /* ... unless this is set */
        const char *data;
        size_t data_len;
        const char *mac; /* hex; case 5 keeps only the first 128 bits */
    } cases[] = {
        {0x0b, 20, NULL, "Hi There", 8,
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {0, 4, "4a656665", "what do ya want for nothing?", 28,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {0xaa, 20, NULL,
         "\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd"
         "\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd"
         "\xdd\xdd\xdd\xdd\xdd\xdd",
         50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {0, 25, "0102030405060708090a0b0c0d0e0f10111213141516171819",
         "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd"
         "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd"
         "\xcd\xcd\xcd\xcd\xcd\xcd",
         50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {0x0c, 20, NULL, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b"},
        {0xaa, 131, NULL, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {0xaa, 131, NULL, long_data, 152,
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t key[131], out[DPP_SHA256_LEN];
        if (cases[c].key_hex != NULL)
            assert_int_equal(from_hex(cases[c].key_hex, key), cases[c].key_len);
        else
            memset(key, cases[c].key_byte, cases[c].key_len);
        assert_int_equal(strlen(cases[c].data), cases[c].data_len);
        dpp_hmac_sha256(key, cases[c].key_len, cases[c].data, cases[c].data_len, out);
        char hex[2 * DPP_SHA256_LEN + 1];
        to_hex(out, strlen(cases[c].mac) / 2, hex); /* case 5: 16 bytes */
        if (strcmp(hex, cases[c].mac) != 0)
            fail_msg("RFC 4231 case %zu: got %s, want %s", c + 1, hex, cases[c].mac);
    }
    assert_int_equal(strlen(cases[4].mac), 32); /* case 5 is checked on 16 bytes */
}

static void test_hmac_key_edges(void **state)
{
    (void)state;
    uint8_t key[130], a[DPP_SHA256_LEN], b[DPP_SHA256_LEN];

    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i + 1);
    /* A key longer than the block is replaced by its hash (RFC 2104 2). */
    uint8_t hashed[DPP_SHA256_LEN];
    dpp_sha256(key, 65, hashed);
    dpp_hmac_sha256(key, 65, "m", 1, a);
    dpp_hmac_sha256(hashed, sizeof hashed, "m", 1, b);
    assert_memory_equal(a, b, sizeof a);
    /* A block-sized key is used as is, so it differs from its hash. */
    dpp_sha256(key, 64, hashed);
    dpp_hmac_sha256(key, 64, "m", 1, a);
    dpp_hmac_sha256(hashed, sizeof hashed, "m", 1, b);
    assert_memory_not_equal(a, b, sizeof a);
    /* Zero padding: a short key equals itself padded with zero bytes. */
    uint8_t padded[64] = {1, 2, 3};
    dpp_hmac_sha256(key, 3, "m", 1, a);
    dpp_hmac_sha256(padded, sizeof padded, "m", 1, b);
    assert_memory_equal(a, b, sizeof a);
    /* Empty key and message: Python's hmac.new(b"", b"", sha256). */
    dpp_hmac_sha256(NULL, 0, NULL, 0, a);
    assert_digest(a, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

/* Random (key, message) pairs, and the padding boundary lengths, against
 * Python's hashlib and hmac: an implementation written by other people. */
static void test_against_python(void **state)
{
    (void)state;
    if (access(PYTHON, X_OK) != 0) {
        print_message("%s not found: the Python cross-check is skipped (RFC vectors ran)\n",
                      PYTHON);
        skip();
    }
    enum { RANDOM_PAIRS = 200, MAX_LEN = 300 };
    static const size_t edge_lens[] = {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129};
    const size_t nedge = sizeof edge_lens / sizeof edge_lens[0];
    const size_t npairs = RANDOM_PAIRS + nedge * nedge;
    uint8_t(*keys)[MAX_LEN] = malloc(npairs * MAX_LEN);
    uint8_t(*msgs)[MAX_LEN] = malloc(npairs * MAX_LEN);
    size_t *klen = malloc(npairs * sizeof *klen), *mlen = malloc(npairs * sizeof *mlen);
    assert_true(keys && msgs && klen && mlen);

    char in_path[PATH_MAX], hex[2 * MAX_LEN + 1];
    tmp_path(in_path, "python.in");
    FILE *in = fopen(in_path, "w");
    assert_non_null(in);
    for (size_t i = 0; i < npairs; i++) {
        if (i < RANDOM_PAIRS) {
            klen[i] = rng() % (MAX_LEN + 1);
            mlen[i] = rng() % (MAX_LEN + 1);
        } else {
            klen[i] = edge_lens[(i - RANDOM_PAIRS) / nedge];
            mlen[i] = edge_lens[(i - RANDOM_PAIRS) % nedge];
        }
        for (size_t k = 0; k < klen[i]; k++)
            keys[i][k] = (uint8_t)rng();
        for (size_t k = 0; k < mlen[i]; k++)
            msgs[i][k] = (uint8_t)rng();
        to_hex(keys[i], klen[i], hex);
        fprintf(in, "%s,", hex);
        to_hex(msgs[i], mlen[i], hex);
        fprintf(in, "%s\n", hex);
    }
    assert_int_equal(fclose(in), 0);

    /* One interpreter for all pairs; each line out: HMAC, then SHA-256 of
     * the message. */
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd,
             PYTHON " -c 'import sys, hmac, hashlib\n"
                    "for line in sys.stdin:\n"
                    "    k, m = (bytes.fromhex(x) for x in line.strip().split(\",\"))\n"
                    "    sys.stdout.write(hmac.new(k, m, hashlib.sha256).hexdigest() + \" \" +"
                    " hashlib.sha256(m).hexdigest() + \"\\n\")\n"
                    "' < '%s'",
             in_path);
    FILE *py = popen(cmd, "r");
    assert_non_null(py);
    char want_mac[65], want_sha[65];
    size_t checked = 0;
    while (checked < npairs && fscanf(py, "%64s %64s", want_mac, want_sha) == 2) {
        uint8_t out[DPP_SHA256_LEN];
        char got[2 * DPP_SHA256_LEN + 1];
        size_t i = checked++;
        dpp_hmac_sha256(keys[i], klen[i], msgs[i], mlen[i], out);
        to_hex(out, sizeof out, got);
        if (strcmp(got, want_mac) != 0)
            fail_msg("pair %zu (key %zu bytes, message %zu): HMAC %s, Python says %s", i, klen[i],
                     mlen[i], got, want_mac);
        dpp_sha256(msgs[i], mlen[i], out);
        to_hex(out, sizeof out, got);
        if (strcmp(got, want_sha) != 0)
            fail_msg("pair %zu (message %zu bytes): SHA-256 %s, Python says %s", i, mlen[i], got,
                     want_sha);
    }
    /* read to the end before closing: python must never write into a
     * closed pipe (its last bytes may still be on their way) */
    while (fgetc(py) != EOF)
        ;
    assert_int_equal(pclose(py), 0);
    assert_int_equal(checked, npairs);
    print_message("%zu HMAC and SHA-256 results match Python's\n", checked);
    free(keys);
    free(msgs);
    free(klen);
    free(mlen);
}

/* ---- constant-time compare and randomness --------------------------------- */

static void test_ct_equal(void **state)
{
    (void)state;
    uint8_t a[40], b[40];

    for (size_t i = 0; i < sizeof a; i++)
        a[i] = b[i] = (uint8_t)(i * 7);
    assert_int_equal(dpp_ct_equal(a, b, sizeof a), 1);
    assert_int_equal(dpp_ct_equal(a, a, sizeof a), 1);
    assert_int_equal(dpp_ct_equal(a, b, 0), 1);
    assert_int_equal(dpp_ct_equal(NULL, NULL, 0), 1);
    /* Every single-bit difference at every position is seen. */
    for (size_t i = 0; i < sizeof a; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(dpp_ct_equal(a, b, sizeof a), 0);
            assert_int_equal(dpp_ct_equal(a, b, i), 1);
            b[i] ^= (uint8_t)(1u << bit);
        }
    memset(a, 0x00, sizeof a);
    memset(b, 0xff, sizeof b);
    assert_int_equal(dpp_ct_equal(a, b, sizeof a), 0);
}

static void test_random_bytes(void **state)
{
    (void)state;
    uint8_t a[32] = {0}, b[32] = {0}, zero[32] = {0};

    assert_int_equal(dpp_random_bytes(a, sizeof a), 0);
    assert_int_equal(dpp_random_bytes(b, sizeof b), 0);
    /* 2^-256 chances of a false failure. */
    assert_memory_not_equal(a, b, sizeof a);
    assert_memory_not_equal(a, zero, sizeof a);
    assert_int_equal(dpp_random_bytes(NULL, 0), 0);

    /* Above 256 bytes getrandom() may return short; the loop must fill all. */
    size_t n = 1 << 20;
    uint8_t *big = calloc(1, n);
    assert_non_null(big);
    assert_int_equal(dpp_random_bytes(big, n), 0);
    /* The last 4 KiB all zero would mean the tail was never written. */
    uint8_t tail_zero[4096] = {0};
    assert_memory_not_equal(big + n - sizeof tail_zero, tail_zero, sizeof tail_zero);
    free(big);
}

/* ---- token files ---------------------------------------------------------- */

/* Reads path expecting an error: want_rc, the message "PATH: want_msg", and
 * the out-parameters reset. */
static void token_fails(const char *path, int want_rc, const char *want_msg)
{
    uint8_t junk, *token = &junk;
    size_t len = 99;
    int loose = 7;
    char err[PATH_MAX + 128], want[PATH_MAX + 128];

    assert_int_equal(dpp_token_file_read(path, &token, &len, err, sizeof err, &loose), want_rc);
    assert_null(token);
    assert_int_equal(len, 0);
    assert_int_equal(loose, 0);
    snprintf(want, sizeof want, "%s: %s", path, want_msg);
    assert_string_equal(err, want);
}

/* Reads path expecting success with the given token bytes. */
static void token_reads(const char *path, const void *want, size_t want_len, int want_loose)
{
    uint8_t *token = NULL;
    size_t len = 0;
    int loose = 7;
    char err[PATH_MAX + 128] = "x";

    assert_int_equal(dpp_token_file_read(path, &token, &len, err, sizeof err, &loose), 0);
    assert_string_equal(err, "");
    assert_int_equal(len, want_len);
    assert_memory_equal(token, want, want_len);
    assert_int_equal(token[len], '\0');
    assert_int_equal(loose, want_loose);
    free(token);
}

static void test_token_file_good(void **state)
{
    (void)state;
    char path[PATH_MAX];
    const char *tok = "0123456789abcdef0123456789abcdef";

    tmp_path(path, "good");
    write_str(path, "0123456789abcdef0123456789abcdef\n", 0600);
    token_reads(path, tok, 32, 0);
    /* Any run of trailing whitespace goes; leading and inner bytes stay. */
    write_str(path, " 0123456789\tabcdef\r\n \t\v\f\n\n", 0600);
    token_reads(path, " 0123456789\tabcdef", 18, 0);
    /* Binary tokens, with a NUL inside, are bytes like any other. */
    write_file(path, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\xff\xfe\xfd\xfc\xfb\xfa\x80", 16, 0600);
    token_reads(path, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\xff\xfe\xfd\xfc\xfb\xfa\x80", 16, 0);
    /* Exactly the minimum, and no trailing newline at all. */
    write_str(path, "0123456789abcdef", 0600);
    token_reads(path, tok, 16, 0);

    /* The caller may pass no loose_mode and no message buffer. */
    uint8_t *token = NULL;
    size_t len = 0;
    assert_int_equal(dpp_token_file_read(path, &token, &len, NULL, 0, NULL), 0);
    assert_int_equal(len, 16);
    free(token);
    char missing[PATH_MAX];
    tmp_path(missing, "missing");
    assert_int_equal(dpp_token_file_read(missing, &token, &len, NULL, 0, NULL), -ENOENT);
}

static void test_token_file_short(void **state)
{
    (void)state;
    char path[PATH_MAX];
    const char *too_short = "token too short: at least 16 bytes";

    tmp_path(path, "short");
    write_str(path, "0123456789abcde\n", 0600); /* 15 after the newline */
    token_fails(path, DPP_EINVAL, too_short);
    write_str(path, "", 0600);
    token_fails(path, DPP_EINVAL, too_short);
    write_str(path, " \t\r\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n", 0600);
    token_fails(path, DPP_EINVAL, too_short);
}

static void test_token_file_size_limit(void **state)
{
    (void)state;
    char path[PATH_MAX];
    uint8_t *big = malloc(DPP_TOKEN_FILE_MAX + 100);
    assert_non_null(big);
    memset(big, 'k', DPP_TOKEN_FILE_MAX + 100);

    tmp_path(path, "big");
    write_file(path, big, DPP_TOKEN_FILE_MAX, 0600);
    token_reads(path, big, DPP_TOKEN_FILE_MAX, 0);
    big[DPP_TOKEN_FILE_MAX - 1] = '\n';
    write_file(path, big, DPP_TOKEN_FILE_MAX, 0600);
    token_reads(path, big, DPP_TOKEN_FILE_MAX - 1, 0);
    /* The limit is on the file, not on what stripping leaves. */
    big[DPP_TOKEN_FILE_MAX] = '\n';
    write_file(path, big, DPP_TOKEN_FILE_MAX + 1, 0600);
    token_fails(path, DPP_EINVAL, "token file larger than 4096 bytes");
    write_file(path, big, DPP_TOKEN_FILE_MAX + 100, 0600);
    token_fails(path, DPP_EINVAL, "token file larger than 4096 bytes");
    free(big);
}

static void test_token_file_not_regular(void **state)
{
    (void)state;
    char path[PATH_MAX];

    tmp_path(path, "dir");
    assert_int_equal(mkdir(path, 0700), 0);
    token_fails(path, DPP_EINVAL, "not a regular file (a directory)");
    /* Must return at once, not wait for a writer. */
    tmp_path(path, "fifo");
    assert_int_equal(mkfifo(path, 0600), 0);
    token_fails(path, DPP_EINVAL, "not a regular file (a FIFO)");
    token_fails("/dev/null", DPP_EINVAL, "not a regular file (a character device)");
    tmp_path(path, "missing");
    token_fails(path, -ENOENT, strerror(ENOENT));
    tmp_path(path, "missing/token");
    token_fails(path, -ENOENT, strerror(ENOENT));
    tmp_path(path, "good-file");
    write_str(path, "0123456789abcdef\n", 0600);
    char below[PATH_MAX];
    tmp_path(below, "good-file/token");
    token_fails(below, -ENOTDIR, strerror(ENOTDIR));

    if (geteuid() != 0) {
        tmp_path(path, "unreadable");
        write_str(path, "0123456789abcdef\n", 0000);
        token_fails(path, -EACCES, strerror(EACCES));
    } else {
        print_message("running as root: the unreadable-file case is not tested\n");
    }
}

static void test_token_file_symlink(void **state)
{
    (void)state;
    char target[PATH_MAX], link[PATH_MAX];

    /* Accepted (documented in hmac.h): Kubernetes secrets are symlinks. The
     * target's type and mode are what count. */
    tmp_path(target, "sym-target");
    write_str(target, "0123456789abcdefXYZ\n", 0640);
    tmp_path(link, "sym-link");
    assert_int_equal(symlink(target, link), 0);
    token_reads(link, "0123456789abcdefXYZ", 19, 1);
    assert_int_equal(chmod(target, 0600), 0);
    token_reads(link, "0123456789abcdefXYZ", 19, 0);

    tmp_path(link, "sym-dir");
    assert_int_equal(symlink(tmpdir, link), 0);
    token_fails(link, DPP_EINVAL, "not a regular file (a directory)");
    tmp_path(link, "sym-dangling");
    assert_int_equal(symlink("/nonexistent/dpp/token", link), 0);
    token_fails(link, -ENOENT, strerror(ENOENT));
}

static void test_token_file_loose_mode(void **state)
{
    (void)state;
    char path[PATH_MAX];
    const char *tok = "0123456789abcdef";
    static const struct {
        mode_t mode;
        int loose;
    } modes[] = {{0600, 0}, {0400, 0}, {0700, 0}, {0640, 1}, {0604, 1},
                 {0644, 1}, {0620, 1}, {0610, 1}, {0601, 1}, {0666, 1}};

    tmp_path(path, "modes");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        write_file(path, tok, 16, modes[i].mode);
        token_reads(path, tok, 16, modes[i].loose);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_nist),
        cmocka_unit_test(test_sha256_million_a),

        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_hmac_key_edges),
        cmocka_unit_test(test_against_python),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_token_file_good),
        cmocka_unit_test(test_token_file_short),
        cmocka_unit_test(test_token_file_size_limit),
        cmocka_unit_test(test_token_file_not_regular),
        cmocka_unit_test(test_token_file_symlink),
        cmocka_unit_test(test_token_file_loose_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
