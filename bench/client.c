/* SPDX-License-Identifier: Apache-2.0 */
/* bench_client: the receive path of libdppclient. A forked child runs a fake
 * master and a fake worker on 127.0.0.1 (one libuv loop, the daemons' own
 * listener and handshake, src/daemon/listener.c): the master answers ATTACH with a Criteo-like
 * session (13 dense features of dim 1, 26 sparse, batch_size 4096, one
 * epoch, rank 0 of 1) and ignores SPLIT_CONSUMED; the worker answers
 * SUBSCRIBE and streams pre-built uncompressed blocks (codec 0) one per
 * credit, exactly like dpp-worker: every split is K full blocks of batch_size
 * rows and one empty block marked `last`. The parent reads everything
 * through dpp_client_open_opts() / dpp_client_next() / dpp_batch_release(),
 * touching one label per batch, and prints GB/s and the client's CPU seconds
 * per GB (getrusage of the parent: consumer and I/O thread). Then, when
 * iperf3 is installed, one TCP stream over loopback for comparison. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <uv.h>

#include "format/block.h"
#include "daemon/listener.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"

#define NDENSE 13
#define NSPARSE 26
#define MAX_LEN 5 /* sparse ids per row: 1..MAX_LEN, like criteo.json's truncate */
#define SESSION "bench-client"

extern char **environ;

/* ---- the blocks ---------------------------------------------------------- */

typedef struct blocks {
    uint8_t *full, *empty;
    size_t full_len, empty_len;
    unsigned batch_size;
} blocks_t;

/* One block of batch_size deterministic rows and the empty `last` block. */
static void build_blocks(blocks_t *bl, unsigned batch_size)
{
    unsigned dims[NDENSE];
    for (unsigned i = 0; i < NDENSE; i++)
        dims[i] = 1;
    dpp_block_shape_t shape = {.ndense = NDENSE, .nsparse = NSPARSE, .dims = dims};
    dpp_block_builder_t b;
    if (dpp_block_builder_init(&b, &shape) != 0) {
        fprintf(stderr, "bench_client: block_builder_init failed\n");
        exit(1);
    }
    int64_t ids[NSPARSE][MAX_LEN];
    const int64_t *idp[NSPARSE];
    size_t lens[NSPARSE];
    float dense[NDENSE];
    for (unsigned r = 0; r < batch_size; r++) {
        uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ull;
        for (unsigned i = 0; i < NDENSE; i++)
            dense[i] = (float)((r * 7 + i * 13) % 1000) / 50.0f;
        for (unsigned k = 0; k < NSPARSE; k++) {
            lens[k] = 1 + (r + k) % MAX_LEN;
            for (size_t j = 0; j < lens[k]; j++)
                ids[k][j] = (int64_t)((h ^ (k * 1000003ull + j)) % 100000);
            idp[k] = ids[k];
        }
        if (dpp_block_builder_append(&b, (float)(h >> 63), dense, idp, NULL, lens) != 0) {
            fprintf(stderr, "bench_client: block_builder_append failed\n");
            exit(1);
        }
    }
    if (dpp_block_builder_finish(&b, &bl->full, &bl->full_len) != 0 ||
        dpp_block_builder_finish(&b, &bl->empty, &bl->empty_len) != 0) {
        fprintf(stderr, "bench_client: block_builder_finish failed\n");
        exit(1);
    }
    dpp_block_builder_close(&b);
    bl->batch_size = batch_size;
}

/* ---- the fake master and worker (child process) ------------------------- */

typedef struct server {
    uv_loop_t loop;
    dpp_listener_t master_lsn, worker_lsn; /* the daemons' own listener: handshake included */
    char worker_addr[64];
    const blocks_t *bl;
    unsigned splits, per_split; /* per_split = K full blocks + 1 empty */
    uint64_t next, total;       /* stream cursor over splits * per_split frames */
} server_t;

typedef struct peer {
    dpp_peer_t base; /* first: the listener allocates and frees it */
    int subscribed;
    uint64_t credits;
} peer_t;

static char *dense_names[NDENSE], *sparse_names[NSPARSE];
static uint32_t dense_dims[NDENSE];

/* Sends stream frames while this subscriber has credits (one per frame). */
static void flush(peer_t *p)
{
    server_t *s = p->base.lst->cfg.data;
    while (p->credits > 0 && s->next < s->total && !p->base.conn.closing) {
        uint64_t i = s->next++;
        uint32_t split = (uint32_t)(i / s->per_split), index = (uint32_t)(i % s->per_split);
        int last = index == s->per_split - 1;
        Dpp__BlockHeader h = DPP__BLOCK_HEADER__INIT;
        h.epoch = 0;
        h.split_id = split;
        h.split_seq = split; /* one rank: its splits in plan order */
        h.rank_splits = s->splits;
        h.block_index = index;
        h.last = last;
        h.rows = last ? 0 : s->bl->batch_size;
        h.codec = 0;
        h.raw_size = last ? s->bl->empty_len : s->bl->full_len;
        p->credits--;
        /* The same read-only buffer goes out every time; nothing to free. */
        dpp_conn_send_payload(&p->base.conn, DPP_MSG_BLOCK, &h.base,
                              last ? s->bl->empty : s->bl->full, (uint32_t)h.raw_size, NULL, NULL);
    }
}

static void on_peer_frame(dpp_peer_t *base, const dpp_frame_t *f, const ProtobufCMessage *m)
{
    peer_t *p = (peer_t *)base;
    server_t *s = base->lst->cfg.data;
    dpp_conn_t *conn = &base->conn;
    int worker = base->lst == &s->worker_lsn;
    if (!worker && f->type == DPP_MSG_ATTACH) {
        Dpp__AttachReply r = DPP__ATTACH_REPLY__INIT;
        char *workers[1] = {s->worker_addr};
        r.session_id = SESSION;
        r.rank = 0;
        r.consumers = 1;
        r.epochs = 1;
        r.batch_size = s->bl->batch_size;
        r.rank_splits_per_epoch = s->splits;
        r.n_dense_names = NDENSE;
        r.dense_names = dense_names;
        r.n_dense_dims = NDENSE;
        r.dense_dims = dense_dims;
        r.n_sparse_names = NSPARSE;
        r.sparse_names = sparse_names;
        r.label_name = "label";
        r.n_workers = 1;
        r.workers = workers;
        r.state = "running";
        dpp_conn_send(conn, DPP_MSG_ATTACH_REPLY, &r.base);
    } else if (!worker && f->type == DPP_MSG_SPLIT_CONSUMED) {
        /* ignored: there is no plan to advance */
    } else if (worker && f->type == DPP_MSG_SUBSCRIBE) {
        p->subscribed = 1;
        p->credits = ((Dpp__Subscribe *)m)->credits;
        flush(p);
    } else if (worker && f->type == DPP_MSG_CREDIT) {
        p->credits += ((Dpp__Credit *)m)->credits;
        if (p->subscribed)
            flush(p);
    } else {
        dpp_conn_send_error(conn, DPP_EMSGTYPE, "unexpected %s", dpp_msg_name(f->type));
        dpp_conn_close(conn, DPP_EMSGTYPE);
    }
}

static int listen_any(server_t *s, dpp_listener_t *l)
{
    static const char *const roles[] = {"client", NULL};
    dpp_listener_config_t cfg = {
        .name = l == &s->master_lsn ? "master" : "worker",
        .roles = roles,
        .handshake_ms = 10000,
        .idle_ms = 600000,
        .max_connections = 64,
        .peer_size = sizeof(peer_t),
        .on_frame = on_peer_frame,
        .data = s,
    };
    if (dpp_listener_start(&s->loop, l, &cfg, "127.0.0.1:0") != 0) {
        fprintf(stderr, "bench_client: cannot listen on 127.0.0.1\n");
        return -1;
    }
    return atoi(strrchr(l->addr, ':') + 1);
}

/* Child: serves until its parent kills it (or dies). Writes the master's
 * and the worker's ports to fd as two ints. */
static void serve(const blocks_t *bl, unsigned splits, unsigned per_split, int fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    static server_t s;
    s.bl = bl;
    s.splits = splits;
    s.per_split = per_split;
    s.total = (uint64_t)splits * per_split;
    uv_loop_init(&s.loop);
    int ports[2] = {listen_any(&s, &s.master_lsn), listen_any(&s, &s.worker_lsn)};
    if (ports[0] < 0 || ports[1] < 0)
        _exit(1);
    snprintf(s.worker_addr, sizeof s.worker_addr, "127.0.0.1:%d", ports[1]);
    if (write(fd, ports, sizeof ports) != (ssize_t)sizeof ports)
        _exit(1);
    close(fd);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    _exit(0);
}

/* ---- one measured read --------------------------------------------------- */

typedef struct result {
    double secs, cpu_user, cpu_sys, server_cpu;
    uint64_t bytes, rows, batches;
    dpp_client_stats_t st;
} result_t;

static double tv_secs(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static result_t run_once(const blocks_t *bl, unsigned splits, unsigned k,
                         const dpp_client_options_t *opts)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        close(fds[0]);
        serve(bl, splits, k + 1, fds[1]);
    }
    close(fds[1]);
    int ports[2];
    if (read(fds[0], ports, sizeof ports) != (ssize_t)sizeof ports) {
        fprintf(stderr, "bench_client: the fake master and worker did not start\n");
        exit(1);
    }
    close(fds[0]);
    char master[64];
    snprintf(master, sizeof master, "127.0.0.1:%d", ports[0]);
    dpp_client_options_t o = *opts;
    o.master = master;
    o.session = SESSION;

    result_t r = {0};
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = dpp_now_ns();
    dpp_client_t *c;
    int rc = dpp_client_open_opts(&c, &o);
    if (rc != 0) {
        fprintf(stderr, "bench_client: dpp_client_open_opts: %s\n", dpp_strerror(rc));
        exit(1);
    }
    volatile float sink = 0;
    for (;;) {
        dpp_batch_t *b;
        rc = dpp_client_next(c, &b, 60000);
        if (rc == DPP_BATCH) {
            const float *labels;
            dpp_batch_labels(b, &labels);
            size_t rows = dpp_batch_rows(b);
            sink += labels[rows - 1];
            r.rows += rows;
            r.batches++;
            dpp_batch_release(b);
        } else if (rc == DPP_EPOCH_END) {
            continue;
        } else if (rc == DPP_SESSION_END) {
            break;
        } else {
            fprintf(stderr, "bench_client: dpp_client_next: %s %s\n", dpp_strerror(rc),
                    dpp_client_error(c));
            exit(1);
        }
    }
    r.secs = (double)(dpp_now_ns() - t0) / 1e9;
    getrusage(RUSAGE_SELF, &ru1);
    dpp_client_get_stats(c, &r.st);
    dpp_client_close(c);
    (void)sink;

    struct rusage rc0, rc1;
    getrusage(RUSAGE_CHILDREN, &rc0);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    getrusage(RUSAGE_CHILDREN, &rc1);
    r.server_cpu = tv_secs(rc1.ru_utime) + tv_secs(rc1.ru_stime) - tv_secs(rc0.ru_utime) -
                   tv_secs(rc0.ru_stime);
    r.cpu_user = tv_secs(ru1.ru_utime) - tv_secs(ru0.ru_utime);
    r.cpu_sys = tv_secs(ru1.ru_stime) - tv_secs(ru0.ru_stime);
    r.bytes = (uint64_t)splits * (k * bl->full_len + bl->empty_len);
    uint64_t want = (uint64_t)splits * k * bl->batch_size;
    if (r.rows != want || r.batches != r.st.batches) {
        fprintf(stderr, "bench_client: got %" PRIu64 " rows, expected %" PRIu64 "\n", r.rows, want);
        exit(1);
    }
    return r;
}

/* ---- iperf3 --------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("bench_client: free port");
        exit(1);
    }
    close(fd);
    return ntohs(sa.sin_port);
}

/* Output of a shell command (stdout and stderr), malloc'd. */
static char *run_capture(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    size_t n;
    while (out && (n = fread(out + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 4096) {
            char *more = realloc(out, cap *= 2);
            if (more == NULL)
                free(out);
            out = more;
        }
    }
    pclose(f);
    if (out)
        out[len] = '\0';
    return out;
}

/* One single-stream TCP test over loopback; returns bits/s received, or 0. */
static double iperf3_bps(int seconds)
{
    int port = free_port();
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    char *argv[] = {"iperf3", "-s", "-1", "-p", portstr, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t server;
    int rc = posix_spawnp(&server, "iperf3", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "bench_client: iperf3 -s: %s\n", strerror(rc));
        return 0;
    }
    double bps = 0;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "iperf3 -c 127.0.0.1 -p %d -t %d -J 2>&1", port, seconds);
    /* The server may not listen yet: retry while the client cannot connect. */
    for (int attempt = 0; attempt < 50; attempt++) {
        char *out = run_capture(cmd);
        json_t *j = out ? json_loads(out, 0, NULL) : NULL;
        json_t *v = json_object_get(json_object_get(json_object_get(j, "end"), "sum_received"),
                                    "bits_per_second");
        const char *err = json_string_value(json_object_get(j, "error"));
        if (json_is_number(v)) {
            bps = json_number_value(v);
        } else if (err == NULL || strstr(err, "connect") == NULL) {
            fprintf(stderr, "bench_client: iperf3 -c failed: %s\n",
                    err ? err : (out ? out : "no output"));
        }
        int retry = !json_is_number(v) && err && strstr(err, "connect");
        json_decref(j);
        free(out);
        if (!retry)
            break;
        usleep(100 * 1000);
    }
    /* -1: the server exits after one test; make sure it does. */
    for (int i = 0; i < 50; i++) {
        if (waitpid(server, NULL, WNOHANG) == server)
            return bps;
        usleep(100 * 1000);
    }
    kill(server, SIGTERM);
    waitpid(server, NULL, 0);
    return bps;
}

/* ---- main ----------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    double gb = 3;
    unsigned batch_size = 4096, k = 8;
    int rounds = 5, iperf_secs = 5, no_iperf = 0;
    dpp_client_options_t opts;
    dpp_client_options_init(&opts);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gb") == 0 && i + 1 < argc)
            gb = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--batch-size") == 0 && i + 1 < argc)
            batch_size = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--blocks-per-split") == 0 && i + 1 < argc)
            k = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--iperf-seconds") == 0 && i + 1 < argc)
            iperf_secs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--prefetch") == 0 && i + 1 < argc)
            opts.prefetch = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--budget-mb") == 0 && i + 1 < argc)
            opts.memory_budget = (size_t)strtoull(argv[++i], NULL, 10) << 20;
        else if (strcmp(argv[i], "--no-iperf") == 0)
            no_iperf = 1;
        else {
            fprintf(stderr,
                    "usage: bench_client [--gb G] [--batch-size N] [--blocks-per-split K]\n"
                    "                    [--prefetch P] [--budget-mb M] [--rounds R]\n"
                    "                    [--iperf-seconds S] [--no-iperf]\n"
                    "Streams about G (default 3) GB of uncompressed Criteo-like blocks from a\n"
                    "fake master and worker (a forked child, loopback) through libdppclient,\n"
                    "R (default 5) times, and prints the median GB/s and client CPU-s/GB;\n"
                    "then one S-second (default 5) single-stream iperf3 run over loopback\n"
                    "when iperf3 is installed. Splits are K (default 8) blocks of N (default\n"
                    "4096) rows plus the empty last block. --prefetch and --budget-mb set the\n"
                    "client's options (default: the library's, 8 blocks and 256 MiB).\n");
            return 2;
        }
    }
    if (gb <= 0 || batch_size == 0 || k == 0 || rounds < 1 || iperf_secs < 1) {
        fprintf(stderr, "bench_client: bad arguments\n");
        return 2;
    }
    for (unsigned i = 0; i < NDENSE; i++) {
        char name[8];
        snprintf(name, sizeof name, "i%u", i + 1);
        dense_names[i] = strdup(name);
        dense_dims[i] = 1;
    }
    for (unsigned i = 0; i < NSPARSE; i++) {
        char name[8];
        snprintf(name, sizeof name, "c%u", i + 1);
        sparse_names[i] = strdup(name);
    }
    blocks_t bl;
    build_blocks(&bl, batch_size);
    uint64_t per_split = k * bl.full_len + bl.empty_len;
    unsigned splits = (unsigned)(gb * 1e9 / (double)per_split + 0.5);
    if (splits == 0)
        splits = 1;

    printf("bench_client: libdppclient receive path, fake master + worker on loopback "
           "(forked child)\n");
    printf("  %u splits x (%u blocks of %u rows + 1 empty last block), uncompressed (codec 0)\n",
           splits, k, batch_size);
    printf("  %d dense (dim 1) + %d sparse features (1..%d ids per row), block %.2f MB\n", NDENSE,
           NSPARSE, MAX_LEN, (double)bl.full_len / 1e6);
    printf("  client: prefetch %u blocks, memory budget %zu MiB\n", opts.prefetch,
           opts.memory_budget >> 20);
    printf("  GB = 1e9 bytes; client CPU = user + sys of this process (consumer + I/O thread)\n");

    double *gbps = calloc((size_t)rounds, sizeof *gbps);
    double *cpu_gb = calloc((size_t)rounds, sizeof *cpu_gb);
    for (int i = 0; i < rounds; i++) {
        result_t r = run_once(&bl, splits, k, &opts);
        double g = (double)r.bytes / 1e9;
        gbps[i] = g / r.secs;
        cpu_gb[i] = (r.cpu_user + r.cpu_sys) / g;
        printf("round %d: %.3f GB raw block bytes, %" PRIu64 " rows in %" PRIu64
               " batches (%" PRIu64 " zero-copy), %.3f s, %.2f GB/s; client CPU %.2f s (user %.2f"
               " + sys %.2f) = %.3f CPU-s/GB; waited in next() %.2f s; fake server CPU %.2f s\n",
               i + 1, g, r.rows, r.batches, r.st.batches_zero_copy, r.secs, gbps[i],
               r.cpu_user + r.cpu_sys, r.cpu_user, r.cpu_sys, cpu_gb[i], (double)r.st.wait_ns / 1e9,
               r.server_cpu);
        fflush(stdout);
    }
    double client_gbps = median(gbps, rounds);
    printf("client (median of %d): %.2f GB/s, %.3f client CPU-s per GB\n", rounds, client_gbps,
           median(cpu_gb, rounds));
    free(gbps);
    free(cpu_gb);
    free(bl.full);
    free(bl.empty);
    for (unsigned i = 0; i < NDENSE; i++)
        free(dense_names[i]);
    for (unsigned i = 0; i < NSPARSE; i++)
        free(sparse_names[i]);

    if (no_iperf) {
        printf("iperf3: skipped (--no-iperf)\n");
        return 0;
    }
    if (system("command -v iperf3 >/dev/null 2>&1") != 0) {
        printf("iperf3: not installed; no loopback TCP reference\n");
        return 0;
    }
    double bps = iperf3_bps(iperf_secs);
    if (bps <= 0) {
        printf("iperf3: no result\n");
        return 0;
    }
    double iperf_gbps = bps / 8 / 1e9;
    printf("iperf3 (1 TCP stream, loopback, %d s): %.2f GB/s\n", iperf_secs, iperf_gbps);
    printf("client / iperf3: %.0f%%  (floor: >= 80%%)\n", 100.0 * client_gbps / iperf_gbps);
    return 0;
}
