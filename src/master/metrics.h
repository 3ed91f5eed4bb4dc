/* SPDX-License-Identifier: Apache-2.0 */
/* The master's HTTP endpoints (--http): /metrics, /healthz, /readyz. */
#ifndef DPP_MASTER_METRICS_H
#define DPP_MASTER_METRICS_H

#include <stddef.h>

#include "daemon/metrics.h"
#include "dpp.pb-c.h"
#include "master.h"
#include "session.h"

/* (session, rank) series of dpp_trainer_wait_seconds and of
 * dpp_trainer_batches_total a scrape exports, at most. A rank's histogram
 * is ~1.7 KB of text: 12,000 ranks alone passed the renderer's 16 MiB cap
 * (and /metrics answered 500); 1,000 are ~2 MB. */
#define DPP_MASTER_METRICS_RANK_SERIES 1000u

/* Serves them on addr (HOST:PORT). Returns 0 or a negative error (logged). */
int dpp_master_http_start(dpp_master_t *m, const char *addr);

/* Stops serving (on the loop thread). Accepts a master without --http. */
void dpp_master_http_stop(dpp_master_t *m);

/* Renders into m the families that grow with the sessions[0..n) (the
 * master's, in order), none for sessions done or failed, in three parts:
 * the per-session gauges (dpp_session_starvation_ratio, dpp_session_epoch);
 * each session's ranks past the limit summed (dpp_trainer_rest_ranks,
 * _rest_wait_seconds, _rest_batches_total); and up to rank_series ranks
 * whose clients reported one by one (dpp_trainer_wait_seconds,
 * dpp_trainer_batches_total): the running sessions share rank_series
 * evenly, the indexing ones what is left, each session its lowest ranks.
 * A part that would pass m->max_bytes is left out whole rather than fail
 * the render. Last, dpp_metrics_series_dropped counts what was left out.
 * Returns 0 or m's recorded error (the page is lost: m had failed before,
 * or out of memory). */
int dpp_master_metrics_sessions(dpp_metrics_t *m, dpp_session_t *const *sessions, size_t n,
                                size_t rank_series);

/* Every DPP_MASTER_SNAP_MS (called from the master's timer): keeps the
 * lease and commit histograms as they are now, the last DPP_MASTER_SNAPS. */
void dpp_master_snap_histograms(dpp_master_t *m, int64_t now_ms);

/* Fills out, for dppctl status: splits/s, and the lease and commit
 * quantiles since the oldest snapshot kept (or since the master started). */
void dpp_master_status_fill(dpp_master_t *m, Dpp__MasterStatus *out);

#endif
