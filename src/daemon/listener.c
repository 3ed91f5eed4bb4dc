/* SPDX-License-Identifier: Apache-2.0 */
/* Accepting peers under a cap, their handshake and deadlines (listener.h). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "daemon/listener.h"
#include "dpp/error.h"
#include "wire/frame.h"
#include "wire/net.h"

static void on_peer_closed(dpp_conn_t *c)
{
    dpp_peer_t *p = dpp_container_of(c, dpp_peer_t, conn);
    dpp_listener_t *l = p->lst;
    if (l->cfg.on_close)
        l->cfg.on_close(p);
    DPP_DLIST_UNLINK(l->peers, p);
    l->npeers--;
    DPP_DEBUG("peer_closed peer=%s reason=\"%s\"", c->peer, dpp_strerror(c->error));
    free(p);
}

static void on_peer_frame(dpp_conn_t *c, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    dpp_peer_t *p = dpp_container_of(c, dpp_peer_t, conn);
    dpp_listener_t *l = p->lst;
    p->last_seen_ms = dpp_now_ms();
    int rc = dpp_handshake_serve(c, &p->hs, &l->hs, f->type, msg);
    if (rc == DPP_EAUTH)
        l->auth_failures++;
    if (rc == DPP_HANDSHAKE_TAKEN && dpp_handshake_done(&p->hs)) {
        /* through: the daemon's own limits from now on */
        c->limits.max_msg = l->cfg.max_msg ? l->cfg.max_msg : DPP_FRAME_DEFAULT_MAX_MSG;
        c->read_chunk = 0;
    }
    if (rc == DPP_HANDSHAKE_PASS)
        l->cfg.on_frame(p, f, msg);
}

static void on_connection(uv_stream_t *server, int status)
{
    dpp_listener_t *l = dpp_container_of(server, dpp_listener_t, tcp);
    if (status < 0) {
        DPP_WARN("accept_failed %s error=\"%s\"", l->cfg.name, uv_strerror(status));
        return;
    }
    dpp_peer_t *p = dpp_xcalloc(1, l->cfg.peer_size);
    p->lst = l;
    dpp_handshake_init(&p->hs);
    if (dpp_conn_init(l->loop, &p->conn, on_peer_frame, on_peer_closed, p) != 0) {
        free(p);
        return;
    }
    DPP_DLIST_PUSH(l->peers, p);
    l->npeers++;
    p->accepted_ms = p->last_seen_ms = dpp_now_ms();
    p->conn.limits.max_msg = DPP_LISTENER_HANDSHAKE_BYTES;
    p->conn.limits.max_payload = 0;
    p->conn.read_chunk = DPP_LISTENER_HANDSHAKE_BYTES;
    p->conn.max_queued = l->cfg.max_queued == (size_t)-1 ? 0
                         : l->cfg.max_queued             ? l->cfg.max_queued
                                                         : DPP_LISTENER_MAX_QUEUED;
    if (dpp_conn_accept(server, &p->conn) != 0) {
        dpp_conn_close(&p->conn, DPP_ECLOSED);
    } else if (l->npeers > l->cfg.max_connections) {
        /* accepted only to be told: the others keep their service */
        l->refused++;
        DPP_WARN("connection_refused peer=%s reason=\"over --max-connections %u\"", p->conn.peer,
                 l->cfg.max_connections);
        dpp_conn_send_error(&p->conn, DPP_ECLOSED, "too many connections (the %s allows %u)",
                            l->cfg.name, l->cfg.max_connections);
        dpp_conn_close(&p->conn, DPP_ECLOSED);
    }
}

int dpp_listener_start(uv_loop_t *loop, dpp_listener_t *l, const dpp_listener_config_t *cfg,
                       const char *addr)
{
    memset(l, 0, sizeof *l);
    l->loop = loop;
    l->cfg = *cfg;
    l->hs = (dpp_handshake_server_t){cfg->auth, cfg->roles, cfg->name};
    uv_tcp_init(loop, &l->tcp);
    l->started = 1;
    struct sockaddr_storage ss;
    int rc = dpp_addr_parse(addr, &ss);
    if (rc) {
        DPP_ERROR("bad_listen_address addr=%s", addr);
        return rc;
    }
    rc = uv_tcp_bind(&l->tcp, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&l->tcp, DPP_LISTEN_BACKLOG, on_connection);
    if (rc) {
        DPP_ERROR("listen_failed addr=%s error=\"%s\"", addr, uv_strerror(rc));
        return rc;
    }
    int len = sizeof ss;
    uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&ss, &len);
    dpp_addr_format((struct sockaddr *)&ss, l->addr, sizeof l->addr);
    return 0;
}

void dpp_listener_sweep(dpp_listener_t *l, int64_t now)
{
    for (dpp_peer_t *p = l->peers; p; p = p->next) {
        if (p->conn.lingering && now - p->conn.linger_since_ms > DPP_CONN_LINGER_MS)
            dpp_conn_close(&p->conn, DPP_ETIMEDOUT); /* the rest of its refused frame never came */
        if (p->conn.closing)
            continue;
        if (!dpp_handshake_done(&p->hs)) {
            if (now - p->accepted_ms <= (int64_t)l->cfg.handshake_ms)
                continue;
            l->handshake_timeouts++;
            DPP_WARN("handshake_timeout peer=%s ms=%u", p->conn.peer, l->cfg.handshake_ms);
            dpp_conn_send_error(&p->conn, DPP_ETIMEDOUT, "no %s within %u ms",
                                p->hs.role < 0 ? "HELLO" : "AUTH", l->cfg.handshake_ms);
            dpp_conn_close(&p->conn, DPP_ETIMEDOUT);
        } else if (now - p->last_seen_ms > (int64_t)l->cfg.idle_ms &&
                   (l->cfg.idle == NULL || l->cfg.idle(p))) {
            l->idle_timeouts++;
            DPP_INFO("idle_timeout peer=%s role=%s ms=%u", p->conn.peer, l->cfg.roles[p->hs.role],
                     l->cfg.idle_ms);
            dpp_conn_send_error(&p->conn, DPP_ETIMEDOUT, "idle for %u ms", l->cfg.idle_ms);
            dpp_conn_close(&p->conn, DPP_ETIMEDOUT);
        }
    }
}

void dpp_listener_close(dpp_listener_t *l)
{
    if (!l->started || l->closed)
        return;
    l->closed = 1;
    uv_close((uv_handle_t *)&l->tcp, NULL);
    for (dpp_peer_t *p = l->peers; p; p = p->next)
        dpp_conn_close(&p->conn, DPP_ECLOSED);
}

void dpp_listener_metrics(const dpp_listener_t *l, dpp_metrics_t *m)
{
    const struct {
        const char *name, *help;
        uint64_t v;
    } counters[] = {
        {"dpp_connections_refused_total", "Connections over --max-connections.", l->refused},
        {"dpp_auth_failures_total", "Peers refused for a wrong or missing token.",
         l->auth_failures},
        {"dpp_handshake_timeouts_total", "Peers closed for not finishing HELLO/AUTH in time.",
         l->handshake_timeouts},
        {"dpp_idle_timeouts_total", "Peers closed for silence.", l->idle_timeouts},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        dpp_metrics_counter(m, counters[i].name, counters[i].help, counters[i].v);
    size_t nroles = 0;
    while (l->cfg.roles[nroles] != NULL)
        nroles++;
    size_t handshake = 0, by_role[8] = {0};
    for (const dpp_peer_t *p = l->peers; p; p = p->next) {
        if (!dpp_handshake_done(&p->hs))
            handshake++;
        else if ((size_t)p->hs.role < sizeof by_role / sizeof by_role[0])
            by_role[p->hs.role]++;
    }
    dpp_metrics_label_t lb[1];
    dpp_metrics_family(m, "dpp_connections", DPP_METRIC_GAUGE, "Open connections by role.");
    lb[0] = (dpp_metrics_label_t){"role", "handshake"};
    dpp_metrics_sample_u64(m, "dpp_connections", lb, 1, handshake);
    for (size_t r = 0; r < nroles && r < sizeof by_role / sizeof by_role[0]; r++) {
        lb[0] = (dpp_metrics_label_t){"role", l->cfg.roles[r]};
        dpp_metrics_sample_u64(m, "dpp_connections", lb, 1, by_role[r]);
    }
}
