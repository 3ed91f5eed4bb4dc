// SPDX-License-Identifier: Apache-2.0
// Pipeline threads and the per-split read/decode/transform/encode path.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "common/block.h"
#include "common/example_decode.h"
#include "common/log.h"
#include "common/spec.h"
#include "common/tfrecord.h"
#include "common/transform.h"
#include "dpp/error.h"
#include "pipeline.h"
#include "reader.h"

/* Corrupt records logged per split; the rest are only counted. */
#define MAX_LOGGED_REJECTS 5

void dpp_task_free(dpp_task_t *t)
{
    if (t == NULL)
        return;
    free(t->path);
    free(t->spec_json);
    free(t);
}

void dpp_out_block_free(dpp_out_block_t *b)
{
    if (b == NULL)
        return;
    free(b->data);
    free(b);
}

/* State of one split being turned into blocks. */
typedef struct split_ctx {
    const dpp_pipeline_config_t *cfg;
    const dpp_task_t *task;
    ZSTD_CCtx *zctx;
    dpp_emit_cb emit;
    void *emit_arg;
    dpp_block_builder_t builder;
    dpp_out_block_t *held; /* finished, not emitted: it may be the last */
    uint32_t next_index;
} split_ctx_t;

/* Finishes the builder's rows as a block (compressed when it pays) and emits
 * the block held before it, so the final one can still be marked last. */
static int cut_block(split_ctx_t *x)
{
    uint8_t *raw;
    size_t raw_len;
    uint32_t rows = (uint32_t)x->builder.rows;
    int rc = dpp_block_builder_finish(&x->builder, &raw, &raw_len);
    if (rc)
        return rc;
    dpp_out_block_t *b = calloc(1, sizeof *b);
    if (b == NULL) {
        free(raw);
        return -ENOMEM;
    }
    memcpy(b->session, x->task->session, sizeof b->session);
    b->rank = x->task->rank;
    b->epoch = x->task->epoch;
    b->split = x->task->split;
    b->index = x->next_index++;
    b->rows = rows;
    b->raw_size = raw_len;
    b->data = raw;
    b->len = raw_len;
    if (x->cfg->zstd_level > 0 && x->zctx) {
        size_t bound = ZSTD_compressBound(raw_len);
        uint8_t *z = malloc(bound);
        if (z) {
            size_t zn = ZSTD_compressCCtx(x->zctx, z, bound, raw, raw_len, x->cfg->zstd_level);
            if (!ZSTD_isError(zn) && zn < raw_len) {
                free(raw);
                b->data = z;
                b->len = zn;
                b->codec = 1;
            } else {
                free(z);
            }
        }
    }
    dpp_out_block_t *prev = x->held;
    x->held = b;
    return prev ? x->emit(x->emit_arg, prev) : 0;
}

typedef struct row_scratch {
    float *dense;
    int64_t **ids;
    size_t *lens, *caps;
} row_scratch_t;

/* Decodes and transforms one record into the builder. Returns 0, or the
 * per-record error that rejects it (DPP_EEXAMPLE, DPP_EMISSING, DPP_ETYPE)
 * or -ENOMEM. */
static int add_record(split_ctx_t *x, const dpp_spec_t *spec, const dpp_projection_t *proj,
                      dpp_feat_ref_t *refs, row_scratch_t *s, const uint8_t *rec, size_t len)
{
    int rc = dpp_example_decode(proj, rec, len, refs);
    if (rc)
        return rc;
    /* refs: [0] label, [1..ndense] dense, then sparse, in spec order. */
    float label;
    size_t n;
    if (refs[0].kind == DPP_FEAT_ABSENT)
        return DPP_EMISSING;
    if (refs[0].kind == DPP_FEAT_INT64) {
        int64_t v;
        if ((rc = dpp_feat_count(&refs[0], DPP_FEAT_INT64, &n)) != 0 || n != 1)
            return rc ? rc : DPP_ETYPE;
        if ((rc = dpp_feat_int64s(&refs[0], &v, 1, &n)) != 0)
            return rc;
        label = (float)v;
    } else {
        if ((rc = dpp_feat_count(&refs[0], DPP_FEAT_FLOAT, &n)) != 0 || n != 1)
            return rc ? rc : DPP_ETYPE;
        if ((rc = dpp_feat_floats(&refs[0], &label, 1, &n)) != 0)
            return rc;
    }
    float *out = s->dense;
    for (unsigned i = 0; i < spec->ndense; i++) {
        const dpp_feature_spec_t *f = &spec->dense[i];
        const dpp_feat_ref_t *r = &refs[1 + i];
        float v = 0;
        int present = r->kind != DPP_FEAT_ABSENT;
        if (present) {
            dpp_feat_kind_t kind = r->kind == DPP_FEAT_INT64 ? DPP_FEAT_INT64 : DPP_FEAT_FLOAT;
            if ((rc = dpp_feat_count(r, kind, &n)) != 0)
                return rc;
            if (n != f->dim)
                return DPP_ETYPE;
            if (kind == DPP_FEAT_INT64) {
                int64_t iv;
                if ((rc = dpp_feat_int64s(r, &iv, 1, &n)) != 0)
                    return rc;
                v = (float)iv;
            } else if ((rc = dpp_feat_floats(r, &v, 1, &n)) != 0) {
                return rc;
            }
        }
        if ((rc = dpp_transform_dense(f->ops, f->nops, present, v, out++)) != 0)
            return rc;
    }
    for (unsigned k = 0; k < spec->nsparse; k++) {
        const dpp_feature_spec_t *f = &spec->sparse[k];
        const dpp_feat_ref_t *r = &refs[1 + spec->ndense + k];
        s->lens[k] = 0;
        if (r->kind == DPP_FEAT_ABSENT)
            continue;
        if ((rc = dpp_feat_count(r, DPP_FEAT_INT64, &n)) != 0)
            return rc;
        if (n > s->caps[k]) {
            size_t cap = s->caps[k] ? s->caps[k] : 16;
            while (cap < n)
                cap *= 2;
            int64_t *ids = realloc(s->ids[k], cap * sizeof *ids);
            if (ids == NULL)
                return -ENOMEM;
            s->ids[k] = ids;
            s->caps[k] = cap;
        }
        if ((rc = dpp_feat_int64s(r, s->ids[k], n, &n)) != 0)
            return rc;
        s->lens[k] = dpp_transform_sparse(f->ops, f->nops, s->ids[k], n);
    }
    rc = dpp_block_builder_append(&x->builder, label, s->dense, (const int64_t *const *)s->ids,
                                  s->lens);
    if (rc)
        return rc;
    if (x->builder.rows >= spec->batch_size)
        return cut_block(x);
    return 0;
}

static void fail(dpp_split_result_t *res, int err, const char *fmt, const char *a, const char *b)
{
    res->error = err;
    snprintf(res->message, sizeof res->message, fmt, a, b);
}

int dpp_pipeline_run_split(const dpp_pipeline_config_t *cfg, void *reader, void *zctx,
                           const dpp_task_t *t, dpp_emit_cb emit, void *arg,
                           dpp_split_result_t *res)
{
    split_ctx_t x = {.cfg = cfg, .task = t, .zctx = zctx, .emit = emit, .emit_arg = arg};
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN];
    dpp_projection_t *proj = NULL;
    dpp_feat_ref_t *refs = NULL;
    const char **names = NULL;
    unsigned *dims = NULL;
    uint8_t *file = NULL;
    size_t file_len = 0;
    row_scratch_t s = {0};
    int builder_ready = 0;
    memset(res, 0, sizeof *res);
    res->lease_id = t->lease_id;

    int rc = dpp_spec_parse(t->spec_json, strlen(t->spec_json), &spec, err, sizeof err);
    if (rc) {
        fail(res, rc, "spec: %s%s", err, "");
        return rc;
    }
    size_t nfeat = 1 + (size_t)spec.ndense + spec.nsparse;
    rc = -ENOMEM;
    names = calloc(nfeat, sizeof *names);
    dims = calloc(spec.ndense + 1, sizeof *dims);
    refs = calloc(nfeat, sizeof *refs);
    s.ids = calloc(spec.nsparse + 1, sizeof *s.ids);
    s.lens = calloc(spec.nsparse + 1, sizeof *s.lens);
    s.caps = calloc(spec.nsparse + 1, sizeof *s.caps);
    if (!names || !dims || !refs || !s.ids || !s.lens || !s.caps)
        goto out;
    names[0] = spec.label;
    for (unsigned i = 0; i < spec.ndense; i++) {
        names[1 + i] = spec.dense[i].name;
        dims[i] = spec.dense[i].dim;
    }
    for (unsigned k = 0; k < spec.nsparse; k++)
        names[1 + spec.ndense + k] = spec.sparse[k].name;
    if ((rc = dpp_projection_new(&proj, names, nfeat)) != 0)
        goto out;
    if ((rc = dpp_block_builder_init(&x.builder, spec.ndense, dims, spec.nsparse)) != 0)
        goto out;
    builder_ready = 1;
    rc = -ENOMEM;
    if ((s.dense = calloc(x.builder.dense_width + 1, sizeof(float))) == NULL)
        goto out;

    rc = dpp_reader_read_file(reader, t->path, cfg->max_file_bytes, &file, &file_len);
    if (rc) {
        fail(res, rc, "file %s: %s", t->path, dpp_strerror(rc));
        goto out;
    }
    dpp_tfrecord_iter_t it;
    dpp_tfrecord_iter_init(&it, file, file_len, 0, cfg->max_record_bytes);
    for (;;) {
        const uint8_t *rec;
        size_t rec_len;
        uint64_t err_off = 0;
        rc = dpp_tfrecord_next(&it, &rec, &rec_len, &err_off);
        if (rc == 0)
            break;
        if (rc == 1) {
            err_off = it.base + (uint64_t)(rec - file) - 12;
            rc = add_record(&x, &spec, proj, refs, &s, rec, rec_len);
            if (rc == -ENOMEM || (rc && rc != DPP_EEXAMPLE && rc != DPP_EMISSING &&
                                  rc != DPP_ETYPE)) {
                if (rc == DPP_ECLOSED)
                    fail(res, rc, "split %s: %s", t->path, "worker stopping");
                else
                    fail(res, rc, "split %s: %s", t->path, dpp_strerror(rc));
                goto out;
            }
            if (rc == 0) {
                res->rows++;
                continue;
            }
        }
        /* A rejected record: counted, logged a few times, skipped. */
        if (res->rejected++ < MAX_LOGGED_REJECTS)
            DPP_WARN("record_rejected file=%s offset=%" PRIu64 " reason=\"%s\"", t->path, err_off,
                     dpp_strerror(rc));
        if (it.stuck)
            break; /* no record boundary after this point can be trusted */
    }
    rc = 0;
    if (x.builder.rows > 0 || x.held == NULL)
        rc = cut_block(&x); /* a split without rows still sends one empty last block */
    if (rc == 0) {
        x.held->last = 1;
        res->blocks = x.next_index;
        rc = emit(arg, x.held);
        x.held = NULL;
    }
    if (rc)
        fail(res, rc, "split %s: %s", t->path, dpp_strerror(rc));

out:
    if (rc == -ENOMEM && res->error == 0)
        fail(res, rc, "split %s: %s", t->path, "out of memory");
    dpp_out_block_free(x.held);
    if (builder_ready)
        dpp_block_builder_close(&x.builder);
    free(file);
    dpp_projection_free(proj);
    if (s.ids)
        for (unsigned k = 0; k < spec.nsparse; k++)
            free(s.ids[k]);
    free(s.ids);
    free(s.lens);
    free(s.caps);
    free(s.dense);
    free(refs);
    free(dims);
    free(names);
    dpp_spec_close(&spec);
    return res->error;
}

/* emit callback of the threads: waits for budget, then queues the block. */
static int emit_block(void *arg, dpp_out_block_t *b)
{
    dpp_pipeline_t *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && p->buffered > 0 && p->buffered + b->len > p->cfg.budget_bytes)
        pthread_cond_wait(&p->space_cv, &p->mu);
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        dpp_out_block_free(b);
        return DPP_ECLOSED;
    }
    b->next = NULL;
    *p->blocks_tail = b;
    p->blocks_tail = &b->next;
    p->buffered += b->len;
    pthread_mutex_unlock(&p->mu);
    uv_async_send(p->notify);
    return 0;
}

static void *thread_main(void *arg)
{
    dpp_pipeline_t *p = arg;
    dpp_reader_t reader;
    dpp_reader_init(&reader, 4, 1u << 20);
    ZSTD_CCtx *zctx = ZSTD_createCCtx();
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->tasks == NULL && !p->stopping)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stopping) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        dpp_task_t *t = p->tasks;
        p->tasks = t->next;
        if (p->tasks == NULL)
            p->tasks_tail = &p->tasks;
        pthread_mutex_unlock(&p->mu);

        dpp_split_result_t *res = calloc(1, sizeof *res);
        if (res == NULL) {
            DPP_ERROR("out_of_memory where=split_result");
            abort(); /* the worker is a daemon: abort with a location, as alloc.h does */
        }
        dpp_pipeline_run_split(&p->cfg, &reader, zctx, t, emit_block, p, res);
        dpp_task_free(t);
        pthread_mutex_lock(&p->mu);
        *p->results_tail = res;
        p->results_tail = &res->next;
        pthread_mutex_unlock(&p->mu);
        uv_async_send(p->notify);
    }
    ZSTD_freeCCtx(zctx);
    dpp_reader_close(&reader);
    return NULL;
}

int dpp_pipeline_start(dpp_pipeline_t *p, const dpp_pipeline_config_t *cfg, uv_async_t *notify)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->notify = notify;
    p->tasks_tail = &p->tasks;
    p->blocks_tail = &p->blocks;
    p->results_tail = &p->results;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->space_cv, NULL);
    p->tids = calloc(cfg->threads, sizeof *p->tids);
    if (p->tids == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < cfg->threads; i++) {
        int rc = pthread_create(&p->tids[i], NULL, thread_main, p);
        if (rc) {
            dpp_pipeline_stop(p);
            return -rc;
        }
        p->nthreads++;
    }
    return 0;
}

void dpp_pipeline_submit(dpp_pipeline_t *p, dpp_task_t *t)
{
    t->next = NULL;
    pthread_mutex_lock(&p->mu);
    *p->tasks_tail = t;
    p->tasks_tail = &t->next;
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
}

void dpp_pipeline_take(dpp_pipeline_t *p, dpp_out_block_t **blocks, dpp_split_result_t **results)
{
    pthread_mutex_lock(&p->mu);
    *blocks = p->blocks;
    *results = p->results;
    p->blocks = NULL;
    p->blocks_tail = &p->blocks;
    p->results = NULL;
    p->results_tail = &p->results;
    pthread_mutex_unlock(&p->mu);
}

void dpp_pipeline_release(dpp_pipeline_t *p, size_t bytes)
{
    pthread_mutex_lock(&p->mu);
    p->buffered -= bytes;
    pthread_cond_broadcast(&p->space_cv);
    pthread_mutex_unlock(&p->mu);
}

void dpp_pipeline_stop(dpp_pipeline_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_cond_broadcast(&p->space_cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->tids[i], NULL);
    free(p->tids);
    p->tids = NULL;
    p->nthreads = 0;
    while (p->tasks) {
        dpp_task_t *t = p->tasks;
        p->tasks = t->next;
        dpp_task_free(t);
    }
    while (p->blocks) {
        dpp_out_block_t *b = p->blocks;
        p->blocks = b->next;
        dpp_out_block_free(b);
    }
    while (p->results) {
        dpp_split_result_t *r = p->results;
        p->results = r->next;
        free(r);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->space_cv);
}
