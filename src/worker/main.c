// SPDX-License-Identifier: Apache-2.0
// dpp-worker: command line around dpp_worker_t.
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "base/alloc.h"
#include "wire/handshake.h"
#include "daemon/daemon.h"
#include "daemon/options.h"
#include "base/log.h"
#include "base/parse.h"
#include "pipeline.h"
#include "storage/s3.h"
#include "worker.h"

static const char usage[] =
    "usage: dpp-worker --master HOST:PORT [options]\n"
    "\n"
    "A dpp worker: pulls split leases from the master, reads the split files\n"
    "with io_uring, decodes and transforms rows into columnar blocks and streams\n"
    "them to the trainer clients of each session.\n"
    "\n"
    "  --master HOST:PORT    the master (required; retried with backoff)\n"
    "  --listen HOST:PORT    address clients connect to (default 127.0.0.1:0,\n"
    "                        port 0 picks a free port)\n"
    "  --advertise HOST:PORT address handed to clients (default: the bound one)\n"
    "  --threads N           pipeline threads (default 0: one per core)\n"
    "  --max-buffer-mb N     memory for read buffers and finished blocks not yet\n"
    "                        sent; when full, the pipeline stops reading\n"
    "                        (default 256)\n"
    "  --max-record-mb N     largest TFRecord record accepted (default 16); each\n"
    "                        pipeline thread's reader may hold one such record\n"
    "  --read-chunk-kb N     bytes per read (default 512)\n"
    "  --read-depth N        reads in flight per pipeline thread (default 4)\n"
    "  --direct-io           read with O_DIRECT (aligned buffers; falls back to\n"
    "                        buffered reads where the filesystem refuses it)\n"
    "  --force-pread         read with pread instead of io_uring\n"
    "  --cache-ram-mb N      keep the outputs of splits (their blocks before the\n"
    "                        epoch's shuffle) in up to N MiB of memory, to serve\n"
    "                        later epochs and sessions of the same spec without\n"
    "                        reading and transforming again (default 0: none)\n"
    "  --cache-dir DIR       ... and on a local disk under DIR (kept across\n"
    "                        restarts; default: none)\n"
    "  --cache-disk-gb N     the disk cache's size in GiB, a fraction allowed\n"
    "                        (default 10; needs --cache-dir)\n"
    "  --port-file FILE      write the bound HOST:PORT to FILE once listening\n"
    "  --http HOST:PORT      serve GET /metrics (Prometheus), /healthz and /readyz\n"
    "                        there (no authentication: bind it where only your\n"
    "                        monitoring reaches)\n"
    "  --token-file PATH     cluster token: every client must prove it knows it,\n"
    "                        and the master must too (default: the file\n"
    "                        $DPP_TOKEN_FILE names; none: no authentication)\n"
    "  --insecure            allow --listen on a non-loopback address without a\n"
    "                        token\n"
    "  --handshake-timeout-ms N  close a client that has not said HELLO (and\n"
    "                        AUTH) after N ms (default 10000)\n"
    "  --max-connections N   clients served at once; more are refused (default 1024)\n"
    "  --idle-timeout-ms N   close a client silent for N ms (clients send a\n"
    "                        keepalive every 5 s; default 60000)\n"
    "  --max-frame-mb N      largest message a client may send (default 16)\n"
    "  --data-root DIR       only read files under DIR (repeat for several; the\n"
    "                        master's roots as this host mounts them); a task for\n"
    "                        a file elsewhere fails (default: any file the master\n"
    "                        names)\n"
    "  --data-root s3://BUCKET[/PREFIX]\n"
    "                        read objects under it from an S3-compatible store\n"
    "                        (credentials and endpoint: AWS_ACCESS_KEY_ID,\n"
    "                        AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION,\n"
    "                        AWS_PROFILE, AWS_ENDPOINT_URL; docs/operations.md);\n"
    "                        without one, no s3:// table is read\n"
    "  --log-level LEVEL     debug, info, warn or error (default info)\n"
    "  --version             print the version, commit and build type\n"
    "  -h, --help            show this help\n"
    "\n"
    "  --drain-timeout-s N   on SIGTERM, how long to finish running splits and\n"
    "                        deliver their blocks before exiting (default 30)\n"
    "\n"
    "Environment: DPP_FORCE_PREAD=1 does what --force-pread does.\n"
    "SIGTERM drains (no new leases; running splits finish; then exit 0); a\n"
    "second signal, or SIGINT, stops at once.\n";

static char **data_roots; /* --data-root, resolved */
static char **s3_roots;   /* --data-root s3://... */

/* What the signal handlers act on. */
typedef struct worker_main {
    dpp_worker_t *worker;
    unsigned drain_grace_ms;
} worker_main_t;

static void stop_worker(void *arg)
{
    dpp_worker_stop(((worker_main_t *)arg)->worker);
}

static void drain_worker(void *arg)
{
    worker_main_t *wm = arg;
    dpp_worker_drain(wm->worker, wm->drain_grace_ms);
}

/* optarg of the long option just parsed: a whole number from min to max
 * units, or a message naming the option and the value (then main exits 2). */
#define OPTION_UINT(min, max, unit)                                                                \
    dpp_parse_option_uint("dpp-worker", opts[idx].name, optarg, (min), (max), (unit), &v)

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"master", required_argument, NULL, 'm'},
        {"listen", required_argument, NULL, 'l'},
        {"advertise", required_argument, NULL, 'a'},
        {"threads", required_argument, NULL, 't'},
        {"max-buffer-mb", required_argument, NULL, 'b'},
        {"max-record-mb", required_argument, NULL, 'r'},
        {"read-chunk-kb", required_argument, NULL, 'c'},
        {"read-depth", required_argument, NULL, 'd'},
        {"direct-io", no_argument, NULL, 'D'},
        {"force-pread", no_argument, NULL, 'P'},
        {"drain-timeout-s", required_argument, NULL, 'g'},
        {"port-file", required_argument, NULL, 'p'},
        {"cache-ram-mb", required_argument, NULL, 'C'},
        {"cache-dir", required_argument, NULL, 'K'},
        {"cache-disk-gb", required_argument, NULL, 'G'},
        {"data-root", required_argument, NULL, 'R'},
        DPP_DAEMON_LONG_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    /* Blocks are megabytes each, made and freed many times a second: from
     * glibc's heap, kept when freed, rather than a fresh mapping each (a
     * page fault per 4 KiB on first touch, and an munmap after). What the
     * worker holds is bounded by --max-buffer-mb, so the heap is too. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    worker_main_t wm = {.drain_grace_ms = 30000};
    dpp_worker_config_t cfg = {
        .listen = "127.0.0.1:0",
        .threads = ncpu > 0 ? (unsigned)ncpu : 1,
        .max_buffer_bytes = 256ul << 20,
        .reader = {.max_record = 16ull << 20},
        .cache_disk_bytes = 10ull << 30,
    };
    unsigned long long v;
    int c, idx = 0, threads_given = 0, disk_gb_given = 0;
    /* kept for the process's life (a global: not a leak on early exits) */
    data_roots = dpp_xcalloc((size_t)argc + 1, sizeof *data_roots);
    cfg.roots = data_roots;
    s3_roots = dpp_xcalloc((size_t)argc + 1, sizeof *s3_roots);
    cfg.s3_roots = s3_roots;
    dpp_daemon_options_t dopt = {0};
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case 'm':
            cfg.master = optarg;
            break;
        case 'l':
            cfg.listen = optarg;
            break;
        case 'a':
            cfg.advertise = optarg;
            break;
        case 't':
            if (OPTION_UINT(0, 1024, "threads"))
                return 2;
            cfg.threads = v ? (unsigned)v : cfg.threads; /* 0: one per core */
            threads_given = v != 0;
            break;
        case 'b':
            if (OPTION_UINT(1, 1ul << 20, "MiB"))
                return 2;
            cfg.max_buffer_bytes = v << 20;
            break;
        case 'r':
            if (OPTION_UINT(1, 1ul << 16, "MiB")) /* up to 64 GiB */
                return 2;
            cfg.reader.max_record = (uint64_t)v << 20;
            break;
        case 'c':
            if (OPTION_UINT(1, DPP_READER_MAX_CHUNK >> 10, "KiB"))
                return 2;
            cfg.reader.chunk_bytes = (size_t)v << 10;
            break;
        case 'd':
            if (OPTION_UINT(1, DPP_READER_MAX_DEPTH, "reads"))
                return 2;
            cfg.reader.depth = (unsigned)v;
            break;
        case 'D':
            cfg.reader.direct = 1;
            break;
        case 'g':
            if (OPTION_UINT(0, 86400, "seconds"))
                return 2;
            wm.drain_grace_ms = (unsigned)v * 1000;
            break;
        case 'P':
            cfg.reader.force_pread = 1;
            break;
        case 'p':
            cfg.port_file = optarg;
            break;
        case 'C':
            if (OPTION_UINT(0, 1ul << 24, "MiB"))
                return 2;
            cfg.cache_ram_bytes = (size_t)v << 20;
            break;
        case 'K':
            cfg.cache_dir = optarg;
            break;
        case 'G': { /* GiB, a fraction allowed: 0.5 */
            char *end = NULL;
            double gb = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(gb >= 1.0 / 1024 && gb <= 1 << 20) ||
                !(optarg[0] >= '0' && optarg[0] <= '9')) {
                fprintf(stderr,
                        "dpp-worker: --cache-disk-gb: \"%s\" is not a size in GiB from "
                        "0.001 (1 MiB) to %u\n",
                        optarg, 1u << 20);
                return 2;
            }
            cfg.cache_disk_bytes = (uint64_t)(gb * (double)(1u << 30));
            disk_gb_given = 1;
            break;
        }
        case 'R': {
            if (dpp_s3_is_url(optarg)) {
                dpp_s3_url_t u;
                char err[300];
                if (dpp_s3_url_parse(optarg, &u, err, sizeof err) != 0) {
                    fprintf(stderr, "dpp-worker: --data-root %s\n", err);
                    return 2;
                }
                char *root = dpp_xstrdup(optarg);
                size_t n = strlen(root);
                while (n > 5 && root[n - 1] == '/')
                    root[--n] = '\0';
                s3_roots[cfg.ns3_roots++] = root;
                break;
            }
            char *real = realpath(optarg, NULL);
            if (real == NULL) {
                fprintf(stderr, "dpp-worker: --data-root %s: %s\n", optarg, strerror(errno));
                return 2;
            }
            data_roots[cfg.nroots++] = real;
            break;
        }
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            switch (dpp_daemon_option("dpp-worker", c, optarg, &dopt)) {
            case 1:
                break;
            case DPP_DAEMON_EXIT_OK:
                return 0;
            case 0:
                fputs(usage, stderr);
                return 2;
            default:
                return 2;
            }
        }
    }
    if (disk_gb_given && cfg.cache_dir == NULL) {
        fprintf(stderr, "dpp-worker: --cache-disk-gb sizes the disk cache, which needs "
                        "--cache-dir DIR (a folder of its own on a local disk)\n");
        return 2;
    }
    if (optind < argc || cfg.master == NULL) {
        fprintf(stderr, "dpp-worker: %s\n",
                optind < argc ? "unexpected argument" : "--master is required");
        fputs(usage, stderr);
        return 2;
    }

    /* One thread per core by default, but no more than the buffer can give
     * their readers (a big host with the default --max-buffer-mb, or a
     * container whose CPU limit sysconf does not see). */
    size_t per_thread = dpp_reader_memory_bound(&cfg.reader);
    size_t fit =
        cfg.max_buffer_bytes > (8u << 20) ? (cfg.max_buffer_bytes - (8u << 20)) / per_thread : 0;
    if (!threads_given && fit < cfg.threads) {
        DPP_INFO("threads_capped threads=%zu cores=%u reason=\"--max-buffer-mb\"", fit ? fit : 1,
                 cfg.threads);
        cfg.threads = fit ? (unsigned)fit : 1;
    }
    if (cfg.ns3_roots > 0) {
        /* the pipeline threads' S3 clients take it (dpp_s3_thread_client) */
        dpp_s3_config_t s3;
        char err[700];
        if (dpp_s3_config_load(&s3, err, sizeof err) != 0 ||
            dpp_s3_config_check(&s3, cfg.s3_roots[0], err, sizeof err) != 0) {
            fprintf(stderr, "dpp-worker: --data-root %s\n", err);
            return 2;
        }
        dpp_s3_set_process_config(&s3);
        DPP_INFO("object_storage roots=%zu endpoint=%s region=%s addressing=%s credentials=\"%s\"",
                 cfg.ns3_roots, s3.endpoint, s3.region, s3.path_style ? "path" : "virtual",
                 s3.source);
        memset(&s3, 0, sizeof s3);
    }
    dpp_auth_t auth;
    const char *listens[] = {cfg.listen};
    int rc = dpp_daemon_secure("dpp-worker", dopt.token_file, dopt.insecure, listens, 1, &auth);
    if (rc)
        return rc;
    cfg.auth = &auth;
    cfg.http = dopt.http;
    cfg.handshake_ms = dopt.handshake_ms;
    cfg.max_connections = dopt.max_connections;
    /* each pipeline thread holds a file, an io_uring ring and, for index
     * tasks, a sidecar or a scanned file */
    /* per thread: a split's file and its ring, and a batch of index tasks' files */
    rc = dpp_daemon_fd_budget("dpp-worker",
                              DPP_DAEMON_FD_RESERVE + (4 + DPP_PIPELINE_INDEX_BATCH) * cfg.threads,
                              &cfg.max_connections);
    if (rc) {
        free((void *)auth.token);
        return rc;
    }
    cfg.idle_ms = dopt.idle_ms;
    cfg.max_msg_bytes = dopt.max_msg_bytes;
    uv_loop_t loop;
    uv_loop_init(&loop);
    if (dpp_worker_new(&wm.worker, &loop, &cfg) != 0) {
        uv_loop_close(&loop);
        free((void *)auth.token);
        return 1;
    }
    rc = dpp_daemon_run(&loop, "worker", stop_worker, drain_worker, &wm);
    dpp_worker_free(wm.worker);
    free((void *)auth.token);
    return rc;
}
