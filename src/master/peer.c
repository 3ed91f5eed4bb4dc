/* SPDX-License-Identifier: Apache-2.0 */
/* The master's connections on the shared listener (daemon/listener.c does
 * accept, cap, handshake and deadlines): each frame to the RPC family of
 * its peer's role. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "lease.h"
#include "master_internal.h"
#include "peer.h"
#include "rpc_client.h"
#include "rpc_ctl.h"
#include "rpc_worker.h"
#include "wire/conn.h"

static const char *const roles[] = {"ctl", "worker", "client", NULL};

static const char *role_name(peer_role_t r)
{
    return r == ROLE_NONE ? "none" : roles[r - 1];
}

static void on_peer_closed(dpp_peer_t *base)
{
    peer_t *p = (peer_t *)base;
    dpp_master_t *m = base->lst->cfg.data;
    dpp_master_unwait_lease(m, p);
    dpp_master_forget_cache(m, p);
    dpp_master_ctl_submit_gone(p);
    if (peer_role(p) == ROLE_WORKER && p->worker_id != 0 && !m->stopping)
        dpp_master_release_worker(m, p->worker_id);
    if (p->held_session[0]) { /* its rank may be taken over from now on */
        dpp_session_t *s = dpp_master_find_session(m, p->held_session);
        if (s && p->held_rank < s->spec.consumers && s->holders[p->held_rank].peer == p)
            s->holders[p->held_rank].peer = NULL;
    }
}

/* Clients refresh every second and dppctl asks once: silence is a peer gone
 * without closing, unless its submit's table is still being listed (the
 * silence is the master's). Workers have their own timeout (rpc_worker.c). */
static int idle_applies(const dpp_peer_t *base)
{
    const peer_t *p = (const peer_t *)base;
    peer_role_t r = peer_role(p);
    return (r == ROLE_CTL && p->submit == NULL) || r == ROLE_CLIENT;
}

static int expect_role(peer_t *p, uint16_t type, peer_role_t role)
{
    if (peer_role(p) == role)
        return 1;
    dpp_conn_send_error(&p->base.conn, DPP_EMSGTYPE, "%s is not a %s message", dpp_msg_name(type),
                        role_name(peer_role(p)));
    dpp_conn_close(&p->base.conn, DPP_EMSGTYPE);
    return 0;
}

/* A frame after the handshake, to the RPC family of the peer's role. */
static void on_peer_frame(dpp_peer_t *base, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    peer_t *p = (peer_t *)base;
    dpp_conn_t *c = &base->conn;
    if (p->m == NULL) {
        p->m = base->lst->cfg.data;
        c->hold = &p->m->hold_frames; /* group commit: see master_internal.h */
        c->held_list = &p->m->held_conns;
    }
    switch (f->type) {
    case DPP_MSG_SUBMIT:
        if (expect_role(p, f->type, ROLE_CTL))
            dpp_master_ctl_submit(p, (Dpp__SubmitRequest *)msg);
        break;
    case DPP_MSG_STATUS:
        dpp_master_ctl_status(p, (Dpp__StatusRequest *)msg);
        break;
    case DPP_MSG_CANCEL:
        if (expect_role(p, f->type, ROLE_CTL))
            dpp_master_ctl_cancel(p, (Dpp__CancelRequest *)msg);
        break;
    case DPP_MSG_REGISTER:
        if (expect_role(p, f->type, ROLE_WORKER))
            dpp_master_worker_register(p, (Dpp__RegisterRequest *)msg);
        break;
    case DPP_MSG_HEARTBEAT:
        if (expect_role(p, f->type, ROLE_WORKER) && p->worker_id != 0)
            dpp_master_worker_heartbeat(p);
        break;
    case DPP_MSG_LEASE:
        if (expect_role(p, f->type, ROLE_WORKER) && p->worker_id != 0)
            dpp_master_worker_lease_request(p, (Dpp__LeaseRequest *)msg);
        break;
    case DPP_MSG_SPLIT_DONE:
        /* only a registered worker holds leases: an unregistered one could
         * match lease id 0 of a task nobody holds */
        if (expect_role(p, f->type, ROLE_WORKER) && p->worker_id != 0)
            dpp_master_worker_split_done(p, (Dpp__SplitDone *)msg);
        break;
    case DPP_MSG_INDEX_DONE:
        /* only a registered worker holds leases: an unregistered one could
         * match lease id 0 of a task nobody holds */
        if (expect_role(p, f->type, ROLE_WORKER) && p->worker_id != 0)
            dpp_master_worker_index_done(p, (Dpp__IndexDone *)msg);
        break;
    case DPP_MSG_ATTACH:
        if (expect_role(p, f->type, ROLE_CLIENT))
            dpp_master_client_attach(p, (Dpp__AttachRequest *)msg);
        break;
    case DPP_MSG_SPLIT_CONSUMED:
        if (expect_role(p, f->type, ROLE_CLIENT))
            dpp_master_client_consumed(p, (Dpp__SplitConsumed *)msg);
        break;
    default:
        dpp_conn_send_error(c, DPP_EMSGTYPE, "unexpected %s", dpp_msg_name(f->type));
        dpp_conn_close(c, DPP_EMSGTYPE);
    }
}

int dpp_master_peers_listen(dpp_master_t *m, const dpp_master_config_t *cfg)
{
    dpp_listener_config_t lc = {
        .name = "master",
        .roles = roles,
        .auth = &m->auth,
        .handshake_ms = cfg->handshake_ms ? cfg->handshake_ms : 10000,
        .idle_ms = cfg->idle_ms ? cfg->idle_ms : 60000,
        .max_connections = cfg->max_connections ? cfg->max_connections : 1024,
        .max_msg = cfg->max_msg_bytes,
        .peer_size = sizeof(peer_t),
        .on_frame = on_peer_frame,
        .on_close = on_peer_closed,
        .idle = idle_applies,
        .data = m,
    };
    return dpp_listener_start(m->loop, &m->lst, &lc, cfg->listen);
}
