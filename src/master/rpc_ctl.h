/* SPDX-License-Identifier: Apache-2.0 */
/* The master's dppctl requests: submit, status, cancel. Each answers on the
 * peer's connection (a reply or an error frame). Loop thread only. */
#ifndef DPP_MASTER_RPC_CTL_H
#define DPP_MASTER_RPC_CTL_H

#include "dpp.pb-c.h"
#include "master_internal.h"

/* Validates a spec, lists its files (a local table on libuv's threadpool,
 * an s3:// one on a thread of its own, within the master's listing budget:
 * the answer comes from a later turn of the loop), journals the new session
 * and replies with its id; a spec that cannot run is refused with the
 * reason. */
void dpp_master_ctl_submit(peer_t *p, const Dpp__SubmitRequest *req);
/* p closes: a submit of it still listing its table will answer no one; an
 * s3:// listing is stopped (within 100 ms), one waiting its turn dropped. */
void dpp_master_ctl_submit_gone(peer_t *p);

/* Replies with the state of one session (or all) and of the workers. */
void dpp_master_ctl_status(peer_t *p, const Dpp__StatusRequest *req);

/* Ends a session that is indexing or running: it fails with "cancelled"
 * (journaled), so its clients learn it and nothing more of it is leased. A
 * session already over is left as it is. */
void dpp_master_ctl_cancel(peer_t *p, const Dpp__CancelRequest *req);

#endif
