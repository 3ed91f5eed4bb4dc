// SPDX-License-Identifier: Apache-2.0
// Signal handling and the main loop shared by the daemons (see daemon.h).
#include <signal.h>

#include "daemon.h"
#include "log.h"

typedef struct daemon_signals {
    uv_signal_t sigint, sigterm;
    const char *name;
    dpp_daemon_stop_cb stop;
    void *arg;
} daemon_signals_t;

static void on_signal(uv_signal_t *h, int signum)
{
    daemon_signals_t *s = h->data;
    DPP_INFO("%s_stopping signal=%d", s->name, signum);
    s->stop(s->arg);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
}

int dpp_daemon_run(uv_loop_t *loop, const char *name, dpp_daemon_stop_cb stop, void *arg)
{
    signal(SIGPIPE, SIG_IGN);
    daemon_signals_t s = {.name = name, .stop = stop, .arg = arg};
    uv_signal_init(loop, &s.sigint);
    uv_signal_init(loop, &s.sigterm);
    s.sigint.data = s.sigterm.data = &s;
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    uv_run(loop, UV_RUN_DEFAULT);
    return uv_loop_close(loop) == 0 ? 0 : 1;
}
