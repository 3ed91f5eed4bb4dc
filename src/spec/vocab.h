/* SPDX-License-Identifier: Apache-2.0 */
/* Vocabulary files of the `vocab` op (docs/spec.md#vocab-sparse): one
 * string per line, the id of a string its line number from 0. Loaded once
 * into an open-addressing table of XXH3 hashes; read-only after, so the
 * pipeline threads share one. */
#ifndef DPP_SPEC_VOCAB_H
#define DPP_SPEC_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#define DPP_VOCAB_MAX_BYTES (1ull << 32) /* file size */
#define DPP_VOCAB_MAX_ENTRIES (1u << 30)

typedef struct dpp_vocab dpp_vocab_t;

/* Loads the vocabulary at path (name: how messages call it). Lines end with
 * '\n' (a last line may lack it; the bytes are taken as they are, '\r'
 * included); an empty line is the empty string. Returns 0 with *out (free
 * with dpp_vocab_free), or -errno / DPP_EINVAL (a line repeated, too large)
 * / -ENOMEM with a sentence in err naming the file and line. */
int dpp_vocab_load(const char *path, const char *name, dpp_vocab_t **out, char *err, size_t errlen);
/* dpp_vocab_load of the bytes buf[0..len) (copied), e.g. an object's. */
int dpp_vocab_new(const uint8_t *buf, size_t len, const char *name, dpp_vocab_t **out, char *err,
                  size_t errlen);
void dpp_vocab_free(dpp_vocab_t *v);

size_t dpp_vocab_size(const dpp_vocab_t *v);

/* The line number of s[0..len), or -1 when the vocabulary lacks it. */
int64_t dpp_vocab_find(const dpp_vocab_t *v, const uint8_t *s, size_t len);

/* The 64-bit hash of strings: XXH3_64bits_withSeed(s, len, (uint64_t)salt)
 * from libxxhash (its output is fixed across versions and platforms). */
uint64_t dpp_string_hash(const uint8_t *s, size_t len, int64_t salt);

#endif
