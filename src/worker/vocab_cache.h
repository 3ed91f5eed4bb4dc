/* SPDX-License-Identifier: Apache-2.0 */
/* Vocabularies (spec/vocab.h) loaded by this worker, shared by its pipeline
 * threads and kept from split to split: every split of a session uses the
 * same files, and loading one per split would cost more than the split. */
#ifndef DPP_WORKER_VOCAB_CACHE_H
#define DPP_WORKER_VOCAB_CACHE_H

#include <stddef.h>

#include "spec/vocab.h"

/* The vocabulary `file`, relative to root (the data root the session's table
 * is in), loaded or taken from the cache. A file whose size or mtime changed
 * is loaded again. With roots (n > 0) the file's real path must lie under
 * one of them. Returns 0 with *out (give it back with
 * dpp_vocab_cache_put), or an error with a sentence in err naming the file
 * (DPP_EPATH when it resolves outside every root). */
int dpp_vocab_cache_get(const char *root, char *const *roots, size_t nroots, const char *file,
                        const dpp_vocab_t **out, char *err, size_t errlen);
void dpp_vocab_cache_put(const dpp_vocab_t *v);

#endif
