/* SPDX-License-Identifier: Apache-2.0 */
/* The daemons' shared command-line options (options.h). */
#include <stdio.h>

#include "base/log.h"
#include "base/parse.h"
#include "daemon/options.h"

int dpp_daemon_option(const char *prog, int c, const char *arg, dpp_daemon_options_t *o)
{
    unsigned long long v;
    switch (c) {
    case DPP_OPT_HTTP:
        o->http = arg;
        return 1;
    case DPP_OPT_TOKEN_FILE:
        o->token_file = arg;
        return 1;
    case DPP_OPT_INSECURE:
        o->insecure = 1;
        return 1;
    case DPP_OPT_HANDSHAKE_TIMEOUT:
        if (dpp_parse_option_uint(prog, "handshake-timeout-ms", arg, 1, 3600000, "milliseconds",
                                  &v))
            return 2;
        o->handshake_ms = (unsigned)v;
        return 1;
    case DPP_OPT_MAX_CONNECTIONS:
        if (dpp_parse_option_uint(prog, "max-connections", arg, 1, 1u << 20, "connections", &v))
            return 2;
        o->max_connections = (unsigned)v;
        return 1;
    case DPP_OPT_IDLE_TIMEOUT:
        if (dpp_parse_option_uint(prog, "idle-timeout-ms", arg, 1, 86400000, "milliseconds", &v))
            return 2;
        o->idle_ms = (unsigned)v;
        return 1;
    case DPP_OPT_MAX_FRAME:
        if (dpp_parse_option_uint(prog, "max-frame-mb", arg, 1, 1024, "MiB", &v))
            return 2;
        o->max_msg_bytes = (uint32_t)(v << 20);
        return 1;
    case DPP_OPT_LOG_LEVEL: {
        dpp_log_level_t lvl;
        if (dpp_log_parse_level(arg, &lvl) != 0) {
            fprintf(stderr, "%s: --log-level: unknown level \"%s\" (debug, info, warn or error)\n",
                    prog, arg);
            return 2;
        }
        dpp_log_set_level(lvl);
        return 1;
    }
    case DPP_OPT_VERSION:
        printf("%s %s (commit %s, %s)\n", prog, DPP_VERSION, DPP_GIT_COMMIT, DPP_BUILD_TYPE);
        return DPP_DAEMON_EXIT_OK;
    default:
        return 0;
    }
}
