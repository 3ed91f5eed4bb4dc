/* SPDX-License-Identifier: Apache-2.0 */
/* A SentencePiece ModelProto written field by field, for the tests of
 * src/text/spm.c (unit/text/test_spm.c, fuzz/fuzz_spm.c): <unk>, <s>, the
 * user-defined <sep>, the 256 byte pieces, a few normal pieces, a trainer
 * spec and a normalizer spec, each part switchable to make a bad model. */
#ifndef DPP_TESTS_SPM_MODEL_H
#define DPP_TESTS_SPM_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct spm_w {
    uint8_t b[32768];
    size_t n;
} spm_w_t;

typedef struct spm_opts {
    int model_type;         /* 1 Unigram, 2 BPE, ... */
    int byte_fallback;
    int no_unk;             /* leave <unk> out */
    int no_bytes;           /* leave the byte pieces out */
    int duplicate;          /* "ab" twice */
    int suffix_whitespace;  /* treat_whitespace_as_suffix */
    const char *normalizer; /* its name ("identity" when NULL) */
    const uint8_t *charsmap; /* precompiled_charsmap, charsmap_len bytes */
    size_t charsmap_len;
    const char *extra_piece; /* a normal piece after the others (id 271), score -20 */
} spm_opts_t;

static inline void spm_varint(spm_w_t *w, uint64_t v)
{
    do {
        w->b[w->n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static inline void spm_bytes(spm_w_t *w, uint32_t field, const void *p, size_t n)
{
    spm_varint(w, (uint64_t)field << 3 | 2);
    spm_varint(w, n);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static inline void spm_flag(spm_w_t *w, uint32_t field, uint64_t v)
{
    spm_varint(w, (uint64_t)field << 3);
    spm_varint(w, v);
}

static inline void spm_piece(spm_w_t *w, const char *text, float score, int type)
{
    spm_w_t p = {.n = 0};
    spm_bytes(&p, 1, text, strlen(text));
    uint32_t bits;
    memcpy(&bits, &score, 4);
    spm_varint(&p, 2 << 3 | 5);
    for (int i = 0; i < 4; i++)
        p.b[p.n++] = (uint8_t)(bits >> (8 * i));
    spm_flag(&p, 3, (uint64_t)type);
    spm_bytes(w, 1, p.b, p.n);
}

/* A precompiled charsmap (a Darts double array and its strings) with one
 * rule: the byte `key` becomes rep[0..replen) (no NUL in it). Written into
 * out (cap bytes); returns its length, 0 when it does not fit. Unit 0 is
 * the root (offset 1); the key's unit is at 1 ^ key, with a leaf (offset
 * 1) whose value, at (1 ^ key) ^ 1, is the string's offset 0. */
static inline size_t spm_charsmap_one(uint8_t *out, size_t cap, uint8_t key, const char *rep,
                                      size_t replen)
{
    uint32_t unit[256] = {0};
    size_t node = 1u ^ key, leaf = node ^ 1u, units = (node > leaf ? node : leaf) + 1;
    unit[0] = 1u << 10;
    unit[node] = 1u << 10 | 1u << 8 | key;
    unit[leaf] = 1u << 31; /* a value unit, value 0 */
    size_t n = 4 + 4 * units + replen + 1;
    if (n > cap || key == 0)
        return 0;
    uint32_t tsize = (uint32_t)(4 * units);
    for (int k = 0; k < 4; k++)
        out[k] = (uint8_t)(tsize >> (8 * k));
    for (size_t i = 0; i < units; i++)
        for (int k = 0; k < 4; k++)
            out[4 + 4 * i + (size_t)k] = (uint8_t)(unit[i] >> (8 * k));
    memcpy(out + 4 + 4 * units, rep, replen);
    out[n - 1] = '\0';
    return n;
}

/* Writes the model into w (reset first). */
static inline void spm_model(spm_w_t *w, const spm_opts_t *o)
{
    w->n = 0;
    if (!o->no_unk)
        spm_piece(w, "<unk>", 0, 2);
    spm_piece(w, "<s>", 0, 3);
    spm_piece(w, "<sep>", 0, 4);
    for (int b = 0; b < 256 && !o->no_bytes; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        spm_piece(w, name, 0, 6);
    }
    static const char *const normal[] = {"\xe2\x96\x81", "a", "b", "ab", "\xe2\x96\x81\x61\x62", "the",
                                         "\xe2\x96\x81the", "e", "h", "t", "\xe6\x95\xb0",
                                         "\xef\xbf\xbd"};
    for (size_t i = 0; i < sizeof normal / sizeof normal[0]; i++)
        spm_piece(w, normal[i], -(float)i - 1.5f, 1);
    if (o->duplicate)
        spm_piece(w, "ab", -20, 1);
    if (o->extra_piece)
        spm_piece(w, o->extra_piece, -20, 1);
    spm_w_t t = {.n = 0};
    spm_flag(&t, 3, (uint64_t)(o->model_type ? o->model_type : 1));
    spm_flag(&t, 35, (uint64_t)o->byte_fallback);
    if (o->suffix_whitespace)
        spm_flag(&t, 24, 1);
    spm_bytes(w, 2, t.b, t.n);
    spm_w_t ns = {.n = 0};
    const char *name = o->normalizer ? o->normalizer : "identity";
    spm_bytes(&ns, 1, name, strlen(name));
    if (o->charsmap_len > 0)
        spm_bytes(&ns, 2, o->charsmap, o->charsmap_len);
    spm_bytes(w, 3, ns.b, ns.n);
}

#endif
