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
#include "base/log.h"
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
    "  --max-features N       most features (dense + sparse) a spec may have\n"
    "                         (default 4096)\n"
    "  --max-frame-mb N       largest message a peer may send (default 16)\n"
    "  --log-level LEVEL      debug, info, warn or error (default info)\n"
    "  -h, --help             show this help\n"
    "\n"
    "SIGINT or SIGTERM stops the master.\n";

static void stop_master(void *arg)
{
    dpp_master_stop(arg);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"data-root", required_argument, NULL, 'r'},
        {"state-dir", required_argument, NULL, 's'},
        {"port-file", required_argument, NULL, 'p'},
        {"heartbeat-ms", required_argument, NULL, 'b'},
        {"worker-timeout-ms", required_argument, NULL, 't'},
        {"journal-compact-kb", required_argument, NULL, 'j'},
        {"log-level", required_argument, NULL, 'L'},
        {"http", required_argument, NULL, 'H'},
        {"token-file", required_argument, NULL, 'T'},
        {"insecure", no_argument, NULL, 'I'},
        {"handshake-timeout-ms", required_argument, NULL, 'S'},
        {"max-connections", required_argument, NULL, 'C'},
        {"max-spec-kb", required_argument, NULL, 'K'},
        {"idle-timeout-ms", required_argument, NULL, 'i'},
        {"max-features", required_argument, NULL, 'F'},
        {"max-frame-mb", required_argument, NULL, 'M'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    dpp_master_config_t cfg = {.listen = "127.0.0.1:7070"};
    const char **roots = dpp_xcalloc((size_t)argc, sizeof *roots);
    const char *token_file = NULL;
    int c, insecure = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            cfg.listen = optarg;
            break;
        case 'r':
            roots[cfg.nroots++] = optarg;
            break;
        case 's':
            cfg.state_dir = optarg;
            break;
        case 'p':
            cfg.port_file = optarg;
            break;
        case 'b':
            cfg.heartbeat_ms = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 't':
            cfg.worker_timeout_ms = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'j':
            cfg.journal_compact_bytes = (size_t)strtoul(optarg, NULL, 10) << 10;
            break;
        case 'H':
            cfg.http = optarg;
            break;
        case 'T':
            token_file = optarg;
            break;
        case 'I':
            insecure = 1;
            break;
        case 'S':
            cfg.handshake_ms = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'C':
            cfg.max_connections = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'i':
            cfg.idle_ms = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'K':
            cfg.max_spec_bytes = (size_t)strtoul(optarg, NULL, 10) << 10;
            if (cfg.max_spec_bytes == 0 || cfg.max_spec_bytes > DPP_SPEC_MAX_BYTES) {
                fprintf(stderr, "dpp-master: --max-spec-kb: from 1 to %u\n",
                        DPP_SPEC_MAX_BYTES >> 10);
                return 2;
            }
            break;
        case 'F':
            cfg.max_features = (unsigned)strtoul(optarg, NULL, 10);
            if (cfg.max_features == 0 || cfg.max_features > DPP_SPEC_MAX_FEATURES) {
                fprintf(stderr, "dpp-master: --max-features: from 1 to %d\n",
                        DPP_SPEC_MAX_FEATURES);
                return 2;
            }
            break;
        case 'M': {
            unsigned long mb = strtoul(optarg, NULL, 10);
            if (mb == 0 || mb > 1024) {
                fprintf(stderr, "dpp-master: --max-frame-mb: from 1 to 1024\n");
                return 2;
            }
            cfg.max_msg_bytes = (uint32_t)(mb << 20);
            break;
        }
        case 'L': {
            dpp_log_level_t lvl;
            if (dpp_log_parse_level(optarg, &lvl) != 0) {
                fprintf(stderr, "dpp-master: unknown log level \"%s\"\n", optarg);
                return 2;
            }
            dpp_log_set_level(lvl);
            break;
        }
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind < argc || cfg.nroots == 0 || cfg.state_dir == NULL) {
        fprintf(stderr, "dpp-master: %s\n",
                optind < argc ? "unexpected argument" : "--data-root and --state-dir are required");
        fputs(usage, stderr);
        return 2;
    }
    cfg.roots = roots;
    dpp_auth_t auth;
    const char *listens[] = {cfg.listen};
    int rc = dpp_daemon_secure("dpp-master", token_file, insecure, listens, 1, &auth);
    if (rc) {
        free(roots);
        return rc;
    }
    cfg.auth = &auth;

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
