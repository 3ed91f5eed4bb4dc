/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's checkpoint tokens (checkpoint.c): what opening a client
 * from one needs. The token's layout, signing and verification are
 * crypto/checkpoint_token.h's, shared with the master. */
#ifndef DPP_CLIENT_CHECKPOINT_H
#define DPP_CLIENT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "client_internal.h"
#include "crypto/checkpoint_token.h"

struct Dpp__AttachReply;

/* Checks the token raw (DPP_CKPT_TOKEN_SIZE bytes, fields t) a client opens
 * from against the master's AttachReply r before the client starts: the
 * MAC under the session key the reply carries, the session id, the rank
 * (< consumers), the epoch (at most the session's), the split position and
 * rank_splits against the rank's split count the master found in the
 * token's epoch, and the row against batch_size. Returns 0, DPP_ETOKEN
 * with why naming the field, what the token says and what the reply says,
 * or DPP_EVERSION when the reply has no key (a master older than this
 * library). why is NUL-terminated when whylen > 0. */
int dpp__token_check_reply(const dpp_ckpt_token_t *t, const uint8_t *raw,
                           const struct Dpp__AttachReply *r, char *why, size_t whylen);

/* Puts a client opened from a checkpoint token at the token's position.
 * Called before the I/O thread starts. Returns 0. */
int dpp__client_start_at(dpp_client_t *c, const dpp_ckpt_token_t *t);

#endif
