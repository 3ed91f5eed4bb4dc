/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient: the trainer side of dpp.
 *
 * A client attaches to one session (and one rank) at a master, connects to
 * every worker that serves the session and hands the trainer batches of
 * exactly the session's batch_size rows (docs/client.md).
 *
 * Threads: one consumer thread calls dpp_client_next() and the accessors of
 * the batches it got; dpp_batch_release() may be called from any thread.
 * Network I/O runs on the library's own thread. The library never aborts or
 * exits the calling process: every failure, out-of-memory included (-ENOMEM),
 * is a negative return value (include/dpp/error.h, dpp_strerror()).
 *
 * Memory: the client holds at most `memory_budget` bytes of received blocks;
 * each worker connection has at most `prefetch` blocks in flight (credits).
 * Batches the trainer holds count against the budget until released.
 */
#ifndef DPP_CLIENT_H
#define DPP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "dpp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dpp_client dpp_client_t;
typedef struct dpp_batch dpp_batch_t;

/* Positive results of dpp_client_next(): not errors. */
enum {
    DPP_BATCH = 0,       /* *out holds a batch */
    DPP_EPOCH_END = 1,   /* this rank has every batch of the current epoch */
    DPP_SESSION_END = 2, /* every epoch of the session is done */
};

typedef struct dpp_client_options {
    const char *master;     /* "HOST:PORT" of the master (required) */
    const char *session;    /* session id from `dppctl submit` (required) */
    unsigned rank;          /* this trainer's rank, 0-based (default 0) */
    unsigned world_size;    /* 0 (default): any; else must equal the session's consumers */
    unsigned prefetch;      /* blocks in flight per worker connection (default 8) */
    size_t memory_budget;   /* bytes of received blocks and held batches (default 256 MiB) */
    int connect_timeout_ms; /* for the first answer of the master, which is waited
                             * for with backoff if it is not up yet (default 10000) */
    const char *token;      /* cluster token (issue #6); NULL: none */
    /* order "deterministic": splits of this rank fetched ahead of the one
     * being consumed, fewer when they would not fit memory_budget (default 4) */
    unsigned prefetch_splits;
    /* a checkpoint token from dpp_client_checkpoint(): continue from there
     * (session may then be NULL: the token names it). NULL: from the start */
    const void *resume_token;
    size_t resume_token_len;
    /* largest block accepted once decompressed, MiB (default 256, at most
     * 4096): a block claiming more, or a zstd frame wanting a larger window,
     * is refused before anything is allocated (DPP_EBLOCK) */
    unsigned max_block_mb;
    /* an elastic resume (docs/client.md#elastic-resume): the checkpoint
     * tokens of every rank of the old world, taken at one step and
     * concatenated in rank order (n x DPP_CHECKPOINT_SIZE bytes); rank and
     * world_size (required) are this trainer's in the new world, session
     * may be NULL. Every rank of the new world opens with the same tokens:
     * the first makes the master plan the rest of the epoch for the new
     * world size, the others find it done. Not with resume_token. */
    const void *elastic_tokens;
    size_t elastic_tokens_len;
} dpp_client_options_t;

/* Fills o with the defaults; set master and session after it. */
void dpp_client_options_init(dpp_client_options_t *o);

/* Attaches with options. On success *out is a client the caller closes with
 * dpp_client_close(). Returns 0 or a negative error: DPP_EINVAL (missing
 * master or session, bad option), DPP_ENOSESSION, DPP_ERANK (rank or
 * world_size does not fit the session), DPP_ETOKEN (resume_token refused:
 * dpp_client_open_error() names the field), DPP_EHELD (another client reads
 * the rank: one reader per rank; dpp_client_open_error() names it; a client
 * opened after the reader is gone continues where it stopped),
 * DPP_ETIMEDOUT, -ECONNREFUSED... */
int dpp_client_open_opts(dpp_client_t **out, const dpp_client_options_t *o);

/* Why the last dpp_client_open() or dpp_client_open_opts() of the calling
 * thread failed, in words: the master's message (for DPP_ETOKEN, e.g.
 * "rank 0 of session s-1 cannot resume from this checkpoint token: index:
 * the token says block 9999, ..."), or what is wrong with a resume token;
 * "" after a success or when there is nothing to add to the error code.
 * Thread-local; valid until the thread's next open. Never NULL. */
const char *dpp_client_open_error(void);

/* Shorthand for dpp_client_open_opts() with defaults and the given values. */
int dpp_client_open(dpp_client_t **out, const char *master_addr, const char *session, unsigned rank,
                    int timeout_ms);

/* Waits up to timeout_ms (< 0: forever) for the next batch of this rank.
 * Returns DPP_BATCH with *out set (release it with dpp_batch_release()),
 * DPP_EPOCH_END once after the last batch of each epoch, DPP_SESSION_END
 * after the last epoch (and on every later call), DPP_ETIMEDOUT, or another
 * negative error. Batches hold exactly batch_size rows; a final smaller batch
 * of an epoch comes only when the spec's `remainder` is "keep". */
int dpp_client_next(dpp_client_t *c, dpp_batch_t **out, int timeout_ms);

/* Bytes of a checkpoint token (version 2, signed with HMAC-SHA256; the
 * 64-byte version-1 tokens of older versions are refused with DPP_ETOKEN). */
#define DPP_CHECKPOINT_SIZE 96

/* Writes a data checkpoint token for the current batch boundary into buf
 * (len >= DPP_CHECKPOINT_SIZE): a client opened later with it as
 * resume_token gets exactly the batches this one has not handed out yet,
 * the same batches in the same order (docs/client.md#checkpoints-and-resume).
 * Tokens are plain bytes, signed with the session's key, which the master
 * gives its clients: store them with the model checkpoint. Returns
 * DPP_CHECKPOINT_SIZE, DPP_EINVAL when len is too small or the spec's order
 * is "fastest" (no fixed order to resume in), DPP_EVERSION when the master
 * gave no token key (it is older than this library). */
int dpp_client_checkpoint(const dpp_client_t *c, void *buf, size_t len);

/* Why the client failed, once next() returned an error that ends it (for
 * DPP_EFAILED: the session's failure as the master reports it, e.g. "file
 * ds=.../part-00001.tfrecord: corrupted record at offset 1234 (on_corrupt:
 * fail)"); "" otherwise. Valid until dpp_client_close(). */
const char *dpp_client_error(const dpp_client_t *c);

/* The epoch the next batch belongs to (0-based). */
unsigned dpp_client_epoch(const dpp_client_t *c);

/* Batches this rank gets in the current epoch, or -1 while unknown. Known
 * from the plan as soon as the session's files are indexed when the spec has
 * no filters (exact unless records are rejected as corrupt); with filters,
 * once every block of the rank's epoch has arrived. */
int64_t dpp_client_epoch_batches(const dpp_client_t *c);

/* dpp_client_num_epochs() of a session whose spec says `"epochs":
 * "unbounded"`: epochs follow each other until the session is cancelled. */
#define DPP_EPOCHS_UNBOUNDED 0xffffffffu

/* The session's shape. */
unsigned dpp_client_batch_size(const dpp_client_t *c);
unsigned dpp_client_num_epochs(const dpp_client_t *c);

/* Stops I/O, frees everything the client owns. Batches still held by the
 * caller stay valid until released. Accepts NULL. */
void dpp_client_close(dpp_client_t *c);

/* Feature names of the session, in spec order. Pointers stay valid until
 * dpp_client_close(). Index out of range returns NULL. A session has at
 * least one feature; either count may be 0 (a spec with only dense or only
 * sparse features). */
unsigned dpp_client_num_dense(const dpp_client_t *c);
unsigned dpp_client_num_sparse(const dpp_client_t *c);
const char *dpp_client_dense_name(const dpp_client_t *c, unsigned i);
const char *dpp_client_sparse_name(const dpp_client_t *c, unsigned i);

/* The name of the session's label, or NULL when its spec has none (then
 * its batches have no labels: dpp_batch_labels()). Valid until
 * dpp_client_close(). */
const char *dpp_client_label_name(const dpp_client_t *c);

/* Values per row of dense feature i (0 when out of range). */
unsigned dpp_client_dense_dim(const dpp_client_t *c, unsigned i);

/* 1 when sparse feature i carries per-id weights (spec `weights`). */
int dpp_client_sparse_weighted(const dpp_client_t *c, unsigned i);

/* Counters since open; read them from the consumer thread. */
typedef struct dpp_client_stats {
    uint64_t batches, rows;
    uint64_t wait_ns;                  /* time spent inside next() waiting for data */
    uint64_t wait_hist[16];            /* next() waits: bucket i counts waits < 2^i * 10 us
                                        * (i = 15: every longer wait) */
    uint64_t bytes_wire;               /* block bytes received, as sent (compressed or not) */
    uint64_t bytes_raw;                /* the same blocks decompressed */
    uint64_t blocks, blocks_duplicate; /* duplicates: re-sent by a re-leased split */
    uint64_t reconnects;               /* worker and master connections made again */
    uint64_t batches_zero_copy;        /* batches handed out as received, without a copy */
    uint64_t rows_padded;              /* remainder "pad": masked empty rows added */
} dpp_client_stats_t;

void dpp_client_get_stats(const dpp_client_t *c, dpp_client_stats_t *out);

/* ---- batches -------------------------------------------------------------
 * Every pointer an accessor returns stays valid until dpp_batch_release().
 * Features are addressed by name or by index (spec order). */

size_t dpp_batch_rows(const dpp_batch_t *b);

/* Rows that hold data: rows minus the padding, which always comes last
 * (remainder "pad"; otherwise equal to dpp_batch_rows()). */
size_t dpp_batch_valid_rows(const dpp_batch_t *b);

/* Row mask uint8 [rows]: 1 for a row with data, 0 for padding. */
const uint8_t *dpp_batch_mask(const dpp_batch_t *b);

/* A mixture's batch (spec "sources", docs/spec.md#mixtures): int32 [rows],
 * the source each row came from (an index into dpp_client_source_name();
 * -1 for padding). NULL for a session of one table. */
const int32_t *dpp_batch_source_ids(const dpp_batch_t *b);
/* A mixture's sources (0 for a session of one table) and the table of
 * source i (NULL past the last). */
unsigned dpp_client_num_sources(const dpp_client_t *c);
const char *dpp_client_source_name(const dpp_client_t *c, unsigned i);
unsigned dpp_batch_epoch(const dpp_batch_t *b);

/* Labels: float32 [rows]. Returns 0, or DPP_ENOFEATURE with *labels NULL
 * when the session has no label (dpp_client_label_name() is NULL). */
int dpp_batch_labels(const dpp_batch_t *b, const float **labels);

/* Dense feature: float32 [rows, *dim], row-major. DPP_ENOFEATURE for a name
 * or index the session does not have (every one, when it has no dense
 * features). */
int dpp_batch_dense(const dpp_batch_t *b, const char *name, const float **data, unsigned *dim);
int dpp_batch_dense_at(const dpp_batch_t *b, unsigned i, const float **data, unsigned *dim);

/* One sparse feature: its ids int64 [*nvalues] (all rows back to back) and
 * lengths int32 [rows]. */
int dpp_batch_sparse(const dpp_batch_t *b, const char *name, const int64_t **values,
                     const int32_t **lengths, size_t *nvalues);
int dpp_batch_sparse_at(const dpp_batch_t *b, unsigned k, const int64_t **values,
                        const int32_t **lengths, size_t *nvalues);

/* Per-id weights of a weighted sparse feature: float32, parallel to its
 * values (TorchRec KJT weights). DPP_ENOFEATURE when unknown or unweighted. */
int dpp_batch_sparse_weights(const dpp_batch_t *b, const char *name, const float **weights);

/* Every sparse feature at once in TorchRec KeyedJaggedTensor layout: keys in
 * spec order (dpp_client_sparse_name()), values int64 [*nvalues] key-major,
 * lengths int32 [keys * rows] key-major, offsets int32 [keys * rows + 1]
 * (prefix sums of lengths), weights float32 [*nvalues] or NULL when no
 * feature is weighted (1.0 for the ids of unweighted features otherwise).
 * stride = rows. A session without sparse features gives nkeys 0, values,
 * lengths and weights NULL, nvalues 0, and offsets the one-element [0]. */
typedef struct dpp_kjt {
    unsigned nkeys;
    size_t stride;
    const int64_t *values;
    size_t nvalues;
    const int32_t *lengths;
    const int32_t *offsets;
    const float *weights;
} dpp_kjt_t;

int dpp_batch_kjt(const dpp_batch_t *b, dpp_kjt_t *out);

/* A batch of a text session (spec format "jsonl", docs/spec.md#text-sessions):
 * packed sequences of `length` tokens. The first `rows` rows hold tokens
 * (dpp_batch_valid_rows(); padding rows of remainder "pad" come last and
 * hold none). Views of the batch, row-major int64 [rows * length]:
 * input_ids; labels, the next token of the same document or -100 where
 * there is none (a document's last token, padding); position_ids, a
 * token's place in its document. cu_seqlens int64 [ncu]: each row's
 * document-piece boundaries, from 0 to length, row r's cu_lengths[r] of
 * them back to back. padding float32 [rows]: padded positions at the end
 * of each row. DPP_ENOFEATURE for a batch of any other session. */
typedef struct dpp_text_batch {
    size_t rows;
    uint32_t length;
    const int64_t *input_ids, *labels, *position_ids;
    const int64_t *cu_seqlens;
    const int32_t *cu_lengths;
    size_t ncu;
    const float *padding;
} dpp_text_batch_t;

int dpp_batch_text(const dpp_batch_t *b, dpp_text_batch_t *out);

/* Returns the batch's memory to the client's pool and its budget. Every
 * pointer from the accessors becomes invalid. Accepts NULL. */
void dpp_batch_release(dpp_batch_t *b);

/* ---- Sessions: submit, status, cancel (what dppctl does) ---------------
 *
 * For programs that drive their sessions themselves (the Python binding's
 * dpp.submit()). Each call makes one request to the master at `master`
 * ("HOST:PORT"): token is the cluster token's text (NULL: the file
 * $DPP_TOKEN_FILE names, else none); timeout_ms bounds the connect and the
 * reply (<= 0: 10 s). On failure they return a negative error (the master's
 * code: DPP_ESPEC for a refused spec, DPP_ENOSESSION, ...; -ECONNREFUSED,
 * DPP_ETIMEDOUT) and dpp_session_error() says why in words: the master's,
 * which for a refused spec name every problem, one per line. */

/* Submits a spec (its JSON text); the new session's id goes to
 * session_id[len] (24 bytes hold one). */
int dpp_session_submit(const char *master, const char *token, int timeout_ms,
                       const char *spec_json, char *session_id, size_t len);

/* The status of session `session` as a JSON object, the one `dppctl status
 * SESSION -o json` prints (docs/cli.md); session NULL or "": the listing,
 * a JSON array of them (without ranks). *json is the caller's, freed with
 * dpp_free(). */
int dpp_session_status(const char *master, const char *token, int timeout_ms, const char *session,
                       char **json);

/* Cancels a session; its state before the cancel ("running", "done", ...)
 * goes to state_before[len] when it is not NULL. */
int dpp_session_cancel(const char *master, const char *token, int timeout_ms, const char *session,
                       char *state_before, size_t len);

/* Why this thread's last dpp_session_* call failed; "" after a success. */
const char *dpp_session_error(void);

/* Frees memory the library handed out (dpp_session_status()'s text). */
void dpp_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
