/* SPDX-License-Identifier: Apache-2.0 */
/* A daemon's listening socket and the peers it accepted: the connection cap,
 * the handshake (wire/handshake.h) with its deadline, the idle deadline, and
 * their counters. The master and the worker each run one, so these limits
 * exist once. Loop thread only. */
#ifndef DPP_DAEMON_LISTENER_H
#define DPP_DAEMON_LISTENER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/metrics.h"
#include "wire/conn.h"
#include "wire/handshake.h"

typedef struct dpp_listener dpp_listener_t;

/* Before its handshake is done a peer may send only frames this small (HELLO
 * and AUTH are under 100 bytes) and no payload, and its reads go into a
 * buffer of this size: what unauthenticated peers can make a daemon hold is
 * at most max_connections times this. */
#define DPP_LISTENER_HANDSHAKE_BYTES 1024u

/* A peer with this much of its answers not yet taken off the socket gets
 * nothing more read or answered until it catches up (wire/conn.h
 * max_queued): requests it pipelines without reading cost it, not the
 * daemon. Zero in cfg.max_queued takes it; the worker's data connections
 * are bounded by credits instead (cfg.max_queued (size_t)-1: unbounded). */
#define DPP_LISTENER_MAX_QUEUED (8u << 20)

/* One accepted connection. The owner's per-peer struct embeds it as its
 * first member (the listener allocates cfg.peer_size zeroed bytes). */
typedef struct dpp_peer {
    dpp_conn_t conn;
    dpp_listener_t *lst;
    dpp_handshake_t hs; /* hs.role: index into cfg.roles once HELLO is accepted */
    int64_t accepted_ms, last_seen_ms;
    struct dpp_peer *prev, *next;
} dpp_peer_t;

/* A frame after the handshake; msg is f's unpacked message, valid during the
 * call. The callback may close the peer. */
typedef void (*dpp_peer_frame_cb)(dpp_peer_t *p, const dpp_frame_t *f, const ProtobufCMessage *msg);
/* The peer's connection is closed; its memory is freed when this returns. */
typedef void (*dpp_peer_close_cb)(dpp_peer_t *p);
/* Whether the idle deadline applies to an authenticated peer. */
typedef int (*dpp_peer_idle_cb)(const dpp_peer_t *p);

typedef struct dpp_listener_config {
    const char *name;         /* "master", "worker": in refusals and logs */
    const char *const *roles; /* HELLO roles served, NULL-terminated */
    const dpp_auth_t *auth;   /* NULL or no token: no authentication */
    unsigned handshake_ms;    /* HELLO (and AUTH) must be done by then */
    unsigned idle_ms;         /* an authenticated peer silent this long is closed */
    unsigned max_connections; /* peers at once; one more is told so and closed */
    uint32_t max_msg;         /* frames' message bytes once authenticated; 0: the default.
                                 Peers never send payloads to a daemon: none is accepted */
    size_t peer_size;         /* >= sizeof(dpp_peer_t) */
    size_t max_queued;        /* 0: DPP_LISTENER_MAX_QUEUED; (size_t)-1: no bound */
    dpp_peer_frame_cb on_frame;
    dpp_peer_close_cb on_close; /* NULL: nothing to do */
    dpp_peer_idle_cb idle;      /* NULL: the idle deadline applies to every peer */
    void *data;                 /* the owner's */
} dpp_listener_config_t;

struct dpp_listener {
    uv_tcp_t tcp;
    uv_loop_t *loop;
    dpp_listener_config_t cfg;
    dpp_handshake_server_t hs;
    dpp_peer_t *peers; /* every open peer, newest first */
    size_t npeers;
    char addr[64]; /* the address bound, "HOST:PORT" */
    uint64_t refused, auth_failures, handshake_timeouts, idle_timeouts;
    int started, closed;
};

/* Binds addr ("HOST:PORT", port 0: any) and starts accepting. cfg is copied;
 * the strings, roles and token it points to must outlive the listener.
 * Returns 0 or a negative error (logged). Either way the owner calls
 * dpp_listener_close() before its loop ends. */
int dpp_listener_start(uv_loop_t *loop, dpp_listener_t *l, const dpp_listener_config_t *cfg,
                       const char *addr);

/* Enforces the handshake and idle deadlines at now_ms; call it from a timer
 * at least as often as the shorter deadline's precision needs. */
void dpp_listener_sweep(dpp_listener_t *l, int64_t now_ms);

/* Stops accepting and closes every peer (on_close runs for each as its
 * connection closes). Safe to call twice. */
void dpp_listener_close(dpp_listener_t *l);

/* Writes the listener's counters and, last, the family dpp_connections with
 * one sample per role (role="handshake": not yet authenticated), so that
 * the caller may add samples for connections of its own right after. */
void dpp_listener_metrics(const dpp_listener_t *l, dpp_metrics_t *m);

#endif
