// SPDX-License-Identifier: Apache-2.0
// bench_master: how much master work a split costs, and how many splits per
// second one master moves. Starts a dpp-master process on a synthetic table
// of many small splits, then plays W workers and R trainer ranks over real
// connections on one libuv loop, each worker keeping one lease request
// outstanding: a worker answers an index task at once, reports a split
// produced as soon as it is leased, and that split's rank acknowledges it
// (no data moves: the master never reads rows). Prints splits per second
// through lease -> done -> consumed, the master's CPU time per split, the
// lease latency percentiles the workers saw, and the master's memory per
// split and per file, which decide how many workers, trainers and files one
// master can serve.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "wire/handshake.h"
#include "wire/net.h"

#define RECORD_BYTES 100 /* the files are never read: only their sizes count */
#define MAX_WORKERS 4000
#define MAX_RANKS 256
#define LEASE_BUCKETS 13 /* MasterStatus.lease_buckets */

typedef struct bench bench_t;

/* A split a simulated worker holds while it "works" on it. */
typedef struct held {
    uint64_t lease_id;
    uint32_t split_id, rank, epoch, rows;
} held_t;

/* One simulated worker or trainer rank: a connection to the master. */
typedef struct sim {
    dpp_conn_t conn;
    dpp_auth_state_t auth;
    bench_t *b;
    int is_rank;
    unsigned rank;
    int ready;          /* handshake done (worker: and registered) */
    uint64_t worker_id; /* worker */
    uint64_t asked_ns;  /* worker: when its lease request went out */
    int asking;         /* worker: a lease request waits to be written */
    uint64_t client_id; /* rank */
    uv_timer_t work;    /* worker: its splits' work time */
    held_t *held;       /* worker: the splits leased to it, [threads] */
    size_t nheld;
    int worked; /* worker: had splits before */
} sim_t;

struct bench {
    uv_loop_t *loop;
    struct sockaddr_storage addr;
    dpp_auth_t auth;
    sim_t *workers, *ranks;
    unsigned nworkers, nranks, prefetch, threads, work_ms;
    int together; /* --start together: no worker's first splits are shortened */
    unsigned ready_ranks, ready_workers;
    char session[32];
    uint64_t records, split_rows;
    uint64_t *bounds;
    size_t nbounds;
    uint64_t total, done, indexed, attaches;
    uint64_t *lat; /* lease latencies of split leases, ns */
    size_t nlat, lat_cap;
    /* the master's lease histogram when 10% and 90% of the splits were
     * done: its own view of the steady state */
    dpp_sync_conn_t ctl;
    uint64_t hist[2][LEASE_BUCKETS];
    int nhist, no_hist;
    uint64_t first_split_ns, last_ns;
    double cpu_first_split;
    size_t rss_first_split;
    pid_t master;
    uv_timer_t timer;
    /* Frames are held in their connections (conn.hold) and written once per
     * loop turn, as the daemons do: a turn's frames to the master on one
     * connection are one write. */
    int hold;
    dpp_conn_t *held;
    uv_prepare_t flush;
    int failed;
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_master: %s: %s\n", what, dpp_strerror(rc));
    exit(1);
}

/* utime + stime of pid from /proc, seconds. */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(buf, sizeof buf, f) == NULL) {
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    char *p = strrchr(buf, ')'); /* fields after the command name */
    unsigned long utime = 0, stime = 0;
    /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime);
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* VmRSS of pid, bytes. */
static size_t rss_bytes(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %zu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static void send_or_die(dpp_conn_t *c, uint16_t type, const ProtobufCMessage *m)
{
    int rc = dpp_conn_send(c, type, m);
    if (rc)
        die(dpp_msg_name(type), rc);
}

static void attach(sim_t *r)
{
    Dpp__AttachRequest a = DPP__ATTACH_REQUEST__INIT;
    a.session_id = r->b->session;
    a.rank = r->rank;
    a.prefetch_splits = r->b->prefetch;
    a.client_id = r->client_id;
    send_or_die(&r->conn, DPP_MSG_ATTACH, &a.base);
}

static void ask_lease(sim_t *w)
{
    Dpp__LeaseRequest lr = DPP__LEASE_REQUEST__INIT;
    lr.max_leases = w->b->threads; /* one split per pipeline thread, as dpp-worker asks */
    lr.max_index_tasks = 16 * w->b->threads;
    w->asking = 1; /* timed from its write (on_flush) */
    send_or_die(&w->conn, DPP_MSG_LEASE, &lr.base);
}

static void start_workers(bench_t *b)
{
    for (unsigned k = 0; k < b->nworkers; k++)
        dpp_handshake_hello(&b->workers[k].conn, &b->workers[k].auth, &b->auth, "worker");
}

static void finish(bench_t *b)
{
    b->last_ns = dpp_now_ns();
    uv_timer_stop(&b->timer);
    for (unsigned k = 0; k < b->nworkers; k++) {
        dpp_conn_close(&b->workers[k].conn, 0);
        uv_close((uv_handle_t *)&b->workers[k].work, NULL);
    }
    for (unsigned r = 0; r < b->nranks; r++)
        dpp_conn_close(&b->ranks[r].conn, 0);
    uv_close((uv_handle_t *)&b->timer, NULL);
    b->hold = 0;
    dpp_conn_release_list(&b->held, 1);
    uv_close((uv_handle_t *)&b->flush, NULL);
}

static ProtobufCMessage *call(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *m,
                              uint16_t want);

/* Keeps the master's lease histogram now (a status call: blocks the
 * loop for a moment, twice a run). */
static void snap_master(bench_t *b)
{
    Dpp__StatusRequest q = DPP__STATUS_REQUEST__INIT;
    q.session_id = b->session;
    Dpp__StatusReply *r =
        (Dpp__StatusReply *)call(&b->ctl, DPP_MSG_STATUS, &q.base, DPP_MSG_STATUS_REPLY);
    if (r->master && r->master->n_lease_buckets == LEASE_BUCKETS)
        memcpy(b->hist[b->nhist], r->master->lease_buckets, sizeof b->hist[0]);
    else
        b->no_hist = 1; /* a master from before MasterStatus */
    b->nhist++;
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* Quantile q of the master's lease waits between the two snapshots: the
 * upper bound of the bucket holding it, ms (-1: past the last bound). */
static double master_quantile_ms(const bench_t *b, double q)
{
    static const double bounds_ms[LEASE_BUCKETS - 1] = {1,   2.5, 5,   10,   25,   50,
                                                        100, 250, 500, 1000, 2500, 10000};
    uint64_t total = 0, cum = 0;
    for (int k = 0; k < LEASE_BUCKETS; k++)
        total += b->hist[1][k] - b->hist[0][k];
    for (int k = 0; k < LEASE_BUCKETS - 1; k++) {
        cum += b->hist[1][k] - b->hist[0][k];
        if ((double)cum >= q * (double)total)
            return bounds_ms[k];
    }
    return -1;
}

/* The worker's splits are made: it reports each, the split's rank
 * acknowledges it (its client has the blocks), and the worker asks again. */
static void on_work_done(uv_timer_t *t)
{
    sim_t *w = dpp_container_of(t, sim_t, work);
    bench_t *b = w->b;
    for (size_t i = 0; i < w->nheld; i++) {
        const held_t *h = &w->held[i];
        Dpp__SplitDone d = DPP__SPLIT_DONE__INIT;
        d.lease_id = h->lease_id;
        d.session_id = b->session;
        d.split_id = h->split_id;
        d.blocks = 2;
        d.rows = h->rows;
        send_or_die(&w->conn, DPP_MSG_SPLIT_DONE, &d.base);
        Dpp__SplitConsumed c = DPP__SPLIT_CONSUMED__INIT;
        c.session_id = b->session;
        c.rank = h->rank;
        c.epoch = h->epoch;
        c.split_id = h->split_id;
        send_or_die(&b->ranks[h->rank].conn, DPP_MSG_SPLIT_CONSUMED, &c.base);
        b->done++;
    }
    w->nheld = 0;
    if (b->nhist < 2 && b->done >= b->total * (b->nhist ? 9 : 1) / 10)
        snap_master(b);
    if (b->done < b->total)
        ask_lease(w);
    else
        finish(b);
}

static void on_lease_reply(sim_t *w, const Dpp__LeaseReply *rep)
{
    bench_t *b = w->b;
    uint64_t now = dpp_now_ns();
    for (size_t i = 0; i < rep->n_leases; i++) {
        const Dpp__Lease *l = rep->leases[i];
        if (l->kind == DPP__LEASE__KIND__INDEX) {
            Dpp__IndexDone d = DPP__INDEX_DONE__INIT;
            d.lease_id = l->lease_id;
            d.session_id = l->session_id;
            d.file = l->split_id;
            d.records = b->records;
            d.boundaries = b->bounds;
            d.n_boundaries = b->nbounds;
            send_or_die(&w->conn, DPP_MSG_INDEX_DONE, &d.base);
            b->indexed++;
            continue;
        }
        if (b->first_split_ns == 0) {
            b->first_split_ns = now;
            b->cpu_first_split = cpu_seconds(b->master);
            b->rss_first_split = rss_bytes(b->master);
        }
        if (b->nlat == b->lat_cap) {
            b->lat_cap = b->lat_cap ? 2 * b->lat_cap : 1 << 16;
            b->lat = realloc(b->lat, b->lat_cap * sizeof *b->lat);
        }
        b->lat[b->nlat++] = now - w->asked_ns;
        if (l->rank >= b->nranks || w->nheld >= b->threads)
            die("a lease for an unknown rank, or more than asked for", DPP_EINVAL);
        w->held[w->nheld++] =
            (held_t){l->lease_id, l->split_id, l->rank, l->epoch, (uint32_t)l->record_take};
    }
    if (w->nheld > 0) {
        /* Worker i's first splits take i/W of the work time, so that the
         * workers' cycles are spread over it as in a cluster that has been
         * running for a while; with the same work time for every split,
         * workers that all start at once would otherwise stay in step for
         * many cycles, each cycle's requests reaching the master together. */
        uint64_t ms = b->work_ms;
        if (!w->worked && !b->together)
            ms = (uint64_t)(w - b->workers) * b->work_ms / b->nworkers;
        w->worked = 1;
        uv_timer_start(&w->work, on_work_done, ms, 0);
    } else if (b->done < b->total)
        ask_lease(w); /* index tasks only: answered already */
}

static void on_frame(dpp_conn_t *c, const dpp_frame_t *f, const ProtobufCMessage *msg)
{
    sim_t *s = dpp_container_of(c, sim_t, conn);
    bench_t *b = s->b;
    char err[256];
    switch (f->type) {
    case DPP_MSG_HELLO_REPLY:
        if (dpp_handshake_answer(c, &s->auth, &b->auth, s->is_rank ? "client" : "worker",
                                 (const Dpp__HelloReply *)msg, err, sizeof err) != 0) {
            fprintf(stderr, "bench_master: handshake: %s\n", err);
            exit(1);
        }
        if (s->is_rank) {
            attach(s);
        } else {
            Dpp__RegisterRequest reg = DPP__REGISTER_REQUEST__INIT;
            reg.data_addr = "127.0.0.1:1";
            reg.threads = b->threads;
            send_or_die(c, DPP_MSG_REGISTER, &reg.base);
        }
        break;
    case DPP_MSG_ATTACH_REPLY:
        b->attaches++;
        if (!s->ready) {
            s->ready = 1;
            /* workers start once every rank is attached: the master leases
             * only for attached ranks */
            if (++b->ready_ranks == b->nranks)
                start_workers(b);
        }
        break;
    case DPP_MSG_REGISTER_REPLY:
        s->worker_id = ((const Dpp__RegisterReply *)msg)->worker_id;
        s->ready = 1;
        b->ready_workers++;
        ask_lease(s);
        break;
    case DPP_MSG_LEASE_REPLY:
        on_lease_reply(s, (const Dpp__LeaseReply *)msg);
        break;
    case DPP_MSG_HEARTBEAT:
        break;
    case DPP_MSG_ERROR:
        fprintf(stderr, "bench_master: the master said: %s\n", ((const Dpp__Error *)msg)->message);
        exit(1);
    default:
        fprintf(stderr, "bench_master: unexpected %s\n", dpp_msg_name(f->type));
        exit(1);
    }
}

static void on_closed(dpp_conn_t *c)
{
    sim_t *s = dpp_container_of(c, sim_t, conn);
    if (s->b->done < s->b->total) {
        fprintf(stderr, "bench_master: the master closed a connection: %s\n",
                c->error ? dpp_strerror(c->error) : "closed");
        exit(1);
    }
}

static void on_connected(dpp_conn_t *c, int status)
{
    sim_t *s = dpp_container_of(c, sim_t, conn);
    if (status != 0)
        die("connect", status);
    /* ranks say HELLO first; workers once every rank is attached */
    if (s->is_rank)
        dpp_handshake_hello(c, &s->auth, &s->b->auth, "client");
}

/* Every second: ranks stay attached, workers alive. */
static void on_timer(uv_timer_t *t)
{
    bench_t *b = dpp_container_of(t, bench_t, timer);
    for (unsigned r = 0; r < b->nranks; r++)
        if (b->ranks[r].ready)
            attach(&b->ranks[r]);
    for (unsigned k = 0; k < b->nworkers; k++) {
        sim_t *w = &b->workers[k];
        if (!w->ready)
            continue;
        Dpp__Heartbeat hb = DPP__HEARTBEAT__INIT;
        hb.worker_id = w->worker_id;
        send_or_die(&w->conn, DPP_MSG_HEARTBEAT, &hb.base);
    }
}

static void connect_sim(bench_t *b, sim_t *s)
{
    s->b = b;
    if (dpp_conn_init(b->loop, &s->conn, on_frame, on_closed, s) != 0 ||
        dpp_conn_connect(&s->conn, (struct sockaddr *)&b->addr, on_connected) != 0)
        die("connect", -EIO);
    s->conn.hold = &b->hold;
    s->conn.held_list = &b->held;
}

/* Writes what the turn held, one connection after the other; a lease
 * request's wait starts at its own write. A turn that ran a thousand
 * workers' timers writes for milliseconds: timed from ask_lease(), the
 * last ones would count the bench's writes of all the others, a cost a
 * real worker, alone on its host, does not pay. */
static void on_flush(uv_prepare_t *h)
{
    bench_t *b = dpp_container_of(h, bench_t, flush);
    while (b->held) {
        dpp_conn_t *c = b->held;
        sim_t *s = dpp_container_of(c, sim_t, conn);
        b->held = c->held_next;
        c->held_next = NULL;
        if (s->asking) {
            s->asked_ns = dpp_now_ns();
            s->asking = 0;
        }
        dpp_conn_release(c, 1);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(const uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1));
    return (double)v[i] / 1e6;
}

static ProtobufCMessage *call(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *m,
                              uint16_t want)
{
    uint16_t got;
    ProtobufCMessage *r;
    int rc = dpp_sync_call(c, type, m, &got, &r, 30000);
    if (rc)
        die(dpp_msg_name(type), rc);
    if (got != want) {
        fprintf(stderr, "bench_master: %s answered %s%s%s\n", dpp_msg_name(type), dpp_msg_name(got),
                got == DPP_MSG_ERROR ? ": " : "",
                got == DPP_MSG_ERROR ? ((Dpp__Error *)r)->message : "");
        exit(1);
    }
    return r;
}

/* Waits until the master says the session is done (it has taken every
 * acknowledgement the bench sent); *ms: the master's own figures then. */
static void wait_done(const char *addr, const char *session, Dpp__MasterStatus *ms)
{
    dpp_sync_conn_t ctl;
    int rc = dpp_sync_connect(&ctl, addr, "ctl", 10000, NULL);
    if (rc)
        die("connect", rc);
    for (int i = 0; i < 3000; i++) {
        Dpp__StatusRequest q = DPP__STATUS_REQUEST__INIT;
        q.session_id = (char *)session;
        Dpp__StatusReply *r =
            (Dpp__StatusReply *)call(&ctl, DPP_MSG_STATUS, &q.base, DPP_MSG_STATUS_REPLY);
        int done = r->n_sessions == 1 && strcmp(r->sessions[0]->state, "done") == 0;
        if (r->master)
            *ms = *r->master;
        protobuf_c_message_free_unpacked(&r->base, NULL);
        if (done)
            break;
        usleep(2000);
    }
    dpp_sync_close(&ctl);
}

static void attach_sync(dpp_sync_conn_t *c, const char *session)
{
    Dpp__AttachRequest a = DPP__ATTACH_REQUEST__INIT;
    a.session_id = (char *)session;
    a.client_id = 0x5e55;
    protobuf_c_message_free_unpacked(call(c, DPP_MSG_ATTACH, &a.base, DPP_MSG_ATTACH_REPLY), NULL);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* --sessions N: N short sessions one after the other, each one split of a
 * one-file table (submit, attach, lease, done, consumed), against a master
 * that forgets finished sessions after a second: prints, every N/10, the
 * rate and what the master holds (journal bytes, RSS), which must stay
 * bounded however many sessions went through. */
static void run_sessions(const char *addr, pid_t pid, const char *state, uint64_t n,
                         uint64_t records)
{
    dpp_sync_conn_t ctl, worker, client;
    int rc;
    if ((rc = dpp_sync_connect(&ctl, addr, "ctl", 10000, NULL)) != 0 ||
        (rc = dpp_sync_connect(&worker, addr, "worker", 10000, NULL)) != 0 ||
        (rc = dpp_sync_connect(&client, addr, "client", 10000, NULL)) != 0)
        die("connect", rc);
    Dpp__RegisterRequest reg = DPP__REGISTER_REQUEST__INIT;
    reg.data_addr = "127.0.0.1:1";
    reg.threads = 1;
    protobuf_c_message_free_unpacked(
        call(&worker, DPP_MSG_REGISTER, &reg.base, DPP_MSG_REGISTER_REPLY), NULL);
    char journal[4500];
    snprintf(journal, sizeof journal, "%s/journal", state);
    uint64_t bounds[2] = {0, records * RECORD_BYTES}, max_journal = 0;
    size_t max_rss = 0;
    const char *spec = "{\"table\":\"one\",\"batch_size\":1000,\"split_rows\":1000,"
                       "\"remainder\":\"keep\",\"features\":{\"dense\":[{\"name\":\"x\"}]},"
                       "\"label\":{\"name\":\"y\"}}";
    uint64_t t0 = dpp_now_ns(), tlast = t0;
    double cpu0 = cpu_seconds(pid);
    printf("bench_master: %" PRIu64 " sessions of one split, one after the other, "
           "--session-retention 1, --journal-compact-kb 1024\n",
           n);
    for (uint64_t k = 0; k < n; k++) {
        Dpp__SubmitRequest sub = DPP__SUBMIT_REQUEST__INIT;
        sub.spec_json = (char *)spec;
        Dpp__SubmitReply *sr =
            (Dpp__SubmitReply *)call(&ctl, DPP_MSG_SUBMIT, &sub.base, DPP_MSG_SUBMIT_REPLY);
        char session[32];
        snprintf(session, sizeof session, "%s", sr->session_id);
        protobuf_c_message_free_unpacked(&sr->base, NULL);
        attach_sync(&client, session);
        for (int got = 0; !got;) { /* the first session indexes the file; the rest use the cache */
            Dpp__LeaseRequest lr = DPP__LEASE_REQUEST__INIT;
            lr.max_leases = 1;
            lr.max_index_tasks = 1;
            Dpp__LeaseReply *rep =
                (Dpp__LeaseReply *)call(&worker, DPP_MSG_LEASE, &lr.base, DPP_MSG_LEASE_REPLY);
            for (size_t i = 0; i < rep->n_leases; i++) {
                const Dpp__Lease *l = rep->leases[i];
                if (l->kind == DPP__LEASE__KIND__INDEX) {
                    Dpp__IndexDone d = DPP__INDEX_DONE__INIT;
                    d.lease_id = l->lease_id;
                    d.session_id = l->session_id;
                    d.file = l->split_id;
                    d.records = records;
                    d.boundaries = bounds;
                    d.n_boundaries = 2;
                    if ((rc = dpp_sync_send(&worker, DPP_MSG_INDEX_DONE, &d.base, 30000)) != 0)
                        die("INDEX_DONE", rc);
                    continue;
                }
                Dpp__SplitDone d = DPP__SPLIT_DONE__INIT;
                d.lease_id = l->lease_id;
                d.session_id = l->session_id;
                d.split_id = l->split_id;
                d.blocks = 2;
                d.rows = l->record_take;
                Dpp__SplitConsumed c = DPP__SPLIT_CONSUMED__INIT;
                c.session_id = session;
                c.epoch = l->epoch;
                c.split_id = l->split_id;
                if ((rc = dpp_sync_send(&worker, DPP_MSG_SPLIT_DONE, &d.base, 30000)) != 0 ||
                    (rc = dpp_sync_send(&client, DPP_MSG_SPLIT_CONSUMED, &c.base, 30000)) != 0)
                    die("SPLIT_DONE", rc);
                got = 1;
            }
            protobuf_c_message_free_unpacked(&rep->base, NULL);
        }
        uint64_t bytes = file_size(journal);
        if (bytes > max_journal)
            max_journal = bytes;
        if ((k + 1) % (n / 10 ? n / 10 : 1) == 0) {
            size_t rss = rss_bytes(pid);
            if (rss > max_rss)
                max_rss = rss;
            uint64_t now = dpp_now_ns();
            printf("  %7" PRIu64 " sessions  %6.0f sessions/s  journal %8" PRIu64
                   " bytes (max so far %" PRIu64 ")  master RSS %.1f MiB\n",
                   k + 1, (double)(n / 10 ? n / 10 : 1) / ((double)(now - tlast) / 1e9), bytes,
                   max_journal, (double)rss / 1048576);
            fflush(stdout);
            tlast = now;
        }
    }
    double secs = (double)(dpp_now_ns() - t0) / 1e9;
    printf("%" PRIu64 " sessions in %.1f s = %.0f sessions/s, master CPU %.1f us a session; "
           "journal at most %" PRIu64 " bytes, master RSS at most %.1f MiB\n",
           n, secs, (double)n / secs, (cpu_seconds(pid) - cpu0) * 1e6 / (double)n, max_journal,
           (double)max_rss / 1048576);
    dpp_sync_close(&ctl);
    dpp_sync_close(&worker);
    dpp_sync_close(&client);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_master [--master-bin PATH] [--files F] [--split-rows S] [--epochs E]\n"
            "                    [--workers W] [--threads T] [--work-ms D] [--ranks R]\n"
            "                    [--prefetch P] [--start staggered|together] | --sessions N\n"
            "F files (default 200) of 1000 records cut into splits of S records\n"
            "(default 10: 20,000 splits per epoch), E epochs (default 2), W simulated\n"
            "workers (default 1000) of T pipeline threads (default 4) keeping one lease\n"
            "request each outstanding for T splits, as dpp-worker does, each split taking\n"
            "D ms of work (default 60: at most W x T / D splits/s are offered), R trainer\n"
            "ranks (default 8), each attached with prefetch_splits P (default 2048, so\n"
            "that the ranks' windows do not bound the rate).\n"
            "--start staggered (default): worker i's first splits take i/W of D, so that\n"
            "the workers' cycles are spread as in a cluster that has been running;\n"
            "--start together: every worker starts its first splits at once and works\n"
            "the full D on them, as at a job's start (the workers then stay in step for\n"
            "many cycles).\n"
            "--sessions N instead runs N one-split sessions one after the other against a\n"
            "master that forgets them a second after they end, and prints the journal's\n"
            "size and the master's RSS as they go.\n");
}

int main(int argc, char **argv)
{
    const char *master_bin = DPP_BINARY_DIR "/dpp-master";
    unsigned files = 200, split_rows = 10, epochs = 2, nworkers = 1000, nranks = 8, prefetch = 2048,
             threads = 4, work_ms = 60;
    const uint64_t records = 1000;
    unsigned sessions = 0;
    int together = 0;
    for (int i = 1; i < argc; i++) {
        unsigned *opt = NULL;
        if (strcmp(argv[i], "--master-bin") == 0 && i + 1 < argc) {
            master_bin = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--start") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "staggered") != 0 && strcmp(v, "together") != 0) {
                fprintf(stderr,
                        "bench_master: --start is staggered or together, not \"%s\" "
                        "(staggered spreads the workers' first cycles)\n",
                        v);
                return 2;
            }
            together = strcmp(v, "together") == 0;
            continue;
        }
        if (strcmp(argv[i], "--files") == 0)
            opt = &files;
        else if (strcmp(argv[i], "--split-rows") == 0)
            opt = &split_rows;
        else if (strcmp(argv[i], "--epochs") == 0)
            opt = &epochs;
        else if (strcmp(argv[i], "--workers") == 0)
            opt = &nworkers;
        else if (strcmp(argv[i], "--work-ms") == 0)
            opt = &work_ms;
        else if (strcmp(argv[i], "--threads") == 0)
            opt = &threads;
        else if (strcmp(argv[i], "--ranks") == 0)
            opt = &nranks;
        else if (strcmp(argv[i], "--prefetch") == 0)
            opt = &prefetch;
        else if (strcmp(argv[i], "--sessions") == 0)
            opt = &sessions;
        if (opt == NULL || i + 1 >= argc) {
            usage();
            return 2;
        }
        *opt = (unsigned)atoi(argv[++i]);
    }
    if (files == 0 || split_rows == 0 || epochs == 0 || nworkers == 0 || nworkers > MAX_WORKERS ||
        nranks == 0 || nranks > MAX_RANKS || threads == 0 || threads > 64) {
        usage();
        return 2;
    }
    char tmp[] = "/tmp/dpp-bench-master.XXXXXX";
    if (mkdtemp(tmp) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/root/t/ds=1", tmp);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s/state %s/root/one/ds=1", path, tmp, tmp);
    if (system(cmd) != 0)
        return 1;
    snprintf(cmd, sizeof cmd, "truncate -s %llu %s/root/one/ds=1/part-00000.tfrecord",
             (unsigned long long)records * RECORD_BYTES, tmp);
    if (system(cmd) != 0)
        return 1;
    for (unsigned i = 0; i < files; i++) {
        char f[4400];
        snprintf(f, sizeof f, "%s/part-%05u.tfrecord", path, i);
        int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ftruncate(fd, (off_t)records * RECORD_BYTES) != 0) {
            perror(f);
            return 1;
        }
        close(fd);
    }

    char port_file[4400], root[4400], state[4400];
    snprintf(port_file, sizeof port_file, "%s/port", tmp);
    snprintf(root, sizeof root, "%s/root", tmp);
    snprintf(state, sizeof state, "%s/state", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        /* the master's stdout and stderr are not the bench's pipe: a master
         * left behind must not hold it open */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDOUT_FILENO);
        execl(master_bin, master_bin, "--listen", "127.0.0.1:0", "--port-file", port_file,
              "--data-root", root, "--state-dir", state, "--log-level", "warn",
              "--journal-compact-kb", sessions ? "1024" : "1048576", "--session-retention",
              sessions ? "1" : "86400", "--max-connections", "8192", (char *)NULL);
        perror(master_bin);
        _exit(127);
    }
    char addr[64] = "";
    for (int i = 0; i < 200 && addr[0] == '\0'; i++) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fgets(addr, sizeof addr, f) == NULL)
                addr[0] = '\0';
            fclose(f);
        }
        addr[strcspn(addr, "\n")] = '\0';
        if (addr[0] == '\0')
            usleep(20000);
    }
    if (addr[0] == '\0') {
        fprintf(stderr, "bench_master: the master did not start\n");
        kill(pid, SIGKILL);
        return 1;
    }
    size_t rss0 = rss_bytes(pid);
    if (sessions) {
        run_sessions(addr, pid, state, sessions, records);
        kill(pid, SIGINT);
        waitpid(pid, NULL, 0);
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_master: could not remove %s\n", tmp);
        return 0;
    }

    /* the session: nothing to decode, the splits' blocks never travel */
    dpp_sync_conn_t ctl;
    int rc = dpp_sync_connect(&ctl, addr, "ctl", 10000, NULL);
    if (rc)
        die("connect", rc);
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"table\":\"t\",\"batch_size\":%u,\"epochs\":%u,\"split_rows\":%u,"
             "\"consumers\":%u,\"remainder\":\"keep\",\"features\":{\"dense\":[{\"name\":\"x\"}]},"
             "\"label\":{\"name\":\"y\"}}",
             split_rows, epochs, split_rows, nranks);
    Dpp__SubmitRequest sub = DPP__SUBMIT_REQUEST__INIT;
    sub.spec_json = spec;
    uint64_t t_submit = dpp_now_ns();
    Dpp__SubmitReply *sr =
        (Dpp__SubmitReply *)call(&ctl, DPP_MSG_SUBMIT, &sub.base, DPP_MSG_SUBMIT_REPLY);
    double submit_ms = (double)(dpp_now_ns() - t_submit) / 1e6;
    bench_t b = {.nworkers = nworkers,
                 .nranks = nranks,
                 .prefetch = prefetch,
                 .threads = threads,
                 .work_ms = work_ms,
                 .together = together,
                 .master = pid};
    snprintf(b.session, sizeof b.session, "%s", sr->session_id);
    protobuf_c_message_free_unpacked(&sr->base, NULL);
    dpp_sync_close(&ctl);

    b.loop = uv_default_loop();
    char host[64];
    snprintf(host, sizeof host, "%s", addr);
    char *colon = strrchr(host, ':');
    *colon = '\0';
    struct sockaddr_in *sin = (struct sockaddr_in *)&b.addr;
    if (uv_ip4_addr(host, atoi(colon + 1), sin) != 0)
        die("address", DPP_EINVAL);
    b.records = records;
    b.split_rows = split_rows;
    b.bounds = calloc(records / split_rows + 2, sizeof *b.bounds);
    for (uint64_t r = 0; r < records; r += split_rows)
        b.bounds[b.nbounds++] = r * RECORD_BYTES;
    b.bounds[b.nbounds++] = records * RECORD_BYTES;
    uint64_t splits_per_epoch = (uint64_t)files * ((records + split_rows - 1) / split_rows);
    b.total = splits_per_epoch * epochs;
    b.workers = calloc(nworkers, sizeof *b.workers);
    b.ranks = calloc(nranks, sizeof *b.ranks);
    for (unsigned r = 0; r < nranks; r++) {
        b.ranks[r].is_rank = 1;
        b.ranks[r].rank = r;
        b.ranks[r].client_id = 0x5eed0000u + r;
        connect_sim(&b, &b.ranks[r]);
    }
    for (unsigned k = 0; k < nworkers; k++) {
        b.workers[k].held = calloc(threads, sizeof *b.workers[k].held);
        uv_timer_init(b.loop, &b.workers[k].work);
        connect_sim(&b, &b.workers[k]);
    }
    uv_timer_init(b.loop, &b.timer);
    uv_timer_start(&b.timer, on_timer, 1000, 1000);
    b.hold = 1;
    uv_prepare_init(b.loop, &b.flush);
    uv_prepare_start(&b.flush, on_flush);
    if ((rc = dpp_sync_connect(&b.ctl, addr, "ctl", 10000, NULL)) != 0)
        die("connect", rc);
    double cpu0 = cpu_seconds(pid), self0 = cpu_seconds(getpid());
    uint64_t t0 = dpp_now_ns();
    uv_run(b.loop, UV_RUN_DEFAULT);
    dpp_sync_close(&b.ctl);
    double self_cpu = cpu_seconds(getpid()) - self0;
    Dpp__MasterStatus ms = DPP__MASTER_STATUS__INIT;
    wait_done(addr, b.session, &ms);
    uint64_t t_done = dpp_now_ns();
    double cpu_end = cpu_seconds(pid);
    size_t rss_end = rss_bytes(pid);

    double plan_s = (double)(b.first_split_ns - t0) / 1e9;
    double secs = (double)(t_done - b.first_split_ns) / 1e9;
    double cpu = cpu_end - b.cpu_first_split;
    /* the first leases queue behind the workers' first requests, which all
     * come at once, and the last ones behind the plan's end: the middle 80%
     * is the steady state a cluster sees */
    size_t skip = b.nlat / 10;
    size_t nsteady = b.nlat - 2 * skip;
    uint64_t *steady = malloc((nsteady + 1) * sizeof *steady);
    memcpy(steady, b.lat + skip, nsteady * sizeof *steady);
    qsort(steady, nsteady, sizeof *steady, cmp_u64);
    qsort(b.lat, b.nlat, sizeof *b.lat, cmp_u64);
    size_t grown = b.rss_first_split > rss0 ? b.rss_first_split - rss0 : 0;
    printf("bench_master: %u files, %" PRIu64 " splits per epoch x %u epochs, %u workers of %u "
           "threads, %u ms a split (at most %.0f splits/s offered), %u ranks (prefetch %u), "
           "workers started %s\n",
           files, splits_per_epoch, epochs, nworkers, threads, work_ms,
           work_ms ? (double)nworkers * threads * 1000 / work_ms : 0.0, nranks, prefetch,
           together ? "together" : "staggered");
    printf("planning: submit %.1f ms, %" PRIu64 " index tasks, first split leased %.3f s after "
           "the workers connected (master CPU %.3f s)\n",
           submit_ms, b.indexed, plan_s, b.cpu_first_split - cpu0);
    printf("memory: master RSS %.1f MiB idle, %.1f MiB planned (+%.0f bytes per split of an "
           "epoch, %.0f per file), %.1f MiB at the end\n",
           (double)rss0 / 1048576, (double)b.rss_first_split / 1048576,
           (double)grown / (double)splits_per_epoch, (double)grown / files,
           (double)rss_end / 1048576);
    printf("splits: %" PRIu64 " in %.3f s = %.0f splits/s through lease, done and consumed\n",
           b.total, secs, (double)b.total / secs);
    printf("master CPU: %.3f s = %.2f us per split (journal fsync included)\n", cpu,
           cpu * 1e6 / (double)b.total);
    printf("lease latency (request to reply, as the workers saw it): p50 %.2f ms, p99 %.2f ms, "
           "max %.2f ms over %zu split leases; the middle 80%%: p50 %.2f ms, p99 %.2f ms, "
           "max %.2f ms\n",
           pct_ms(b.lat, b.nlat, 0.5), pct_ms(b.lat, b.nlat, 0.99), pct_ms(b.lat, b.nlat, 1.0),
           b.nlat, pct_ms(steady, nsteady, 0.5), pct_ms(steady, nsteady, 0.99),
           pct_ms(steady, nsteady, 1.0));
    /* what the master saw: from a request parsed to its grant, without the
     * kernel's queues, the reply's fdatasync and the bench's own loop */
    if (b.nhist == 2 && !b.no_hist)
        printf("the master's view (dppctl status; bounds of its histogram buckets): lease wait p50 "
               "<= %.1f ms, p99 <= %.1f ms over %" PRIu64 " replies (start included); the middle "
               "80%%: p50 <= %.1f ms, p99 <= %.1f ms; journal fdatasync p50 <= %.1f ms, p99 <= "
               "%.1f ms over %" PRIu64 " group commits\n",
               ms.lease_p50_us / 1e3, ms.lease_p99_us / 1e3, ms.lease_replies,
               master_quantile_ms(&b, 0.5), master_quantile_ms(&b, 0.99), ms.commit_p50_us / 1e3,
               ms.commit_p99_us / 1e3, ms.commits);
    else
        printf("the master's view: not reported (a master from before dppctl status showed it)\n");
    /* on a small machine the simulated workers compete with the master for
     * the cores: their waits include their own loop's queueing */
    printf("CPU while splits moved: master %.2f s, this bench (the simulated workers and ranks, "
           "loopback TCP included) %.2f s, over %.2f s\n",
           cpu_end - cpu0, self_cpu, (double)(t_done - t0) / 1e9);
    free(steady);
    uv_loop_close(b.loop);
    kill(pid, SIGINT);
    waitpid(pid, NULL, 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_master: could not remove %s\n", tmp);
    free(b.lat);
    free(b.bounds);
    for (unsigned k = 0; k < nworkers; k++)
        free(b.workers[k].held);
    free(b.workers);
    free(b.ranks);
    return 0;
}
