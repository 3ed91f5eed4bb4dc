/* SPDX-License-Identifier: Apache-2.0 */
/* The master's hub: creates it (data roots, the state dir's lock, journal
 * replay, the listener, the timer), stops and frees it, and holds the
 * lookups the other master files share. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "dpp/error.h"
#include "index_cache.h"
#include "master.h"
#include "lease.h"
#include "master_internal.h"
#include "metrics.h"
#include "peer.h"
#include "persist.h"
#include "rpc_worker.h"
#include "s3_table.h"
#include "spec/spec.h"
#include "storage/s3.h"
#include "wire/conn.h"
#include "wire/net.h"

static uint64_t id_hash(const char *id)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *id; id++)
        h = (h ^ (uint8_t)*id) * 0x100000001b3ull;
    return h;
}

static void index_put(dpp_master_t *m, dpp_session_t *s)
{
    size_t mask = m->nby_id - 1, i = id_hash(s->id) & mask;
    while (m->by_id[i])
        i = (i + 1) & mask;
    m->by_id[i] = s;
}

/* Rebuilds the id index for m->sessions, at least twice their number. */
static void index_rebuild(dpp_master_t *m)
{
    size_t want = 16;
    while (want < 2 * m->nsessions + 2)
        want *= 2;
    free(m->by_id);
    m->by_id = dpp_xcalloc(want, sizeof *m->by_id);
    m->nby_id = want;
    for (size_t i = 0; i < m->nsessions; i++)
        index_put(m, m->sessions[i]);
}

dpp_session_t *dpp_master_find_session(dpp_master_t *m, const char *id)
{
    if (m->nby_id == 0)
        return NULL;
    size_t mask = m->nby_id - 1;
    for (size_t i = id_hash(id) & mask; m->by_id[i]; i = (i + 1) & mask)
        if (strcmp(m->by_id[i]->id, id) == 0)
            return m->by_id[i];
    return NULL;
}

void dpp_master_add_session(dpp_master_t *m, dpp_session_t *s)
{
    m->sessions = dpp_xrealloc(m->sessions, (m->nsessions + 1) * sizeof *m->sessions);
    m->sessions[m->nsessions++] = s;
    if (2 * m->nsessions + 2 > m->nby_id)
        index_rebuild(m);
    else
        index_put(m, s);
}

const double dpp_plan_bounds[DPP_LEASE_BUCKETS] = {0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                   2.5,  5,    10,  30,   60,  300};

void dpp_master_count_planning(dpp_master_t *m, const dpp_session_t *s)
{
    double secs = (double)(s->planned_ms - s->submitted_ms) / 1e3;
    size_t b = 0;
    while (b < DPP_LEASE_BUCKETS && secs > dpp_plan_bounds[b])
        b++;
    m->n.plan_hist[b]++;
    m->n.plan_sum += secs;
    m->n.plan_count++;
}

int64_t dpp_master_idle_ms(const dpp_master_t *m, const dpp_session_t *s)
{
    return s->spec.idle_timeout_s == DPP_SPEC_IDLE_DEFAULT ? m->idle_ms
                                                           : s->spec.idle_timeout_s * 1000;
}

/* Sessions past their retention are forgotten (their journal records go
 * at the next compaction); live ones no client attached to within their
 * idle timeout end as failed, "abandoned". From the timer. */
static void session_lifecycle(dpp_master_t *m)
{
    int64_t now = dpp_wall_ms();
    /* first the abandoned (failing one journals, which may compact: the
     * array must be whole), then the pruning */
    for (size_t i = 0; i < m->nsessions; i++) {
        dpp_session_t *s = m->sessions[i];
        int64_t idle = dpp_master_idle_ms(m, s);
        if ((s->state != SESSION_INDEXING && s->state != SESSION_RUNNING) || idle <= 0 ||
            now - s->client_ms < idle)
            continue;
        char why[256];
        snprintf(why, sizeof why,
                 "abandoned: no client attached for %" PRId64 " s (the idle timeout: the spec's "
                 "idle_timeout_s, or the master's --session-idle-timeout)",
                 (now - s->client_ms) / 1000);
        dpp_master_fail_session(m, s, "cause=abandoned", why);
        m->n.sessions_abandoned++;
    }
    /* an epoch held for worker reports that do not come from a worker that
     * is still there (which a lost worker's release would have ended): the
     * counts of those splits are given up, not the session */
    for (size_t i = 0; i < m->nsessions; i++) {
        dpp_session_t *s = m->sessions[i];
        if (!s->epoch_held || dpp_now_ms() - s->held_ms < DPP_MASTER_HOLD_MAX_MS)
            continue;
        DPP_WARN("epoch_unheld session=%s epoch=%u reports_missing=%zu", s->id, s->epoch,
                 s->reports_due);
        unsigned epoch = s->epoch;
        dpp_master_epoch_moved(m, s, epoch, dpp_session_unhold(s, 1));
    }
    size_t kept = 0, pruned = 0;
    for (size_t i = 0; i < m->nsessions; i++) {
        dpp_session_t *s = m->sessions[i];
        int live = s->state == SESSION_INDEXING || s->state == SESSION_RUNNING;
        if (!live && s->ended_ms > 0 && now - s->ended_ms >= m->retention_ms) {
            DPP_INFO("session_pruned session=%s state=%s ended_ms_ago=%" PRId64, s->id,
                     dpp_session_state_label(s), now - s->ended_ms);
            dpp_session_free(s);
            pruned++;
            continue;
        }
        m->sessions[kept++] = s;
    }
    if (pruned == 0)
        return;
    m->nsessions = kept;
    m->n.sessions_pruned += pruned;
    index_rebuild(m);
    dpp_master_compact_pruned(m, pruned);
}

unsigned dpp_master_live_workers(dpp_master_t *m)
{
    unsigned n = 0;
    for (peer_t *p = first_peer(m); p; p = next_peer(p))
        n += peer_role(p) == ROLE_WORKER && p->worker_id != 0;
    return n;
}

/* Closes peers past their handshake or idle deadline and drops workers
 * that stopped heartbeating; their splits go to others. */
static void on_timer(uv_timer_t *t)
{
    dpp_master_t *m = dpp_container_of(t, dpp_master_t, timer);
    if (m->failed) {
        dpp_master_stop(m);
        return;
    }
    int64_t now = dpp_now_ms();
    dpp_listener_sweep(&m->lst, now);
    dpp_master_worker_timeouts(m, now);
    dpp_master_check_journal(m);
    session_lifecycle(m);
    if (now - m->n.rate_ms >= 5000) { /* splits/s over the last few seconds */
        double dt = (double)(now - m->n.rate_ms) / 1e3;
        int first = m->n.rate_ms == 0;
        m->n.splits_rate = first ? 0 : (double)(m->n.splits_consumed - m->n.rate_consumed) / dt;
        m->n.rate_consumed = m->n.splits_consumed;
        m->n.rate_ms = now;
        for (size_t i = 0; i < m->nsessions; i++) {
            dpp_session_t *s = m->sessions[i];
            s->splits_rate = first ? 0 : (double)(s->consumed_total - s->rate_consumed) / dt;
            s->rate_consumed = s->consumed_total;
            s->tokens_rate = first ? 0 : (double)(s->text_tokens - s->rate_tokens) / dt;
            s->rate_tokens = s->text_tokens;
        }
    }
    dpp_master_snap_histograms(m, now);
}

static void count_commit(dpp_master_t *m, double secs)
{
    size_t b = 0;
    while (b < DPP_LEASE_BUCKETS && secs > dpp_lease_bounds[b])
        b++;
    m->n.commit_hist[b]++;
    m->n.commit_sum += secs;
    m->n.commit_count++;
    m->n.commit_records += m->commit_records;
}

void dpp_master_commit(dpp_master_t *m)
{
    /* without a sync: the turn's lazy records reach the file (a crash of
     * the process alone keeps them) */
    int rc = dpp_journal_flush(m->journal), synced = 0;
    if (rc == 0 && m->commit_pending) {
        uint64_t t0 = dpp_now_ns();
        rc = dpp_journal_sync(m->journal);
        count_commit(m, (double)(dpp_now_ns() - t0) / 1e9);
        m->commit_pending = 0;
        m->commit_records = 0;
        synced = 1;
    }
    if (rc) {
        DPP_ERROR("journal_%s_failed dir=%s error=\"%s\" action=stopping effect=\"answers "
                  "that depend on it are dropped\"",
                  synced ? "sync" : "write", m->state_dir, dpp_strerror(rc));
        dpp_master_fail_stop(m);
    }
    dpp_conn_release_list(&m->held_conns, rc == 0);
}

/* The end of a loop turn: what the turn's messages changed is granted to
 * the waiting workers once, then made durable and said (group commit). */
static void turn_end(dpp_master_t *m)
{
    if (m->grant_due && !m->stopping)
        dpp_master_grant_leases(m);
    dpp_master_commit(m);
}

static void on_prepare(uv_prepare_t *h)
{
    turn_end(dpp_container_of(h, dpp_master_t, commit_prepare));
}

static void on_check(uv_check_t *h)
{
    turn_end(dpp_container_of(h, dpp_master_t, commit_check));
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
    m->max_spec_bytes = cfg->max_spec_bytes ? cfg->max_spec_bytes : DPP_SPEC_MAX_BYTES;
    m->max_features = cfg->max_features ? cfg->max_features : DPP_SPEC_MAX_FEATURES;
    m->worker_timeout_ms = cfg->worker_timeout_ms ? cfg->worker_timeout_ms : 10000;
    m->retention_ms = cfg->session_retention_ms;
    m->idle_ms = cfg->session_idle_ms;
    m->journal_compact_bytes =
        cfg->journal_compact_bytes ? cfg->journal_compact_bytes : (size_t)64 << 20;
    m->list_max_keys = cfg->s3_list_max_keys ? cfg->s3_list_max_keys : 1000000;
    m->list_max_pages = cfg->s3_list_max_pages ? cfg->s3_list_max_pages : 10000;
    m->list_timeout_s = cfg->s3_list_timeout_s ? cfg->s3_list_timeout_s : 300;
    m->state_dir = dpp_xstrdup(cfg->state_dir);
    m->roots = dpp_xcalloc(cfg->nroots + 1, sizeof *m->roots);
    m->s3_roots = dpp_xcalloc(cfg->nroots + 1, sizeof *m->s3_roots);
    for (size_t i = 0; i < cfg->nroots; i++) {
        if (dpp_s3_is_url(cfg->roots[i])) {
            if ((rc = dpp_master_s3_root(m, cfg->roots[i])) != 0)
                goto fail_early;
            continue;
        }
        char *root = m->roots[m->nroots++] = realpath(cfg->roots[i], NULL);
        struct stat st;
        if (root == NULL || stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
            rc = root ? -ENOTDIR : -errno;
            DPP_ERROR("bad_data_root root=%s error=\"%s\"", cfg->roots[i], dpp_strerror(rc));
            goto fail_early;
        }
    }
    rc = lock_state_dir(m);
    if (rc) {
        DPP_ERROR("state_dir_unusable dir=%s error=\"%s\"%s", m->state_dir, dpp_strerror(rc),
                  rc == -EBUSY ? " hint=\"another master uses it\"" : "");
        goto fail_early;
    }
    dpp_journal_report_t report;
    rc = dpp_journal_open(&m->journal, m->state_dir, dpp_master_replay_record, m, &report);
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
    m->n.started_ms = dpp_now_ms();
    uv_timer_init(loop, &m->timer);
    uv_timer_init(loop, &m->cache_timer);
    m->hold_frames = 1;
    uv_prepare_init(loop, &m->commit_prepare);
    uv_prepare_start(&m->commit_prepare, on_prepare);
    uv_check_init(loop, &m->commit_check);
    uv_check_start(&m->commit_check, on_check);
    rc = dpp_master_peers_listen(m, cfg);
    if (rc) {
        dpp_master_stop(m);
        uv_run(loop, UV_RUN_DEFAULT);
        dpp_master_free(m);
        return rc;
    }
    snprintf(m->addr, sizeof m->addr, "%s", m->lst.addr);
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

void dpp_master_fail_stop(dpp_master_t *m)
{
    if (m->failed || m->stopping)
        return;
    m->failed = 1;
    /* on the next turn of the loop: the request being handled still gets
     * its answer (why it failed) before every connection closes */
    uv_timer_start(&m->timer, on_timer, 0, m->heartbeat_ms);
}

void dpp_master_stop(dpp_master_t *m)
{
    if (m->stopping)
        return;
    /* what was said before the stop goes out (or is dropped) first; lazy
     * records (index results) are made durable too, a sync that costs
     * nothing when there are none */
    m->commit_pending = 1;
    dpp_master_commit(m);
    m->hold_frames = 0; /* the loop turns no more for a commit */
    m->stopping = 1;
    dpp_master_http_stop(m);
    dpp_listener_close(&m->lst);
    uv_close((uv_handle_t *)&m->timer, NULL);
    uv_close((uv_handle_t *)&m->cache_timer, NULL);
    uv_close((uv_handle_t *)&m->commit_prepare, NULL);
    uv_close((uv_handle_t *)&m->commit_check, NULL);
}

void dpp_master_free(dpp_master_t *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nsessions; i++)
        dpp_session_free(m->sessions[i]);
    free(m->sessions);
    free(m->by_id);
    dpp_master_index_cache_free(m);
    dpp_u64set_clear(&m->cache_holders);
    for (size_t i = 0; i < m->nroots; i++)
        free(m->roots[i]);
    free(m->roots);
    for (size_t i = 0; i < m->ns3_roots; i++)
        free(m->s3_roots[i]);
    free(m->s3_roots);
    dpp_s3_free(m->s3);
    free(m->state_dir);
    free(m->grant_picks);
    free(m->grant_leases);
    free(m->grant_ptrs);
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
