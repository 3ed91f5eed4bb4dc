/* SPDX-License-Identifier: Apache-2.0 */
/* The master's worker requests: register, heartbeat, lease request, split
 * done, index done; and the timeout that drops a silent worker. Loop
 * thread only. */
#ifndef DPP_MASTER_RPC_WORKER_H
#define DPP_MASTER_RPC_WORKER_H

#include <stdint.h>

#include "dpp.pb-c.h"
#include "master_internal.h"

/* Gives the worker its id and the heartbeat interval; a second REGISTER or
 * a bad data address closes the connection. */
void dpp_master_worker_register(peer_t *p, const Dpp__RegisterRequest *req);

/* Echoes a registered worker's heartbeat. */
void dpp_master_worker_heartbeat(peer_t *p);

/* A registered worker wants up to max_leases (at most 64) tasks: they are
 * granted now, or as soon as there is work. */
void dpp_master_worker_lease_request(peer_t *p, const Dpp__LeaseRequest *req);

/* A split's blocks are all made (or it failed, which fails its session). */
void dpp_master_worker_split_done(peer_t *p, const Dpp__SplitDone *msg);

/* A file's index (or why there is none): journaled, cached, and the
 * session planned once every file has one. */
void dpp_master_worker_index_done(peer_t *p, const Dpp__IndexDone *msg);

/* Closes the connection of every registered worker silent for longer than
 * --worker-timeout-ms at now_ms; its tasks go to others when it closes. */
void dpp_master_worker_timeouts(dpp_master_t *m, int64_t now_ms);

#endif
