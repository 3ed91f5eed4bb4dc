/* SPDX-License-Identifier: Apache-2.0 */
/* The tokenizer under test, as a filter for the reference checks
 * (tests/text/): tokenize_ids RANKS ENCODING|@PATTERN_FILE CORPUS OUT, or
 * tokenize_ids TOKENIZER_JSON hf CORPUS OUT for a Hugging Face file, or
 * tokenize_ids MODEL spm CORPUS OUT for a SentencePiece model.
 * CORPUS holds documents as a little-endian uint32 length and the bytes
 * (any bytes: invalid UTF-8 too); OUT gets one line per document, its ids
 * separated by spaces. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe.h"
#include "text/spm.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        exit(2);
    }
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: tokenize_ids RANKS ENCODING|@PATTERN_FILE CORPUS OUT\n");
        return 2;
    }
    size_t plen = 0;
    int hf = strcmp(argv[2], "hf") == 0;
    char err[512];
    dpp_spm_t *sp = NULL;
    if (strcmp(argv[2], "spm") == 0 && dpp_spm_load(&sp, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "tokenize_ids: %s\n", err);
        return 1;
    }
    char *pattern_file = argv[2][0] == '@' ? slurp(argv[2] + 1, &plen) : NULL;
    const char *pattern = pattern_file ? pattern_file : dpp_bpe_pattern(argv[2]);
    if (pattern == NULL && !hf && sp == NULL) {
        fprintf(stderr, "tokenize_ids: unknown encoding %s\n", argv[2]);
        return 2;
    }
    dpp_bpe_t *b = NULL;
    if (sp == NULL && (hf ? dpp_bpe_load_hf(&b, argv[1], err, sizeof err)
            : dpp_bpe_load(&b, argv[1], pattern, err, sizeof err)) != 0) {
        fprintf(stderr, "tokenize_ids: %s\n", err);
        return 1;
    }
    dpp_bpe_scratch_t *s = b ? dpp_bpe_scratch_new(b) : NULL;
    size_t len;
    uint8_t *corpus = (uint8_t *)slurp(argv[3], &len);
    FILE *out = fopen(argv[4], "w");
    if ((s == NULL && sp == NULL) || out == NULL) {
        perror(argv[4]);
        return 2;
    }
    uint32_t *ids = NULL;
    size_t n, cap = 0;
    for (size_t at = 0; at + 4 <= len;) {
        uint32_t dl;
        memcpy(&dl, corpus + at, 4);
        at += 4;
        if (dl > len - at) {
            fprintf(stderr, "tokenize_ids: %s: a document runs past the end\n", argv[3]);
            return 2;
        }
        n = 0;
        if ((sp ? dpp_spm_encode(sp, corpus + at, dl, &ids, &n, &cap)
                : dpp_bpe_encode(b, s, corpus + at, dl, &ids, &n, &cap)) != 0) {
            fprintf(stderr, "tokenize_ids: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            fprintf(out, i ? " %u" : "%u", ids[i]);
        fputc('\n', out);
        at += dl;
    }
    fclose(out);
    free(ids);
    free(corpus);
    free(pattern_file);
    dpp_bpe_scratch_free(s);
    dpp_bpe_free(b);
    dpp_spm_free(sp);
    return 0;
}
