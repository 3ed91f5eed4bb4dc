/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient: the trainer side of dpp.
 *
 * A client attaches to one session (and one rank) at a master, connects to
 * the workers that serve the session and hands the trainer its batches.
 *
 * Threads: one consumer thread calls dpp_client_next() and the batch
 * accessors; network I/O runs on the library's own thread. The library never
 * aborts or exits the calling process: every failure, out-of-memory included,
 * is a negative return value (include/dpp/error.h, dpp_strerror()).
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

/* Attaches to `session` at the master `master_addr` ("HOST:PORT") as `rank`
 * (0 for a single consumer). Waits up to timeout_ms for the master to answer.
 * On success *out is a client the caller closes with dpp_client_close().
 * Returns 0 or a negative error (DPP_ENOSESSION, DPP_ERANK, -ECONNREFUSED...). */
int dpp_client_open(dpp_client_t **out, const char *master_addr, const char *session,
                    unsigned rank, int timeout_ms);

/* Waits up to timeout_ms (< 0: forever) for the next batch of this rank.
 * Returns DPP_BATCH with *out set (release it with dpp_batch_release()),
 * DPP_EPOCH_END once after the last batch of each epoch, DPP_SESSION_END
 * after the last epoch (and on every later call), DPP_ETIMEDOUT, or another
 * negative error. */
int dpp_client_next(dpp_client_t *c, dpp_batch_t **out, int timeout_ms);

/* Why the client failed, once next() returned an error that ends it (for
 * DPP_EFAILED: the session's failure as the master reports it, e.g. "file
 * ds=.../part-00001.tfrecord: corrupted record at offset 1234 (on_corrupt:
 * fail)"); "" otherwise. Valid until dpp_client_close(). */
const char *dpp_client_error(const dpp_client_t *c);

/* The epoch the next batch belongs to (0-based). */
unsigned dpp_client_epoch(const dpp_client_t *c);

/* Stops I/O, frees everything the client owns. Batches still held by the
 * caller stay valid until released. Accepts NULL. */
void dpp_client_close(dpp_client_t *c);

/* Feature names of the session, in spec order. Pointers stay valid until
 * dpp_client_close(). Index out of range returns NULL. */
unsigned dpp_client_num_dense(const dpp_client_t *c);
unsigned dpp_client_num_sparse(const dpp_client_t *c);
const char *dpp_client_dense_name(const dpp_client_t *c, unsigned i);
const char *dpp_client_sparse_name(const dpp_client_t *c, unsigned i);

/* Values per row of dense feature i (0 when out of range). */
unsigned dpp_client_dense_dim(const dpp_client_t *c, unsigned i);

/* 1 when sparse feature i carries per-id weights (spec `weights`). */
int dpp_client_sparse_weighted(const dpp_client_t *c, unsigned i);

/* Rows in the batch (at most the spec's batch_size; in this version a batch
 * is one block, so the last batch of a split may be smaller). */
size_t dpp_batch_rows(const dpp_batch_t *b);
unsigned dpp_batch_epoch(const dpp_batch_t *b);

/* Dense feature `name`: *data is float32 [rows, *dim], row-major. */
int dpp_batch_dense(const dpp_batch_t *b, const char *name, const float **data, unsigned *dim);

/* Sparse feature `name`: *lengths is int32 [rows] (ids per row), *values the
 * int64 ids of all rows back to back; *nvalues = sum of lengths. */
int dpp_batch_sparse(const dpp_batch_t *b, const char *name, const int64_t **values,
                     const int32_t **lengths, size_t *nvalues);

/* Per-id weights of weighted sparse feature `name`: float32, parallel to
 * the values of dpp_batch_sparse() (TorchRec KJT weights). DPP_ENOFEATURE
 * when the feature is unknown or unweighted. */
int dpp_batch_sparse_weights(const dpp_batch_t *b, const char *name, const float **weights);

/* Labels: float32 [rows]. */
int dpp_batch_labels(const dpp_batch_t *b, const float **labels);

/* Returns the batch's memory. Every pointer from the accessors becomes
 * invalid. Accepts NULL. */
void dpp_batch_release(dpp_batch_t *b);

#ifdef __cplusplus
}
#endif
#endif
