// SPDX-License-Identifier: Apache-2.0
// Back-pressure of the framed connection on one libuv loop over 127.0.0.1:
// a receiver that stops reading until the sender's kernel buffers are full
// loses nothing, frames over the receiver's limits close it with
// DPP_EFRAMESIZE, and a payload's free callback runs exactly once however
// its write ends.
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "wire/conn.h"
#include "wire/frame.h"

#define WATCHDOG_MS 3000
#define PAYLOAD_LEN (16u * 1024)
#define MAX_FRAMES 4096 /* far more than loopback buffers of 64 KiB hold */
#define BUF_SIZE (64 * 1024)

static uint8_t payload[PAYLOAD_LEN];

/* Over DPP_CONN_SINK_MIN, and not a round size. */
#define BIG_LEN (DPP_CONN_SINK_MIN * 3 + 4093)
static uint8_t big[BIG_LEN];

/* A sender connected to a receiver accepted from a listening socket. */
typedef struct pair {
    uv_loop_t loop;
    uv_tcp_t server;
    uv_timer_t watchdog;
    int expired;
    struct sockaddr_storage addr;
    dpp_frame_limits_t rx_limits; /* applied to the receiver on accept */
    int rx_pause;                 /* dpp_conn_read_stop() on accept */
    dpp_conn_t rx, tx;
    int rx_inited, tx_connected;
    /* receiver */
    int rx_frames;
    uint64_t rx_next_seq;
    int rx_disorder; /* frames out of order or with damaged payload */
    int rx_closed, rx_close_error;
    /* sender */
    int tx_errors, tx_error_code;
    char tx_error_text[256];
    int tx_closed, tx_close_error;
    int frees[MAX_FRAMES]; /* free callbacks by frame */
    int frees_total;
    /* payload sink (test_payload_sink) */
    int sink;                      /* the receiver gets sink_take / sink_give on accept */
    int sink_asked, sink_given;    /* calls, buffers handed out */
    int sink_taken, sink_returned; /* taken by on_frame, given back to sink_free */
    int sunk_frames;               /* frames whose payload came in a sink buffer */
    int big_frames;                /* frames with the big payload, checked */
} pair_t;

static void on_watchdog(uv_timer_t *t)
{
    pair_t *p = t->data;
    p->expired = 1;
}

/* Runs the loop until cond holds; fails the test after WATCHDOG_MS. */
#define RUN_UNTIL(p, cond)                                                                         \
    do {                                                                                           \
        (p)->expired = 0;                                                                          \
        uv_timer_start(&(p)->watchdog, on_watchdog, WATCHDOG_MS, 0);                               \
        while (!(cond) && !(p)->expired)                                                           \
            uv_run(&(p)->loop, UV_RUN_ONCE);                                                       \
        uv_timer_stop(&(p)->watchdog);                                                             \
        if (!(cond))                                                                               \
            fail_msg("timed out waiting for %s", #cond);                                           \
    } while (0)

static void on_rx_frame(dpp_conn_t *c, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    pair_t *p = c->data;
    p->rx_frames++;
    if (f->type != DPP_MSG_HEARTBEAT)
        return;
    const Dpp__Heartbeat *hb = (const Dpp__Heartbeat *)msg;
    int is_big = f->payload_len == BIG_LEN;
    if (hb->worker_id != p->rx_next_seq || (!is_big && f->payload_len != PAYLOAD_LEN) ||
        memcmp(f->payload, is_big ? big : payload, f->payload_len) != 0)
        p->rx_disorder++;
    p->rx_next_seq = hb->worker_id + 1;
    p->big_frames += is_big;
    if (c->sink_buf != NULL && f->payload == c->sink_buf) {
        p->sunk_frames++;
        if (hb->worker_id % 4 == 0) { /* taken: freed here; the others go back to sink_free */
            free(c->sink_buf);
            c->sink_buf = NULL;
            p->sink_taken++;
        }
    }
}

/* Every third big payload is declined (read through rbuf instead). */
static void *sink_give(dpp_conn_t *c, uint16_t type, size_t len)
{
    pair_t *p = c->data;
    assert_int_equal(type, DPP_MSG_HEARTBEAT);
    assert_true(len >= DPP_CONN_SINK_MIN);
    if (p->sink_asked++ % 3 == 2)
        return NULL;
    p->sink_given++;
    void *buf = malloc(len);
    assert_non_null(buf);
    return buf;
}

static void sink_free(dpp_conn_t *c, void *buf)
{
    pair_t *p = c->data;
    p->sink_returned++;
    free(buf);
}

static void on_rx_close(dpp_conn_t *c)
{
    pair_t *p = c->data;
    p->rx_closed = 1;
    p->rx_close_error = c->error;
}

static void on_tx_frame(dpp_conn_t *c, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    pair_t *p = c->data;
    assert_int_equal(f->type, DPP_MSG_ERROR);
    const Dpp__Error *e = (const Dpp__Error *)msg;
    p->tx_errors++;
    p->tx_error_code = e->code;
    snprintf(p->tx_error_text, sizeof p->tx_error_text, "%s", e->message);
}

static void on_tx_close(dpp_conn_t *c)
{
    pair_t *p = c->data;
    p->tx_closed = 1;
    p->tx_close_error = c->error;
}

static void on_tx_connect(dpp_conn_t *c, int status)
{
    pair_t *p = c->data;
    assert_int_equal(status, 0);
    int size = BUF_SIZE;
    assert_int_equal(uv_send_buffer_size((uv_handle_t *)&c->tcp, &size), 0);
    p->tx_connected = 1;
}

static void on_connection(uv_stream_t *server, int status)
{
    pair_t *p = server->data;
    assert_int_equal(status, 0);
    assert_false(p->rx_inited);
    assert_int_equal(dpp_conn_init(&p->loop, &p->rx, on_rx_frame, on_rx_close, p), 0);
    p->rx_inited = 1;
    p->rx.limits = p->rx_limits;
    if (p->sink) {
        p->rx.payload_sink = sink_give;
        p->rx.payload_sink_free = sink_free;
    }
    assert_int_equal(dpp_conn_accept(server, &p->rx), 0);
    if (p->rx_pause)
        dpp_conn_read_stop(&p->rx);
}

static void on_payload_free(void *data, void *arg)
{
    int *slot = arg;
    assert_ptr_equal(data, payload);
    (*slot)++;
}

static pair_t *pair_start_sink(int rx_pause, uint32_t max_msg, uint32_t max_payload, int sink)
{
    pair_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->sink = sink;
    for (size_t i = 0; i < PAYLOAD_LEN; i++)
        payload[i] = (uint8_t)(i * 7 + 3);
    for (size_t i = 0; i < BIG_LEN; i++)
        big[i] = (uint8_t)(i * 13 + (i >> 11));
    assert_int_equal(uv_loop_init(&p->loop), 0);
    assert_int_equal(uv_timer_init(&p->loop, &p->watchdog), 0);
    p->watchdog.data = p;
    p->rx_pause = rx_pause;
    dpp_frame_limits_default(&p->rx_limits);
    if (max_msg)
        p->rx_limits.max_msg = max_msg;
    if (max_payload)
        p->rx_limits.max_payload = max_payload;

    assert_int_equal(uv_tcp_init(&p->loop, &p->server), 0);
    p->server.data = p;
    struct sockaddr_in sin;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &sin), 0);
    assert_int_equal(uv_tcp_bind(&p->server, (struct sockaddr *)&sin, 0), 0);
    int size = BUF_SIZE; /* inherited by the accepted socket */
    assert_int_equal(uv_recv_buffer_size((uv_handle_t *)&p->server, &size), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&p->server, 8, on_connection), 0);
    int len = sizeof p->addr;
    assert_int_equal(uv_tcp_getsockname(&p->server, (struct sockaddr *)&p->addr, &len), 0);

    assert_int_equal(dpp_conn_init(&p->loop, &p->tx, on_tx_frame, on_tx_close, p), 0);
    assert_int_equal(dpp_conn_connect(&p->tx, (struct sockaddr *)&p->addr, on_tx_connect), 0);
    RUN_UNTIL(p, p->tx_connected && p->rx_inited);
    return p;
}

static pair_t *pair_start(int rx_pause, uint32_t max_msg, uint32_t max_payload)
{
    return pair_start_sink(rx_pause, max_msg, max_payload, 0);
}

/* Closes every handle; the loop must then have none left. */
static void pair_finish(pair_t *p)
{
    dpp_conn_close(&p->tx, 0);
    if (p->rx_inited)
        dpp_conn_close(&p->rx, 0);
    uv_close((uv_handle_t *)&p->server, NULL);
    uv_close((uv_handle_t *)&p->watchdog, NULL);
    assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
    assert_true(p->tx_closed);
    assert_true(!p->rx_inited || p->rx_closed);
    assert_int_equal(uv_loop_close(&p->loop), 0);
    free(p);
}

/* Frame seq: a Heartbeat naming it, then the shared payload. */
static int send_seq(pair_t *p, int seq)
{
    Dpp__Heartbeat hb = DPP__HEARTBEAT__INIT;
    hb.worker_id = (uint64_t)seq;
    return dpp_conn_send_payload(&p->tx, DPP_MSG_HEARTBEAT, &hb.base, payload, PAYLOAD_LEN,
                                 on_payload_free, &p->frees[seq]);
}

static size_t seq_bytes(int seq)
{
    Dpp__Heartbeat hb = DPP__HEARTBEAT__INIT;
    hb.worker_id = (uint64_t)seq;
    return DPP_FRAME_HEADER_SIZE + protobuf_c_message_get_packed_size(&hb.base) + PAYLOAD_LEN;
}

/* Sends frames first, first + 1, ... while the receiver does not read,
 * until the kernel takes no more: bytes stay queued in libuv across loop
 * turns. Returns the next frame's number. */
static int fill(pair_t *p, int first)
{
    int sent = first;
    for (;;) {
        assert_true(sent < MAX_FRAMES - 16);
        assert_int_equal(send_seq(p, sent), 0);
        sent++;
        uv_run(&p->loop, UV_RUN_NOWAIT);
        if (p->tx.queued > 0 && uv_stream_get_write_queue_size((uv_stream_t *)&p->tx.tcp) > 0)
            break;
    }
    /* it stays so: nothing more is written while the receiver sleeps */
    size_t queued = p->tx.queued;
    for (int i = 0; i < 20; i++)
        uv_run(&p->loop, UV_RUN_NOWAIT);
    assert_int_equal(p->tx.queued, queued);
    assert_true(queued > 0);
    return sent;
}

static int frees_sum(const pair_t *p, int n, int *max_each)
{
    int sum = 0;
    *max_each = 0;
    for (int i = 0; i < n; i++) {
        sum += p->frees[i];
        if (p->frees[i] > *max_each)
            *max_each = p->frees[i];
    }
    return sum;
}

/* ---- back-pressure ---- */

static void test_read_stop_start(void **state)
{
    (void)state;
    pair_t *p = pair_start(1, 0, 0);
    int sent = fill(p, 0);
    assert_true(sent >= 2);
    assert_int_equal(p->rx_frames, 0); /* the receiver read nothing */
    assert_false(p->rx.reading);

    /* more frames only queue, each counted in full */
    size_t queued = p->tx.queued;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(send_seq(p, sent), 0);
        queued += seq_bytes(sent);
        sent++;
        assert_int_equal(p->tx.queued, queued);
    }
    uv_run(&p->loop, UV_RUN_NOWAIT);
    assert_int_equal(p->rx_frames, 0);
    int max_each;
    int freed = frees_sum(p, sent, &max_each);
    assert_true(freed < sent); /* queued payloads are not released yet */
    assert_true(max_each <= 1);

    assert_int_equal(dpp_conn_read_start(&p->rx), 0);
    assert_true(p->rx.reading);
    RUN_UNTIL(p, p->rx_frames == sent && p->tx.queued == 0);
    assert_int_equal(p->rx_next_seq, (uint64_t)sent);
    assert_int_equal(p->rx_disorder, 0);
    assert_int_equal(frees_sum(p, sent, &max_each), sent);
    assert_int_equal(max_each, 1);
    assert_false(p->rx_closed);
    assert_false(p->tx_closed);
    assert_int_equal(p->tx_errors, 0);

    /* stop and start again mid-stream */
    dpp_conn_read_stop(&p->rx);
    assert_false(p->rx.reading);
    int first = sent;
    sent = fill(p, first);
    assert_int_equal(p->rx_frames, first);
    assert_int_equal(dpp_conn_read_start(&p->rx), 0);
    RUN_UNTIL(p, p->rx_frames == sent && p->tx.queued == 0);
    assert_int_equal(p->rx_next_seq, (uint64_t)sent);
    assert_int_equal(p->rx_disorder, 0);
    assert_int_equal(frees_sum(p, sent, &max_each), sent);
    assert_int_equal(max_each, 1);
    pair_finish(p);
}

/* ---- limits ---- */

/* A spec text of n "s"s (malloc'd). */
static char *spec_of(size_t n)
{
    char *spec = malloc(n + 1);
    assert_non_null(spec);
    memset(spec, 's', n);
    spec[n] = '\0';
    return spec;
}

static int send_submit(pair_t *p, size_t spec_len, uint32_t payload_len)
{
    char *spec = spec_of(spec_len);
    Dpp__SubmitRequest req = DPP__SUBMIT_REQUEST__INIT;
    req.spec_json = spec;
    int rc = dpp_conn_send_payload(&p->tx, DPP_MSG_SUBMIT, &req.base, payload_len ? payload : NULL,
                                   payload_len, NULL, NULL);
    free(spec);
    return rc;
}

/* What follows "this end takes in one" in a refusal for size. */
#define ONCE_HANDSHAKE " (a daemon's --max-frame-mb, once the handshake is done)"

/* The receiver refused the frame with `says`, and the sender read it (not
 * a reset), then the receiver's close. */
static void expect_framesize(pair_t *p, int frames_before, const char *says)
{
    RUN_UNTIL(p, p->rx_closed && p->tx_closed);
    assert_int_equal(p->rx_close_error, DPP_EFRAMESIZE);
    assert_int_equal(p->rx_frames, frames_before);
    assert_int_equal(p->tx_errors, 1);
    assert_int_equal(p->tx_error_code, DPP_EFRAMESIZE);
    assert_string_equal(p->tx_error_text, says);
    assert_int_equal(p->tx_close_error, DPP_ECLOSED);
}

static void test_oversized_message(void **state)
{
    (void)state;
    pair_t *p = pair_start(0, 1024, 0);
    /* tag, two length bytes and 1021 characters: exactly the limit */
    Dpp__SubmitRequest probe = DPP__SUBMIT_REQUEST__INIT;
    char spec[1022];
    memset(spec, 's', 1021);
    spec[1021] = '\0';
    probe.spec_json = spec;
    assert_int_equal(protobuf_c_message_get_packed_size(&probe.base), 1024);
    assert_int_equal(send_submit(p, 1021, 0), 0);
    RUN_UNTIL(p, p->rx_frames == 1);
    assert_false(p->rx_closed);
    /* one byte more is refused */
    assert_int_equal(send_submit(p, 1022, 0), 0);
    expect_framesize(p, 1, "SUBMIT message of 1025 bytes: more than the 1024 bytes "
                           "this end takes in one" ONCE_HANDSHAKE);
    pair_finish(p);
}

/* A refused frame far larger than the socket buffers, sent as a blocking
 * client sends a request (dpp_sync_call: the whole frame, then the reply):
 * the receiver reads and drops the frame's rest, so the sender's writes
 * complete and it reads the Error. (Closing with the frame unread resets
 * the connection: the sender's write fails with ECONNRESET or EPIPE, and
 * its kernel drops the Error unread.) */
static void test_oversized_answered(void **state)
{
    (void)state;
    pair_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    assert_int_equal(uv_loop_init(&p->loop), 0);
    assert_int_equal(uv_timer_init(&p->loop, &p->watchdog), 0);
    p->watchdog.data = p;
    dpp_frame_limits_default(&p->rx_limits);
    p->rx_limits.max_msg = 1024;
    assert_int_equal(uv_tcp_init(&p->loop, &p->server), 0);
    p->server.data = p;
    struct sockaddr_in sin;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &sin), 0);
    assert_int_equal(uv_tcp_bind(&p->server, (struct sockaddr *)&sin, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&p->server, 8, on_connection), 0);
    int len = sizeof p->addr;
    assert_int_equal(uv_tcp_getsockname(&p->server, (struct sockaddr *)&p->addr, &len), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    int rc = connect(fd, (struct sockaddr *)&p->addr, sizeof(struct sockaddr_in));
    assert_true(rc == 0 || errno == EINPROGRESS);
    RUN_UNTIL(p, p->rx_inited);

    /* a SUBMIT of 8 MiB, written whole before anything is read */
    char *spec = spec_of(8u << 20);
    Dpp__SubmitRequest req = DPP__SUBMIT_REQUEST__INIT;
    req.spec_json = spec;
    size_t flen;
    uint8_t *frame = dpp_frame_pack(DPP_MSG_SUBMIT, &req.base, 0, &flen);
    assert_non_null(frame);
    int write_err = 0;
    for (size_t at = 0; at < flen && !write_err && !p->expired;) {
        ssize_t n = send(fd, frame + at, flen - at, MSG_NOSIGNAL);
        if (n > 0)
            at += (size_t)n;
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            uv_run(&p->loop, UV_RUN_NOWAIT); /* the receiver's turn */
        else
            write_err = errno;
    }
    if (write_err)
        fail_msg("the sender's write failed (%s): the receiver reset the connection",
                 strerror(write_err));
    /* the reply */
    uint8_t reply[4096];
    size_t have = 0;
    dpp_frame_t f;
    size_t rlen;
    p->expired = 0;
    uv_timer_start(&p->watchdog, on_watchdog, WATCHDOG_MS, 0);
    for (;;) {
        if (have > 0 && dpp_frame_parse(reply, have, &p->rx_limits, &f, &rlen) == 0)
            break;
        ssize_t n = recv(fd, reply + have, sizeof reply - have, 0);
        if (n > 0)
            have += (size_t)n;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !p->expired)
            uv_run(&p->loop, UV_RUN_ONCE);
        else
            fail_msg("no Error before the connection ended (%s)", n == 0 ? "EOF" : strerror(errno));
    }
    uv_timer_stop(&p->watchdog);
    assert_int_equal(f.type, DPP_MSG_ERROR);
    Dpp__Error *e = (Dpp__Error *)dpp_frame_unpack(&f);
    assert_non_null(e);
    assert_int_equal(e->code, DPP_EFRAMESIZE);
    assert_string_equal(e->message, "SUBMIT message of 8388613 bytes: more than the 1024 bytes "
                                    "this end takes in one" ONCE_HANDSHAKE);
    protobuf_c_message_free_unpacked(&e->base, NULL);
    close(fd);
    RUN_UNTIL(p, p->rx_closed);
    assert_int_equal(p->rx_close_error, DPP_EFRAMESIZE);
    assert_int_equal(p->rx_frames, 0);
    free(frame);
    free(spec);
    uv_close((uv_handle_t *)&p->server, NULL);
    uv_close((uv_handle_t *)&p->watchdog, NULL);
    assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&p->loop), 0);
    free(p);
}

static void test_oversized_payload(void **state)
{
    (void)state;
    pair_t *p = pair_start(0, 0, 4096);
    assert_int_equal(send_submit(p, 10, 4096), 0);
    RUN_UNTIL(p, p->rx_frames == 1);
    assert_int_equal(send_submit(p, 10, 4097), 0);
    expect_framesize(p, 1, "SUBMIT payload of 4097 bytes: more than the 4096 bytes "
                           "this end takes in one" ONCE_HANDSHAKE);
    pair_finish(p);
}

/* The header alone decides: the receiver does not wait for (or buffer) a
 * body it will refuse. */
static void test_oversized_header_only(void **state)
{
    (void)state;
    pair_t *p = pair_start(0, 1024, 0);
    uint8_t h[DPP_FRAME_HEADER_SIZE];
    dpp_frame_header_encode(h, DPP_MSG_SUBMIT, 64u << 20, 0);
    uv_buf_t b = uv_buf_init((char *)h, sizeof h);
    assert_int_equal(uv_try_write((uv_stream_t *)&p->tx.tcp, &b, 1), (int)sizeof h);
    expect_framesize(p, 0, "SUBMIT message of 67108864 bytes: more than the 1024 bytes "
                           "this end takes in one" ONCE_HANDSHAKE);
    pair_finish(p);
}

/* ---- the payload's free callback ---- */

static void test_free_on_close_before_write(void **state)
{
    (void)state;
    /* the write may have reached the kernel, its callback has not run */
    pair_t *p = pair_start(1, 0, 0);
    assert_int_equal(send_seq(p, 0), 0);
    assert_int_equal(p->frees[0], 0);
    dpp_conn_close(&p->tx, 0);
    assert_int_equal(p->frees[0], 0);
    RUN_UNTIL(p, p->tx_closed);
    assert_int_equal(p->frees[0], 1);
    pair_finish(p);
}

static void test_free_on_close_while_queued(void **state)
{
    (void)state;
    /* the kernel is full: every later write is still in libuv's queue */
    pair_t *p = pair_start(1, 0, 0);
    int sent = fill(p, 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(send_seq(p, sent++), 0);
    int max_each;
    assert_true(frees_sum(p, sent, &max_each) < sent);
    dpp_conn_close(&p->tx, 0);
    RUN_UNTIL(p, p->tx_closed);
    assert_int_equal(frees_sum(p, sent, &max_each), sent);
    assert_int_equal(max_each, 1);
    assert_int_equal(p->tx_close_error, 0);

    /* on a closing connection the send fails and frees at once */
    pair_t *q = pair_start(0, 0, 0);
    dpp_conn_close(&q->tx, 0);
    assert_int_equal(send_seq(q, 0), DPP_ECLOSED);
    assert_int_equal(q->frees[0], 1);
    RUN_UNTIL(q, q->tx_closed);
    assert_int_equal(q->frees[0], 1);
    pair_finish(q);
    pair_finish(p);
}

/* The peer goes away with writes pending: they fail, each frees once, and
 * the sender closes with the write's error. */
static void test_free_on_peer_reset(void **state)
{
    (void)state;
    pair_t *p = pair_start(1, 0, 0);
    int sent = fill(p, 0);
    dpp_conn_close(&p->rx, 0); /* unread data: the kernel answers with RST */
    RUN_UNTIL(p, p->tx_closed);
    int max_each;
    assert_int_equal(frees_sum(p, sent, &max_each), sent);
    assert_int_equal(max_each, 1);
    assert_true(p->tx_close_error < 0);
    assert_int_not_equal(p->tx_close_error, DPP_EFRAMESIZE);
    pair_finish(p);
}

/* Frame seq with the big payload. */
static int send_big(pair_t *p, int seq)
{
    Dpp__Heartbeat hb = DPP__HEARTBEAT__INIT;
    hb.worker_id = (uint64_t)seq;
    return dpp_conn_send_payload(&p->tx, DPP_MSG_HEARTBEAT, &hb.base, big, BIG_LEN, NULL, NULL);
}

/* ---- payloads received in place ---- */

/* Big payloads (some received in a sink buffer, some declined) between
 * small ones: every frame arrives in order with its bytes, and every sink
 * buffer is either taken by on_frame or given back exactly once. */
static void test_payload_sink(void **state)
{
    (void)state;
    pair_t *p = pair_start_sink(0, 0, 0, 1);
    enum { N = 24 };
    for (int i = 0; i < N; i++)
        assert_int_equal(i % 3 == 1 ? send_seq(p, i) : send_big(p, i), 0);
    RUN_UNTIL(p, p->rx_frames == N);
    assert_int_equal(p->rx_disorder, 0);
    assert_int_equal(p->big_frames, N - N / 3);
    assert_int_equal(p->sink_asked, N - N / 3); /* once per big frame, small ones never */
    assert_int_equal(p->sunk_frames, p->sink_given);
    assert_true(p->sink_given > 0 && p->sink_given < p->sink_asked);
    assert_true(p->sink_taken > 0);
    assert_int_equal(p->sink_taken + p->sink_returned, p->sink_given);
    assert_null(p->rx.sink_buf);
    pair_finish(p);
}

/* The receiver closes while a payload is coming into a sink buffer: the
 * buffer goes back to sink_free once. */
static void test_payload_sink_close(void **state)
{
    (void)state;
    pair_t *p = pair_start_sink(0, 0, 0, 1);
    assert_int_equal(send_big(p, 0), 0);
    RUN_UNTIL(p, p->rx.sink_buf != NULL && p->rx.sink_have < p->rx.sink_len);
    dpp_conn_close(&p->rx, 0);
    RUN_UNTIL(p, p->rx_closed);
    assert_int_equal(p->sink_given, 1);
    assert_int_equal(p->sink_returned, 1);
    assert_int_equal(p->rx_frames, 0);
    pair_finish(p);
}

static int rcvlowat(dpp_conn_t *c)
{
    uv_os_fd_t fd;
    int v = -1;
    socklen_t len = sizeof v;
    assert_int_equal(uv_fileno((uv_handle_t *)&c->tcp, &fd), 0);
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &len), 0);
    return v;
}

/* A big payload that trickles in, in pieces with pauses between them, each
 * smaller than what the receiver asks the kernel to gather before waking it
 * (SO_RCVLOWAT while a payload streams into a sink): the frame still
 * arrives whole, the low-water mark is above 1 while the payload comes and
 * back at 1 once it is in, so that a small frame after it wakes the reader. */
static void test_payload_sink_trickle(void **state)
{
    (void)state;
    pair_t *p = pair_start_sink(0, 0, 0, 1);
    Dpp__Heartbeat hb = DPP__HEARTBEAT__INIT;
    size_t head;
    uint8_t *h = dpp_frame_pack(DPP_MSG_HEARTBEAT, &hb.base, BIG_LEN, &head);
    assert_non_null(h);
    size_t total = head + BIG_LEN, sent = 0;
    uint8_t *all = malloc(total);
    assert_non_null(all);
    memcpy(all, h, head);
    memcpy(all + head, big, BIG_LEN);
    free(h);
    int streaming_lowat = 0;
    while (sent < total) {
        /* the header and 20 KiB first, then 24 KiB at a time */
        size_t piece = sent == 0 ? head + 20 * 1024 : 24 * 1024;
        if (piece > total - sent)
            piece = total - sent;
        uv_buf_t b = uv_buf_init((char *)all + sent, (unsigned)piece);
        int n = uv_try_write((uv_stream_t *)&p->tx.tcp, &b, 1);
        assert_true(n > 0 || n == UV_EAGAIN);
        if (n > 0)
            sent += (size_t)n;
        for (int i = 0; i < 5; i++) { /* a pause: the receiver's loop turns */
            uv_run(&p->loop, UV_RUN_NOWAIT);
            uv_sleep(1);
        }
        if (p->rx.sink_buf != NULL && p->rx.sink_have < p->rx.sink_len && p->rx.sink_have > 0) {
            int v = rcvlowat(&p->rx);
            if (v > streaming_lowat)
                streaming_lowat = v;
        }
    }
    RUN_UNTIL(p, p->rx_frames == 1);
    assert_int_equal(p->rx_disorder, 0);
    assert_int_equal(p->big_frames, 1);
    assert_int_equal(p->sunk_frames, 1);
    assert_true(streaming_lowat > 1);
    assert_int_equal(rcvlowat(&p->rx), 1);
    /* and a small frame right after is read at once */
    assert_int_equal(send_seq(p, 1), 0);
    RUN_UNTIL(p, p->rx_frames == 2);
    assert_int_equal(p->rx_disorder, 0);
    free(all);
    pair_finish(p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_stop_start),
        cmocka_unit_test(test_oversized_message),
        cmocka_unit_test(test_oversized_answered),
        cmocka_unit_test(test_oversized_payload),
        cmocka_unit_test(test_oversized_header_only),
        cmocka_unit_test(test_free_on_close_before_write),
        cmocka_unit_test(test_free_on_close_while_queued),
        cmocka_unit_test(test_free_on_peer_reset),
        cmocka_unit_test(test_payload_sink),
        cmocka_unit_test(test_payload_sink_close),
        cmocka_unit_test(test_payload_sink_trickle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
