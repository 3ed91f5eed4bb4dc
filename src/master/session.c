// SPDX-License-Identifier: Apache-2.0
// Per-session file indexes, split planning and split states (see session.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "spec/transform.h"
#include "dpp/error.h"
#include "planner.h"
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
    s->rank_prefetch = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_prefetch);
    s->rank_cursor = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_cursor);
    s->reports = dpp_xcalloc(s->spec.consumers, sizeof *s->reports);
    for (unsigned r = 0; r < s->spec.consumers; r++)
        s->rank_prefetch[r] = DPP_SESSION_DEFAULT_PREFETCH;
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
    free(s->rank_first);
    free(s->rank_count);
    free(s->rank_prefetch);
    free(s->rank_cursor);
    free(s->prev_leases);
    free(s->reports);
    free(s);
}

/* Records of rank r when `total` records are dealt to n ranks: with
 * remainder "drop" every rank gets the same whole number of batches (fewer
 * than n x batch_size records are left out); with "keep" and "pad" the
 * records are spread as evenly as they go. */
static uint64_t rank_quota(const dpp_session_t *s, uint64_t total, unsigned r)
{
    unsigned n = s->spec.consumers;
    if (s->spec.remainder != DPP_REMAINDER_DROP)
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

static uint64_t total_records(const dpp_session_t *s)
{
    uint64_t total = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        total += s->files[i].records;
    return total;
}

uint64_t dpp_session_pad_batches(const dpp_session_t *s)
{
    if (s->spec.remainder != DPP_REMAINDER_PAD || s->state == SESSION_INDEXING)
        return 0;
    uint64_t most = rank_quota(s, total_records(s), 0); /* rank 0 gets the most */
    return (most + s->spec.batch_size - 1) / s->spec.batch_size;
}

/* The plan of `epoch`: deals the files' index ranges to the ranks, in file
 * order or (shuffle) in an order permuted by (seed, epoch): rank 0 takes
 * records until its quota is met, then rank 1, and so on; a range that
 * straddles two quotas becomes two splits (windows of it). Every rank thus
 * gets the same number of batches, whichever files hold how many records,
 * and a rank's splits are consecutive ids in the order it consumes them
 * (rank_first, rank_count: [consumers]). Every split is pending. Pure: the
 * same indexes, spec and epoch give the same plan. */
static dpp_split_t *plan_epoch(const dpp_session_t *s, unsigned epoch, size_t *nsplits,
                               size_t *rank_first, size_t *rank_count)
{
    const dpp_planner_t *planner = dpp_planner_for(s->spec.format);
    uint64_t total = total_records(s);
    size_t ranges = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        const dpp_file_t *f = &s->files[i];
        ranges += planner->nranges(f->records, f->bounds, f->nbounds);
    }
    struct range_ref {
        uint32_t file, b;
    } *of = dpp_xcalloc(ranges + 1, sizeof *of);
    size_t r = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        const dpp_file_t *f = &s->files[i];
        size_t nb = planner->nranges(f->records, f->bounds, f->nbounds);
        for (size_t b = 0; b < nb; b++)
            of[r++] = (struct range_ref){(uint32_t)i, (uint32_t)b};
    }
    uint32_t *order = dpp_xcalloc(ranges + 1, sizeof *order);
    if (s->spec.shuffle)
        dpp_permute(order, ranges, dpp_shuffle_seed(s->spec.shuffle_seed, epoch, 0));
    else
        for (r = 0; r < ranges; r++)
            order[r] = (uint32_t)r;

    unsigned nr = s->spec.consumers;
    /* at most one extra split per rank boundary */
    dpp_split_t *splits = dpp_xcalloc(ranges + nr + 1, sizeof *splits);
    memset(rank_first, 0, nr * sizeof *rank_first);
    memset(rank_count, 0, nr * sizeof *rank_count);
    size_t k = 0;
    unsigned rank = 0;
    uint64_t left = rank_quota(s, total, 0);
    for (r = 0; r < ranges && rank < nr; r++) {
        const dpp_file_t *f = &s->files[of[order[r]].file];
        dpp_range_t range;
        planner->range(f->records, f->bounds, f->nbounds, s->spec.split_rows, of[order[r]].b,
                       &range);
        uint64_t count = range.record_count;
        uint64_t skip = 0;
        while (skip < count && rank < nr) {
            if (left == 0) {
                if (++rank == nr)
                    break;
                left = rank_quota(s, total, rank);
                rank_first[rank] = k;
                continue;
            }
            uint64_t take = count - skip < left ? count - skip : left;
            dpp_split_t *sp = &splits[k++];
            sp->file = of[order[r]].file;
            sp->rank = rank;
            sp->seq = (uint32_t)rank_count[rank]++;
            sp->record_start = range.record_start;
            sp->record_skip = skip;
            sp->record_count = take;
            sp->range_records = range.record_count;
            sp->byte_start = range.byte_start;
            sp->byte_end = range.byte_end;
            skip += take;
            left -= take;
        }
    }
    for (unsigned q = rank + 1; q < nr; q++)
        rank_first[q] = k; /* ranks left without records */
    free(order);
    free(of);
    *nsplits = k;
    return splits;
}

/* Installs the plan of s->epoch. */
static void plan_splits(dpp_session_t *s)
{
    if (s->rank_first == NULL) {
        s->rank_first = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_first);
        s->rank_count = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_count);
    }
    free(s->splits);
    s->splits = plan_epoch(s, s->epoch, &s->nsplits, s->rank_first, s->rank_count);
    memset(s->rank_cursor, 0, s->spec.consumers * sizeof *s->rank_cursor);
    memset(s->counts, 0, sizeof s->counts);
    s->counts[SPLIT_PENDING] = s->nsplits;
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
    s->state = s->nsplits ? SESSION_RUNNING : SESSION_DONE;
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

size_t dpp_session_rank_cursor(dpp_session_t *s, unsigned r)
{
    /* moves only forward, and is reset when splits go back (a new plan,
     * a resume) */
    size_t first = s->rank_first[r], n = s->rank_count[r], *cur = &s->rank_cursor[r];
    while (*cur < n && s->splits[first + *cur].state == SPLIT_CONSUMED)
        (*cur)++;
    return *cur;
}

size_t dpp_session_lease_end(dpp_session_t *s, unsigned r)
{
    size_t n = s->rank_count[r];
    if (s->spec.order_fastest)
        return n;
    size_t end = dpp_session_rank_cursor(s, r) + s->rank_prefetch[r] + 1;
    return end < n ? end : n;
}

/* Every split of the epoch is consumed: starts the next epoch or ends the
 * session. Returns 1 when new splits became pending. */
static int epoch_complete(dpp_session_t *s)
{
    if (s->epoch + 1 >= s->spec.epochs) {
        s->state = SESSION_DONE;
        return 0;
    }
    s->prev_leases = dpp_xrealloc(s->prev_leases, (s->nsplits + 1) * sizeof *s->prev_leases);
    s->nprev = s->nsplits;
    for (size_t j = 0; j < s->nsplits; j++)
        s->prev_leases[j] = s->splits[j].lease.lease_id;
    s->epoch++;
    plan_splits(s);
    return 1;
}

int dpp_session_consumed(dpp_session_t *s, size_t i)
{
    if (s->splits[i].state == SPLIT_CONSUMED)
        return 0;
    dpp_session_set(s, i, SPLIT_CONSUMED);
    if (s->counts[SPLIT_CONSUMED] < s->nsplits)
        return 0;
    return epoch_complete(s);
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
    plan_splits(s);
}

/* Puts split i back to pending for production again. */
static void reset_split(dpp_session_t *s, size_t i)
{
    dpp_split_t *sp = &s->splits[i];
    if (sp->state == SPLIT_PRODUCED || sp->state == SPLIT_CONSUMED)
        s->rows_produced -= sp->rows; /* counted again when re-produced */
    sp->rows = 0;
    if (sp->state != SPLIT_PENDING)
        dpp_session_set(s, i, SPLIT_PENDING);
}

/* Splits of `rank` in the plan of `epoch`. */
static size_t rank_count_in(const dpp_session_t *s, unsigned rank, unsigned epoch)
{
    if (epoch == s->epoch && s->rank_count)
        return s->rank_count[rank];
    size_t n, *first = dpp_xcalloc(s->spec.consumers, sizeof *first);
    size_t *count = dpp_xcalloc(s->spec.consumers, sizeof *count);
    free(plan_epoch(s, epoch, &n, first, count));
    n = count[rank];
    free(first);
    free(count);
    return n;
}

int dpp_session_resume(dpp_session_t *s, unsigned rank, unsigned epoch, unsigned seq)
{
    if (rank >= s->spec.consumers || epoch > s->spec.epochs ||
        (epoch == s->spec.epochs && seq != 0))
        return DPP_ETOKEN;
    if (s->state == SESSION_FAILED)
        return 0; /* the client learns of the failure from the reply */
    if (s->state == SESSION_INDEXING)
        return epoch == 0 && seq == 0 ? 0 : DPP_ETOKEN; /* nothing was consumed yet */
    unsigned cur = s->state == SESSION_DONE ? s->spec.epochs : s->epoch;
    /* the end of an epoch is the start of the next: no need to go back */
    while (epoch < cur) {
        size_t n = rank_count_in(s, rank, epoch);
        if (seq > n)
            return DPP_ETOKEN;
        if (seq < n)
            break;
        epoch++;
        seq = 0;
    }
    if (epoch > cur)
        return DPP_ETOKEN; /* epoch e+1 is leased only after e is consumed */
    if (epoch == s->spec.epochs)
        return 0; /* the rank had everything, and so had the others */
    if (epoch == cur && seq > s->rank_count[rank])
        return DPP_ETOKEN;
    if (epoch < cur) {
        /* An earlier epoch: plan it again. Other ranks count as done with
         * it; a rank that resumes too puts its own splits back. */
        s->epoch = epoch;
        s->state = SESSION_RUNNING;
        plan_splits(s);
        for (size_t i = 0; i < s->nsplits; i++)
            if (s->splits[i].rank != rank)
                dpp_session_set(s, i, SPLIT_CONSUMED);
    }
    size_t first = s->rank_first[rank];
    for (size_t j = seq; j < s->rank_count[rank]; j++)
        reset_split(s, first + j);
    if (s->rank_cursor[rank] > seq)
        s->rank_cursor[rank] = seq;
    /* the splits before the token's position reached the trainer (their
     * acknowledgements may not have): consumed; the last one may end the
     * epoch */
    for (size_t j = 0; j < seq; j++)
        if (s->splits[first + j].state != SPLIT_CONSUMED)
            dpp_session_consumed(s, first + j);
    if (s->state == SESSION_RUNNING && s->counts[SPLIT_CONSUMED] == s->nsplits)
        epoch_complete(s); /* the rank has no splits and the others are done */
    return 0;
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
