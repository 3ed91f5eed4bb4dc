/* SPDX-License-Identifier: Apache-2.0 */
/* The master's connections (peer_t in master_internal.h) on the shared
 * listener (daemon/listener.h: accept, cap, HELLO/AUTH, deadlines): the
 * dispatch of each frame to rpc_ctl.c, rpc_worker.c or rpc_client.c by the
 * peer's role. When a registered worker's connection closes, its tasks go
 * back (dpp_master_release_worker()). Loop thread only. */
#ifndef DPP_MASTER_PEER_H
#define DPP_MASTER_PEER_H

#include <stdint.h>

#include "master.h"

/* Starts the master's listener (daemon/listener.h) on cfg->listen with the
 * roles ctl, worker and client, the cluster token m->auth, and cfg's cap,
 * deadlines and frame limit. Returns 0 or an error (logged); either way
 * dpp_master_stop() closes it. */
int dpp_master_peers_listen(dpp_master_t *m, const dpp_master_config_t *cfg);

#endif
