/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal HTTP/1.x server on the caller's libuv loop, for the daemons'
 * GET endpoints (/metrics, /healthz, /readyz). One request per connection:
 * every response says `Connection: close` and carries Content-Length. It faces
 * the network, so every input is bounded (head size, time to send it, silence,
 * connection count) and nothing a peer sends is logged above debug level.
 * Clients that hold connections open without finishing their request
 * (slowloris) cannot keep a new one out: see max_connections. */
#ifndef DPP_DAEMON_HTTP_H
#define DPP_DAEMON_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct dpp_http dpp_http_t;

/* A field left 0 takes its default. */
typedef struct dpp_http_limits {
    size_t max_head_bytes;      /* request line + headers; more: 431. 8 KiB */
    uint32_t header_timeout_ms; /* from accept to a complete head, however the
                                   bytes trickle in; 5 s */
    uint32_t idle_timeout_ms;   /* silence while the head is incomplete, and the
                                   time the client gets to take the response; 10 s */
    uint32_t max_connections;   /* concurrent; 64. When all are taken, a new one
                                   takes the slot of the connection reading its
                                   head the longest (closed unanswered), else of
                                   one lingering after its response, else of one
                                   taking its response for over a second; when
                                   none qualifies it gets 503 and is closed. */
} dpp_http_limits_t;

#define DPP_HTTP_MAX_HEAD_BYTES (8u * 1024)
#define DPP_HTTP_HEADER_TIMEOUT_MS 5000u
#define DPP_HTTP_IDLE_TIMEOUT_MS 10000u
#define DPP_HTTP_MAX_CONNECTIONS 64u
/* The largest max_head_bytes accepted (each connection allocates that much). */
#define DPP_HTTP_MAX_HEAD_LIMIT (1u << 20)

/* A request the handler sees. The strings live in the connection's buffer
 * and are valid only during the handler call. */
typedef struct dpp_http_request {
    const char *method; /* "GET" or "HEAD"; others never reach the handler */
    const char *path;   /* the origin-form target up to '?', e.g. "/metrics";
                           not percent-decoded */
    const char *query;  /* after '?', "" when there is none */
} dpp_http_request_t;

/* What the handler fills. It starts as status 500, content type
 * "text/plain; charset=utf-8", no body. body is malloc'd (or NULL) and the
 * server frees it, also when the connection closes before sending it. For
 * HEAD the handler produces the GET body: the server sends its length and
 * drops the bytes. content_type must be a static string. */
typedef struct dpp_http_response {
    int status; /* 200..599; anything else is answered 500 */
    const char *content_type;
    char *body;
    size_t body_len;
} dpp_http_response_t;

/* Called on the loop thread once per served request (GET or HEAD on a
 * well-formed request). It must not call dpp_http_stop(). */
typedef void (*dpp_http_handler_fn)(const dpp_http_request_t *req, dpp_http_response_t *res,
                                    void *arg);

/* Sets res's status, content type (static string) and a malloc'd copy of
 * len bytes of body (replacing and freeing an earlier body). Returns 0 or
 * -ENOMEM (then res->status is 500 and the body empty). */
int dpp_http_respond(dpp_http_response_t *res, int status, const char *content_type,
                     const void *body, size_t len);

/* Listens on host_port ("127.0.0.1:9100", "[::1]:0", port 0 = ephemeral;
 * parsed by dpp_addr_parse()) on loop and calls handler(req, res, arg) for
 * each request. limits may be NULL for the defaults. Writing to a peer that
 * has gone can raise SIGPIPE: the process must ignore it, as
 * dpp_daemon_run() does.
 * On 0, *out is the server until dpp_http_stop(). On failure *out is NULL
 * and nothing is left to stop, though a handle may still be closing (run the
 * loop before uv_loop_close(), as after any libuv close). Failures: DPP_EINVAL
 * (bad address, NULL handler, max_head_bytes over DPP_HTTP_MAX_HEAD_LIMIT),
 * -ENOENT (host does not resolve), a uv error (-errno) from bind or listen
 * such as UV_EADDRINUSE, -ENOMEM. */
int dpp_http_start(dpp_http_t **out, uv_loop_t *loop, const char *host_port,
                   dpp_http_handler_fn handler, void *arg, const dpp_http_limits_t *limits);

struct dpp_metrics;

/* Answers GET /metrics: renders into a fresh dpp_metrics_t with
 * render(arg, m) and responds 200 with the text, or 500 (logged) when the
 * render failed. */
void dpp_http_respond_metrics(dpp_http_response_t *res,
                              void (*render)(void *arg, struct dpp_metrics *m), void *arg);

/* The bound port (useful with port 0). */
int dpp_http_port(const dpp_http_t *h);

/* Closes the listener and every connection (unanswered requests get no
 * reply) and frees h once their handles are closed, on later iterations of
 * the loop; the loop may keep running other handles. Call once, on the loop
 * thread, outside the handler; h is invalid afterwards. Accepts NULL. */
void dpp_http_stop(dpp_http_t *h);

#endif
