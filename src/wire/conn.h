/* SPDX-License-Identifier: Apache-2.0 */
/* A framed TCP connection on a libuv loop. The read callback only appends to
 * a bounded buffer; whole frames are handed to the owner's frame callback.
 * Used by the master, the worker and the client library, so it never aborts:
 * allocation failures close the connection with -ENOMEM. */
#ifndef DPP_WIRE_CONN_H
#define DPP_WIRE_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "wire/frame.h"

typedef struct dpp_conn dpp_conn_t;

#define DPP_CONN_DRAIN_WINDOW_MS 100

/* A refused frame's rest read and dropped at most (a longer one: closed
 * at once), and for at most this long. */
#define DPP_CONN_LINGER_MAX_BYTES (64u << 20)
#define DPP_CONN_LINGER_MS 10000

/* Payloads smaller than this always go through the connection's buffer. */
#define DPP_CONN_SINK_MIN (256u * 1024)

/* A whole frame arrived: f points into the connection's buffer and msg is
 * its message, unpacked; both are valid only during the call (a frame whose
 * message does not decode never reaches the owner: the peer is told and the
 * connection closed). The callback may close the connection. */
typedef void (*dpp_conn_frame_cb)(dpp_conn_t *c, const dpp_frame_t *f, const ProtobufCMessage *msg);
/* The handle is closed; the owner may free the memory holding c. */
typedef void (*dpp_conn_close_cb)(dpp_conn_t *c);
/* Outcome of dpp_conn_connect(): 0 = connected and reading. */
typedef void (*dpp_conn_connect_cb)(dpp_conn_t *c, int status);
/* Releases a payload handed to dpp_conn_send_payload(). */
typedef void (*dpp_payload_free_cb)(void *payload, void *arg);

struct dpp_conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    uv_shutdown_t shutdown_req;
    dpp_frame_limits_t limits;
    uint8_t *rbuf;
    size_t rlen, rcap;
    size_t read_chunk; /* free space each read gets at least; 0: 64 KiB */
    size_t queued;     /* bytes handed to uv_write and not yet written */
    size_t max_queued; /* past this, stop reading and answering the peer until what
                          is queued drains to a quarter; 0: no bound (the owner
                          bounds what it sends, as credits do) */
    int out_paused;    /* reading stopped by max_queued */
    uint64_t dropped;  /* bytes queued and never written (the connection closed first) */
    /* How fast the link drains what is queued, measured only while writes
     * stay queued (the sender is ahead of the link): bytes written per
     * second over windows of at least DPP_CONN_DRAIN_WINDOW_MS, smoothed;
     * drain_at_ns is when it was last measured, 0 never. A link that keeps
     * up with what is sent never queues and so is never measured; nor is a
     * window in which the peer's receive window held writes back (a slow
     * reader, not a slow link: reader_bound_at_ns). */
    double drain_bps;
    uint64_t drain_at_ns;
    uint64_t busy_start_ns, busy_bytes, busy_rwnd_us;
    int busy_counts;             /* the busy period's first window is over */
    uint64_t reader_bound_at_ns; /* last window in which the peer's reading held writes back */
    /* While *hold is non-zero, frames wait in the connection (not written)
     * until dpp_conn_release(): the master holds what it says until the
     * journal records it depends on are durable (group commit), and what is
     * released together goes out in one write. NULL: no hold. A connection
     * whose first frame is held puts itself on *held_list (linked by
     * held_next), so that its owner releases the few that hold frames
     * without looking at every connection. */
    const int *hold;
    struct dpp_conn **held_list;
    struct dpp_conn *held_next;
    struct write_req *held_head, *held_tail;
    int held_close; /* closed while frames were held: 1 close, 2 finish, 3 linger, after release */
    int error;      /* why the connection closed; 0 when its owner closed it */
    int closing;
    int reading;
    /* After a frame refused for its size: the Error is sent and the write
     * side shut down, and the frame's rest (linger_left bytes) is read and
     * dropped before the close, so that the peer, still sending, reads the
     * Error instead of a reset (a close with unread bytes sends RST, and
     * the peer's kernel drops what it had not read yet). Ends with the
     * frame, the peer's close, dpp_conn_close() or (the listener's sweep)
     * DPP_CONN_LINGER_MS after linger_since_ms. */
    int lingering;
    uint64_t linger_left;
    int64_t linger_since_ms;
    /* Optional: a large payload received straight into the owner's memory
     * instead of through rbuf and a copy. Once a frame's header and message
     * are in and at least DPP_CONN_SINK_MIN bytes of its payload are not,
     * payload_sink(c, type, len) may return a buffer of at least len bytes
     * (NULL: the usual way). The frame then reaches on_frame with
     * f->payload == c->sink_buf; on_frame takes the buffer by setting
     * c->sink_buf to NULL, else payload_sink_free gets it after on_frame,
     * as it does when the connection closes mid-payload. */
    void *(*payload_sink)(dpp_conn_t *c, uint16_t type, size_t len);
    void (*payload_sink_free)(dpp_conn_t *c, void *buf);
    void *sink_buf;
    size_t sink_len, sink_have;
    int sink_declined; /* for the frame at the front of rbuf: asked once */
    int rcvlowat;      /* the socket's SO_RCVLOWAT as last set, 0: the default (1) */
    dpp_conn_frame_cb on_frame;
    dpp_conn_close_cb on_close;
    dpp_conn_connect_cb on_connect;
    void *data; /* the owner's */
    char peer[64];
};

/* Prepares c on loop. Returns 0 or a negative uv error; on 0 the owner must
 * eventually call dpp_conn_close(), and on_close runs exactly once. */
int dpp_conn_init(uv_loop_t *loop, dpp_conn_t *c, dpp_conn_frame_cb on_frame,
                  dpp_conn_close_cb on_close, void *data);

/* Accepts a pending connection of server into c (after dpp_conn_init) and
 * starts reading. On error the caller closes c. */
int dpp_conn_accept(uv_stream_t *server, dpp_conn_t *c);

/* Connects c (after dpp_conn_init) to addr. Returns 0 and later calls cb once
 * (status 0: reading has started), or an error and never calls cb. */
int dpp_conn_connect(dpp_conn_t *c, const struct sockaddr *addr, dpp_conn_connect_cb cb);

/* Queues one frame. Returns 0 or a negative error (the connection is then
 * closing). dpp_conn_send_payload() also sends `len` raw payload bytes after
 * the message without copying them; free_cb(payload, arg) runs once the
 * bytes are written or dropped, also when this call fails. */
int dpp_conn_send(dpp_conn_t *c, uint16_t type, const ProtobufCMessage *m);
int dpp_conn_send_payload(dpp_conn_t *c, uint16_t type, const ProtobufCMessage *m, void *payload,
                          uint32_t len, dpp_payload_free_cb free_cb, void *arg);

/* Sends an Error message (code, formatted text). */
int dpp_conn_send_error(dpp_conn_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the frames held while *c->hold was set, in order and in one write
 * (write = 0: drops them, e.g. when what they depend on could not be made
 * durable); then carries out a close or finish asked for meanwhile. */
void dpp_conn_release(dpp_conn_t *c, int write);

/* Releases every connection on *list (see held_list) and empties it. */
void dpp_conn_release_list(dpp_conn_t **list, int write);

/* Closes c once (later calls do nothing, but end a linger at once); error
 * is kept in c->error. Frames still queued are dropped; frames held
 * (c->hold) are written first, at dpp_conn_release(). */
void dpp_conn_close(dpp_conn_t *c, int error);

/* Closes c after every queued frame is written (TCP shutdown, then close),
 * for goodbyes such as a client's last acknowledgements. */
void dpp_conn_finish(dpp_conn_t *c);

/* Back-pressure on the inbound side: stop or resume reading. */
void dpp_conn_read_stop(dpp_conn_t *c);
int dpp_conn_read_start(dpp_conn_t *c);

#endif
