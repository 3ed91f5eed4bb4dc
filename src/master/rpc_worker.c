/* SPDX-License-Identifier: Apache-2.0 */
/* The master's worker requests: registration and heartbeats, lease
 * requests, and the SPLIT_DONE and INDEX_DONE answers to leases. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "dpp/error.h"
#include "index_cache.h"
#include "checks.h"
#include "lease.h"
#include "persist.h"
#include "planner.h"
#include "rpc_worker.h"
#include "wire/conn.h"
#include "wire/net.h"

static void add_rejects(dpp_rejects_t *r, const Dpp__Rejects *in)
{
    if (in == NULL)
        return;
#define FROM_WIRE(name, code, words) r->name += in->name;
    DPP_REJECT_REASONS(FROM_WIRE)
#undef FROM_WIRE
}

void dpp_master_worker_register(peer_t *p, const Dpp__RegisterRequest *req)
{
    dpp_master_t *m = p->m;
    struct sockaddr_storage ss;
    if (p->worker_id != 0 || dpp_addr_parse(req->data_addr, &ss) != 0) {
        dpp_conn_send_error(&p->base.conn, DPP_EINVAL, "register: bad data address \"%s\"",
                            req->data_addr);
        dpp_conn_close(&p->base.conn, DPP_EINVAL);
        return;
    }
    p->worker_id = ++m->next_worker_id;
    snprintf(p->data_addr, sizeof p->data_addr, "%s", req->data_addr);
    p->threads = req->threads;
    p->base.last_seen_ms = dpp_now_ms();
    DPP_INFO("worker_registered worker=%" PRIu64 " peer=%s data_addr=%s threads=%u", p->worker_id,
             p->base.conn.peer, p->data_addr, req->threads);
    Dpp__RegisterReply reply = DPP__REGISTER_REPLY__INIT;
    reply.worker_id = p->worker_id;
    reply.heartbeat_ms = m->heartbeat_ms;
    reply.lease_timeout_ms = m->worker_timeout_ms;
    dpp_conn_send(&p->base.conn, DPP_MSG_REGISTER_REPLY, &reply.base);
}

void dpp_master_worker_heartbeat(peer_t *p)
{
    Dpp__Heartbeat echo = DPP__HEARTBEAT__INIT;
    echo.worker_id = p->worker_id;
    dpp_conn_send(&p->base.conn, DPP_MSG_HEARTBEAT, &echo.base);
}

void dpp_master_worker_lease_request(peer_t *p, const Dpp__LeaseRequest *req)
{
    unsigned want = req->max_leases, index = req->max_index_tasks;
    dpp_master_t *m = p->m;
    if (req->cache_reset)
        dpp_master_forget_cache(m, p);
    for (size_t i = 0; i < req->n_cache_removed; i++)
        if (dpp_u64set_remove(&p->cache_keys, req->cache_removed[i]) == 1)
            dpp_u64set_remove(&m->cache_holders, req->cache_removed[i]);
    for (size_t i = 0; i < req->n_cache_added; i++) {
        int added = dpp_u64set_add(&p->cache_keys, req->cache_added[i]);
        if (added < 0 || (added == 1 && dpp_u64set_insert(&m->cache_holders, req->cache_added[i]) < 0))
            dpp_oom();
    }
    if (p->lease_want == 0)
        p->lease_since_ns = dpp_now_ns();
    p->lease_want = want > 64 ? 64 : want;
    p->index_cap = index > 256 ? 256 : index;
    if (p->lease_want > 0 || p->index_cap > p->index_out)
        dpp_master_wait_lease(p->m, p);
    dpp_master_grant_soon(p->m);
}

void dpp_master_worker_split_done(peer_t *p, const Dpp__SplitDone *msg)
{
    dpp_master_t *m = p->m;
    dpp_session_t *s = NULL;
    size_t i = 0;
    if (p->splits_out > 0) /* one answer per split lease, current or not */
        p->splits_out--;
    dpp_split_done_t done = dpp_master_split_done(m, msg->session_id, msg->split_id, msg->lease_id,
                                                  p->worker_id, &s, &i);
    if (done == DPP_SPLIT_DONE_IGNORED)
        return;
    add_rejects(&s->rejects, msg->rejects);
    add_rejects(&m->n.rejects, msg->rejects);
    s->rows_filtered += msg->rows_filtered;
    s->rows_produced += msg->rows;
    s->text_documents += msg->text_documents;
    s->splits_from_ram += msg->cache_tier == 1;
    s->splits_from_disk += msg->cache_tier == 2;
    s->splits_made += msg->cache_tier == 0;
    s->bytes_from_cache += msg->cache_tier > 0 ? msg->cache_bytes : 0;
    m->n.cache_hits += msg->cache_tier > 0;
    m->n.cache_misses += msg->cache_tier == 0;
    s->text_tokens += msg->text_tokens;
    s->text_padding += msg->text_padding;
    m->n.rows_filtered += msg->rows_filtered;
    m->n.rows_produced += msg->rows;
    m->n.bytes_read += msg->bytes_read;
    if (done == DPP_SPLIT_DONE_COUNTED) {
        /* its client was faster than this message: the split's data still
         * counts for the checks when it is of the current epoch */
        if (s->splits[i].lease.lease_id != msg->lease_id)
            return; /* of the epoch before */
        dpp_session_reported(s, i);
        if (msg->error_code == 0 && dpp_master_split_checks(m, s, msg))
            return;
        unsigned epoch = s->epoch;
        int more = dpp_session_unhold(s, 0); /* that was the report the epoch waited for */
        if (more >= 0)
            dpp_master_epoch_moved(m, s, epoch, more);
        return;
    }
    if (msg->error_code != 0) {
        dpp_master_fail_session(m, s, "cause=split", msg->error_message);
        return;
    }
    dpp_master_split_produced(s, i, msg->rows);
    if (dpp_master_split_checks(m, s, msg))
        return;
    DPP_DEBUG("split_produced session=%s epoch=%u split=%zu rows=%" PRIu64 " blocks=%u", s->id,
              s->epoch, i, msg->rows, msg->blocks);
}

static void index_done(peer_t *p, const Dpp__IndexDone *msg)
{
    dpp_master_t *m = p->m;
    size_t i = msg->file;
    dpp_session_t *s =
        dpp_master_index_lease(m, msg->session_id, msg->file, msg->lease_id, p->worker_id);
    if (s == NULL)
        return;
    dpp_file_t *f = &s->files[i];
    if (msg->error_code != 0) {
        dpp_master_fail_session(m, s, "cause=index", msg->error_message);
        return;
    }
    char why[256];
    const dpp_spec_t *spec = dpp_session_file_spec(s, i);
    if (!dpp_planner_for(spec->format, spec->text != NULL)
             ->check(msg->records, msg->boundaries, msg->n_boundaries, s->spec.split_rows, why,
                     sizeof why)) {
        char text[512];
        snprintf(text, sizeof text, "file %s: worker sent an inconsistent index: %s", f->rel_path,
                 why);
        dpp_master_fail_session(m, s, "cause=index", text);
        return;
    }
    add_rejects(&s->rejects, msg->rejects);
    if (msg->reject_detail[0] && s->first_reject == NULL)
        s->first_reject = dpp_xstrdup(msg->reject_detail);
    if (msg->reject_detail[0]) {
        char q[600];
        DPP_WARN("file_tail_rejected session=%s file=%s detail=%s", s->id, f->rel_path,
                 dpp_log_quote(msg->reject_detail, q, sizeof q));
        if (s->spec.on_corrupt_fail) {
            char text[1100];
            snprintf(text, sizeof text, "%s (on_corrupt: fail)", msg->reject_detail);
            dpp_master_fail_session(m, s, "cause=corrupt", text);
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
    /* reusable for the file the worker saw, unless its tail was damaged */
    if (!msg->reject_detail[0]) {
        ji.file_size = msg->file_size;
        ji.file_mtime_ns = msg->file_mtime_ns;
    }
    dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_INDEXED, &ji.base);
    if (dpp_master_journal_put_lazy(m, &rec, 1) != 0)
        return;
    int planned = dpp_session_file_indexed(s, i, msg->records, msg->boundaries, msg->n_boundaries);
    f->index_size = ji.file_size;
    f->index_mtime_ns = ji.file_mtime_ns;
    dpp_master_index_cache_put(m, f, dpp_spec_index_key(spec));
    m->n.index_done++;
    DPP_DEBUG("file_indexed session=%s file=%s records=%" PRIu64 " splits=%zu sidecar=%d", s->id,
              f->rel_path, msg->records, msg->n_boundaries - 1, msg->from_sidecar);
    if (s->state != SESSION_INDEXING) {
        DPP_INFO("session_planned session=%s files=%zu splits=%zu state=%s planning_ms=%" PRId64,
                 s->id, s->nfiles, s->nsplits, dpp_session_state_name(s->state),
                 s->planned_ms - s->submitted_ms);
        dpp_master_count_planning(m, s);
        if (s->state == SESSION_DONE && !dpp_master_plan_checks(m, s))
            dpp_master_session_done(m, s); /* nothing to read in its files */
    }
    if (planned)
        dpp_master_grant_soon(m);
    dpp_master_maybe_compact(m);
}

void dpp_master_worker_index_done(peer_t *p, const Dpp__IndexDone *msg)
{
    if (p->index_out > 0) /* one answer per index lease, current or not */
        p->index_out--;
    index_done(p, msg);
    dpp_master_grant_soon(p->m); /* its next index tasks, while its request waits */
}

void dpp_master_worker_timeouts(dpp_master_t *m, int64_t now_ms)
{
    for (peer_t *p = first_peer(m); p; p = next_peer(p)) {
        if (peer_role(p) == ROLE_WORKER && p->worker_id != 0 &&
            now_ms - p->base.last_seen_ms > (int64_t)m->worker_timeout_ms) {
            DPP_WARN("worker_timeout worker=%" PRIu64 " silent_ms=%" PRId64, p->worker_id,
                     now_ms - p->base.last_seen_ms);
            dpp_conn_close(&p->base.conn, DPP_ETIMEDOUT);
        }
    }
}
