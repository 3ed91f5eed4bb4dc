/* SPDX-License-Identifier: Apache-2.0 */
/* Addresses and a blocking request/reply connection (for dppctl, and for
 * tests), speaking the same frames as the libuv side. */
#ifndef DPP_WIRE_NET_H
#define DPP_WIRE_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <protobuf-c/protobuf-c.h>

#include "wire/frame.h"

/* The listen backlog of every daemon socket (the kernel caps it at
 * net.core.somaxconn). A full backlog drops a SYN, and the client's retry
 * comes a whole second later: 128 was reached by 1,000 workers starting at
 * once and by a slowloris reconnecting on the HTTP port, each time costing a
 * health probe or a worker a second. */
#define DPP_LISTEN_BACKLOG 4096

/* Parses "HOST:PORT" or "[V6]:PORT"; HOST may be a name (resolved with
 * getaddrinfo, first result). Returns 0, DPP_EINVAL for a malformed address,
 * or DPP_ERESOLVE when the name does not resolve. */
int dpp_addr_parse(const char *s, struct sockaddr_storage *out);

/* A sentence for a person on why connecting to the master failed with rc,
 * and what to try ("connection refused: nothing listens there. Is the
 * master running? Set --master HOST:PORT or DPP_MASTER ..."), into buf;
 * the caller names the address before it. Returns buf. */
const char *dpp_connect_hint(int rc, char *buf, size_t len);

/* Writes "HOST:PORT" (IPv6 in brackets) into buf; returns 0 or DPP_EINVAL. */
int dpp_addr_format(const struct sockaddr *sa, char *buf, size_t len);

/* Writes addr and a newline to path atomically (temp file + rename), so a
 * reader never sees a partial address. Returns 0 or -errno. */
int dpp_write_port_file(const char *path, const char *addr);

/* 1 when every address HOST:PORT resolves to is a loopback address
 * (127.0.0.0/8, ::1), 0 otherwise (a wildcard such as 0.0.0.0 included), a
 * negative error when it does not parse. */
int dpp_addr_is_loopback(const char *host_port);

typedef struct dpp_sync_conn {
    int fd;
    uint8_t *buf;
    size_t len, cap;
    dpp_frame_limits_t limits;
    char error[256]; /* why dpp_sync_connect() failed, when it can say more */
} dpp_sync_conn_t;

struct dpp_auth;

/* Connects to addr and exchanges Hello (role "ctl", "client"...), and with
 * the cluster token auth (NULL: none) authenticates both ways (auth.h).
 * Waits at most timeout_ms for each step. Returns 0 or a negative error
 * (c->error says more when it can, e.g. for DPP_EAUTH); on error nothing
 * needs closing. */
int dpp_sync_connect(dpp_sync_conn_t *c, const char *addr, const char *role, int timeout_ms,
                     const struct dpp_auth *auth);

/* Sends req as a frame of type `type` and waits for one reply frame. On 0,
 * *reply_type and *reply are set; the caller frees *reply with
 * protobuf_c_message_free_unpacked(*reply, NULL). An Error reply is returned
 * as such (type DPP_MSG_ERROR), not as a failure. */
int dpp_sync_call(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *req,
                  uint16_t *reply_type, ProtobufCMessage **reply, int timeout_ms);

/* The two halves of dpp_sync_call(): send one frame (no reply expected), or
 * wait for one. Same returns. */
int dpp_sync_send(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *m, int timeout_ms);
int dpp_sync_recv(dpp_sync_conn_t *c, uint16_t *reply_type, ProtobufCMessage **reply,
                  int timeout_ms);

void dpp_sync_close(dpp_sync_conn_t *c);

/* Microseconds the peer's TCP receive window has held the sender on socket
 * fd back (Linux tcp_info, 4.10 and later), UINT64_MAX when unknown. */
uint64_t dpp_tcp_rwnd_limited_us(int fd);

#endif
