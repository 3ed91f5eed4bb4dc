/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster-token authentication of a connection (docs/protocol.md
 * #authentication): challenge-response with HMAC-SHA256 in both directions
 * during the HELLO exchange, so that the token never crosses the wire.
 *
 *   connecting side                      server
 *   HELLO{role, nonce}           ->
 *                                <-      HELLO_REPLY{challenge, proof}
 *   (checks proof)
 *   AUTH{mac}                    ->      (checks mac; else ERROR and close)
 *   the first request            ->
 *
 * proof = HMAC(token, "dpp-auth-v1 server" || nonce || challenge)
 * mac   = HMAC(token, "dpp-auth-v1 client" || role || 0 || challenge || nonce)
 * Nonce and challenge are 32 bytes from getrandom(2). A server without a
 * token sends no challenge; a side with a token accepts only a peer that
 * proves it knows the same token.
 *
 * Two tiers: dpp_auth_*() compute and check the messages' fields (used by
 * the blocking connection of net.c too); dpp_handshake_*() run the whole
 * exchange on a libuv connection, one function for each side, so that the
 * master, the worker, the client library and the benchmarks share one copy
 * of the rules (version, roles, order of frames, what a failure says). */
#ifndef DPP_WIRE_HANDSHAKE_H
#define DPP_WIRE_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "crypto/token.h"
#include "dpp.pb-c.h"
#include "wire/conn.h"

#define DPP_AUTH_NONCE 32

/* What one connection remembers of its handshake. */
typedef struct dpp_auth_state {
    uint8_t nonce[DPP_AUTH_NONCE];     /* the connecting side's */
    uint8_t challenge[DPP_AUTH_NONCE]; /* the server's */
    uint8_t proof[DPP_AUTH_NONCE];     /* server: its answer to the nonce */
    uint8_t mac[DPP_AUTH_NONCE];       /* connecting side: its answer */
    int has_nonce;
    int pending; /* server: AUTH must come next */
} dpp_auth_state_t;

/* Connecting side, before sending h: with a token, a fresh nonce goes into
 * h (pointing into st). Returns 0 or -errno. */
int dpp_auth_hello(const dpp_auth_t *a, dpp_auth_state_t *st, Dpp__Hello *h);

/* Server, answering hello h with r: with a token, a fresh challenge and the
 * proof for h's nonce go into r (pointing into st), and st->pending is set:
 * the peer must send AUTH next. Returns 0 or -errno. */
int dpp_auth_reply(const dpp_auth_t *a, dpp_auth_state_t *st, const Dpp__Hello *h,
                   Dpp__HelloReply *r);

/* Server: checks the peer's AUTH (for the role it said in HELLO). Returns 0
 * (st->pending cleared) or DPP_EAUTH with the reason in err. */
int dpp_auth_check(const dpp_auth_t *a, dpp_auth_state_t *st, const char *role, const Dpp__Auth *m,
                   char *err, size_t errlen);

/* Connecting side, on the server's reply r: checks the server's proof and,
 * when r carries a challenge, fills *out (pointing into st) and sets *send:
 * AUTH must go out before anything else. Returns 0 or DPP_EAUTH with the
 * reason in err (a server that wants a token this side lacks, a server that
 * cannot prove it knows ours). */
int dpp_auth_answer(const dpp_auth_t *a, dpp_auth_state_t *st, const char *role,
                    const Dpp__HelloReply *r, Dpp__Auth *out, int *send, char *err, size_t errlen);

/* ---- the exchange on a libuv connection ---- */

/* Server side, per connection, in the owner's storage. */
typedef struct dpp_handshake {
    dpp_auth_state_t auth;
    int role; /* index into the server's roles once HELLO is accepted; -1 before */
} dpp_handshake_t;

/* What a server accepts, shared by all its connections. */
typedef struct dpp_handshake_server {
    const dpp_auth_t *auth;   /* NULL or no token: no authentication */
    const char *const *roles; /* HELLO roles served, NULL-terminated */
    const char *name;         /* "master", "worker": said in refusals */
} dpp_handshake_server_t;

/* Before the first frame of a connection. */
void dpp_handshake_init(dpp_handshake_t *hs);

/* 1 once HELLO was accepted and, with a token, AUTH checked. */
static inline int dpp_handshake_done(const dpp_handshake_t *hs)
{
    return hs->role >= 0 && !hs->auth.pending;
}

/* Server side: the frame (type, unpacked msg) that arrived on c. Returns
 * DPP_HANDSHAKE_PASS when the handshake is done and the frame is the
 * caller's; DPP_HANDSHAKE_TAKEN when it was a handshake step, answered here;
 * or a negative error when the frame broke the handshake (HELLO not first, a
 * second HELLO, another protocol version, a role not served, AUTH missing,
 * unexpected or wrong): the peer then got an Error naming the reason and c
 * is closing. DPP_EAUTH is an authentication failure, also logged here. */
#define DPP_HANDSHAKE_PASS 0
#define DPP_HANDSHAKE_TAKEN 1
int dpp_handshake_serve(dpp_conn_t *c, dpp_handshake_t *hs, const dpp_handshake_server_t *srv,
                        uint16_t type, const ProtobufCMessage *msg);

/* Connecting side: sends HELLO for role (with a token, a fresh nonce kept in
 * st). Returns 0, or a negative error with c closing. */
int dpp_handshake_hello(dpp_conn_t *c, dpp_auth_state_t *st, const dpp_auth_t *a, const char *role);

/* Connecting side, on the server's HELLO_REPLY r: checks the protocol
 * version and the server's proof, and sends AUTH when challenged. Returns 0
 * (the caller may send requests now), or a negative error with the reason in
 * err and c closing: DPP_EVERSION, DPP_EAUTH (a configuration error that
 * retrying cannot mend), or a send error. */
int dpp_handshake_answer(dpp_conn_t *c, dpp_auth_state_t *st, const dpp_auth_t *a, const char *role,
                         const Dpp__HelloReply *r, char *err, size_t errlen);

#endif
