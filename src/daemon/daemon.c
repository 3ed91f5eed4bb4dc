// SPDX-License-Identifier: Apache-2.0
// Signal handling and the main loop shared by the daemons (see daemon.h).
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>

#include "wire/handshake.h"
#include "daemon/daemon.h"
#include "base/log.h"
#include "wire/net.h"

typedef struct daemon_signals {
    uv_signal_t sigint, sigterm;
    const char *name;
    dpp_daemon_stop_cb stop, drain;
    void *arg;
    int draining;
} daemon_signals_t;

static void on_signal(uv_signal_t *h, int signum)
{
    daemon_signals_t *s = h->data;
    if (signum == SIGTERM && s->drain && !s->draining) {
        DPP_INFO("%s_draining signal=%d", s->name, signum);
        s->draining = 1;
        s->drain(s->arg); /* the handles stay open: a second signal stops at once */
        return;
    }
    DPP_INFO("%s_stopping signal=%d", s->name, signum);
    s->stop(s->arg);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
}

int dpp_daemon_run(uv_loop_t *loop, const char *name, dpp_daemon_stop_cb stop,
                   dpp_daemon_stop_cb drain, void *arg)
{
    signal(SIGPIPE, SIG_IGN);
    daemon_signals_t s = {.name = name, .stop = stop, .drain = drain, .arg = arg};
    uv_signal_init(loop, &s.sigint);
    uv_signal_init(loop, &s.sigterm);
    s.sigint.data = s.sigterm.data = &s;
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    /* Signal handles do not keep the loop alive: a daemon that stops by
     * itself (a drained worker) ends the loop, and they are closed here. */
    uv_unref((uv_handle_t *)&s.sigint);
    uv_unref((uv_handle_t *)&s.sigterm);
    uv_run(loop, UV_RUN_DEFAULT);
    if (!uv_is_closing((uv_handle_t *)&s.sigint)) {
        uv_close((uv_handle_t *)&s.sigint, NULL);
        uv_close((uv_handle_t *)&s.sigterm, NULL);
        uv_run(loop, UV_RUN_DEFAULT);
    }
    return uv_loop_close(loop) == 0 ? 0 : 1;
}

int dpp_daemon_secure(const char *prog, const char *token_file, int insecure,
                      const char *const *listens, size_t n, dpp_auth_t *auth)
{
    char err[512];
    int rc = dpp_auth_load(auth, token_file, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: cluster token: %s\n", prog, err);
        return 2;
    }
    for (size_t i = 0; i < n; i++) {
        if (listens[i] == NULL)
            continue;
        int lo = dpp_addr_is_loopback(listens[i]);
        if (lo < 0) {
            fprintf(stderr, "%s: %s: not a HOST:PORT address\n", prog, listens[i]);
            return 2;
        }
        if (lo || dpp_auth_on(auth))
            continue;
        if (!insecure) {
            fprintf(stderr,
                    "%s: refusing to listen on %s, which is not a loopback address, without a "
                    "cluster token: give --token-file (or DPP_TOKEN_FILE), or --insecure on a "
                    "network you trust\n",
                    prog, listens[i]);
            return 2;
        }
        DPP_WARN("insecure listen=%s reason=\"no cluster token: anyone who reaches it is served\"",
                 listens[i]);
    }
    return 0;
}

int dpp_daemon_fd_budget(const char *prog, unsigned reserve, unsigned *max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0; /* nothing known to budget against */
    if (rl.rlim_cur < rl.rlim_max) {
        /* select(2) is not used anywhere, so a high limit costs nothing */
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            DPP_INFO("open_files_raised from=%llu to=%llu", (unsigned long long)old,
                     (unsigned long long)rl.rlim_cur);
        else
            rl.rlim_cur = old;
    }
    unsigned want = *max_connections ? *max_connections : 1024;
    rlim_t room = rl.rlim_cur > reserve ? rl.rlim_cur - reserve : 0;
    if (room < 16) {
        fprintf(stderr,
                "%s: the open files limit (%llu) leaves no room for connections once %u are "
                "kept for files: raise it (ulimit -n, LimitNOFILE=)\n",
                prog, (unsigned long long)rl.rlim_cur, reserve);
        return 2;
    }
    if (want > room) {
        DPP_WARN("max_connections_lowered from=%u to=%llu reason=\"open files limit %llu, %u "
                 "kept for files, the journal and HTTP\"",
                 want, (unsigned long long)room, (unsigned long long)rl.rlim_cur, reserve);
        want = (unsigned)room;
    }
    *max_connections = want;
    return 0;
}
