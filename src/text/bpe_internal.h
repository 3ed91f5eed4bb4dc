/* SPDX-License-Identifier: Apache-2.0 */
/* The tokenizer's tables, shared by the loaders: tiktoken rank files
 * (bpe.c) and Hugging Face tokenizer.json (hf.c). Not for callers of
 * bpe.h. */
#ifndef DPP_TEXT_BPE_INTERNAL_H
#define DPP_TEXT_BPE_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif

#include <stddef.h>
#include <stdint.h>

#include <pcre2.h>

#include "text/bpe.h"

#define NO_RANK UINT32_MAX

typedef struct slot {
    uint32_t off; /* into arena; len 0: empty slot */
    uint32_t rank;
    uint16_t len;
} slot_t;

struct dpp_bpe {
    uint8_t *arena;
    size_t arena_len;
    slot_t *slots;
    size_t mask; /* slots: mask + 1, a power of two */
    size_t ntokens;
    uint32_t byte_rank[256]; /* the id of each single byte */
    pcre2_code *re;
    /* Hugging Face models (hf.c) merge by pair: (left id, right id) ->
     * (the merge's line in the merges list, the id it makes); tiktoken's
     * rank files by the rank of the concatenation (the table above) */
    int by_pairs;
    uint64_t *pair_keys; /* left << 32 | right, + 1; 0: empty */
    uint32_t *pair_rank, *pair_result;
    size_t pair_mask;
    int whole_first;  /* a piece that is a token is that one id (tiktoken; HF ignore_merges) */
    int prefix_space; /* HF ByteLevel add_prefix_space: a space before text without one */
    char **special_names; /* HF added tokens (the named encodings: dpp_bpe_specials) */
    uint32_t *special_ids;
    size_t nspecial;
};

/* Room for ntokens tokens of bytes bytes in all (byte_rank all NO_RANK).
 * 0 or -ENOMEM. */
int dpp__bpe_tables(dpp_bpe_t *b, size_t ntokens, size_t bytes);

/* Token tok[0..len) is id (a single byte also becomes byte_rank's); 0, or
 * 1 when those bytes are a token already. */
int dpp__bpe_add_token(dpp_bpe_t *b, const uint8_t *tok, size_t len, uint32_t id);
uint32_t dpp__bpe_lookup(const dpp_bpe_t *b, const uint8_t *tok, size_t len);

/* Merging by pairs, room for n; then (left, right) merge at rank into
 * result: 0, or 1 when the pair was given already. */
int dpp__bpe_pairs(dpp_bpe_t *b, size_t n);
int dpp__bpe_add_pair(dpp_bpe_t *b, uint32_t left, uint32_t right, uint32_t rank, uint32_t result);

/* Compiles the split pattern (\\s as White_Space); DPP_ESPEC with PCRE2's
 * message, or -ENOMEM. */
int dpp__bpe_compile(dpp_bpe_t *b, const char *pattern, char *err, size_t errlen);

/* A tokenizer file's bytes (at most DPP_BPE_MAX_FILE), malloc'd; -errno or
 * DPP_ESPEC with err naming the path. */
int dpp__bpe_read_file(const char *path, uint8_t **out, size_t *len, char *err, size_t errlen);

#endif
