// SPDX-License-Identifier: Apache-2.0
// The HTTP server on a loop thread, driven through plain blocking sockets:
// routing, HEAD, 405/404/431/400/505, timeouts, the connection limit and who
// gives up a slot (slowloris), garbage, and stopping with connections open
// (ASan checks that nothing leaks).
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "daemon/http.h"
#include "daemon/metrics.h"
#include "base/util.h"
#include "dpp/error.h"

#define BIG_BODY (32u * 1024 * 1024)

typedef struct server {
    uv_loop_t loop;
    uv_async_t stop_async;
    uv_thread_t thread;
    dpp_http_t *http;
    int port;
    atomic_int handled; /* handler calls */
    atomic_int release; /* lets a /block request go on */
} server_t;

static void handler(const dpp_http_request_t *req, dpp_http_response_t *res, void *arg)
{
    server_t *s = arg;
    atomic_fetch_add(&s->handled, 1);
    if (strcmp(req->path, "/metrics") == 0) {
        dpp_metrics_t m;
        dpp_metrics_init(&m);
        dpp_metrics_family(&m, "dpp_test_requests_total", DPP_METRIC_COUNTER, "Handled requests.");
        dpp_metrics_sample_u64(&m, "dpp_test_requests_total", NULL, 0,
                               (uint64_t)atomic_load(&s->handled));
        size_t len;
        const char *text = dpp_metrics_text(&m, &len);
        if (text)
            dpp_http_respond(res, 200, DPP_METRICS_CONTENT_TYPE, text, len);
        dpp_metrics_close(&m);
    } else if (strcmp(req->path, "/healthz") == 0) {
        dpp_http_respond(res, 200, NULL, "ok\n", 3);
    } else if (strncmp(req->path, "/echo", 5) == 0) {
        char body[8192];
        int n =
            snprintf(body, sizeof body, "%s path=%s query=%s", req->method, req->path, req->query);
        dpp_http_respond(res, 200, NULL, body, (size_t)n);
    } else if (strcmp(req->path, "/big") == 0) {
        res->status = 200;
        res->body = malloc(BIG_BODY);
        res->body_len = res->body ? BIG_BODY : 0;
        if (res->body)
            memset(res->body, 'x', BIG_BODY);
    } else if (strcmp(req->path, "/block") == 0) {
        /* holds the loop: what connects meanwhile waits in the backlog */
        while (!atomic_load(&s->release))
            usleep(1000);
        dpp_http_respond(res, 200, NULL, "released\n", 9);
    } else if (strcmp(req->path, "/badstatus") == 0) {
        dpp_http_respond(res, 99, NULL, "nope", 4);
    } else if (strcmp(req->path, "/nothing") == 0) {
        /* leaves the default: 500 */
    } else {
        dpp_http_respond(res, 404, NULL, "not found\n", 10);
    }
}

static void on_stop(uv_async_t *a)
{
    server_t *s = a->data;
    dpp_http_stop(s->http);
    uv_close((uv_handle_t *)a, NULL);
}

static void loop_main(void *arg)
{
    server_t *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
}

static server_t *server_start(const dpp_http_limits_t *limits)
{
    server_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    assert_int_equal(uv_loop_init(&s->loop), 0);
    assert_int_equal(uv_async_init(&s->loop, &s->stop_async, on_stop), 0);
    s->stop_async.data = s;
    assert_int_equal(dpp_http_start(&s->http, &s->loop, "127.0.0.1:0", handler, s, limits), 0);
    s->port = dpp_http_port(s->http);
    assert_true(s->port > 0 && s->port < 65536);
    assert_int_equal(uv_thread_create(&s->thread, loop_main, s), 0);
    return s;
}

/* Stops the server from its loop thread; the loop ends only when every
 * handle is closed, and uv_loop_close() proves none leaked. */
static void server_stop(server_t *s)
{
    assert_int_equal(uv_async_send(&s->stop_async), 0);
    assert_int_equal(uv_thread_join(&s->thread), 0);
    assert_int_equal(uv_loop_close(&s->loop), 0);
    free(s);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* Sends what the peer takes; stops quietly once it has closed. */
static void send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

/* Reads until the peer closes (EOF or reset: *closed = 1) or timeout_ms pass
 * without data (*closed = 0). Returns the bytes read; buf is NUL-terminated. */
static size_t read_until_close(int fd, char *buf, size_t cap, int timeout_ms, int *closed)
{
    size_t len = 0;
    *closed = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        char scratch[4096];
        char *dst = len + 1 < cap ? buf + len : scratch;
        size_t room = len + 1 < cap ? cap - 1 - len : sizeof scratch;
        ssize_t n = recv(fd, dst, room, 0);
        if (n <= 0) {
            *closed = n == 0 || errno == ECONNRESET;
            break;
        }
        if (dst == buf + len)
            len += (size_t)n;
    }
    buf[len] = '\0';
    return len;
}

static int64_t ms_since(uint64_t start_ns)
{
    return (int64_t)((dpp_now_ns() - start_ns) / 1000000u);
}

typedef struct reply {
    char raw[16384];
    size_t len;
    int closed;
    int status;
    long content_length; /* -1 when absent */
    const char *body;    /* into raw */
    size_t body_len;
} reply_t;

static const char *header(const reply_t *r, const char *name)
{
    static char value[256];
    char pat[64];
    snprintf(pat, sizeof pat, "\r\n%s: ", name);
    const char *p = strstr(r->raw, pat);
    if (p == NULL || (r->body && p >= r->body))
        return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, "\r");
    snprintf(value, sizeof value, "%.*s", (int)n, p);
    return value;
}

/* Parses a response: status line, headers, body after the blank line.
 * Fails the test if it is not well-formed HTTP/1.1 with Connection: close
 * and a Content-Length. */
static void parse_reply(reply_t *r)
{
    r->status = 0;
    r->body = NULL;
    r->body_len = 0;
    r->content_length = -1;
    assert_true(r->len >= 12);
    assert_memory_equal(r->raw, "HTTP/1.1 ", 9);
    r->status = atoi(r->raw + 9);
    const char *end = strstr(r->raw, "\r\n\r\n");
    assert_non_null(end);
    r->body = end + 4;
    r->body_len = r->len - (size_t)(r->body - r->raw);
    const char *cl = header(r, "Content-Length");
    assert_non_null(cl);
    r->content_length = atol(cl);
    const char *conn = header(r, "Connection");
    assert_non_null(conn);
    assert_string_equal(conn, "close");
}

/* One exchange on a fresh connection: send raw, read until the server closes. */
static void exchange(int port, const void *raw, size_t len, reply_t *r)
{
    int fd = connect_to(port);
    send_all(fd, raw, len);
    r->len = read_until_close(fd, r->raw, sizeof r->raw, 5000, &r->closed);
    close(fd);
    assert_true(r->closed);
    parse_reply(r);
}

static void get(int port, const char *req, reply_t *r)
{
    exchange(port, req, strlen(req), r);
}

static void test_get(void **state)
{
    (void)state;
    server_t *s = server_start(NULL);
    reply_t r;
    get(s->port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Type"), DPP_METRICS_CONTENT_TYPE);
    assert_int_equal(r.content_length, (long)r.body_len);
    assert_non_null(strstr(r.body, "# TYPE dpp_test_requests_total counter\n"));
    assert_non_null(strstr(r.body, "\ndpp_test_requests_total 1\n"));

    /* query stripped, method and query visible; bare LF line ends accepted */
    get(s->port, "GET /echo/a?b=c&d HTTP/1.1\nHost: x\n\n", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "GET path=/echo/a query=b=c&d");
    assert_int_equal(r.content_length, (long)r.body_len);
    /* absolute-form target (RFC 9112 §3.2.2) */
    get(s->port, "GET http://example/echo/z HTTP/1.1\r\nHost: example\r\n\r\n", &r);
    assert_string_equal(r.body, "GET path=/echo/z query=");
    /* HTTP/1.0 needs no Host */
    get(s->port, "GET /healthz HTTP/1.0\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    assert_string_equal(header(&r, "Content-Type"), "text/plain; charset=utf-8");
    /* the handler decides unknown paths */
    get(s->port, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "not found\n");
    /* a handler that answers nonsense or nothing yields 500 */
    get(s->port, "GET /badstatus HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 500);
    assert_int_equal(r.body_len, 0);
    get(s->port, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 500);
    /* a long target under the head limit is fine */
    char longreq[6000];
    int n = snprintf(longreq, sizeof longreq, "GET /echo/%04000d HTTP/1.1\r\nHost: x\r\n\r\n", 7);
    assert_true(n > 4000 && (size_t)n < sizeof longreq);
    get(s->port, longreq, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, strlen("GET path=/echo/ query=") + 4000);
    assert_int_equal(atomic_load(&s->handled), 8);
    server_stop(s);
}

static void test_head(void **state)
{
    (void)state;
    server_t *s = server_start(NULL);
    reply_t g, h;
    get(s->port, "GET /echo/head HTTP/1.1\r\nHost: x\r\n\r\n", &g);
    get(s->port, "HEAD /echo/head HTTP/1.1\r\nHost: x\r\n\r\n", &h);
    assert_int_equal(h.status, 200);
    assert_int_equal(h.body_len, 0); /* nothing after the head, then close */
    /* same length as the GET body ("GET ..." vs "HEAD ...": one more byte) */
    assert_int_equal(h.content_length, g.content_length + 1);
    assert_true(g.content_length > 0);
    server_stop(s);
}

static void test_method_not_allowed(void **state)
{
    (void)state;
    server_t *s = server_start(NULL);
    const char *reqs[] = {
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        "DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        "get /metrics HTTP/1.1\r\nHost: x\r\n\r\n", /* methods are case-sensitive */
        "OPTIONS /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        reply_t r;
        get(s->port, reqs[i], &r);
        assert_int_equal(r.status, 405);
        assert_string_equal(header(&r, "Allow"), "GET, HEAD");
        assert_int_equal(r.content_length, (long)r.body_len);
    }
    assert_int_equal(atomic_load(&s->handled), 0);
    server_stop(s);
}

static void test_head_too_large(void **state)
{
    (void)state;
    server_t *s = server_start(NULL);
    size_t cap = 20 * 1024;
    char *req = malloc(cap + 64);
    assert_non_null(req);
    int n = snprintf(req, cap, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', cap - (size_t)n);
    memcpy(req + cap, "\r\n\r\n", 5);
    reply_t r;
    exchange(s->port, req, cap + 4, &r);
    assert_int_equal(r.status, 431);
    /* just under the default 8 KiB is served */
    memcpy(req + 8000, "\r\n\r\n", 4);
    exchange(s->port, req, 8004, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(atomic_load(&s->handled), 1);
    /* one endless line, no header structure at all */
    memset(req, 'G', cap);
    exchange(s->port, req, cap, &r);
    assert_int_equal(r.status, 431);
    /* A client still sending after the 431 can read it, and the close comes
     * (the server drains the rest rather than close on unread input, which
     * makes the kernel send RST; loopback would deliver the reply anyway). */
    int fd = connect_to(s->port);
    memset(req, 'a', cap);
    memcpy(req, "GET / HTTP/1.1\r\nX: ", 19);
    send_all(fd, req, 9000);
    usleep(200 * 1000);
    send_all(fd, req + 9000, cap - 9000);
    usleep(200 * 1000);
    r.len = read_until_close(fd, r.raw, sizeof r.raw, 3000, &r.closed);
    close(fd);
    assert_true(r.closed);
    parse_reply(&r);
    assert_int_equal(r.status, 431);
    free(req);
    assert_int_equal(atomic_load(&s->handled), 1);

    /* a smaller configured limit applies */
    server_stop(s);
    dpp_http_limits_t lim = {.max_head_bytes = 64};
    s = server_start(&lim);
    get(s->port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    get(s->port, "GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: a-long-agent-name-here\r\n\r\n",
        &r);
    assert_int_equal(r.status, 431);
    server_stop(s);
}

/* A literal and its length, NULs included. */
#define RAW(s) s, sizeof(s) - 1

static void test_garbage(void **state)
{
    (void)state;
    static const struct {
        const char *req;
        size_t len;
        int status;
    } cases[] = {
        {RAW("\n\n"), 400},
        {RAW("\r\n\r\n"), 400},
        {RAW("\n"), 400},
        {RAW("\x00\x01\x02\xff\xfe GET\r\n\r\n"), 400},
        {RAW("GET /healthz HTTP/1.1\r\n\r\n"), 400},                       /* no Host */
        {RAW("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400}, /* two */
        {RAW("GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n"), 400},           /* space before colon */
        {RAW("GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"), 400}, /* obs-fold */
        {RAW("GET /healthz HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n"), 400},
        {RAW("GET /healthz HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n"), 400},
        {RAW("GET /healthz HTTP/1.1\r\nHost: x\x00y\r\n\r\n"), 400}, /* NUL */
        {RAW("GET /healthz HTTP/1.1\r\nHost: x\x01\r\n\r\n"), 400},  /* control */
        {RAW("GET /healthz HTTP/1.1\rHost: x\r\n\r\n"), 400},        /* bare CR */
        {RAW("GET /healthz HTTP/1.1\r\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n"), 505},
        {RAW("GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET /healthz HTTP/1\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET /healthz http/1.1\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 400},
        {RAW(" GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET /health\x7fz HTTP/1.1\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET /h\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n"), 400}, /* raw UTF-8 */
        {RAW("GE(T /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET http://nopath HTTP/1.1\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET /healthz\r\nHost: x\r\n\r\n"), 400},
        {RAW("GET\r\n\r\n"), 400},
        /* accepted oddities */
        {RAW("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Tab:\tv\xff\r\n\r\n"), 200},
        {RAW("GET /healthz HTTP/1.1\r\nhOsT:x\r\n\r\n"), 200},
        {RAW("GET /healthz HTTP/1.9\r\nHost: x\r\n\r\n"), 200},
    };
    dpp_http_limits_t lim = {.idle_timeout_ms = 200, .header_timeout_ms = 400};
    server_t *s = server_start(&lim);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reply_t r;
        exchange(s->port, cases[i].req, cases[i].len, &r);
        if (r.status != cases[i].status)
            fail_msg("case %zu: status %d, want %d", i, r.status, cases[i].status);
        assert_int_equal(r.content_length, (long)r.body_len);
    }
    assert_int_equal(atomic_load(&s->handled), 3);

    /* pipelined requests: only the first is served */
    reply_t r;
    get(s->port, "GET /echo/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo/2 HTTP/1.1\r\nHost: x\r\n\r\n",
        &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "GET path=/echo/1 query=");
    assert_null(strstr(r.body, "HTTP/1.1"));
    assert_int_equal(atomic_load(&s->handled), 4);

    /* random bytes and mutated requests: always a well-formed answer or, when
     * the head never ends, a close; and the server keeps serving */
    srand(12345);
    const char *valid = "GET /echo/m?q=1 HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
    for (int iter = 0; iter < 300; iter++) {
        char buf[512];
        size_t len;
        if (iter % 2 == 0) {
            len = (size_t)(rand() % 200);
            for (size_t k = 0; k < len; k++)
                buf[k] = (char)rand();
            memcpy(buf + len, "\r\n\r\n", 4);
            len += 4;
        } else {
            len = strlen(valid);
            memcpy(buf, valid, len);
            for (int k = 0, nmut = 1 + rand() % 3; k < nmut; k++)
                buf[rand() % (int)len] = (char)rand();
        }
        int fd = connect_to(s->port);
        send_all(fd, buf, len);
        r.len = read_until_close(fd, r.raw, sizeof r.raw, 3000, &r.closed);
        close(fd);
        assert_true(r.closed);
        if (r.len == 0)
            continue; /* the head never ended: closed by the timeout */
        parse_reply(&r);
        assert_int_equal(r.content_length, (long)r.body_len);
        assert_true(r.status == 200 || r.status == 400 || r.status == 404 || r.status == 405 ||
                    r.status == 505);
    }
    get(s->port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    server_stop(s);
}

static void test_idle_timeout(void **state)
{
    (void)state;
    dpp_http_limits_t lim = {.idle_timeout_ms = 200, .header_timeout_ms = 5000};
    server_t *s = server_start(&lim);
    char buf[256];
    int closed;
    /* silent from the start */
    int fd = connect_to(s->port);
    uint64_t t0 = dpp_now_ns();
    assert_int_equal(read_until_close(fd, buf, sizeof buf, 3000, &closed), 0);
    int64_t ms = ms_since(t0);
    close(fd);
    assert_true(closed);
    assert_true(ms >= 150 && ms < 2000);
    /* silent after part of a head: no response, just the close */
    fd = connect_to(s->port);
    send_all(fd, "GET /healthz HTTP/1.1\r\n", 23);
    t0 = dpp_now_ns();
    assert_int_equal(read_until_close(fd, buf, sizeof buf, 3000, &closed), 0);
    ms = ms_since(t0);
    close(fd);
    assert_true(closed);
    assert_true(ms >= 150 && ms < 2000);
    assert_int_equal(atomic_load(&s->handled), 0);
    /* after its response a client that keeps sending is drained for at most
     * min(idle, 1 s), then closed: its sends start failing */
    fd = connect_to(s->port);
    send_all(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
    assert_true(read_until_close(fd, buf, sizeof buf, 3000, &closed) > 0);
    assert_true(closed); /* the server's FIN */
    t0 = dpp_now_ns();
    char chunk[1024] = {0};
    while (ms_since(t0) < 5000 && send(fd, chunk, sizeof chunk, MSG_NOSIGNAL) > 0)
        usleep(20 * 1000);
    ms = ms_since(t0);
    close(fd);
    assert_true(ms >= 200 && ms < 2000);
    server_stop(s);
}

/* A client that trickles its head (each byte within the idle timeout) is
 * closed when the header timeout runs out. */
static void test_header_timeout(void **state)
{
    (void)state;
    dpp_http_limits_t lim = {.idle_timeout_ms = 300, .header_timeout_ms = 700};
    server_t *s = server_start(&lim);
    const char *head = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    int fd = connect_to(s->port);
    uint64_t t0 = dpp_now_ns();
    int closed = 0;
    char buf[256];
    for (size_t i = 0; i < strlen(head) && !closed; i++) {
        send_all(fd, head + i, 1);
        read_until_close(fd, buf, sizeof buf, 100, &closed);
    }
    int64_t ms = ms_since(t0);
    close(fd);
    assert_true(closed);
    assert_true(ms >= 600 && ms < 3000); /* not the idle timeout, not never */
    assert_int_equal(atomic_load(&s->handled), 0);
    server_stop(s);
}

/* A client that never reads a large response is dropped after the idle
 * timeout instead of holding its slot forever. */
static void test_write_timeout(void **state)
{
    (void)state;
    dpp_http_limits_t lim = {.idle_timeout_ms = 300};
    server_t *s = server_start(&lim);
    int fd = connect_to(s->port);
    /* A fixed window well below BIG_BODY (no autotuning); not tiny, or
     * draining the kernel's buffers afterwards crawls. */
    int rcvbuf = 256 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    send_all(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", 30);
    usleep(1000 * 1000);
    size_t total = 0;
    int closed = 0;
    for (;;) {
        char buf[65536];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 3000) <= 0)
            break;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            closed = 1;
            break;
        }
        total += (size_t)n;
    }
    close(fd);
    assert_true(closed);
    assert_true(total > 0 && total < BIG_BODY);
    server_stop(s);
}

/* Sends GET path on a fresh connection and reads the answer, in at most
 * timeout_ms; *ms is how long it took. */
static void timed_get(int port, const char *path, int timeout_ms, reply_t *r, int64_t *ms)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    uint64_t t0 = dpp_now_ns();
    int fd = connect_to(port);
    send_all(fd, req, (size_t)n);
    r->len = read_until_close(fd, r->raw, sizeof r->raw, timeout_ms, &r->closed);
    close(fd);
    *ms = ms_since(t0);
}

/* When every slot is taken, a newcomer takes the slot of the connection
 * that has been reading its head the longest, which is closed unanswered.
 * Connections busy with their response keep their slot for a second; while
 * all are, a newcomer gets 503. */
static void test_max_connections(void **state)
{
    (void)state;
    dpp_http_limits_t lim = {.max_connections = 4};
    server_t *s = server_start(&lim);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_to(s->port);
        usleep(20 * 1000); /* accepted in this order */
    }
    /* a fifth is served at once; the first is closed without an answer */
    reply_t r;
    int64_t ms;
    timed_get(s->port, "/healthz", 3000, &r, &ms);
    parse_reply(&r);
    assert_int_equal(r.status, 200);
    assert_true(ms < 1000);
    char buf[1024];
    int closed;
    assert_int_equal(read_until_close(fds[0], buf, sizeof buf, 3000, &closed), 0);
    assert_true(closed);
    close(fds[0]);
    /* the other three are still served */
    for (int i = 1; i < 4; i++) {
        send_all(fds[i], "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
        r.len = read_until_close(fds[i], r.raw, sizeof r.raw, 3000, &r.closed);
        close(fds[i]);
        assert_true(r.closed);
        parse_reply(&r);
        assert_int_equal(r.status, 200);
    }
    assert_int_equal(atomic_load(&s->handled), 4);
    server_stop(s);

    /* two clients that do not read their large responses */
    lim.max_connections = 2;
    s = server_start(&lim);
    int big[2];
    for (int i = 0; i < 2; i++) {
        big[i] = connect_to(s->port);
        int rcvbuf = 256 * 1024;
        setsockopt(big[i], SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        send_all(big[i], "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", 30);
        for (int k = 0; k < 200 && atomic_load(&s->handled) < i + 1; k++)
            usleep(5 * 1000);
        usleep(20 * 1000);
    }
    assert_int_equal(atomic_load(&s->handled), 2);
    /* within their first second: 503 (or a bare close) */
    int extra = connect_to(s->port);
    uint64_t t0 = dpp_now_ns();
    size_t n = read_until_close(extra, buf, sizeof buf, 3000, &closed);
    close(extra);
    assert_true(closed);
    assert_true(ms_since(t0) < 900);
    assert_true(n == 0 || strncmp(buf, "HTTP/1.1 503 ", 13) == 0);
    /* after it the older one gives its slot up */
    usleep(1100 * 1000);
    timed_get(s->port, "/healthz", 3000, &r, &ms);
    parse_reply(&r);
    assert_int_equal(r.status, 200);
    size_t total = 0;
    for (;;) {
        char chunk[65536];
        struct pollfd p = {.fd = big[0], .events = POLLIN};
        if (poll(&p, 1, 3000) <= 0)
            break;
        ssize_t got = recv(big[0], chunk, sizeof chunk, 0);
        if (got <= 0)
            break;
        total += (size_t)got;
    }
    assert_true(total > 0 && total < BIG_BODY);
    close(big[0]);
    close(big[1]);
    server_stop(s);
}

#define SLOW_HEAD "GET /healthz HTTP/1.1\r\nX-a: "

static int slow_open(int port)
{
    int fd = connect_to(port);
    send_all(fd, SLOW_HEAD, strlen(SLOW_HEAD));
    return fd;
}

/* One more byte on each slow connection; those the server closed are
 * opened again, as an attacker does. */
static void slow_trickle(int port, int *fds, int n)
{
    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        if (poll(&p, 1, 0) > 0) {
            close(fds[i]);
            fds[i] = slow_open(port);
        }
        send_all(fds[i], "a", 1);
    }
}

/* Slowloris: 80, then 200, connections trickle heads that never end (more
 * than max_connections, the default 64) and reconnect when closed. Probes
 * and scrapes made meanwhile are answered 200 within a second. */
static void test_slowloris(void **state)
{
    (void)state;
    server_t *s = server_start(NULL);
    const int counts[] = {80, 200};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        int nslow = counts[k];
        int *fds = malloc((size_t)nslow * sizeof *fds);
        assert_non_null(fds);
        for (int i = 0; i < nslow; i++)
            fds[i] = slow_open(s->port);
        for (int round = 0; round < 4; round++) {
            slow_trickle(s->port, fds, nslow);
            const char *paths[] = {"/healthz", "/metrics"};
            for (int p = 0; p < 2; p++) {
                reply_t r;
                int64_t ms;
                timed_get(s->port, paths[p], 1000, &r, &ms);
                if (r.len == 0)
                    fail_msg("%d slow clients: %s unanswered after %lld ms", nslow, paths[p],
                             (long long)ms);
                parse_reply(&r);
                if (r.status != 200 || ms >= 1000)
                    fail_msg("%d slow clients: %s answered %d after %lld ms", nslow, paths[p],
                             r.status, (long long)ms);
            }
            usleep(200 * 1000);
        }
        for (int i = 0; i < nslow; i++)
            close(fds[i]);
        free(fds);
    }
    server_stop(s);
}

/* A burst that fills the backlog while the loop is busy is accepted in one
 * go, before any connection is read: a probe early in the burst has sent its
 * whole head but is still reading it, and must not be evicted for the slow
 * connections behind it. */
static void test_burst_keeps_waiting_probe(void **state)
{
#define BLOCK_REQ "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"
#define PROBE_REQ "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    (void)state;
    dpp_http_limits_t lim = {.max_connections = 4};
    server_t *s = server_start(&lim);
    int slow[3], late[4];
    for (int i = 0; i < 3; i++)
        slow[i] = slow_open(s->port);
    /* accepted after the three, so once its handler runs they hold slots */
    int blocker = connect_to(s->port);
    send_all(blocker, BLOCK_REQ, strlen(BLOCK_REQ));
    while (atomic_load(&s->handled) < 1)
        usleep(1000);
    int probe = connect_to(s->port);
    send_all(probe, PROBE_REQ, strlen(PROBE_REQ));
    for (int i = 0; i < 4; i++)
        late[i] = slow_open(s->port);
    atomic_store(&s->release, 1);
    reply_t r;
    r.len = read_until_close(probe, r.raw, sizeof r.raw, 10000, &r.closed);
    close(probe);
    if (r.len == 0)
        fail_msg("the probe accepted in the burst was closed unanswered");
    parse_reply(&r);
    assert_int_equal(r.status, 200);
    r.len = read_until_close(blocker, r.raw, sizeof r.raw, 10000, &r.closed);
    close(blocker);
    parse_reply(&r);
    assert_int_equal(r.status, 200);
    for (int i = 0; i < 3; i++)
        close(slow[i]);
    for (int i = 0; i < 4; i++)
        close(late[i]);
    server_stop(s);
}

/* Stopping with connections in every state closes them all; the loop ends,
 * uv_loop_close() succeeds and ASan finds nothing leaked. */
static void test_stop_with_open_connections(void **state)
{
    (void)state;
    server_t *s = server_start(NULL);
    int idle = connect_to(s->port);
    int partial = connect_to(s->port);
    send_all(partial, "GET /healthz HTTP/1.1\r\nHo", 25);
    int lingering = connect_to(s->port);
    send_all(lingering, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
    int writing = connect_to(s->port);
    int rcvbuf = 256 * 1024;
    setsockopt(writing, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    send_all(writing, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", 30);
    /* both complete requests reach the handler before the stop */
    for (int i = 0; i < 200 && atomic_load(&s->handled) < 2; i++)
        usleep(10 * 1000);
    assert_int_equal(atomic_load(&s->handled), 2);
    server_stop(s);
    int fds[] = {idle, partial, lingering, writing};
    for (int i = 0; i < 4; i++) {
        char buf[4096];
        int closed;
        read_until_close(fds[i], buf, sizeof buf, 3000, &closed);
        assert_true(closed);
        close(fds[i]);
    }
}

static void test_start_errors(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    dpp_http_t *a = NULL, *b = (dpp_http_t *)&loop;
    assert_int_equal(dpp_http_start(&b, &loop, "no-port", handler, NULL, NULL), DPP_EINVAL);
    assert_null(b);
    b = (dpp_http_t *)&loop;
    assert_int_equal(dpp_http_start(&b, &loop, "127.0.0.1:0", NULL, NULL, NULL), DPP_EINVAL);
    assert_null(b);
    dpp_http_limits_t huge = {.max_head_bytes = SIZE_MAX};
    b = (dpp_http_t *)&loop;
    assert_int_equal(dpp_http_start(&b, &loop, "127.0.0.1:0", handler, NULL, &huge), DPP_EINVAL);
    assert_null(b);
    assert_int_equal(dpp_http_start(&a, &loop, "127.0.0.1:0", handler, NULL, NULL), 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", dpp_http_port(a));
    b = (dpp_http_t *)&loop;
    assert_int_equal(dpp_http_start(&b, &loop, addr, handler, NULL, NULL), UV_EADDRINUSE);
    assert_null(b);
    dpp_http_stop(a);
    dpp_http_stop(NULL);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the daemons do (dpp_daemon_run) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_method_not_allowed),
        cmocka_unit_test(test_head_too_large),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_idle_timeout),
        cmocka_unit_test(test_header_timeout),
        cmocka_unit_test(test_write_timeout),
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_slowloris),
        cmocka_unit_test(test_burst_keeps_waiting_probe),
        cmocka_unit_test(test_stop_with_open_connections),
        cmocka_unit_test(test_start_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
