/* SPDX-License-Identifier: Apache-2.0 */
/* The master's index cache: split boundaries of files already indexed, so a
 * later session on the same unchanged files needs no index task (see
 * index_entry_t in master_internal.h). Loop thread only. */
#ifndef DPP_MASTER_INDEX_CACHE_H
#define DPP_MASTER_INDEX_CACHE_H

#include <stddef.h>

#include "master.h"
#include "session.h"

/* Remembers f's index (copied) under its path, the spec's index key
 * (dpp_spec_index_key: split_rows, and a text session's settings) and the size and
 * mtime the index was computed from (f->index_size, f->index_mtime_ns; the
 * file may have changed since), unless it is known already or index_size is
 * 0 (not reusable). The entry lives until dpp_master_index_cache_free(). */
void dpp_master_index_cache_put(dpp_master_t *m, const dpp_file_t *f, uint64_t key);

/* Marks the files of a new session whose index the master already knows
 * indexed (which may plan the session). Returns how many. */
size_t dpp_master_index_cache_apply(dpp_master_t *m, dpp_session_t *s);

/* Frees every entry. */
void dpp_master_index_cache_free(dpp_master_t *m);

#endif
