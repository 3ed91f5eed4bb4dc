/* SPDX-License-Identifier: Apache-2.0 */
/* Leasing: the rules that hand each task to one worker at a time and fence
 * off answers to revoked leases (pure, over the master's sessions), and the
 * grant that sends their choice to the workers waiting. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "lease.h"
#include "master_internal.h"
#include "persist.h"
#include "wire/conn.h"

/* Only a rank whose client is attached gets leases: blocks nobody reads
 * would fill the worker's buffer and starve every other session it serves. */
static int rank_present(const dpp_session_t *s, unsigned r, int64_t now_ms)
{
    int64_t seen = s->rank_seen_ms[r];
    return seen != 0 && now_ms - seen <= RANK_ABSENT_MS;
}

/* The low half of split i's key in the workers' caches (spec.h). */
static uint64_t split_cache_key(const dpp_session_t *s, size_t i)
{
    const dpp_split_t *sp = &s->splits[i];
    uint64_t k[2];
    dpp_spec_split_key(dpp_session_file_fp(s, sp->file), s->files[sp->file].path, sp->byte_start,
                       sp->byte_end,
                       sp->record_start, sp->range_records, sp->record_skip, sp->record_count, k);
    return k[1];
}

void dpp_master_forget_cache(dpp_master_t *m, struct peer *p)
{
    const dpp_u64set_t *k = &p->cache_keys;
    for (size_t j = 0; j < k->cap && m->cache_holders.n > 0; j++)
        if (k->slots[j])
            dpp_u64set_remove(&m->cache_holders, k->slots[j]);
    dpp_u64set_clear(&p->cache_keys);
}

/* Appends to out[n..max) the pending splits of rank r that may be leased,
 * from its first pending split (everything before it is leased, produced
 * or consumed); with order deterministic, no further than its lease window
 * past the first unconsumed one: a grant looks at a few splits per rank,
 * not at the whole plan or the splits in flight. With an asker: those of
 * the first DPP_CACHE_LOOKAHEAD its cache holds come first, and a busy
 * asker leaves those another worker holds to it. Returns how many. */
static size_t pick_from_rank(dpp_master_t *m, dpp_session_t *s, unsigned r, dpp_lease_pick_t *out,
                             size_t n, size_t max, dpp_lease_asker_t *asker)
{
    size_t first = s->rank_first[r], from = dpp_session_rank_pending(s, r);
    size_t to = dpp_session_lease_end(s, r), added = 0;
    uint64_t taken = 0; /* bit k: split from + k is picked already */
    const dpp_u64set_t *held = asker && !s->spec.cache_off ? asker->held : NULL;
    if (held && held->n > 0) {
        size_t look = to - from < DPP_CACHE_LOOKAHEAD ? to : from + DPP_CACHE_LOOKAHEAD;
        for (size_t seq = from; seq < look && n + added < max; seq++) {
            m->n.grant_scanned++;
            if (s->splits[first + seq].state != SPLIT_PENDING ||
                !dpp_u64set_has(held, split_cache_key(s, first + seq)))
                continue;
            out[n + added++] = (dpp_lease_pick_t){.session = s, .i = first + seq, .index = 0};
            taken |= UINT64_C(1) << (seq - from);
            m->n.cache_leases++;
        }
    }
    /* A busy worker that takes a split another holds makes it again while
     * the holder, soon free, would serve it from its cache: leave it. */
    int defer = asker && !asker->idle && !s->spec.cache_off && m->cache_holders.n > 0;
    for (size_t seq = from; seq < to && n + added < max; seq++) {
        m->n.grant_scanned++;
        if (s->splits[first + seq].state != SPLIT_PENDING ||
            (seq - from < 64 && (taken >> (seq - from) & 1)))
            continue;
        if (defer) {
            uint64_t key = split_cache_key(s, first + seq);
            if (dpp_u64set_has(&m->cache_holders, key) && !(held && dpp_u64set_has(held, key))) {
                asker->left++;
                continue;
            }
        }
        out[n + added++] = (dpp_lease_pick_t){.session = s, .i = first + seq, .index = 0};
    }
    return added;
}

size_t dpp_master_choose_leases(dpp_master_t *m, int64_t now_ms, dpp_lease_pick_t *out,
                                size_t max_index, size_t max_splits, dpp_lease_asker_t *asker)
{
    size_t n = 0, max = max_index;
    for (size_t si = 0; si < m->nsessions && n < max; si++) {
        dpp_session_t *s = m->sessions[si];
        if (s->state != SESSION_INDEXING)
            continue;
        /* from the first file still waiting: a grant costs what it hands
         * out, not the files before it */
        size_t i = s->index_next;
        while (i < s->nfiles && (s->files[i].indexed || s->files[i].index_lease.lease_id)) {
            i++;
            m->n.grant_scanned++;
        }
        s->index_next = i;
        for (; i < s->nfiles && n < max; i++) {
            m->n.grant_scanned++;
            if (!s->files[i].indexed && s->files[i].index_lease.lease_id == 0)
                out[n++] = (dpp_lease_pick_t){.session = s, .i = i, .index = 1};
        }
    }
    max = n + max_splits;
    for (size_t si = 0; si < m->nsessions && n < max; si++) {
        dpp_session_t *s = m->sessions[si];
        if (s->state != SESSION_RUNNING || s->counts[SPLIT_PENDING] == 0)
            continue;
        unsigned nr = s->spec.consumers, attached = 0;
        for (unsigned r = 0; r < nr; r++)
            attached += rank_present(s, r, now_ms);
        if (attached == 0)
            continue;
        /* The ranks share a grant, from a rank that turns with every
         * grant: each attached rank gets its part of what is left, and
         * what one cannot use goes to those after it. Taking rank 0's whole
         * window first would leave the other ranks' trainers waiting while
         * rank 0's splits are in flight. */
        unsigned start = s->grant_rank;
        for (unsigned k = 0; k < nr && n < max && attached > 0; k++) {
            unsigned r = (start + k) % nr;
            if (!rank_present(s, r, now_ms))
                continue;
            size_t quota = (max - n + attached - 1) / attached;
            attached--;
            n += pick_from_rank(m, s, r, out, n, n + quota, asker);
            s->grant_rank = (r + 1) % nr;
        }
    }
    return n;
}

uint64_t dpp_master_lease_take(dpp_master_t *m, const dpp_lease_pick_t *t, uint64_t worker_id)
{
    dpp_session_t *s = t->session;
    dpp_lease_ref_t *ref;
    if (t->index) {
        ref = &s->files[t->i].index_lease;
        m->n.index_leased++;
    } else {
        dpp_session_set(s, t->i, SPLIT_LEASED);
        ref = &s->splits[t->i].lease;
        m->n.splits_leased++;
    }
    ref->lease_id = ++m->next_lease_id;
    ref->worker_id = worker_id;
    return ref->lease_id;
}

/* Fills l as the lease of task t (taken: it has its lease id). l points
 * into the session. */
static void fill_lease(const dpp_lease_pick_t *t, Dpp__Lease *l)
{
    const dpp_session_t *s = t->session;
    dpp__lease__init(l);
    l->session_id = (char *)s->id;
    l->split_id = (uint32_t)t->i;
    /* a mixture's task is its source's: a whole spec of its own */
    size_t file = t->index ? t->i : s->splits[t->i].file;
    const dpp_spec_t *spec = dpp_session_file_spec(s, file);
    l->spec_json = (char *)dpp_session_file_json(s, file);
    l->format = (char *)dpp_format_names[spec->format];
    l->text = spec->text != NULL;
    l->source = s->files[file].source;
    if (t->index) {
        const dpp_file_t *f = &s->files[t->i];
        l->kind = DPP__LEASE__KIND__INDEX;
        l->lease_id = f->index_lease.lease_id;
        l->path = f->path;
        l->rel_path = f->rel_path;
        l->etag = f->etag ? f->etag : "";
        l->object_size = f->size;
        l->split_rows = s->spec.split_rows;
        DPP_DEBUG("index_leased session=%s file=%s worker=%" PRIu64 " lease=%" PRIu64, s->id,
                  f->rel_path, f->index_lease.worker_id, l->lease_id);
        return;
    }
    const dpp_split_t *sp = &s->splits[t->i];
    const dpp_file_t *f = &s->files[sp->file];
    l->kind = DPP__LEASE__KIND__SPLIT;
    l->lease_id = sp->lease.lease_id;
    l->epoch = s->epoch;
    l->rank = dpp_session_rank_of(s, t->i);
    l->path = f->path;
    l->rel_path = f->rel_path;
    l->etag = f->etag ? f->etag : "";
    l->object_size = f->size;
    l->byte_start = sp->byte_start;
    l->byte_end = sp->byte_end;
    l->record_start = sp->record_start;
    l->record_count = sp->record_count;
    l->record_skip = sp->record_skip;
    l->record_take = sp->record_count;
    l->range_records = sp->range_records;
    l->split_seq = sp->seq;
    l->rank_splits = (uint32_t)dpp_session_rank_splits(s, sp->rank);
    l->generation = s->generation;
    DPP_DEBUG("split_leased session=%s epoch=%u split=%zu worker=%" PRIu64 " lease=%" PRIu64, s->id,
              s->epoch, t->i, sp->lease.worker_id, l->lease_id);
}

const double dpp_lease_bounds[DPP_LEASE_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                    0.1,   0.25,   0.5,   1,    2.5,   10};

static void count_lease_latency(dpp_master_t *m, double secs)
{
    size_t b = 0;
    while (b < DPP_LEASE_BUCKETS && secs > dpp_lease_bounds[b])
        b++;
    m->n.lease_hist[b]++;
    m->n.lease_sum += secs;
    m->n.lease_count++;
}

/* Reused buffers of a grant: it runs for every answered request. */
static void grant_buffers(dpp_master_t *m, size_t max, dpp_lease_pick_t **picks,
                          Dpp__Lease **leases, Dpp__Lease ***ptrs)
{
    if (max > m->grant_cap) {
        m->grant_cap = max;
        m->grant_picks = dpp_xrealloc(m->grant_picks, max * sizeof *m->grant_picks);
        m->grant_leases = dpp_xrealloc(m->grant_leases, max * sizeof *m->grant_leases);
        m->grant_ptrs = dpp_xrealloc(m->grant_ptrs, max * sizeof *m->grant_ptrs);
    }
    *picks = m->grant_picks;
    *leases = m->grant_leases;
    *ptrs = m->grant_ptrs;
}

size_t dpp_master_grant_peer(dpp_master_t *m, peer_t *p, int patient, int *short_index,
                             int *short_splits)
{
    /* only a worker with a request waiting gets a reply (one per request) */
    if (peer_role(p) != ROLE_WORKER || p->lease_want == 0 || p->base.conn.closing)
        return 0;
    size_t max_index = p->index_cap > p->index_out ? p->index_cap - p->index_out : 0;
    size_t max_splits = *short_splits ? 0 : p->lease_want;
    if (*short_index)
        max_index = 0;
    size_t max = max_index + max_splits;
    if (max == 0)
        return 0;
    dpp_lease_pick_t *picks;
    Dpp__Lease *leases, **ptrs;
    grant_buffers(m, max, &picks, &leases, &ptrs);
    /* An idle worker waits DPP_CACHE_WAIT_MS for busy holders, then takes
     * their splits; the wait starts when a split is first left to its
     * holder (a request may have waited long before splits came). */
    uint64_t now_ns = dpp_now_ns(), since = p->defer_since_ns ? p->defer_since_ns : now_ns;
    uint64_t until = since + DPP_CACHE_WAIT_MS * UINT64_C(1000000);
    int idle = p->splits_out == 0;
    dpp_lease_asker_t asker = {.held = &p->cache_keys, .idle = !patient && idle && now_ns >= until};
    size_t n = dpp_master_choose_leases(m, (int64_t)(now_ns / 1000000), picks, max_index,
                                        max_splits, &asker);
    if (asker.left > 0 && idle && !asker.idle && n == 0) {
        p->defer_since_ns = since;
        if (m->cache_wake_ns == 0 || until < m->cache_wake_ns)
            m->cache_wake_ns = until;
    }
    size_t nindex = 0;
    for (size_t k = 0; k < n; k++) {
        dpp_master_lease_take(m, &picks[k], p->worker_id);
        nindex += picks[k].index;
        fill_lease(&picks[k], &leases[k]);
        ptrs[k] = &leases[k];
    }
    p->index_out += (unsigned)nindex;
    p->splits_out += (unsigned)(n - nindex);
    if (nindex < max_index)
        *short_index = 1;
    if (n - nindex < max_splits && asker.left == 0) /* another worker may take those */
        *short_splits = 1;
    if (n > 0) {
        Dpp__LeaseReply reply = DPP__LEASE_REPLY__INIT;
        reply.n_leases = n;
        reply.leases = ptrs;
        p->lease_want = 0;
        p->defer_since_ns = 0;
        m->n.lease_replies++;
        dpp_master_unwait_lease(m, p);
        count_lease_latency(m, (double)(dpp_now_ns() - p->lease_since_ns) / 1e9);
        dpp_conn_send(&p->base.conn, DPP_MSG_LEASE_REPLY, &reply.base);
    }
    return n;
}

static void on_cache_wait(uv_timer_t *t)
{
    dpp_master_grant_soon(dpp_container_of(t, dpp_master_t, cache_timer));
}

void dpp_master_grant_leases(dpp_master_t *m)
{
    int short_index = 0, short_splits = 0;
    m->grant_due = 0;
    m->cache_wake_ns = 0;
    /* With caches, a first round in which nobody takes a split another
     * worker holds: a holder waiting behind an idle worker still gets its
     * own. The second gives what is left, idle workers taking any. */
    for (int patient = m->cache_holders.n > 0; patient >= 0; patient--) {
        for (peer_t *p = m->waiting, *next; p && !(short_index && short_splits); p = next) {
            next = p->next;
            dpp_master_grant_peer(m, p, patient, &short_index, &short_splits);
        }
    }
    if (m->cache_wake_ns && !m->stopping) {
        uint64_t now = dpp_now_ns();
        uint64_t ms = m->cache_wake_ns > now ? (m->cache_wake_ns - now) / 1000000 + 1 : 1;
        uv_timer_start(&m->cache_timer, on_cache_wait, ms, 0);
    }
}

void dpp_master_grant_soon(dpp_master_t *m)
{
    m->grant_due = 1;
}

void dpp_master_wait_lease(dpp_master_t *m, peer_t *p)
{
    if (p->waiting)
        return;
    p->waiting = 1;
    p->next = NULL;
    p->prev = m->waiting_tail;
    if (m->waiting_tail)
        m->waiting_tail->next = p;
    else
        m->waiting = p;
    m->waiting_tail = p;
}

void dpp_master_unwait_lease(dpp_master_t *m, peer_t *p)
{
    if (!p->waiting)
        return;
    p->waiting = 0;
    if (p->prev)
        p->prev->next = p->next;
    else
        m->waiting = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        m->waiting_tail = p->prev;
    p->prev = p->next = NULL;
}

size_t dpp_master_release_worker(dpp_master_t *m, uint64_t worker_id)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nsessions; i++) {
        dpp_session_t *s = m->sessions[i];
        n += dpp_session_release_worker(s, worker_id);
        unsigned epoch = s->epoch;
        int more = dpp_session_unhold(s, 0); /* its reports are not coming */
        if (more >= 0)
            dpp_master_epoch_moved(m, s, epoch, more);
    }
    m->n.splits_released += n;
    dpp_log(n ? DPP_LOG_WARN : DPP_LOG_INFO, "worker_lost worker=%" PRIu64 " splits_requeued=%zu",
            worker_id, n);
    if (n > 0)
        dpp_master_grant_soon(m);
    return n;
}

/* The split a SPLIT_DONE names: its current lease (the worker echoes the
 * session and split, so this is direct), or (*late = 1, *split meaningless)
 * a lease of the epoch before, whose split its client consumed before the
 * worker's SPLIT_DONE arrived. A lease that is neither is stale: NULL. */
static dpp_session_t *find_split_lease(dpp_master_t *m, const char *session_id, uint32_t split_id,
                                       uint64_t lease_id, size_t *split, int *late)
{
    dpp_session_t *s = dpp_master_find_session(m, session_id);
    if (s == NULL)
        return NULL;
    if (split_id < s->nsplits && s->splits[split_id].lease.lease_id == lease_id) {
        *split = split_id;
        *late = 0;
        return s;
    }
    for (size_t i = 0; i < s->nprev; i++) {
        if (s->prev_leases[i] == lease_id) {
            *split = 0;
            *late = 1;
            return s;
        }
    }
    return NULL;
}

dpp_split_done_t dpp_master_split_done(dpp_master_t *m, const char *session_id, uint32_t split_id,
                                       uint64_t lease_id, uint64_t worker_id,
                                       dpp_session_t **session, size_t *split)
{
    size_t i;
    int late;
    dpp_session_t *s = find_split_lease(m, session_id, split_id, lease_id, &i, &late);
    if (s == NULL || s->state == SESSION_FAILED)
        return DPP_SPLIT_DONE_IGNORED;
    const dpp_split_t *sp = late ? NULL : &s->splits[i];
    /* The client may acknowledge a split before its worker's SPLIT_DONE
     * arrives (they travel different connections): then only the counters
     * are taken. Otherwise the split must still be leased to this worker; a
     * re-leased split's old lease is ignored. */
    int counters_only = late || sp->state == SPLIT_CONSUMED;
    if (!counters_only && (sp->lease.worker_id != worker_id || sp->state != SPLIT_LEASED))
        return DPP_SPLIT_DONE_IGNORED;
    *session = s;
    *split = i;
    return counters_only ? DPP_SPLIT_DONE_COUNTED : DPP_SPLIT_DONE_PRODUCED;
}

void dpp_master_split_produced(dpp_session_t *s, size_t i, uint64_t rows)
{
    s->splits[i].rows = rows;
    dpp_session_set(s, i, SPLIT_PRODUCED);
}

dpp_session_t *dpp_master_index_lease(dpp_master_t *m, const char *session_id, uint32_t file,
                                      uint64_t lease_id, uint64_t worker_id)
{
    dpp_session_t *s = dpp_master_find_session(m, session_id);
    if (s == NULL || s->state != SESSION_INDEXING || file >= s->nfiles)
        return NULL;
    const dpp_lease_ref_t *l = &s->files[file].index_lease;
    return l->lease_id == lease_id && l->worker_id == worker_id ? s : NULL;
}

dpp_session_t *dpp_master_consumed_split(dpp_master_t *m, const char *session_id, unsigned epoch,
                                         uint32_t split_id, unsigned rank, unsigned generation)
{
    dpp_session_t *s = dpp_master_find_session(m, session_id);
    if (s == NULL || s->state != SESSION_RUNNING || epoch != s->epoch ||
        generation != s->generation || split_id >= s->nsplits ||
        dpp_session_rank_of(s, split_id) != rank)
        return NULL; /* late or foreign acknowledgement: nothing to change */
    if (s->splits[split_id].state == SPLIT_CONSUMED)
        return NULL; /* a repeated acknowledgement */
    return s;
}
