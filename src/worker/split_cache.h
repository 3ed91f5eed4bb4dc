/* SPDX-License-Identifier: Apache-2.0 */
/* A split's output as a worker's cache keeps it (the store: cache_store.h):
 * the blocks its rows make before any per-epoch row shuffle, which rows of
 * the records read survived the filters, and what the split reported. The
 * pipeline captures an entry when it makes a split (pipeline.c) and serves
 * every epoch from it, shuffling the rows as the spec and epoch say: the
 * blocks are what a worker without the cache makes, bit for bit, since
 * both put the same transformed rows in the same order.
 *
 * An entry also carries the identity of the file it was made from (size,
 * mtime, ctime, inode) and of the files the spec reads beside it
 * (vocabularies, the tokenizer): an entry whose identity no longer matches
 * is stale and never served. ctime is the cheap content check: no write to
 * a file leaves it unchanged, and no tool can set it back. */
#ifndef DPP_WORKER_SPLIT_CACHE_H
#define DPP_WORKER_SPLIT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/reject.h"
#include "format/block.h"
#include "pipeline.h"
#include "spec/spec.h"

/* Who a split's file and the spec's other files are. */
typedef struct dpp_split_identity {
    uint64_t size, ino;
    int64_t mtime_ns, ctime_ns;
    uint64_t aux; /* a hash of the vocabularies' and the tokenizer's identities */
} dpp_split_identity_t;

/* The identity of task t's file and of spec's other files under the data
 * root `root` now. Returns 0, or -errno when the file cannot be stat'ed. */
int dpp_split_identity(const dpp_task_t *t, const dpp_spec_t *spec, const char *root,
                       dpp_split_identity_t *out);

/* A split being made for the cache: its raw blocks in order, and for each
 * record the source gave (in file order) whether it became a row. */
typedef struct dpp_split_capture {
    struct captured_block {
        uint8_t *data; /* raw block bytes, malloc'd */
        size_t len;
        uint32_t rows;
    } *blocks;
    size_t nblocks, cap_blocks;
    uint64_t *survived; /* bit g: record g became a row */
    uint64_t ngathered;
    size_t cap_words;
    size_t bytes; /* of the blocks, for the memory it takes */
} dpp_split_capture_t;

/* Takes a raw block (data, malloc'd: the capture owns it from now on, also
 * on failure). Returns 0 or -ENOMEM. */
int dpp_split_capture_block(dpp_split_capture_t *c, uint8_t *data, size_t len, uint32_t rows);
/* The next record's fate. Returns 0 or -ENOMEM. */
int dpp_split_capture_record(dpp_split_capture_t *c, int survived);
void dpp_split_capture_free(dpp_split_capture_t *c);

/* What the split reported, kept with its blocks. */
typedef struct dpp_split_summary {
    uint64_t rows, filtered, examined, documents, tokens, padding;
    dpp_rejects_t rejects;
    const char *reject_detail; /* "" when none */
    const char *absent;        /* nabsent names, each followed by a NUL */
    size_t absent_len, nabsent;
    const char *names; /* nnames names, each followed by a NUL */
    size_t names_len, nnames;
} dpp_split_summary_t;

/* An entry read back (dpp_split_entry_parse): views into its bytes. */
typedef struct dpp_split_entry {
    dpp_split_identity_t identity;
    uint32_t batch_size;
    dpp_split_summary_t summary;
    uint64_t ngathered;
    const uint64_t *survived; /* ceil(ngathered / 64) words */
    size_t nblocks;
    const uint8_t *const *block; /* [nblocks] raw blocks, 8-byte aligned, parsed */
    const size_t *block_len;
    const uint32_t *block_rows;
    uint64_t *rank; /* [ceil(ngathered / 64)]: rows before each word, for the shuffle */
    void *mem;      /* what block, block_len, block_rows and rank live in */
} dpp_split_entry_t;

/* The size of a captured split's entry, and its bytes written into buf
 * (that many, 8-byte aligned: the cache store's own buffer, so that the
 * entry is not copied again). The size is 0 when too large to address. */
size_t dpp_split_entry_size(const dpp_split_capture_t *c, const dpp_split_summary_t *sum);
void dpp_split_entry_write(const dpp_split_capture_t *c, const dpp_split_identity_t *id,
                           uint32_t batch_size, const dpp_split_summary_t *sum, uint8_t *buf);

/* Reads entry bytes (8-byte aligned, as the store hands them) made for
 * blocks of `shape` and batch_size: every length, count and block is
 * checked (a block with dpp_block_parse). Returns 0 (release with
 * dpp_split_entry_close; the views point into buf, which must outlive e),
 * DPP_ECORRUPT with a reason in err, or -ENOMEM. */
int dpp_split_entry_parse(const uint8_t *buf, size_t len, const dpp_block_shape_t *shape,
                          uint32_t batch_size, dpp_split_entry_t *e, char *err, size_t errlen);
void dpp_split_entry_close(dpp_split_entry_t *e);

/* Row number (in the entry's blocks) of gathered record g, or -1 when it
 * did not survive. */
int64_t dpp_split_entry_row(const dpp_split_entry_t *e, uint64_t g);

#endif
