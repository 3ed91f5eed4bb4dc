// SPDX-License-Identifier: Apache-2.0
// Cluster-token challenge-response (see auth.h).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/frame.h"
#include "wire/handshake.h"
#include "dpp/error.h"
#include "crypto/hmac.h"
#include "base/log.h"

#define SERVER_LABEL "dpp-auth-v1 server"
#define CLIENT_LABEL "dpp-auth-v1 client"

/* The MACs return 0 or -ENOMEM (libcrypto could not allocate): a failed one
 * fails the handshake, never compares. */
static int server_proof(const dpp_auth_t *a, const dpp_auth_state_t *st, uint8_t out[32])
{
    uint8_t msg[sizeof SERVER_LABEL - 1 + 2 * DPP_AUTH_NONCE];
    memcpy(msg, SERVER_LABEL, sizeof SERVER_LABEL - 1);
    memcpy(msg + sizeof SERVER_LABEL - 1, st->nonce, DPP_AUTH_NONCE);
    memcpy(msg + sizeof SERVER_LABEL - 1 + DPP_AUTH_NONCE, st->challenge, DPP_AUTH_NONCE);
    return dpp_hmac_sha256(a->token, a->len, msg, sizeof msg, out);
}

static int client_mac(const dpp_auth_t *a, const dpp_auth_state_t *st, const char *role,
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
    return dpp_hmac_sha256(a->token, a->len, msg, n, out);
}

/* A fresh state; with a token, 32 random bytes in *fresh (a nonce or a
 * challenge), put in *field for the wire. Returns 1 when a token is on, 0
 * when not, or -errno. */
static int start(const dpp_auth_t *a, dpp_auth_state_t *st, uint8_t *fresh,
                 ProtobufCBinaryData *field)
{
    memset(st, 0, sizeof *st);
    if (!dpp_auth_on(a))
        return 0;
    int rc = dpp_random_bytes(fresh, DPP_AUTH_NONCE);
    if (rc)
        return rc;
    field->data = fresh;
    field->len = DPP_AUTH_NONCE;
    return 1;
}

int dpp_auth_hello(const dpp_auth_t *a, dpp_auth_state_t *st, Dpp__Hello *h)
{
    int rc = start(a, st, st->nonce, &h->nonce);
    st->has_nonce = rc == 1;
    return rc < 0 ? rc : 0;
}

int dpp_auth_reply(const dpp_auth_t *a, dpp_auth_state_t *st, const Dpp__Hello *h,
                   Dpp__HelloReply *r)
{
    int rc = start(a, st, st->challenge, &r->challenge);
    if (rc <= 0)
        return rc;
    st->pending = 1;
    if (h->nonce.len == DPP_AUTH_NONCE) {
        memcpy(st->nonce, h->nonce.data, DPP_AUTH_NONCE);
        st->has_nonce = 1;
        if ((rc = server_proof(a, st, st->proof)) != 0)
            return rc;
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
    int rc = client_mac(a, st, role, want);
    if (rc != 0) {
        snprintf(err, errlen, "authentication failed: out of memory computing the MAC");
        return rc;
    }
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
    int rc = server_proof(a, st, want);
    if (rc == 0)
        rc = client_mac(a, st, role, st->mac);
    if (rc != 0) {
        snprintf(err, errlen, "authentication failed: out of memory computing the MAC");
        return rc;
    }
    if (!dpp_ct_equal(want, r->proof.data, DPP_AUTH_NONCE)) {
        snprintf(err, errlen, "authentication failed: the server has another cluster token");
        return DPP_EAUTH;
    }
    out->mac.data = st->mac;
    out->mac.len = DPP_AUTH_NONCE;
    *send = 1;
    return 0;
}

void dpp_handshake_init(dpp_handshake_t *hs)
{
    memset(hs, 0, sizeof *hs);
    hs->role = -1;
}

/* Answers the refusal, closes c and returns code. */
static int refuse(dpp_conn_t *c, int code, const char *text)
{
    dpp_conn_send_error(c, code, "%s", text);
    dpp_conn_close(c, code);
    return code;
}

static int serve_hello(dpp_conn_t *c, dpp_handshake_t *hs, const dpp_handshake_server_t *srv,
                       const Dpp__Hello *h)
{
    char text[256];
    if (hs->role >= 0)
        return refuse(c, DPP_EMSGTYPE, "second HELLO");
    if (h->version != DPP_PROTOCOL_VERSION) {
        snprintf(text, sizeof text, "protocol version %u, the %s speaks %u", h->version, srv->name,
                 DPP_PROTOCOL_VERSION);
        return refuse(c, DPP_EVERSION, text);
    }
    int role = -1;
    for (int i = 0; srv->roles[i] != NULL; i++)
        if (strcmp(h->role, srv->roles[i]) == 0)
            role = i;
    if (role < 0) {
        size_t n = (size_t)snprintf(text, sizeof text, "unknown role \"%.32s\": the %s serves",
                                    h->role, srv->name);
        for (int i = 0; srv->roles[i] != NULL && n < sizeof text; i++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s %s", i ? "," : "", srv->roles[i]);
        return refuse(c, DPP_EINVAL, text);
    }
    Dpp__HelloReply reply = DPP__HELLO_REPLY__INIT;
    reply.version = DPP_PROTOCOL_VERSION;
    int rc = dpp_auth_reply(srv->auth, &hs->auth, h, &reply);
    if (rc) {
        dpp_conn_close(c, rc);
        return rc;
    }
    hs->role = role;
    rc = dpp_conn_send(c, DPP_MSG_HELLO_REPLY, &reply.base);
    return rc ? rc : DPP_HANDSHAKE_TAKEN;
}

int dpp_handshake_serve(dpp_conn_t *c, dpp_handshake_t *hs, const dpp_handshake_server_t *srv,
                        uint16_t type, const ProtobufCMessage *msg)
{
    char text[256];
    if (type == DPP_MSG_HELLO)
        return serve_hello(c, hs, srv, (const Dpp__Hello *)msg);
    if (hs->role < 0) {
        snprintf(text, sizeof text, "expected HELLO, got %s", dpp_msg_name(type));
        return refuse(c, DPP_EMSGTYPE, text);
    }
    if (!hs->auth.pending && type != DPP_MSG_AUTH)
        return DPP_HANDSHAKE_PASS;
    int rc = DPP_EAUTH;
    if (!hs->auth.pending)
        snprintf(text, sizeof text, "unexpected AUTH");
    else if (type != DPP_MSG_AUTH)
        snprintf(text, sizeof text, "authentication required: this %s has a cluster token",
                 srv->name);
    else
        rc = dpp_auth_check(srv->auth, &hs->auth, srv->roles[hs->role], (const Dpp__Auth *)msg,
                            text, sizeof text);
    if (rc == 0)
        return DPP_HANDSHAKE_TAKEN;
    DPP_WARN("auth_failed peer=%s role=%s reason=\"%s\"", c->peer, srv->roles[hs->role], text);
    return refuse(c, rc, text);
}

int dpp_handshake_hello(dpp_conn_t *c, dpp_auth_state_t *st, const dpp_auth_t *a, const char *role)
{
    Dpp__Hello h = DPP__HELLO__INIT;
    h.version = DPP_PROTOCOL_VERSION;
    h.role = (char *)role;
    int rc = dpp_auth_hello(a, st, &h);
    if (rc == 0)
        rc = dpp_conn_send(c, DPP_MSG_HELLO, &h.base);
    if (rc)
        dpp_conn_close(c, rc);
    return rc;
}

int dpp_handshake_answer(dpp_conn_t *c, dpp_auth_state_t *st, const dpp_auth_t *a, const char *role,
                         const Dpp__HelloReply *r, char *err, size_t errlen)
{
    Dpp__Auth am = DPP__AUTH__INIT;
    int send = 0, rc;
    if (r->version != DPP_PROTOCOL_VERSION) {
        snprintf(err, errlen, "the peer speaks protocol version %u, this side %u", r->version,
                 DPP_PROTOCOL_VERSION);
        rc = DPP_EVERSION;
    } else {
        rc = dpp_auth_answer(a, st, role, r, &am, &send, err, errlen);
        if (rc == 0 && send)
            rc = dpp_conn_send(c, DPP_MSG_AUTH, &am.base);
    }
    if (rc)
        dpp_conn_close(c, rc);
    return rc;
}
