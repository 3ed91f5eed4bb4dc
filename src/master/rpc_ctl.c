/* SPDX-License-Identifier: Apache-2.0 */
/* The master's dppctl requests: submit (validate, list, journal a new
 * session), status (sessions, ranks and workers), cancel. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/errtext.h"
#include "base/log.h"
#include "base/util.h"
#include "dpp/error.h"
#include "index_cache.h"
#include "lease.h"
#include "metrics.h"
#include "persist.h"
#include "pins.h"
#include "rpc_ctl.h"
#include "s3_table.h"
#include "spec/table.h"
#include "storage/s3.h"
#include "wire/conn.h"

/* Session ids: "s" and 16 hex digits of randomness. */
static void new_session_id(char *out, size_t len)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = dpp_now_ns() ^ ((uint64_t)getpid() << 32);
    snprintf(out, len, "s%016" PRIx64, r);
}

/* A refused spec's problems for the reply, one per line: as many as fit
 * (a spec holds at most 1 MiB; the reply says how many did not fit). */
typedef struct problems {
    char text[4000]; /* dpp_conn_send_error() sends at most 4095 bytes */
    size_t len;
    unsigned n, left_out;
} problems_t;

static void add_problem(void *arg, const char *problem)
{
    problems_t *ps = arg;
    size_t need = strlen(problem) + (ps->n ? 1 : 0);
    if (ps->left_out || ps->len + need + 40 >= sizeof ps->text) {
        ps->left_out++;
        return;
    }
    ps->len += (size_t)snprintf(ps->text + ps->len, sizeof ps->text - ps->len, "%s%s",
                                ps->n ? "\n" : "", problem);
    ps->n++;
}

/* A submit's table is listed off the loop thread: a prefix of 100,000
 * objects is 100 pages of a store's listing (seconds), a local table as many
 * directory entries, and the loop thread meanwhile serves workers, clients
 * and other submits. A local table is listed on libuv's threadpool; one in
 * an object store (a mixture with any) on a thread of its own, so that a
 * store that answers a few bytes a second holds only its own listings, never
 * the threadpool a local submit needs, and it can be stopped (its submitter
 * went, the master stops) within 100 ms. The job owns the parsed spec until
 * the listing is in. */
struct dpp_submit_job {
    uv_work_t work;     /* a local table's listing */
    uv_async_t listed;  /* an object store's: its thread is done */
    uv_thread_t thread; /* ... and that thread */
    int s3;             /* listed on a thread of its own */
    int started;        /* s3: its thread was started (else it waits in m->s3_queue) */
    int stop;           /* s3: set (atomically) once no one waits for the answer */
    uint64_t deadline_ns;
    struct dpp_submit_job *next; /* in m->s3_queue */
    dpp_master_t *m;
    peer_t *peer; /* NULL once it closed: the answer has no one to go to */
    dpp_spec_t spec;
    char **table_paths; /* [nsources, or 1] */
    char **files;
    size_t nfiles;
    char **etags;       /* [nfiles]: an object's ETag, NULL for a local file */
    uint64_t *sizes;    /* [nfiles] */
    uint32_t *sources;  /* [nfiles]: a mixture's source of each */
    int rc;
    char err[DPP_SPEC_ERRLEN];
};

static void reject_submit(peer_t *p, int rc, const char *text, unsigned nproblems)
{
    char q[DPP_SPEC_ERRLEN + 64];
    DPP_INFO("session_rejected peer=%s error=%s problems=%u", p->base.conn.peer,
             dpp_log_quote(text, q, sizeof q), nproblems);
    dpp_conn_send_error(&p->base.conn, rc, "%s", text);
}

static unsigned job_tables(const struct dpp_submit_job *j)
{
    return j->spec.nsources ? j->spec.nsources : 1;
}

static void submit_job_free(struct dpp_submit_job *j)
{
    for (unsigned i = 0; j->table_paths && i < job_tables(j); i++)
        free(j->table_paths[i]);
    free(j->table_paths);
    for (size_t i = 0; j->etags && i < j->nfiles; i++)
        free(j->etags[i]);
    free(j->etags);
    free(j->sizes);
    free(j->sources);
    dpp_table_files_free(j->files, j->nfiles);
    dpp_spec_close(&j->spec);
    free(j);
}

/* Lists one table (a mixture's source, or the session's) and appends its
 * files. Threadpool. */
static int list_one(struct dpp_submit_job *j, unsigned source, dpp_spec_t *spec, char *err,
                    size_t errlen)
{
    const dpp_master_t *m = j->m;
    dpp_s3_table_t obj = {0};
    char **files = NULL;
    size_t n = 0;
    int rc;
    if (dpp_s3_is_url(spec->table)) {
        rc = dpp_master_list_s3(m, spec, &j->stop, j->deadline_ns, &obj, err, errlen);
        j->table_paths[source] = obj.table_path;
        obj.table_path = NULL;
        files = obj.files;
        n = obj.n;
    } else {
        rc = dpp_table_resolve((const char *const *)m->roots, m->nroots, spec->table,
                               &j->table_paths[source], err, errlen);
        if (rc == 0)
            rc = dpp_table_list_files(j->table_paths[source], spec, &files, &n, err, errlen);
    }
    if (rc == 0)
        rc = dpp_master_pin_files(m, spec, j->table_paths[source], j->deadline_ns, &j->stop, err,
                                  errlen);
    if (rc == 0 && n == 0 && j->spec.nsources > 0)
        rc = dpp_errf(DPP_ESPEC, err, errlen, "table \"%s\": no data files in the selected "
                                              "partitions",
                      spec->table);
    if (rc == 0) {
        size_t all = j->nfiles + n;
        j->files = dpp_xrealloc(j->files, (all + 1) * sizeof *j->files);
        j->etags = dpp_xrealloc(j->etags, (all + 1) * sizeof *j->etags);
        j->sizes = dpp_xrealloc(j->sizes, (all + 1) * sizeof *j->sizes);
        j->sources = dpp_xrealloc(j->sources, (all + 1) * sizeof *j->sources);
        for (size_t k = 0; k < n; k++, j->nfiles++) {
            j->files[j->nfiles] = files[k];
            j->etags[j->nfiles] = obj.etags ? obj.etags[k] : NULL;
            j->sizes[j->nfiles] = obj.sizes ? obj.sizes[k] : 0;
            j->sources[j->nfiles] = source;
            files[k] = NULL;
            if (obj.etags)
                obj.etags[k] = NULL;
        }
    }
    if (files != obj.files)
        dpp_table_files_free(files, n);
    dpp_s3_table_close(&obj);
    return rc;
}

/* Threadpool: the table's files, or the error in j->rc and j->err. Reads
 * only what the master fixed at start (its roots). */
static void list_table(uv_work_t *w)
{
    struct dpp_submit_job *j = w->data;
    j->table_paths = dpp_xcalloc(job_tables(j), sizeof *j->table_paths);
    if (j->spec.nsources == 0) {
        j->rc = list_one(j, 0, &j->spec, j->err, sizeof j->err);
        return;
    }
    for (unsigned i = 0; i < j->spec.nsources && j->rc == 0; i++) {
        char why[DPP_SPEC_ERRLEN - 32];
        j->rc = list_one(j, i, &j->spec.sources[i].spec, why, sizeof why);
        if (j->rc)
            snprintf(j->err, sizeof j->err, "sources[%u]: %s", i, why);
    }
}

/* Loop thread, the table listed: journals the new session and answers. */
static void start_session(peer_t *p, struct dpp_submit_job *j)
{
    dpp_master_t *m = p->m;
    if (j->rc != 0) {
        reject_submit(p, j->rc, j->err, 1);
        return;
    }
    if (j->nfiles == 0) {
        snprintf(j->err, sizeof j->err, "table \"%s\": no data files in the selected partitions",
                 j->spec.table);
        reject_submit(p, DPP_ESPEC, j->err, 1);
        return;
    }
    char id[24];
    new_session_id(id, sizeof id);
    unsigned ntables = job_tables(j);
    dpp_session_t *s = dpp_session_new(id, &j->spec, j->table_paths[0], j->files, j->nfiles);
    memset(&j->spec, 0, sizeof j->spec); /* the session's now, as are the files */
    for (size_t i = 0; i < s->nfiles; i++)
        if (j->etags[i])
            dpp_session_file_object(s, i, j->etags[i], j->sizes[i]);
    if (ntables > 1)
        dpp_session_set_sources(s, j->table_paths, j->sources); /* takes them */
    else
        free(j->table_paths);
    j->table_paths = NULL;
    j->files = NULL;
    size_t cached = dpp_master_index_cache_apply(m, s);
    /* Journaled (the files indexed from the cache too, so that a replay does
     * not depend on it) before the submit is answered. */
    dpp_journal_rec_t *recs = dpp_xcalloc(1 + s->nfiles, sizeof *recs);
    size_t nrecs = 0;
    recs[nrecs++] = dpp_master_session_rec(s);
    for (size_t i = 0; i < s->nfiles; i++)
        if (s->files[i].indexed)
            recs[nrecs++] = dpp_master_indexed_rec(s, i);
    int rc = dpp_master_journal_put_now(m, recs, nrecs);
    free(recs);
    if (rc) {
        snprintf(j->err, sizeof j->err, "state dir %s: journal: %s", m->state_dir,
                 dpp_strerror(rc));
        dpp_session_free(s);
        reject_submit(p, rc, j->err, 1);
        return;
    }
    dpp_master_add_session(m, s);
    m->n.sessions_submitted++;
    if (s->state != SESSION_INDEXING) /* planned from the index cache */
        dpp_master_count_planning(m, s);
    if (s->state == SESSION_DONE)
        dpp_master_session_done(m, s);
    DPP_INFO("session_submitted session=%s table=%s files=%zu files_indexed=%zu state=%s "
             "epochs=%u consumers=%u",
             s->id, s->spec.table, s->nfiles, cached, dpp_session_state_name(s->state),
             s->spec.epochs, s->spec.consumers);
    Dpp__SubmitReply reply = DPP__SUBMIT_REPLY__INIT;
    reply.session_id = s->id;
    dpp_conn_send(&p->base.conn, DPP_MSG_SUBMIT_REPLY, &reply.base);
    dpp_master_grant_soon(m);
    dpp_master_maybe_compact(m);
}

/* Loop thread, the listing over: the answer, or why there is none. */
static void answer_job(struct dpp_submit_job *j)
{
    peer_t *p = j->peer;
    if (p != NULL) {
        p->submit = NULL;
        if (!j->m->stopping)
            start_session(p, j);
    } else {
        char q[DPP_SPEC_ERRLEN + 64];
        DPP_INFO("submit_dropped table=%s reason=\"its connection closed while the table was "
                 "listed\" listing=%s",
                 j->spec.table,
                 j->rc == -ECANCELED ? "stopped"
                                     : dpp_log_quote(j->rc ? j->err : "done", q, sizeof q));
    }
}

static void table_listed(uv_work_t *w, int status)
{
    (void)status; /* the master cancels nothing on the threadpool: the listing always ran */
    struct dpp_submit_job *j = w->data;
    answer_job(j);
    submit_job_free(j);
}

static void s3_listing_thread(void *arg)
{
    struct dpp_submit_job *j = arg;
    list_table(&j->work);
    uv_async_send(&j->listed); /* j is the loop thread's again */
}

static void s3_job_closed(uv_handle_t *h)
{
    submit_job_free(dpp_container_of(h, struct dpp_submit_job, listed));
}

static void s3_listings_start(dpp_master_t *m);

static void s3_job_listed(uv_async_t *a)
{
    struct dpp_submit_job *j = dpp_container_of(a, struct dpp_submit_job, listed);
    dpp_master_t *m = j->m;
    uv_thread_join(&j->thread);
    m->s3_listings--;
    answer_job(j);
    uv_close((uv_handle_t *)&j->listed, s3_job_closed);
    s3_listings_start(m);
}

/* Starts the listings waiting in m->s3_queue that may run now. */
static void s3_listings_start(dpp_master_t *m)
{
    while (m->s3_queue != NULL && m->s3_listings < DPP_MASTER_S3_LISTINGS && !m->stopping) {
        struct dpp_submit_job *j = m->s3_queue;
        if ((m->s3_queue = j->next) == NULL)
            m->s3_queue_tail = NULL;
        j->next = NULL;
        j->started = 1;
        j->deadline_ns = dpp_s3_now_ns() + (uint64_t)m->list_timeout_s * 1000000000u;
        uv_async_init(m->loop, &j->listed, s3_job_listed);
        m->s3_listings++;
        int rc = uv_thread_create(&j->thread, s3_listing_thread, j);
        if (rc != 0) {
            j->rc = dpp_errf(-EAGAIN, j->err, sizeof j->err,
                             "table \"%s\": no thread to list it on (%s): submit it again",
                             j->spec.table, uv_strerror(rc));
            m->s3_listings--;
            answer_job(j);
            uv_close((uv_handle_t *)&j->listed, s3_job_closed);
        }
    }
}

/* 1 when the spec reads a table in an object store (itself, or a source). */
static int reads_objects(const dpp_spec_t *spec)
{
    int any = dpp_s3_is_url(spec->table);
    for (unsigned i = 0; i < spec->nsources; i++)
        any |= dpp_s3_is_url(spec->sources[i].spec.table);
    return any;
}

void dpp_master_ctl_submit_gone(peer_t *p)
{
    struct dpp_submit_job *j = p->submit;
    p->submit = NULL;
    if (j == NULL)
        return;
    j->peer = NULL;
    if (!j->s3)
        return; /* on the threadpool, which cannot be stopped: it ends by itself */
    if (j->started) {
        __atomic_store_n(&j->stop, 1, __ATOMIC_RELEASE);
        return;
    }
    dpp_master_t *m = j->m;
    struct dpp_submit_job **q = &m->s3_queue, *prev = NULL;
    while (*q != j)
        prev = *q, q = &(*q)->next;
    *q = j->next;
    if (m->s3_queue_tail == j)
        m->s3_queue_tail = prev;
    DPP_INFO("submit_dropped table=%s reason=\"its connection closed while the table waited to "
             "be listed\" listing=never",
             j->spec.table);
    submit_job_free(j);
}

void dpp_master_ctl_submit(peer_t *p, const Dpp__SubmitRequest *req)
{
    dpp_master_t *m = p->m;
    problems_t ps = {.len = 0};
    char err[DPP_SPEC_ERRLEN];
    dpp_spec_t spec;
    size_t len = strlen(req->spec_json);
    int rc = DPP_ESPEC;
    if (len > m->max_spec_bytes) {
        snprintf(err, sizeof err,
                 "the spec is %zu bytes, this master takes at most %zu (--max-spec-kb)", len,
                 m->max_spec_bytes);
        reject_submit(p, rc, err, 1);
        return;
    }
    rc = dpp_spec_parse_report(req->spec_json, len, &spec, err, sizeof err, add_problem, &ps);
    if (rc == DPP_ESPEC && ps.n > 1) {
        if (ps.left_out)
            snprintf(ps.text + ps.len, sizeof ps.text - ps.len, "\n(%u more problems)",
                     ps.left_out);
        reject_submit(p, rc, ps.text, ps.n + ps.left_out);
        dpp_spec_close(&spec);
        return;
    }
    if (rc == 0 && spec.ndense + spec.nsparse > m->max_features) {
        rc = DPP_ESPEC;
        snprintf(err, sizeof err, "features: %u, this master takes at most %u (--max-features)",
                 spec.ndense + spec.nsparse, m->max_features);
    }
    if (rc == 0 && p->submit != NULL) {
        rc = -EBUSY;
        snprintf(err, sizeof err,
                 "table \"%s\": this connection's earlier submit is still listing its table: "
                 "wait for its answer, or submit on another connection",
                 spec.table);
    }
    if (rc) {
        reject_submit(p, rc, err, 1);
        dpp_spec_close(&spec);
        return;
    }
    struct dpp_submit_job *j = dpp_xcalloc(1, sizeof *j);
    j->m = m;
    j->peer = p;
    j->spec = spec;
    j->work.data = j;
    p->submit = j;
    if (!reads_objects(&j->spec)) {
        uv_queue_work(m->loop, &j->work, list_table, table_listed);
        return;
    }
    j->s3 = 1;
    if (m->s3_queue_tail)
        m->s3_queue_tail->next = j;
    else
        m->s3_queue = j;
    m->s3_queue_tail = j;
    s3_listings_start(m);
}

static void fill_rejects(const dpp_rejects_t *r, Dpp__Rejects *out)
{
    dpp__rejects__init(out);
#define TO_WIRE(name, code, words) out->name = r->name;
    DPP_REJECT_REASONS(TO_WIRE)
#undef TO_WIRE
}

/* st points into s and rej; both must outlive the send. ranks and
 * rank_ptrs ([consumers]) get one entry per rank, or are NULL for a
 * listing, which leaves them out. */
static void fill_status(dpp_master_t *m, const dpp_session_t *s, Dpp__SessionStatus *st,
                        Dpp__Rejects *rej, Dpp__RankStatus *ranks, Dpp__RankStatus **rank_ptrs)
{
    dpp__session_status__init(st);
    st->session_id = (char *)s->id;
    st->state = (char *)dpp_session_state_label(s);
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
    st->text_documents = s->text_documents;
    st->text_tokens = s->text_tokens;
    st->text_padding = s->text_padding;
    st->splits_from_ram = s->splits_from_ram;
    st->splits_from_disk = s->splits_from_disk;
    st->splits_made = s->splits_made;
    st->bytes_from_cache = s->bytes_from_cache;
    st->tokens_per_second = s->state == SESSION_RUNNING ? (uint64_t)(s->tokens_rate + 0.5) : 0;
    st->records_rejected = dpp_rejects_total(&s->rejects);
    fill_rejects(&s->rejects, rej);
    st->rejects = rej;
    st->files = (uint32_t)s->nfiles;
    st->files_indexed = (uint32_t)s->files_indexed;
    st->workers = dpp_master_live_workers(m);
    st->error = s->error ? s->error : (char *)"";
    st->submitted_unix_ms = s->submitted_ms;
    st->planned_unix_ms = s->planned_ms;
    st->ended_unix_ms = s->ended_ms;
    if (s->ended_ms > 0) {
        st->expires_unix_ms = s->ended_ms + m->retention_ms;
    } else {
        int64_t idle = dpp_master_idle_ms(m, s);
        st->abandon_unix_ms = idle > 0 ? s->client_ms + idle : 0;
    }
    st->splits_per_second = s->state == SESSION_RUNNING ? (uint64_t)(s->splits_rate + 0.5) : 0;
    st->takeovers = s->takeovers;
    st->rows_redelivered_max = s->redelivered_max;
    if (s->spec.nsources > 0 && s->source_rows) {
        st->n_sources = s->spec.nsources;
        st->sources = dpp_xcalloc(s->spec.nsources, sizeof *st->sources);
        for (unsigned i = 0; i < s->spec.nsources; i++) {
            Dpp__SourceStatus *x = dpp_xcalloc(1, sizeof *x);
            dpp__source_status__init(x);
            x->table = s->spec.sources[i].spec.table;
            x->weight = s->spec.sources[i].weight;
            x->window_rows = s->spec.sources[i].window_rows;
            x->rows = s->source_rows[i];
            x->epoch_rows = s->source_epoch_rows[i];
            x->records = s->source_records[i];
            st->sources[i] = x;
        }
    }
    int64_t now = dpp_now_ms();
    for (unsigned r = 0; r < s->spec.consumers; r++) {
        st->records_per_epoch += dpp_session_rank_records(s, r);
        if (ranks == NULL)
            continue;
        Dpp__RankStatus *rs = &ranks[r];
        dpp__rank_status__init(rs);
        rs->rank = r;
        rs->splits = (uint32_t)dpp_session_rank_splits(s, r);
        for (size_t j = 0; j < rs->splits; j++)
            rs->splits_consumed += s->splits[s->rank_first[r] + j].state == SPLIT_CONSUMED;
        rs->attached = s->rank_seen_ms[r] && now - s->rank_seen_ms[r] <= RANK_ABSENT_MS;
        rs->batches = s->reports[r].sum.batches;
        rs->wait_ns = s->reports[r].sum.wait_ns;
        rs->open_ns = s->reports[r].sum.open_ns;
        rank_ptrs[r] = rs;
    }
    st->n_ranks = ranks ? s->spec.consumers : 0;
    st->ranks = rank_ptrs;
}

static int cmp_worker_id(const void *a, const void *b)
{
    uint64_t x = ((const Dpp__WorkerStatus *)a)->worker_id;
    uint64_t y = ((const Dpp__WorkerStatus *)b)->worker_id;
    return x < y ? -1 : x > y;
}

/* Fills ws[0..n).splits_leased with one pass over every session's splits
 * (ws sorted by worker id): a status request costs the splits once, not
 * once per worker. */
static void count_worker_leases(const dpp_master_t *m, Dpp__WorkerStatus *ws, size_t n)
{
    qsort(ws, n, sizeof *ws, cmp_worker_id);
    for (size_t si = 0; si < m->nsessions; si++) {
        const dpp_session_t *s = m->sessions[si];
        for (size_t i = 0; i < s->nsplits; i++) {
            if (s->splits[i].state != SPLIT_LEASED)
                continue;
            Dpp__WorkerStatus key = {.worker_id = s->splits[i].lease.worker_id};
            Dpp__WorkerStatus *w = bsearch(&key, ws, n, sizeof *ws, cmp_worker_id);
            if (w)
                w->splits_leased++;
        }
    }
}

void dpp_master_ctl_status(peer_t *p, const Dpp__StatusRequest *req)
{
    dpp_master_t *m = p->m;
    size_t n = 0;
    Dpp__SessionStatus *sts = dpp_xcalloc(m->nsessions + 1, sizeof *sts);
    Dpp__Rejects *rejs = dpp_xcalloc(m->nsessions + 1, sizeof *rejs);
    Dpp__SessionStatus **ptrs = dpp_xcalloc(m->nsessions + 1, sizeof *ptrs);
    Dpp__RankStatus **ranks = dpp_xcalloc(m->nsessions + 1, sizeof *ranks);
    Dpp__RankStatus ***rank_ptrs = dpp_xcalloc(m->nsessions + 1, sizeof *rank_ptrs);
    /* One session: every rank. A listing: the newest sessions first, no
     * ranks, and at most what a reply frame holds (the rest counted). */
    int one = req->session_id[0] != '\0';
    size_t omitted = 0;
    for (size_t k = m->nsessions; k-- > 0;) {
        const dpp_session_t *s = m->sessions[k];
        if (one && strcmp(req->session_id, s->id) != 0)
            continue;
        if (!one && n == DPP_MASTER_MAX_LISTED) {
            omitted++;
            continue;
        }
        if (one) {
            ranks[n] = dpp_xcalloc(s->spec.consumers, sizeof **ranks);
            rank_ptrs[n] = dpp_xcalloc(s->spec.consumers, sizeof **rank_ptrs);
        }
        fill_status(m, s, &sts[n], &rejs[n], ranks[n], rank_ptrs[n]);
        ptrs[n] = &sts[n];
        n++;
    }
    size_t nw = dpp_master_live_workers(m), k = 0;
    Dpp__WorkerStatus *ws = dpp_xcalloc(nw + 1, sizeof *ws);
    Dpp__WorkerStatus **wptrs = dpp_xcalloc(nw + 1, sizeof *wptrs);
    int64_t now = dpp_now_ms();
    for (peer_t *w = first_peer(m); w && k < nw; w = next_peer(w)) {
        if (peer_role(w) != ROLE_WORKER || w->worker_id == 0)
            continue;
        dpp__worker_status__init(&ws[k]);
        ws[k].worker_id = w->worker_id;
        ws[k].data_addr = w->data_addr;
        ws[k].threads = w->threads;
        ws[k].silent_ms = (uint32_t)(now - w->base.last_seen_ms);
        k++;
    }
    count_worker_leases(m, ws, k);
    for (size_t i = 0; i < k; i++)
        wptrs[i] = &ws[i];
    if (req->session_id[0] && n == 0) {
        dpp_conn_send_error(&p->base.conn, DPP_ENOSESSION,
                            "no session \"%s\" on this master (dppctl list shows its sessions; a "
                            "finished one is forgotten after --session-retention)",
                            req->session_id);
    } else {
        Dpp__StatusReply reply = DPP__STATUS_REPLY__INIT;
        reply.n_sessions = n;
        reply.sessions = ptrs;
        reply.n_workers = k;
        reply.workers = wptrs;
        reply.sessions_omitted = (uint32_t)omitted;
        Dpp__MasterStatus ms;
        dpp_master_status_fill(p->m, &ms);
        reply.master = &ms;
        dpp_conn_send(&p->base.conn, DPP_MSG_STATUS_REPLY, &reply.base);
    }
    for (size_t i = 0; i < n; i++) {
        free(ranks[i]);
        free(rank_ptrs[i]);
        for (size_t j = 0; j < sts[i].n_sources; j++)
            free(sts[i].sources[j]);
        free(sts[i].sources);
    }
    free(ranks);
    free(rank_ptrs);
    free(ws);
    free(wptrs);
    free(ptrs);
    free(rejs);
    free(sts);
}

void dpp_master_ctl_cancel(peer_t *p, const Dpp__CancelRequest *req)
{
    dpp_session_t *s = dpp_master_find_session(p->m, req->session_id);
    if (s == NULL) {
        dpp_conn_send_error(&p->base.conn, DPP_ENOSESSION,
                            "no session \"%s\" on this master (dppctl list shows its sessions; a "
                            "finished one is forgotten after --session-retention)",
                            req->session_id);
        return;
    }
    Dpp__CancelReply r = DPP__CANCEL_REPLY__INIT;
    r.session_id = s->id;
    r.state = (char *)dpp_session_state_label(s);
    if (s->state == SESSION_INDEXING || s->state == SESSION_RUNNING) {
        s->cancelled = 1;
        dpp_master_fail_session(p->m, s, "cause=cancel", "cancelled (dppctl cancel)");
        p->m->n.cancels++;
    }
    dpp_conn_send(&p->base.conn, DPP_MSG_CANCEL_REPLY, &r.base);
}
