/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's I/O thread (io.c): starting and stopping it. It talks to
 * the consumer side only through the core (core.h). */
#ifndef DPP_CLIENT_IO_H
#define DPP_CLIENT_IO_H

#include <stddef.h>
#include <sys/socket.h>

#include "core.h"
#include "crypto/token.h"

typedef struct dpp_client_io dpp_client_io_t;

/* Starts the I/O thread of a client whose core holds the session's schema
 * and plan: it connects to the master at `master` and to the workers listed
 * (more come with each attach refresh). session (copied) and rank name the
 * client's rank; auth is the cluster token, borrowed: it must stay valid
 * until dpp__io_stop() returns. Sets core->wake. Returns 0 with *out set,
 * or a negative code with no thread started. */
int dpp__io_start(dpp_core_t *core, const char *session, unsigned rank, const dpp_auth_t *auth,
                  const struct sockaddr_storage *master, char *const *workers, size_t nworkers,
                  dpp_client_io_t **out);
/* Stops and joins the I/O thread, frees it. Accepts NULL. */
void dpp__io_stop(dpp_client_io_t *io);

#endif
