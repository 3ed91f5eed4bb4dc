// SPDX-License-Identifier: Apache-2.0
// A real listener on 127.0.0.1 and connecting sides in the same libuv loop:
// the HELLO/AUTH exchange with and without tokens, lies and replays,
// malformed and out-of-order frames, the connection cap, the handshake and
// idle deadlines, and the counters and metrics they leave.
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "crypto/hmac.h"
#include "daemon/listener.h"
#include "daemon/metrics.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "wire/frame.h"
#include "wire/handshake.h"
#include "wire/net.h"

#define WATCHDOG_MS 3000
#define MAX_CLIENTS 8
#define HANDSHAKE_MS 1000
#define IDLE_MS 5000

static const char *const roles[] = {"ctl", "worker", NULL};
static const dpp_auth_t token_a = {(const uint8_t *)"token-A-0123456789abcdef-0123456", 32};
static const dpp_auth_t token_b = {(const uint8_t *)"token-B-0123456789abcdef-0123456", 32};

typedef struct env env_t;
typedef struct client client_t;

/* One connecting side: a dpp_conn_t and what it saw. */
struct client {
    dpp_conn_t conn;
    const dpp_auth_t *auth;
    const char *role;
    dpp_auth_state_t st;
    void (*connected)(client_t *c);                         /* default: HELLO */
    void (*replied)(client_t *c, const Dpp__HelloReply *r); /* default: answer, STATUS */
    const uint8_t *raw;                                     /* bytes for send_raw */
    size_t raw_len;
    int connect_status; /* 1 until the connect callback */
    int replies;        /* HELLO_REPLYs */
    uint8_t challenge[DPP_AUTH_NONCE];
    size_t challenge_len;
    int answer_rc; /* of dpp_handshake_answer; 1 before it ran */
    char answer_err[256];
    int errors; /* Error frames */
    int error_code;
    char error_text[512];
    int other_frames; /* neither HELLO_REPLY nor Error */
    int closed;       /* the close callback ran */
    int close_error;
};

/* The server's side: a peer struct of the owner's, with what it saw. */
typedef struct test_peer {
    dpp_peer_t base;
    int frames;
} test_peer_t;

struct env {
    uv_loop_t loop;
    uv_timer_t watchdog;
    int expired;
    dpp_listener_t lst;
    struct sockaddr_storage addr;
    client_t clients[MAX_CLIENTS];
    int nclients;
    /* what cfg.on_frame, on_close and idle saw */
    int frames;
    uint16_t frame_type;
    int frame_role;
    int closes;
    int close_error; /* conn.error of the last peer closed */
    int close_done;  /* whether that peer had finished its handshake */
    int idle_calls;
};

/* ---- the server's callbacks ---- */

static void on_server_frame(dpp_peer_t *p, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    env_t *e = p->lst->cfg.data;
    assert_non_null(msg);
    e->frames++;
    e->frame_type = f->type;
    e->frame_role = p->hs.role;
    ((test_peer_t *)p)->frames++;
}

static void on_server_close(dpp_peer_t *p)
{
    env_t *e = p->lst->cfg.data;
    e->closes++;
    e->close_error = p->conn.error;
    e->close_done = dpp_handshake_done(&p->hs);
}

/* The idle deadline applies to every role but "ctl". */
static int idle_applies(const dpp_peer_t *p)
{
    env_t *e = p->lst->cfg.data;
    e->idle_calls++;
    return strcmp(roles[p->hs.role], "ctl") != 0;
}

/* ---- the loop ---- */

static void on_watchdog(uv_timer_t *t)
{
    env_t *e = t->data;
    e->expired = 1;
}

/* Runs the loop until cond holds; fails the test after WATCHDOG_MS. */
#define RUN_UNTIL(e, cond)                                                                         \
    do {                                                                                           \
        (e)->expired = 0;                                                                          \
        uv_timer_start(&(e)->watchdog, on_watchdog, WATCHDOG_MS, 0);                               \
        while (!(cond) && !(e)->expired)                                                           \
            uv_run(&(e)->loop, UV_RUN_ONCE);                                                       \
        uv_timer_stop(&(e)->watchdog);                                                             \
        if (!(cond))                                                                               \
            fail_msg("timed out waiting for %s", #cond);                                           \
    } while (0)

static env_t *env_start(const dpp_auth_t *auth, unsigned max_connections, int with_idle_cb)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    assert_int_equal(uv_timer_init(&e->loop, &e->watchdog), 0);
    e->watchdog.data = e;
    dpp_listener_config_t cfg = {
        .name = "master",
        .roles = roles,
        .auth = auth,
        .handshake_ms = HANDSHAKE_MS,
        .idle_ms = IDLE_MS,
        .max_connections = max_connections,
        .peer_size = sizeof(test_peer_t),
        .on_frame = on_server_frame,
        .on_close = on_server_close,
        .idle = with_idle_cb ? idle_applies : NULL,
        .data = e,
    };
    assert_int_equal(dpp_listener_start(&e->loop, &e->lst, &cfg, "127.0.0.1:0"), 0);
    assert_int_equal(strncmp(e->lst.addr, "127.0.0.1:", 10), 0);
    assert_int_equal(dpp_addr_parse(e->lst.addr, &e->addr), 0);
    assert_int_not_equal(((struct sockaddr_in *)&e->addr)->sin_port, 0);
    return e;
}

/* Closes every handle; the loop must then have none left. */
static void env_finish(env_t *e)
{
    for (int i = 0; i < e->nclients; i++)
        dpp_conn_close(&e->clients[i].conn, 0);
    dpp_listener_close(&e->lst);
    uv_close((uv_handle_t *)&e->watchdog, NULL);
    assert_int_equal(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    for (int i = 0; i < e->nclients; i++)
        assert_true(e->clients[i].closed);
    assert_null(e->lst.peers);
    assert_int_equal(e->lst.npeers, 0);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    free(e);
}

/* ---- the connecting side ---- */

static void send_request(client_t *c)
{
    Dpp__StatusRequest req = DPP__STATUS_REQUEST__INIT;
    assert_int_equal(dpp_conn_send(&c->conn, DPP_MSG_STATUS, &req.base), 0);
}

static void send_hello(client_t *c, uint32_t version, const char *role, const uint8_t *nonce)
{
    Dpp__Hello h = DPP__HELLO__INIT;
    h.version = version;
    h.role = (char *)role;
    if (nonce) {
        h.nonce.data = (uint8_t *)nonce;
        h.nonce.len = DPP_AUTH_NONCE;
    }
    assert_int_equal(dpp_conn_send(&c->conn, DPP_MSG_HELLO, &h.base), 0);
}

static void send_auth(client_t *c, const uint8_t *mac, size_t len)
{
    Dpp__Auth a = DPP__AUTH__INIT;
    a.mac.data = (uint8_t *)mac;
    a.mac.len = len;
    assert_int_equal(dpp_conn_send(&c->conn, DPP_MSG_AUTH, &a.base), 0);
}

static void send_raw(client_t *c)
{
    uv_buf_t b = uv_buf_init((char *)c->raw, (unsigned)c->raw_len);
    assert_int_equal(uv_try_write((uv_stream_t *)&c->conn.tcp, &b, 1), (int)c->raw_len);
}

static void hello_default(client_t *c)
{
    assert_int_equal(dpp_handshake_hello(&c->conn, &c->st, c->auth, c->role), 0);
}

static void reply_default(client_t *c, const Dpp__HelloReply *r)
{
    c->answer_rc = dpp_handshake_answer(&c->conn, &c->st, c->auth, c->role, r, c->answer_err,
                                        sizeof c->answer_err);
    if (c->answer_rc == 0)
        send_request(c);
}

static void on_client_frame(dpp_conn_t *conn, const dpp_frame_t *f, const ProtobufCMessage *m)
{
    client_t *c = conn->data;
    if (f->type == DPP_MSG_HELLO_REPLY) {
        const Dpp__HelloReply *r = (const Dpp__HelloReply *)m;
        c->replies++;
        c->challenge_len = r->challenge.len;
        if (r->challenge.len == DPP_AUTH_NONCE)
            memcpy(c->challenge, r->challenge.data, DPP_AUTH_NONCE);
        if (c->replied)
            c->replied(c, r);
    } else if (f->type == DPP_MSG_ERROR) {
        const Dpp__Error *err = (const Dpp__Error *)m;
        c->errors++;
        c->error_code = err->code;
        snprintf(c->error_text, sizeof c->error_text, "%s", err->message);
    } else {
        c->other_frames++;
    }
}

static void on_client_close(dpp_conn_t *conn)
{
    client_t *c = conn->data;
    c->closed = 1;
    c->close_error = conn->error;
}

static void on_client_connect(dpp_conn_t *conn, int status)
{
    client_t *c = conn->data;
    c->connect_status = status;
    assert_int_equal(status, 0);
    if (c->connected)
        c->connected(c);
}

/* A connecting side with the default behaviour: HELLO, answer, a STATUS
 * request. Tests change the hooks before the loop runs again. */
static client_t *client_start(env_t *e, const dpp_auth_t *auth, const char *role)
{
    assert_true(e->nclients < MAX_CLIENTS);
    client_t *c = &e->clients[e->nclients++];
    c->auth = auth;
    c->role = role;
    c->connected = hello_default;
    c->replied = reply_default;
    c->connect_status = 1;
    c->answer_rc = 1;
    assert_int_equal(dpp_conn_init(&e->loop, &c->conn, on_client_frame, on_client_close, c), 0);
    assert_int_equal(dpp_conn_connect(&c->conn, (struct sockaddr *)&e->addr, on_client_connect), 0);
    return c;
}

/* The listener's peer for c, found by c's local address; NULL if none. */
static test_peer_t *server_peer(env_t *e, client_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char name[64];
    assert_int_equal(uv_tcp_getsockname(&c->conn.tcp, (struct sockaddr *)&ss, &len), 0);
    assert_int_equal(dpp_addr_format((struct sockaddr *)&ss, name, sizeof name), 0);
    for (dpp_peer_t *p = e->lst.peers; p; p = p->next)
        if (strcmp(p->conn.peer, name) == 0)
            return (test_peer_t *)p;
    return NULL;
}

/* Waits until the server refused c: the Error frame arrived, then c closed.
 * done: whether c had finished its handshake. */
static void expect_refusal_after(env_t *e, client_t *c, int code, const char *text, int done)
{
    RUN_UNTIL(e, c->closed && e->closes >= 1);
    assert_int_equal(c->errors, 1);
    assert_int_equal(c->other_frames, 0);
    assert_int_equal(c->error_code, code);
    assert_string_equal(c->error_text, text);
    assert_int_equal(c->close_error, DPP_ECLOSED); /* the server closed after its Error */
    assert_int_equal(e->close_error, code);        /* the reason the server's side kept */
    assert_int_equal(e->close_done, done);
    assert_int_equal(e->frames, 0);
}

static void expect_refusal(env_t *e, client_t *c, int code, const char *text)
{
    expect_refusal_after(e, c, code, text, 0);
}

static void assert_counters(const env_t *e, uint64_t refused, uint64_t auth_failures,
                            uint64_t handshake_timeouts, uint64_t idle_timeouts)
{
    assert_int_equal(e->lst.refused, refused);
    assert_int_equal(e->lst.auth_failures, auth_failures);
    assert_int_equal(e->lst.handshake_timeouts, handshake_timeouts);
    assert_int_equal(e->lst.idle_timeouts, idle_timeouts);
}

/* ---- cases ---- */

static void run_success(const dpp_auth_t *server, const dpp_auth_t *client, int challenged)
{
    env_t *e = env_start(server, 8, 0);
    client_t *c = client_start(e, client, "worker");
    RUN_UNTIL(e, e->frames == 1);
    assert_int_equal(c->connect_status, 0);
    assert_int_equal(c->replies, 1);
    assert_int_equal(c->answer_rc, 0);
    assert_int_equal(c->challenge_len, challenged ? DPP_AUTH_NONCE : 0);
    assert_int_equal(e->frame_type, DPP_MSG_STATUS);
    assert_int_equal(e->frame_role, 1); /* "worker" in roles */
    test_peer_t *p = server_peer(e, c);
    assert_non_null(p);
    assert_int_equal(p->frames, 1);
    assert_true(dpp_handshake_done(&p->base.hs));
    assert_int_equal(c->errors, 0);
    assert_int_equal(c->other_frames, 0);
    assert_false(c->closed);
    assert_int_equal(e->closes, 0);
    assert_counters(e, 0, 0, 0, 0);
    env_finish(e);
}

static void test_same_token(void **state)
{
    (void)state;
    run_success(&token_a, &token_a, 1);
}

static void test_no_token_anywhere(void **state)
{
    (void)state;
    run_success(NULL, NULL, 0);
    const dpp_auth_t none = {NULL, 0};
    run_success(&none, &none, 0);
}

/* The server has another token: the connecting side finds out from the
 * server's proof and never sends AUTH. */
static void test_wrong_token_client_view(void **state)
{
    (void)state;
    env_t *e = env_start(&token_b, 8, 0);
    client_t *c = client_start(e, &token_a, "ctl");
    RUN_UNTIL(e, c->closed && e->closes == 1);
    assert_int_equal(c->answer_rc, DPP_EAUTH);
    assert_string_equal(c->answer_err,
                        "authentication failed: the server has another cluster token");
    assert_int_equal(c->close_error, DPP_EAUTH);
    assert_int_equal(c->errors, 0);
    assert_int_equal(e->close_error, DPP_ECLOSED); /* the server just saw it go */
    assert_int_equal(e->frames, 0);
    assert_counters(e, 0, 0, 0, 0);
    env_finish(e);
}

/* The answer computed with the right token, then one byte changed. */
static void reply_bad_mac(client_t *c, const Dpp__HelloReply *r)
{
    Dpp__Auth out = DPP__AUTH__INIT;
    int send = 0;
    char err[256];
    assert_int_equal(dpp_auth_answer(c->auth, &c->st, c->role, r, &out, &send, err, sizeof err), 0);
    assert_true(send);
    assert_int_equal(out.mac.len, DPP_AUTH_NONCE);
    uint8_t mac[DPP_AUTH_NONCE];
    memcpy(mac, out.mac.data, sizeof mac);
    mac[7] ^= 0x01;
    send_auth(c, mac, sizeof mac);
    send_request(c); /* must never reach on_frame */
}

static void test_bad_mac(void **state)
{
    (void)state;
    env_t *e = env_start(&token_a, 8, 0);
    client_t *c = client_start(e, &token_a, "ctl");
    c->replied = reply_bad_mac;
    expect_refusal(e, c, DPP_EAUTH, "authentication failed: wrong cluster token");
    assert_counters(e, 0, 1, 0, 0);
    env_finish(e);
}

/* The MAC as docs/protocol.md defines it, computed here independently:
 * HMAC(token, "dpp-auth-v1 client" || role || 0 || challenge || nonce). */
static void documented_mac(const dpp_auth_t *a, const char *role, const uint8_t *challenge,
                           const uint8_t *nonce, uint8_t out[DPP_AUTH_NONCE])
{
    uint8_t msg[256];
    size_t n = 0;
    memcpy(msg + n, "dpp-auth-v1 client", 18);
    n += 18;
    memcpy(msg + n, role, strlen(role) + 1);
    n += strlen(role) + 1;
    memcpy(msg + n, challenge, DPP_AUTH_NONCE);
    n += DPP_AUTH_NONCE;
    memcpy(msg + n, nonce, DPP_AUTH_NONCE);
    n += DPP_AUTH_NONCE;
    dpp_hmac_sha256(a->token, a->len, msg, n, out);
}

static const dpp_auth_t *mac_token; /* the token reply_documented_mac uses */

/* Skips the check of the server's proof and answers the challenge with
 * mac_token, as a client that lies about its token would. */
static void reply_documented_mac(client_t *c, const Dpp__HelloReply *r)
{
    assert_int_equal(r->challenge.len, DPP_AUTH_NONCE);
    uint8_t mac[DPP_AUTH_NONCE];
    documented_mac(mac_token, c->role, r->challenge.data, c->st.nonce, mac);
    send_auth(c, mac, sizeof mac);
    send_request(c);
}

static void test_lying_client(void **state)
{
    (void)state;
    /* the documented formula with the server's token is accepted ... */
    env_t *e = env_start(&token_b, 8, 0);
    client_t *c = client_start(e, &token_b, "worker");
    mac_token = &token_b;
    c->replied = reply_documented_mac;
    RUN_UNTIL(e, e->frames == 1);
    assert_int_equal(e->frame_role, 1);
    assert_int_equal(c->errors, 0);
    assert_counters(e, 0, 0, 0, 0);
    env_finish(e);
    /* ... with another token it is not */
    e = env_start(&token_b, 8, 0);
    c = client_start(e, &token_a, "worker");
    mac_token = &token_a;
    c->replied = reply_documented_mac;
    expect_refusal(e, c, DPP_EAUTH, "authentication failed: wrong cluster token");
    assert_counters(e, 0, 1, 0, 0);
    env_finish(e);
}

static void test_token_on_one_side(void **state)
{
    (void)state;
    /* only the server has one */
    env_t *e = env_start(&token_a, 8, 0);
    client_t *c = client_start(e, NULL, "ctl");
    RUN_UNTIL(e, c->closed && e->closes == 1);
    assert_int_equal(c->answer_rc, DPP_EAUTH);
    assert_non_null(strstr(c->answer_err, "requires the cluster token"));
    assert_int_equal(c->close_error, DPP_EAUTH);
    assert_int_equal(c->challenge_len, DPP_AUTH_NONCE);
    assert_int_equal(e->close_error, DPP_ECLOSED);
    assert_int_equal(e->frames, 0);
    assert_counters(e, 0, 0, 0, 0);
    env_finish(e);
    /* only the connecting side has one */
    e = env_start(NULL, 8, 0);
    c = client_start(e, &token_a, "ctl");
    RUN_UNTIL(e, c->closed && e->closes == 1);
    assert_int_equal(c->answer_rc, DPP_EAUTH);
    assert_non_null(strstr(c->answer_err, "does not prove"));
    assert_int_equal(c->close_error, DPP_EAUTH);
    assert_int_equal(c->challenge_len, 0);
    assert_int_equal(e->close_error, DPP_ECLOSED);
    assert_int_equal(e->frames, 0);
    assert_counters(e, 0, 0, 0, 0);
    env_finish(e);
}

/* The recorded exchange of a first connection, replayed on a second. */
static uint8_t replay_nonce[DPP_AUTH_NONCE], replay_mac[DPP_AUTH_NONCE];

static void hello_replayed(client_t *c)
{
    send_hello(c, DPP_PROTOCOL_VERSION, c->role, replay_nonce);
}

static void reply_replayed(client_t *c, const Dpp__HelloReply *r)
{
    (void)r;
    send_auth(c, replay_mac, sizeof replay_mac);
    send_request(c);
}

static void test_replayed_auth(void **state)
{
    (void)state;
    env_t *e = env_start(&token_a, 8, 0);
    client_t *first = client_start(e, &token_a, "ctl");
    RUN_UNTIL(e, e->frames == 1);
    assert_true(first->st.has_nonce);
    memcpy(replay_nonce, first->st.nonce, sizeof replay_nonce);
    memcpy(replay_mac, first->st.mac, sizeof replay_mac);

    client_t *second = client_start(e, NULL, "ctl");
    second->connected = hello_replayed;
    second->replied = reply_replayed;
    e->frames = 0;
    expect_refusal(e, second, DPP_EAUTH, "authentication failed: wrong cluster token");
    assert_int_equal(second->challenge_len, DPP_AUTH_NONCE);
    assert_memory_not_equal(second->challenge, first->challenge, DPP_AUTH_NONCE);
    assert_counters(e, 0, 1, 0, 0);
    /* the first connection is untouched */
    assert_false(first->closed);
    send_request(first);
    RUN_UNTIL(e, e->frames == 1);
    env_finish(e);
}

/* ---- malformed and out-of-order input ---- */

static void hello_silent(client_t *c)
{
    (void)c;
}

static void hello_raw(client_t *c)
{
    send_raw(c);
}

static void hello_request(client_t *c)
{
    send_request(c);
}

static void hello_v2(client_t *c)
{
    send_hello(c, DPP_PROTOCOL_VERSION + 1, c->role, NULL);
}

static void hello_twice(client_t *c)
{
    hello_default(c);
    hello_default(c);
}

static void reply_short_mac(client_t *c, const Dpp__HelloReply *r)
{
    (void)r;
    uint8_t mac[DPP_AUTH_NONCE - 1];
    memcpy(mac, c->st.mac, sizeof mac); /* st.mac is zero: it was never answered */
    send_auth(c, mac, sizeof mac);
}

static void reply_request(client_t *c, const Dpp__HelloReply *r)
{
    (void)r;
    send_request(c);
}

static void reply_hello(client_t *c, const Dpp__HelloReply *r)
{
    (void)r;
    hello_default(c);
}

static void reply_auth_anyway(client_t *c, const Dpp__HelloReply *r)
{
    (void)r;
    uint8_t mac[DPP_AUTH_NONCE] = {1};
    send_auth(c, mac, sizeof mac);
}

/* A HELLO frame whose message stops 5 bytes into its 34-byte nonce field. */
static uint8_t *truncated_hello(size_t *len)
{
    uint8_t nonce[DPP_AUTH_NONCE] = {0};
    Dpp__Hello h = DPP__HELLO__INIT;
    h.version = DPP_PROTOCOL_VERSION;
    h.role = "ctl";
    h.nonce.data = nonce;
    h.nonce.len = sizeof nonce;
    size_t full;
    uint8_t *f = dpp_frame_pack(DPP_MSG_HELLO, &h.base, 0, &full);
    assert_non_null(f);
    *len = full - (DPP_AUTH_NONCE - 5);
    dpp_frame_header_encode(f, DPP_MSG_HELLO, (uint32_t)(*len - DPP_FRAME_HEADER_SIZE), 0);
    return f;
}

typedef struct bad_case {
    const char *what;
    const dpp_auth_t *server, *client;
    const char *role;
    void (*connected)(client_t *c);
    void (*replied)(client_t *c, const Dpp__HelloReply *r);
    int code;
    const char *text;
    uint64_t auth_failures;
    int done; /* the handshake was complete when the bad frame came */
} bad_case_t;

static void test_malformed(void **state)
{
    (void)state;
    /* a frame of type HELLO whose message is a string field longer than
     * the bytes that follow */
    static uint8_t garbage[DPP_FRAME_HEADER_SIZE + 3] = {[16] = 0x12, 0x10, 'a'};
    dpp_frame_header_encode(garbage, DPP_MSG_HELLO, 3, 0);
    size_t cut_len;
    uint8_t *cut = truncated_hello(&cut_len);

    const bad_case_t cases[] = {
        {"garbage HELLO", NULL, NULL, "ctl", hello_raw, NULL, DPP_EMSG,
         "HELLO message does not decode", 0, 0},
        {"truncated HELLO", &token_a, &token_a, "ctl", hello_raw, NULL, DPP_EMSG,
         "HELLO message does not decode", 0, 0},
        {"31-byte mac", &token_a, &token_a, "ctl", hello_default, reply_short_mac, DPP_EAUTH,
         "authentication failed: wrong cluster token", 1, 0},
        {"request before HELLO", NULL, NULL, "ctl", hello_request, NULL, DPP_EMSGTYPE,
         "expected HELLO, got STATUS", 0, 0},
        {"request before HELLO, token", &token_a, &token_a, "ctl", hello_request, NULL,
         DPP_EMSGTYPE, "expected HELLO, got STATUS", 0, 0},
        {"request before AUTH", &token_a, &token_a, "ctl", hello_default, reply_request, DPP_EAUTH,
         "authentication required: this master has a cluster token", 1, 0},
        {"second HELLO", NULL, NULL, "ctl", hello_default, reply_hello, DPP_EMSGTYPE,
         "second HELLO", 0, 1},
        {"second HELLO before AUTH", &token_a, &token_a, "ctl", hello_twice, NULL, DPP_EMSGTYPE,
         "second HELLO", 0, 0},
        {"version", NULL, NULL, "ctl", hello_v2, NULL, DPP_EVERSION,
         "protocol version 2, the master speaks 1", 0, 0},
        {"unknown role", &token_a, &token_a, "trainer", hello_default, NULL, DPP_EINVAL,
         "unknown role \"trainer\": the master serves ctl, worker", 0, 0},
        {"unexpected AUTH", NULL, NULL, "worker", hello_default, reply_auth_anyway, DPP_EAUTH,
         "unexpected AUTH", 1, 1},
        {"AUTH without a nonce", &token_a, NULL, "worker", hello_default, reply_auth_anyway,
         DPP_EAUTH,
         "authentication failed: no cluster token on the connecting side "
         "(--token-file or DPP_TOKEN_FILE)",
         1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case_t *k = &cases[i];
        print_message("case: %s\n", k->what);
        env_t *e = env_start(k->server, 8, 0);
        client_t *c = client_start(e, k->client, k->role);
        c->connected = k->connected;
        c->replied = k->replied;
        c->raw = i == 0 ? garbage : cut;
        c->raw_len = i == 0 ? sizeof garbage : cut_len;
        expect_refusal_after(e, c, k->code, k->text, k->done);
        assert_counters(e, 0, k->auth_failures, 0, 0);
        env_finish(e);
    }
    free(cut);
}

/* ---- what a peer may send before and after its handshake ---- */

static uint8_t big_header[DPP_FRAME_HEADER_SIZE];

static void hello_big_header(client_t *c)
{
    c->raw = big_header;
    c->raw_len = sizeof big_header;
    send_raw(c);
}

static void hello_then_wait(client_t *c)
{
    hello_default(c);
}

static void reply_auth_only(client_t *c, const Dpp__HelloReply *r)
{
    c->answer_rc = dpp_handshake_answer(&c->conn, &c->st, c->auth, c->role, r, c->answer_err,
                                        sizeof c->answer_err);
}

static void test_before_authentication(void **state)
{
    (void)state;
    /* A header announcing a 16 MiB HELLO is refused on the header alone:
     * before the handshake only small frames are accepted. */
    dpp_frame_header_encode(big_header, DPP_MSG_HELLO, 16u << 20, 0);
    env_t *e = env_start(&token_a, 8, 0);
    client_t *c = client_start(e, &token_a, "ctl");
    c->connected = hello_big_header;
    expect_refusal(e, c, DPP_EFRAMESIZE,
                   "HELLO message of 16777216 bytes: more than the 1024 bytes this end takes in "
                   "one (a daemon's --max-frame-mb, once the handshake is done)");
    assert_counters(e, 0, 0, 0, 0);
    env_finish(e);

    /* A peer that said HELLO and holds back AUTH: its read buffer stays
     * small, and once through, larger requests are served. */
    e = env_start(&token_a, 8, 0);
    c = client_start(e, &token_a, "ctl");
    c->connected = hello_then_wait;
    c->replied = reply_auth_only;
    RUN_UNTIL(e, c->answer_rc == 0);
    test_peer_t *p = server_peer(e, c);
    assert_non_null(p);
    assert_true(p->base.conn.rcap <= 2 * DPP_LISTENER_HANDSHAKE_BYTES);
    char *id = malloc(8000);
    memset(id, 'x', 7999);
    id[7999] = '\0';
    Dpp__StatusRequest req = DPP__STATUS_REQUEST__INIT;
    req.session_id = id;
    assert_int_equal(dpp_conn_send(&c->conn, DPP_MSG_STATUS, &req.base), 0);
    RUN_UNTIL(e, e->frames == 1);
    assert_int_equal(e->frame_type, DPP_MSG_STATUS);
    /* no frame to a daemon carries a payload, authenticated or not */
    static uint8_t junk[16];
    assert_int_equal(dpp_conn_send_payload(&c->conn, DPP_MSG_STATUS, &req.base, junk, sizeof junk,
                                           NULL, NULL),
                     0);
    RUN_UNTIL(e, c->closed && e->closes >= 1);
    assert_int_equal(c->error_code, DPP_EFRAMESIZE);
    assert_int_equal(e->close_error, DPP_EFRAMESIZE);
    assert_int_equal(e->frames, 1);
    free(id);
    env_finish(e);
}

/* ---- the connection cap ---- */

static void test_max_connections(void **state)
{
    (void)state;
    env_t *e = env_start(&token_a, 2, 0);
    client_t *a = client_start(e, &token_a, "ctl");
    client_t *b = client_start(e, &token_a, "worker");
    RUN_UNTIL(e, e->frames == 2);
    assert_int_equal(e->lst.npeers, 2);

    client_t *c = client_start(e, &token_a, "ctl");
    c->connected = hello_silent;
    RUN_UNTIL(e, c->closed && e->closes == 1);
    assert_int_equal(c->errors, 1);
    assert_int_equal(c->error_code, DPP_ECLOSED);
    assert_string_equal(c->error_text, "too many connections (the master allows 2)");
    assert_int_equal(c->replies, 0);
    assert_int_equal(e->close_error, DPP_ECLOSED);
    assert_int_equal(e->lst.npeers, 2);
    assert_counters(e, 1, 0, 0, 0);

    /* the first two are still served */
    send_request(a);
    send_request(b);
    RUN_UNTIL(e, e->frames == 4);
    assert_false(a->closed);
    assert_false(b->closed);
    assert_int_equal(server_peer(e, a)->frames, 2);
    assert_int_equal(server_peer(e, b)->frames, 2);

    /* a slot freed is a slot again */
    dpp_conn_close(&a->conn, 0);
    RUN_UNTIL(e, e->closes == 2);
    client_t *d = client_start(e, &token_a, "ctl");
    RUN_UNTIL(e, e->frames == 5);
    assert_int_equal(d->errors, 0);
    assert_int_equal(e->lst.npeers, 2);
    assert_counters(e, 1, 0, 0, 0);
    env_finish(e);
}

/* ---- deadlines ---- */

static void test_handshake_deadline(void **state)
{
    (void)state;
    env_t *e = env_start(&token_a, 8, 0);
    client_t *c = client_start(e, &token_a, "ctl");
    c->connected = hello_silent;
    RUN_UNTIL(e, c->connect_status == 0 && e->lst.npeers == 1);
    test_peer_t *p = server_peer(e, c);
    assert_non_null(p);
    int64_t t0 = p->base.accepted_ms;
    dpp_listener_sweep(&e->lst, t0 + HANDSHAKE_MS); /* on the deadline: still allowed */
    assert_false(p->base.conn.closing);
    assert_counters(e, 0, 0, 0, 0);
    dpp_listener_sweep(&e->lst, t0 + HANDSHAKE_MS + 1);
    assert_true(p->base.conn.closing);
    assert_counters(e, 0, 0, 1, 0);
    expect_refusal(e, c, DPP_ETIMEDOUT, "no HELLO within 1000 ms");
    assert_counters(e, 0, 0, 1, 0);

    /* HELLO in time but no AUTH */
    client_t *d = client_start(e, &token_a, "ctl");
    d->replied = NULL;
    RUN_UNTIL(e, d->replies == 1);
    p = server_peer(e, d);
    assert_non_null(p);
    assert_int_equal(p->base.hs.role, 0);
    assert_false(dpp_handshake_done(&p->base.hs));
    dpp_listener_sweep(&e->lst, p->base.accepted_ms + HANDSHAKE_MS + 1);
    e->closes = 0;
    expect_refusal(e, d, DPP_ETIMEDOUT, "no AUTH within 1000 ms");
    assert_counters(e, 0, 0, 2, 0);
    env_finish(e);
}

static void test_idle_deadline(void **state)
{
    (void)state;
    env_t *e = env_start(&token_a, 8, 1);
    client_t *ctl = client_start(e, &token_a, "ctl");
    client_t *wrk = client_start(e, &token_a, "worker");
    RUN_UNTIL(e, e->frames == 2);
    test_peer_t *pc = server_peer(e, ctl), *pw = server_peer(e, wrk);
    assert_non_null(pc);
    assert_non_null(pw);
    int64_t last = pc->base.last_seen_ms > pw->base.last_seen_ms ? pc->base.last_seen_ms
                                                                 : pw->base.last_seen_ms;
    int64_t first = pc->base.last_seen_ms < pw->base.last_seen_ms ? pc->base.last_seen_ms
                                                                  : pw->base.last_seen_ms;
    /* past the handshake deadline but authenticated, and not idle yet */
    dpp_listener_sweep(&e->lst, first + IDLE_MS);
    assert_false(pc->base.conn.closing);
    assert_false(pw->base.conn.closing);
    assert_counters(e, 0, 0, 0, 0);

    /* the worker's silence closes it; the ctl is exempt (cfg.idle says 0) */
    dpp_listener_sweep(&e->lst, last + 100 * IDLE_MS);
    assert_int_equal(e->idle_calls, 2);
    assert_false(pc->base.conn.closing);
    assert_true(pw->base.conn.closing);
    assert_counters(e, 0, 0, 0, 1);
    RUN_UNTIL(e, wrk->closed && e->closes == 1);
    assert_int_equal(wrk->errors, 1);
    assert_int_equal(wrk->error_code, DPP_ETIMEDOUT);
    assert_string_equal(wrk->error_text, "idle for 5000 ms");
    assert_int_equal(wrk->close_error, DPP_ECLOSED);
    assert_int_equal(e->close_error, DPP_ETIMEDOUT);
    assert_true(e->close_done);

    /* the kept peer still works */
    send_request(ctl);
    RUN_UNTIL(e, e->frames == 3);
    assert_false(ctl->closed);
    assert_int_equal(ctl->errors, 0);
    assert_counters(e, 0, 0, 0, 1);
    env_finish(e);
}

/* Without cfg.idle the deadline applies to every authenticated peer. */
static void test_idle_deadline_everyone(void **state)
{
    (void)state;
    env_t *e = env_start(NULL, 8, 0);
    client_t *c = client_start(e, NULL, "ctl");
    RUN_UNTIL(e, e->frames == 1);
    test_peer_t *p = server_peer(e, c);
    assert_non_null(p);
    dpp_listener_sweep(&e->lst, p->base.last_seen_ms + IDLE_MS);
    assert_false(p->base.conn.closing);
    dpp_listener_sweep(&e->lst, p->base.last_seen_ms + IDLE_MS + 1);
    assert_true(p->base.conn.closing);
    RUN_UNTIL(e, c->closed && e->closes == 1);
    assert_int_equal(c->error_code, DPP_ETIMEDOUT);
    assert_string_equal(c->error_text, "idle for 5000 ms");
    assert_counters(e, 0, 0, 0, 1);
    env_finish(e);
}

/* ---- metrics ---- */

static void assert_has(const char *text, const char *line)
{
    if (strstr(text, line) == NULL)
        fail_msg("metrics lack \"%s\" in:\n%s", line, text);
}

static void test_metrics(void **state)
{
    (void)state;
    env_t *e = env_start(&token_a, 2, 0);
    /* an authentication failure */
    client_t *a = client_start(e, &token_a, "ctl");
    a->replied = reply_bad_mac;
    RUN_UNTIL(e, a->closed && e->closes == 1);
    /* a handshake timeout */
    client_t *b = client_start(e, &token_a, "ctl");
    b->connected = hello_silent;
    RUN_UNTIL(e, b->connect_status == 0 && e->lst.npeers == 1);
    dpp_listener_sweep(&e->lst, e->lst.peers->accepted_ms + HANDSHAKE_MS + 1);
    RUN_UNTIL(e, b->closed && e->closes == 2);
    /* an idle timeout */
    client_t *c = client_start(e, &token_a, "worker");
    RUN_UNTIL(e, e->frames == 1);
    dpp_listener_sweep(&e->lst, e->lst.peers->last_seen_ms + IDLE_MS + 1);
    RUN_UNTIL(e, c->closed && e->closes == 3);
    /* open now: one "ctl", one in its handshake; one more is refused */
    client_t *d = client_start(e, &token_a, "ctl");
    RUN_UNTIL(e, e->frames == 2);
    client_t *f = client_start(e, &token_a, "ctl");
    f->connected = hello_silent;
    RUN_UNTIL(e, f->connect_status == 0 && e->lst.npeers == 2);
    client_t *g = client_start(e, &token_a, "ctl");
    g->connected = hello_silent;
    RUN_UNTIL(e, g->closed && e->closes == 4);
    assert_int_equal(g->error_code, DPP_ECLOSED);
    assert_false(d->closed);
    assert_false(f->closed);
    assert_counters(e, 1, 1, 1, 1);

    dpp_metrics_t m;
    dpp_metrics_init(&m);
    dpp_listener_metrics(&e->lst, &m);
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_has(text, "# TYPE dpp_connections_refused_total counter\n");
    assert_has(text, "\ndpp_connections_refused_total 1\n");
    assert_has(text, "\ndpp_auth_failures_total 1\n");
    assert_has(text, "\ndpp_handshake_timeouts_total 1\n");
    assert_has(text, "\ndpp_idle_timeouts_total 1\n");
    assert_has(text, "# TYPE dpp_connections gauge\n");
    assert_has(text, "\ndpp_connections{role=\"handshake\"} 1\n");
    assert_has(text, "\ndpp_connections{role=\"ctl\"} 1\n");
    assert_has(text, "\ndpp_connections{role=\"worker\"} 0\n");
    /* dpp_connections comes last, so the owner may add its own samples */
    const char *fam = strstr(text, "# HELP dpp_connections ");
    assert_non_null(fam);
    assert_null(strstr(fam, "_total"));
    dpp_metrics_close(&m);
    env_finish(e);
}

static void test_start_error(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    dpp_listener_t l;
    dpp_listener_config_t cfg = {.name = "master",
                                 .roles = roles,
                                 .max_connections = 1,
                                 .peer_size = sizeof(test_peer_t),
                                 .on_frame = on_server_frame};
    assert_int_equal(dpp_listener_start(&loop, &l, &cfg, "no-port"), DPP_EINVAL);
    dpp_listener_close(&l);
    dpp_listener_close(&l); /* twice is fine */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_token),
        cmocka_unit_test(test_no_token_anywhere),
        cmocka_unit_test(test_wrong_token_client_view),
        cmocka_unit_test(test_bad_mac),
        cmocka_unit_test(test_lying_client),
        cmocka_unit_test(test_token_on_one_side),
        cmocka_unit_test(test_replayed_auth),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_before_authentication),
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_handshake_deadline),
        cmocka_unit_test(test_idle_deadline),
        cmocka_unit_test(test_idle_deadline_everyone),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_start_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
