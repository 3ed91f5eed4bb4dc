/* SPDX-License-Identifier: Apache-2.0 */
/* The master's connections: accepting them (up to --max-connections), the
 * HELLO/AUTH handshake and its deadline, the idle deadline, and dispatching
 * each frame to the RPC family of the peer's role. */
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

static const char *role_name(peer_role_t r)
{
    static const char *const names[] = {"none", "ctl", "worker", "client"};
    return names[r];
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
        dpp_master_release_worker(m, p->worker_id);
    free(p);
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
        if (expect_role(p, f->type, ROLE_WORKER))
            dpp_master_worker_split_done(p, (Dpp__SplitDone *)msg);
        break;
    case DPP_MSG_INDEX_DONE:
        if (expect_role(p, f->type, ROLE_WORKER))
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

void dpp_master_peers_sweep(dpp_master_t *m, int64_t now)
{
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
    }
}

int dpp_master_peers_listen(dpp_master_t *m)
{
    return uv_listen((uv_stream_t *)&m->listener, 128, on_connection);
}

void dpp_master_peers_close(dpp_master_t *m)
{
    for (peer_t *p = m->peers; p; p = p->next)
        dpp_conn_close(&p->conn, DPP_ECLOSED);
}
