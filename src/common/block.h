/* SPDX-License-Identifier: Apache-2.0 */
/* Blocks: up to batch_size rows of one split in columnar layout, all columns
 * in one contiguous buffer described by a small header. The worker builds
 * them, the client reads them in place. Layout: docs/protocol.md, "Blocks". */
#ifndef DPP_COMMON_BLOCK_H
#define DPP_COMMON_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#define DPP_BLOCK_MAGIC 0x31425044u /* "DPB1" as little-endian u32 */
#define DPP_BLOCK_VERSION 1
#define DPP_BLOCK_HEADER_SIZE 32
#define DPP_BLOCK_COL_ENTRY_SIZE 16
#define DPP_BLOCK_MAX_FEATURES 4096

/* Accumulates rows. Column arrays grow as rows are appended. */
typedef struct dpp_block_builder {
    unsigned ndense, nsparse;
    unsigned *dims;      /* per dense feature */
    unsigned dense_width; /* sum of dims */
    size_t rows, cap_rows;
    float *labels;       /* [cap_rows] */
    float *dense;        /* [cap_rows * dense_width], row-major over all dense values */
    int32_t *lengths;    /* [nsparse][cap_rows] */
    int64_t **values;    /* per sparse feature */
    size_t *nvalues, *cap_values;
} dpp_block_builder_t;

/* Prepares b for features with the given dense dims and nsparse sparse
 * features. Returns 0, DPP_EINVAL or -ENOMEM; on 0 release with
 * dpp_block_builder_close(). */
int dpp_block_builder_init(dpp_block_builder_t *b, unsigned ndense, const unsigned *dims,
                           unsigned nsparse);
void dpp_block_builder_close(dpp_block_builder_t *b);

/* Appends one row: its label, dense_width dense values (features in spec
 * order, each dims[i] wide), and for each sparse feature k the ids
 * ids[k][0..lens[k]). Returns 0 or -ENOMEM (the row is then not added). */
int dpp_block_builder_append(dpp_block_builder_t *b, float label, const float *dense,
                             const int64_t *const *ids, const size_t *lens);

/* Bytes the finished block will take. */
size_t dpp_block_builder_size(const dpp_block_builder_t *b);

/* Writes the rows appended so far as one block into a new malloc'd buffer
 * (*out, *len; caller frees) and empties the builder. Returns 0 or -ENOMEM. */
int dpp_block_builder_finish(dpp_block_builder_t *b, uint8_t **out, size_t *len);

/* What a block holds, after dpp_block_parse() checked it. */
typedef struct dpp_block_info {
    uint32_t rows;
    unsigned ndense, nsparse;
    unsigned ncols;
} dpp_block_info_t;

/* Validates buf[0..len) as a block with the expected shape: magic, version,
 * counts, every column inside the buffer and 8-byte aligned, column sizes
 * consistent with rows and dims, lengths non-negative and summing to the
 * values count. Returns 0 or DPP_EBLOCK. buf must be 8-byte aligned. */
int dpp_block_parse(const uint8_t *buf, size_t len, unsigned ndense, const unsigned *dims,
                    unsigned nsparse, dpp_block_info_t *info);

/* Column pointers of a parsed block (no checks: call dpp_block_parse first).
 * Columns: labels; dense i; sparse k lengths and values. */
const float *dpp_block_labels(const uint8_t *buf);
const float *dpp_block_dense(const uint8_t *buf, unsigned i);
const int32_t *dpp_block_lengths(const uint8_t *buf, unsigned ndense, unsigned k);
const int64_t *dpp_block_values(const uint8_t *buf, unsigned ndense, unsigned k, size_t *n);

#endif
