// SPDX-License-Identifier: Apache-2.0
// The worker's loop thread: master link, leases, and block streams to clients.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "base/alloc.h"
#include "wire/handshake.h"
#include "wire/conn.h"
#include "daemon/http.h"
#include "daemon/listener.h"
#include "daemon/metrics.h"
#include "format/format.h"
#include "base/log.h"
#include "base/reject.h"
#include "wire/net.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "cache_store.h"
#include "pipeline.h"
#include "reader.h"
#include "storage/s3.h"
#include "worker.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* Index tasks a worker keeps queued per pipeline thread (request_leases()). */
#define INDEX_TASKS_PER_THREAD 64

typedef enum mlink_state {
    MLINK_DOWN,
    MLINK_CONNECTING,
    MLINK_HELLO,
    MLINK_REGISTERED
} mlink_state_t;

typedef struct stream stream_t;

/* A trainer's data connection (accepted by the listener, which owns it). */
typedef struct client {
    dpp_peer_t peer; /* first: the listener allocates and frees the struct */
    stream_t *stream;
    uint32_t credits;
    int loopback;            /* the peer is this host */
    struct client *sub_next; /* subscribers of stream */
    /* the plan generation its client reads (Subscribe.generation), when it
     * said one */
    int gen_known;
    uint32_t generation;
} client_t;

/* Blocks of one (session, rank) waiting for its client. An elastic resume
 * gives the rank to a client of the new world while the old world's may
 * still be subscribed: blocks go only to a client of their plan generation,
 * and once a block or a client of a newer generation came (gen_known,
 * generation), those of older ones are dropped (stream_generation()). */
struct stream {
    char session[24];
    uint32_t rank;
    int gen_known;
    uint32_t generation;
    int compress;  /* compression "auto"'s decision for its client (auto_compress()); -1 none */
    int auto_mode; /* its session's spec says "auto" (known from its first block) */
    dpp_out_block_t *head, **tail;
    size_t nblocks;
    client_t *subs;
    stream_t *next;
};

typedef struct mlink {
    dpp_conn_t conn;
    dpp_worker_t *w;
    dpp_auth_state_t auth;
} mlink_t;

/* Counters since the worker started, for /metrics (loop thread). */
typedef struct worker_counters {
    uint64_t splits_done, splits_failed, index_done;
    uint64_t records_read, rows_produced, rows_filtered, bytes_read;
    uint64_t rows_emitted, bytes_emitted, blocks_emitted, blocks_dropped;
    dpp_rejects_t rejects;
    dpp_stage_times_t times;
} worker_counters_t;

struct dpp_worker {
    uv_loop_t *loop;
    dpp_worker_config_t cfg;
    struct sockaddr_storage master_ss;
    char master_addr[256];
    dpp_listener_t lst; /* trainers' data connections */
    char data_addr[64];
    uv_timer_t timer;
    uv_async_t async;
    dpp_pipeline_t pipe;
    int pipe_started;
    mlink_t *mlink;
    mlink_state_t mstate;
    /* While the pipeline's results are reported, frames to the master are
     * held (conn.hold) and go out in one write at the end: a burst of small
     * index tasks is one write, not one per INDEX_DONE. */
    int cork;
    dpp_conn_t *corked;
    uint64_t worker_id;
    unsigned heartbeat_ms;
    int lease_requested;
    unsigned outstanding;       /* leases given to the pipeline and not finished */
    unsigned outstanding_index; /* of which index tasks */
    /* The split outputs this worker's cache holds, as the master last
     * heard of them (sorted low key halves), and the store's version then;
     * 0 with keys_reset set: the master knows nothing yet */
    dpp_cache_store_t *cache;
    uint64_t *keys_sent;
    size_t nkeys_sent;
    uint64_t keys_version;
    int keys_reset;
    unsigned backoff_ms;
    int64_t next_connect_ms, next_heartbeat_ms;
    int64_t master_heard_ms; /* last frame from the master */
    unsigned fence_ms;       /* past this silence, leases may be someone else's */
    int draining;
    int64_t drain_deadline_ms;
    stream_t *streams;
    int stopping;
    worker_counters_t n;
    /* What compression "auto" weighs (auto_compress()), smoothed over
     * splits: CPU per raw byte to make blocks and to compress them, and
     * raw bytes per byte sent when compressed; 0 until measured. */
    double make_ns_per_byte, zstd_ns_per_byte, zstd_ratio;
    uint32_t auto_on;      /* streams compressing now, for /metrics */
    ZSTD_CCtx *zctx;       /* late_compress(), made when first needed */
    struct dpp_http *http; /* --http, NULL when not serving */
    dpp_auth_t auth;       /* copied from the config; the token is the caller's */
};

/* ---- streams and clients ------------------------------------------------ */

static stream_t *find_stream(dpp_worker_t *w, const char *session, uint32_t rank, int create)
{
    for (stream_t *s = w->streams; s; s = s->next)
        if (s->rank == rank && strcmp(s->session, session) == 0)
            return s;
    if (!create)
        return NULL;
    stream_t *s = dpp_xcalloc(1, sizeof *s);
    snprintf(s->session, sizeof s->session, "%s", session);
    s->rank = rank;
    s->compress = -1; /* not yet said to the pipeline */
    s->tail = &s->head;
    s->next = w->streams;
    w->streams = s;
    return s;
}

static void free_stream_if_idle(dpp_worker_t *w, stream_t *s)
{
    if (s->head || s->subs)
        return;
    for (stream_t **pp = &w->streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            free(s);
            return;
        }
    }
}

/* Whether client c may be sent s's blocks: it reads their generation (or
 * did not say which it reads). */
static int takes_generation(const stream_t *s, const client_t *c)
{
    return !c->gen_known || !s->gen_known || c->generation == s->generation;
}

/* Frees block b that will not be sent, and counts it. */
static void drop_block(dpp_worker_t *w, dpp_out_block_t *b)
{
    dpp_pipeline_release(&w->pipe, b->len);
    dpp_out_block_free(b);
    w->n.blocks_dropped++;
}

/* Drops the blocks queued on s; returns how many. */
static size_t drop_queued(dpp_worker_t *w, stream_t *s)
{
    size_t n = 0;
    while (s->head) {
        dpp_out_block_t *b = s->head;
        s->head = b->next;
        drop_block(w, b);
        n++;
    }
    s->tail = &s->head;
    s->nblocks = 0;
    return n;
}

/* A block or a client of plan generation gen came to s: a newer one than
 * s had makes the queued blocks (of the plan before) worthless. Returns
 * whether gen is older than s's: such a block is not to be queued, and
 * such a client is sent nothing. */
static int stream_generation(dpp_worker_t *w, stream_t *s, uint32_t gen)
{
    if (s->gen_known && gen <= s->generation)
        return gen < s->generation;
    /* (a stream's blocks always came with a generation) */
    size_t dropped = drop_queued(w, s), old_subs = 0;
    for (const client_t *c = s->subs; c; c = c->sub_next)
        old_subs += c->gen_known && c->generation != gen;
    if (s->gen_known && (dropped || old_subs))
        DPP_INFO("stream_generation session=%s rank=%u generation=%u old_generation=%u "
                 "old_clients=%zu blocks_dropped=%zu reason=\"the session was resumed at "
                 "another world size: its new plan's blocks go to the new world's client only\"",
                 s->session, s->rank, gen, s->generation, old_subs, dropped);
    s->gen_known = 1;
    s->generation = gen;
    return 0;
}

static void on_block_written(void *payload, void *arg)
{
    (void)payload;
    dpp_out_block_t *b = arg;
    dpp_worker_t *w = b->owner;
    if (w->pipe_started) /* writes cancelled during stop finish after the threads */
        dpp_pipeline_release(&w->pipe, b->len);
    dpp_out_block_free(b);
}

/* Whether the worker may still act on its leases: it heard from the master
 * within half the master's lease timeout. A worker paused (SIGSTOP) or cut
 * off longer than that holds its blocks; when it then finds the master
 * connection gone, its leases are revoked and the blocks dropped, so a stale
 * lease never delivers (the master re-leases only after the full timeout). */
static int leases_fresh(const dpp_worker_t *w)
{
    return w->mstate == MLINK_REGISTERED && dpp_now_ms() - w->master_heard_ms <= w->fence_ms;
}

/* Drops every queued block (their leases were revoked). */
static void drop_streams(dpp_worker_t *w)
{
    size_t n = 0;
    for (stream_t *s = w->streams; s; s = s->next)
        n += drop_queued(w, s);
    if (n)
        DPP_WARN("blocks_dropped count=%zu reason=\"leases revoked\"", n);
}

/* A raw block of an "auto" stream that now compresses: made before the
 * worker measured its client's link behind, it is compressed here, on the
 * loop thread, just before it goes. The pipeline runs far ahead of a slow
 * link (up to --max-buffer-mb), so without this the blocks made before the
 * decision would all cross the slow link raw; the cost, a few ms of this
 * thread per block, is paid only while such a backlog drains. */
static void late_compress(dpp_worker_t *w, dpp_out_block_t *b)
{
    if (w->zctx == NULL && (w->zctx = ZSTD_createCCtx()) == NULL)
        return; /* sent raw: compression is an optimisation */
    size_t bound = ZSTD_compressBound(b->len);
    uint8_t *z = malloc(bound);
    if (z == NULL)
        return;
    size_t zn = ZSTD_compressCCtx(w->zctx, z, bound, b->data, b->len, b->zstd_level);
    if (ZSTD_isError(zn) || zn >= b->len) {
        free(z);
        return;
    }
    dpp_pipeline_release(&w->pipe, b->len - zn); /* the pipeline counts what is buffered */
    free(b->data);
    b->data = z;
    b->len = zn;
    b->codec = 1;
}

/* Sends queued blocks while a subscriber has credits. */
static void flush_stream(dpp_worker_t *w, stream_t *s)
{
    if (!leases_fresh(w))
        return; /* fenced: held until the master is heard from again */
    while (s->head) {
        client_t *c = s->subs;
        while (c && (c->credits == 0 || c->peer.conn.closing || !takes_generation(s, c)))
            c = c->sub_next;
        if (c == NULL)
            return;
        dpp_out_block_t *b = s->head;
        s->head = b->next;
        if (s->head == NULL)
            s->tail = &s->head;
        s->nblocks--;
        if (b->codec == 0 && b->auto_compression && s->compress == 1 && b->len >= 65536)
            late_compress(w, b);
        Dpp__BlockHeader h = DPP__BLOCK_HEADER__INIT;
        h.epoch = b->epoch;
        h.split_id = b->split;
        h.block_index = b->index;
        h.last = b->last;
        h.rows = b->rows;
        h.codec = b->codec;
        h.raw_size = b->raw_size;
        h.split_seq = b->seq;
        h.rank_splits = b->rank_splits;
        h.generation = b->plan_gen;
        h.source = b->source;
        c->credits--;
        w->n.blocks_emitted++;
        w->n.rows_emitted += b->rows;
        w->n.bytes_emitted += b->len;
        /* on_block_written runs exactly once, also if the send fails: then
         * the block is lost here and the split is re-leased by the master. */
        dpp_conn_send_payload(&c->peer.conn, DPP_MSG_BLOCK, &h.base, b->data, (uint32_t)b->len,
                              on_block_written, b);
    }
}

static void detach_client(client_t *c)
{
    stream_t *s = c->stream;
    if (s == NULL)
        return;
    for (client_t **pp = &s->subs; *pp; pp = &(*pp)->sub_next) {
        if (*pp == c) {
            *pp = c->sub_next;
            break;
        }
    }
    c->stream = NULL;
    free_stream_if_idle(c->peer.lst->cfg.data, s);
}

static void on_client_closed(dpp_peer_t *p)
{
    client_t *c = (client_t *)p;
    /* Blocks queued for it died with the connection (and those in the
     * kernel's buffers too): its client has the master lease them again. */
    if (c->stream && p->conn.dropped > 0 && !c->peer.lst->closed)
        DPP_WARN("client_lost peer=%s session=%s rank=%u bytes_dropped=%" PRIu64 " reason=\"%s\"",
                 p->conn.peer, c->stream->session, c->stream->rank, p->conn.dropped,
                 dpp_strerror(p->conn.error));
    detach_client(c);
}

/* Whether the peer is this host's loopback (127.0.0.0/8, ::1 or a v4-mapped
 * 127.x): compression "auto" is off for it (auto_compress()). */
static int is_loopback(dpp_conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

static void on_client_frame(dpp_peer_t *p, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    client_t *c = (client_t *)p;
    dpp_worker_t *w = p->lst->cfg.data;
    dpp_conn_t *conn = &p->conn;
    switch (f->type) {
    case DPP_MSG_SUBSCRIBE: {
        Dpp__Subscribe *sub = (Dpp__Subscribe *)msg;
        detach_client(c);
        stream_t *s = find_stream(w, sub->session_id, sub->rank, 1);
        c->stream = s;
        c->credits = sub->credits;
        c->gen_known = sub->generation_known;
        c->generation = sub->generation;
        c->sub_next = s->subs;
        s->subs = c;
        c->loopback = is_loopback(&c->peer.conn);
        if (c->gen_known && stream_generation(w, s, c->generation))
            DPP_INFO("client_subscribed_old_generation peer=%s session=%s rank=%u generation=%u "
                     "stream_generation=%u reason=\"it reads a plan an elastic resume replaced: "
                     "it is sent nothing\"",
                     conn->peer, s->session, s->rank, c->generation, s->generation);
        DPP_DEBUG("client_subscribed peer=%s session=%s rank=%u credits=%u loopback=%d "
                  "generation=%u",
                  conn->peer, s->session, s->rank, sub->credits, c->loopback, sub->generation);
        flush_stream(w, s);
        break;
    }
    case DPP_MSG_CREDIT: {
        /* bounded: a block per credit, so more than this is meaningless */
        uint64_t sum = (uint64_t)c->credits + ((Dpp__Credit *)msg)->credits;
        c->credits = sum > (1u << 20) ? 1u << 20 : (uint32_t)sum;
    }
        if (c->stream)
            flush_stream(w, c->stream);
        break;
    default:
        dpp_conn_send_error(conn, DPP_EMSGTYPE, "unexpected %s", dpp_msg_name(f->type));
        dpp_conn_close(conn, DPP_EMSGTYPE);
    }
}

/* ---- master link -------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The cache's keys the master has not heard of and those it holds no more,
 * when they changed since the last request (or the master knows nothing of
 * them: a new connection). Returns 1 with *now (the sorted set, to keep
 * once sent) and the two lists (malloc'd) in req's counts, else 0. A
 * worker whose memory runs short says nothing: the master then leases as
 * if it held nothing, which costs only hits. */
static int cache_keys_delta(dpp_worker_t *w, uint64_t **now, size_t *nnow, uint64_t **added,
                            uint64_t **removed, Dpp__LeaseRequest *req)
{
    if (w->cache == NULL)
        return 0;
    uint64_t version = dpp_cache_store_version(w->cache);
    if (!w->keys_reset && version == w->keys_version)
        return 0;
    size_t n = dpp_cache_store_keys(w->cache, NULL, 0);
    uint64_t *keys = malloc((n + 1) * sizeof *keys);
    uint64_t *add = malloc((n + 1) * sizeof *add);
    uint64_t *del = malloc((w->nkeys_sent + 1) * sizeof *del);
    if (keys == NULL || add == NULL || del == NULL) {
        free(keys);
        free(add);
        free(del);
        return 0;
    }
    n = dpp_cache_store_keys(w->cache, keys, n); /* a few may have come meanwhile */
    qsort(keys, n, sizeof *keys, cmp_u64);
    const uint64_t *old = w->keys_reset ? NULL : w->keys_sent;
    size_t nold = w->keys_reset ? 0 : w->nkeys_sent, i = 0, j = 0, na = 0, nd = 0;
    while (i < n || j < nold) {
        if (j == nold || (i < n && keys[i] < old[j]))
            add[na++] = keys[i++];
        else if (i == n || old[j] < keys[i])
            del[nd++] = old[j++];
        else
            i++, j++;
    }
    w->keys_version = version;
    req->cache_reset = w->keys_reset;
    req->n_cache_added = na;
    req->n_cache_removed = nd;
    *now = keys;
    *nnow = n;
    *added = add;
    *removed = del;
    return 1;
}

static void request_leases(dpp_worker_t *w)
{
    /* Splits: one per pipeline thread. Index tasks (a sidecar or footer
     * each) queue besides, INDEX_TASKS_PER_THREAD per thread: the master
     * tops them up while the request waits, so indexing many small files is
     * not one round trip each. */
    unsigned splits = w->outstanding - w->outstanding_index;
    if (w->mstate != MLINK_REGISTERED || w->lease_requested || w->stopping || w->draining ||
        splits >= w->cfg.threads)
        return;
    Dpp__LeaseRequest req = DPP__LEASE_REQUEST__INIT;
    req.max_leases = w->cfg.threads - splits;
    req.max_index_tasks = INDEX_TASKS_PER_THREAD * w->cfg.threads;
    uint64_t *now = NULL, *added = NULL, *removed = NULL;
    size_t nnow = 0;
    if (cache_keys_delta(w, &now, &nnow, &added, &removed, &req)) {
        req.cache_added = added;
        req.cache_removed = removed;
    }
    if (dpp_conn_send(&w->mlink->conn, DPP_MSG_LEASE, &req.base) == 0) {
        w->lease_requested = 1;
        if (now) { /* the master knows these now */
            free(w->keys_sent);
            w->keys_sent = now;
            w->nkeys_sent = nnow;
            w->keys_reset = 0;
            now = NULL;
        }
    }
    free(now);
    free(added);
    free(removed);
}

static void handle_leases(dpp_worker_t *w, const Dpp__LeaseReply *r)
{
    w->lease_requested = 0;
    for (size_t i = 0; i < r->n_leases; i++) {
        const Dpp__Lease *l = r->leases[i];
        dpp_task_t *t = dpp_xcalloc(1, sizeof *t);
        t->kind = l->kind == DPP__LEASE__KIND__INDEX ? DPP_TASK_INDEX : DPP_TASK_SPLIT;
        t->lease_id = l->lease_id;
        snprintf(t->session, sizeof t->session, "%s", l->session_id);
        t->epoch = l->epoch;
        t->split = l->split_id;
        t->rank = l->rank;
        t->path = dpp_xstrdup(l->path);
        t->rel_path = dpp_xstrdup(l->rel_path);
        t->spec_json = dpp_xstrdup(l->spec_json);
        t->byte_start = l->byte_start;
        t->byte_end = l->byte_end;
        t->record_start = l->record_start;
        t->record_count = l->record_count;
        t->record_skip = l->record_skip;
        t->record_take = l->record_take;
        t->range_records = l->range_records;
        t->text = l->text;
        t->seq = l->split_seq;
        t->rank_splits = l->rank_splits;
        t->plan_gen = l->generation;
        t->source = l->source;
        t->split_rows = l->split_rows;
        snprintf(t->etag, sizeof t->etag, "%s", l->etag ? l->etag : "");
        t->object_size = l->object_size;
        snprintf(t->format_name, sizeof t->format_name, "%s",
                 l->format && l->format[0] ? l->format : dpp_format_names[DPP_FORMAT_TFRECORD]);
        t->format = -1;
        for (int k = 0; dpp_format_names[k] != NULL; k++)
            if (strcmp(t->format_name, dpp_format_names[k]) == 0)
                t->format = k;
        t->generation = dpp_pipeline_generation(&w->pipe);
        DPP_DEBUG("lease_taken kind=%s session=%s epoch=%u split=%u lease=%" PRIu64 " path=%s",
                  t->kind == DPP_TASK_INDEX ? "index" : "split", t->session, t->epoch, t->split,
                  t->lease_id, t->path);
        w->outstanding++;
        w->outstanding_index += t->kind == DPP_TASK_INDEX;
        dpp_pipeline_submit(&w->pipe, t);
    }
    request_leases(w);
}

static void on_master_frame(dpp_conn_t *conn, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    mlink_t *ml = dpp_container_of(conn, mlink_t, conn);
    dpp_worker_t *w = ml->w;
    int was_fresh = leases_fresh(w);
    w->master_heard_ms = dpp_now_ms();
    switch (f->type) {
    case DPP_MSG_HEARTBEAT:
        if (!was_fresh && w->mstate == MLINK_REGISTERED) /* blocks held while fenced */
            for (stream_t *s = w->streams; s; s = s->next)
                flush_stream(w, s);
        break;
    case DPP_MSG_HELLO_REPLY: {
        char err[256];
        int rc = dpp_handshake_answer(conn, &ml->auth, &w->auth, "worker", (Dpp__HelloReply *)msg,
                                      err, sizeof err);
        if (rc) {
            DPP_ERROR("master_handshake_failed master=%s reason=\"%s\"", w->master_addr, err);
            break;
        }
        Dpp__RegisterRequest req = DPP__REGISTER_REQUEST__INIT;
        req.data_addr = w->data_addr;
        req.threads = w->cfg.threads;
        dpp_conn_send(conn, DPP_MSG_REGISTER, &req.base);
        break;
    }
    case DPP_MSG_REGISTER_REPLY: {
        Dpp__RegisterReply *r = (Dpp__RegisterReply *)msg;
        w->worker_id = r->worker_id;
        w->heartbeat_ms = r->heartbeat_ms ? r->heartbeat_ms : 1000;
        w->fence_ms = (r->lease_timeout_ms ? r->lease_timeout_ms : 10000) / 2;
        w->mstate = MLINK_REGISTERED;
        w->keys_reset = 1; /* a new connection: the master knows none of them */
        w->backoff_ms = BACKOFF_MIN_MS;
        DPP_INFO("worker_registered worker=%" PRIu64 " master=%s data_addr=%s", w->worker_id,
                 w->master_addr, w->data_addr);
        request_leases(w);
        break;
    }
    case DPP_MSG_LEASE_REPLY:
        handle_leases(w, (Dpp__LeaseReply *)msg);
        break;
    case DPP_MSG_ERROR: {
        Dpp__Error *e = (Dpp__Error *)msg;
        char q[1100];
        DPP_ERROR("master_error code=%s message=%s", dpp_err_name(e->code),
                  dpp_log_quote(e->message, q, sizeof q));
        dpp_conn_close(conn, e->code);
        break;
    }
    default:
        DPP_WARN("master_unexpected type=%s", dpp_msg_name(f->type));
    }
}

static void schedule_reconnect(dpp_worker_t *w)
{
    w->next_connect_ms = dpp_now_ms() + w->backoff_ms;
    w->backoff_ms = w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : w->backoff_ms * 2;
}

static void on_master_closed(dpp_conn_t *conn)
{
    mlink_t *ml = dpp_container_of(conn, mlink_t, conn);
    dpp_worker_t *w = ml->w;
    int was_registered = w->mstate == MLINK_REGISTERED;
    w->mlink = NULL;
    w->mstate = MLINK_DOWN;
    if (was_registered && !w->stopping) {
        /* The master re-leases whatever this worker held: stop producing it
         * and drop what is queued, so no stale lease delivers. */
        size_t dropped_index = 0;
        size_t dropped = dpp_pipeline_revoke(&w->pipe, &dropped_index);
        w->outstanding -= dropped < w->outstanding ? dropped : w->outstanding;
        w->outstanding_index -=
            dropped_index < w->outstanding_index ? dropped_index : w->outstanding_index;
        drop_streams(w);
        DPP_WARN("master_lost master=%s reason=\"%s\" leases=revoked queued_tasks_dropped=%zu",
                 w->master_addr, dpp_strerror(conn->error), dropped);
    }
    w->lease_requested = 0;
    free(ml);
    if (!w->stopping)
        schedule_reconnect(w);
}

static void on_master_connected(dpp_conn_t *conn, int status)
{
    mlink_t *ml = dpp_container_of(conn, mlink_t, conn);
    dpp_worker_t *w = ml->w;
    if (status != 0) {
        DPP_DEBUG("master_connect_failed master=%s error=\"%s\"", w->master_addr,
                  uv_strerror(status));
        dpp_conn_close(conn, status);
        return;
    }
    w->mstate = MLINK_HELLO;
    dpp_handshake_hello(conn, &ml->auth, &w->auth, "worker");
}

static void connect_master(dpp_worker_t *w)
{
    mlink_t *ml = dpp_xcalloc(1, sizeof *ml);
    ml->w = w;
    if (dpp_conn_init(w->loop, &ml->conn, on_master_frame, on_master_closed, ml) != 0) {
        free(ml);
        schedule_reconnect(w);
        return;
    }
    ml->conn.hold = &w->cork;
    ml->conn.held_list = &w->corked;
    w->mlink = ml;
    w->mstate = MLINK_CONNECTING;
    if (dpp_conn_connect(&ml->conn, (struct sockaddr *)&w->master_ss, on_master_connected) != 0)
        dpp_conn_close(&ml->conn, DPP_ECLOSED);
}

/* ---- pipeline hand-off and timers --------------------------------------- */

/* Tells the master how a task ended. */
static void report_result(dpp_worker_t *w, const dpp_split_result_t *r)
{
    Dpp__Rejects rej = DPP__REJECTS__INIT;
#define TO_WIRE(name, code, words) rej.name = r->rejects.name;
    DPP_REJECT_REASONS(TO_WIRE)
#undef TO_WIRE
    if (r->kind == DPP_TASK_INDEX) {
        Dpp__IndexDone d = DPP__INDEX_DONE__INIT;
        d.lease_id = r->lease_id;
        d.records = r->records;
        d.boundaries = r->bounds;
        d.n_boundaries = r->nbounds;
        d.error_code = r->error;
        d.error_message = (char *)r->message;
        d.from_sidecar = r->from_sidecar;
        d.file_size = r->file_size;
        d.file_mtime_ns = r->file_mtime_ns;
        d.rejects = &rej;
        d.reject_detail = (char *)r->reject_detail;
        d.session_id = (char *)r->session;
        d.file = r->split;
        dpp_conn_send(&w->mlink->conn, DPP_MSG_INDEX_DONE, &d.base);
        return;
    }
    Dpp__SplitDone d = DPP__SPLIT_DONE__INIT;
    d.lease_id = r->lease_id;
    d.session_id = (char *)r->session;
    d.split_id = r->split;
    d.blocks = r->blocks;
    d.rows = r->rows;
    d.records_rejected = dpp_rejects_total(&r->rejects);
    d.rejects = &rej;
    d.rows_filtered = r->filtered;
    d.text_documents = r->documents;
    d.text_tokens = r->tokens;
    d.text_padding = r->padding;
    d.cache_tier = r->cache_tier;
    d.cache_bytes = r->cache_bytes;
    d.bytes_read = r->bytes_read;
    d.error_code = r->error;
    d.error_message = (char *)r->message;
    d.records_examined = r->examined;
    d.first_reject = (char *)r->reject_detail;
    /* NUL-separated lists into string arrays pointing at them */
    char *absent[64], *names[256];
    const char *p = r->absent;
    for (size_t i = 0; i < r->nabsent && i < 64; i++, p += strlen(p) + 1)
        absent[d.n_absent_features++] = (char *)p;
    p = r->names;
    for (size_t i = 0; r->nabsent && i < r->nnames && i < 256; i++, p += strlen(p) + 1)
        names[d.n_record_features++] = (char *)p;
    d.absent_features = absent;
    d.record_features = names;
    dpp_conn_send(&w->mlink->conn, DPP_MSG_SPLIT_DONE, &d.base);
}

static void count_result(worker_counters_t *n, const dpp_split_result_t *r)
{
    if (r->kind == DPP_TASK_INDEX) {
        n->index_done++;
        return;
    }
    if (r->error)
        n->splits_failed++;
    else
        n->splits_done++;
    dpp_rejects_add(&n->rejects, &r->rejects);
    n->records_read += r->rows + r->filtered + dpp_rejects_total(&r->rejects);
    n->rows_produced += r->rows;
    n->rows_filtered += r->filtered;
    n->bytes_read += r->bytes_read;
    n->times.read_ns += r->times.read_ns;
    n->times.decode_ns += r->times.decode_ns;
    n->times.transform_ns += r->times.transform_ns;
    n->times.encode_ns += r->times.encode_ns;
    n->times.compress_ns += r->times.compress_ns;
}

static double smooth(double old, double sample)
{
    return old > 0 ? 0.8 * old + 0.2 * sample : sample;
}

/* A split's costs into what compression "auto" weighs. */
static void learn_costs(dpp_worker_t *w, const dpp_split_result_t *r)
{
    if (r->kind != DPP_TASK_SPLIT || r->error || r->raw_bytes < 65536 || r->cpu_ns == 0)
        return;
    uint64_t z = r->times.compress_ns < r->cpu_ns ? r->times.compress_ns : r->cpu_ns;
    w->make_ns_per_byte =
        smooth(w->make_ns_per_byte, (double)(r->cpu_ns - z) / (double)r->raw_bytes);
    if (r->compressed && r->wire_bytes > 0) {
        w->zstd_ns_per_byte = smooth(w->zstd_ns_per_byte, (double)z / (double)r->raw_bytes);
        w->zstd_ratio = smooth(w->zstd_ratio, (double)r->raw_bytes / (double)r->wire_bytes);
    }
}

/* Compression "auto" for a client on conn: 1 when compressing delivers
 * more raw bytes per second than sending them as they are.
 *  - Loopback: never (the link is memory; compression only costs CPU at
 *    both ends).
 *  - A link never seen behind (drain_at_ns: writes stayed queued within
 *    the last LINK_MEMORY_MS) keeps up with what is sent: no.
 *  - A link that fell behind, with compression never measured: yes, to
 *    measure it (the splits after show what it does).
 *  - Else the model: with T threads making raw bytes at m ns/byte and zstd
 *    costing z ns/byte for a ratio r over a link of L bytes/s, raw delivery
 *    is min(T/m, L) and compressed min(T/(m+z), r*L); compress when that is
 *    more by 10% (so a near tie keeps the CPU).
 * The link is measured in bytes on the wire whichever way blocks go, so a
 * compressing worker keeps measuring it while it stays behind, and
 * LINK_MEMORY_MS after it last was, tries raw again. */
#define LINK_MEMORY_MS 10000
static int auto_compress(const dpp_worker_t *w, const dpp_conn_t *conn, int loopback)
{
    if (loopback || conn->drain_at_ns == 0 || conn->drain_bps <= 0 ||
        dpp_now_ns() - conn->drain_at_ns > (uint64_t)LINK_MEMORY_MS * 1000000u)
        return 0;
    if (w->zstd_ratio <= 0 || w->make_ns_per_byte <= 0)
        return 1;
    double threads = w->cfg.threads ? w->cfg.threads : 1;
    double link = conn->drain_bps;
    double raw = fmin(threads * 1e9 / w->make_ns_per_byte, link);
    double zstd =
        fmin(threads * 1e9 / (w->make_ns_per_byte + w->zstd_ns_per_byte), w->zstd_ratio * link);
    return zstd > 1.1 * raw;
}

/* Decides compression "auto" again for every stream with a client. */
static void decide_compression(dpp_worker_t *w)
{
    uint32_t on = 0;
    for (stream_t *s = w->streams; s; s = s->next) {
        client_t *c = s->subs;
        if (c == NULL || !s->auto_mode) /* "off" and "zstd" need no decision */
            continue;
        dpp_conn_t *conn = &c->peer.conn;
        int z = auto_compress(w, conn, c->loopback);
        on += (uint32_t)z;
        if (z == s->compress)
            continue;
        int first = s->compress < 0;
        s->compress = z;
        dpp_pipeline_set_client(&w->pipe, s->session, s->rank, z);
        if (first && !z)
            continue; /* the default, said to the pipeline: nothing to tell */
        DPP_INFO("compression_auto session=%s rank=%u peer=%s compress=%s link_mb_s=%.1f "
                 "make_mb_s=%.1f zstd_mb_s=%.1f zstd_ratio=%.2f",
                 s->session, s->rank, conn->peer, z ? "zstd" : "off",
                 conn->drain_at_ns ? conn->drain_bps / 1e6 : 0.0,
                 w->make_ns_per_byte > 0 ? 1e3 / w->make_ns_per_byte : 0.0,
                 w->zstd_ns_per_byte > 0 ? 1e3 / w->zstd_ns_per_byte : 0.0, w->zstd_ratio);
    }
    w->auto_on = on;
}

static void on_pipeline_ready(uv_async_t *a)
{
    dpp_worker_t *w = dpp_container_of(a, dpp_worker_t, async);
    dpp_out_block_t *blocks;
    dpp_split_result_t *results;
    dpp_pipeline_take(&w->pipe, &blocks, &results);
    unsigned gen = dpp_pipeline_generation(&w->pipe);
    w->cork = 1;
    while (blocks) {
        dpp_out_block_t *b = blocks;
        blocks = b->next;
        b->next = NULL;
        b->owner = w;
        if (b->generation != gen) { /* made under a revoked lease */
            dpp_pipeline_release(&w->pipe, b->len);
            dpp_out_block_free(b);
            continue;
        }
        stream_t *s = find_stream(w, b->session, b->rank, 1);
        if (stream_generation(w, s, b->plan_gen)) { /* an elastic resume replaced its plan */
            drop_block(w, b);
            free_stream_if_idle(w, s);
            continue;
        }
        s->auto_mode = b->auto_compression;
        *s->tail = b;
        s->tail = &b->next;
        s->nblocks++;
        flush_stream(w, s);
    }
    while (results) {
        dpp_split_result_t *r = results;
        results = r->next;
        if (w->outstanding)
            w->outstanding--;
        if (r->kind == DPP_TASK_INDEX && w->outstanding_index)
            w->outstanding_index--;
        count_result(&w->n, r);
        learn_costs(w, r);
        if (w->mstate == MLINK_REGISTERED && r->generation == gen)
            report_result(w, r);
        char q[1100];
        if (r->error && r->generation == gen)
            DPP_ERROR("task_failed lease=%" PRIu64 " error=%s", r->lease_id,
                      dpp_log_quote(r->message, q, sizeof q));
        else if (r->kind == DPP_TASK_SPLIT)
            DPP_DEBUG("split_done lease=%" PRIu64 " rows=%" PRIu64 " blocks=%u filtered=%" PRIu64,
                      r->lease_id, r->rows, r->blocks, r->filtered);
        free(r->bounds);
        free(r);
    }
    request_leases(w);
    w->cork = 0;
    dpp_conn_release_list(&w->corked, 1);
}

/* A draining worker is done when its running tasks are finished and every
 * block for a subscribed client is written. Blocks nobody subscribed to
 * cannot be delivered by waiting. */
static int drained(const dpp_worker_t *w)
{
    if (w->outstanding > 0)
        return 0;
    for (const stream_t *s = w->streams; s; s = s->next)
        for (const client_t *c = s->subs; c && s->head; c = c->sub_next)
            if (takes_generation(s, c))
                return 0;
    for (const dpp_peer_t *p = w->lst.peers; p; p = p->next)
        if (p->conn.queued > 0)
            return 0;
    return 1;
}

static void on_timer(uv_timer_t *t)
{
    dpp_worker_t *w = dpp_container_of(t, dpp_worker_t, timer);
    int64_t now = dpp_now_ms();
    if (w->draining && !w->stopping && (drained(w) || now >= w->drain_deadline_ms)) {
        DPP_INFO("worker_drained complete=%d tasks_left=%u", drained(w), w->outstanding);
        dpp_worker_stop(w);
        return;
    }
    if (w->mstate == MLINK_DOWN && now >= w->next_connect_ms)
        connect_master(w);
    dpp_listener_sweep(&w->lst, now);
    decide_compression(w);
    if (w->mstate == MLINK_REGISTERED && now >= w->next_heartbeat_ms) {
        Dpp__Heartbeat hb = DPP__HEARTBEAT__INIT;
        hb.worker_id = w->worker_id;
        dpp_conn_send(&w->mlink->conn, DPP_MSG_HEARTBEAT, &hb.base);
        w->next_heartbeat_ms = now + w->heartbeat_ms;
    }
}

/* ---- HTTP: /metrics, /healthz, /readyz ---------------------------------- */

/* The split cache, per tier (cache_store.h). */
static void cache_metrics(dpp_metrics_t *m, dpp_cache_store_t *c)
{
    dpp_cache_store_stats_t st;
    dpp_cache_store_stats(c, &st);
    static const struct {
        const char *name, *help;
        int counter;
        size_t off;
    } fam[] = {
        {"dpp_cache_hits_total", "Splits served from the cache, by tier.", 1,
         offsetof(dpp_cache_tier_stats_t, hits)},
        {"dpp_cache_misses_total", "Lookups a tier did not hold.", 1,
         offsetof(dpp_cache_tier_stats_t, misses)},
        {"dpp_cache_served_bytes_total", "Entry bytes served from the cache, by tier.", 1,
         offsetof(dpp_cache_tier_stats_t, bytes_served)},
        {"dpp_cache_evictions_total", "Entries evicted to make room, by tier.", 1,
         offsetof(dpp_cache_tier_stats_t, evictions)},
        {"dpp_cache_insertions_total", "Entries stored, by tier.", 1,
         offsetof(dpp_cache_tier_stats_t, insertions)},
        {"dpp_cache_entries", "Entries held, by tier.", 0,
         offsetof(dpp_cache_tier_stats_t, entries)},
        {"dpp_cache_bytes",
         "Bytes held, by tier (the bound of --cache-ram-mb and "
         "--cache-disk-gb).",
         0, offsetof(dpp_cache_tier_stats_t, bytes)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        dpp_metrics_family(m, fam[f].name, fam[f].counter ? DPP_METRIC_COUNTER : DPP_METRIC_GAUGE,
                           fam[f].help);
        const dpp_cache_tier_stats_t *t[2] = {&st.ram, &st.disk};
        static const char *const tiers[2] = {"ram", "disk"};
        for (int k = 0; k < 2; k++) {
            dpp_metrics_label_t l = {"tier", tiers[k]};
            uint64_t v;
            memcpy(&v, (const uint8_t *)t[k] + fam[f].off, sizeof v);
            dpp_metrics_sample_u64(m, fam[f].name, &l, 1, v);
        }
    }
    dpp_metrics_counter(m, "dpp_cache_damaged_total",
                        "Cache entries found damaged (checksum, short file) and deleted.",
                        st.damaged);
    dpp_metrics_counter(m, "dpp_cache_write_errors_total",
                        "Cache entries that could not be written to disk (a full disk...).",
                        st.write_errors);
}

static void render_metrics(void *arg, dpp_metrics_t *m)
{
    dpp_worker_t *w = arg;
    const worker_counters_t *n = &w->n;
    dpp_metrics_label_t l[1];
    dpp_metrics_build_info(m, "worker");
    dpp_metrics_process(m);
    dpp_metrics_gauge(m, "dpp_worker_registered", "1 while registered with the master.",
                      w->mstate == MLINK_REGISTERED);
    dpp_metrics_gauge(m, "dpp_worker_draining", "1 while draining (SIGTERM).", w->draining);
    dpp_metrics_gauge(m, "dpp_worker_threads", "Pipeline threads.", w->cfg.threads);
    dpp_metrics_gauge(m, "dpp_compression_auto_streams",
                      "Clients whose blocks compression \"auto\" compresses now (a link that "
                      "fell behind, measured).",
                      (double)w->auto_on);
    dpp_metrics_gauge(m, "dpp_splits_running", "Leases given to the pipeline and not finished.",
                      w->outstanding);
    dpp_metrics_counter(m, "dpp_splits_done_total", "Splits produced.", n->splits_done);
    dpp_metrics_counter(m, "dpp_splits_failed_total",
                        "Splits that failed (I/O, corrupt data with "
                        "on_corrupt: fail, a stop).",
                        n->splits_failed);
    dpp_metrics_counter(m, "dpp_index_tasks_done_total", "File index tasks done.", n->index_done);
    dpp_metrics_counter(m, "dpp_rows_read_total", "Records read from storage for splits.",
                        n->records_read);
    dpp_metrics_counter(m, "dpp_rows_produced_total", "Rows put into blocks.", n->rows_produced);
    dpp_metrics_counter(m, "dpp_rows_filtered_total", "Rows dropped by the specs' filters.",
                        n->rows_filtered);
    dpp_metrics_counter(m, "dpp_rows_emitted_total", "Rows sent to clients.", n->rows_emitted);
    dpp_metrics_counter(m, "dpp_bytes_read_total", "Bytes read from storage for splits.",
                        n->bytes_read);
    dpp_metrics_counter(m, "dpp_storage_requests_total",
                        "Requests sent to object storage (s3:// tables), retries included.",
                        dpp_s3_requests_total());
    dpp_metrics_counter(m, "dpp_storage_retries_total",
                        "Object storage requests sent again after a 5xx, a 429, a reset, a "
                        "stall, a short body or a range answered short.",
                        dpp_s3_retries_total());
    dpp_metrics_counter(m, "dpp_storage_short_reads_total",
                        "Ranges the object store answered short (a 206 ending before the "
                        "range asked and the object), read on from where the answer stopped.",
                        dpp_s3_short_reads_total());
    dpp_metrics_counter(m, "dpp_bytes_emitted_total",
                        "Block bytes sent to clients (as sent: compressed "
                        "or not).",
                        n->bytes_emitted);
    dpp_metrics_counter(m, "dpp_blocks_emitted_total", "Blocks sent to clients.",
                        n->blocks_emitted);
    dpp_metrics_counter(
        m, "dpp_blocks_dropped_total",
        "Blocks dropped: their leases were revoked, or an elastic resume replaced their plan.",
        n->blocks_dropped);
    dpp_metrics_rejects(m, "Records rejected, by reason.", &n->rejects);
    if (w->cache)
        cache_metrics(m, w->cache);
    dpp_metrics_family(m, "dpp_pipeline_stage_seconds_total", DPP_METRIC_COUNTER,
                       "Pipeline thread time per stage.");
    const struct {
        const char *stage;
        uint64_t ns;
    } st[] = {{"read", n->times.read_ns},
              {"decode", n->times.decode_ns},
              {"transform", n->times.transform_ns},
              {"encode", n->times.encode_ns},
              {"compress", n->times.compress_ns}};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        l[0] = (dpp_metrics_label_t){"stage", st[i].stage};
        dpp_metrics_sample(m, "dpp_pipeline_stage_seconds_total", l, 1, (double)st[i].ns / 1e9);
    }
    size_t queued = 0;
    for (stream_t *s = w->streams; s; s = s->next)
        queued += s->nblocks;
    dpp_metrics_gauge(m, "dpp_blocks_queued", "Blocks waiting for their clients' credits.",
                      (double)queued);
    dpp_metrics_gauge(m, "dpp_buffered_bytes",
                      "Bytes of blocks produced and not yet written to a client.",
                      w->pipe_started ? (double)dpp_pipeline_buffered(&w->pipe) : 0);
    dpp_metrics_gauge(m, "dpp_buffer_limit_bytes",
                      "Limit of dpp_buffered_bytes (--max-buffer-mb less the "
                      "readers' buffers).",
                      (double)w->pipe.cfg.budget_bytes);
    dpp_listener_metrics(&w->lst, m); /* ends with the family dpp_connections */
    l[0] = (dpp_metrics_label_t){"role", "master"};
    dpp_metrics_sample_u64(m, "dpp_connections", l, 1, w->mlink != NULL);
}

static void on_http(const dpp_http_request_t *req, dpp_http_response_t *res, void *arg)
{
    dpp_worker_t *w = arg;
    const char *text_plain = "text/plain; charset=utf-8";
    if (strcmp(req->path, "/healthz") == 0) {
        dpp_http_respond(res, 200, text_plain, "ok\n", 3);
    } else if (strcmp(req->path, "/readyz") == 0) {
        /* ready: registered with the master and taking work */
        if (w->mstate == MLINK_REGISTERED && !w->draining && !w->stopping)
            dpp_http_respond(res, 200, text_plain, "ready\n", 6);
        else if (w->draining)
            dpp_http_respond(res, 503, text_plain, "draining\n", 9);
        else
            dpp_http_respond(res, 503, text_plain, "not registered with the master\n", 31);
    } else if (strcmp(req->path, "/metrics") == 0) {
        dpp_http_respond_metrics(res, render_metrics, w);
    } else {
        dpp_http_respond(res, 404, text_plain, "not found\n", 10);
    }
}

int dpp_worker_new(dpp_worker_t **out, uv_loop_t *loop, const dpp_worker_config_t *cfg)
{
    dpp_worker_t *w = dpp_xcalloc(1, sizeof *w);
    w->loop = loop;
    w->cfg = *cfg;
    if (cfg->auth)
        w->auth = *cfg->auth;
    snprintf(w->master_addr, sizeof w->master_addr, "%s", cfg->master);
    int rc = dpp_addr_parse(cfg->master, &w->master_ss);
    if (rc) {
        DPP_ERROR("bad_master_address addr=%s", cfg->master);
        free(w);
        return rc;
    }
    static const char *const roles[] = {"client", NULL};
    dpp_listener_config_t lc = {
        .name = "worker",
        .roles = roles,
        .auth = &w->auth,
        .handshake_ms = cfg->handshake_ms ? cfg->handshake_ms : 10000,
        /* clients send a keepalive every few seconds, even with no credit to give */
        .idle_ms = cfg->idle_ms ? cfg->idle_ms : 60000,
        .max_connections = cfg->max_connections ? cfg->max_connections : 1024,
        .max_msg = cfg->max_msg_bytes,
        .peer_size = sizeof(client_t),
        .max_queued = (size_t)-1, /* blocks: bounded by the clients' credits */
        .on_frame = on_client_frame,
        .on_close = on_client_closed,
        .data = w,
    };
    uv_timer_init(loop, &w->timer);
    uv_async_init(loop, &w->async, on_pipeline_ready);
    rc = dpp_listener_start(loop, &w->lst, &lc, cfg->listen);
    if (rc) {
        dpp_worker_stop(w);
        uv_run(loop, UV_RUN_DEFAULT);
        dpp_worker_free(w);
        return rc;
    }
    snprintf(w->data_addr, sizeof w->data_addr, "%s", w->lst.addr);
    if (cfg->advertise)
        snprintf(w->data_addr, sizeof w->data_addr, "%s", cfg->advertise);
    /* The budget covers the readers' buffers too: what is left of it is for
     * finished blocks. A thread reading a JSON Lines or text object holds
     * its two blocks (dpp_s3_rfile_t) beside the reader's ring. */
    size_t per_thread = dpp_reader_memory_bound(&cfg->reader);
    if (cfg->ns3_roots > 0)
        per_thread += 2 * (size_t)DPP_S3_BLOCK;
    size_t readers = (size_t)cfg->threads * per_thread;
    if (readers + (4u << 20) > cfg->max_buffer_bytes) {
        DPP_ERROR("buffer_too_small max_buffer_bytes=%zu readers_bytes=%zu threads=%u "
                  "hint=\"raise --max-buffer-mb or lower --threads or --max-record-mb\"",
                  cfg->max_buffer_bytes, readers, cfg->threads);
        dpp_worker_stop(w);
        uv_run(loop, UV_RUN_DEFAULT);
        dpp_worker_free(w);
        return DPP_EINVAL;
    }
    if (cfg->cache_ram_bytes > 0 || cfg->cache_dir) {
        dpp_cache_store_config_t cc = {.ram_bytes = cfg->cache_ram_bytes,
                                       .dir = cfg->cache_dir,
                                       .disk_bytes = cfg->cache_disk_bytes};
        char err[512];
        if ((rc = dpp_cache_store_open(&w->cache, &cc, err, sizeof err)) != 0) {
            DPP_ERROR("cache_open_failed error=\"%s\" fix=\"give --cache-dir a folder of its own "
                      "that this user may write (created when missing)\"",
                      err);
            dpp_worker_stop(w);
            uv_run(loop, UV_RUN_DEFAULT);
            dpp_worker_free(w);
            return rc;
        }
    }
    dpp_pipeline_config_t pc = {
        .threads = cfg->threads,
        .budget_bytes = cfg->max_buffer_bytes - readers,
        .reader = cfg->reader,
        .roots = cfg->roots,
        .nroots = cfg->nroots,
        .s3_roots = cfg->s3_roots,
        .ns3_roots = cfg->ns3_roots,
        .cache = w->cache,
    };
    rc = dpp_pipeline_start(&w->pipe, &pc, &w->async);
    if (rc) {
        DPP_ERROR("pipeline_start_failed error=\"%s\"", dpp_strerror(rc));
        dpp_worker_stop(w);
        uv_run(loop, UV_RUN_DEFAULT);
        dpp_worker_free(w);
        return rc;
    }
    w->pipe_started = 1;
    uv_timer_start(&w->timer, on_timer, 50, 50);
    if (cfg->http && (rc = dpp_http_start(&w->http, loop, cfg->http, on_http, w, NULL)) != 0) {
        DPP_ERROR("http_listen_failed addr=%s error=\"%s\"", cfg->http, dpp_strerror(rc));
        dpp_worker_stop(w);
        uv_run(loop, UV_RUN_DEFAULT);
        dpp_worker_free(w);
        return rc;
    }
    if (w->http)
        DPP_INFO("http_listening addr=%s port=%d", cfg->http, dpp_http_port(w->http));
    connect_master(w);
    if (cfg->port_file && (rc = dpp_write_port_file(cfg->port_file, w->data_addr)) != 0)
        DPP_ERROR("port_file_failed path=%s error=\"%s\"", cfg->port_file, dpp_strerror(rc));
    DPP_INFO("worker_listening addr=%s master=%s threads=%u max_buffer_bytes=%zu", w->data_addr,
             w->master_addr, cfg->threads, cfg->max_buffer_bytes);
    *out = w;
    return 0;
}

void dpp_worker_drain(dpp_worker_t *w, unsigned grace_ms)
{
    if (w->draining || w->stopping)
        return;
    w->draining = 1;
    w->drain_deadline_ms = dpp_now_ms() + grace_ms;
    /* Tasks not started go back to the master when this worker disconnects;
     * the running ones finish and their blocks are delivered. */
    size_t dropped_index = 0;
    size_t dropped = dpp_pipeline_cancel_queued(&w->pipe, &dropped_index);
    w->outstanding -= dropped < w->outstanding ? dropped : w->outstanding;
    w->outstanding_index -=
        dropped_index < w->outstanding_index ? dropped_index : w->outstanding_index;
    DPP_INFO("worker_draining running_tasks=%u queued_tasks_dropped=%zu grace_ms=%u",
             w->outstanding, dropped, grace_ms);
}

void dpp_worker_stop(dpp_worker_t *w)
{
    if (w->stopping)
        return;
    w->stopping = 1;
    dpp_http_stop(w->http);
    w->http = NULL;
    if (w->pipe_started) {
        DPP_INFO("worker_stopped buffered_peak_bytes=%zu blocks_budget_bytes=%zu",
                 dpp_pipeline_buffered_peak(&w->pipe), w->pipe.cfg.budget_bytes);
        dpp_pipeline_stop(&w->pipe);
        w->pipe_started = 0;
    }
    dpp_listener_close(&w->lst);
    uv_close((uv_handle_t *)&w->timer, NULL);
    uv_close((uv_handle_t *)&w->async, NULL);
    if (w->mlink)
        dpp_conn_close(&w->mlink->conn, DPP_ECLOSED);
}

void dpp_worker_free(dpp_worker_t *w)
{
    if (w == NULL)
        return;
    dpp_cache_store_close(w->cache); /* the pipeline threads have stopped */
    ZSTD_freeCCtx(w->zctx);
    free(w->keys_sent);
    while (w->streams) {
        stream_t *s = w->streams;
        w->streams = s->next;
        while (s->head) {
            dpp_out_block_t *b = s->head;
            s->head = b->next;
            dpp_out_block_free(b);
        }
        free(s);
    }
    free(w);
}
