// SPDX-License-Identifier: Apache-2.0
// Minimal HTTP/1.x server for GET/HEAD endpoints (see http.h). Request syntax
// from RFC 9112; one request per connection, answered with Connection: close.
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "dpp/error.h"
#include "daemon/http.h"
#include "base/log.h"
#include "daemon/metrics.h"
#include "wire/net.h"
#include "base/util.h"

#define DEFAULT_CONTENT_TYPE "text/plain; charset=utf-8"

/* After the response the server half-closes and reads (and drops) what the
 * client still sends until it closes too, for at most this long and this
 * much. Closing with unread input makes the kernel send RST, which can
 * destroy the response before the client reads it (RFC 9112 §9.6). */
#define LINGER_MS 1000u
#define LINGER_MAX_BYTES (256u * 1024)

/* With every slot taken, a connection that has been taking its response for
 * this long gives its slot to a newcomer (when none is reading its head or
 * lingering): a second is ample for an honest scraper, and a client that
 * does not read must not keep probes out for the whole idle timeout. */
#define EVICT_WRITE_MS 1000u

/* A connection goes HEAD (reading the request head) -> WRITE (response and
 * FIN queued) -> LINGER (draining) -> CLOSING; any step may jump to CLOSING. */
enum conn_state { ST_HEAD, ST_WRITE, ST_LINGER, ST_CLOSING };

typedef struct http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t write_req;
    uv_shutdown_t shutdown_req;
    dpp_http_t *srv;
    struct http_conn *prev, *next;
    enum conn_state state;
    int open_handles;                             /* tcp and timer; freed when both are closed */
    uint64_t accepted_ms, last_read_ms, state_ms; /* loop time */
    size_t len;                                   /* bytes in buf */
    size_t line_start, scanned;                   /* head scan position */
    size_t lingered;
    char *body; /* the handler's response body, owned */
    char out_head[512];
    char buf[]; /* srv->limits.max_head_bytes; reused to drain in LINGER */
} http_conn_t;

struct dpp_http {
    uv_tcp_t listener;
    uv_loop_t *loop;
    dpp_http_limits_t limits;
    dpp_http_handler_fn handler;
    void *arg;
    http_conn_t *conns; /* newest first */
    uint32_t nconns;    /* allocated, closing ones included */
    uint32_t nopen;     /* not closing: what max_connections bounds */
    uint32_t nhandles;  /* listener + connections + refused sockets not yet closed */
    int port;
    int stopping;
    int accept_deferred; /* a connection waits in the listener for a close */
};

static void on_timer(uv_timer_t *t);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void accept_one(dpp_http_t *h);

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return ""; /* the reason phrase may be empty (RFC 9112 §4) */
    }
}

static const char *peer_name(uv_tcp_t *t, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int n = sizeof ss;
    if (uv_tcp_getpeername(t, (struct sockaddr *)&ss, &n) != 0 ||
        dpp_addr_format((struct sockaddr *)&ss, buf, len) != 0)
        snprintf(buf, len, "?");
    return buf;
}

/* A handle of h is closed; the last one frees h after dpp_http_stop(). */
static void release(dpp_http_t *h)
{
    if (--h->nhandles == 0 && h->stopping)
        free(h);
}

static void on_listener_closed(uv_handle_t *handle)
{
    release(dpp_container_of(handle, dpp_http_t, listener));
}

static void on_refused_closed(uv_handle_t *handle)
{
    dpp_http_t *h = handle->data;
    free(handle);
    release(h);
}

static void on_conn_handle_closed(uv_handle_t *handle)
{
    http_conn_t *c = handle->data;
    if (--c->open_handles > 0)
        return;
    dpp_http_t *h = c->srv;
    DPP_DLIST_UNLINK(h->conns, c);
    h->nconns--;
    free(c->body);
    free(c);
    if (h->accept_deferred && !h->stopping) {
        h->accept_deferred = 0;
        accept_one(h);
    }
    release(h);
}

static void conn_close(http_conn_t *c)
{
    if (c->state == ST_CLOSING)
        return;
    c->state = ST_CLOSING;
    c->srv->nopen--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void arm_timer(http_conn_t *c)
{
    const dpp_http_limits_t *l = &c->srv->limits;
    uint64_t deadline;
    if (c->state == ST_HEAD) {
        deadline = c->accepted_ms + l->header_timeout_ms;
        if (c->last_read_ms + l->idle_timeout_ms < deadline)
            deadline = c->last_read_ms + l->idle_timeout_ms;
    } else if (c->state == ST_WRITE) {
        deadline = c->state_ms + l->idle_timeout_ms;
    } else {
        deadline = c->state_ms + (l->idle_timeout_ms < LINGER_MS ? l->idle_timeout_ms : LINGER_MS);
    }
    uint64_t now = uv_now(c->srv->loop);
    uv_timer_start(&c->timer, on_timer, deadline > now ? deadline - now : 0, 0);
}

static void on_timer(uv_timer_t *t)
{
    http_conn_t *c = t->data;
    const dpp_http_limits_t *l = &c->srv->limits;
    uint64_t now = uv_now(t->loop);
    char peer[64];
    if (c->state == ST_HEAD) {
        int slow = now - c->accepted_ms >= l->header_timeout_ms;
        if (!slow && now - c->last_read_ms < l->idle_timeout_ms) {
            arm_timer(c); /* reads since arming moved the idle deadline */
            return;
        }
        DPP_DEBUG("http_timeout peer=%s phase=%s", peer_name(&c->tcp, peer, sizeof peer),
                  slow ? "header" : "idle");
    } else if (c->state == ST_WRITE) {
        DPP_DEBUG("http_timeout peer=%s phase=write", peer_name(&c->tcp, peer, sizeof peer));
    }
    conn_close(c);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    http_conn_t *c = handle->data;
    size_t cap = c->srv->limits.max_head_bytes;
    /* A full head buffer was answered with 431 already, so len < cap here. */
    size_t off = c->state == ST_HEAD ? c->len : 0;
    buf->base = c->buf + off;
    buf->len = cap - off;
}

static void on_written(uv_write_t *req, int status)
{
    if (status < 0)
        conn_close(dpp_container_of(req, http_conn_t, write_req));
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    http_conn_t *c = dpp_container_of(req, http_conn_t, shutdown_req);
    if (c->state != ST_WRITE || status < 0) {
        conn_close(c);
        return;
    }
    c->state = ST_LINGER;
    c->state_ms = uv_now(c->srv->loop);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    arm_timer(c);
}

/* Sends the status line, headers and (if data) len bytes of data, then FIN;
 * reading stops until the FIN is out. Content-Length is len also when the
 * bytes are left out (HEAD). */
static void respond(http_conn_t *c, int status, const char *ctype, const char *data, size_t len)
{
    uv_stream_t *s = (uv_stream_t *)&c->tcp;
    int n =
        snprintf(c->out_head, sizeof c->out_head,
                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                 "Connection: close\r\n\r\n",
                 status, reason(status), ctype, len, status == 405 ? "Allow: GET, HEAD\r\n" : "");
    uv_buf_t bufs[2] = {uv_buf_init(c->out_head, (unsigned)n),
                        uv_buf_init((char *)data, (unsigned)len)};
    uv_read_stop(s);
    c->state = ST_WRITE;
    c->state_ms = uv_now(c->srv->loop);
    arm_timer(c);
    /* The shutdown request runs once the write is flushed. */
    if (uv_write(&c->write_req, s, bufs, data && len ? 2 : 1, on_written) != 0 ||
        uv_shutdown(&c->shutdown_req, s, on_shutdown) != 0)
        conn_close(c);
}

static void reject(http_conn_t *c, int status)
{
    char peer[64];
    DPP_DEBUG("http_rejected peer=%s status=%d", peer_name(&c->tcp, peer, sizeof peer), status);
    respond(c, status, DEFAULT_CONTENT_TYPE, reason(status), strlen(reason(status)));
}

static int is_tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* The line at *pos (the head holds a blank line, so a '\n' follows):
 * NUL-terminated in place, without CRLF or LF. -1 for a bare CR or a NUL. */
static int next_line(char *buf, size_t *pos, char **line, size_t *len)
{
    size_t start = *pos, i = start;
    while (buf[i] != '\n')
        i++;
    size_t n = i - start;
    if (n > 0 && buf[i - 1] == '\r')
        n--;
    *pos = i + 1;
    if (memchr(buf + start, '\r', n) || memchr(buf + start, '\0', n))
        return -1;
    buf[start + n] = '\0';
    *line = buf + start;
    *len = n;
    return 0;
}

/* Parses a complete head in place. Returns 0 for a GET or HEAD (req set),
 * else the status to answer: 400, 405 (another method) or 505. */
static int parse_head(char *buf, dpp_http_request_t *req)
{
    size_t pos = 0, n;
    char *line;
    /* request-line = method SP request-target SP HTTP-version */
    if (next_line(buf, &pos, &line, &n) != 0)
        return 400;
    char *sp1 = memchr(line, ' ', n);
    char *sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line)) : NULL;
    if (sp2 == NULL || sp1 == line)
        return 400;
    *sp1 = *sp2 = '\0';
    char *method = line, *target = sp1 + 1, *version = sp2 + 1;
    for (char *p = method; *p; p++)
        if (!is_tchar((unsigned char)*p))
            return 400;
    for (char *p = target; *p; p++)
        if (*p < 0x21 || *p > 0x7e)
            return 400;
    if (strlen(version) != 8 || strncmp(version, "HTTP/", 5) != 0 || version[6] != '.' ||
        version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9')
        return 400;
    if (version[5] != '1')
        return 505;
    /* Absolute-form must be accepted too (RFC 9112 §3.2.2); keep its path. */
    if (strncasecmp(target, "http://", 7) == 0 || strncasecmp(target, "https://", 8) == 0) {
        char *slash = strchr(strstr(target, "//") + 2, '/');
        if (slash == NULL)
            return 400;
        target = slash;
    }
    if (target[0] != '/')
        return 400;
    int hosts = 0;
    for (;;) {
        if (next_line(buf, &pos, &line, &n) != 0)
            return 400;
        if (n == 0)
            break;
        /* Obsolete line folding may be rejected (§5.2); whitespace before the
         * colon must be (§5.1): both fail the token check. */
        char *colon = memchr(line, ':', n);
        if (colon == NULL || colon == line)
            return 400;
        for (char *p = line; p < colon; p++)
            if (!is_tchar((unsigned char)*p))
                return 400;
        for (unsigned char *p = (unsigned char *)colon + 1; *p; p++)
            if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
                return 400;
        hosts += colon - line == 4 && strncasecmp(line, "host", 4) == 0;
    }
    /* HTTP/1.1 requires exactly one Host; more than one is always bad (§3.2). */
    if (hosts > 1 || (hosts == 0 && version[7] != '0'))
        return 400;
    char *query = strchr(target, '?');
    if (query)
        *query++ = '\0';
    req->method = method;
    req->path = target;
    req->query = query ? query : "";
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ? 0 : 405;
}

static int valid_content_type(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (s[n] < 0x20 || s[n] > 0x7e)
            return 0;
    return n > 0 && n < 200;
}

static void serve(http_conn_t *c)
{
    dpp_http_t *h = c->srv;
    dpp_http_request_t req;
    int status = parse_head(c->buf, &req);
    if (status != 0) {
        reject(c, status);
        return;
    }
    dpp_http_response_t res = {500, DEFAULT_CONTENT_TYPE, NULL, 0};
    h->handler(&req, &res, h->arg);
    c->body = res.body;
    if (c->state != ST_HEAD)
        return; /* closed under us; the body goes with the connection */
    /* 1xx, 204 and 304 responses must not carry Content-Length (RFC 9110 §8.6). */
    if (res.status < 200 || res.status > 599 || res.status == 204 || res.status == 304 ||
        res.content_type == NULL || !valid_content_type(res.content_type) ||
        res.body_len > UINT_MAX || (res.body == NULL && res.body_len > 0)) {
        char path[128];
        DPP_DEBUG("http_bad_response path=%s status=%d", dpp_log_quote(req.path, path, sizeof path),
                  res.status);
        respond(c, 500, DEFAULT_CONTENT_TYPE, NULL, 0);
        return;
    }
    int head_only = strcmp(req.method, "HEAD") == 0;
    respond(c, res.status, res.content_type, head_only ? NULL : res.body, res.body_len);
}

/* Whether c->buf[from, end) holds the blank line that ends the head; the
 * scan goes on from *line_start, the start of the line being read. */
static int head_ends(const http_conn_t *c, size_t from, size_t end, size_t *line_start)
{
    for (size_t i = from; i < end; i++) {
        if (c->buf[i] != '\n')
            continue;
        size_t n = i - *line_start;
        if (n > 0 && c->buf[i - 1] == '\r')
            n--;
        if (n == 0)
            return 1;
        *line_start = i + 1;
    }
    return 0;
}

/* Looks for the blank line that ends the head, resuming where the last read
 * stopped; serves the request once it is there. */
static void scan_head(http_conn_t *c)
{
    if (head_ends(c, c->scanned, c->len, &c->line_start)) {
        /* Bytes after the blank line (a body, pipelined requests) are never
         * looked at: one request per connection. */
        serve(c);
        return;
    }
    c->scanned = c->len;
    if (c->len >= c->srv->limits.max_head_bytes)
        reject(c, 431);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    http_conn_t *c = s->data;
    if (nread < 0) {
        conn_close(c); /* EOF, reset, or the end of lingering */
        return;
    }
    if (c->state == ST_LINGER) {
        c->lingered += (size_t)nread;
        if (c->lingered > LINGER_MAX_BYTES)
            conn_close(c);
    } else if (c->state == ST_HEAD && nread > 0) {
        c->len += (size_t)nread;
        c->last_read_ms = uv_now(c->srv->loop);
        scan_head(c);
    }
}

/* Over the limit: accept, say 503 if the socket takes it right away, close. */
static void refuse(dpp_http_t *h)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
                               "Content-Type: " DEFAULT_CONTENT_TYPE "\r\n"
                               "Content-Length: 0\r\nConnection: close\r\n\r\n";
    /* Without memory the connection stays in the backlog and libuv stops
     * accepting until it is taken; the daemons abort on OOM anyway. */
    uv_tcp_t *t = malloc(sizeof *t);
    if (t == NULL)
        return;
    uv_tcp_init(h->loop, t);
    t->data = h;
    h->nhandles++;
    if (uv_accept((uv_stream_t *)&h->listener, (uv_stream_t *)t) == 0) {
        char peer[64];
        uv_buf_t b = uv_buf_init((char *)busy, sizeof busy - 1);
        uv_try_write((uv_stream_t *)t, &b, 1);
        DPP_DEBUG("http_refused peer=%s reason=max_connections limit=%u",
                  peer_name(t, peer, sizeof peer), h->limits.max_connections);
    }
    uv_close((uv_handle_t *)t, on_refused_closed);
}

/* Whether the rest of c's head already waits in its socket, unread: libuv
 * accepts a whole backlog in one callback before it reads any connection, so
 * a probe accepted early in a burst has sent its head but is still in
 * ST_HEAD. Peeks into the unused tail of c->buf; the read that follows
 * writes the same bytes there. */
static int head_waiting(http_conn_t *c)
{
    uv_os_fd_t fd;
    size_t room = c->srv->limits.max_head_bytes - c->len;
    if (room == 0 || uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return 0;
    ssize_t n = recv(fd, c->buf + c->len, room, MSG_PEEK | MSG_DONTWAIT);
    size_t line_start = c->line_start;
    return n > 0 && head_ends(c, c->scanned, c->len + (size_t)n, &line_start);
}

/* Every slot is taken: closes, unanswered, the connection that has been
 * reading its head the longest, else the one lingering the longest, else the
 * one taking its response the longest if that is over EVICT_WRITE_MS. The
 * head has a deadline from accept, but a slow-head attacker (slowloris) that
 * reconnects would still hold every slot and keep health probes out: its
 * connections are the old ones in ST_HEAD, as an honest client sends its
 * head at once; a new connection is the last to be chosen, and one whose
 * whole head waits unread is never chosen (head_waiting). */
static void evict(dpp_http_t *h)
{
    static const char *const names[] = {"head", "write", "linger"};
    uint64_t now = uv_now(h->loop);
    http_conn_t *victim = NULL;
    int victim_rank = 0;
    uint64_t victim_since = 0;
    for (http_conn_t *c = h->conns; c; c = c->next) {
        int rank; /* lower goes first */
        uint64_t since;
        if (c->state == ST_HEAD) {
            if (head_waiting(c))
                continue;
            rank = 0;
            since = c->accepted_ms;
        } else if (c->state == ST_LINGER) {
            rank = 1;
            since = c->state_ms;
        } else if (c->state == ST_WRITE && now - c->state_ms >= EVICT_WRITE_MS) {
            rank = 2;
            since = c->state_ms;
        } else {
            continue;
        }
        /* <=: on a tie the later in the list, the older, goes */
        if (victim == NULL || rank < victim_rank ||
            (rank == victim_rank && since <= victim_since)) {
            victim = c;
            victim_rank = rank;
            victim_since = since;
        }
    }
    if (victim == NULL)
        return;
    char peer[64];
    DPP_DEBUG("http_evicted peer=%s phase=%s age_ms=%llu",
              peer_name(&victim->tcp, peer, sizeof peer), names[victim->state],
              (unsigned long long)(now - victim->accepted_ms));
    conn_close(victim);
}

/* Takes the connection waiting in the listener. */
static void accept_one(dpp_http_t *h)
{
    const uint32_t max = h->limits.max_connections;
    if (h->nopen >= max)
        evict(h);
    if (h->nopen >= max) {
        refuse(h);
        return;
    }
    /* An evicted connection keeps its memory until its close callbacks run,
     * later in this loop iteration, and one iteration may accept a whole
     * backlog of newcomers. Past max closing ones, the next newcomer waits in
     * the listener for a close callback: libuv stops accepting while it is
     * not taken. */
    if ((uint64_t)h->nconns >= 2 * (uint64_t)max) {
        h->accept_deferred = 1;
        return;
    }
    http_conn_t *c = calloc(1, sizeof *c + h->limits.max_head_bytes);
    if (c == NULL) {
        refuse(h);
        return;
    }
    uv_tcp_init(h->loop, &c->tcp);
    uv_timer_init(h->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    c->srv = h;
    DPP_DLIST_PUSH(h->conns, c);
    h->nconns++;
    h->nopen++;
    h->nhandles++;
    c->state = ST_HEAD;
    c->accepted_ms = c->last_read_ms = uv_now(h->loop);
    if (uv_accept((uv_stream_t *)&h->listener, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    arm_timer(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    dpp_http_t *h = dpp_container_of(server, dpp_http_t, listener);
    if (status < 0) {
        DPP_DEBUG("http_accept_failed error=\"%s\"", uv_strerror(status));
        return;
    }
    accept_one(h);
}

int dpp_http_respond(dpp_http_response_t *res, int status, const char *content_type,
                     const void *body, size_t len)
{
    char *copy = NULL;
    int rc = 0;
    if (len > 0) {
        copy = malloc(len);
        if (copy == NULL) {
            rc = -ENOMEM;
            status = 500;
            content_type = NULL;
            len = 0;
        } else {
            memcpy(copy, body, len);
        }
    }
    free(res->body);
    res->status = status;
    res->content_type = content_type ? content_type : DEFAULT_CONTENT_TYPE;
    res->body = copy;
    res->body_len = len;
    return rc;
}

int dpp_http_start(dpp_http_t **out, uv_loop_t *loop, const char *host_port,
                   dpp_http_handler_fn handler, void *arg, const dpp_http_limits_t *limits)
{
    *out = NULL;
    if (handler == NULL || (limits && limits->max_head_bytes > DPP_HTTP_MAX_HEAD_LIMIT))
        return DPP_EINVAL;
    struct sockaddr_storage ss;
    int rc = dpp_addr_parse(host_port, &ss);
    if (rc != 0)
        return rc;
    dpp_http_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -ENOMEM;
    h->loop = loop;
    h->handler = handler;
    h->arg = arg;
    if (limits)
        h->limits = *limits;
    if (h->limits.max_head_bytes == 0)
        h->limits.max_head_bytes = DPP_HTTP_MAX_HEAD_BYTES;
    if (h->limits.header_timeout_ms == 0)
        h->limits.header_timeout_ms = DPP_HTTP_HEADER_TIMEOUT_MS;
    if (h->limits.idle_timeout_ms == 0)
        h->limits.idle_timeout_ms = DPP_HTTP_IDLE_TIMEOUT_MS;
    if (h->limits.max_connections == 0)
        h->limits.max_connections = DPP_HTTP_MAX_CONNECTIONS;
    rc = uv_tcp_init(loop, &h->listener);
    if (rc != 0) {
        free(h);
        return rc;
    }
    h->nhandles = 1;
    rc = uv_tcp_bind(&h->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->listener, DPP_LISTEN_BACKLOG, on_connection);
    int len = sizeof ss;
    if (rc == 0)
        rc = uv_tcp_getsockname(&h->listener, (struct sockaddr *)&ss, &len);
    if (rc != 0) {
        dpp_http_stop(h);
        return rc;
    }
    h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    *out = h;
    return 0;
}

int dpp_http_port(const dpp_http_t *h)
{
    return h->port;
}

void dpp_http_stop(dpp_http_t *h)
{
    if (h == NULL || h->stopping)
        return;
    h->stopping = 1;
    for (http_conn_t *c = h->conns; c; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
}

void dpp_http_respond_metrics(dpp_http_response_t *res, void (*render)(void *arg, dpp_metrics_t *m),
                              void *arg)
{
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    render(arg, &m);
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    if (text) {
        dpp_http_respond(res, 200, DPP_METRICS_CONTENT_TYPE, text, len);
    } else {
        DPP_ERROR("metrics_render_failed error=\"%s\"", dpp_strerror(dpp_metrics_error(&m)));
        dpp_http_respond(res, 500, "text/plain; charset=utf-8", "render failed\n", 14);
    }
    dpp_metrics_close(&m);
}
