// SPDX-License-Identifier: Apache-2.0
// The master's HTTP endpoints: GET /metrics (Prometheus text format 0.0.4),
// /healthz and /readyz. Rendered on the loop thread from its own state.
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

static void render(void *arg, dpp_metrics_t *m)
{
    dpp_master_t *ms = arg;
    const dpp_master_counters_t *n = &ms->n;
    dpp_metrics_label_t l[3];

    dpp_metrics_build_info(m, "master");

    size_t by_state[4] = {0};
    for (size_t i = 0; i < ms->nsessions; i++)
        by_state[ms->sessions[i]->state]++;
    dpp_metrics_family(m, "dpp_sessions", DPP_METRIC_GAUGE, "Sessions by state.");
    for (int st = 0; st < 4; st++) {
        l[0] = (dpp_metrics_label_t){"state", dpp_session_state_name((session_state_t)st)};
        dpp_metrics_sample_u64(m, "dpp_sessions", l, 1, by_state[st]);
    }
    dpp_metrics_counter(m, "dpp_sessions_submitted_total", "Sessions accepted.",
                        n->sessions_submitted);

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
    dpp_metrics_counter(m, "dpp_index_tasks_leased_total", "File index tasks leased.",
                        n->index_leased);
    dpp_metrics_counter(m, "dpp_index_tasks_done_total", "File index tasks done.", n->index_done);
    dpp_metrics_counter(m, "dpp_resumes_total", "Ranks resumed from checkpoint tokens.",
                        n->resumes);
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

    /* Per session and rank, from what the clients report with their attach
     * refreshes: the trainers' side of the pipe. */
    double bounds[15];
    wait_bounds(bounds);
    dpp_metrics_family(m, "dpp_trainer_wait_seconds", DPP_METRIC_HISTOGRAM,
                       "Time trainers waited inside next() for a batch.");
    for (size_t i = 0; i < ms->nsessions; i++) {
        const dpp_session_t *s = ms->sessions[i];
        for (unsigned r = 0; r < s->spec.consumers; r++) {
            const dpp_rank_report_t *rep = &s->reports[r];
            if (rep->open_ns == 0)
                continue;
            char rank[16];
            snprintf(rank, sizeof rank, "%u", r);
            l[0] = (dpp_metrics_label_t){"session", s->id};
            l[1] = (dpp_metrics_label_t){"rank", rank};
            uint64_t hc[15], count = 0;
            for (int b = 0; b < 15; b++)
                hc[b] = count += rep->hist[b];
            count += rep->hist[15];
            dpp_metrics_histogram(m, "dpp_trainer_wait_seconds", l, 2, bounds, hc, 15,
                                  (double)rep->wait_ns / 1e9, count);
        }
    }
    dpp_metrics_family(m, "dpp_trainer_batches_total", DPP_METRIC_COUNTER,
                       "Batches trainers took, per session and rank.");
    for (size_t i = 0; i < ms->nsessions; i++) {
        const dpp_session_t *s = ms->sessions[i];
        for (unsigned r = 0; r < s->spec.consumers; r++) {
            if (s->reports[r].open_ns == 0)
                continue;
            char rank[16];
            snprintf(rank, sizeof rank, "%u", r);
            l[0] = (dpp_metrics_label_t){"session", s->id};
            l[1] = (dpp_metrics_label_t){"rank", rank};
            dpp_metrics_sample_u64(m, "dpp_trainer_batches_total", l, 2, s->reports[r].batches);
        }
    }
    dpp_metrics_family(m, "dpp_session_starvation_ratio", DPP_METRIC_GAUGE,
                       "Share of its trainers' time a running session spent waiting for data "
                       "(0 to 1): the signal to scale workers on.");
    for (size_t i = 0; i < ms->nsessions; i++) {
        const dpp_session_t *s = ms->sessions[i];
        uint64_t wait = 0, open = 0;
        for (unsigned r = 0; r < s->spec.consumers; r++) {
            wait += s->reports[r].wait_ns;
            open += s->reports[r].open_ns;
        }
        if (s->state != SESSION_RUNNING || open == 0)
            continue;
        l[0] = (dpp_metrics_label_t){"session", s->id};
        dpp_metrics_sample(m, "dpp_session_starvation_ratio", l, 1, (double)wait / (double)open);
    }
    dpp_metrics_family(m, "dpp_session_epoch", DPP_METRIC_GAUGE,
                       "Current epoch of each indexing or running session.");
    for (size_t i = 0; i < ms->nsessions; i++) {
        const dpp_session_t *s = ms->sessions[i];
        if (s->state != SESSION_RUNNING && s->state != SESSION_INDEXING)
            continue;
        l[0] = (dpp_metrics_label_t){"session", s->id};
        dpp_metrics_sample_u64(m, "dpp_session_epoch", l, 1, s->epoch);
    }

    dpp_journal_stats_t js;
    dpp_journal_get_stats(ms->journal, &js);
    dpp_metrics_gauge(m, "dpp_journal_bytes", "Size of the master's journal file.",
                      (double)js.file_size);
    dpp_metrics_gauge(m, "dpp_journal_records", "Records in the master's journal file.",
                      (double)js.records);
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
