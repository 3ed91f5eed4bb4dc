/* SPDX-License-Identifier: Apache-2.0 */
/* Files a session's spec names beside its table (vocabularies, tokenizers),
 * loaded by this worker once, shared by its pipeline threads and kept from
 * split to split: every split of a session uses the same files, and loading
 * one per split would cost more than the split. */
#ifndef DPP_WORKER_FILE_CACHE_H
#define DPP_WORKER_FILE_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* A kind of file: how to load one (from its real path; name, as the spec
 * spells it, for messages; arg, a string that changes what is loaded, e.g.
 * a tokenizer's split pattern, or NULL) and free what load made. The
 * loaded object is read-only while shared. */
typedef struct dpp_file_kind {
    const char *what; /* "vocabulary", "tokenizer": for messages */
    int (*load)(const char *real, const char *name, const char *arg, void **out, char *err,
                size_t errlen);
    void (*unload)(void *obj);
    /* The same from bytes: an object of a store, fetched whole (at most
     * max_bytes of it). */
    int (*load_bytes)(const uint8_t *buf, size_t len, const char *name, const char *arg,
                      void **out, char *err, size_t errlen);
    uint64_t max_bytes;
} dpp_file_kind_t;

/* The file `file`, relative to root (the data root the session's table is
 * in), loaded as `kind` with arg, or taken from the cache. A file whose
 * size or mtime changed is loaded again. Under an s3:// root it is the
 * object root/file: its size and ETag (HEAD) key the cache, and one GET
 * fetches it for load_bytes. pin, when not NULL, is the version the
 * session pinned the file to (the spec's "pins", storage/file_version.h):
 * a local file of another size or mtime is DPP_ECHANGED, naming both
 * versions; an object is not HEADed but got at the pinned ETag (another
 * one is DPP_ECHANGED from the store). With roots (n > 0) the file's real
 * path must lie under one of them. Returns 0 with *out (give it back with
 * dpp_file_cache_put), or an error with a sentence in err naming the file
 * (DPP_EPATH when it resolves outside every root). */
int dpp_file_cache_get(const dpp_file_kind_t *kind, const char *arg, const char *root,
                       char *const *roots, size_t nroots, const char *file, const char *pin,
                       void **out, char *err, size_t errlen);
void dpp_file_cache_put(const void *obj);

#endif
