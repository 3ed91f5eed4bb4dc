// SPDX-License-Identifier: Apache-2.0
// Per-session file indexes, split planning and split states (see session.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "session.h"

dpp_session_t *dpp_session_new(const char *id, dpp_spec_t *spec, char *table_path, char **files,
                               size_t nfiles)
{
    dpp_session_t *s = dpp_xcalloc(1, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->spec = *spec;
    memset(spec, 0, sizeof *spec);
    s->spec_json = dpp_spec_to_json(&s->spec);
    if (s->spec_json == NULL)
        dpp_oom();
    s->table_path = table_path;
    s->files = dpp_xcalloc(nfiles ? nfiles : 1, sizeof *s->files);
    s->nfiles = nfiles;
    size_t root_len = strlen(table_path);
    for (size_t i = 0; i < nfiles; i++) {
        dpp_file_t *f = &s->files[i];
        f->path = files[i];
        const char *rel = f->path;
        if (strncmp(rel, table_path, root_len) == 0 && rel[root_len] == '/')
            rel += root_len + 1;
        f->rel_path = dpp_xstrdup(rel);
        struct stat st;
        if (stat(f->path, &st) == 0) {
            f->size = (uint64_t)st.st_size;
            f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
    }
    free(files);
    s->state = SESSION_INDEXING;
    s->rank_seen_ms = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_seen_ms);
    return s;
}

void dpp_session_free(dpp_session_t *s)
{
    if (s == NULL)
        return;
    dpp_spec_close(&s->spec);
    free(s->spec_json);
    free(s->table_path);
    for (size_t i = 0; i < s->nfiles; i++) {
        free(s->files[i].path);
        free(s->files[i].rel_path);
        free(s->files[i].bounds);
    }
    free(s->files);
    free(s->splits);
    free(s->error);
    free(s->rank_seen_ms);
    free(s);
}

/* Records of rank r when `total` records are dealt to n ranks: with
 * remainder "drop" every rank gets the same whole number of batches (fewer
 * than n x batch_size records are left out); with "keep" the records are
 * spread as evenly as they go. */
static uint64_t rank_quota(const dpp_session_t *s, uint64_t total, unsigned r)
{
    unsigned n = s->spec.consumers;
    if (s->spec.remainder_keep)
        return total / n + (r < total % n ? 1 : 0);
    uint64_t bs = s->spec.batch_size;
    return total / n / bs * bs;
}

uint64_t dpp_session_rank_records(const dpp_session_t *s, unsigned rank)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->nsplits; i++)
        if (s->splits[i].rank == rank)
            n += s->splits[i].record_count;
    return n;
}

/* Deals the files' index ranges to the ranks in file order: rank 0 takes
 * records until its quota is met, then rank 1, and so on; a range that
 * straddles two quotas becomes two splits (windows of it). Every rank thus
 * gets the same number of batches, whichever files hold how many records. */
static void plan_splits(dpp_session_t *s)
{
    uint64_t total = 0;
    size_t ranges = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        total += s->files[i].records;
        ranges += s->files[i].nbounds ? s->files[i].nbounds - 1 : 0;
    }
    unsigned nr = s->spec.consumers;
    /* at most one extra split per rank boundary */
    s->splits = dpp_xcalloc(ranges + nr + 1, sizeof *s->splits);
    size_t k = 0;
    unsigned rank = 0;
    uint64_t left = rank_quota(s, total, 0);
    for (size_t i = 0; i < s->nfiles && rank < nr; i++) {
        const dpp_file_t *f = &s->files[i];
        for (size_t b = 0; b + 1 < f->nbounds && rank < nr; b++) {
            uint64_t start = (uint64_t)b * s->spec.split_rows;
            uint64_t end = start + s->spec.split_rows;
            uint64_t count = (end < f->records ? end : f->records) - start;
            uint64_t skip = 0;
            while (skip < count && rank < nr) {
                if (left == 0) {
                    if (++rank == nr)
                        break;
                    left = rank_quota(s, total, rank);
                    continue;
                }
                uint64_t take = count - skip < left ? count - skip : left;
                dpp_split_t *sp = &s->splits[k++];
                sp->file = (uint32_t)i;
                sp->rank = rank;
                sp->record_start = start;
                sp->record_skip = skip;
                sp->record_count = take;
                sp->byte_start = f->bounds[b];
                sp->byte_end = f->bounds[b + 1];
                skip += take;
                left -= take;
            }
        }
    }
    s->nsplits = k;
    memset(s->counts, 0, sizeof s->counts);
    s->counts[SPLIT_PENDING] = k;
    s->state = k ? SESSION_RUNNING : SESSION_DONE;
}

int dpp_session_file_indexed(dpp_session_t *s, size_t i, uint64_t records, const uint64_t *bounds,
                             size_t n)
{
    dpp_file_t *f = &s->files[i];
    if (f->indexed || s->state != SESSION_INDEXING)
        return 0;
    f->indexed = 1;
    f->records = records;
    f->bounds = dpp_xcalloc(n ? n : 1, sizeof *f->bounds);
    memcpy(f->bounds, bounds, n * sizeof *bounds);
    f->nbounds = n;
    f->index_lease.lease_id = f->index_lease.worker_id = 0;
    if (++s->files_indexed < s->nfiles)
        return 0;
    plan_splits(s);
    return s->state == SESSION_RUNNING;
}

void dpp_session_set(dpp_session_t *s, size_t i, split_state_t st)
{
    s->counts[s->splits[i].state]--;
    s->counts[st]++;
    s->splits[i].state = st;
    if (st == SPLIT_PENDING)
        s->splits[i].lease.lease_id = s->splits[i].lease.worker_id = 0;
}

size_t dpp_session_rank_splits(const dpp_session_t *s, unsigned rank)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nsplits; i++)
        n += s->splits[i].rank == rank;
    return n;
}

int dpp_session_consumed(dpp_session_t *s, size_t i)
{
    if (s->splits[i].state == SPLIT_CONSUMED)
        return 0;
    dpp_session_set(s, i, SPLIT_CONSUMED);
    if (s->counts[SPLIT_CONSUMED] < s->nsplits)
        return 0;
    if (s->epoch + 1 >= s->spec.epochs) {
        s->state = SESSION_DONE;
        return 0;
    }
    s->epoch++;
    for (size_t j = 0; j < s->nsplits; j++) {
        s->splits[j].prev_lease_id = s->splits[j].lease.lease_id;
        dpp_session_set(s, j, SPLIT_PENDING);
        s->splits[j].rows = 0;
    }
    return 1;
}

size_t dpp_session_release_worker(dpp_session_t *s, uint64_t worker_id)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        dpp_lease_ref_t *l = &s->files[i].index_lease;
        if (!s->files[i].indexed && l->lease_id && l->worker_id == worker_id) {
            l->lease_id = l->worker_id = 0;
            n++;
        }
    }
    for (size_t i = 0; i < s->nsplits; i++) {
        dpp_split_t *sp = &s->splits[i];
        if (sp->lease.worker_id == worker_id &&
            (sp->state == SPLIT_LEASED || sp->state == SPLIT_PRODUCED)) {
            if (sp->state == SPLIT_PRODUCED)
                s->rows_produced -= sp->rows; /* counted again when re-produced */
            dpp_session_set(s, i, SPLIT_PENDING);
            n++;
        }
    }
    return n;
}

void dpp_session_set_epoch(dpp_session_t *s, unsigned epoch)
{
    s->epoch = epoch;
    for (size_t j = 0; j < s->nsplits; j++) {
        dpp_session_set(s, j, SPLIT_PENDING);
        s->splits[j].rows = 0;
    }
}

void dpp_session_fail(dpp_session_t *s, const char *message)
{
    s->state = SESSION_FAILED;
    free(s->error);
    s->error = dpp_xstrdup(message);
}

const char *dpp_session_state_name(session_state_t st)
{
    switch (st) {
    case SESSION_INDEXING:
        return "indexing";
    case SESSION_RUNNING:
        return "running";
    case SESSION_DONE:
        return "done";
    case SESSION_FAILED:
        return "failed";
    }
    return "unknown";
}
