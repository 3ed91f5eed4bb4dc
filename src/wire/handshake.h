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
 * proves it knows the same token. */
#ifndef DPP_WIRE_HANDSHAKE_H
#define DPP_WIRE_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "crypto/token.h"
#include "dpp.pb-c.h"

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

#endif
