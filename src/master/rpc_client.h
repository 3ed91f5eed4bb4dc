/* SPDX-License-Identifier: Apache-2.0 */
/* The master's client requests: attach and consumed splits. Loop thread
 * only. */
#ifndef DPP_MASTER_RPC_CLIENT_H
#define DPP_MASTER_RPC_CLIENT_H

#include "dpp.pb-c.h"
#include "master_internal.h"

/* A rank's client attaches (every second while it reads, resuming from a
 * checkpoint token when it says so, or detaching): replies with the
 * session's shape and workers, and leases the rank's splits while it is
 * present. */
void dpp_master_client_attach(peer_t *p, const Dpp__AttachRequest *req);

/* A rank's client delivered every block of a split: journaled, then
 * consumed (which may end the epoch or the session). */
void dpp_master_client_consumed(peer_t *p, const Dpp__SplitConsumed *msg);

#endif
