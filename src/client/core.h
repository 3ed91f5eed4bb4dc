/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's core: the state shared by the consumer side (open.c, next.c,
 * checkpoint.c, accessors.c), the I/O thread (io.c) and outstanding batches,
 * and the functions both sides call on it. Nothing here knows about
 * dpp_client_t or the I/O thread. */
#ifndef DPP_CLIENT_CORE_H
#define DPP_CLIENT_CORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "format/block.h"

/* Buffers kept for reuse after a batch is released or a block is spent
 * (their bytes count against the memory budget, which bounds them). As many
 * as blocks a budget holds in flight: with 16, a consumer slower than its
 * workers (dppctl read: 56 blocks of 2.2 MB in flight) freed a third of its
 * buffers and took the next ones fresh from the kernel, a page fault per
 * 4 KiB, 40% of its CPU time. */
#define DPP_CLIENT_POOL_SLOTS 128
/* At close, how long unconfirmed acknowledgements are waited for. */
#define DPP_CLIENT_CLOSE_MS 3000
/* Lost worker links remembered for the master at once. */
#define DPP_CLIENT_MAX_LOST 16

typedef struct pool_buf {
    void *p;
    size_t cap;
} pool_buf_t;

/* A block received from a worker, waiting for the consumer. */
typedef struct rblock {
    struct rblock *next;
    uint64_t link_id; /* the worker connection that owes a credit back */
    uint32_t epoch, split, index;
    uint32_t seq;    /* the split's position in the rank's epoch order */
    uint32_t source; /* a mixture's source of the split */
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
    uint64_t bytes;     /* their bytes, decompressed */
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
    unsigned ndense, nsparse; /* either may be 0, not both */
    char **dense_names, **sparse_names;
    char *label_name; /* NULL: the spec has no label */
    char **source_names; /* a mixture's sources' tables [nsources]; 0: not a mixture */
    unsigned nsources;
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
        max_split_bytes; /* largest split seen, decompressed, to fit prefetch_splits in the budget */
    size_t budget;
    int64_t rank_splits;  /* per epoch; -1 until the master has planned */
    int64_t rank_records; /* per epoch when rank_records_exact; -1 unknown */
    /* memory: bytes of received blocks, blocks being consumed, the batch
     * being assembled and batches the trainer holds; a buffer counts with
     * its capacity (a pooled one may be up to twice what it holds) */
    size_t held_bytes;
    size_t trainer_bytes; /* of those, in batches the trainer holds */
    size_t max_block;     /* largest block seen, decompressed, for credit decisions */
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
    uint64_t client_id;     /* drawn at open, in every attach: the rank's reader */
    uint64_t open_ns;       /* when the client opened (monotonic) */
    epoch_track_t track[2]; /* by epoch parity: current and next */
    /* the session's checkpoint-token key from the master's latest attach
     * reply (docs/client.md#checkpoints-and-resume); token_key_set 0: none
     * came (a master older than this library) */
    uint8_t token_key[32];
    int token_key_set;
    /* the plan generation this client reads (AttachReply.generation of its
     * first attach; blocks of another are dropped), and, when an elastic
     * resume re-planned epoch rest_epoch of it, that epoch's padded batch
     * count, this rank's records in it (-1: not known), and the splits of
     * this rank it keeps only rows [skip, skip + take) of (by position,
     * ascending) */
    uint32_t generation;
    int rest;
    uint32_t rest_epoch;
    int64_t rest_pad_batches;
    int64_t rest_rank_records;
    struct dpp_trim_rows {
        uint32_t seq;
        uint64_t skip, take;
    } *trims;
    size_t ntrims;
    /* the end of the last epoch waits for the master's word on the session
     * (its data checks may fail it at the last split): an attach sent
     * after the rank's last acknowledgement that does not say "failed" */
    enum { VERDICT_NONE, VERDICT_ASKED, VERDICT_OK } verdict;
    int error;
    /* as long as a worker's split error (a failed read of an object names
     * the request, its range, status and both ETags) */
    char error_text[1024];
} dpp_core_t;

/* A new core holding one reference, with nothing planned yet; NULL on
 * -ENOMEM. Freed by dpp__core_unref(). */
dpp_core_t *dpp__core_new(void);
/* Drops a reference; the last one frees the core, its queued blocks, its
 * pool and its schema. Takes core->mu itself. */
void dpp__core_unref(dpp_core_t *core);

/* Split tracking for epoch e (NULL when e is neither current nor next).
 * Caller holds core->mu. */
epoch_track_t *dpp__core_epoch(dpp_core_t *core, uint32_t epoch, int create);
/* Frees t's split tracking and marks it unused, so that its slot can take
 * the epoch after next. Caller holds core->mu (or drops the last reference). */
void dpp__track_reset(epoch_track_t *t);
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
/* Records the client's first failure (err and a copy of text; later ones
 * are dropped) and wakes the consumer. Caller holds core->mu (or is the
 * only thread). */
void dpp__core_fail(dpp_core_t *core, int err, const char *text);
/* The consumer took every block of the last epoch: asks the I/O thread for
 * the master's verdict (core->verdict). Caller holds core->mu. */
void dpp__core_ask_verdict(dpp_core_t *core);
/* Whether an attach reply's state is a failure (a cancel is one). */
int dpp__state_failed(const char *state);
/* Takes what an attach reply says about the rank's epochs once the master
 * has planned them (rank_splits, rank_records). Caller holds core->mu (or is
 * the only thread). */
struct Dpp__AttachReply;
void dpp__core_plan(dpp_core_t *core, const struct Dpp__AttachReply *r);

/* Takes the session's schema (features, label, batch size, remainder and
 * order) from the first attach reply; the core owns copies of the names.
 * Returns 0, DPP_EMSG (a reply no master sends: no features, a zero dim...)
 * or -ENOMEM; on failure what was taken is freed with the core. */
int dpp__core_set_schema(dpp_core_t *core, const struct Dpp__AttachReply *r);

/* Takes the session's checkpoint-token key from an attach reply (the latest
 * one wins: a master that had to make a new key says so in every reply); a
 * reply without a 32-byte key changes nothing. Caller holds core->mu (or is
 * the only thread). */
void dpp__core_take_key(dpp_core_t *core, const struct Dpp__AttachReply *r);

/* Takes the reply's plan generation and what it says of an epoch an
 * elastic resume re-planned (AttachReply.rest: its padded batch count, this
 * rank's cut splits): the I/O thread's later replies keep a generation the
 * master checked against the first. Caller holds core->mu (or is the only
 * thread). Returns 0 or -ENOMEM (the trims then stay as they were). */
int dpp__core_take_rest(dpp_core_t *core, const struct Dpp__AttachReply *r);

/* Batches this rank gets in `epoch` with remainder "pad" (-1: not known
 * yet). Caller holds core->mu. */
int64_t dpp__core_pad_batches(const dpp_core_t *core, uint32_t epoch);

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

#endif
