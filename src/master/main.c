// SPDX-License-Identifier: Apache-2.0
// dpp-master: command line around dpp_master_t.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "base/alloc.h"
#include "wire/handshake.h"
#include "daemon/daemon.h"
#include "daemon/options.h"
#include "base/log.h"
#include "base/parse.h"
#include "spec/spec.h"
#include "base/util.h"
#include "master.h"

static const char usage[] =
    "usage: dpp-master --data-root DIR [--data-root DIR ...] --state-dir DIR [options]\n"
    "\n"
    "The dpp master: accepts session specs from dppctl, has the tables' files\n"
    "indexed, splits them into record ranges (split_rows), leases splits to\n"
    "workers and tells trainer clients which workers serve their session.\n"
    "\n"
    "  --listen HOST:PORT     address to listen on (default 127.0.0.1:7070;\n"
    "                         port 0 picks a free port)\n"
    "  --data-root DIR        directory under which specs may name tables;\n"
    "                         repeat for several roots (required)\n"
    "  --data-root s3://BUCKET[/PREFIX]\n"
    "                         objects of an S3-compatible store under which\n"
    "                         specs may name tables as s3:// URLs (credentials\n"
    "                         and endpoint from AWS_ACCESS_KEY_ID,\n"
    "                         AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,\n"
    "                         AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL;\n"
    "                         docs/operations.md); checked by listing one key\n"
    "                         at start\n"
    "  --s3-list-max-keys N   refuse an s3:// table whose listing holds more than\n"
    "                         N keys (default 1000000; each costs the master a\n"
    "                         few hundred bytes while it is listed)\n"
    "  --s3-list-max-pages N  ... or takes more than N pages (default 10000)\n"
    "  --s3-list-timeout S    ... or is not listed within S seconds (default 300);\n"
    "                         a listing also stops when its dppctl goes, and at\n"
    "                         shutdown\n"
    "  --state-dir DIR        where the master keeps its journal of sessions,\n"
    "                         file indexes and consumed splits, replayed at\n"
    "                         restart (required; locked: one master per dir)\n"
    "  --port-file FILE       write the bound HOST:PORT to FILE once listening\n"
    "  --heartbeat-ms N       interval workers heartbeat at (default 1000)\n"
    "  --worker-timeout-ms N  drop a silent worker after N ms and re-lease\n"
    "                         its splits (default 10000)\n"
    "  --journal-compact-kb N rewrite the journal as a snapshot once it passes\n"
    "                         N KiB and twice its last snapshot (default 65536)\n"
    "  --http HOST:PORT       serve GET /metrics (Prometheus), /healthz and /readyz\n"
    "                         there (no authentication: bind it where only your\n"
    "                         monitoring reaches)\n"
    "  --token-file PATH      cluster token: every dppctl, worker and client must\n"
    "                         prove it knows it (default: the file $DPP_TOKEN_FILE\n"
    "                         names; none: no authentication)\n"
    "  --insecure             allow --listen on a non-loopback address without a\n"
    "                         token\n"
    "  --handshake-timeout-ms N  close a peer that has not said HELLO (and AUTH)\n"
    "                         after N ms (default 10000)\n"
    "  --max-connections N    peers served at once; more are refused (default 1024)\n"
    "  --idle-timeout-ms N    close a dppctl or client connection silent for N ms\n"
    "                         (clients refresh every second; default 60000)\n"
    "  --max-spec-kb N        largest spec accepted (default 1024)\n"
    "  --session-retention S  forget a finished session (memory, journal, metrics)\n"
    "                         S seconds after it ended (default 86400, a day;\n"
    "                         0: at once); dppctl list shows when\n"
    "  --session-idle-timeout S  end a session no client has attached to for S\n"
    "                         seconds as failed, \"abandoned\" (default 3600; 0:\n"
    "                         never; a spec's idle_timeout_s overrides it)\n"
    "  --max-features N       most features (dense + sparse) a spec may have\n"
    "                         (default 4096)\n"
    "  --max-frame-mb N       largest message a peer may send (default 16)\n"
    "  --log-level LEVEL      debug, info, warn or error (default info)\n"
    "  --version              print the version, commit and build type\n"
    "  -h, --help             show this help\n"
    "\n"
    "SIGINT or SIGTERM stops the master.\n";

/* optarg of the long option just parsed: a whole number from min to max
 * units, or a message naming the option and the value (then main exits 2). */
#define OPTION_UINT(min, max, unit)                                                                \
    dpp_parse_option_uint("dpp-master", opts[idx].name, optarg, (min), (max), (unit), &v)

static void stop_master(void *arg)
{
    dpp_master_stop(arg);
}

/* Parses argv into cfg (its roots into roots, argc entries) and dopt;
 * -1 to go on, else the exit code (usage errors, --help, --version). */
static int parse_args(int argc, char **argv, dpp_master_config_t *cfg, const char **roots,
                      dpp_daemon_options_t *dopt)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"data-root", required_argument, NULL, 'r'},
        {"state-dir", required_argument, NULL, 's'},
        {"port-file", required_argument, NULL, 'p'},
        {"heartbeat-ms", required_argument, NULL, 'b'},
        {"worker-timeout-ms", required_argument, NULL, 't'},
        {"journal-compact-kb", required_argument, NULL, 'j'},
        {"max-spec-kb", required_argument, NULL, 'K'},
        {"max-features", required_argument, NULL, 'F'},
        {"session-retention", required_argument, NULL, 'R'},
        {"session-idle-timeout", required_argument, NULL, 'I'},
        {"s3-list-max-keys", required_argument, NULL, 'k'},
        {"s3-list-max-pages", required_argument, NULL, 'P'},
        {"s3-list-timeout", required_argument, NULL, 'T'},
        DPP_DAEMON_LONG_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    unsigned long long v;
    int c, idx = 0;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case 'l':
            cfg->listen = optarg;
            break;
        case 'r':
            roots[cfg->nroots++] = optarg;
            break;
        case 's':
            cfg->state_dir = optarg;
            break;
        case 'p':
            cfg->port_file = optarg;
            break;
        case 'b':
            if (OPTION_UINT(1, 3600000, "milliseconds"))
                return 2;
            cfg->heartbeat_ms = (unsigned)v;
            break;
        case 't':
            if (OPTION_UINT(1, 86400000, "milliseconds"))
                return 2;
            cfg->worker_timeout_ms = (unsigned)v;
            break;
        case 'j':
            if (OPTION_UINT(1, 1ull << 30, "KiB")) /* 1 TiB */
                return 2;
            cfg->journal_compact_bytes = (size_t)v << 10;
            break;
        case 'K':
            if (OPTION_UINT(1, DPP_SPEC_MAX_BYTES >> 10, "KiB"))
                return 2;
            cfg->max_spec_bytes = (size_t)v << 10;
            break;
        case 'F':
            if (OPTION_UINT(1, DPP_SPEC_MAX_FEATURES, "features"))
                return 2;
            cfg->max_features = (unsigned)v;
            break;
        case 'R':
            if (OPTION_UINT(0, 366 * 86400, "seconds"))
                return 2;
            cfg->session_retention_ms = (int64_t)v * 1000;
            break;
        case 'I':
            if (OPTION_UINT(0, 366 * 86400, "seconds"))
                return 2;
            cfg->session_idle_ms = (int64_t)v * 1000;
            break;
        case 'k':
            if (OPTION_UINT(1, 1ull << 32, "keys"))
                return 2;
            cfg->s3_list_max_keys = v;
            break;
        case 'P':
            if (OPTION_UINT(1, 1ull << 24, "pages"))
                return 2;
            cfg->s3_list_max_pages = v;
            break;
        case 'T':
            if (OPTION_UINT(1, 86400, "seconds"))
                return 2;
            cfg->s3_list_timeout_s = (unsigned)v;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            switch (dpp_daemon_option("dpp-master", c, optarg, dopt)) {
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
    if (optind < argc || cfg->nroots == 0 || cfg->state_dir == NULL) {
        fprintf(stderr, "dpp-master: %s\n",
                optind < argc ? "unexpected argument" : "--data-root and --state-dir are required");
        fputs(usage, stderr);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    dpp_master_config_t cfg = {.listen = "127.0.0.1:7070",
                               .session_retention_ms = 86400 * 1000ll,
                               .session_idle_ms = 3600 * 1000ll};
    const char **roots = dpp_xcalloc((size_t)argc, sizeof *roots);
    dpp_daemon_options_t dopt = {0};
    int rc = parse_args(argc, argv, &cfg, roots, &dopt);
    if (rc >= 0) {
        free(roots);
        return rc;
    }
    cfg.roots = roots;
    dpp_auth_t auth;
    const char *listens[] = {cfg.listen};
    rc = dpp_daemon_secure("dpp-master", dopt.token_file, dopt.insecure, listens, 1, &auth);
    if (rc) {
        free(roots);
        return rc;
    }
    cfg.auth = &auth;
    cfg.http = dopt.http;
    cfg.handshake_ms = dopt.handshake_ms;
    cfg.max_connections = dopt.max_connections;
    if ((rc = dpp_daemon_fd_budget("dpp-master", DPP_DAEMON_FD_RESERVE, &cfg.max_connections)) !=
        0) {
        free(roots);
        free((void *)auth.token);
        return rc;
    }
    cfg.idle_ms = dopt.idle_ms;
    cfg.max_msg_bytes = dopt.max_msg_bytes;

    uv_loop_t loop;
    uv_loop_init(&loop);
    dpp_master_t *master;
    rc = dpp_master_new(&master, &loop, &cfg);
    if (rc == 0) {
        rc = dpp_daemon_run(&loop, "master", stop_master, NULL, master);
        if (dpp_master_failed(master))
            rc = 1;
        dpp_master_free(master);
    } else {
        uv_loop_close(&loop);
        rc = 1;
    }
    free(roots);
    free((void *)auth.token);
    return rc;
}
