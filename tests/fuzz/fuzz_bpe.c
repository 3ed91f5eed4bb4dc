// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the tokenizer (src/text/bpe.c, hf.c). Input byte 0
// chooses: 0 mod 4, the rest is a tiktoken rank file, 2 mod 4 a Hugging
// Face tokenizer.json (files dpp is given, not trusted): refused with a
// message naming the file, or loaded and used on a fixed text; odd, the
// rest is text (any bytes, invalid UTF-8 too) encoded
// with a vocabulary built here (256 bytes and merges of "ab", "abab", "  ",
// ...). Every id is a rank of the vocabulary, and the ids' bytes are the
// text as a UTF-8 decoder with replacement makes it.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "fuzz_util.h"
#include "text/bpe.h"

static const char *const merges[] = {"ab", "abab", "  ", "    ", "th", "the", "\xef\xbf", "\xef\xbf\xbd", "e ", "in"};
#define NMERGES (sizeof merges / sizeof merges[0])

static dpp_bpe_t *vocab;
static dpp_bpe_scratch_t *scratch;
static char tokens[256 + NMERGES][8]; /* token bytes, for the check below */
static size_t token_len[256 + NMERGES];

static void b64(const uint8_t *s, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        out[o++] = a[w >> 18 & 63];
        out[o++] = a[w >> 12 & 63];
        out[o++] = i + 1 < n ? a[w >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? a[w & 63] : '=';
    }
    out[o] = '\0';
}

static void init(void)
{
    static char file[8192];
    size_t at = 0;
    for (int i = 0; i < 256; i++) {
        uint8_t c = (uint8_t)(255 - i); /* ranks not in byte order */
        char e[16];
        b64(&c, 1, e);
        at += (size_t)snprintf(file + at, sizeof file - at, "%s %d\n", e, i);
        tokens[i][0] = (char)c;
        token_len[i] = 1;
    }
    for (size_t m = 0; m < NMERGES; m++) {
        char e[32];
        b64((const uint8_t *)merges[m], strlen(merges[m]), e);
        at += (size_t)snprintf(file + at, sizeof file - at, "%s %zu\n", e, 256 + m);
        memcpy(tokens[256 + m], merges[m], strlen(merges[m]));
        token_len[256 + m] = strlen(merges[m]);
    }
    char err[256];
    if (dpp_bpe_new(&vocab, "fuzz", (const uint8_t *)file, at, dpp_bpe_pattern("cl100k_base"), err,
                    sizeof err) != 0) {
        fprintf(stderr, "fuzz_bpe: %s\n", err);
        abort();
    }
    scratch = dpp_bpe_scratch_new(vocab);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (vocab == NULL)
        init();
    if (size == 0)
        return 0;
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if ((data[0] & 1) == 0) {
        dpp_bpe_t *b;
        char err[512];
        int hf = (data[0] & 3) == 2;
        const char *name = hf ? "f.json" : "f.tiktoken";
        int rc = hf ? dpp_bpe_new_hf(&b, name, data + 1, size - 1, err, sizeof err)
                    : dpp_bpe_new(&b, name, data + 1, size - 1, dpp_bpe_pattern("o200k_base"), err,
                                  sizeof err);
        if (rc) {
            FUZZ_CHECK(rc == DPP_ESPEC, "rc %d", rc);
            FUZZ_CHECK(strstr(err, name) != NULL, "message: %s", err);
            return 0;
        }
        dpp_bpe_scratch_t *s = dpp_bpe_scratch_new(b);
        static const char text[] = "Hello, world! 123 naïve 日本 \xff  x";
        FUZZ_CHECK(dpp_bpe_encode(b, s, (const uint8_t *)text, sizeof text - 1, &ids, &n, &cap) == 0,
                   "encode");
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(ids[i] < dpp_bpe_size(b), "id %u of %zu", ids[i], dpp_bpe_size(b));
        dpp_bpe_scratch_free(s);
        dpp_bpe_free(b);
        free(ids);
        return 0;
    }
    FUZZ_CHECK(dpp_bpe_encode(vocab, scratch, data + 1, size - 1, &ids, &n, &cap) == 0, "encode");
    /* the ids spell the text (an invalid byte becomes at most a U+FFFD of
     * 3 bytes); ASCII text exactly */
    size_t out = 0, ascii = 1;
    for (size_t i = 1; i < size; i++)
        ascii &= data[i] < 0x80;
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] < 256 + NMERGES, "id %u", ids[i]);
        FUZZ_CHECK(!ascii || (out + token_len[ids[i]] <= size - 1 &&
                              memcmp(tokens[ids[i]], data + 1 + out, token_len[ids[i]]) == 0),
                   "id %zu (%u) does not spell the text at %zu", i, ids[i], out);
        out += token_len[ids[i]];
    }
    FUZZ_CHECK(ascii ? out == size - 1 : out <= 3 * (size - 1), "%zu bytes from %zu", out,
               size - 1);
    free(ids);
    return 0;
}
