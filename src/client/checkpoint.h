/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's checkpoint tokens (checkpoint.c), what opening a client
 * from one needs. */
#ifndef DPP_CLIENT_CHECKPOINT_H
#define DPP_CLIENT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "client_internal.h"

/* A checkpoint token (DPP_CHECKPOINT_SIZE) is 64 bytes, little-endian:
 * magic "DPT1", version u16 (1), flags u16 (0), session id (24 bytes,
 * NUL-padded), then u32 rank, epoch, split position, block index, row in
 * that block, batches handed out in the epoch, splits of the rank in the
 * epoch (0xffffffff: not known yet), reserved (0), and the CRC32C of the 60
 * bytes before it. token_t holds its fields. */
typedef struct token {
    char session[24];
    uint32_t rank, epoch, seq, index, row, batches, rank_splits;
} token_t;

/* Reads a token into *t: 0, or DPP_ETOKEN unless buf is an intact token of
 * this library's version. */
int dpp__token_unpack(const void *buf, size_t len, token_t *t);
/* Puts a client opened from a checkpoint token at the token's position.
 * Called before the I/O thread starts. Returns 0. */
int dpp__client_start_at(dpp_client_t *c, const token_t *t);

#endif
