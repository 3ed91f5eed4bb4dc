/* SPDX-License-Identifier: Apache-2.0 */
/* The master's connections (peer_t in master_internal.h): accept, the
 * connection cap, HELLO/AUTH, handshake and idle deadlines, and the
 * dispatch of each frame to rpc_ctl.c, rpc_worker.c or rpc_client.c by the
 * peer's role. When a registered worker's connection closes, its tasks go
 * back (dpp_master_release_worker()). Loop thread only. */
#ifndef DPP_MASTER_PEER_H
#define DPP_MASTER_PEER_H

#include <stdint.h>

#include "master.h"

/* Starts accepting peers on m->listener (initialised and bound). Returns 0
 * or a libuv error. */
int dpp_master_peers_listen(dpp_master_t *m);

/* Closes every peer past its deadline at now (ms, dpp_now_ms()): HELLO
 * (and AUTH) not done within --handshake-timeout-ms, or a dppctl or client
 * silent for --idle-timeout-ms. */
void dpp_master_peers_sweep(dpp_master_t *m, int64_t now);

/* Closes every connection (stopping); each peer is freed by its close
 * callback. */
void dpp_master_peers_close(dpp_master_t *m);

#endif
