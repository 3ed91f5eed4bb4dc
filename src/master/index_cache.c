/* SPDX-License-Identifier: Apache-2.0 */
/* The master's index cache: file indexes keyed by path, size, mtime and
 * split_rows, filled by index tasks and journal replay, read at submit. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "index_cache.h"
#include "master_internal.h"

static index_entry_t *cache_find(dpp_master_t *m, const char *path, uint64_t size,
                                 int64_t mtime_ns, unsigned split_rows)
{
    for (index_entry_t *e = m->index_cache; e; e = e->next)
        if (e->size == size && e->mtime_ns == mtime_ns && e->split_rows == split_rows &&
            strcmp(e->path, path) == 0)
            return e;
    return NULL;
}

void dpp_master_index_cache_put(dpp_master_t *m, const dpp_file_t *f, unsigned split_rows)
{
    if (f->index_size == 0 ||
        cache_find(m, f->path, f->index_size, f->index_mtime_ns, split_rows))
        return;
    index_entry_t *e = dpp_xcalloc(1, sizeof *e);
    e->path = dpp_xstrdup(f->path);
    e->size = f->index_size;
    e->mtime_ns = f->index_mtime_ns;
    e->split_rows = split_rows;
    e->records = f->records;
    e->nbounds = f->nbounds;
    e->bounds = dpp_xcalloc(f->nbounds ? f->nbounds : 1, sizeof *e->bounds);
    memcpy(e->bounds, f->bounds, f->nbounds * sizeof *e->bounds);
    e->next = m->index_cache;
    m->index_cache = e;
}

size_t dpp_master_index_cache_apply(dpp_master_t *m, dpp_session_t *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        dpp_file_t *f = &s->files[i];
        const index_entry_t *e = cache_find(m, f->path, f->size, f->mtime_ns, s->spec.split_rows);
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
    while (m->index_cache) {
        index_entry_t *e = m->index_cache;
        m->index_cache = e->next;
        free(e->path);
        free(e->bounds);
        free(e);
    }
}
