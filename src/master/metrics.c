// SPDX-License-Identifier: Apache-2.0
// The master's HTTP endpoints: GET /metrics (Prometheus text format 0.0.4),
// /healthz and /readyz. Rendered on the loop thread from its own state.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/s3.h"
#include "base/alloc.h"
#include "daemon/http.h"
#include "base/log.h"
#include "daemon/metrics.h"
#include "base/util.h"
#include "dpp/error.h"
#include "master_internal.h"
#include "metrics.h"

/* Bucket bounds of the trainer wait histogram, seconds: the client's
 * buckets count waits < 2^i * 10 us (the last: every longer one). */
static void wait_bounds(double *b)
{
    for (int i = 0; i < 15; i++)
        b[i] = 10e-6 * (double)(1u << i);
}

/* Room left for the family written after the parts of the page that may be
 * dropped (the dropped-series gauge, ~1.3 KB). */
#define TAIL_BYTES 2048u

static int session_active(const dpp_session_t *s)
{
    return s->state == SESSION_RUNNING || s->state == SESSION_INDEXING;
}

/* What one rank reported, or the sum of several (a session's rest). */
typedef struct rank_sum {
    unsigned ranks;
    uint64_t batches;
    double wait_s;
    uint64_t hist[16];
} rank_sum_t;

static void rank_add(rank_sum_t *sum, const dpp_rank_counts_t *rep)
{
    sum->ranks++;
    sum->batches += rep->batches;
    sum->wait_s += (double)rep->wait_ns / 1e9;
    for (int b = 0; b < 16; b++)
        sum->hist[b] += rep->hist[b];
}

static void wait_histogram(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *l,
                           size_t nl, const rank_sum_t *v)
{
    double bounds[15];
    wait_bounds(bounds);
    uint64_t hc[15], count = 0;
    for (int b = 0; b < 15; b++)
        hc[b] = count += v->hist[b];
    count += v->hist[15];
    dpp_metrics_histogram(m, name, l, nl, bounds, hc, 15, v->wait_s, count);
}

/* The families of the page that grow with the sessions, each dropped with
 * its part when the part would pass the byte cap. */
enum {
    F_STARVATION,
    F_EPOCH,
    F_TEXT_TOKENS,
    F_TEXT_DOCUMENTS,
    F_TEXT_PADDING,
    F_SOURCE_ROWS,
    F_REST_RANKS,
    F_REST_WAIT,
    F_REST_BATCHES,
    F_WAIT,
    F_BATCHES,
    NFAMILIES
};

static const char *const family_names[NFAMILIES] = {
    "dpp_session_starvation_ratio",   "dpp_session_epoch",
    "dpp_session_text_tokens_total",  "dpp_session_text_documents_total",
    "dpp_session_text_padding_ratio", "dpp_session_source_rows_total",
    "dpp_trainer_rest_ranks",
    "dpp_trainer_rest_wait_seconds",  "dpp_trainer_rest_batches_total",
    "dpp_trainer_wait_seconds",       "dpp_trainer_batches_total",
};

/* Part 1: the per-session gauges. Adds to series[] what it writes. */
static void session_part(dpp_metrics_t *m, dpp_session_t *const *sessions, size_t n,
                         uint64_t *series)
{
    dpp_metrics_label_t l;
    dpp_metrics_family(m, "dpp_session_starvation_ratio", DPP_METRIC_GAUGE,
                       "Share of its trainers' time a running session spent waiting for data "
                       "(0 to 1): the signal to scale workers on.");
    for (size_t i = 0; i < n; i++) {
        const dpp_session_t *s = sessions[i];
        if (s->state != SESSION_RUNNING)
            continue;
        uint64_t wait = 0, open = 0;
        for (unsigned r = 0; r < s->spec.consumers; r++) {
            wait += s->reports[r].sum.wait_ns;
            open += s->reports[r].sum.open_ns;
        }
        if (open == 0)
            continue;
        l = (dpp_metrics_label_t){"session", s->id};
        dpp_metrics_sample(m, "dpp_session_starvation_ratio", &l, 1, (double)wait / (double)open);
        series[F_STARVATION]++;
    }
    dpp_metrics_family(m, "dpp_session_epoch", DPP_METRIC_GAUGE,
                       "Current epoch of each indexing or running session.");
    for (size_t i = 0; i < n; i++) {
        const dpp_session_t *s = sessions[i];
        if (!session_active(s))
            continue;
        l = (dpp_metrics_label_t){"session", s->id};
        dpp_metrics_sample_u64(m, "dpp_session_epoch", &l, 1, s->epoch);
        series[F_EPOCH]++;
    }
    /* text sessions: rate() of the tokens is tokens a second */
    dpp_metrics_family(m, "dpp_session_text_tokens_total", DPP_METRIC_COUNTER,
                       "Document tokens a running text session's workers packed into sequences "
                       "(padding left out).");
    for (size_t i = 0; i < n; i++) {
        const dpp_session_t *s = sessions[i];
        if (s->spec.text == NULL || !session_active(s))
            continue;
        l = (dpp_metrics_label_t){"session", s->id};
        dpp_metrics_sample_u64(m, "dpp_session_text_tokens_total", &l, 1, s->text_tokens);
        series[F_TEXT_TOKENS]++;
    }
    dpp_metrics_family(m, "dpp_session_text_documents_total", DPP_METRIC_COUNTER,
                       "Documents a running text session's workers packed.");
    for (size_t i = 0; i < n; i++) {
        const dpp_session_t *s = sessions[i];
        if (s->spec.text == NULL || !session_active(s))
            continue;
        l = (dpp_metrics_label_t){"session", s->id};
        dpp_metrics_sample_u64(m, "dpp_session_text_documents_total", &l, 1, s->text_documents);
        series[F_TEXT_DOCUMENTS]++;
    }
    dpp_metrics_family(m, "dpp_session_text_padding_ratio", DPP_METRIC_GAUGE,
                       "Share of a running text session's sequence positions that are padding "
                       "(0 to 1).");
    for (size_t i = 0; i < n; i++) {
        const dpp_session_t *s = sessions[i];
        uint64_t all = s->text_tokens + s->text_padding;
        if (s->spec.text == NULL || !session_active(s) || all == 0)
            continue;
        l = (dpp_metrics_label_t){"session", s->id};
        dpp_metrics_sample(m, "dpp_session_text_padding_ratio", &l, 1,
                           (double)s->text_padding / (double)all);
        series[F_TEXT_PADDING]++;
    }
    /* mixtures: rate() of each source's rows shows the weights holding */
    dpp_metrics_family(m, "dpp_session_source_rows_total", DPP_METRIC_COUNTER,
                       "Rows of a running mixture's source in the splits its clients consumed.");
    for (size_t i = 0; i < n; i++) {
        const dpp_session_t *s = sessions[i];
        if (s->spec.nsources == 0 || s->source_rows == NULL || !session_active(s))
            continue;
        for (unsigned j = 0; j < s->spec.nsources; j++) {
            char idx[16];
            snprintf(idx, sizeof idx, "%u", j);
            dpp_metrics_label_t ls[3] = {{"session", s->id},
                                         {"source", idx},
                                         {"table", s->spec.sources[j].spec.table}};
            dpp_metrics_sample_u64(m, "dpp_session_source_rows_total", ls, 3,
                                   s->source_rows[j]);
            series[F_SOURCE_ROWS]++;
        }
    }
}

/* Part 2: per session, the ranks that reported past the first shown[i]
 * (those not in the per-rank families), summed. */
static void rest_part(dpp_metrics_t *m, dpp_session_t *const *sessions, size_t n,
                      const size_t *shown, uint64_t *series)
{
    static const char *const help[3] = {
        "Ranks of a session whose clients reported but that the per-rank trainer families "
        "leave out (past the per-scrape limit); the dpp_trainer_rest_* families sum them.",
        "Time the ranks of dpp_trainer_rest_ranks waited inside next() for a batch, summed.",
        "Batches the ranks of dpp_trainer_rest_ranks took, summed."};
    for (int f = F_REST_RANKS; f <= F_REST_BATCHES; f++) {
        dpp_metrics_family(m, family_names[f],
                           f == F_REST_RANKS  ? DPP_METRIC_GAUGE
                           : f == F_REST_WAIT ? DPP_METRIC_HISTOGRAM
                                              : DPP_METRIC_COUNTER,
                           help[f - F_REST_RANKS]);
        for (size_t i = 0; i < n; i++) {
            const dpp_session_t *s = sessions[i];
            if (!session_active(s))
                continue;
            rank_sum_t rest = {0};
            size_t k = 0;
            for (unsigned r = 0; r < s->spec.consumers; r++)
                if (s->reports[r].sum.open_ns != 0 && k++ >= shown[i])
                    rank_add(&rest, &s->reports[r].sum);
            if (rest.ranks == 0)
                continue;
            dpp_metrics_label_t l = {"session", s->id};
            if (f == F_REST_RANKS)
                dpp_metrics_sample_u64(m, family_names[f], &l, 1, rest.ranks);
            else if (f == F_REST_WAIT)
                wait_histogram(m, family_names[f], &l, 1, &rest);
            else
                dpp_metrics_sample_u64(m, family_names[f], &l, 1, rest.batches);
            series[f]++;
        }
    }
}

/* Part 3: the first shown[i] ranks that reported of each session, one
 * series each. */
static void rank_part(dpp_metrics_t *m, dpp_session_t *const *sessions, size_t n,
                      const size_t *shown, uint64_t *series)
{
    static const char *const help[2] = {
        "Time trainers waited inside next() for a batch, per session and rank (up to the "
        "per-scrape limit; the rest: dpp_trainer_rest_*).",
        "Batches trainers took, per session and rank (up to the per-scrape limit; the rest: "
        "dpp_trainer_rest_*)."};
    char rank[16];
    dpp_metrics_label_t l[2] = {{"session", NULL}, {"rank", rank}};
    for (int f = F_WAIT; f <= F_BATCHES; f++) {
        dpp_metrics_family(m, family_names[f],
                           f == F_WAIT ? DPP_METRIC_HISTOGRAM : DPP_METRIC_COUNTER,
                           help[f - F_WAIT]);
        for (size_t i = 0; i < n; i++) {
            const dpp_session_t *s = sessions[i];
            size_t k = 0;
            l[0].value = s->id;
            for (unsigned r = 0; r < s->spec.consumers && k < shown[i]; r++) {
                const dpp_rank_counts_t *rep = &s->reports[r].sum;
                if (rep->open_ns == 0)
                    continue;
                k++;
                snprintf(rank, sizeof rank, "%u", r);
                if (f == F_WAIT) {
                    rank_sum_t one = {0};
                    rank_add(&one, rep);
                    wait_histogram(m, family_names[f], l, 2, &one);
                } else {
                    dpp_metrics_sample_u64(m, family_names[f], l, 2, rep->batches);
                }
                series[f]++;
            }
        }
    }
}

/* How many of each session's reporting ranks go one by one (shown[i]),
 * rank_series in all: the running sessions share them first, the indexing
 * ones what is left. Sharing is even (a session with fewer ranks than its
 * share passes the remainder on), so that every running session keeps a
 * sample of its ranks while there are fewer than rank_series of them.
 * Returns the ranks left out. */
static uint64_t plan_shown(dpp_session_t *const *sessions, size_t n, size_t rank_series,
                           size_t *shown)
{
    size_t *want = dpp_xcalloc(n ? n : 1, sizeof *want);
    uint64_t left_out = 0;
    size_t left = rank_series;
    for (int pass = 0; pass < 2; pass++) {
        session_state_t st = pass == 0 ? SESSION_RUNNING : SESSION_INDEXING;
        size_t hungry = 0;
        for (size_t i = 0; i < n; i++) {
            const dpp_session_t *s = sessions[i];
            if (s->state != st)
                continue;
            for (unsigned r = 0; r < s->spec.consumers; r++)
                want[i] += s->reports[r].sum.open_ns != 0;
            hungry += want[i] > 0;
        }
        /* each round gives every session that still wants some an equal
         * share (at least 1): it ends with left or the wants used up */
        while (left > 0 && hungry > 0) {
            size_t share = left / hungry > 0 ? left / hungry : 1;
            for (size_t i = 0; i < n && left > 0; i++) {
                if (sessions[i]->state != st || want[i] == 0)
                    continue;
                size_t give = want[i] < share ? want[i] : share;
                give = give < left ? give : left;
                shown[i] += give;
                want[i] -= give;
                left -= give;
                hungry -= want[i] == 0;
            }
        }
        for (size_t i = 0; i < n; i++)
            if (sessions[i]->state == st)
                left_out += want[i];
    }
    free(want);
    return left_out;
}

int dpp_master_metrics_sessions(dpp_metrics_t *m, dpp_session_t *const *sessions, size_t n,
                                size_t rank_series)
{
    size_t *shown = dpp_xcalloc(n ? n : 1, sizeof *shown);
    uint64_t left_out = plan_shown(sessions, n, rank_series, shown);

    /* Each part is dropped whole, rather than fail the page, when it would
     * pass the byte cap; they are in order of worth (the starvation ratio
     * drives scaling), and must leave room for the gauge that tells. */
    size_t max_bytes = m->max_bytes;
    m->max_bytes = max_bytes > TAIL_BYTES ? max_bytes - TAIL_BYTES : 0;
    uint64_t capped[NFAMILIES] = {0};
    for (int part = 0; part < 3; part++) {
        uint64_t series[NFAMILIES] = {0};
        dpp_metrics_mark_t mark;
        dpp_metrics_mark(m, &mark);
        if (part == 0)
            session_part(m, sessions, n, series);
        else if (part == 1)
            rest_part(m, sessions, n, shown, series);
        else
            rank_part(m, sessions, n, shown, series);
        if (dpp_metrics_error(m) == -ENOBUFS) {
            dpp_metrics_rewind(m, &mark);
            for (int f = 0; f < NFAMILIES; f++)
                capped[f] += series[f];
        }
    }
    m->max_bytes = max_bytes;
    free(shown);

    dpp_metrics_family(m, "dpp_metrics_series_dropped", DPP_METRIC_GAUGE,
                       "Series this scrape left out, by family and reason: rank_limit, the "
                       "ranks past the per-scrape limit (summed in dpp_trainer_rest_*); "
                       "size_cap, a family dropped whole to keep the page under its byte cap.");
    for (int f = 0; f < NFAMILIES; f++) {
        dpp_metrics_label_t l[2] = {{"family", family_names[f]}, {"reason", "rank_limit"}};
        if (f == F_WAIT || f == F_BATCHES)
            dpp_metrics_sample_u64(m, "dpp_metrics_series_dropped", l, 2, left_out);
        l[1].value = "size_cap";
        dpp_metrics_sample_u64(m, "dpp_metrics_series_dropped", l, 2, capped[f]);
    }
    return dpp_metrics_error(m);
}

static void render(void *arg, dpp_metrics_t *m)
{
    dpp_master_t *ms = arg;
    const dpp_master_counters_t *n = &ms->n;
    dpp_metrics_label_t l[3];

    dpp_metrics_build_info(m, "master");
    dpp_metrics_process(m);

    size_t by_state[5] = {0}; /* and [4]: cancelled, not counted as failed */
    for (size_t i = 0; i < ms->nsessions; i++)
        by_state[ms->sessions[i]->cancelled ? 4 : ms->sessions[i]->state]++;
    dpp_metrics_family(m, "dpp_sessions", DPP_METRIC_GAUGE, "Sessions by state.");
    for (int st = 0; st < 5; st++) {
        l[0] = (dpp_metrics_label_t){
            "state", st == 4 ? "cancelled" : dpp_session_state_name((session_state_t)st)};
        dpp_metrics_sample_u64(m, "dpp_sessions", l, 1, by_state[st]);
    }
    dpp_metrics_counter(m, "dpp_sessions_submitted_total", "Sessions accepted.",
                        n->sessions_submitted);
    dpp_metrics_counter(m, "dpp_storage_requests_total",
                        "Requests sent to object storage (listings of s3:// tables), retries "
                        "included.",
                        dpp_s3_requests_total());
    dpp_metrics_counter(m, "dpp_storage_retries_total",
                        "Object storage requests sent again after a 5xx, a 429, a reset, a "
                        "stall, a short body or a range answered short.",
                        dpp_s3_retries_total());
    dpp_metrics_counter(m, "dpp_storage_short_reads_total",
                        "Ranges the object store answered short (a 206 ending before the "
                        "range asked and the object), read on from where the answer stopped.",
                        dpp_s3_short_reads_total());

    size_t workers = 0;
    for (peer_t *p = first_peer(ms); p; p = next_peer(p))
        workers += peer_role(p) == ROLE_WORKER && p->worker_id != 0;
    dpp_metrics_gauge(m, "dpp_workers", "Registered workers.", (double)workers);
    dpp_listener_metrics(&ms->lst, m);

    dpp_metrics_counter(m, "dpp_splits_leased_total", "Split leases granted.", n->splits_leased);
    dpp_metrics_counter(m, "dpp_splits_done_total", "Splits consumed by their clients.",
                        n->splits_consumed);
    dpp_metrics_counter(m, "dpp_splits_released_total",
                        "Splits taken back from lost or silent workers, to be leased again.",
                        n->splits_released);
    dpp_metrics_counter(m, "dpp_splits_cache_leased_total",
                        "Splits leased to a worker whose cache holds their output.",
                        n->cache_leases);
    dpp_metrics_counter(m, "dpp_splits_from_cache_total",
                        "Splits workers served from their caches (as they reported).",
                        n->cache_hits);
    dpp_metrics_counter(m, "dpp_splits_cache_missed_total",
                        "Splits workers with a cache made afresh (a miss; also every first "
                        "reading).",
                        n->cache_misses);
    dpp_metrics_counter(m, "dpp_index_tasks_leased_total", "File index tasks leased.",
                        n->index_leased);
    dpp_metrics_counter(m, "dpp_index_tasks_done_total", "File index tasks done.", n->index_done);
    dpp_metrics_counter(m, "dpp_lease_replies_total",
                        "LeaseReply messages sent (each carries one or more leases).",
                        n->lease_replies);
    dpp_metrics_counter(m, "dpp_lease_scan_entries_total",
                        "Files and split positions the grants looked at; a small multiple "
                        "of the tasks leased, or something scans what it should not.",
                        n->grant_scanned);
    dpp_metrics_counter(m, "dpp_resumes_total", "Ranks resumed from checkpoint tokens.",
                        n->resumes);
    dpp_metrics_counter(m, "dpp_rank_takeovers_total",
                        "Ranks a new client took over from one that was gone (their "
                        "splits from the first unconsumed one leased again).",
                        n->takeovers);
    dpp_metrics_counter(m, "dpp_cancels_total", "Sessions cancelled.", n->cancels);
    dpp_metrics_counter(m, "dpp_rows_produced_total", "Rows workers produced (as they reported).",
                        n->rows_produced);
    dpp_metrics_counter(m, "dpp_rows_filtered_total", "Rows dropped by the specs' filters.",
                        n->rows_filtered);
    dpp_metrics_counter(m, "dpp_bytes_read_total",
                        "Bytes workers read for splits (as they reported).", n->bytes_read);
    dpp_metrics_rejects(m, "Records rejected, by reason (as workers reported).", &n->rejects);

    dpp_metrics_family(m, "dpp_lease_latency_seconds", DPP_METRIC_HISTOGRAM,
                       "How long a worker's lease request waited for work.");
    uint64_t cum[DPP_LEASE_BUCKETS], c = 0;
    for (int b = 0; b < DPP_LEASE_BUCKETS; b++)
        cum[b] = c += n->lease_hist[b];
    dpp_metrics_histogram(m, "dpp_lease_latency_seconds", NULL, 0, dpp_lease_bounds, cum,
                          DPP_LEASE_BUCKETS, n->lease_sum, n->lease_count);

    dpp_metrics_family(m, "dpp_journal_commit_seconds", DPP_METRIC_HISTOGRAM,
                       "Time of the journal's group commits (one fdatasync for every change "
                       "of a loop turn; the master's answers wait for it).");
    c = 0;
    for (int b = 0; b < DPP_LEASE_BUCKETS; b++)
        cum[b] = c += n->commit_hist[b];
    dpp_metrics_histogram(m, "dpp_journal_commit_seconds", NULL, 0, dpp_lease_bounds, cum,
                          DPP_LEASE_BUCKETS, n->commit_sum, n->commit_count);
    dpp_metrics_counter(m, "dpp_journal_committed_records_total",
                        "Journal records made durable by group commits.", n->commit_records);

    dpp_metrics_family(m, "dpp_session_planning_seconds", DPP_METRIC_HISTOGRAM,
                       "Time from a session's submit to its splits being known (every "
                       "file's record count: sidecars, footers, scans).");
    c = 0;
    for (int b = 0; b < DPP_LEASE_BUCKETS; b++)
        cum[b] = c += n->plan_hist[b];
    dpp_metrics_histogram(m, "dpp_session_planning_seconds", NULL, 0, dpp_plan_bounds, cum,
                          DPP_LEASE_BUCKETS, n->plan_sum, n->plan_count);
    dpp_metrics_gauge(m, "dpp_splits_per_second",
                      "Splits consumed per second over the last five seconds, every session.",
                      n->splits_rate);
    dpp_metrics_counter(m, "dpp_sessions_pruned_total",
                        "Finished sessions forgotten after --session-retention.",
                        n->sessions_pruned);
    dpp_metrics_counter(m, "dpp_sessions_abandoned_total",
                        "Sessions ended as failed because no client attached within their idle "
                        "timeout.",
                        n->sessions_abandoned);

    dpp_journal_stats_t js;
    dpp_journal_get_stats(ms->journal, &js);
    dpp_metrics_gauge(m, "dpp_journal_bytes", "Size of the master's journal file.",
                      (double)js.file_size);
    dpp_metrics_gauge(m, "dpp_journal_records", "Records in the master's journal file.",
                      (double)js.records);
    /* last: the part of the page that grows with the sessions */
    dpp_master_metrics_sessions(m, ms->sessions, ms->nsessions, DPP_MASTER_METRICS_RANK_SERIES);
}

static void on_http(const dpp_http_request_t *req, dpp_http_response_t *res, void *arg)
{
    dpp_master_t *ms = arg;
    if (strcmp(req->path, "/healthz") == 0) {
        dpp_http_respond(res, 200, "text/plain; charset=utf-8", "ok\n", 3);
    } else if (strcmp(req->path, "/readyz") == 0) {
        /* the journal is replayed before the master listens: ready unless stopping */
        if (ms->stopping)
            dpp_http_respond(res, 503, "text/plain; charset=utf-8", "stopping\n", 9);
        else
            dpp_http_respond(res, 200, "text/plain; charset=utf-8", "ready\n", 6);
    } else if (strcmp(req->path, "/metrics") == 0) {
        dpp_http_respond_metrics(res, render, ms);
    } else {
        dpp_http_respond(res, 404, "text/plain; charset=utf-8", "not found\n", 10);
    }
}

int dpp_master_http_start(dpp_master_t *ms, const char *addr)
{
    int rc = dpp_http_start(&ms->http, ms->loop, addr, on_http, ms, NULL);
    if (rc) {
        DPP_ERROR("http_listen_failed addr=%s error=\"%s\"", addr, dpp_strerror(rc));
        return rc;
    }
    DPP_INFO("http_listening addr=%s port=%d", addr, dpp_http_port(ms->http));
    return 0;
}

void dpp_master_http_stop(dpp_master_t *ms)
{
    dpp_http_stop(ms->http);
    ms->http = NULL;
}

void dpp_master_snap_histograms(dpp_master_t *ms, int64_t now_ms)
{
    dpp_master_counters_t *n = &ms->n;
    unsigned last = (n->snap_next + DPP_MASTER_SNAPS - 1) % DPP_MASTER_SNAPS;
    int64_t since = n->nsnaps ? n->snaps[last].ms : n->started_ms;
    if (now_ms - since < DPP_MASTER_SNAP_MS)
        return;
    struct dpp_master_snap *sn = &n->snaps[n->snap_next];
    sn->ms = now_ms;
    memcpy(sn->lease, n->lease_hist, sizeof sn->lease);
    memcpy(sn->commit, n->commit_hist, sizeof sn->commit);
    n->snap_next = (n->snap_next + 1) % DPP_MASTER_SNAPS;
    if (n->nsnaps < DPP_MASTER_SNAPS)
        n->nsnaps++;
}

/* The upper bound, in microseconds, of the bucket holding quantile q of
 * the histogram now - then (UINT32_MAX: the +Inf bucket); 0 when empty. */
static uint32_t quantile_us(const uint64_t *now, const uint64_t *then, uint64_t *count, double q)
{
    uint64_t total = 0, cum = 0;
    for (int b = 0; b <= DPP_LEASE_BUCKETS; b++)
        total += now[b] - (then ? then[b] : 0);
    *count = total;
    if (total == 0)
        return 0;
    for (int b = 0; b < DPP_LEASE_BUCKETS; b++) {
        cum += now[b] - (then ? then[b] : 0);
        if ((double)cum >= q * (double)total)
            return (uint32_t)(dpp_lease_bounds[b] * 1e6 + 0.5);
    }
    return UINT32_MAX;
}

void dpp_master_status_fill(dpp_master_t *ms, Dpp__MasterStatus *out)
{
    const dpp_master_counters_t *n = &ms->n;
    /* the oldest snapshot kept: a minute back once the master is that old */
    const struct dpp_master_snap *old =
        n->nsnaps == 0
            ? NULL
            : &n->snaps[(n->snap_next + DPP_MASTER_SNAPS - n->nsnaps) % DPP_MASTER_SNAPS];
    dpp__master_status__init(out);
    out->splits_per_second = n->splits_rate;
    out->window_s = (uint32_t)((dpp_now_ms() - (old ? old->ms : n->started_ms)) / 1000);
    out->lease_p50_us =
        quantile_us(n->lease_hist, old ? old->lease : NULL, &out->lease_replies, 0.5);
    out->lease_p99_us =
        quantile_us(n->lease_hist, old ? old->lease : NULL, &out->lease_replies, 0.99);
    out->commit_p50_us = quantile_us(n->commit_hist, old ? old->commit : NULL, &out->commits, 0.5);
    out->commit_p99_us = quantile_us(n->commit_hist, old ? old->commit : NULL, &out->commits, 0.99);
    out->n_lease_buckets = out->n_commit_buckets = DPP_LEASE_BUCKETS + 1;
    out->lease_buckets = (uint64_t *)n->lease_hist;
    out->commit_buckets = (uint64_t *)n->commit_hist;
}
