/* SPDX-License-Identifier: Apache-2.0 */
/* What the public opaque types are: struct dpp_client (the consumer side's
 * state) and struct dpp_batch, shared by name by open.c, checkpoint.c,
 * next.c and accessors.c. The I/O thread never sees them (io.h, core.h). */
#ifndef DPP_CLIENT_INTERNAL_H
#define DPP_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "io.h"
#include "crypto/token.h"
#include "format/block.h"
#include "dpp/client.h"

/* The block the consumer is cutting batches from. */
typedef struct cur_block {
    uint8_t *raw; /* decompressed, validated; NULL: none */
    size_t raw_len, raw_cap;
    uint32_t rows, row_off;
    uint32_t epoch, seq, index;
    uint32_t source; /* a mixture's source of its split */
    uint64_t link_id;
} cur_block_t;

struct dpp_client {
    dpp_core_t *core;
    dpp_client_io_t *io;
    char session[24];
    unsigned rank;
    unsigned epochs, batch_size;
    unsigned epoch; /* current epoch of the consumer */
    int session_ended;
    int epoch_end_pending;      /* a kept remainder went out: EPOCH_END comes next */
    uint64_t epoch_batches_out; /* batches handed out in this epoch */
    /* order deterministic: the next block to take, (split position, block
     * index) in the current epoch; skip_rows: rows of it a resumed client
     * already delivered before its checkpoint */
    uint32_t next_seq, next_index, skip_rows;
    cur_block_t cur;
    dpp_block_builder_t assembly; /* rows of the next batch, when copied */
    size_t assembly_bytes;        /* counted in held_bytes */
    int32_t *assembly_sources;    /* a mixture's: [batch_size], each assembled row's source */
    void *zctx;                   /* ZSTD_DCtx, consumer thread only */
    dpp_client_stats_t stats;     /* consumer-side counters */
    dpp_auth_t auth;              /* cluster token (owned), or none */
};

struct dpp_batch {
    dpp_core_t *core;
    uint8_t *buf; /* a block, 8-byte aligned */
    size_t cap;   /* allocated; counted in held_bytes until released, then pooled */
    size_t rows;
    size_t valid_rows;   /* rows before the padding (remainder "pad") */
    const uint8_t *mask; /* [rows]: 1 real row, 0 padding; core->ones or owned */
    unsigned epoch;
    uint64_t link_id;    /* owed a credit on release; 0: none */
    int32_t *source_ids; /* a mixture's: [rows], the source of each row (-1: padding) */
};

#endif
