// SPDX-License-Identifier: Apache-2.0
// Framed TCP connections over libuv (see conn.h).
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/util.h"
#include "wire/conn.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "base/log.h"
#include "wire/net.h"

/* Reads land in at least this much free buffer space (c->read_chunk when
 * set). */
#define READ_CHUNK (64u * 1024)

static size_t read_chunk(const dpp_conn_t *c)
{
    return c->read_chunk ? c->read_chunk : READ_CHUNK;
}

typedef struct write_req {
    uv_write_t req;
    struct write_req *next; /* held: the next held frame */
    dpp_conn_t *conn;
    uint8_t *head; /* header + message, owned */
    void *payload;
    dpp_payload_free_cb payload_free;
    void *payload_arg;
    size_t head_len, payload_len, bytes;
} write_req_t;

static void sink_drop(dpp_conn_t *c)
{
    if (c->sink_buf && c->payload_sink_free)
        c->payload_sink_free(c, c->sink_buf);
    c->sink_buf = NULL;
    c->sink_len = c->sink_have = 0;
}

static void on_closed(uv_handle_t *h)
{
    dpp_conn_t *c = dpp_container_of(h, dpp_conn_t, tcp);
    sink_drop(c);
    free(c->rbuf);
    c->rbuf = NULL;
    c->rlen = c->rcap = 0;
    if (c->on_close)
        c->on_close(c);
}

int dpp_conn_init(uv_loop_t *loop, dpp_conn_t *c, dpp_conn_frame_cb on_frame,
                  dpp_conn_close_cb on_close, void *data)
{
    memset(c, 0, sizeof *c);
    dpp_frame_limits_default(&c->limits);
    c->on_frame = on_frame;
    c->on_close = on_close;
    c->data = data;
    snprintf(c->peer, sizeof c->peer, "?");
    return uv_tcp_init(loop, &c->tcp);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* The handle closed, now or (frames held) once they are released. */
static void close_handle(dpp_conn_t *c)
{
    if (c->held_head) {
        c->held_close = 1;
        return;
    }
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void linger_end(dpp_conn_t *c)
{
    c->lingering = 0;
    close_handle(c);
}

void dpp_conn_close(dpp_conn_t *c, int error)
{
    if (c->lingering) {
        linger_end(c);
        return;
    }
    if (c->closing)
        return;
    c->closing = 1;
    c->error = error;
    close_handle(c); /* after what was said before it, when held */
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    dpp_conn_t *c = dpp_container_of(req, dpp_conn_t, shutdown_req);
    if (c->lingering && status == 0)
        return; /* the peer's rest is still read: on_read closes */
    c->lingering = 0;
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

void dpp_conn_finish(dpp_conn_t *c)
{
    if (c->closing)
        return;
    dpp_conn_read_stop(c);
    c->closing = 1;
    if (c->held_head) {
        c->held_close = 2;
        return;
    }
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) != 0)
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static int ensure_space(dpp_conn_t *c, size_t need)
{
    if (c->rcap >= need)
        return 0;
    size_t cap = c->rcap ? c->rcap : read_chunk(c);
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(c->rbuf, cap);
    if (p == NULL)
        return -ENOMEM;
    c->rbuf = p;
    c->rcap = cap;
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    dpp_conn_t *c = dpp_container_of(h, dpp_conn_t, tcp);
    if (c->sink_buf) { /* exactly the rest of the payload: the next frame starts in rbuf */
        buf->base = (char *)c->sink_buf + c->sink_have;
        buf->len = c->sink_len - c->sink_have;
        return;
    }
    if (ensure_space(c, c->rlen + read_chunk(c)) != 0) {
        buf->base = NULL;
        buf->len = 0; /* libuv reports UV_ENOBUFS to on_read */
        return;
    }
    buf->base = (char *)c->rbuf + c->rlen;
    buf->len = c->rcap - c->rlen;
}

/* Hands one whole frame to the owner. Returns 0, or -1 when the
 * connection is closing. */
static int deliver(dpp_conn_t *c, const dpp_frame_t *f)
{
    /* Unpacked here, once for every owner: a message that does not decode
     * is the peer's error, answered the same way everywhere. */
    ProtobufCMessage *msg = dpp_frame_unpack(f);
    if (msg == NULL) {
        dpp_conn_send_error(c, DPP_EMSG, "%s message does not decode", dpp_msg_name(f->type));
        dpp_conn_close(c, DPP_EMSG);
        return -1;
    }
    c->on_frame(c, f, msg);
    protobuf_c_message_free_unpacked(msg, NULL);
    return c->closing ? -1 : 0;
}

/* The frame at rbuf[0..rlen) lacks a payload worth receiving in place:
 * once its header and message are in, asks the owner for the payload's
 * buffer and moves the payload bytes already read there. Returns 1 when
 * the rest of the payload will be read there, 0 when the message is not all
 * in yet, -1 when the owner declined. */
static int sink_start(dpp_conn_t *c)
{
    uint32_t msg_len, payload_len;
    uint16_t type = (uint16_t)(c->rbuf[4] | c->rbuf[5] << 8);
    memcpy(&msg_len, c->rbuf + 8, 4);
    memcpy(&payload_len, c->rbuf + 12, 4);
    size_t head = DPP_FRAME_HEADER_SIZE + (size_t)msg_len;
    if (c->rlen < head)
        return 0;
    void *buf = c->payload_sink(c, type, payload_len);
    if (buf == NULL) {
        c->sink_declined = 1;
        return -1;
    }
    c->sink_buf = buf;
    c->sink_len = payload_len;
    c->sink_have = c->rlen - head;
    memcpy(buf, c->rbuf + head, c->sink_have);
    c->rlen = head;
    return 1;
}

/* How many bytes the kernel should hold before it wakes the reader: while
 * a payload streams into a sink, up to RCVLOWAT_MAX of what is left of it
 * (fewer wake-ups, longer reads), else 1. Only a hint: TCP still wakes the
 * reader when its buffer or window runs short. */
#define RCVLOWAT_MAX (1u << 20)
static void set_rcvlowat(dpp_conn_t *c, size_t want)
{
    uv_os_fd_t fd;
    int v = (int)(want < RCVLOWAT_MAX ? (want ? want : 1) : RCVLOWAT_MAX);
    if (v != c->rcvlowat && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
        setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0)
        c->rcvlowat = v;
}

/* The sink's payload is complete: the frame goes to the owner. */
static void sink_finish(dpp_conn_t *c)
{
    dpp_frame_t f;
    memcpy(&f.msg_len, c->rbuf + 8, 4);
    f.type = (uint16_t)(c->rbuf[4] | c->rbuf[5] << 8);
    f.msg = c->rbuf + DPP_FRAME_HEADER_SIZE;
    f.payload = c->sink_buf;
    f.payload_len = (uint32_t)c->sink_len;
    int rc = deliver(c, &f);
    sink_drop(c); /* unless on_frame took it */
    if (rc == 0)
        c->rlen = 0;
}

/* A frame whose header (buf, at least DPP_FRAME_HEADER_SIZE of its `have`
 * bytes) declares more than c->limits: the peer is told what and how much,
 * and its rest is read and dropped (c->lingering) so that the Error reaches
 * a peer that is still sending it. */
static void frame_too_large(dpp_conn_t *c, const uint8_t *buf, size_t have)
{
    uint16_t type = (uint16_t)(buf[4] | buf[5] << 8);
    uint32_t len[2];
    for (int k = 0; k < 2; k++)
        len[k] = (uint32_t)buf[8 + 4 * k] | (uint32_t)buf[9 + 4 * k] << 8 |
                 (uint32_t)buf[10 + 4 * k] << 16 | (uint32_t)buf[11 + 4 * k] << 24;
    int payload = len[0] <= c->limits.max_msg;
    dpp_conn_send_error(c, DPP_EFRAMESIZE,
                        "%s %s of %u bytes: more than the %u bytes this end takes in one (a "
                        "daemon's --max-frame-mb, once the handshake is done)",
                        dpp_msg_name(type), payload ? "payload" : "message", len[payload],
                        payload ? c->limits.max_payload : c->limits.max_msg);
    uint64_t total = DPP_FRAME_HEADER_SIZE + (uint64_t)len[0] + len[1];
    uint64_t rest = have < total ? total - have : 0; /* what is in is dropped with rbuf */
    if (c->closing || rest > DPP_CONN_LINGER_MAX_BYTES) {
        dpp_conn_close(c, DPP_EFRAMESIZE);
        return;
    }
    c->closing = 1;
    c->error = DPP_EFRAMESIZE;
    c->lingering = 1;
    c->linger_left = rest;
    c->linger_since_ms = dpp_now_ms();
    c->rlen = 0;
    if (!c->reading && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = 1;
    if (rest == 0) {
        linger_end(c);
    } else if (c->held_head) {
        c->held_close = 3; /* after the Error: shut down, reading on */
    } else if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        linger_end(c);
    }
}

/* Hands every whole frame in the buffer to the owner and keeps the rest. */
static void dispatch(dpp_conn_t *c)
{
    size_t off = 0;
    /* a peer that does not read what it asked for gets nothing more
     * answered, also from requests already buffered */
    while (!c->closing && !c->out_paused && off < c->rlen) {
        dpp_frame_t f;
        size_t flen;
        int rc = dpp_frame_parse(c->rbuf + off, c->rlen - off, &c->limits, &f, &flen);
        if (rc < 0) {
            DPP_WARN("frame_rejected peer=%s error=%s reason=\"%s\"", c->peer, dpp_err_name(rc),
                     dpp_strerror(rc));
            if (rc == DPP_EFRAMESIZE) {
                frame_too_large(c, c->rbuf + off, c->rlen - off);
                return;
            }
            dpp_conn_send_error(c, rc, "%s", dpp_strerror(rc));
            dpp_conn_close(c, rc);
            return;
        }
        if (rc == 1) {
            if (flen && c->payload_sink && !c->sink_declined &&
                flen - (c->rlen - off) >= DPP_CONN_SINK_MIN) {
                /* the frame to the front: its header is where sink_finish reads it */
                if (off > 0) {
                    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
                    c->rlen -= off;
                    off = 0;
                }
                int sunk = sink_start(c);
                if (sunk >= 0)
                    return; /* in the sink, or its message still coming (rbuf need not grow) */
            }
            if (flen && ensure_space(c, flen) != 0) {
                dpp_conn_close(c, -ENOMEM);
                return;
            }
            break;
        }
        c->sink_declined = 0;
        if (deliver(c, &f) != 0)
            return;
        off += flen;
    }
    if (c->closing)
        return;
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    dpp_conn_t *c = dpp_container_of(s, dpp_conn_t, tcp);
    if (c->lingering) { /* a refused frame's rest: dropped */
        if (nread < 0 || (uint64_t)nread >= c->linger_left)
            linger_end(c);
        else
            c->linger_left -= (uint64_t)nread;
        return;
    }
    if (nread < 0) {
        dpp_conn_close(c, nread == UV_EOF ? DPP_ECLOSED : (int)nread);
        return;
    }
    if (c->sink_buf) {
        c->sink_have += (size_t)nread;
        if (c->sink_have < c->sink_len) {
            set_rcvlowat(c, c->sink_len - c->sink_have);
            return;
        }
        set_rcvlowat(c, 1);
        sink_finish(c);
        if (c->closing)
            return;
    } else {
        c->rlen += (size_t)nread;
    }
    dispatch(c);
}

int dpp_conn_read_start(dpp_conn_t *c)
{
    if (c->closing || c->reading)
        return 0;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc == 0)
        c->reading = 1;
    return rc;
}

void dpp_conn_read_stop(dpp_conn_t *c)
{
    if (c->closing || !c->reading)
        return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
}

static void name_peer(dpp_conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
        dpp_addr_format((struct sockaddr *)&ss, c->peer, sizeof c->peer);
}

int dpp_conn_accept(uv_stream_t *server, dpp_conn_t *c)
{
    int rc = uv_accept(server, (uv_stream_t *)&c->tcp);
    if (rc != 0)
        return rc;
    uv_tcp_nodelay(&c->tcp, 1);
    name_peer(c);
    return dpp_conn_read_start(c);
}

static void on_connected(uv_connect_t *req, int status)
{
    dpp_conn_t *c = dpp_container_of(req, dpp_conn_t, connect_req);
    if (status == 0 && !c->closing) {
        uv_tcp_nodelay(&c->tcp, 1);
        name_peer(c);
        status = dpp_conn_read_start(c);
    } else if (status == 0) {
        status = UV_ECANCELED;
    }
    c->on_connect(c, status);
}

int dpp_conn_connect(dpp_conn_t *c, const struct sockaddr *addr, dpp_conn_connect_cb cb)
{
    c->on_connect = cb;
    return uv_tcp_connect(&c->connect_req, &c->tcp, addr, on_connected);
}

/* Microseconds the peer's receive window has limited the sender, or
 * UINT64_MAX when unknown. */
static uint64_t rwnd_limited_us(dpp_conn_t *c)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return UINT64_MAX;
    return dpp_tcp_rwnd_limited_us(fd);
}

/* After writes completed: while more stay queued the link was busy all
 * along, so bytes over time is its rate; once the queue is empty the window
 * is over (the link kept up) and the next queued write starts another.
 * The socket's own buffer takes the first few MB of a burst at once, so a
 * busy period's first window is not counted, nor any shorter than
 * DPP_CONN_DRAIN_WINDOW_MS. */
static void measure_drain(dpp_conn_t *c)
{
    uint64_t now = dpp_now_ns();
    if (c->queued == 0) {
        c->busy_start_ns = 0;
        return;
    }
    uint64_t span = now - c->busy_start_ns;
    if (c->busy_start_ns == 0 || span < (uint64_t)DPP_CONN_DRAIN_WINDOW_MS * 1000000u)
        return;
    /* A peer that reads slowly backs writes up just the same; the kernel
     * counts the time its receive window held the sender back, and such a
     * window measures the reader, not the link. */
    uint64_t rwnd_us = rwnd_limited_us(c);
    int reader_bound = rwnd_us != UINT64_MAX && c->busy_rwnd_us != UINT64_MAX &&
                       rwnd_us - c->busy_rwnd_us > span / 2000;
    c->busy_rwnd_us = rwnd_us;
    if (c->busy_counts && reader_bound) {
        c->reader_bound_at_ns = now;
    } else if (c->busy_counts) {
        double bps = (double)c->busy_bytes * 1e9 / (double)span;
        c->drain_bps = c->drain_at_ns ? 0.5 * c->drain_bps + 0.5 * bps : bps;
        c->drain_at_ns = now;
    }
    c->busy_counts = 1;
    c->busy_start_ns = now;
    c->busy_bytes = 0;
}

/* Done with the frames of one write: w and those chained after it (frames
 * released together). */
static void on_written(uv_write_t *req, int status)
{
    write_req_t *w = dpp_container_of(req, write_req_t, req);
    dpp_conn_t *c = w->conn;
    while (w) {
        write_req_t *next = w->next;
        c->queued -= w->bytes;
        c->busy_bytes += w->bytes;
        if (status < 0)
            c->dropped += w->bytes;
        free(w->head);
        if (w->payload_free)
            w->payload_free(w->payload, w->payload_arg);
        free(w);
        w = next;
    }
    if (status < 0 && status != UV_ECANCELED) {
        dpp_conn_close(c, status);
        return;
    }
    measure_drain(c);
    if (c->out_paused && !c->closing && c->queued <= c->max_queued / 4) {
        c->out_paused = 0;
        dispatch(c); /* what arrived before the pause */
        if (!c->out_paused && dpp_conn_read_start(c) != 0)
            dpp_conn_close(c, DPP_ECLOSED);
    }
}

/* Writes w and the frames chained after it as one uv_write (one writev,
 * one TCP push for a whole loop turn's answers); on_written frees them
 * all. */
static int write_now(write_req_t *w)
{
    uv_buf_t small[16] = {{0}}, *bufs = small;
    size_t n = 0;
    for (const write_req_t *x = w; x; x = x->next)
        n += 1 + (x->payload_len > 0);
    if (n > sizeof small / sizeof small[0] && (bufs = malloc(n * sizeof *bufs)) == NULL)
        return -ENOMEM;
    n = 0;
    for (const write_req_t *x = w; x; x = x->next) {
        bufs[n++] = uv_buf_init((char *)x->head, (unsigned)x->head_len);
        if (x->payload_len)
            bufs[n++] = uv_buf_init(x->payload, (unsigned)x->payload_len);
    }
    /* libuv copies the buffer array */
    int rc = uv_write(&w->req, (uv_stream_t *)&w->conn->tcp, bufs, (unsigned)n, on_written);
    if (bufs != small)
        free(bufs);
    return rc;
}

void dpp_conn_release(dpp_conn_t *c, int write)
{
    write_req_t *w = c->held_head;
    c->held_head = c->held_tail = NULL;
    if (w && (!write || write_now(w) != 0)) /* dropped, or the socket failed */
        on_written(&w->req, UV_ECANCELED);
    int how = c->held_close;
    c->held_close = 0;
    if (how == 1)
        close_handle(c);
    else if ((how == 2 || how == 3) &&
             uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) != 0)
        linger_end(c); /* 3: lingering; 2: not, and the same close */
}

int dpp_conn_send_payload(dpp_conn_t *c, uint16_t type, const ProtobufCMessage *m, void *payload,
                          uint32_t len, dpp_payload_free_cb free_cb, void *arg)
{
    int rc = DPP_ECLOSED;
    write_req_t *w = NULL;
    if (c->closing)
        goto fail;
    rc = -ENOMEM;
    w = calloc(1, sizeof *w);
    if (w == NULL)
        goto fail;
    size_t head_len;
    w->head = dpp_frame_pack(type, m, len, &head_len);
    if (w->head == NULL)
        goto fail;
    w->conn = c;
    w->payload = payload;
    w->payload_free = free_cb;
    w->payload_arg = arg;
    w->bytes = head_len + len;
    w->head_len = head_len;
    w->payload_len = len;
    if (c->hold && *c->hold) {
        if (c->held_tail) {
            c->held_tail->next = w;
        } else {
            c->held_head = w;
            if (c->held_list) {
                c->held_next = *c->held_list;
                *c->held_list = c;
            }
        }
        c->held_tail = w;
    } else if ((rc = write_now(w)) != 0) {
        goto fail;
    }
    if (c->queued == 0) { /* a busy window may start (measure_drain) */
        c->busy_start_ns = dpp_now_ns();
        c->busy_bytes = 0;
        c->busy_counts = 0;
        c->busy_rwnd_us = UINT64_MAX;
    }
    c->queued += w->bytes;
    if (c->max_queued && c->queued > c->max_queued && !c->out_paused) {
        c->out_paused = 1;
        dpp_conn_read_stop(c);
    }
    return 0;

fail:
    if (w)
        free(w->head);
    free(w);
    if (free_cb)
        free_cb(payload, arg);
    if (!c->closing)
        dpp_conn_close(c, rc);
    return rc;
}

int dpp_conn_send(dpp_conn_t *c, uint16_t type, const ProtobufCMessage *m)
{
    return dpp_conn_send_payload(c, type, m, NULL, 0, NULL, NULL);
}

int dpp_conn_send_error(dpp_conn_t *c, int code, const char *fmt, ...)
{
    char text[4096]; /* a refused spec's problems, one per line */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    Dpp__Error e = DPP__ERROR__INIT;
    e.code = code;
    e.message = text;
    return dpp_conn_send(c, DPP_MSG_ERROR, &e.base);
}

void dpp_conn_release_list(dpp_conn_t **list, int write)
{
    while (*list) {
        dpp_conn_t *c = *list;
        *list = c->held_next;
        c->held_next = NULL;
        dpp_conn_release(c, write);
    }
}
