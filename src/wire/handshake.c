// SPDX-License-Identifier: Apache-2.0
// Cluster-token challenge-response (see auth.h).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/handshake.h"
#include "dpp/error.h"
#include "crypto/hmac.h"
#include "base/log.h"

#define SERVER_LABEL "dpp-auth-v1 server"
#define CLIENT_LABEL "dpp-auth-v1 client"

static void server_proof(const dpp_auth_t *a, const dpp_auth_state_t *st, uint8_t out[32])
{
    uint8_t msg[sizeof SERVER_LABEL - 1 + 2 * DPP_AUTH_NONCE];
    memcpy(msg, SERVER_LABEL, sizeof SERVER_LABEL - 1);
    memcpy(msg + sizeof SERVER_LABEL - 1, st->nonce, DPP_AUTH_NONCE);
    memcpy(msg + sizeof SERVER_LABEL - 1 + DPP_AUTH_NONCE, st->challenge, DPP_AUTH_NONCE);
    dpp_hmac_sha256(a->token, a->len, msg, sizeof msg, out);
}

static void client_mac(const dpp_auth_t *a, const dpp_auth_state_t *st, const char *role,
                       uint8_t out[32])
{
    char role_buf[16];
    size_t rl = strnlen(role, sizeof role_buf - 1);
    memcpy(role_buf, role, rl);
    role_buf[rl] = '\0';
    uint8_t msg[sizeof CLIENT_LABEL - 1 + sizeof role_buf + 2 * DPP_AUTH_NONCE];
    size_t n = 0;
    memcpy(msg + n, CLIENT_LABEL, sizeof CLIENT_LABEL - 1);
    n += sizeof CLIENT_LABEL - 1;
    memcpy(msg + n, role_buf, rl + 1); /* with its NUL: role and challenge cannot blur */
    n += rl + 1;
    memcpy(msg + n, st->challenge, DPP_AUTH_NONCE);
    n += DPP_AUTH_NONCE;
    memcpy(msg + n, st->nonce, DPP_AUTH_NONCE);
    n += DPP_AUTH_NONCE;
    dpp_hmac_sha256(a->token, a->len, msg, n, out);
}

int dpp_auth_hello(const dpp_auth_t *a, dpp_auth_state_t *st, Dpp__Hello *h)
{
    memset(st, 0, sizeof *st);
    if (!dpp_auth_on(a))
        return 0;
    int rc = dpp_random_bytes(st->nonce, DPP_AUTH_NONCE);
    if (rc)
        return rc;
    st->has_nonce = 1;
    h->nonce.data = st->nonce;
    h->nonce.len = DPP_AUTH_NONCE;
    return 0;
}

int dpp_auth_reply(const dpp_auth_t *a, dpp_auth_state_t *st, const Dpp__Hello *h,
                   Dpp__HelloReply *r)
{
    memset(st, 0, sizeof *st);
    if (!dpp_auth_on(a))
        return 0;
    int rc = dpp_random_bytes(st->challenge, DPP_AUTH_NONCE);
    if (rc)
        return rc;
    st->pending = 1;
    r->challenge.data = st->challenge;
    r->challenge.len = DPP_AUTH_NONCE;
    if (h->nonce.len == DPP_AUTH_NONCE) {
        memcpy(st->nonce, h->nonce.data, DPP_AUTH_NONCE);
        st->has_nonce = 1;
        server_proof(a, st, st->proof);
        r->proof.data = st->proof;
        r->proof.len = DPP_AUTH_NONCE;
    }
    return 0;
}

int dpp_auth_check(const dpp_auth_t *a, dpp_auth_state_t *st, const char *role, const Dpp__Auth *m,
                   char *err, size_t errlen)
{
    if (!st->has_nonce) {
        snprintf(err, errlen,
                 "authentication failed: no cluster token on the connecting side "
                 "(--token-file or DPP_TOKEN_FILE)");
        return DPP_EAUTH;
    }
    uint8_t want[DPP_AUTH_NONCE];
    client_mac(a, st, role, want);
    if (m->mac.len != DPP_AUTH_NONCE || !dpp_ct_equal(m->mac.data, want, DPP_AUTH_NONCE)) {
        snprintf(err, errlen, "authentication failed: wrong cluster token");
        return DPP_EAUTH;
    }
    st->pending = 0;
    return 0;
}

int dpp_auth_answer(const dpp_auth_t *a, dpp_auth_state_t *st, const char *role,
                    const Dpp__HelloReply *r, Dpp__Auth *out, int *send, char *err, size_t errlen)
{
    *send = 0;
    int challenged = r->challenge.len > 0;
    if (!dpp_auth_on(a)) {
        if (!challenged)
            return 0;
        snprintf(err, errlen,
                 "authentication failed: the server requires the cluster token "
                 "(--token-file or DPP_TOKEN_FILE)");
        return DPP_EAUTH;
    }
    if (!challenged || r->challenge.len != DPP_AUTH_NONCE || r->proof.len != DPP_AUTH_NONCE) {
        snprintf(err, errlen,
                 "authentication failed: the server does not prove that it knows "
                 "the cluster token (is it running without --token-file?)");
        return DPP_EAUTH;
    }
    memcpy(st->challenge, r->challenge.data, DPP_AUTH_NONCE);
    uint8_t want[DPP_AUTH_NONCE];
    server_proof(a, st, want);
    if (!dpp_ct_equal(want, r->proof.data, DPP_AUTH_NONCE)) {
        snprintf(err, errlen, "authentication failed: the server has another cluster token");
        return DPP_EAUTH;
    }
    client_mac(a, st, role, st->mac);
    out->mac.data = st->mac;
    out->mac.len = DPP_AUTH_NONCE;
    *send = 1;
    return 0;
}
