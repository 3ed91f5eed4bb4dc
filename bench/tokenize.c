/* SPDX-License-Identifier: Apache-2.0 */
/* dpp's tokenizer on one core (bench/tokenize.sh runs it beside npm
 * tiktoken on the same documents, bench/sentencepiece.sh beside
 * python3-sentencepiece): bench_tokenize RANKS ENCODING CORPUS [SECONDS],
 * or bench_tokenize MODEL spm CORPUS [SECONDS] for a SentencePiece model. CORPUS as tests/text/tokenize_ids.c reads it (uint32 length,
 * bytes). Encodes every document, again and again for at least SECONDS
 * (default 3), rounds of the whole corpus; prints the median round's MB/s
 * and tokens/s and where the time goes (splitting alone, then merging). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "text/bpe.h"
#include "text/spm.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_tokenize RANKS ENCODING CORPUS [SECONDS]\n");
        return 2;
    }
    double seconds = argc > 4 ? atof(argv[4]) : 3;
    char err[512];
    dpp_bpe_t *b = NULL;
    dpp_spm_t *sp = NULL;
    if (strcmp(argv[2], "spm") == 0) {
        if (dpp_spm_load(&sp, argv[1], err, sizeof err) != 0) {
            fprintf(stderr, "bench_tokenize: %s\n", err);
            return 1;
        }
    } else {
        const char *pattern = dpp_bpe_pattern(argv[2]);
        if (pattern == NULL || dpp_bpe_load(&b, argv[1], pattern, err, sizeof err) != 0) {
            fprintf(stderr, "bench_tokenize: %s\n", pattern ? err : "unknown encoding");
            return 1;
        }
    }
    FILE *f = fopen(argv[3], "rb");
    if (f == NULL) {
        perror(argv[3]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *corpus = malloc(len);
    if (corpus == NULL || fread(corpus, 1, len, f) != len)
        return 1;
    fclose(f);
    dpp_bpe_scratch_t *s = b ? dpp_bpe_scratch_new(b) : NULL;
    /* a worker's scratch: its buffers kept from document to document, its
     * bound the default --max-record-mb's (16 MiB) */
    dpp_spm_scratch_t *x = sp ? dpp_spm_scratch_new(16u << 20) : NULL;
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0, bytes = 0, docs = 0, tokens = 0;
    double times[1000];
    size_t rounds = 0;
    double t_end = bench_now() + seconds;
    while (rounds < 1000 && (rounds < 3 || bench_now() < t_end)) {
        double t0 = bench_now();
        bytes = docs = tokens = 0;
        for (size_t at = 0; at + 4 <= len;) {
            uint32_t dl;
            memcpy(&dl, corpus + at, 4);
            at += 4;
            n = 0;
            if ((sp ? dpp_spm_encode_scratch(sp, x, corpus + at, dl, &ids, &n, &cap, err,
                                             sizeof err)
                    : dpp_bpe_encode(b, s, corpus + at, dl, &ids, &n, &cap)) != 0) {
                fprintf(stderr, "bench_tokenize: document %zu: %s\n", docs, sp ? err : "failed");
                return 1;
            }
            tokens += n;
            bytes += dl;
            docs++;
            at += dl;
        }
        times[rounds++] = bench_now() - t0;
    }
    qsort(times, rounds, sizeof times[0], cmp);
    double med = times[rounds / 2];
    printf("dpp: %.2f MB/s, %.3f M tokens/s on one core (median of %zu rounds; %zu documents, "
           "%zu bytes, %zu tokens)\n",
           (double)bytes / med / 1e6, (double)tokens / med / 1e6, rounds, docs, bytes, tokens);
    free(ids);
    free(corpus);
    dpp_bpe_scratch_free(s);
    dpp_spm_scratch_free(x);
    dpp_bpe_free(b);
    dpp_spm_free(sp);
    return 0;
}
