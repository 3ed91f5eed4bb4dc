/* SPDX-License-Identifier: Apache-2.0 */
/* Byte-level BPE, as tiktoken encodes: the text is cut into pieces by a
 * split pattern (PCRE2, JIT-compiled, UTF and Unicode properties), and
 * each piece that is not itself a token is merged pairwise, always the
 * adjacent pair whose concatenation has the lowest rank, until no
 * concatenation is a token. Ranks come from a tiktoken rank file (one
 * "BASE64 RANK" line per token, as cl100k_base.tiktoken and
 * o200k_base.tiktoken ship). ../shared/REFERENCE.md, docs/spec.md#text.
 *
 * Text that is not valid UTF-8 is encoded as if each maximal invalid
 * subsequence were U+FFFD (the WHATWG and Python "replace" rule), so the
 * ids equal a reference tokenizer's for the text a UTF-8 decoder makes of
 * the bytes; nothing is dropped (a leading U+FEFF is text). \s and \S in a
 * pattern mean Unicode's White_Space, as in Rust's regex that tiktoken
 * uses (PCRE2's own \s also takes U+180E). Thread-safety: a loaded dpp_bpe_t is read-only; each thread
 * encodes with its own dpp_bpe_scratch_t. */
#ifndef DPP_TEXT_BPE_H
#define DPP_TEXT_BPE_H

#include <stddef.h>
#include <stdint.h>

#define DPP_BPE_MAX_TOKEN 256         /* bytes of one token in a rank file */
#define DPP_BPE_MAX_RANKS (1u << 24)  /* tokens in a rank file */
#define DPP_BPE_MAX_FILE (64u << 20)  /* bytes of a rank file */

typedef struct dpp_bpe dpp_bpe_t;
typedef struct dpp_bpe_scratch dpp_bpe_scratch_t;

/* The split pattern of a named tiktoken encoding ("cl100k_base",
 * "o200k_base"), or NULL for a name it does not know. */
const char *dpp_bpe_pattern(const char *encoding);

/* The special tokens of a named encoding: names[i] has id ids[i], *n of
 * them; 0, or DPP_EINVAL for an unknown encoding. */
int dpp_bpe_specials(const char *encoding, const char *const **names, const uint32_t **ids,
                     size_t *n);

/* Builds a tokenizer from the rank file text buf[0..len) (name is for
 * messages) and the split pattern. Returns 0, DPP_ESPEC with a sentence in
 * err naming the file, line and what was expected (bad base64, a missing
 * or non-numeric rank, a token twice, a rank twice, a token longer than
 * DPP_BPE_MAX_TOKEN, no single-byte token for some byte), DPP_ESPEC for a
 * pattern PCRE2 refuses (its message and offset), or -ENOMEM. */
int dpp_bpe_new(dpp_bpe_t **out, const char *name, const uint8_t *buf, size_t len,
                const char *pattern, char *err, size_t errlen);

/* dpp_bpe_new() from a file (at most DPP_BPE_MAX_FILE bytes); -errno with
 * err naming the path when it cannot be read. */
int dpp_bpe_load(dpp_bpe_t **out, const char *path, const char *pattern, char *err, size_t errlen);
void dpp_bpe_free(dpp_bpe_t *b);

/* A Hugging Face tokenizer.json of a byte-level BPE model (hf.c says what
 * is read and what is refused), from buf[0..len) (name for messages) or
 * from a file. Its split pattern comes from the file. Returns 0, DPP_ESPEC
 * with a sentence naming the file and the part it cannot read, -errno (the
 * file), or -ENOMEM. */
int dpp_bpe_new_hf(dpp_bpe_t **out, const char *name, const uint8_t *buf, size_t len, char *err,
                   size_t errlen);
int dpp_bpe_load_hf(dpp_bpe_t **out, const char *path, char *err, size_t errlen);

/* The id of an added token of a Hugging Face file ("<|endoftext|>"), or -1
 * (also for every tiktoken rank file: dpp_bpe_specials() has those). */
int64_t dpp_bpe_special_id(const dpp_bpe_t *b, const char *name);

/* Tokens in the rank file (the largest rank + 1). */
size_t dpp_bpe_size(const dpp_bpe_t *b);

dpp_bpe_scratch_t *dpp_bpe_scratch_new(const dpp_bpe_t *b);
void dpp_bpe_scratch_free(dpp_bpe_scratch_t *s);

/* Appends the ids of text[0..len) to *ids (grown with realloc; *n ids,
 * room for *cap). Special token names in the text are ordinary text.
 * Returns 0 or -ENOMEM (then *ids still holds what it held, with *n ids). */
int dpp_bpe_encode(const dpp_bpe_t *b, dpp_bpe_scratch_t *s, const uint8_t *text, size_t len,
                   uint32_t **ids, size_t *n, size_t *cap);

#endif
