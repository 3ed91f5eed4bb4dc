/* SPDX-License-Identifier: Apache-2.0 */
/* Blocks: up to batch_size rows of one split in columnar layout, all columns
 * in one contiguous buffer described by a small header. The worker builds
 * them, the client reads them in place. Layout: docs/protocol.md, "Blocks". */
#ifndef DPP_FORMAT_BLOCK_H
#define DPP_FORMAT_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#define DPP_BLOCK_MAGIC 0x31425044u /* "DPB1" as little-endian u32 */
#define DPP_BLOCK_VERSION 2
#define DPP_BLOCK_HEADER_SIZE 32
#define DPP_BLOCK_COL_ENTRY_SIZE 16
#define DPP_BLOCK_MAX_FEATURES 4096
/* The largest block (raw bytes) dpp makes: what a client accepts by default
 * (its max_block_mb) and a frame's payload may carry. A spec whose batches
 * cannot fit is refused; a block that grows past it (long id lists) fails
 * its session with the reason, instead of stalling at the client. */
#define DPP_BLOCK_MAX_BYTES (256u << 20)

/* The columns a session's blocks have. Not owned: the arrays must outlive
 * whoever holds the shape. Either of ndense and nsparse may be 0. */
typedef struct dpp_block_shape {
    unsigned ndense, nsparse;
    const unsigned *dims;    /* [ndense], values per row */
    const uint8_t *weighted; /* [nsparse], 1: the feature has a weights column; NULL: none */
    int no_label;            /* 1: the spec has no label; the label column holds 0 bytes */
} dpp_block_shape_t;

/* Accumulates rows. Column arrays grow as rows are appended and are reused
 * from block to block. Every column is kept as the block will hold it, so
 * finishing a block copies whole columns. */
typedef struct dpp_block_builder {
    unsigned ndense, nsparse;
    int no_label;         /* the labels given are dropped: the block has none */
    unsigned *dims;       /* per dense feature */
    unsigned *first;      /* per dense feature: sum of the dims before it */
    uint8_t *weighted;    /* per sparse feature */
    unsigned dense_width; /* sum of dims */
    size_t rows, cap_rows;
    float *labels;    /* [cap_rows] */
    float *dense;     /* feature i: [cap_rows * first[i]] onward, [cap_rows][dims[i]] */
    int32_t *lengths; /* [nsparse][cap_rows] */
    int64_t **values; /* per sparse feature */
    float **weights;  /* per weighted sparse feature, parallel to values */
    size_t *nvalues, *cap_values;
} dpp_block_builder_t;

/* Prepares b for blocks of the given shape (copied). Returns 0, DPP_EINVAL
 * (a zero dim, too many features) or -ENOMEM; on 0 release with
 * dpp_block_builder_close(). */
int dpp_block_builder_init(dpp_block_builder_t *b, const dpp_block_shape_t *shape);
void dpp_block_builder_close(dpp_block_builder_t *b);

/* Appends one row: its label (ignored when the shape has none), dense_width
 * dense values (features in spec
 * order, each dims[i] wide), and for each sparse feature k the ids
 * ids[k][0..lens[k]) with, for weighted features, weights[k][0..lens[k])
 * (weights may be NULL when no feature is weighted). Returns 0 or -ENOMEM
 * (the row is then not added). */
int dpp_block_builder_append(dpp_block_builder_t *b, float label, const float *dense,
                             const int64_t *const *ids, const float *const *weights,
                             const size_t *lens);

/* One row written in place, so that a decoder puts values straight into
 * the columns instead of into a row that is copied after:
 *   1. dpp_block_builder_reserve_row(): room for row `rows`;
 *   2. its dense values into dpp_block_builder_dense_row(b, i); the ids of
 *      sparse feature k into values[k] + nvalues[k] (and weights[k] +
 *      nvalues[k]), after dpp_block_builder_reserve_values(b, k, n) made
 *      room for n of them (it may move values[k] and weights[k]);
 *   3. dpp_block_builder_commit_row() with its label and list lengths.
 * Nothing counts before the commit: a row given up halfway leaves no trace.
 * The reserves return 0 or -ENOMEM. */
int dpp_block_builder_reserve_row(dpp_block_builder_t *b);
int dpp_block_builder_reserve_values(dpp_block_builder_t *b, unsigned k, size_t n);
void dpp_block_builder_commit_row(dpp_block_builder_t *b, float label, const size_t *lens);

/* Dense feature i's values of row r (dims[i] floats); its whole column,
 * rows 0..rows, is contiguous from row 0 on. */
static inline float *dpp_block_builder_dense_row(dpp_block_builder_t *b, unsigned i, size_t r)
{
    return b->dense + b->cap_rows * b->first[i] + r * b->dims[i];
}

/* Appends rows [r0, r1) of a block that dpp_block_parse() accepted for the
 * builder's shape, column by column (the client assembles batches of exactly
 * batch_size rows this way). Returns 0, DPP_EINVAL or -ENOMEM (nothing is
 * then appended). */
int dpp_block_builder_append_block(dpp_block_builder_t *b, const uint8_t *block, size_t r0,
                                   size_t r1);

/* Appends n rows, row rows[j] of block blocks[j] (each accepted by
 * dpp_block_parse() for the builder's shape), as n calls of
 * dpp_block_builder_append_block(b, blocks[j], rows[j], rows[j] + 1) would,
 * column by column: the worker's cache serves an epoch's shuffled order
 * this way. Returns 0, DPP_EINVAL or -ENOMEM (nothing is then appended). */
int dpp_block_builder_gather(dpp_block_builder_t *b, const uint8_t *const *blocks,
                             const uint32_t *rows, size_t n);

/* Bytes the finished block will take. */
size_t dpp_block_builder_size(const dpp_block_builder_t *b);

/* Writes the rows appended so far as one block into a new malloc'd buffer
 * (*out, *len; caller frees) and empties the builder. Returns 0 or -ENOMEM. */
int dpp_block_builder_finish(dpp_block_builder_t *b, uint8_t **out, size_t *len);

/* The same into buf, which holds dpp_block_builder_size(b) bytes (measured
 * before) and is 8-byte aligned: for a caller that recycles its buffers.
 * Returns 0 or DPP_EINVAL (more than INT32_MAX sparse values). */
int dpp_block_builder_finish_to(dpp_block_builder_t *b, uint8_t *buf);

/* A zstd-compressed block (codec 1) as it arrived: 0 when its frame
 * declares its content size, equal to raw_size and at most max_raw, else
 * DPP_EBLOCK. Reads only the frame header: call it before allocating. */
int dpp_block_zstd_check(const uint8_t *data, size_t len, uint64_t raw_size, size_t max_raw);

/* Decompresses a checked zstd block into out (raw_size bytes). zctx: a
 * ZSTD_DCtx * (NULL: a temporary one). DPP_EBLOCK unless exactly raw_size
 * bytes came out. */
int dpp_block_zstd_decompress(void *zctx, const uint8_t *data, size_t len, uint8_t *out,
                              size_t raw_size);

/* Turns a block as it arrived (data[0..len), codec and raw_size from its
 * BLOCK header) into raw block bytes, with the client's checks:
 *  - codec 0: raw_size must equal len; *out is a malloc'd copy of data.
 *  - codec 1: the zstd frame's declared content size must be known, equal
 *    raw_size and be at most max_raw, all checked before anything is
 *    allocated; the frame must then decompress to exactly raw_size bytes.
 *  - any other codec: DPP_EBLOCK.
 * max_raw bounds codec 1 only (codec 0 bytes are already in memory, bounded
 * by the frame limits). zctx is a ZSTD_DCtx * the caller owns (NULL: a
 * temporary one). Returns 0 with *out a new malloc'd buffer of *out_len =
 * raw_size bytes, 8-byte aligned as dpp_block_parse() needs, that the caller
 * frees; or DPP_EBLOCK or -ENOMEM with *out NULL and *out_len 0. The bytes
 * are not parsed: call dpp_block_parse() next. */
int dpp_block_decompress(void *zctx, const uint8_t *data, size_t len, uint32_t codec,
                         uint64_t raw_size, size_t max_raw, uint8_t **out, size_t *out_len);

/* What a block holds, after dpp_block_parse() checked it. */
typedef struct dpp_block_info {
    uint32_t rows;
    unsigned ncols;
} dpp_block_info_t;

/* Validates buf[0..len) as a block of the given shape: magic, version,
 * counts, every column inside the buffer and 8-byte aligned, column sizes
 * consistent with rows and dims, lengths non-negative and summing to the
 * values (and weights) count. Returns 0 or DPP_EBLOCK. buf must be 8-byte
 * aligned. */
int dpp_block_parse(const uint8_t *buf, size_t len, const dpp_block_shape_t *shape,
                    dpp_block_info_t *info);

/* Column pointers of a parsed block (no checks: call dpp_block_parse first).
 * Columns: labels; dense i; then every sparse feature together in TorchRec
 * KeyedJaggedTensor layout (lengths, values and offsets key-major, weights
 * when any feature is weighted, 1.0 for the ids of the others). The per-key
 * functions return that key's slice (dpp_block_weights() NULL for an
 * unweighted key). dpp_block_labels() is NULL for a shape without a label. */
const float *dpp_block_labels(const uint8_t *buf, const dpp_block_shape_t *shape);
const float *dpp_block_dense(const uint8_t *buf, unsigned i);
const int32_t *dpp_block_lengths(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k);
const int64_t *dpp_block_values(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k,
                                size_t *n);
const float *dpp_block_weights(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k);

typedef struct dpp_block_kjt {
    const int32_t *lengths; /* [nsparse * rows], key-major */
    const int32_t *offsets; /* [nsparse * rows + 1], prefix sums of lengths */
    const int64_t *values;  /* [nvalues] */
    const float *weights;   /* [nvalues], NULL when no feature is weighted */
    size_t nvalues;
} dpp_block_kjt_t;

void dpp_block_kjt(const uint8_t *buf, const dpp_block_shape_t *shape, dpp_block_kjt_t *out);

#endif
