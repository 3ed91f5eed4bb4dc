/* SPDX-License-Identifier: Apache-2.0 */
/* Private state of libdppclient shared by the consumer side (client.c) and
 * the I/O thread (client_io.c). */
#ifndef DPP_CLIENT_INTERNAL_H
#define DPP_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "wire/handshake.h"
#include "format/block.h"
#include "wire/conn.h"
#include "dpp/client.h"

#define DPP_CLIENT_DEFAULT_PREFETCH 8
#define DPP_CLIENT_DEFAULT_PREFETCH_SPLITS 4
#define DPP_CLIENT_DEFAULT_MAX_BLOCK_MB 256
#define DPP_CLIENT_DEFAULT_BUDGET (256u << 20)
#define DPP_CLIENT_DEFAULT_TIMEOUT_MS 10000
/* Buffers kept for reuse after a batch is released or a block is spent. */
#define DPP_CLIENT_POOL_SLOTS 16

typedef struct pool_buf {
    void *p;
    size_t cap;
} pool_buf_t;

/* A block received from a worker, waiting for the consumer. */
typedef struct rblock {
    struct rblock *next;
    uint64_t link_id; /* the worker connection that owes a credit back */
    uint32_t epoch, split, index;
    uint32_t seq; /* the split's position in the rank's epoch order */
    int last;
    uint32_t rows;
    uint32_t codec;
    uint64_t raw_size;
    uint8_t *data;
    size_t len, cap; /* cap: bytes allocated, for the pool */
} rblock_t;

/* Which blocks of one split arrived and how many reached the trainer. */
typedef struct split_track {
    uint8_t *seen; /* bitset of block indices */
    size_t seen_bytes;
    int64_t last_index; /* -1 until the last block arrived */
    uint32_t received;  /* distinct blocks arrived */
    uint64_t rows;      /* rows in them */
    uint64_t bytes;     /* their bytes on the wire */
    uint32_t delivered; /* blocks taken by the consumer */
    int done;           /* every block taken */
} split_track_t;

/* Tracking of one epoch's splits, indexed by split id (grows on demand). */
typedef struct epoch_track {
    int64_t epoch;       /* -1: unused */
    int64_t rank_splits; /* splits of the rank in this epoch (block headers); -1: unknown */
    split_track_t *splits;
    size_t nsplits;
    size_t done_splits;     /* every block taken by the consumer */
    size_t complete_splits; /* every block arrived */
    uint64_t rows_arrived;  /* rows of the complete splits */
} epoch_track_t;

/* State shared by the consumer, the I/O thread and outstanding batches.
 * Reference-counted: batches keep it alive after dpp_client_close(). */
typedef struct dpp_core {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* ready blocks or an error arrived */
    int refs;
    int closed;       /* the I/O thread is gone; don't wake it */
    uv_async_t *wake; /* I/O thread's; valid while !closed */
    /* schema, immutable after open */
    unsigned ndense, nsparse;
    char **dense_names, **sparse_names;
    unsigned *dims;
    uint8_t *weighted;
    dpp_block_shape_t shape; /* points at dims and weighted */
    unsigned batch_size;
    int keep_remainder;
    int pad;             /* remainder "pad" */
    int64_t pad_batches; /* with pad: batches per epoch, -1 until planned */
    int order_fastest;   /* blocks taken as they arrive, credits returned when spent */
    uint8_t *ones;       /* batch_size bytes of 1: the mask of unpadded batches */
    unsigned prefetch;
    unsigned prefetch_splits; /* order deterministic: most splits in flight ahead */
    size_t max_raw;           /* largest block accepted, decompressed (a bomb is refused) */
    size_t
        max_split_bytes; /* largest split seen on the wire, to fit prefetch_splits in the budget */
    size_t budget;
    int64_t rank_splits;  /* per epoch; -1 until the master has planned */
    int64_t rank_records; /* per epoch when rank_records_exact; -1 unknown */
    /* memory: bytes of received blocks, blocks being consumed, the batch
     * being assembled and batches the trainer holds */
    size_t held_bytes;
    size_t trainer_bytes; /* of those, in batches the trainer holds */
    size_t max_block;     /* largest block seen on the wire, for credit decisions */
    /* released buffers kept for reuse; their bytes count against the budget */
    pool_buf_t pool[DPP_CLIENT_POOL_SLOTS];
    size_t npool, pool_bytes;
    /* I/O-side counters (the consumer's own are in dpp_client) */
    uint64_t bytes_wire, bytes_raw, blocks, blocks_duplicate, reconnects;
    /* consumer <-> I/O */
    rblock_t *ready, **ready_tail;
    size_t nready;
    uint64_t *credit_q; /* link ids owed one credit each */
    size_t ncredit, credit_cap;
    uint32_t (*ack_q)[2]; /* (epoch, split) consumed */
    size_t nack, ack_cap;
    uint32_t cur_epoch; /* the consumer's epoch; older blocks are duplicates */
    /* the consumer's counters as of its last next(), reported to the master */
    uint64_t rep_batches, rep_wait_ns, rep_hist[16];
    uint64_t open_ns;       /* when the client opened (monotonic) */
    epoch_track_t track[2]; /* by epoch parity: current and next */
    int error;
    char error_text[256];
} dpp_core_t;

typedef struct dpp_client_io dpp_client_io_t;

/* The block the consumer is cutting batches from. */
typedef struct cur_block {
    uint8_t *raw; /* decompressed, validated; NULL: none */
    size_t raw_len, raw_cap;
    uint32_t rows, row_off;
    uint32_t epoch, seq, index;
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
    void *zctx;                   /* ZSTD_DCtx, consumer thread only */
    dpp_client_stats_t stats;     /* consumer-side counters */
    dpp_auth_t auth;              /* cluster token (owned), or none */
};

struct dpp_batch {
    dpp_core_t *core;
    uint8_t *buf; /* a block, 8-byte aligned */
    size_t bytes; /* counted in held_bytes until released */
    size_t cap;   /* allocated, for the pool */
    size_t rows;
    size_t valid_rows;   /* rows before the padding (remainder "pad") */
    const uint8_t *mask; /* [rows]: 1 real row, 0 padding; core->ones or owned */
    unsigned epoch;
    uint64_t link_id; /* owed a credit on release; 0: none */
};

void dpp__core_unref(dpp_core_t *core);

/* Split tracking for epoch e (NULL when e is neither current nor next).
 * Caller holds core->mu. */
epoch_track_t *dpp__core_epoch(dpp_core_t *core, uint32_t epoch, int create);
/* Splits of the rank in t's epoch, -1 while unknown. Caller holds core->mu. */
int64_t dpp__epoch_splits(const dpp_core_t *core, const epoch_track_t *t);
/* Grows the tracker so split `id` exists; returns NULL on -ENOMEM. */
split_track_t *dpp__track_split(epoch_track_t *t, uint32_t id);

/* Queues a credit for link_id (0: none owed, nothing done) / an ack, and
 * wakes the I/O thread. Caller holds core->mu. Returns 0 or -ENOMEM. The
 * I/O thread sends a queued credit only while the memory budget has room
 * for another block. */
int dpp__core_credit(dpp_core_t *core, uint64_t link_id);
int dpp__core_ack(dpp_core_t *core, uint32_t epoch, uint32_t split);
void dpp__core_fail(dpp_core_t *core, int err, const char *text);
/* Takes what an attach reply says about the rank's epochs once the master
 * has planned them (rank_splits, rank_records). Caller holds core->mu (or is
 * the only thread). */
struct Dpp__AttachReply;
void dpp__core_plan(dpp_core_t *core, const struct Dpp__AttachReply *r);

/* A buffer of at least size bytes: a pooled one that is not much larger, or
 * a new one; *cap is its real size. NULL on -ENOMEM. Caller holds core->mu. */
void *dpp__pool_get(dpp_core_t *core, size_t size, size_t *cap);
/* Keeps p (cap bytes) for reuse while the budget has room, else frees it.
 * Accepts NULL. Caller holds core->mu. */
void dpp__pool_put(dpp_core_t *core, void *p, size_t cap);

/* Memory leaves the client (caller holds core->mu): wakes the I/O thread,
 * which may now send credits it held back. */
void dpp__core_unhold(dpp_core_t *core, size_t bytes);

/* Splits the master may lease to this rank beyond its first unconsumed one
 * (order deterministic): prefetch_splits, fewer when that many of the
 * largest split seen would not fit the memory budget. Caller holds core->mu. */
unsigned dpp__core_window(const dpp_core_t *core);

/* Starts the I/O thread for a client whose session info is filled in. */
int dpp__io_start(dpp_client_t *c, const struct sockaddr_storage *master, char *const *workers,
                  size_t nworkers);
/* Stops and joins the I/O thread, frees it. */
void dpp__io_stop(dpp_client_io_t *io);

#endif
