/* SPDX-License-Identifier: Apache-2.0 */
/* dpp-gen's Parquet output: a writer of the generator's fixed Criteo-like
 * schema, with a Thrift compact-protocol encoder of its own. It shares no code
 * with the reader in src/parquet/, so that tests of that reader against these
 * files are not circular. */
#ifndef DPP_GEN_PARQUET_WRITER_H
#define DPP_GEN_PARQUET_WRITER_H

#include <stdint.h>
#include <stdio.h>

#define DPP_GEN_NDENSE 13
#define DPP_GEN_NSPARSE 26
#define DPP_GEN_MAX_IDS 8
#define DPP_GEN_S1_MAX 16

/* Pages end at a row boundary once they hold this many rows or level entries. */
#define DPP_GEN_PAGE_ROWS 8192
#define DPP_GEN_PAGE_VALUES 16384

/* One generated row, the same for every output format. */
typedef struct dpp_gen_row {
    int64_t row_id;
    int64_t label;
    float dense[DPP_GEN_NDENSE];
    uint32_t dense_null;            /* bit j set: dense[j] (column i<j+1>) is null */
    uint8_t n_ids[DPP_GEN_NSPARSE]; /* 0..DPP_GEN_MAX_IDS (0: empty, with --nulls only) */
    uint32_t sparse_null;           /* bit j set: list c<j+1> is null */
    int s1_null;
    int64_t ids[DPP_GEN_NSPARSE][DPP_GEN_MAX_IDS];
    uint8_t s1_len;
    char s1[DPP_GEN_S1_MAX]; /* not NUL-terminated */
} dpp_gen_row_t;

/* Parquet's CompressionCodec numbers. */
typedef enum dpp_gen_codec {
    DPP_GEN_CODEC_NONE = 0,
    DPP_GEN_CODEC_SNAPPY = 1,
    DPP_GEN_CODEC_ZSTD = 6,
} dpp_gen_codec_t;

typedef struct dpp_gen_pq_opts {
    dpp_gen_codec_t codec;
    uint64_t row_group_rows; /* at least 1 */
    int page_version;        /* 1 (DATA_PAGE) or 2 (DATA_PAGE_V2); 0: 1 */
    const char *created_by;  /* copied */
} dpp_gen_pq_opts_t;

typedef struct dpp_gen_pq dpp_gen_pq_t;

/* A writer for any number of files, one after another; its buffers are
 * reused across files. Out of memory aborts (dpp_xmalloc). Free with
 * dpp_gen_pq_free. */
dpp_gen_pq_t *dpp_gen_pq_new(const dpp_gen_pq_opts_t *opts);

/* Frees the writer; accepts NULL. Does not close a file it was writing. */
void dpp_gen_pq_free(dpp_gen_pq_t *w);

/* Starts a file on f, which must be empty and stay open until
 * dpp_gen_pq_end; the caller owns and closes it. Returns 0 or -errno. */
int dpp_gen_pq_begin(dpp_gen_pq_t *w, FILE *f);

/* Appends a row (copied). Writes a row group to the file each
 * opts.row_group_rows rows. Returns 0, -errno on a write error, or -EIO when
 * the codec fails. After an error only dpp_gen_pq_free is allowed. */
int dpp_gen_pq_add(dpp_gen_pq_t *w, const dpp_gen_row_t *row);

/* Writes the last row group, the offset indexes and the footer; *bytes (may
 * be NULL) gets the file's size. The caller flushes and closes f. Returns as
 * dpp_gen_pq_add. */
int dpp_gen_pq_end(dpp_gen_pq_t *w, uint64_t *bytes);

#endif
