/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's pipeline threads: each takes one lease at a time and runs
 * read -> verify -> decode -> transform -> build block -> compress for its
 * split, handing finished blocks and split results to the loop thread. The
 * bytes of blocks not yet written to a client are bounded by a budget: when
 * it is full, pipeline threads wait instead of allocating. */
#ifndef DPP_WORKER_PIPELINE_H
#define DPP_WORKER_PIPELINE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/reject.h"
#include "reader.h"

typedef enum dpp_task_kind {
    DPP_TASK_SPLIT = 0, /* produce the blocks of a record range */
    DPP_TASK_INDEX = 1, /* count a file's records, find its split boundaries */
} dpp_task_kind_t;

typedef struct dpp_task {
    struct dpp_task *next;
    dpp_task_kind_t kind;
    uint64_t lease_id;
    char session[24];
    uint32_t epoch, split, rank;
    char *path;     /* absolute */
    char *rel_path; /* relative to the table; part of each row's identity */
    char *spec_json;
    unsigned generation;                 /* the pipeline's generation when leased (fencing) */
    uint64_t byte_start, byte_end;       /* SPLIT */
    uint64_t record_start, record_count; /* SPLIT */
    uint64_t record_skip, record_take;   /* SPLIT: the window to produce; take 0: all */
    uint64_t range_records;    /* SPLIT: records the index puts in the range; 0: unknown */
    uint32_t seq, rank_splits; /* SPLIT: its place in the rank's epoch order */
    uint32_t plan_gen;         /* SPLIT: the session's plan generation (Lease.generation) */
    uint32_t source;           /* SPLIT: a mixture's source (Lease.source) */
    uint32_t split_rows;       /* INDEX */
    int format; /* a dpp_format_t (format/format.h); -1: a name this worker does not know */
    int text;   /* a text session's task: the text source reads the file (source_text.c) */
    char format_name[32];
    /* an s3:// file: its ETag and size as the master listed it ("" and 0
     * for a local file); read with If-Match on that ETag */
    char etag[128];
    uint64_t object_size;
} dpp_task_t;

typedef struct dpp_out_block {
    struct dpp_out_block *next;
    char session[24];
    uint32_t rank, epoch, split, index;
    uint32_t seq, rank_splits; /* of its split */
    uint32_t plan_gen;         /* of its lease (BlockHeader.generation) */
    uint32_t source;           /* of its lease (BlockHeader.source) */
    int last;
    uint32_t rows;
    uint32_t codec;       /* 0 raw, 1 zstd */
    int auto_compression; /* its session's spec says compression "auto" */
    int zstd_level;       /* its spec's compression_level */
    uint64_t raw_size;
    uint8_t *data;
    size_t len;
    unsigned generation; /* of its task */
    void *owner;         /* the loop thread's, once taken */
} dpp_out_block_t;

typedef struct dpp_stage_times {
    uint64_t read_ns, decode_ns, transform_ns, encode_ns, compress_ns;
} dpp_stage_times_t;

typedef struct dpp_split_result {
    struct dpp_split_result *next;
    dpp_task_kind_t kind;
    uint64_t lease_id;
    char session[24]; /* the lease's session and split (INDEX: file), echoed to the master */
    uint32_t split;
    unsigned generation;
    uint32_t blocks;
    uint64_t rows, filtered, bytes_read;
    dpp_rejects_t rejects;
    dpp_stage_times_t times; /* SPLIT: time per pipeline stage */
    /* SPLIT: the thread's CPU time on it, and the bytes of its blocks raw
     * and as sent (compressed or not): what compression "auto" weighs */
    uint64_t cpu_ns, raw_bytes, wire_bytes;
    int compressed; /* its blocks went through zstd (kept when smaller) */
    int error;
    char message[1024];
    /* INDEX results */
    uint64_t records;
    uint64_t *bounds; /* malloc'd */
    size_t nbounds;
    int from_sidecar;
    uint64_t file_size;
    int64_t file_mtime_ns;
    char reject_detail[512]; /* INDEX: a damaged tail; SPLIT: the first record rejected */
    /* SPLIT: the features of the spec no record of the split had, and the
     * feature names its first record did have (for "did you mean"), each
     * followed by a NUL: what the master's schema check reads; records
     * decoded */
    char absent[512], names[2048];
    size_t nabsent, nnames;
    uint64_t examined;
    uint64_t documents, tokens, padding; /* SPLIT of a text session: its range's (source.h) */
    /* SPLIT: -1 not cached (no cache, or the spec says "cache": "off"), 0
     * made and stored, 1 served from the RAM tier, 2 from the disk tier;
     * the entry's bytes when served from one */
    int cache_tier;
    uint64_t cache_bytes;
} dpp_split_result_t;

/* Where a benchmark stops the per-record path (production: DPP_STAGE_ALL). */
typedef enum dpp_stage {
    DPP_STAGE_ALL = 0,
    DPP_STAGE_READ,      /* read and verify CRCs only */
    DPP_STAGE_DECODE,    /* ... and decode the Example */
    DPP_STAGE_TRANSFORM, /* ... and filter and transform */
} dpp_stage_t;

/* Time per stage of one split, for benchmarks (clock reads per record). */
typedef struct dpp_pipeline_config {
    unsigned threads;
    size_t budget_bytes; /* blocks produced and not yet written to a client */
    dpp_reader_config_t reader;
    dpp_stage_t stop_after;
    char **roots; /* resolved data roots a task's file must be under; none: not checked */
    size_t nroots;
    /* the s3:// roots an object must be under (no trailing '/'); an object
     * under none is refused, also when there are no such roots */
    char **s3_roots;
    size_t ns3_roots;
    struct dpp_cache_store *cache; /* split outputs (cache_store.h); NULL: none */
} dpp_pipeline_config_t;

#define DPP_PIPELINE_MAX_CLIENTS 256

/* Compression "auto" for the client of (session, rank): the loop thread's
 * decision (worker.c), read when a split starts. */
typedef struct dpp_client_place {
    char session[24];
    uint32_t rank;
    int compress;
} dpp_client_place_t;

typedef struct dpp_pipeline {
    dpp_pipeline_config_t cfg;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, space_cv;
    dpp_task_t *tasks, **tasks_tail;
    dpp_out_block_t *blocks, **blocks_tail;
    dpp_split_result_t *results, **results_tail;
    size_t buffered, buffered_peak;
    unsigned generation; /* bumped when the worker's leases are revoked */
    dpp_client_place_t local[DPP_PIPELINE_MAX_CLIENTS];
    size_t nlocal;
    int stopping;
    uv_async_t *notify; /* woken when blocks or results are ready */
    pthread_t *tids;
    unsigned nthreads;
} dpp_pipeline_t;

/* Starts cfg->threads threads. notify is sent (uv_async_send) whenever
 * blocks or results are ready. Returns 0 or -errno. */
int dpp_pipeline_start(dpp_pipeline_t *p, const dpp_pipeline_config_t *cfg, uv_async_t *notify);

/* Queues a task; the pipeline owns it from now on. */
void dpp_pipeline_submit(dpp_pipeline_t *p, dpp_task_t *t);

/* Loop thread: takes every ready block and result (lists the caller owns). */
void dpp_pipeline_take(dpp_pipeline_t *p, dpp_out_block_t **blocks, dpp_split_result_t **results);

/* Loop thread: a taken block's bytes are gone (written or dropped). */
void dpp_pipeline_release(dpp_pipeline_t *p, size_t bytes);

/* Stops the threads after their current split and joins them; queued tasks,
 * blocks and results are freed. */
void dpp_pipeline_stop(dpp_pipeline_t *p);

void dpp_task_free(dpp_task_t *t);
void dpp_out_block_free(dpp_out_block_t *b);

/* The generation new tasks get (under the lock). */
unsigned dpp_pipeline_generation(dpp_pipeline_t *p);

/* Loop thread: every lease the worker holds is gone (the master dropped it):
 * bumps the generation, so that running tasks stop at their next block and
 * their blocks are not sent, and frees the tasks not started yet. Returns
 * how many queued tasks were dropped (*index_tasks: how many of them were
 * index tasks; may be NULL). */
size_t dpp_pipeline_revoke(dpp_pipeline_t *p, size_t *index_tasks);

/* Loop thread: drops the tasks not started yet (a draining worker), keeping
 * the generation. Returns how many (*index_tasks as for revoke). */
size_t dpp_pipeline_cancel_queued(dpp_pipeline_t *p, size_t *index_tasks);

/* Loop thread: whether splits of (session, rank) started from now on
 * compress their blocks under compression "auto" (1) or not (0). Until it
 * is said, they do not. */
void dpp_pipeline_set_client(dpp_pipeline_t *p, const char *session, uint32_t rank, int compress);

/* Bytes of blocks produced and not yet written to a client, now. */
size_t dpp_pipeline_buffered(dpp_pipeline_t *p);

/* Most bytes of blocks ever buffered at once (for tests and logs). */
size_t dpp_pipeline_buffered_peak(dpp_pipeline_t *p);

/* A pipeline thread's memory for shuffled splits (spec `shuffle`): one
 * split's records, gathered before they are produced in a permuted order.
 * Kept from split to split: allocating a split's worth anew each time cost
 * a page fault per 4 KiB. Zeroed: empty. */
typedef struct dpp_split_scratch {
    uint8_t *bytes;
    size_t cap;
    struct dpp_gathered_rec {
        size_t at, len;
        uint64_t index, off;
    } * recs;
    size_t ncap;
} dpp_split_scratch_t;

void dpp_split_scratch_free(dpp_split_scratch_t *s);

/* Produces every block of one split task with reader (a dpp_reader_t *),
 * zctx (a ZSTD_CCtx *) and scratch (NULL: a temporary one). emit(arg,
 * block) takes each block in order; the last is an empty block marked last.
 * auto_compress: whether compression "auto" compresses (1) or not (0).
 * times, when not NULL, accumulates time per stage. Fills res; returns
 * res->error. Public for the benchmarks and tests. */
typedef int (*dpp_emit_cb)(void *arg, dpp_out_block_t *b);
int dpp_pipeline_run_split(const dpp_pipeline_config_t *cfg, void *reader, void *zctx,
                           dpp_split_scratch_t *scratch, int auto_compress, const dpp_task_t *t,
                           dpp_emit_cb emit, void *arg, dpp_split_result_t *res,
                           dpp_stage_times_t *times);

/* Runs an index task: loads the file's .idx sidecar, or scans its framing,
 * and fills res with the record count and the split boundaries. */
int dpp_pipeline_run_index(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                           dpp_split_result_t *res);

/* Index tasks a pipeline thread takes at once (consecutive in its queue):
 * a format that reads a few bytes a file reads them in one batch of reads
 * in flight (source.h index_many). Each may hold a file open: the fd
 * budget counts them. */
#define DPP_PIPELINE_INDEX_BATCH 32

/* Runs index tasks t[0..n) (n <= DPP_PIPELINE_INDEX_BATCH), res[i] for
 * t[i], with the thread's reader. */
void dpp_pipeline_run_index_many(const dpp_pipeline_config_t *cfg, dpp_reader_t *reader,
                                 const dpp_task_t *const *t, dpp_split_result_t *const *res,
                                 size_t n);

#endif
