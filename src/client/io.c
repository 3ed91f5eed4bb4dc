/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's I/O thread: master link (attach refresh, split acks) and one
 * connection per worker (subscribe, blocks in, credits out). It shares only
 * the core (core.h) with the consumer side. Never aborts. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "io.h"
#include "wire/conn.h"
#include "wire/handshake.h"
#include "wire/net.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"

#define ATTACH_EVERY_MS 1000
/* the last epoch's verdict, while the master waits for a worker's report */
#define VERDICT_RETRY_MS 20
#define KEEPALIVE_MS 5000 /* an empty Credit to each worker */
#define ATTACH_EVERY_NO_WORKERS_MS 200
#define MAX_BLOCK_INDEX (1u << 24)

typedef struct wlink {
    dpp_conn_t conn;
    dpp_client_io_t *io;
    uint64_t id;
    char addr[64];
    int ready;         /* subscribed */
    uint32_t inflight; /* credits granted and not yet used by a block */
    uint32_t owed;     /* credits earned back, held while memory is short */
    size_t sink_cap;   /* capacity of the pool buffer conn.sink_buf */
    dpp_auth_state_t auth;
    struct wlink *prev, *next;
} wlink_t;

/* A worker address the client has connected to, and when to try again
 * after failed connections (100 ms doubling to 5 s; reset once subscribed). */
typedef struct worker_seen {
    char addr[64];
    int64_t next_try_ms;
    unsigned backoff_ms;
} worker_seen_t;

typedef struct mlink {
    dpp_conn_t conn;
    dpp_client_io_t *io;
    int ready; /* hello answered */
    dpp_auth_state_t auth;
} mlink_t;

struct dpp_client_io {
    char session[24];
    unsigned rank;
    const dpp_auth_t *auth; /* the client's, valid until dpp__io_stop() returns */
    dpp_core_t *core;
    uv_loop_t loop;
    uv_thread_t thread;
    uv_async_t wake;
    uv_timer_t timer;
    struct sockaddr_storage master_ss;
    mlink_t *ml;
    int64_t next_connect_ms, next_attach_ms, next_keepalive_ms;
    unsigned backoff_ms;
    int attach_inflight;
    unsigned window_sent; /* the prefetch_splits the master was last told */
    int verdict_attach; /* the attach in flight answers core->verdict */
    wlink_t *links;
    uint64_t next_link_id;
    worker_seen_t *seen; /* workers connected at least once: a new link is a reconnect */
    size_t nseen;
    /* workers whose subscribed link died: told to the master with the next
     * attach, which leases again what they may have had in flight; kept
     * until an attach reply shows it arrived */
    char lost[DPP_CLIENT_MAX_LOST][64];
    size_t nlost, lost_sent;
    /* Acknowledgements sent and not yet confirmed. The master answers an
     * attach only after what came before it on the connection is journaled,
     * so an attach reply confirms them; those a dead connection took along
     * are queued again for the next one. */
    uint32_t (*unconf)[2];
    size_t nunconf, unconf_cap, unconf_upto;
    int64_t close_deadline_ms; /* closing: unconfirmed acks are waited for until then */
    int master_connected_once;
    atomic_int stop;
    int stopping;
};

static worker_seen_t *find_seen(dpp_client_io_t *io, const char *addr)
{
    for (size_t i = 0; i < io->nseen; i++)
        if (strcmp(io->seen[i].addr, addr) == 0)
            return &io->seen[i];
    return NULL;
}

static void send_credit(wlink_t *l, uint32_t n)
{
    Dpp__Credit cr = DPP__CREDIT__INIT;
    cr.credits = n;
    if (dpp_conn_send(&l->conn, DPP_MSG_CREDIT, &cr.base) == 0)
        l->inflight += n;
}

/* Grants the credits links have earned back while the memory budget can
 * take the blocks they may bring: held bytes plus every credit in flight
 * times the largest block seen must fit. With order deterministic only the
 * batches the trainer holds count: blocks waiting for earlier splits must
 * never stop a worker (see handle_block), and the master bounds them by
 * leasing only dpp__core_window() splits ahead. Caller holds core->mu. */
static void grant_credits(dpp_client_io_t *io)
{
    dpp_core_t *core = io->core;
    size_t inflight = 0;
    for (wlink_t *l = io->links; l; l = l->next)
        inflight += l->inflight;
    for (wlink_t *l = io->links; l; l = l->next) {
        uint32_t n = 0;
        if (!core->order_fastest) {
            if (core->trainer_bytes == 0 || core->trainer_bytes + core->max_block <= core->budget)
                n = l->owed;
        } else {
            while (n < l->owed &&
                   core->held_bytes + (inflight + 1) * core->max_block <= core->budget) {
                n++;
                inflight++;
            }
            /* With nothing in flight and no batch held by the trainer, what
             * the client holds is its own queue and the batch it is
             * assembling: one more block must come, or a budget smaller
             * than a batch would stall forever. A trainer holding batches
             * gets nothing until it releases. */
            if (n == 0 && l->owed && inflight == 0 && core->trainer_bytes == 0)
                n = 1;
        }
        if (n && l->ready && !l->conn.closing) {
            l->owed -= n;
            send_credit(l, n);
        }
    }
}

static void fail_client(dpp_client_io_t *io, int err, const char *text);
static void finish_close(dpp_client_io_t *io);
static int acks_outstanding(dpp_client_io_t *io);

/* Checks the peer's HelloReply and authenticates to it (wire/handshake.h).
 * A peer without the cluster token, with another one, or speaking another
 * protocol version is a configuration error that retrying cannot mend: the
 * client fails with it. Returns 0 to go on. */
static int answer_hello(dpp_client_io_t *io, dpp_conn_t *conn, dpp_auth_state_t *st,
                        const Dpp__HelloReply *r)
{
    char err[256];
    int rc = dpp_handshake_answer(conn, st, io->auth, "client", r, err, sizeof err);
    if (rc == DPP_EAUTH || rc == DPP_EVERSION)
        fail_client(io, rc, err);
    return rc;
}

/* ---- worker links ------------------------------------------------------- */

static void handle_block(wlink_t *l, const dpp_frame_t *f, const Dpp__BlockHeader *h)
{
    dpp_core_t *core = l->io->core;
    if (h->codec > 1 || h->raw_size > core->max_raw || h->block_index >= MAX_BLOCK_INDEX ||
        (h->codec == 0 && h->raw_size != f->payload_len) || h->split_seq >= h->rank_splits) {
        dpp_conn_close(&l->conn, DPP_EBLOCK);
        return;
    }
    rblock_t *b = calloc(1, sizeof *b);
    size_t cap = 0;
    if (l->inflight)
        l->inflight--;
    /* A payload received in place (link_sink) is the block's buffer as it
     * is: no copy. */
    uint8_t *data = NULL, *sunk = NULL;
    if (l->conn.sink_buf == f->payload) {
        data = sunk = l->conn.sink_buf;
        cap = l->sink_cap;
        l->conn.sink_buf = NULL;
    }
    pthread_mutex_lock(&core->mu);
    if (data == NULL)
        data = dpp__pool_get(core, f->payload_len, &cap);
    core->blocks++;
    core->bytes_wire += f->payload_len;
    /* sizes decompressed: a block is held decompressed once it is read */
    if (h->raw_size > core->max_block)
        core->max_block = (size_t)h->raw_size;
    int keep = 0;
    /* A block of another plan generation was leased before an elastic
     * resume re-planned the session (or after one this client does not
     * belong to): not this rank's, dropped. */
    int mine = h->generation == core->generation;
    /* An epoch this client has finished: every split of it was done here,
     * so a block of it is a re-lease after a lost acknowledgement. */
    if (mine && h->epoch < core->cur_epoch && h->last)
        dpp__core_ack(core, h->epoch, h->split_id);
    if (mine && b && data && h->epoch >= core->cur_epoch && h->epoch <= core->cur_epoch + 1) {
        epoch_track_t *t = dpp__core_epoch(core, h->epoch, 1);
        split_track_t *st = t ? dpp__track_split(t, h->split_id) : NULL;
        if (t && t->rank_splits < 0)
            t->rank_splits = h->rank_splits;
        size_t byte = h->block_index / 8;
        if (st && byte >= st->seen_bytes) {
            size_t n = st->seen_bytes ? st->seen_bytes : 8;
            while (n <= byte)
                n *= 2;
            uint8_t *seen = realloc(st->seen, n);
            if (seen) {
                memset(seen + st->seen_bytes, 0, n - st->seen_bytes);
                st->seen = seen;
                st->seen_bytes = n;
            }
        }
        /* A block already seen comes from a re-leased split: blocks are the
         * same whichever worker made them, so it is dropped here. */
        if (st && byte < st->seen_bytes && !(st->seen[byte] & (1u << (h->block_index % 8)))) {
            st->seen[byte] |= (uint8_t)(1u << (h->block_index % 8));
            if (h->last)
                st->last_index = h->block_index;
            st->received++;
            st->rows += h->rows;
            st->bytes += h->raw_size;
            if (st->last_index >= 0 && st->received == (uint64_t)st->last_index + 1) {
                t->complete_splits++;
                t->rows_arrived += st->rows;
                if (st->bytes > core->max_split_bytes)
                    core->max_split_bytes = st->bytes;
            }
            keep = 1;
        } else if (st) {
            core->blocks_duplicate++;
            /* The last block of a split this client already finished comes
             * again: the master lost the acknowledgement (it restarted, or
             * the ack was in flight when a connection dropped) and leased
             * the split again. Acknowledge once more. */
            if (st->done && h->last)
                dpp__core_ack(core, h->epoch, h->split_id);
        }
    }
    if (keep) {
        if (data != sunk)
            memcpy(data, f->payload, f->payload_len);
        b->link_id = l->id;
        b->epoch = h->epoch;
        b->split = h->split_id;
        b->seq = h->split_seq;
        b->source = h->source;
        b->index = h->block_index;
        b->last = h->last;
        b->rows = h->rows;
        b->codec = h->codec;
        b->raw_size = h->raw_size;
        b->data = data;
        b->len = f->payload_len;
        b->cap = cap;
        *core->ready_tail = b;
        core->ready_tail = &b->next;
        core->nready++;
        core->held_bytes += cap; /* the buffer's memory, not just the payload */
        pthread_cond_broadcast(&core->cv);
        if (!core->order_fastest) {
            /* In plan order a block may wait for blocks of earlier splits
             * that other workers (or this one, behind it) still have to
             * send: its credit comes back now (unless the trainer hoards
             * batches), so that no worker is ever stopped by blocks the
             * consumer cannot take yet. What is in flight is bounded by the
             * splits the master leases ahead (dpp__core_window()). */
            b->link_id = 0;
            l->owed++;
            grant_credits(l->io);
        }
    } else {
        l->owed++; /* nothing kept: the block's credit comes straight back */
        grant_credits(l->io);
        dpp__pool_put(core, data, cap);
    }
    pthread_mutex_unlock(&core->mu);
    if (!keep)
        free(b);
}

/* A BLOCK's payload goes straight into a pool buffer (wire/conn.h). One
 * whose size handle_block() refuses anyway is left to the usual path. */
static void *link_sink(dpp_conn_t *conn, uint16_t type, size_t len)
{
    wlink_t *l = dpp_container_of(conn, wlink_t, conn);
    dpp_core_t *core = l->io->core;
    if (type != DPP_MSG_BLOCK || !l->ready || len > core->max_raw)
        return NULL;
    pthread_mutex_lock(&core->mu);
    void *p = dpp__pool_get(core, len, &l->sink_cap);
    pthread_mutex_unlock(&core->mu);
    return p;
}

static void link_sink_free(dpp_conn_t *conn, void *buf)
{
    wlink_t *l = dpp_container_of(conn, wlink_t, conn);
    dpp_core_t *core = l->io->core;
    pthread_mutex_lock(&core->mu);
    dpp__pool_put(core, buf, l->sink_cap);
    pthread_mutex_unlock(&core->mu);
}

static void on_link_frame(dpp_conn_t *conn, const dpp_frame_t *f, const ProtobufCMessage *m)
{
    wlink_t *l = dpp_container_of(conn, wlink_t, conn);
    switch (f->type) {
    case DPP_MSG_HELLO_REPLY: {
        if (answer_hello(l->io, conn, &l->auth, (Dpp__HelloReply *)m) != 0)
            break;
        Dpp__Subscribe sub = DPP__SUBSCRIBE__INIT;
        sub.session_id = l->io->session;
        sub.rank = l->io->rank;
        sub.credits = l->io->core->prefetch;
        /* the worker sends it blocks of this plan only: an elastic resume
         * takes its rank over from a world that may still be subscribed */
        sub.generation = l->io->core->generation;
        sub.generation_known = 1;
        if (dpp_conn_send(conn, DPP_MSG_SUBSCRIBE, &sub.base) == 0) {
            l->ready = 1;
            l->inflight = sub.credits;
            worker_seen_t *w = find_seen(l->io, l->addr);
            if (w)
                w->backoff_ms = 0;
        }
        break;
    }
    case DPP_MSG_BLOCK:
        if (l->ready)
            handle_block(l, f, (Dpp__BlockHeader *)m);
        break;
    default:
        if (f->type == DPP_MSG_ERROR && ((Dpp__Error *)m)->code == DPP_EAUTH)
            fail_client(l->io, DPP_EAUTH, ((Dpp__Error *)m)->message);
        dpp_conn_close(conn, f->type == DPP_MSG_ERROR ? ((Dpp__Error *)m)->code : DPP_EMSGTYPE);
    }
}

static void on_link_closed(dpp_conn_t *conn)
{
    wlink_t *l = dpp_container_of(conn, wlink_t, conn);
    dpp_client_io_t *io = l->io;
    worker_seen_t *w = find_seen(io, l->addr);
    if (w && !l->ready) { /* never got to subscribe: back off before the next try */
        w->backoff_ms = w->backoff_ms ? (w->backoff_ms >= 2500 ? 5000 : w->backoff_ms * 2) : 100;
        w->next_try_ms = dpp_now_ms() + w->backoff_ms;
    }
    if (l->ready && !io->stopping && io->nlost < DPP_CLIENT_MAX_LOST) {
        int known = 0;
        for (size_t i = 0; i < io->nlost; i++)
            known |= strcmp(io->lost[i], l->addr) == 0;
        if (!known)
            snprintf(io->lost[io->nlost++], sizeof io->lost[0], "%s", l->addr);
        io->next_attach_ms = 0; /* tell the master soon */
    }
    DPP_DLIST_UNLINK(io->links, l);
    free(l);
}

static void send_hello(dpp_client_io_t *io, dpp_conn_t *conn, dpp_auth_state_t *st, int status)
{
    if (status != 0)
        dpp_conn_close(conn, status);
    else
        dpp_handshake_hello(conn, st, io->auth, "client");
}

static void on_worker_connected(dpp_conn_t *conn, int status)
{
    wlink_t *l = dpp_container_of(conn, wlink_t, conn);
    send_hello(l->io, conn, &l->auth, status);
}

static void on_master_connected(dpp_conn_t *conn, int status)
{
    mlink_t *ml = dpp_container_of(conn, mlink_t, conn);
    send_hello(ml->io, conn, &ml->auth, status);
}

/* Whether to connect to addr now; counts a connection to a worker connected
 * before as a reconnect. */
static int worker_due(dpp_client_io_t *io, const char *addr)
{
    worker_seen_t *w = find_seen(io, addr);
    if (w) {
        if (dpp_now_ms() < w->next_try_ms)
            return 0;
        pthread_mutex_lock(&io->core->mu);
        io->core->reconnects++;
        pthread_mutex_unlock(&io->core->mu);
        return 1;
    }
    worker_seen_t *seen = realloc(io->seen, (io->nseen + 1) * sizeof *seen);
    if (seen == NULL)
        return 1; /* only the counter and the backoff suffer */
    io->seen = seen;
    memset(&seen[io->nseen], 0, sizeof seen[0]);
    snprintf(seen[io->nseen++].addr, sizeof seen[0].addr, "%s", addr);
    return 1;
}

/* Connects to every listed worker not connected yet. A worker whose link
 * dropped is connected again at an attach refresh, with backoff when its
 * connections keep failing. */
static void sync_workers(dpp_client_io_t *io, char *const *addrs, size_t n)
{
    for (size_t i = 0; i < n && !io->stopping; i++) {
        wlink_t *l = io->links;
        while (l && strcmp(l->addr, addrs[i]) != 0)
            l = l->next;
        if (l)
            continue;
        struct sockaddr_storage ss;
        if (dpp_addr_parse(addrs[i], &ss) != 0)
            continue;
        if (!worker_due(io, addrs[i]))
            continue;
        l = calloc(1, sizeof *l);
        if (l == NULL)
            return;
        l->io = io;
        l->id = ++io->next_link_id;
        snprintf(l->addr, sizeof l->addr, "%s", addrs[i]);
        if (dpp_conn_init(&io->loop, &l->conn, on_link_frame, on_link_closed, l) != 0) {
            free(l);
            continue;
        }
        l->conn.payload_sink = link_sink;
        l->conn.payload_sink_free = link_sink_free;
        DPP_DLIST_PUSH(io->links, l);
        if (dpp_conn_connect(&l->conn, (struct sockaddr *)&ss, on_worker_connected) != 0)
            dpp_conn_close(&l->conn, DPP_ECLOSED);
    }
}

/* ---- master link -------------------------------------------------------- */

static void send_attach_req(dpp_client_io_t *io, int detach)
{
    Dpp__AttachRequest req = DPP__ATTACH_REQUEST__INIT;
    req.detach = detach;
    req.session_id = io->session;
    req.rank = io->rank;
    uint64_t hist[16];
    pthread_mutex_lock(&io->core->mu);
    req.prefetch_splits = io->window_sent = dpp__core_window(io->core);
    req.batches = io->core->rep_batches;
    req.wait_ns = io->core->rep_wait_ns;
    memcpy(hist, io->core->rep_hist, sizeof hist);
    pthread_mutex_unlock(&io->core->mu);
    req.open_ns = dpp_now_ns() - io->core->open_ns;
    req.n_wait_hist = 16;
    req.wait_hist = hist;
    req.client_id = io->core->client_id;
    req.generation = io->core->generation;
    req.generation_known = 1;
    char *lost[DPP_CLIENT_MAX_LOST];
    for (size_t i = 0; i < io->nlost; i++)
        lost[i] = io->lost[i];
    req.lost_workers = lost;
    req.n_lost_workers = io->nlost;
    io->lost_sent = io->nlost;
    io->unconf_upto = io->nunconf;
    pthread_mutex_lock(&io->core->mu);
    int verdict = io->core->verdict == VERDICT_ASKED && io->core->nack == 0;
    pthread_mutex_unlock(&io->core->mu);
    if (dpp_conn_send(&io->ml->conn, DPP_MSG_ATTACH, &req.base) == 0) {
        io->attach_inflight = 1;
        io->verdict_attach = verdict;
    }
}

static void send_attach(dpp_client_io_t *io)
{
    send_attach_req(io, 0);
}

/* Sends queued credits and, when the master link is up, queued acks. */
static void drain_queues(dpp_client_io_t *io)
{
    dpp_core_t *core = io->core;
    pthread_mutex_lock(&core->mu);
    for (size_t i = 0; i < core->ncredit; i++) {
        for (wlink_t *l = io->links; l; l = l->next)
            if (l->id == core->credit_q[i] && l->ready)
                l->owed++;
    }
    core->ncredit = 0;
    grant_credits(io);
    if (io->ml && io->ml->ready) {
        if (io->nunconf + core->nack > io->unconf_cap) {
            size_t cap = io->unconf_cap ? io->unconf_cap : 64;
            while (cap < io->nunconf + core->nack)
                cap *= 2;
            void *q = realloc(io->unconf, cap * sizeof *io->unconf);
            if (q == NULL) { /* not sent: they stay queued */
                pthread_mutex_unlock(&core->mu);
                return;
            }
            io->unconf = q;
            io->unconf_cap = cap;
        }
        for (size_t i = 0; i < core->nack; i++) {
            Dpp__SplitConsumed a = DPP__SPLIT_CONSUMED__INIT;
            a.session_id = io->session;
            a.rank = io->rank;
            a.epoch = core->ack_q[i][0];
            a.split_id = core->ack_q[i][1];
            a.generation = core->generation;
            dpp_conn_send(&io->ml->conn, DPP_MSG_SPLIT_CONSUMED, &a.base);
            memcpy(io->unconf[io->nunconf++], core->ack_q[i], sizeof core->ack_q[i]);
        }
        core->nack = 0;
    }
    int ask = core->verdict == VERDICT_ASKED;
    pthread_mutex_unlock(&core->mu);
    /* the master's word on the session after the last acknowledgement */
    if (ask && io->ml && io->ml->ready && !io->attach_inflight && !io->stopping)
        send_attach(io);
}

static void fail_client(dpp_client_io_t *io, int err, const char *text)
{
    pthread_mutex_lock(&io->core->mu);
    dpp__core_fail(io->core, err, text);
    pthread_mutex_unlock(&io->core->mu);
}

static void on_master_frame(dpp_conn_t *conn, const dpp_frame_t *f, const ProtobufCMessage *m)
{
    mlink_t *ml = dpp_container_of(conn, mlink_t, conn);
    dpp_client_io_t *io = ml->io;
    switch (f->type) {
    case DPP_MSG_HELLO_REPLY:
        if (answer_hello(io, conn, &ml->auth, (Dpp__HelloReply *)m) != 0)
            break;
        ml->ready = 1;
        io->backoff_ms = 100;
        if (io->stopping) { /* closing: what is unconfirmed, then goodbye */
            drain_queues(io);
            send_attach_req(io, 1);
            break;
        }
        send_attach(io);
        drain_queues(io);
        break;
    case DPP_MSG_ATTACH_REPLY: {
        Dpp__AttachReply *r = (Dpp__AttachReply *)m;
        io->attach_inflight = 0;
        int verdict = io->verdict_attach;
        io->verdict_attach = 0;
        /* the master took the lost workers of the last attach */
        memmove(io->lost, io->lost[io->lost_sent],
                (io->nlost - io->lost_sent) * sizeof io->lost[0]);
        io->nlost -= io->lost_sent;
        io->lost_sent = 0;
        /* and journaled every acknowledgement sent before it */
        if (io->unconf_upto > 0) {
            memmove(io->unconf, io->unconf + io->unconf_upto,
                    (io->nunconf - io->unconf_upto) * sizeof *io->unconf);
            io->nunconf -= io->unconf_upto;
            io->unconf_upto = 0;
        }
        if (io->stopping) {
            if (!acks_outstanding(io))
                finish_close(io);
            break;
        }
        io->next_attach_ms =
            dpp_now_ms() + (r->n_workers ? ATTACH_EVERY_MS : ATTACH_EVERY_NO_WORKERS_MS);
        if (dpp__state_failed(r->state)) {
            fail_client(io, DPP_EFAILED, r->error);
        } else {
            pthread_mutex_lock(&io->core->mu);
            if (verdict && !r->rank_reports_due) { /* sent after the last acknowledgement */
                io->core->verdict = VERDICT_OK;
                pthread_cond_broadcast(&io->core->cv);
            } else if (verdict) {
                /* the master still waits for a worker's word on a split of
                 * this rank, which may fail the session: ask again soon */
                io->next_attach_ms = dpp_now_ms() + VERDICT_RETRY_MS;
            } else if (io->core->verdict == VERDICT_ASKED) {
                io->next_attach_ms = 0;
            }
            dpp__core_plan(io->core, r);
            dpp__core_take_key(io->core, r);
            dpp__core_take_rest(io->core, r);
            pthread_mutex_unlock(&io->core->mu);
            sync_workers(io, r->workers, r->n_workers);
        }
        break;
    }
    case DPP_MSG_ERROR: {
        Dpp__Error *e = (Dpp__Error *)m;
        io->attach_inflight = 0;
        if (e->code == DPP_ENOSESSION || e->code == DPP_ERANK || e->code == DPP_EAUTH ||
            e->code == DPP_EHELD) {
            fail_client(io, e->code, e->message);
            /* closing: no reply will confirm the acknowledgements (a reader
             * of an elastic resume's old world: they were dropped) */
            if (io->stopping)
                finish_close(io);
        }
        break;
    }
    default:
        dpp_conn_close(conn, DPP_EMSGTYPE);
    }
}

static void on_master_closed(dpp_conn_t *conn)
{
    mlink_t *ml = dpp_container_of(conn, mlink_t, conn);
    dpp_client_io_t *io = ml->io;
    io->ml = NULL;
    io->attach_inflight = 0;
    io->verdict_attach = 0;
    /* what it may not have journaled goes again on the next connection */
    pthread_mutex_lock(&io->core->mu);
    for (size_t i = 0; i < io->nunconf; i++)
        dpp__core_ack(io->core, io->unconf[i][0], io->unconf[i][1]);
    pthread_mutex_unlock(&io->core->mu);
    io->nunconf = io->unconf_upto = 0;
    io->next_connect_ms = dpp_now_ms() + io->backoff_ms;
    io->backoff_ms = io->backoff_ms >= 2500 ? 5000 : io->backoff_ms * 2;
    free(ml);
}

static void connect_master(dpp_client_io_t *io)
{
    if (io->master_connected_once) {
        pthread_mutex_lock(&io->core->mu);
        io->core->reconnects++;
        pthread_mutex_unlock(&io->core->mu);
    }
    io->master_connected_once = 1;
    mlink_t *ml = calloc(1, sizeof *ml);
    if (ml == NULL)
        return;
    ml->io = io;
    if (dpp_conn_init(&io->loop, &ml->conn, on_master_frame, on_master_closed, ml) != 0) {
        free(ml);
        return;
    }
    io->ml = ml;
    if (dpp_conn_connect(&ml->conn, (struct sockaddr *)&io->master_ss, on_master_connected) != 0)
        dpp_conn_close(&ml->conn, DPP_ECLOSED);
}

/* ---- thread ------------------------------------------------------------- */

/* Ends the loop: closes the timer and the master link (after what is
 * queued on it is written). */
static void finish_close(dpp_client_io_t *io)
{
    if (!uv_is_closing((uv_handle_t *)&io->timer))
        uv_close((uv_handle_t *)&io->timer, NULL);
    if (io->ml)
        dpp_conn_finish(&io->ml->conn);
}

static int acks_outstanding(dpp_client_io_t *io)
{
    pthread_mutex_lock(&io->core->mu);
    size_t n = io->core->nack;
    pthread_mutex_unlock(&io->core->mu);
    return n + io->nunconf > 0;
}

/* Closing: the worker links go at once; the master gets the last
 * acknowledgements and the trainer's final counters (a detaching attach),
 * and while acknowledgements are unconfirmed (the master may be restarting)
 * the client waits for their confirmation, at most DPP_CLIENT_CLOSE_MS, so
 * that a session whose last split was consumed ends done. */
static void close_all(dpp_client_io_t *io)
{
    io->stopping = 1;
    pthread_mutex_lock(&io->core->mu);
    io->core->closed = 1; /* batches released from now on don't touch the loop */
    io->core->wake = NULL;
    pthread_mutex_unlock(&io->core->mu);
    uv_close((uv_handle_t *)&io->wake, NULL);
    for (wlink_t *l = io->links; l; l = l->next)
        dpp_conn_close(&l->conn, DPP_ECLOSED);
    io->close_deadline_ms = dpp_now_ms() + DPP_CLIENT_CLOSE_MS;
    drain_queues(io);
    if (io->ml && io->ml->ready)
        send_attach_req(io, 1); /* the trainer's final counters; the rank is gone */
    if (!acks_outstanding(io))
        finish_close(io);
}

static void on_wake(uv_async_t *a)
{
    dpp_client_io_t *io = dpp_container_of(a, dpp_client_io_t, wake);
    if (atomic_load(&io->stop)) {
        if (!io->stopping)
            close_all(io);
        return;
    }
    drain_queues(io);
}

static int window_changed(dpp_client_io_t *io)
{
    pthread_mutex_lock(&io->core->mu);
    int changed = dpp__core_window(io->core) != io->window_sent;
    pthread_mutex_unlock(&io->core->mu);
    return changed;
}

static void on_timer(uv_timer_t *t)
{
    dpp_client_io_t *io = dpp_container_of(t, dpp_client_io_t, timer);
    int64_t now = dpp_now_ms();
    if (io->stopping) {
        if (now >= io->close_deadline_ms || !acks_outstanding(io))
            finish_close(io);
        else if (io->ml == NULL && now >= io->next_connect_ms)
            connect_master(io);
        return;
    }
    if (now >= io->next_keepalive_ms) {
        /* workers close connections silent for their --idle-timeout-ms;
         * a trainer holding batches has no credit to send for a while */
        for (wlink_t *l = io->links; l; l = l->next)
            if (l->ready && !l->conn.closing)
                send_credit(l, 0);
        io->next_keepalive_ms = now + KEEPALIVE_MS;
    }
    if (io->ml == NULL && now >= io->next_connect_ms)
        connect_master(io);
    else if (io->ml && io->ml->ready && !io->attach_inflight && now >= io->next_attach_ms)
        send_attach(io);
    else if (io->ml && io->ml->ready && !io->attach_inflight && window_changed(io))
        send_attach(io); /* a trainer hoarding batches shrinks what is leased ahead now */
}

static void io_main(void *arg)
{
    dpp_client_io_t *io = arg;
    /* A worker that goes away must not kill the trainer with SIGPIPE. The
     * signal of a failed socket write goes to the writing thread, so blocking
     * it here leaves the process's own disposition alone; writes see EPIPE. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    uv_run(&io->loop, UV_RUN_DEFAULT);
}

int dpp__io_start(dpp_core_t *core, const char *session, unsigned rank, const dpp_auth_t *auth,
                  const struct sockaddr_storage *master, char *const *workers, size_t nworkers,
                  dpp_client_io_t **out)
{
    dpp_client_io_t *io = calloc(1, sizeof *io);
    if (io == NULL)
        return -ENOMEM;
    snprintf(io->session, sizeof io->session, "%s", session);
    io->rank = rank;
    io->auth = auth;
    io->core = core;
    io->master_ss = *master;
    io->backoff_ms = 100;
    atomic_init(&io->stop, 0);
    int rc = uv_loop_init(&io->loop);
    if (rc) {
        free(io);
        return rc;
    }
    uv_async_init(&io->loop, &io->wake, on_wake);
    uv_timer_init(&io->loop, &io->timer);
    uv_timer_start(&io->timer, on_timer, 20, 20);
    io->next_attach_ms = dpp_now_ms() + ATTACH_EVERY_MS;
    connect_master(io);
    sync_workers(io, workers, nworkers);
    core->wake = &io->wake;
    *out = io;
    rc = uv_thread_create(&io->thread, io_main, io);
    if (rc) {
        close_all(io);
        uv_run(&io->loop, UV_RUN_DEFAULT);
        uv_loop_close(&io->loop);
        free(io->seen);
        free(io);
        *out = NULL;
        return rc;
    }
    return 0;
}

void dpp__io_stop(dpp_client_io_t *io)
{
    if (io == NULL)
        return;
    atomic_store(&io->stop, 1);
    uv_async_send(&io->wake);
    uv_thread_join(&io->thread);
    uv_loop_close(&io->loop);
    free(io->seen);
    free(io->unconf);
    free(io);
}
