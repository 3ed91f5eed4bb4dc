/* SPDX-License-Identifier: Apache-2.0 */
/* What dpp-master and dpp-worker share around their event loop: SIGPIPE
 * ignored (a peer that goes away is an EPIPE, not a dead daemon), and
 * SIGINT/SIGTERM turned into an orderly stop. */
#ifndef DPP_DAEMON_DAEMON_H
#define DPP_DAEMON_DAEMON_H

#include <uv.h>

typedef void (*dpp_daemon_stop_cb)(void *arg);

/* Runs loop until it has no more handles. SIGINT logs `<name>_stopping` and
 * calls stop(arg), which must close the daemon's handles. SIGTERM does the
 * same, or, when drain is not NULL, logs `<name>_draining` and calls
 * drain(arg), which stops the daemon once it has finished its work; a second
 * signal then stops it at once. Returns 0, or 1 when the loop could not be
 * closed cleanly (a handle leaked). */
int dpp_daemon_run(uv_loop_t *loop, const char *name, dpp_daemon_stop_cb stop,
                   dpp_daemon_stop_cb drain, void *arg);

struct dpp_auth;

/* The security preamble of a daemon named prog: loads the cluster token
 * from token_file (NULL: $DPP_TOKEN_FILE; neither: no token) into *auth,
 * and refuses to listen on a non-loopback address without a token unless
 * insecure is set (then it warns). Each address of listens[0..n) is checked
 * (NULL entries skipped). Returns 0, or 2 (a usage error, said on stderr). */
int dpp_daemon_secure(const char *prog, const char *token_file, int insecure,
                      const char *const *listens, size_t n, struct dpp_auth *auth);

/* Descriptors a daemon keeps for itself besides its listener's peers:
 * the HTTP server's connections (DPP_HTTP_MAX_CONNECTIONS), the journal,
 * logs, timers; the worker adds its pipeline threads' files and rings. */
#define DPP_DAEMON_FD_RESERVE 128u

/* Raises the soft limit on open files to the hard limit, then makes sure the
 * listener cannot take the descriptors the daemon needs for its own files:
 * *max_connections (0: the listener's default, 1024) is lowered, with a
 * warning, to what the limit leaves after reserve. Returns 0, or 2 (a usage
 * error, said on stderr) when the limit leaves room for fewer than 16
 * connections. */
int dpp_daemon_fd_budget(const char *prog, unsigned reserve, unsigned *max_connections);

#endif
