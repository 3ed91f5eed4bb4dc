/* SPDX-License-Identifier: Apache-2.0 */
/* The master's index cache: file indexes keyed by path, size, mtime and
 * the spec's index key (dpp_spec_index_key), filled by index tasks and
 * journal replay, read at submit. A chained hash table on path and index
 * key, doubled when it holds as many entries as buckets, so that a session
 * of 100,000 files costs 100,000 lookups, not 100,000^2/2 comparisons; a
 * file is stat'ed only when its path has an entry (the listing stats none,
 * and a table seen for the first time should cost no stat per file). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/s3.h"

#include "base/alloc.h"
#include "index_cache.h"
#include "master_internal.h"
#include "spec/vocab.h"

static uint64_t key_hash(const char *path, uint64_t key)
{
    uint64_t h = dpp_string_hash((const uint8_t *)path, strlen(path), 0);
    h ^= key * UINT64_C(0x165667B19E3779F9);
    return h ^ (h >> 29);
}

/* Whether an entry of path and key is there, whatever the file's size. */
static int cache_has_path(dpp_master_t *m, uint64_t h, const char *path, uint64_t key)
{
    if (m->index_cache.nbuckets == 0)
        return 0;
    for (index_entry_t *e = m->index_cache.buckets[h & (m->index_cache.nbuckets - 1)]; e;
         e = e->next)
        if (e->hash == h && e->key == key && strcmp(e->path, path) == 0)
            return 1;
    return 0;
}

static index_entry_t *cache_find(dpp_master_t *m, uint64_t h, const char *path, uint64_t size,
                                 int64_t mtime_ns, uint64_t key)
{
    if (m->index_cache.nbuckets == 0)
        return NULL;
    for (index_entry_t *e = m->index_cache.buckets[h & (m->index_cache.nbuckets - 1)]; e;
         e = e->next)
        if (e->hash == h && e->size == size && e->mtime_ns == mtime_ns && e->key == key &&
            strcmp(e->path, path) == 0)
            return e;
    return NULL;
}

static void grow(dpp_index_cache_t *c)
{
    size_t n = c->nbuckets ? 2 * c->nbuckets : 1024;
    index_entry_t **b = dpp_xcalloc(n, sizeof *b);
    for (size_t i = 0; i < c->nbuckets; i++) {
        while (c->buckets[i]) {
            index_entry_t *e = c->buckets[i];
            c->buckets[i] = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->nbuckets = n;
}

void dpp_master_index_cache_put(dpp_master_t *m, const dpp_file_t *f, uint64_t key)
{
    if (f->index_size == 0)
        return;
    uint64_t h = key_hash(f->path, key);
    if (cache_find(m, h, f->path, f->index_size, f->index_mtime_ns, key))
        return;
    dpp_index_cache_t *c = &m->index_cache;
    if (c->n >= c->nbuckets)
        grow(c);
    index_entry_t *e = dpp_xcalloc(1, sizeof *e);
    e->hash = h;
    e->path = dpp_xstrdup(f->path);
    e->size = f->index_size;
    e->mtime_ns = f->index_mtime_ns;
    e->key = key;
    e->records = f->records;
    e->nbounds = f->nbounds;
    e->bounds = dpp_xcalloc(f->nbounds ? f->nbounds : 1, sizeof *e->bounds);
    memcpy(e->bounds, f->bounds, f->nbounds * sizeof *e->bounds);
    e->next = c->buckets[h & (c->nbuckets - 1)];
    c->buckets[h & (c->nbuckets - 1)] = e;
    c->n++;
}

size_t dpp_master_index_cache_apply(dpp_master_t *m, dpp_session_t *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        uint64_t key = dpp_spec_index_key(dpp_session_file_spec(s, i));
        dpp_file_t *f = &s->files[i];
        uint64_t h = key_hash(f->path, key);
        struct stat st;
        if (!cache_has_path(m, h, f->path, key))
            continue;
        uint64_t size;
        int64_t mtime_ns;
        if (f->etag != NULL) {
            /* an object: the listing's size and ETag are its version */
            size = f->size;
            mtime_ns = dpp_s3_etag_version(f->etag);
        } else {
            if (stat(f->path, &st) != 0)
                continue;
            size = (uint64_t)st.st_size;
            mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        const index_entry_t *e = cache_find(m, h, f->path, size, mtime_ns, key);
        if (e) {
            dpp_session_file_indexed(s, i, e->records, e->bounds, e->nbounds);
            f->index_size = e->size;
            f->index_mtime_ns = e->mtime_ns;
            n++;
        }
    }
    return n;
}

void dpp_master_index_cache_free(dpp_master_t *m)
{
    dpp_index_cache_t *c = &m->index_cache;
    for (size_t i = 0; i < c->nbuckets; i++) {
        while (c->buckets[i]) {
            index_entry_t *e = c->buckets[i];
            c->buckets[i] = e->next;
            free(e->path);
            free(e->bounds);
            free(e);
        }
    }
    free(c->buckets);
    *c = (dpp_index_cache_t){0};
}
