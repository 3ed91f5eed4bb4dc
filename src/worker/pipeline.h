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

typedef struct dpp_task {
    struct dpp_task *next;
    uint64_t lease_id;
    char session[24];
    uint32_t epoch, split, rank;
    char *path;
    char *spec_json;
} dpp_task_t;

typedef struct dpp_out_block {
    struct dpp_out_block *next;
    char session[24];
    uint32_t rank, epoch, split, index;
    int last;
    uint32_t rows;
    uint32_t codec; /* 0 raw, 1 zstd */
    uint64_t raw_size;
    uint8_t *data;
    size_t len;
    void *owner; /* the loop thread's, once taken */
} dpp_out_block_t;

typedef struct dpp_split_result {
    struct dpp_split_result *next;
    uint64_t lease_id;
    uint32_t blocks;
    uint64_t rows, rejected;
    int error;
    char message[1024];
} dpp_split_result_t;

typedef struct dpp_pipeline_config {
    unsigned threads;
    size_t budget_bytes;  /* blocks produced but not yet written */
    int zstd_level;       /* 0 disables compression */
    uint64_t max_file_bytes;
    uint64_t max_record_bytes;
} dpp_pipeline_config_t;

typedef struct dpp_pipeline {
    dpp_pipeline_config_t cfg;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, space_cv;
    dpp_task_t *tasks, **tasks_tail;
    dpp_out_block_t *blocks, **blocks_tail;
    dpp_split_result_t *results, **results_tail;
    size_t buffered;
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

/* Produces every block of one task (used by the threads; public for unit
 * tests). emit is called per block in order; the last one has last = 1. */
typedef int (*dpp_emit_cb)(void *arg, dpp_out_block_t *b);
int dpp_pipeline_run_split(const dpp_pipeline_config_t *cfg, void *reader, void *zctx,
                           const dpp_task_t *t, dpp_emit_cb emit, void *arg,
                           dpp_split_result_t *res);

#endif
