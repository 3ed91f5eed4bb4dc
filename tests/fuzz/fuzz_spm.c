// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: SentencePiece models (src/text/spm.c). Input byte 0
// chooses: even, the rest is a .model file (a file dpp is given, not
// trusted): refused with a message naming it, or built and used on a fixed
// text of mixed scripts; odd, the rest is text (any bytes, invalid UTF-8
// too) encoded with models built here (Unigram and BPE, byte fallback, a
// user-defined symbol). Every id is one of the model's. Text is also
// encoded a stretch at a time, cut at every place the encoder may cut
// (dpp_spm_scratch_set_stretch 1), and whole (SIZE_MAX): the ids must be
// the same.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "../unit/text/spm_model.h"
#include "fuzz_util.h"
#include "text/spm.h"

static dpp_spm_t *models[2];

static dpp_spm_t *build(int model_type)
{
    static spm_w_t w;
    spm_model(&w, &(spm_opts_t){.model_type = model_type, .byte_fallback = 1});
    char err[512];
    dpp_spm_t *sp;
    if (dpp_spm_new(&sp, "fuzz.model", w.b, w.n, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_spm: the built-in model is refused: %s\n", err);
        abort();
    }
    return sp;
}

static void encode_check(const dpp_spm_t *sp, const uint8_t *text, size_t len, int cuts)
{
    uint32_t *ids = NULL, *whole = NULL;
    size_t n = 0, cap = 0, wn = 0, wcap = 0;
    if (dpp_spm_encode(sp, text, len, &ids, &n, &cap) != 0)
        abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= dpp_spm_size(sp))
            abort();
    if (cuts) {
        dpp_spm_scratch_t *x = dpp_spm_scratch_new(0);
        char err[512];
        FUZZ_CHECK(x != NULL, "scratch");
        dpp_spm_scratch_set_stretch(x, SIZE_MAX);
        FUZZ_CHECK(dpp_spm_encode_scratch(sp, x, text, len, &whole, &wn, &wcap, err, sizeof err) ==
                       0,
                   "whole: %s", err);
        dpp_spm_scratch_set_stretch(x, 1);
        n = 0;
        FUZZ_CHECK(dpp_spm_encode_scratch(sp, x, text, len, &ids, &n, &cap, err, sizeof err) == 0,
                   "cut: %s", err);
        FUZZ_CHECK(n == wn && (n == 0 || memcmp(ids, whole, n * sizeof *ids) == 0),
                   "cut at every place: %zu ids, whole: %zu (or other ids)", n, wn);
        dpp_spm_scratch_free(x);
    }
    free(ids);
    free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (models[0] == NULL) {
        models[0] = build(1);
        models[1] = build(2);
    }
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        encode_check(models[(data[0] >> 1) & 1], data + 1, size - 1, 1);
        return 0;
    }
    char err[512];
    dpp_spm_t *sp;
    int rc = dpp_spm_new(&sp, "input.model", data + 1, size - 1, err, sizeof err);
    if (rc != 0) {
        if (rc != DPP_ESPEC && rc != -ENOMEM)
            abort();
        if (strncmp(err, "input.model: ", 13) != 0)
            abort();
        return 0;
    }
    static const char text[] = "  The data \xe2\x96\x81 caf\xc3\xa9 \xe6\x95\xb0\xe6\x8d\xae <sep> "
                               "\xf0\x9f\x99\x82\t\tx\xff\xc3";
    encode_check(sp, (const uint8_t *)text, sizeof text - 1, 1);
    dpp_spm_free(sp);
    return 0;
}
