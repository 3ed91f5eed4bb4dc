/* SPDX-License-Identifier: Apache-2.0 */
/* The command-line options both daemons take for their listener
 * (listener.h), its security and their log, parsed in one place so that the
 * two cannot drift apart: --http, --token-file, --insecure,
 * --handshake-timeout-ms, --max-connections, --idle-timeout-ms,
 * --max-frame-mb, --log-level. */
#ifndef DPP_DAEMON_OPTIONS_H
#define DPP_DAEMON_OPTIONS_H

#include <getopt.h>
#include <stdint.h>

typedef struct dpp_daemon_options {
    const char *http;         /* --http HOST:PORT, or NULL */
    const char *token_file;   /* --token-file, or NULL ($DPP_TOKEN_FILE) */
    int insecure;             /* --insecure */
    unsigned handshake_ms;    /* 0: the listener's default */
    unsigned max_connections; /* 0: the default */
    unsigned idle_ms;         /* 0: the default */
    uint32_t max_msg_bytes;   /* --max-frame-mb in bytes; 0: the default */
} dpp_daemon_options_t;

/* getopt_long codes of the options, past any character a daemon uses. */
enum {
    DPP_OPT_HTTP = 0x100,
    DPP_OPT_TOKEN_FILE,
    DPP_OPT_INSECURE,
    DPP_OPT_HANDSHAKE_TIMEOUT,
    DPP_OPT_MAX_CONNECTIONS,
    DPP_OPT_IDLE_TIMEOUT,
    DPP_OPT_MAX_FRAME,
    DPP_OPT_LOG_LEVEL,
    DPP_OPT_VERSION,
};

/* Their entries, for a daemon's struct option table. */
#define DPP_DAEMON_LONG_OPTIONS                                                                    \
    {"http", required_argument, NULL, DPP_OPT_HTTP},                                               \
        {"token-file", required_argument, NULL, DPP_OPT_TOKEN_FILE},                               \
        {"insecure", no_argument, NULL, DPP_OPT_INSECURE},                                         \
        {"handshake-timeout-ms", required_argument, NULL, DPP_OPT_HANDSHAKE_TIMEOUT},              \
        {"max-connections", required_argument, NULL, DPP_OPT_MAX_CONNECTIONS},                     \
        {"idle-timeout-ms", required_argument, NULL, DPP_OPT_IDLE_TIMEOUT},                        \
        {"max-frame-mb", required_argument, NULL, DPP_OPT_MAX_FRAME},                              \
        {"log-level", required_argument, NULL, DPP_OPT_LOG_LEVEL},                                 \
    {                                                                                              \
        "version", no_argument, NULL, DPP_OPT_VERSION                                              \
    }

/* Takes option c (a getopt_long result) with its argument arg when it is one
 * of the above. Returns 1 when taken, 0 when c is not one of them, 2 (the
 * exit status of a usage error) after saying on stderr, as "PROG:
 * --OPTION: ...", what is wrong with the value, or DPP_DAEMON_EXIT_OK after
 * printing what --version asks for (the daemon then exits 0). */
#define DPP_DAEMON_EXIT_OK 3
int dpp_daemon_option(const char *prog, int c, const char *arg, dpp_daemon_options_t *o);

#endif
