// SPDX-License-Identifier: Apache-2.0
// The master's event loop: connections, message handling and leasing.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "wire/conn.h"
#include "base/log.h"
#include "wire/net.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "master.h"
#include "master_internal.h"
#include "metrics.h"
#include "session.h"
#include "spec/table.h"
#include "journal.h"

static const char *role_name(peer_role_t r)
{
    static const char *const names[] = {"none", "ctl", "worker", "client"};
    return names[r];
}

static dpp_session_t *find_session(dpp_master_t *m, const char *id)
{
    for (size_t i = 0; i < m->nsessions; i++)
        if (strcmp(m->sessions[i]->id, id) == 0)
            return m->sessions[i];
    return NULL;
}

static unsigned live_workers(dpp_master_t *m)
{
    unsigned n = 0;
    for (peer_t *p = m->peers; p; p = p->next)
        n += p->role == ROLE_WORKER && p->worker_id != 0;
    return n;
}

/* Fills l as an index task for file i of s. */
static void lease_index(dpp_master_t *m, peer_t *p, dpp_session_t *s, size_t i, Dpp__Lease *l)
{
    dpp_file_t *f = &s->files[i];
    f->index_lease.lease_id = ++m->next_lease_id;
    m->n.index_leased++;
    f->index_lease.worker_id = p->worker_id;
    dpp__lease__init(l);
    l->kind = DPP__LEASE__KIND__INDEX;
    l->lease_id = f->index_lease.lease_id;
    l->session_id = s->id;
    l->split_id = (uint32_t)i;
    l->path = f->path;
    l->rel_path = f->rel_path;
    l->spec_json = s->spec_json;
    l->split_rows = s->spec.split_rows;
    DPP_DEBUG("index_leased session=%s file=%s worker=%" PRIu64 " lease=%" PRIu64, s->id,
              f->rel_path, p->worker_id, l->lease_id);
}

/* Fills l as split i of s's current epoch. */
static void lease_split(dpp_master_t *m, peer_t *p, dpp_session_t *s, size_t i, Dpp__Lease *l)
{
    dpp_split_t *sp = &s->splits[i];
    const dpp_file_t *f = &s->files[sp->file];
    dpp_session_set(s, i, SPLIT_LEASED);
    m->n.splits_leased++;
    sp->lease.lease_id = ++m->next_lease_id;
    sp->lease.worker_id = p->worker_id;
    dpp__lease__init(l);
    l->kind = DPP__LEASE__KIND__SPLIT;
    l->lease_id = sp->lease.lease_id;
    l->session_id = s->id;
    l->epoch = s->epoch;
    l->split_id = (uint32_t)i;
    l->rank = dpp_session_rank_of(s, i);
    l->path = f->path;
    l->rel_path = f->rel_path;
    l->spec_json = s->spec_json;
    l->byte_start = sp->byte_start;
    l->byte_end = sp->byte_end;
    l->record_start = sp->record_start;
    l->record_count = sp->record_count;
    l->record_skip = sp->record_skip;
    l->record_take = sp->record_count;
    l->split_seq = sp->seq;
    l->rank_splits = (uint32_t)dpp_session_rank_splits(s, sp->rank);
    DPP_DEBUG("split_leased session=%s epoch=%u split=%zu worker=%" PRIu64 " lease=%" PRIu64, s->id,
              s->epoch, i, p->worker_id, l->lease_id);
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

/* Answers every waiting LeaseRequest that pending work can serve: index
 * tasks first (they unblock planning), then splits, in session order. */
static void grant_leases(dpp_master_t *m)
{
    for (peer_t *p = m->peers; p; p = p->next) {
        if (p->role != ROLE_WORKER || p->lease_want == 0 || p->conn.closing)
            continue;
        Dpp__Lease *leases = dpp_xcalloc(p->lease_want, sizeof *leases);
        Dpp__Lease **ptrs = dpp_xcalloc(p->lease_want, sizeof *ptrs);
        size_t n = 0;
        for (size_t si = 0; si < m->nsessions && n < p->lease_want; si++) {
            dpp_session_t *s = m->sessions[si];
            if (s->state != SESSION_INDEXING)
                continue;
            for (size_t i = 0; i < s->nfiles && n < p->lease_want; i++) {
                if (!s->files[i].indexed && s->files[i].index_lease.lease_id == 0) {
                    lease_index(m, p, s, i, &leases[n]);
                    ptrs[n] = &leases[n];
                    n++;
                }
            }
        }
        int64_t now = dpp_now_ms();
        for (size_t si = 0; si < m->nsessions && n < p->lease_want; si++) {
            dpp_session_t *s = m->sessions[si];
            if (s->state != SESSION_RUNNING || s->counts[SPLIT_PENDING] == 0)
                continue;
            for (unsigned r = 0; r < s->spec.consumers && n < p->lease_want; r++) {
                /* Only for a rank whose client is attached: blocks nobody
                 * reads would fill the worker's buffer and starve every
                 * other session it serves. */
                int64_t seen = s->rank_seen_ms[r];
                if (seen == 0 || now - seen > RANK_ABSENT_MS)
                    continue;
                /* From the rank's first unconsumed split; with order
                 * deterministic, no further than its lease window: a grant
                 * looks at a few splits per rank, not at the whole plan. */
                size_t first = s->rank_first[r], from = dpp_session_rank_cursor(s, r);
                size_t to = dpp_session_lease_end(s, r);
                for (size_t seq = from; seq < to && n < p->lease_want; seq++) {
                    if (s->splits[first + seq].state == SPLIT_PENDING) {
                        lease_split(m, p, s, first + seq, &leases[n]);
                        ptrs[n] = &leases[n];
                        n++;
                    }
                }
            }
        }
        if (n > 0) {
            Dpp__LeaseReply reply = DPP__LEASE_REPLY__INIT;
            reply.n_leases = n;
            reply.leases = ptrs;
            p->lease_want = 0;
            count_lease_latency(m, (double)(dpp_now_ns() - p->lease_since_ns) / 1e9);
            dpp_conn_send(&p->conn, DPP_MSG_LEASE_REPLY, &reply.base);
        }
        free(ptrs);
        free(leases);
    }
}

static void release_worker(dpp_master_t *m, uint64_t worker_id)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nsessions; i++)
        n += dpp_session_release_worker(m->sessions[i], worker_id);
    m->n.splits_released += n;
    dpp_log(n ? DPP_LOG_WARN : DPP_LOG_INFO, "worker_lost worker=%" PRIu64 " splits_requeued=%zu",
            worker_id, n);
    if (n > 0)
        grant_leases(m);
}

static void on_peer_closed(dpp_conn_t *c)
{
    peer_t *p = dpp_container_of(c, peer_t, conn);
    dpp_master_t *m = p->m;
    if (p->prev)
        p->prev->next = p->next;
    else
        m->peers = p->next;
    if (p->next)
        p->next->prev = p->prev;
    m->npeers--;
    DPP_DEBUG("peer_closed peer=%s role=%s reason=\"%s\"", c->peer, role_name(p->role),
              dpp_strerror(c->error));
    if (p->role == ROLE_WORKER && p->worker_id != 0 && !m->stopping)
        release_worker(m, p->worker_id);
    free(p);
}

/* Session ids: "s" and 16 hex digits of randomness. */
static void new_session_id(char *out, size_t len)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = dpp_now_ns() ^ ((uint64_t)getpid() << 32);
    snprintf(out, len, "s%016" PRIx64, r);
}

/* Journal record types (payloads: the Journal* messages of proto/dpp.proto). */
enum { J_SESSION = 1, J_INDEXED = 2, J_CONSUMED = 3, J_FAILED = 4, J_EPOCH = 5, J_RESUME = 6 };

/* Packs msg into a new buffer for a journal record. */
static dpp_journal_rec_t pack_rec(uint8_t type, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = dpp_xmalloc(len ? len : 1);
    protobuf_c_message_pack(msg, buf);
    return (dpp_journal_rec_t){.type = type, .payload = buf, .len = len};
}

/* Appends records durably (one fsync). A master that cannot journal would
 * acknowledge state a restart loses: it stops, and its replacement replays. */
static void maybe_compact(dpp_master_t *m);
static void fail_session(dpp_master_t *m, dpp_session_t *s, const char *what, const char *message);

static int journal_put(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n)
{
    int rc = dpp_journal_append_many(m->journal, recs, n);
    for (size_t i = 0; i < n; i++)
        free((void *)recs[i].payload);
    if (rc) {
        DPP_ERROR("journal_write_failed dir=%s error=\"%s\" action=stopping", m->state_dir,
                  dpp_strerror(rc));
        m->failed = 1;
        dpp_master_stop(m);
        return rc;
    }
    /* Compaction comes after the change is applied (maybe_compact() at the
     * end of each handler): a snapshot taken here would miss it. */
    return 0;
}

static dpp_journal_rec_t session_rec(const dpp_session_t *s)
{
    Dpp__JournalSession js = DPP__JOURNAL_SESSION__INIT;
    js.session_id = (char *)s->id;
    js.spec_json = s->spec_json;
    js.table_path = s->table_path;
    js.n_files = s->nfiles;
    js.files = dpp_xcalloc(s->nfiles + 1, sizeof *js.files);
    for (size_t i = 0; i < s->nfiles; i++)
        js.files[i] = s->files[i].path;
    dpp_journal_rec_t rec = pack_rec(J_SESSION, &js.base);
    free(js.files);
    return rec;
}

static dpp_journal_rec_t indexed_rec(const dpp_session_t *s, size_t i)
{
    Dpp__JournalIndexed r = DPP__JOURNAL_INDEXED__INIT;
    r.session_id = (char *)s->id;
    r.file = (uint32_t)i;
    r.records = s->files[i].records;
    r.n_boundaries = s->files[i].nbounds;
    r.boundaries = s->files[i].bounds;
    return pack_rec(J_INDEXED, &r.base);
}

static index_entry_t *cache_find(dpp_master_t *m, const dpp_file_t *f, unsigned split_rows)
{
    for (index_entry_t *e = m->index_cache; e; e = e->next)
        if (e->size == f->size && e->mtime_ns == f->mtime_ns && e->split_rows == split_rows &&
            strcmp(e->path, f->path) == 0)
            return e;
    return NULL;
}

static void cache_put(dpp_master_t *m, const dpp_file_t *f, unsigned split_rows)
{
    if (cache_find(m, f, split_rows))
        return;
    index_entry_t *e = dpp_xcalloc(1, sizeof *e);
    e->path = dpp_xstrdup(f->path);
    e->size = f->size;
    e->mtime_ns = f->mtime_ns;
    e->split_rows = split_rows;
    e->records = f->records;
    e->nbounds = f->nbounds;
    e->bounds = dpp_xcalloc(f->nbounds ? f->nbounds : 1, sizeof *e->bounds);
    memcpy(e->bounds, f->bounds, f->nbounds * sizeof *e->bounds);
    e->next = m->index_cache;
    m->index_cache = e;
}

/* Marks the files of a new session whose index the master already knows.
 * Returns how many. */
static size_t apply_index_cache(dpp_master_t *m, dpp_session_t *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        const index_entry_t *e = cache_find(m, &s->files[i], s->spec.split_rows);
        if (e) {
            dpp_session_file_indexed(s, i, e->records, e->bounds, e->nbounds);
            n++;
        }
    }
    return n;
}

static void handle_submit(peer_t *p, const Dpp__SubmitRequest *req)
{
    dpp_master_t *m = p->m;
    char err[DPP_SPEC_ERRLEN];
    dpp_spec_t spec;
    char *table_path = NULL;
    char **files = NULL;
    size_t nfiles = 0;
    size_t len = strlen(req->spec_json);
    int rc = DPP_ESPEC;
    if (len > m->max_spec_bytes) {
        snprintf(err, sizeof err,
                 "the spec is %zu bytes, this master takes at most %zu (--max-spec-kb)", len,
                 m->max_spec_bytes);
        memset(&spec, 0, sizeof spec);
        goto reject;
    }
    rc = dpp_spec_parse(req->spec_json, len, &spec, err, sizeof err);
    if (rc)
        goto reject;
    if (spec.ndense + spec.nsparse > m->max_features) {
        rc = DPP_ESPEC;
        snprintf(err, sizeof err, "features: %u, this master takes at most %u (--max-features)",
                 spec.ndense + spec.nsparse, m->max_features);
        goto reject;
    }
    rc = dpp_table_resolve((const char *const *)m->roots, m->nroots, spec.table, &table_path, err,
                           sizeof err);
    if (rc)
        goto reject;
    rc = dpp_table_list_files(table_path, &spec, &files, &nfiles, err, sizeof err);
    if (rc)
        goto reject;
    if (nfiles == 0) {
        rc = DPP_ESPEC;
        snprintf(err, sizeof err, "table \"%s\": no data files in the selected partitions",
                 spec.table);
        goto reject;
    }
    char id[24];
    new_session_id(id, sizeof id);
    dpp_session_t *s = dpp_session_new(id, &spec, table_path, files, nfiles);
    table_path = NULL;
    files = NULL;
    size_t cached = apply_index_cache(m, s);
    /* Journaled (the files indexed from the cache too, so that a replay does
     * not depend on it) before the submit is answered. */
    dpp_journal_rec_t *recs = dpp_xcalloc(1 + s->nfiles, sizeof *recs);
    size_t nrecs = 0;
    recs[nrecs++] = session_rec(s);
    for (size_t i = 0; i < s->nfiles; i++)
        if (s->files[i].indexed)
            recs[nrecs++] = indexed_rec(s, i);
    rc = journal_put(m, recs, nrecs);
    free(recs);
    if (rc) {
        snprintf(err, sizeof err, "state dir %s: journal: %s", m->state_dir, dpp_strerror(rc));
        dpp_session_free(s);
        goto reject;
    }
    m->sessions = dpp_xrealloc(m->sessions, (m->nsessions + 1) * sizeof *m->sessions);
    m->sessions[m->nsessions++] = s;
    m->n.sessions_submitted++;
    DPP_INFO("session_submitted session=%s table=%s files=%zu files_indexed=%zu state=%s "
             "epochs=%u consumers=%u",
             s->id, s->spec.table, s->nfiles, cached, dpp_session_state_name(s->state),
             s->spec.epochs, s->spec.consumers);
    Dpp__SubmitReply reply = DPP__SUBMIT_REPLY__INIT;
    reply.session_id = s->id;
    dpp_conn_send(&p->conn, DPP_MSG_SUBMIT_REPLY, &reply.base);
    grant_leases(m);
    maybe_compact(m);
    return;

reject:;
    char q[DPP_SPEC_ERRLEN + 64];
    DPP_INFO("session_rejected peer=%s error=%s", p->conn.peer, dpp_log_quote(err, q, sizeof q));
    dpp_conn_send_error(&p->conn, rc, "%s", err);
    dpp_spec_close(&spec);
    free(table_path);
    dpp_table_files_free(files, nfiles);
}

static void fill_rejects(const dpp_rejects_t *r, Dpp__Rejects *out)
{
    dpp__rejects__init(out);
    out->corrupt = r->corrupt;
    out->truncated = r->truncated;
    out->too_big = r->too_big;
    out->example = r->example;
    out->missing = r->missing;
    out->type = r->type;
}

static uint64_t rejects_total(const dpp_rejects_t *r)
{
    return r->corrupt + r->truncated + r->too_big + r->example + r->missing + r->type;
}

static void add_rejects(dpp_rejects_t *r, const Dpp__Rejects *in)
{
    if (in == NULL)
        return;
    r->corrupt += in->corrupt;
    r->truncated += in->truncated;
    r->too_big += in->too_big;
    r->example += in->example;
    r->missing += in->missing;
    r->type += in->type;
}

/* st points into s and rej; both must outlive the send. */
static void fill_status(dpp_master_t *m, const dpp_session_t *s, Dpp__SessionStatus *st,
                        Dpp__Rejects *rej, Dpp__RankStatus *ranks, Dpp__RankStatus **rank_ptrs)
{
    dpp__session_status__init(st);
    st->session_id = (char *)s->id;
    st->state = (char *)dpp_session_state_name(s->state);
    st->table = s->spec.table;
    st->epochs = s->spec.epochs;
    st->current_epoch = s->epoch;
    st->consumers = s->spec.consumers;
    st->splits_per_epoch = (uint32_t)s->nsplits;
    st->splits_pending = (uint32_t)s->counts[SPLIT_PENDING];
    st->splits_leased = (uint32_t)s->counts[SPLIT_LEASED];
    st->splits_produced = (uint32_t)s->counts[SPLIT_PRODUCED];
    st->splits_consumed = (uint32_t)(s->counts[SPLIT_CONSUMED] + (size_t)s->epoch * s->nsplits);
    st->rows_produced = s->rows_produced;
    st->rows_filtered = s->rows_filtered;
    st->records_rejected = rejects_total(&s->rejects);
    fill_rejects(&s->rejects, rej);
    st->rejects = rej;
    st->files = (uint32_t)s->nfiles;
    st->files_indexed = (uint32_t)s->files_indexed;
    st->workers = live_workers(m);
    st->error = s->error ? s->error : (char *)"";
    int64_t now = dpp_now_ms();
    for (unsigned r = 0; r < s->spec.consumers; r++) {
        Dpp__RankStatus *rs = &ranks[r];
        dpp__rank_status__init(rs);
        rs->rank = r;
        rs->splits = (uint32_t)dpp_session_rank_splits(s, r);
        for (size_t j = 0; j < rs->splits; j++)
            rs->splits_consumed += s->splits[s->rank_first[r] + j].state == SPLIT_CONSUMED;
        rs->attached = s->rank_seen_ms[r] && now - s->rank_seen_ms[r] <= RANK_ABSENT_MS;
        rs->batches = s->reports[r].batches;
        rs->wait_ns = s->reports[r].wait_ns;
        rs->open_ns = s->reports[r].open_ns;
        st->records_per_epoch += dpp_session_rank_records(s, r);
        rank_ptrs[r] = rs;
    }
    st->n_ranks = s->spec.consumers;
    st->ranks = rank_ptrs;
}

/* Splits leased to worker_id now, over every session. */
static uint32_t worker_leases(const dpp_master_t *m, uint64_t worker_id)
{
    uint32_t n = 0;
    for (size_t si = 0; si < m->nsessions; si++) {
        const dpp_session_t *s = m->sessions[si];
        for (size_t i = 0; i < s->nsplits; i++)
            n += s->splits[i].state == SPLIT_LEASED && s->splits[i].lease.worker_id == worker_id;
    }
    return n;
}

static void handle_status(peer_t *p, const Dpp__StatusRequest *req)
{
    dpp_master_t *m = p->m;
    size_t n = 0;
    Dpp__SessionStatus *sts = dpp_xcalloc(m->nsessions + 1, sizeof *sts);
    Dpp__Rejects *rejs = dpp_xcalloc(m->nsessions + 1, sizeof *rejs);
    Dpp__SessionStatus **ptrs = dpp_xcalloc(m->nsessions + 1, sizeof *ptrs);
    Dpp__RankStatus **ranks = dpp_xcalloc(m->nsessions + 1, sizeof *ranks);
    Dpp__RankStatus ***rank_ptrs = dpp_xcalloc(m->nsessions + 1, sizeof *rank_ptrs);
    for (size_t i = 0; i < m->nsessions; i++) {
        const dpp_session_t *s = m->sessions[i];
        if (req->session_id[0] && strcmp(req->session_id, s->id) != 0)
            continue;
        ranks[n] = dpp_xcalloc(s->spec.consumers, sizeof **ranks);
        rank_ptrs[n] = dpp_xcalloc(s->spec.consumers, sizeof **rank_ptrs);
        fill_status(m, s, &sts[n], &rejs[n], ranks[n], rank_ptrs[n]);
        ptrs[n] = &sts[n];
        n++;
    }
    size_t nw = live_workers(m), k = 0;
    Dpp__WorkerStatus *ws = dpp_xcalloc(nw + 1, sizeof *ws);
    Dpp__WorkerStatus **wptrs = dpp_xcalloc(nw + 1, sizeof *wptrs);
    int64_t now = dpp_now_ms();
    for (peer_t *w = m->peers; w && k < nw; w = w->next) {
        if (w->role != ROLE_WORKER || w->worker_id == 0)
            continue;
        dpp__worker_status__init(&ws[k]);
        ws[k].worker_id = w->worker_id;
        ws[k].data_addr = w->data_addr;
        ws[k].threads = w->threads;
        ws[k].splits_leased = worker_leases(m, w->worker_id);
        ws[k].silent_ms = (uint32_t)(now - w->last_seen_ms);
        wptrs[k] = &ws[k];
        k++;
    }
    if (req->session_id[0] && n == 0) {
        dpp_conn_send_error(&p->conn, DPP_ENOSESSION, "no session \"%s\"", req->session_id);
    } else {
        Dpp__StatusReply reply = DPP__STATUS_REPLY__INIT;
        reply.n_sessions = n;
        reply.sessions = ptrs;
        reply.n_workers = k;
        reply.workers = wptrs;
        dpp_conn_send(&p->conn, DPP_MSG_STATUS_REPLY, &reply.base);
    }
    for (size_t i = 0; i < n; i++) {
        free(ranks[i]);
        free(rank_ptrs[i]);
    }
    free(ranks);
    free(rank_ptrs);
    free(ws);
    free(wptrs);
    free(ptrs);
    free(rejs);
    free(sts);
}

/* Ends a session that is indexing or running: it fails with "cancelled"
 * (journaled), so its clients learn it and nothing more of it is leased. A
 * session already over is left as it is. */
static void handle_cancel(peer_t *p, const Dpp__CancelRequest *req)
{
    dpp_session_t *s = find_session(p->m, req->session_id);
    if (s == NULL) {
        dpp_conn_send_error(&p->conn, DPP_ENOSESSION, "no session \"%s\"", req->session_id);
        return;
    }
    Dpp__CancelReply r = DPP__CANCEL_REPLY__INIT;
    r.session_id = s->id;
    r.state = (char *)dpp_session_state_name(s->state);
    if (s->state == SESSION_INDEXING || s->state == SESSION_RUNNING) {
        fail_session(p->m, s, "cause=cancel", "cancelled (dppctl cancel)");
        p->m->n.cancels++;
    }
    dpp_conn_send(&p->conn, DPP_MSG_CANCEL_REPLY, &r.base);
}

static void handle_register(peer_t *p, const Dpp__RegisterRequest *req)
{
    dpp_master_t *m = p->m;
    struct sockaddr_storage ss;
    if (p->worker_id != 0 || dpp_addr_parse(req->data_addr, &ss) != 0) {
        dpp_conn_send_error(&p->conn, DPP_EINVAL, "register: bad data address \"%s\"",
                            req->data_addr);
        dpp_conn_close(&p->conn, DPP_EINVAL);
        return;
    }
    p->worker_id = ++m->next_worker_id;
    snprintf(p->data_addr, sizeof p->data_addr, "%s", req->data_addr);
    p->threads = req->threads;
    p->last_seen_ms = dpp_now_ms();
    DPP_INFO("worker_registered worker=%" PRIu64 " peer=%s data_addr=%s threads=%u", p->worker_id,
             p->conn.peer, p->data_addr, req->threads);
    Dpp__RegisterReply reply = DPP__REGISTER_REPLY__INIT;
    reply.worker_id = p->worker_id;
    reply.heartbeat_ms = m->heartbeat_ms;
    reply.lease_timeout_ms = m->worker_timeout_ms;
    dpp_conn_send(&p->conn, DPP_MSG_REGISTER_REPLY, &reply.base);
}

/* The split a SPLIT_DONE names: its current lease (the worker echoes the
 * session and split, so this is direct), or (*late = 1, *split meaningless)
 * a lease of the epoch before, whose split its client consumed before the
 * worker's SPLIT_DONE arrived. A lease that is neither is stale: NULL. */
static dpp_session_t *find_split_lease(dpp_master_t *m, const Dpp__SplitDone *msg, size_t *split,
                                       int *late)
{
    dpp_session_t *s = find_session(m, msg->session_id);
    if (s == NULL)
        return NULL;
    if (msg->split_id < s->nsplits && s->splits[msg->split_id].lease.lease_id == msg->lease_id) {
        *split = msg->split_id;
        *late = 0;
        return s;
    }
    for (size_t i = 0; i < s->nprev; i++) {
        if (s->prev_leases[i] == msg->lease_id) {
            *split = 0;
            *late = 1;
            return s;
        }
    }
    return NULL;
}

/* The file whose index task a lease id names, if still current. */
static dpp_session_t *find_index_lease(dpp_master_t *m, uint64_t lease_id, size_t *file)
{
    for (size_t si = 0; si < m->nsessions; si++) {
        dpp_session_t *s = m->sessions[si];
        for (size_t i = 0; i < s->nfiles; i++) {
            if (s->files[i].index_lease.lease_id == lease_id) {
                *file = i;
                return s;
            }
        }
    }
    return NULL;
}

static void fail_session(dpp_master_t *m, dpp_session_t *s, const char *what, const char *message)
{
    char q[1100];
    DPP_ERROR("session_failed session=%s %s error=%s", s->id, what,
              dpp_log_quote(message, q, sizeof q));
    dpp_session_fail(s, message);
    Dpp__JournalFailed jf = DPP__JOURNAL_FAILED__INIT;
    jf.session_id = s->id;
    jf.error = (char *)message;
    dpp_journal_rec_t rec = pack_rec(J_FAILED, &jf.base);
    if (journal_put(m, &rec, 1) == 0)
        maybe_compact(m);
}

static void handle_split_done(peer_t *p, const Dpp__SplitDone *msg)
{
    size_t i;
    int late;
    dpp_session_t *s = find_split_lease(p->m, msg, &i, &late);
    if (s == NULL || s->state == SESSION_FAILED)
        return;
    dpp_split_t *sp = late ? NULL : &s->splits[i];
    /* The client may acknowledge a split before its worker's SPLIT_DONE
     * arrives (they travel different connections): then only the counters
     * are taken. Otherwise the split must still be leased to this worker; a
     * re-leased split's old lease is ignored. */
    int counters_only = late || sp->state == SPLIT_CONSUMED;
    if (!counters_only && (sp->lease.worker_id != p->worker_id || sp->state != SPLIT_LEASED))
        return;
    add_rejects(&s->rejects, msg->rejects);
    add_rejects(&p->m->n.rejects, msg->rejects);
    s->rows_filtered += msg->rows_filtered;
    s->rows_produced += msg->rows;
    p->m->n.rows_filtered += msg->rows_filtered;
    p->m->n.rows_produced += msg->rows;
    p->m->n.bytes_read += msg->bytes_read;
    if (counters_only)
        return;
    if (msg->error_code != 0) {
        fail_session(p->m, s, "cause=split", msg->error_message);
        return;
    }
    sp->rows = msg->rows;
    dpp_session_set(s, i, SPLIT_PRODUCED);
    DPP_DEBUG("split_produced session=%s epoch=%u split=%zu rows=%" PRIu64 " blocks=%u", s->id,
              s->epoch, i, msg->rows, msg->blocks);
}

static void handle_index_done(peer_t *p, const Dpp__IndexDone *msg)
{
    dpp_master_t *m = p->m;
    size_t i;
    dpp_session_t *s = find_index_lease(m, msg->lease_id, &i);
    if (s == NULL || s->files[i].index_lease.worker_id != p->worker_id ||
        s->state != SESSION_INDEXING)
        return;
    dpp_file_t *f = &s->files[i];
    if (msg->error_code != 0) {
        fail_session(m, s, "cause=index", msg->error_message);
        return;
    }
    if (msg->n_boundaries == 0 || msg->n_boundaries - 1 > msg->records ||
        (msg->records > 0 &&
         msg->n_boundaries - 1 != (msg->records + s->spec.split_rows - 1) / s->spec.split_rows)) {
        char text[512];
        snprintf(text, sizeof text, "file %s: worker sent an inconsistent index", f->rel_path);
        fail_session(m, s, "cause=index", text);
        return;
    }
    add_rejects(&s->rejects, msg->rejects);
    if (msg->reject_detail[0]) {
        char q[600];
        DPP_WARN("file_tail_rejected session=%s file=%s detail=%s", s->id, f->rel_path,
                 dpp_log_quote(msg->reject_detail, q, sizeof q));
        if (s->spec.on_corrupt_fail) {
            char text[1100];
            snprintf(text, sizeof text, "%s (on_corrupt: fail)", msg->reject_detail);
            fail_session(m, s, "cause=corrupt", text);
            return;
        }
    }
    /* The worker saw the file as it is now; trust its size and mtime for the
     * cache only if they match what the session listed. */
    Dpp__JournalIndexed ji = DPP__JOURNAL_INDEXED__INIT;
    ji.session_id = s->id;
    ji.file = (uint32_t)i;
    ji.records = msg->records;
    ji.n_boundaries = msg->n_boundaries;
    ji.boundaries = msg->boundaries;
    dpp_journal_rec_t rec = pack_rec(J_INDEXED, &ji.base);
    if (journal_put(m, &rec, 1) != 0)
        return;
    int planned = dpp_session_file_indexed(s, i, msg->records, msg->boundaries, msg->n_boundaries);
    if (msg->file_size == f->size && msg->file_mtime_ns == f->mtime_ns && !msg->reject_detail[0])
        cache_put(m, f, s->spec.split_rows);
    m->n.index_done++;
    DPP_DEBUG("file_indexed session=%s file=%s records=%" PRIu64 " splits=%zu sidecar=%d", s->id,
              f->rel_path, msg->records, msg->n_boundaries - 1, msg->from_sidecar);
    if (s->state != SESSION_INDEXING)
        DPP_INFO("session_planned session=%s files=%zu splits=%zu state=%s", s->id, s->nfiles,
                 s->nsplits, dpp_session_state_name(s->state));
    if (planned)
        grant_leases(m);
    maybe_compact(m);
}

static void handle_attach(peer_t *p, const Dpp__AttachRequest *req)
{
    int newly_present = 0;
    dpp_master_t *m = p->m;
    dpp_session_t *s = find_session(m, req->session_id);
    if (s == NULL) {
        dpp_conn_send_error(&p->conn, DPP_ENOSESSION, "no session \"%s\"", req->session_id);
        return;
    }
    if (req->rank >= s->spec.consumers) {
        dpp_conn_send_error(&p->conn, DPP_ERANK, "rank %u: session %s has %u consumers", req->rank,
                            s->id, s->spec.consumers);
        return;
    }
    if (req->resume) {
        /* journaled first: a restarted master must not hand the rank what
         * the token says it already has */
        Dpp__JournalResume jr = DPP__JOURNAL_RESUME__INIT;
        jr.session_id = s->id;
        jr.rank = req->rank;
        jr.epoch = req->resume_epoch;
        jr.seq = req->resume_seq;
        dpp_journal_rec_t rec = pack_rec(J_RESUME, &jr.base);
        int rc = journal_put(m, &rec, 1);
        if (rc == 0)
            rc = dpp_session_resume(s, req->rank, req->resume_epoch, req->resume_seq);
        if (rc) {
            dpp_conn_send_error(&p->conn, rc,
                                "rank %u of session %s cannot resume at epoch %u split %u%s",
                                req->rank, s->id, req->resume_epoch, req->resume_seq,
                                rc == DPP_ETOKEN ? ": not a position of this session" : "");
            return;
        }
        m->n.resumes++;
        DPP_INFO("rank_resumed session=%s rank=%u epoch=%u seq=%u now_epoch=%u", s->id, req->rank,
                 req->resume_epoch, req->resume_seq, s->epoch);
    }
    if (req->prefetch_splits > 0)
        s->rank_prefetch[req->rank] = req->prefetch_splits;
    if (req->open_ns > 0) { /* the trainer's side, for /metrics */
        dpp_rank_report_t *rep = &s->reports[req->rank];
        rep->batches = req->batches;
        rep->wait_ns = req->wait_ns;
        rep->open_ns = req->open_ns;
        for (size_t i = 0; i < 16 && i < req->n_wait_hist; i++)
            rep->hist[i] = req->wait_hist[i];
    }
    int64_t now = dpp_now_ms();
    int64_t *seen = &s->rank_seen_ms[req->rank];
    newly_present = *seen == 0 || now - *seen > RANK_ABSENT_MS;
    *seen = req->detach ? 0 : now; /* a closing client: nothing more for this rank */
    Dpp__AttachReply r = DPP__ATTACH_REPLY__INIT;
    r.session_id = s->id;
    r.rank = req->rank;
    r.consumers = s->spec.consumers;
    r.epochs = s->spec.epochs;
    r.batch_size = s->spec.batch_size;
    r.rank_splits_per_epoch =
        s->state == SESSION_INDEXING ? 0 : (uint32_t)dpp_session_rank_splits(s, req->rank);
    r.keep_remainder = s->spec.remainder == DPP_REMAINDER_KEEP;
    r.pad_batches = (uint32_t)dpp_session_pad_batches(s);
    r.order_fastest = s->spec.order_fastest;
    r.remainder_pad = s->spec.remainder == DPP_REMAINDER_PAD;
    r.rank_records = dpp_session_rank_records(s, req->rank);
    r.rank_records_exact = s->state != SESSION_INDEXING && s->spec.nfilters == 0;
    r.n_dense_names = r.n_dense_dims = s->spec.ndense;
    r.dense_names = dpp_xcalloc(s->spec.ndense + 1, sizeof(char *));
    r.dense_dims = dpp_xcalloc(s->spec.ndense + 1, sizeof(uint32_t));
    for (unsigned i = 0; i < s->spec.ndense; i++) {
        r.dense_names[i] = s->spec.dense[i].name;
        r.dense_dims[i] = s->spec.dense[i].dim;
    }
    r.n_sparse_names = r.n_sparse_weighted = s->spec.nsparse;
    r.sparse_names = dpp_xcalloc(s->spec.nsparse + 1, sizeof(char *));
    r.sparse_weighted = dpp_xcalloc(s->spec.nsparse + 1, sizeof(protobuf_c_boolean));
    for (unsigned k = 0; k < s->spec.nsparse; k++) {
        r.sparse_names[k] = s->spec.sparse[k].name;
        r.sparse_weighted[k] = s->spec.sparse[k].weights != NULL;
    }
    r.label_name = s->spec.label;
    r.workers = dpp_xcalloc(live_workers(m) + 1, sizeof(char *));
    for (peer_t *w = m->peers; w; w = w->next)
        if (w->role == ROLE_WORKER && w->worker_id != 0)
            r.workers[r.n_workers++] = w->data_addr;
    r.state = (char *)dpp_session_state_name(s->state);
    r.error = s->error ? s->error : (char *)"";
    dpp_conn_send(&p->conn, DPP_MSG_ATTACH_REPLY, &r.base);
    /* new splits may have come into a resumed or faster-prefetching rank's
     * reach as well */
    newly_present |= req->resume || req->prefetch_splits > 0;
    free(r.dense_names);
    free(r.dense_dims);
    free(r.sparse_names);
    free(r.sparse_weighted);
    free(r.workers);
    if (newly_present)
        grant_leases(m);
}

static void handle_consumed(peer_t *p, const Dpp__SplitConsumed *msg)
{
    dpp_master_t *m = p->m;
    dpp_session_t *s = find_session(m, msg->session_id);
    if (s == NULL || s->state != SESSION_RUNNING || msg->epoch != s->epoch ||
        msg->split_id >= s->nsplits || dpp_session_rank_of(s, msg->split_id) != msg->rank)
        return; /* late or foreign acknowledgement: nothing to change */
    if (s->splits[msg->split_id].state == SPLIT_CONSUMED)
        return; /* a repeated acknowledgement */
    Dpp__JournalConsumed jc = DPP__JOURNAL_CONSUMED__INIT;
    jc.session_id = s->id;
    jc.epoch = msg->epoch;
    jc.split_id = msg->split_id;
    dpp_journal_rec_t rec = pack_rec(J_CONSUMED, &jc.base);
    if (journal_put(m, &rec, 1) != 0)
        return;
    unsigned epoch = s->epoch;
    m->n.splits_consumed++;
    int more = dpp_session_consumed(s, msg->split_id);
    if (s->state == SESSION_DONE)
        DPP_INFO("session_done session=%s rows=%" PRIu64 " rejected=%" PRIu64, s->id,
                 s->rows_produced, rejects_total(&s->rejects));
    else if (more)
        DPP_INFO("epoch_done session=%s epoch=%u", s->id, epoch);
    grant_leases(m); /* a new epoch, or (order deterministic) splits within reach */
    maybe_compact(m);
}

static int expect_role(peer_t *p, uint16_t type, peer_role_t role)
{
    if (p->role == role)
        return 1;
    dpp_conn_send_error(&p->conn, DPP_EMSGTYPE, "%s is not a %s message", dpp_msg_name(type),
                        role_name(p->role));
    dpp_conn_close(&p->conn, DPP_EMSGTYPE);
    return 0;
}

static void handle_hello(peer_t *p, const Dpp__Hello *h)
{
    if (h->version != DPP_PROTOCOL_VERSION) {
        dpp_conn_send_error(&p->conn, DPP_EVERSION, "protocol version %u, master speaks %u",
                            h->version, DPP_PROTOCOL_VERSION);
        dpp_conn_close(&p->conn, DPP_EVERSION);
        return;
    }
    if (strcmp(h->role, "ctl") == 0)
        p->role = ROLE_CTL;
    else if (strcmp(h->role, "worker") == 0)
        p->role = ROLE_WORKER;
    else if (strcmp(h->role, "client") == 0)
        p->role = ROLE_CLIENT;
    else {
        dpp_conn_send_error(&p->conn, DPP_EINVAL, "unknown role \"%s\"", h->role);
        dpp_conn_close(&p->conn, DPP_EINVAL);
        return;
    }
    Dpp__HelloReply reply = DPP__HELLO_REPLY__INIT;
    reply.version = DPP_PROTOCOL_VERSION;
    int rc = dpp_auth_reply(&p->m->auth, &p->auth, h, &reply);
    if (rc) {
        dpp_conn_close(&p->conn, rc);
        return;
    }
    dpp_conn_send(&p->conn, DPP_MSG_HELLO_REPLY, &reply.base);
}

/* A peer's AUTH (or, while one is due, any other frame). Returns 1 when
 * the frame was an authentication step, handled here. */
static int authenticate(peer_t *p, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    if (!p->auth.pending && f->type != DPP_MSG_AUTH)
        return 0;
    char err[256];
    int rc = DPP_EAUTH;
    if (!p->auth.pending)
        snprintf(err, sizeof err, "unexpected AUTH");
    else if (f->type != DPP_MSG_AUTH)
        snprintf(err, sizeof err, "authentication required: this master has a cluster token");
    else
        rc = dpp_auth_check(&p->m->auth, &p->auth, role_name(p->role), (const Dpp__Auth *)msg, err,
                            sizeof err);
    if (rc) {
        p->m->auth_failures++;
        DPP_WARN("auth_failed peer=%s role=%s reason=\"%s\"", p->conn.peer, role_name(p->role),
                 err);
        dpp_conn_send_error(&p->conn, rc, "%s", err);
        dpp_conn_close(&p->conn, rc);
    }
    return 1;
}

static void on_peer_frame(dpp_conn_t *c, const dpp_frame_t *f)
{
    peer_t *p = dpp_container_of(c, peer_t, conn);
    ProtobufCMessage *msg = dpp_frame_unpack(f);
    if (msg == NULL) {
        dpp_conn_send_error(c, DPP_EMSG, "%s message does not decode", dpp_msg_name(f->type));
        dpp_conn_close(c, DPP_EMSG);
        return;
    }
    p->last_seen_ms = dpp_now_ms();
    if (p->role == ROLE_NONE && f->type != DPP_MSG_HELLO) {
        dpp_conn_send_error(c, DPP_EMSGTYPE, "expected HELLO, got %s", dpp_msg_name(f->type));
        dpp_conn_close(c, DPP_EMSGTYPE);
        goto out;
    }
    if (authenticate(p, f, msg))
        goto out;
    switch (f->type) {
    case DPP_MSG_HELLO:
        if (p->role != ROLE_NONE) {
            dpp_conn_send_error(c, DPP_EMSGTYPE, "second HELLO");
            dpp_conn_close(c, DPP_EMSGTYPE);
            break;
        }
        handle_hello(p, (Dpp__Hello *)msg);
        break;
    case DPP_MSG_SUBMIT:
        if (expect_role(p, f->type, ROLE_CTL))
            handle_submit(p, (Dpp__SubmitRequest *)msg);
        break;
    case DPP_MSG_STATUS:
        handle_status(p, (Dpp__StatusRequest *)msg);
        break;
    case DPP_MSG_CANCEL:
        if (expect_role(p, f->type, ROLE_CTL))
            handle_cancel(p, (Dpp__CancelRequest *)msg);
        break;
    case DPP_MSG_REGISTER:
        if (expect_role(p, f->type, ROLE_WORKER))
            handle_register(p, (Dpp__RegisterRequest *)msg);
        break;
    case DPP_MSG_HEARTBEAT:
        if (expect_role(p, f->type, ROLE_WORKER) && p->worker_id != 0) {
            Dpp__Heartbeat echo = DPP__HEARTBEAT__INIT;
            echo.worker_id = p->worker_id;
            dpp_conn_send(c, DPP_MSG_HEARTBEAT, &echo.base);
        }
        break;
    case DPP_MSG_LEASE:
        if (expect_role(p, f->type, ROLE_WORKER) && p->worker_id != 0) {
            unsigned want = ((Dpp__LeaseRequest *)msg)->max_leases;
            if (p->lease_want == 0)
                p->lease_since_ns = dpp_now_ns();
            p->lease_want = want > 64 ? 64 : want;
            grant_leases(p->m);
        }
        break;
    case DPP_MSG_SPLIT_DONE:
        if (expect_role(p, f->type, ROLE_WORKER))
            handle_split_done(p, (Dpp__SplitDone *)msg);
        break;
    case DPP_MSG_INDEX_DONE:
        if (expect_role(p, f->type, ROLE_WORKER))
            handle_index_done(p, (Dpp__IndexDone *)msg);
        break;
    case DPP_MSG_ATTACH:
        if (expect_role(p, f->type, ROLE_CLIENT))
            handle_attach(p, (Dpp__AttachRequest *)msg);
        break;
    case DPP_MSG_SPLIT_CONSUMED:
        if (expect_role(p, f->type, ROLE_CLIENT))
            handle_consumed(p, (Dpp__SplitConsumed *)msg);
        break;
    default:
        dpp_conn_send_error(c, DPP_EMSGTYPE, "unexpected %s", dpp_msg_name(f->type));
        dpp_conn_close(c, DPP_EMSGTYPE);
    }
out:
    protobuf_c_message_free_unpacked(msg, NULL);
}

static void on_connection(uv_stream_t *server, int status)
{
    dpp_master_t *m = dpp_container_of(server, dpp_master_t, listener);
    if (status < 0) {
        DPP_WARN("accept_failed error=\"%s\"", uv_strerror(status));
        return;
    }
    peer_t *p = dpp_xcalloc(1, sizeof *p);
    p->m = m;
    if (dpp_conn_init(m->loop, &p->conn, on_peer_frame, on_peer_closed, p) != 0) {
        free(p);
        return;
    }
    p->next = m->peers;
    if (m->peers)
        m->peers->prev = p;
    m->peers = p;
    m->npeers++;
    p->accepted_ms = p->last_seen_ms = dpp_now_ms();
    if (m->max_msg)
        p->conn.limits.max_msg = m->max_msg;
    if (dpp_conn_accept(server, &p->conn) != 0) {
        dpp_conn_close(&p->conn, DPP_ECLOSED);
    } else if (m->npeers > m->max_connections) {
        /* accepted only to be told: the others keep their service */
        m->refused_connections++;
        DPP_WARN("connection_refused peer=%s reason=\"over --max-connections %u\"", p->conn.peer,
                 m->max_connections);
        dpp_conn_send_error(&p->conn, DPP_ECLOSED, "too many connections (the master allows %u)",
                            m->max_connections);
        dpp_conn_close(&p->conn, DPP_ECLOSED);
    }
}

/* Drops workers that stopped heartbeating; their splits go to others. */
static void on_timer(uv_timer_t *t)
{
    dpp_master_t *m = dpp_container_of(t, dpp_master_t, timer);
    int64_t now = dpp_now_ms();
    for (peer_t *p = m->peers; p; p = p->next) {
        if ((p->role == ROLE_NONE || p->auth.pending) && !p->conn.closing &&
            now - p->accepted_ms > (int64_t)m->handshake_ms) {
            m->handshake_timeouts++;
            DPP_WARN("handshake_timeout peer=%s ms=%u", p->conn.peer, m->handshake_ms);
            dpp_conn_send_error(&p->conn, DPP_ETIMEDOUT, "no %s within %u ms",
                                p->role == ROLE_NONE ? "HELLO" : "AUTH", m->handshake_ms);
            dpp_conn_close(&p->conn, DPP_ETIMEDOUT);
            continue;
        }
        /* clients refresh every second, dppctl asks once: silence is a
         * peer gone without closing (workers have their own timeout) */
        if ((p->role == ROLE_CTL || p->role == ROLE_CLIENT) && !p->conn.closing &&
            now - p->last_seen_ms > (int64_t)m->idle_ms) {
            m->idle_timeouts++;
            DPP_INFO("idle_timeout peer=%s role=%s ms=%u", p->conn.peer, role_name(p->role),
                     m->idle_ms);
            dpp_conn_send_error(&p->conn, DPP_ETIMEDOUT, "idle for %u ms", m->idle_ms);
            dpp_conn_close(&p->conn, DPP_ETIMEDOUT);
            continue;
        }
        if (p->role == ROLE_WORKER && p->worker_id != 0 &&
            now - p->last_seen_ms > (int64_t)m->worker_timeout_ms) {
            DPP_WARN("worker_timeout worker=%" PRIu64 " silent_ms=%" PRId64, p->worker_id,
                     now - p->last_seen_ms);
            dpp_conn_close(&p->conn, DPP_ETIMEDOUT);
        }
    }
}

/* Rebuilds one journaled change. A record that no longer applies (its
 * session gone, an epoch already past) is skipped: replay must reach the
 * state the master had acknowledged, never refuse to start over one record. */
static int replay_record(void *arg, uint8_t type, const uint8_t *payload, size_t len)
{
    dpp_master_t *m = arg;
    const ProtobufCMessageDescriptor *d = type == J_SESSION    ? &dpp__journal_session__descriptor
                                          : type == J_INDEXED  ? &dpp__journal_indexed__descriptor
                                          : type == J_CONSUMED ? &dpp__journal_consumed__descriptor
                                          : type == J_FAILED   ? &dpp__journal_failed__descriptor
                                          : type == J_EPOCH    ? &dpp__journal_epoch__descriptor
                                          : type == J_RESUME   ? &dpp__journal_resume__descriptor
                                                               : NULL;
    if (d == NULL) {
        DPP_WARN("journal_record_skipped type=%u reason=\"unknown type\"", type);
        return 0;
    }
    ProtobufCMessage *msg = protobuf_c_message_unpack(d, NULL, len, payload);
    if (msg == NULL)
        return DPP_EMSG; /* CRC-valid but not ours: stop rather than guess */
    if (type == J_SESSION) {
        const Dpp__JournalSession *js = (const Dpp__JournalSession *)msg;
        dpp_spec_t spec;
        char err[DPP_SPEC_ERRLEN];
        if (find_session(m, js->session_id) == NULL &&
            dpp_spec_parse(js->spec_json, strlen(js->spec_json), &spec, err, sizeof err) == 0) {
            char **files = dpp_xcalloc(js->n_files + 1, sizeof *files);
            for (size_t i = 0; i < js->n_files; i++)
                files[i] = dpp_xstrdup(js->files[i]);
            dpp_session_t *s = dpp_session_new(js->session_id, &spec, dpp_xstrdup(js->table_path),
                                               files, js->n_files);
            m->sessions = dpp_xrealloc(m->sessions, (m->nsessions + 1) * sizeof *m->sessions);
            m->sessions[m->nsessions++] = s;
        }
    } else if (type == J_INDEXED) {
        const Dpp__JournalIndexed *ji = (const Dpp__JournalIndexed *)msg;
        dpp_session_t *s = find_session(m, ji->session_id);
        if (s && ji->file < s->nfiles && ji->n_boundaries > 0) {
            dpp_session_file_indexed(s, ji->file, ji->records, ji->boundaries, ji->n_boundaries);
            if (s->files[ji->file].indexed)
                cache_put(m, &s->files[ji->file], s->spec.split_rows);
        }
    } else if (type == J_CONSUMED) {
        const Dpp__JournalConsumed *jc = (const Dpp__JournalConsumed *)msg;
        dpp_session_t *s = find_session(m, jc->session_id);
        if (s && s->state == SESSION_RUNNING && jc->epoch == s->epoch && jc->split_id < s->nsplits)
            dpp_session_consumed(s, jc->split_id);
    } else if (type == J_EPOCH) {
        const Dpp__JournalEpoch *je = (const Dpp__JournalEpoch *)msg;
        dpp_session_t *s = find_session(m, je->session_id);
        if (s && s->state == SESSION_RUNNING && je->epoch > s->epoch && je->epoch < s->spec.epochs)
            dpp_session_set_epoch(s, je->epoch);
    } else if (type == J_RESUME) {
        const Dpp__JournalResume *jr = (const Dpp__JournalResume *)msg;
        dpp_session_t *s = find_session(m, jr->session_id);
        if (s)
            dpp_session_resume(s, jr->rank, jr->epoch, jr->seq);
    } else {
        const Dpp__JournalFailed *jf = (const Dpp__JournalFailed *)msg;
        dpp_session_t *s = find_session(m, jf->session_id);
        if (s)
            dpp_session_fail(s, jf->error);
    }
    protobuf_c_message_free_unpacked(msg, NULL);
    return 0;
}

/* Appends to recs the records that rebuild session s. */
static void snapshot_session(dpp_session_t *s, dpp_journal_rec_t **recs, size_t *n, size_t *cap)
{
    size_t need = *n + 3 + s->nfiles + s->nsplits;
    if (need > *cap) {
        *cap = need * 2;
        *recs = dpp_xrealloc(*recs, *cap * sizeof **recs);
    }
    (*recs)[(*n)++] = session_rec(s);
    for (size_t i = 0; i < s->nfiles; i++)
        if (s->files[i].indexed)
            (*recs)[(*n)++] = indexed_rec(s, i);
    if (s->epoch > 0) {
        Dpp__JournalEpoch je = DPP__JOURNAL_EPOCH__INIT;
        je.session_id = s->id;
        je.epoch = s->epoch;
        (*recs)[(*n)++] = pack_rec(J_EPOCH, &je.base);
    }
    for (size_t i = 0; i < s->nsplits; i++) {
        if (s->splits[i].state != SPLIT_CONSUMED)
            continue;
        Dpp__JournalConsumed jc = DPP__JOURNAL_CONSUMED__INIT;
        jc.session_id = s->id;
        jc.epoch = s->epoch;
        jc.split_id = (uint32_t)i;
        (*recs)[(*n)++] = pack_rec(J_CONSUMED, &jc.base);
    }
    if (s->state == SESSION_FAILED) {
        Dpp__JournalFailed jf = DPP__JOURNAL_FAILED__INIT;
        jf.session_id = s->id;
        jf.error = s->error ? s->error : (char *)"";
        (*recs)[(*n)++] = pack_rec(J_FAILED, &jf.base);
    }
}

/* Rewrites the journal as a snapshot of the current state once it has grown
 * past the threshold and to more than twice its last snapshot. */
static void maybe_compact(dpp_master_t *m)
{
    dpp_journal_stats_t st;
    dpp_journal_get_stats(m->journal, &st);
    if (st.file_size <= m->journal_compact_bytes || st.file_size <= 2 * st.snapshot_bytes)
        return;
    dpp_journal_rec_t *recs = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < m->nsessions; i++)
        snapshot_session(m->sessions[i], &recs, &n, &cap);
    int rc = dpp_journal_compact(m->journal, recs, n);
    for (size_t i = 0; i < n; i++)
        free((void *)recs[i].payload);
    free(recs);
    if (rc) {
        DPP_ERROR("journal_compaction_failed dir=%s error=\"%s\" action=stopping", m->state_dir,
                  dpp_strerror(rc));
        m->failed = 1;
        dpp_master_stop(m);
        return;
    }
    DPP_INFO("journal_compacted dir=%s bytes_before=%" PRIu64 " records=%zu", m->state_dir,
             st.file_size, n);
}

static int lock_state_dir(dpp_master_t *m)
{
    if (mkdir(m->state_dir, 0750) != 0 && errno != EEXIST)
        return -errno;
    char path[4200];
    snprintf(path, sizeof path, "%s/master.lock", m->state_dir);
    m->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (m->lock_fd < 0)
        return -errno;
    if (flock(m->lock_fd, LOCK_EX | LOCK_NB) != 0)
        return errno == EWOULDBLOCK ? -EBUSY : -errno;
    return 0;
}

int dpp_master_new(dpp_master_t **out, uv_loop_t *loop, const dpp_master_config_t *cfg)
{
    dpp_master_t *m = dpp_xcalloc(1, sizeof *m);
    int rc;
    m->loop = loop;
    m->lock_fd = -1;
    m->heartbeat_ms = cfg->heartbeat_ms ? cfg->heartbeat_ms : 1000;
    if (cfg->auth)
        m->auth = *cfg->auth;
    m->handshake_ms = cfg->handshake_ms ? cfg->handshake_ms : 10000;
    m->idle_ms = cfg->idle_ms ? cfg->idle_ms : 60000;
    m->max_spec_bytes = cfg->max_spec_bytes ? cfg->max_spec_bytes : DPP_SPEC_MAX_BYTES;
    m->max_features = cfg->max_features ? cfg->max_features : DPP_SPEC_MAX_FEATURES;
    m->max_msg = cfg->max_msg_bytes;
    m->max_connections = cfg->max_connections ? cfg->max_connections : 1024;
    m->worker_timeout_ms = cfg->worker_timeout_ms ? cfg->worker_timeout_ms : 10000;
    m->journal_compact_bytes =
        cfg->journal_compact_bytes ? cfg->journal_compact_bytes : (size_t)64 << 20;
    m->state_dir = dpp_xstrdup(cfg->state_dir);
    m->roots = dpp_xcalloc(cfg->nroots + 1, sizeof *m->roots);
    for (size_t i = 0; i < cfg->nroots; i++) {
        m->roots[i] = realpath(cfg->roots[i], NULL);
        struct stat st;
        if (m->roots[i] == NULL || stat(m->roots[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            rc = m->roots[i] ? -ENOTDIR : -errno;
            DPP_ERROR("bad_data_root root=%s error=\"%s\"", cfg->roots[i], dpp_strerror(rc));
            m->nroots = i + 1;
            goto fail_early;
        }
    }
    m->nroots = cfg->nroots;
    rc = lock_state_dir(m);
    if (rc) {
        DPP_ERROR("state_dir_unusable dir=%s error=\"%s\"%s", m->state_dir, dpp_strerror(rc),
                  rc == -EBUSY ? " hint=\"another master uses it\"" : "");
        goto fail_early;
    }
    dpp_journal_report_t report;
    rc = dpp_journal_open(&m->journal, m->state_dir, replay_record, m, &report);
    if (rc) {
        DPP_ERROR("journal_unusable dir=%s error=\"%s\" detail=\"%s\"", m->state_dir,
                  dpp_strerror(rc), report.text);
        goto fail_early;
    }
    if (report.truncated)
        DPP_WARN("journal_torn_tail dir=%s torn_bytes=%" PRIu64 " detail=\"%s\"", m->state_dir,
                 report.torn_bytes, report.text);
    size_t running = 0;
    for (size_t i = 0; i < m->nsessions; i++)
        running +=
            m->sessions[i]->state == SESSION_RUNNING || m->sessions[i]->state == SESSION_INDEXING;
    DPP_INFO("journal_replayed dir=%s records=%" PRIu64 " sessions=%zu unfinished=%zu",
             m->state_dir, report.records, m->nsessions, running);
    struct sockaddr_storage ss;
    rc = dpp_addr_parse(cfg->listen, &ss);
    if (rc) {
        DPP_ERROR("bad_listen_address addr=%s", cfg->listen);
        goto fail_early;
    }
    uv_tcp_init(loop, &m->listener);
    uv_timer_init(loop, &m->timer);
    rc = uv_tcp_bind(&m->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&m->listener, 128, on_connection);
    if (rc) {
        DPP_ERROR("listen_failed addr=%s error=\"%s\"", cfg->listen, uv_strerror(rc));
        dpp_master_stop(m);
        uv_run(loop, UV_RUN_DEFAULT);
        dpp_master_free(m);
        return rc;
    }
    int len = sizeof ss;
    uv_tcp_getsockname(&m->listener, (struct sockaddr *)&ss, &len);
    dpp_addr_format((struct sockaddr *)&ss, m->addr, sizeof m->addr);
    uv_timer_start(&m->timer, on_timer, m->heartbeat_ms, m->heartbeat_ms);
    if (cfg->http && (rc = dpp_master_http_start(m, cfg->http)) != 0) {
        dpp_master_stop(m);
        uv_run(loop, UV_RUN_DEFAULT);
        dpp_master_free(m);
        return rc;
    }
    if (cfg->port_file && (rc = dpp_write_port_file(cfg->port_file, m->addr)) != 0)
        DPP_ERROR("port_file_failed path=%s error=\"%s\"", cfg->port_file, dpp_strerror(rc));
    DPP_INFO("master_listening addr=%s roots=%zu state_dir=%s", m->addr, m->nroots, m->state_dir);
    *out = m;
    return 0;

fail_early:
    dpp_master_free(m);
    return rc;
}

void dpp_master_stop(dpp_master_t *m)
{
    if (m->stopping)
        return;
    m->stopping = 1;
    dpp_master_http_stop(m);
    uv_close((uv_handle_t *)&m->listener, NULL);
    uv_close((uv_handle_t *)&m->timer, NULL);
    for (peer_t *p = m->peers; p; p = p->next)
        dpp_conn_close(&p->conn, DPP_ECLOSED);
}

void dpp_master_free(dpp_master_t *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nsessions; i++)
        dpp_session_free(m->sessions[i]);
    free(m->sessions);
    while (m->index_cache) {
        index_entry_t *e = m->index_cache;
        m->index_cache = e->next;
        free(e->path);
        free(e->bounds);
        free(e);
    }
    for (size_t i = 0; i < m->nroots; i++)
        free(m->roots[i]);
    free(m->roots);
    free(m->state_dir);
    dpp_journal_close(m->journal);
    if (m->lock_fd >= 0)
        close(m->lock_fd);
    free(m);
}

int dpp_master_failed(const dpp_master_t *m)
{
    return m->failed;
}

const char *dpp_master_addr(const dpp_master_t *m)
{
    return m->addr;
}
