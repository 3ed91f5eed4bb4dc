// SPDX-License-Identifier: Apache-2.0
// Pipeline threads and the per-split path: rows from the format's source
// (source.h) -> filter -> transform -> build block -> compress; index tasks
// go to the source.
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "base/log.h"
#include "base/reject.h"
#include "base/util.h"
#include "dpp/error.h"
#include "format/block.h"
#include "spec/spec.h"
#include "spec/transform.h"
#include "spec/vocab.h"
#include "cache_store.h"
#include "file_cache.h"
#include "pipeline.h"
#include "reader.h"
#include "source.h"
#include "split_cache.h"

/* Rejected records logged per split; the rest are only counted. */
#define MAX_LOGGED_REJECTS 5

void dpp_task_free(dpp_task_t *t)
{
    if (t == NULL)
        return;
    free(t->path);
    free(t->rel_path);
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

/* ---- a spec turned into what the per-record loop needs -------------------- */

/* Every feature name a split decodes appears once in the projection; these
 * map the spec's roles to projection slots (-1: none). */
typedef struct plan {
    dpp_spec_t spec;
    const dpp_source_ops_t *src; /* the spec's format */
    void *proj;                  /* the source's projection of the slots */
    size_t nslots;
    int label_slot;
    int *dense_slot, *sparse_slot, *weights_slot, *filter_slot;
    unsigned *dims;
    uint8_t *weighted;
    /* Sparse features whose chain starts by turning strings into ids (hash,
     * vocab) run their chain per row, as the row's kind decides that first
     * op; the others are picked per row and mapped a block at a time
     * (dpp_transform_sparse_column). keep: ids a row stores (prefix_only:
     * every truncate keeps the first ids). */
    uint8_t *row_chain, *prefix_only;
    size_t *keep;
    /* short_prefix: read straight into the column, at most keep ids (a
     * column chain of truncates that keep at most 64, no weights) */
    uint8_t *short_prefix;
    const char **slot_names; /* the feature of each slot (pointing into spec) */
    uint8_t *slot_optional;  /* a feature the spec lets be absent everywhere */
    dpp_block_shape_t shape;
} plan_t;

static void plan_close(plan_t *p)
{
    for (unsigned k = 0; k < p->spec.nsparse; k++)
        if (p->spec.sparse[k].nops > 0)
            dpp_file_cache_put(p->spec.sparse[k].ops[0].vocab);
    if (p->src)
        p->src->projection_free(p->proj);
    free(p->dense_slot);
    free(p->sparse_slot);
    free(p->weights_slot);
    free(p->filter_slot);
    free(p->dims);
    free(p->weighted);
    free(p->row_chain);
    free(p->prefix_only);
    free(p->short_prefix);
    free(p->keep);
    free(p->slot_names);
    free(p->slot_optional);
    dpp_spec_close(&p->spec);
    memset(p, 0, sizeof *p);
}

/* Slot of name in names[0..*n), appending it when new. */
static int slot_of(const char **names, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    names[*n] = name;
    return (int)(*n)++;
}

static int vocab_load(const char *real, const char *name, const char *arg, void **out, char *err,
                      size_t errlen)
{
    (void)arg;
    dpp_vocab_t *v = NULL;
    int rc = dpp_vocab_load(real, name, &v, err, errlen);
    *out = v;
    return rc;
}

static void vocab_unload(void *v)
{
    dpp_vocab_free(v);
}

static int vocab_bytes(const uint8_t *buf, size_t len, const char *name, const char *arg,
                       void **out, char *err, size_t errlen)
{
    (void)arg;
    dpp_vocab_t *v = NULL;
    int rc = dpp_vocab_new(buf, len, name, &v, err, errlen);
    *out = v;
    return rc;
}

static const dpp_file_kind_t vocab_files = {"vocabulary", vocab_load, vocab_unload, vocab_bytes,
                                            DPP_VOCAB_MAX_BYTES - 1};

static int plan_init(plan_t *p, const dpp_task_t *t, const dpp_pipeline_config_t *cfg, char *err,
                     size_t errlen)
{
    memset(p, 0, sizeof *p);
    int rc = dpp_spec_parse(t->spec_json, strlen(t->spec_json), &p->spec, err, errlen);
    if (rc)
        return rc;
    char root[4096];
    dpp_source_data_root(cfg, t, p->spec.table, root, sizeof root);
    for (unsigned k = 0; k < p->spec.nsparse; k++) {
        dpp_transform_t *op = p->spec.sparse[k].ops;
        char why[600];
        if (p->spec.sparse[k].nops == 0 || op->op != DPP_OP_VOCAB)
            continue;
        void *vocab = NULL;
        rc = dpp_file_cache_get(&vocab_files, NULL, root, cfg->roots, cfg->nroots, op->file,
                                dpp_spec_pin(&p->spec, op->file), &vocab, why, sizeof why);
        op->vocab = vocab;
        if (rc != 0) {
            snprintf(err, errlen, "features.sparse[%u] (\"%.64s\"): %.400s", k,
                     p->spec.sparse[k].name, why);
            plan_close(p);
            return rc;
        }
    }
    const dpp_spec_t *s = &p->spec;
    size_t max = 1 + 2 * (size_t)s->nsparse + s->ndense + s->nfilters;
    const char **names = calloc(max, sizeof *names);
    p->dense_slot = calloc(s->ndense + 1, sizeof *p->dense_slot);
    p->sparse_slot = calloc(s->nsparse + 1, sizeof *p->sparse_slot);
    p->weights_slot = calloc(s->nsparse + 1, sizeof *p->weights_slot);
    p->filter_slot = calloc(s->nfilters + 1, sizeof *p->filter_slot);
    p->dims = calloc(s->ndense + 1, sizeof *p->dims);
    p->weighted = calloc(s->nsparse + 1, sizeof *p->weighted);
    p->row_chain = calloc(s->nsparse + 1, 1);
    p->prefix_only = calloc(s->nsparse + 1, 1);
    p->keep = calloc(s->nsparse + 1, sizeof *p->keep);
    p->short_prefix = calloc(s->nsparse + 1, 1);
    rc = -ENOMEM;
    if (!names || !p->dense_slot || !p->sparse_slot || !p->weights_slot || !p->filter_slot ||
        !p->dims || !p->weighted || !p->row_chain || !p->prefix_only || !p->keep ||
        !p->short_prefix)
        goto out;
    size_t n = 0;
    p->label_slot = s->label ? slot_of(names, &n, s->label) : -1;
    for (unsigned i = 0; i < s->ndense; i++) {
        p->dense_slot[i] = slot_of(names, &n, s->dense[i].name);
        p->dims[i] = s->dense[i].dim;
    }
    for (unsigned k = 0; k < s->nsparse; k++) {
        p->sparse_slot[k] = slot_of(names, &n, s->sparse[k].name);
        p->weights_slot[k] = s->sparse[k].weights ? slot_of(names, &n, s->sparse[k].weights) : -1;
        p->weighted[k] = s->sparse[k].weights != NULL;
        p->row_chain[k] = (uint8_t)dpp_transform_takes_strings(s->sparse[k].ops, s->sparse[k].nops);
        p->prefix_only[k] =
            (uint8_t)dpp_transform_sparse_prefix(s->sparse[k].ops, s->sparse[k].nops, &p->keep[k]);
        p->short_prefix[k] =
            !p->row_chain[k] && !p->weighted[k] && p->prefix_only[k] && p->keep[k] <= 64;
    }
    for (unsigned f = 0; f < s->nfilters; f++)
        p->filter_slot[f] = s->filters[f].kind == DPP_FILTER_REQUIRE
                                ? slot_of(names, &n, s->filters[f].feature)
                                : -1;
    p->nslots = n;
    p->slot_optional = calloc(n + 1, 1);
    if (p->slot_optional == NULL)
        goto out;
    for (unsigned i = 0; i < s->ndense; i++)
        p->slot_optional[p->dense_slot[i]] |= s->dense[i].optional;
    for (unsigned k = 0; k < s->nsparse; k++) {
        p->slot_optional[p->sparse_slot[k]] |= s->sparse[k].optional;
        if (p->weights_slot[k] >= 0)
            p->slot_optional[p->weights_slot[k]] |= s->sparse[k].optional;
    }
    p->shape.ndense = s->ndense;
    p->shape.nsparse = s->nsparse;
    p->shape.dims = p->dims;
    p->shape.weighted = p->weighted;
    p->shape.no_label = s->label == NULL;
    p->src = dpp_source_ops(s->format, s->text != NULL);
    rc = p->src->projection_new(&p->proj, names, n, &p->spec, root, cfg, err, errlen);
    if (rc == 0) {
        p->slot_names = names; /* the plan keeps them: they point into its spec */
        names = NULL;
    }
out:
    free(names);
    if (rc)
        plan_close(p);
    return rc;
}

/* ---- one split ------------------------------------------------------------ */

typedef struct split_ctx {
    const dpp_pipeline_config_t *cfg;
    const dpp_task_t *task;
    const plan_t *plan;
    const dpp_source_t *src; /* the open split's, for what a stuck source found */
    dpp_split_result_t *res; /* the split's, for errors found deep inside */
    ZSTD_CCtx *zctx;
    int compress;
    dpp_emit_cb emit;
    void *emit_arg;
    dpp_split_capture_t *capture; /* making the split's cache entry: blocks go here */
    dpp_block_builder_t builder;
    uint32_t next_index;
    /* per-row scratch */
    dpp_feat_ref_t *refs;
    /* which slots some record of the split had (the schema check), the
     * records decoded, and the feature whose absence rejects the record at
     * hand */
    uint8_t *seen;
    size_t nseen;
    uint64_t examined;
    const char *missing;
    int raw_rows;      /* the builder's rows are not yet through their column transforms */
    int64_t *iscratch; /* int64 dense values on their way to float */
    int64_t **ids;
    float **weights;
    size_t *lens, *caps;
    /* Stage times: per block into block_times (the caller's), per record
     * into sampled for 1 record in TIME_SAMPLE (times points at it for
     * those, NULL otherwise); scaled up at the end. Two clock reads per
     * stage per record cost about 5% of the pipeline. */
    dpp_stage_times_t *times, *block_times, sampled;
} split_ctx_t;

#define TIME_SAMPLE 16

static void set_error(dpp_split_result_t *res, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static dpp_out_block_t *new_block(split_ctx_t *x, uint32_t rows, uint8_t *raw, size_t raw_len)
{
    dpp_out_block_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    memcpy(b->session, x->task->session, sizeof b->session);
    b->generation = x->task->generation;
    b->rank = x->task->rank;
    b->epoch = x->task->epoch;
    b->split = x->task->split;
    b->seq = x->task->seq;
    b->rank_splits = x->task->rank_splits;
    b->plan_gen = x->task->plan_gen;
    b->source = x->task->source;
    b->index = x->next_index++;
    b->rows = rows;
    b->auto_compression = x->plan->spec.compression == DPP_COMPRESSION_AUTO;
    b->zstd_level = x->plan->spec.compression_level;
    b->raw_size = raw_len;
    b->data = raw;
    b->len = raw_len;
    return b;
}

/* Replaces b's bytes by their zstd frame when that is smaller. */
static void compress_block(split_ctx_t *x, dpp_out_block_t *b)
{
    size_t bound = ZSTD_compressBound(b->len);
    uint8_t *z = malloc(bound);
    if (z == NULL)
        return; /* sent raw: compression is an optimisation */
    size_t zn =
        ZSTD_compressCCtx(x->zctx, z, bound, b->data, b->len, x->plan->spec.compression_level);
    if (ZSTD_isError(zn) || zn >= b->len) {
        free(z);
        return;
    }
    free(b->data);
    b->data = z;
    b->len = zn;
    b->codec = 1;
}

/* Runs the chains a column at a time over the rows add_record() put into
 * the builder (dense values raw, sparse ids picked but not mapped). */
static void transform_columns(split_ctx_t *x)
{
    if (!x->raw_rows)
        return;
    uint64_t t0 = x->block_times ? dpp_now_ns() : 0;
    const dpp_spec_t *spec = &x->plan->spec;
    dpp_block_builder_t *b = &x->builder;
    for (unsigned i = 0; i < spec->ndense; i++)
        dpp_transform_dense_column(spec->dense[i].ops, spec->dense[i].nops,
                                   dpp_block_builder_dense_row(b, i, 0), b->rows * b->dims[i]);
    for (unsigned k = 0; k < spec->nsparse; k++)
        if (!x->plan->row_chain[k] && b->nvalues[k])
            dpp_transform_sparse_column(spec->sparse[k].ops, spec->sparse[k].nops, b->values[k],
                                        b->nvalues[k]);
    x->raw_rows = 0;
    if (x->block_times)
        x->block_times->transform_ns += dpp_now_ns() - t0;
}

/* Finishes the builder's rows as a block and emits it. */
static int cut_block(split_ctx_t *x)
{
    transform_columns(x);
    uint64_t t0 = x->block_times ? dpp_now_ns() : 0;
    uint8_t *raw;
    size_t raw_len;
    uint32_t rows = (uint32_t)x->builder.rows;
    int rc = dpp_block_builder_finish(&x->builder, &raw, &raw_len);
    if (rc)
        return rc;
    if (raw_len > DPP_BLOCK_MAX_BYTES) {
        free(raw);
        set_error(x->res, DPP_EBLOCK,
                  "split %s: a block of %u rows takes %zu MiB, over the %u MiB a client accepts: "
                  "lower batch_size or truncate the sparse features",
                  x->task->rel_path, rows, raw_len >> 20, DPP_BLOCK_MAX_BYTES >> 20);
        return DPP_EBLOCK;
    }
    dpp_out_block_t *b = new_block(x, rows, raw, raw_len);
    if (b == NULL) {
        free(raw);
        return -ENOMEM;
    }
    uint64_t t1 = x->block_times ? dpp_now_ns() : 0;
    if (x->compress && x->zctx)
        compress_block(x, b);
    if (x->block_times) {
        uint64_t t2 = dpp_now_ns();
        x->block_times->encode_ns += t1 - t0;
        x->block_times->compress_ns += t2 - t1;
    }
    if (x->capture == NULL) { /* a capture's blocks are counted when served */
        x->res->raw_bytes += b->raw_size;
        x->res->wire_bytes += b->len;
    }
    return x->emit(x->emit_arg, b);
}

/* Runs the column transforms and forgets the rows: DPP_STAGE_TRANSFORM's
 * end of a block. */
static void drop_rows(split_ctx_t *x)
{
    transform_columns(x);
    x->builder.rows = 0;
    for (unsigned k = 0; k < x->builder.nsparse; k++)
        x->builder.nvalues[k] = 0;
}

/* Whether a feature's list of `kind` is the one packed run that writers
 * emit: field 1 (tag 0x0a), a length under 128 that fills the list, the
 * values from r->list + 2 on. Every feature of every row asks, so the
 * common form is read here without the accessors' checks and calls. */
static inline int packed_run(const dpp_feat_ref_t *r, dpp_feat_kind_t kind)
{
    return r->kind == kind && !r->native && r->list_len >= 2 && r->list[0] == 0x0a &&
           r->list[1] < 0x80 && r->list[1] == r->list_len - 2;
}

/* Whether a feature is a FloatList of exactly want values in that form
 * (host order is little-endian: blocks need it). */
static inline int packed_floats(const dpp_feat_ref_t *r, unsigned want)
{
    return packed_run(r, DPP_FEAT_FLOAT) && r->list_len == 2 + 4 * (size_t)want;
}

/* Copies a feature's values into dst[0..want) as floats (float lists, or
 * int64 lists converted through scratch, which holds want values). Returns
 * 0, DPP_ETYPE (another kind or length) or DPP_EEXAMPLE. */
static int read_floats(const dpp_feat_ref_t *r, float *dst, size_t want, int64_t *scratch)
{
    size_t n;
    int rc;
    if (r->kind == DPP_FEAT_FLOAT) {
        if ((rc = dpp_feat_floats(r, dst, want, &n)) != 0)
            return rc;
        return n == want ? 0 : DPP_ETYPE;
    }
    if (r->kind != DPP_FEAT_INT64)
        return DPP_ETYPE;
    if ((rc = dpp_feat_int64s(r, scratch, want, &n)) != 0)
        return rc;
    if (n != want)
        return DPP_ETYPE;
    for (size_t j = 0; j < want; j++)
        dst[j] = (float)scratch[j];
    return 0;
}

static int grow_scratch(split_ctx_t *x, unsigned k, size_t n)
{
    size_t cap = x->caps[k] ? x->caps[k] : 16;
    while (cap < n)
        cap *= 2;
    int64_t *ids = realloc(x->ids[k], cap * sizeof *ids);
    if (ids == NULL)
        return -ENOMEM;
    x->ids[k] = ids;
    float *w = realloc(x->weights[k], cap * sizeof *w);
    if (w == NULL)
        return -ENOMEM;
    x->weights[k] = w;
    x->caps[k] = cap;
    return 0;
}

/* The ids of a string feature (its chain's first op turning each string
 * into one) into x->ids[k][0..*n). */
static int string_ids(split_ctx_t *x, unsigned k, const dpp_feat_ref_t *r, size_t *n)
{
    const dpp_transform_t *op = &x->plan->spec.sparse[k].ops[0];
    const uint8_t *s;
    size_t len, pos = 0, i = 0;
    int rc;
    while ((rc = dpp_feat_bytes_next(r, &pos, &s, &len)) == 1) {
        if (i == x->caps[k] && (rc = grow_scratch(x, k, i + 1)) != 0)
            return rc;
        x->ids[k][i++] = dpp_transform_string(op, s, len);
    }
    *n = i;
    return rc;
}

/* Sparse feature k of one record into the builder's column tail, from a
 * string list or with a chain that starts on strings: the whole chain now,
 * through the scratch. */
static int sparse_row_chain(split_ctx_t *x, unsigned k, const dpp_feat_ref_t *r, size_t *len)
{
    const dpp_feature_spec_t *f = &x->plan->spec.sparse[k];
    const dpp_transform_t *ops = f->ops;
    unsigned nops = f->nops;
    size_t n = 0;
    int rc;
    if (r->kind == DPP_FEAT_BYTES) {
        /* strings become ids by the chain's first op (hash or vocab) */
        if ((rc = string_ids(x, k, r, &n)) != 0)
            return rc;
        ops++;
        nops--;
    } else if (ops[0].op == DPP_OP_VOCAB) {
        if (r->kind != DPP_FEAT_ABSENT)
            return DPP_ETYPE; /* a vocabulary maps strings, and these are numbers */
        ops++; /* absent (a null string or list): an empty list, nothing to look up */
        nops--;
    } else if (r->kind != DPP_FEAT_ABSENT) {
        /* one pass; a list longer than the scratch is read again once grown */
        if ((rc = dpp_feat_int64s(r, x->ids[k], x->caps[k], &n)) != 0)
            return rc;
        if (n > x->caps[k] && ((rc = grow_scratch(x, k, n)) != 0 ||
                               (rc = dpp_feat_int64s(r, x->ids[k], x->caps[k], &n)) != 0))
            return rc;
    }
    if (x->plan->weighted[k]) {
        const dpp_feat_ref_t *wr = &x->refs[x->plan->weights_slot[k]];
        size_t wn = 0;
        if (wr->kind != DPP_FEAT_ABSENT &&
            (rc = dpp_feat_floats(wr, x->weights[k], x->caps[k], &wn)) != 0)
            return rc;
        if (wn != n)
            return DPP_ETYPE; /* weights must pair with ids one to one */
    }
    n = dpp_transform_sparse(ops, nops, x->ids[k], x->plan->weighted[k] ? x->weights[k] : NULL, n);
    dpp_block_builder_t *b = &x->builder;
    if (n && (rc = dpp_block_builder_reserve_values(b, k, n)) != 0)
        return rc;
    if (n) {
        memcpy(b->values[k] + b->nvalues[k], x->ids[k], n * sizeof(int64_t));
        if (x->plan->weighted[k])
            memcpy(b->weights[k] + b->nvalues[k], x->weights[k], n * sizeof(float));
    }
    *len = n;
    return 0;
}

/* Sparse feature k of one record (int64 ids, or absent) read straight into
 * the builder's column tail and picked by the chain's truncates; the maps
 * run later over the block (transform_columns). A chain that keeps a prefix
 * stores only that much of a long list; the whole list is still read and
 * checked. */
static int sparse_column(split_ctx_t *x, unsigned k, const dpp_feat_ref_t *r, size_t *len)
{
    const plan_t *p = x->plan;
    dpp_block_builder_t *b = &x->builder;
    size_t n = 0, wn = 0;
    int rc;
    *len = 0;
    if (r->kind == DPP_FEAT_ABSENT) {
        if (p->weighted[k] && x->refs[p->weights_slot[k]].kind != DPP_FEAT_ABSENT) {
            rc = dpp_feat_count(&x->refs[p->weights_slot[k]], DPP_FEAT_FLOAT, &wn);
            return rc ? rc : wn == 0 ? 0 : DPP_ETYPE;
        }
        return 0;
    }
    if (b->cap_values[k] - b->nvalues[k] < 64 &&
        (rc = dpp_block_builder_reserve_values(b, k, 64)) != 0)
        return rc;
    size_t room = b->cap_values[k] - b->nvalues[k];
    size_t cap = p->prefix_only[k] && p->keep[k] < room ? p->keep[k] : room;
    if (packed_run(r, DPP_FEAT_INT64))
        rc = dpp_feat_unpack_int64s(r->list + 2, r->list_len - 2, b->values[k] + b->nvalues[k], cap,
                                    &n);
    else
        rc = dpp_feat_int64s(r, b->values[k] + b->nvalues[k], cap, &n);
    if (rc != 0)
        return rc;
    size_t store = p->prefix_only[k] && p->keep[k] < n ? p->keep[k] : n;
    if (store > cap) { /* longer than the room: grow, read again */
        if ((rc = dpp_block_builder_reserve_values(b, k, store)) != 0 ||
            (rc = dpp_feat_int64s(r, b->values[k] + b->nvalues[k], store, &n)) != 0)
            return rc;
    }
    float *w = NULL;
    if (p->weighted[k]) {
        const dpp_feat_ref_t *wr = &x->refs[p->weights_slot[k]];
        w = b->weights[k] + b->nvalues[k];
        if (wr->kind != DPP_FEAT_ABSENT && (rc = dpp_feat_floats(wr, w, store, &wn)) != 0)
            return rc;
        if (wn != n)
            return DPP_ETYPE; /* weights must pair with ids one to one */
    }
    if (!p->prefix_only[k]) {
        const dpp_feature_spec_t *f = &p->spec.sparse[k];
        store = dpp_transform_sparse_pick(f->ops, f->nops, b->values[k] + b->nvalues[k], w, n);
    }
    if (store > INT32_MAX)
        return DPP_EINVAL;
    *len = store;
    return 0;
}

/* Decodes, filters and transforms one record into the builder: values go
 * straight into the columns, and the per-value maps of the chains run a
 * block at a time when it is cut (transform_columns). Returns 0 (added), 1
 * (filtered out), a per-record error (DPP_EEXAMPLE, DPP_EMISSING,
 * DPP_ETYPE) or -ENOMEM / an emit error. */
static int add_record(split_ctx_t *x, const uint8_t *rec, size_t len, uint64_t record_index,
                      uint64_t path_hash)
{
    const plan_t *p = x->plan;
    const dpp_spec_t *spec = &p->spec;
    dpp_feat_ref_t *refs = x->refs;
    dpp_block_builder_t *b = &x->builder;
    uint64_t t0 = x->times ? dpp_now_ns() : 0;
    int rc = p->src->decode(p->proj, rec, len, refs);
    if (rc)
        return rc;
    if (x->examined++ == 0 && x->src && x->src->ops->names)
        x->res->nnames = x->src->ops->names(x->src, rec, len, x->res->names, sizeof x->res->names);
    if (x->nseen < p->nslots) /* until every feature was seen once: a few records a split */
        for (size_t i = 0; i < p->nslots; i++)
            if (!x->seen[i] && refs[i].kind != DPP_FEAT_ABSENT) {
                x->seen[i] = 1;
                x->nseen++;
            }
    if (x->cfg->stop_after == DPP_STAGE_DECODE)
        return 1;
    /* without a label, the builder drops this 0 and the sample filters
     * have none to select by (the spec refuses one that would) */
    float label = 0;
    const dpp_feat_ref_t *lr = p->label_slot >= 0 ? &refs[p->label_slot] : NULL;
    if (lr && lr->kind == DPP_FEAT_ABSENT) {
        x->missing = spec->label;
        return DPP_EMISSING;
    }
    if (lr && packed_floats(lr, 1))
        memcpy(&label, lr->list + 2, sizeof label);
    else if (lr && (rc = read_floats(lr, &label, 1, x->iscratch)) != 0)
        return rc;
    uint64_t t1 = x->times ? dpp_now_ns() : 0;
    for (unsigned f = 0; f < spec->nfilters; f++) {
        const dpp_filter_t *flt = &spec->filters[f];
        if (flt->kind == DPP_FILTER_REQUIRE) {
            if (refs[p->filter_slot[f]].kind == DPP_FEAT_ABSENT)
                return 1;
        } else if (!dpp_filter_sample_keep(flt, dpp_row_key(path_hash, record_index), label)) {
            return 1;
        }
    }
    if ((rc = dpp_block_builder_reserve_row(b)) != 0)
        return rc;
    for (unsigned i = 0; i < spec->ndense; i++) {
        const dpp_feature_spec_t *f = &spec->dense[i];
        const dpp_feat_ref_t *r = &refs[p->dense_slot[i]];
        float *out = dpp_block_builder_dense_row(b, i, b->rows);
        if (packed_floats(r, f->dim)) {
            if (f->dim == 1) /* a copy of known size, without a call */
                memcpy(out, r->list + 2, sizeof(float));
            else
                memcpy(out, r->list + 2, (size_t)f->dim * sizeof(float));
        } else if (r->kind != DPP_FEAT_ABSENT) {
            if ((rc = read_floats(r, out, f->dim, x->iscratch)) != 0)
                return rc;
        } else if (f->nops > 0 && f->ops[0].op == DPP_OP_FILL_MISSING) {
            for (unsigned q = 0; q < f->dim; q++) /* the rest of the chain runs on it too */
                out[q] = (float)f->ops[0].value;
        } else {
            x->missing = f->name;
            return DPP_EMISSING;
        }
    }
    for (unsigned k = 0; k < spec->nsparse; k++) {
        const dpp_feat_ref_t *r = &refs[p->sparse_slot[k]];
        if (p->short_prefix[k] && packed_run(r, DPP_FEAT_INT64) &&
            b->cap_values[k] - b->nvalues[k] >= p->keep[k]) {
            /* sparse_column() of the common case: a packed run, the room
             * there, only a prefix kept */
            size_t n, keep = p->keep[k];
            if ((rc = dpp_feat_unpack_int64s(r->list + 2, r->list_len - 2,
                                             b->values[k] + b->nvalues[k], keep, &n)) != 0)
                return rc;
            x->lens[k] = n < keep ? n : keep;
            continue;
        }
        if (r->kind == DPP_FEAT_BYTES && !p->row_chain[k])
            return DPP_ETYPE; /* strings need a chain that starts with hash or vocab */
        rc = p->row_chain[k] ? sparse_row_chain(x, k, r, &x->lens[k])
                             : sparse_column(x, k, r, &x->lens[k]);
        if (rc)
            return rc;
    }
    uint64_t t2 = x->times ? dpp_now_ns() : 0;
    if (x->times) {
        x->times->decode_ns += t1 - t0;
        x->times->transform_ns += t2 - t1;
    }
    dpp_block_builder_commit_row(b, label, x->lens);
    x->raw_rows = 1;
    if (b->rows < spec->batch_size)
        return 0;
    if (x->cfg->stop_after == DPP_STAGE_TRANSFORM) { /* a benchmark's stage: no block */
        drop_rows(x);
        return 0;
    }
    return cut_block(x);
}

static void set_error(dpp_split_result_t *res, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof res->message, fmt, ap);
    va_end(ap);
    res->error = err;
}

static int ctx_init(split_ctx_t *x, const plan_t *p)
{
    size_t max_dim = 1;
    for (unsigned i = 0; i < p->spec.ndense; i++)
        max_dim = p->dims[i] > max_dim ? p->dims[i] : max_dim;
    unsigned ns = p->spec.nsparse;
    x->refs = calloc(p->nslots + 1, sizeof *x->refs);
    x->seen = calloc(p->nslots + 1, 1);
    x->iscratch = calloc(max_dim, sizeof *x->iscratch);
    x->ids = calloc(ns + 1, sizeof *x->ids);
    x->weights = calloc(ns + 1, sizeof *x->weights);
    x->lens = calloc(ns + 1, sizeof *x->lens);
    x->caps = calloc(ns + 1, sizeof *x->caps);
    if (!x->refs || !x->seen || !x->iscratch || !x->ids || !x->weights || !x->lens || !x->caps)
        return -ENOMEM;
    for (unsigned k = 0; k < ns; k++)
        if (grow_scratch(x, k, 16) != 0)
            return -ENOMEM;
    return dpp_block_builder_init(&x->builder, &p->shape);
}

static void ctx_close(split_ctx_t *x)
{
    free(x->seen);
    if (x->ids)
        for (unsigned k = 0; k < x->plan->spec.nsparse; k++)
            free(x->ids[k]);
    if (x->weights)
        for (unsigned k = 0; k < x->plan->spec.nsparse; k++)
            free(x->weights[k]);
    free(x->ids);
    free(x->weights);
    free(x->lens);
    free(x->caps);
    free(x->iscratch);
    free(x->refs);
    dpp_block_builder_close(&x->builder);
}

/* ": <what the source found>" once it is stuck, for messages; else "". */
static const char *stuck_why(const split_ctx_t *x, const char **sep)
{
    const dpp_source_t *src = x->src;
    const char *why =
        src && src->ops && src->ops->why && src->ops->stuck(src) ? src->ops->why(src) : NULL;
    *sep = why ? ": " : "";
    return why ? why : "";
}

/* Takes one record's outcome (add_record's result or a reader error).
 * Returns 0 to go on, or the error that ends the split (set in res). */
static int take_outcome(split_ctx_t *x, dpp_split_result_t *res, int rc, uint64_t off)
{
    const dpp_task_t *t = x->task;
    if (rc == 0) {
        res->rows++;
        return 0;
    }
    if (rc == 1) {
        res->filtered++;
        return 0;
    }
    const char *sep, *why = stuck_why(x, &sep);
    if (!dpp_reject_is(rc)) {
        /* the source's words where it has them: a failed read of an object
         * names the request, its status and the object's URL */
        if (!res->error)
            set_error(res, rc, "split %s: %s", t->rel_path,
                      rc == DPP_ECLOSED ? "worker stopping"
                      : why[0]          ? why
                                        : dpp_strerror(rc));
        return rc;
    }
    dpp_rejects_count(&res->rejects, rc, 1);
    if (!res->reject_detail[0]) /* the first one, for the master's reject-ratio message */
        snprintf(res->reject_detail, sizeof res->reject_detail,
                 "file %s, record at offset %" PRIu64 ": %s%s%s%s%s", t->rel_path, off,
                 rc == DPP_EMISSING && x->missing ? "missing feature \"" : dpp_reject_words(rc),
                 rc == DPP_EMISSING && x->missing ? x->missing : "",
                 rc == DPP_EMISSING && x->missing ? "\"" : "", sep, why);
    if (x->plan->spec.on_corrupt_fail) {
        set_error(res, rc, "file %s: %s at offset %" PRIu64 "%s%s (on_corrupt: fail)", t->rel_path,
                  dpp_reject_words(rc), off, sep, why);
        return rc;
    }
    if (dpp_rejects_total(&res->rejects) <= MAX_LOGGED_REJECTS)
        DPP_WARN("record_rejected file=%s offset=%" PRIu64 " reason=\"%s%s%s\"%s%s%s", t->rel_path,
                 off, dpp_reject_words(rc), sep, why,
                 rc == DPP_EMISSING && x->missing ? " feature=\"" : "",
                 rc == DPP_EMISSING && x->missing ? x->missing : "",
                 rc == DPP_EMISSING && x->missing ? "\"" : "");
    return 0;
}

/* With `shuffle` a split's records are gathered (copied out of the reader's
 * buffers, which are reused) into the thread's scratch and produced in a
 * permuted order afterwards. */
typedef struct gathered {
    dpp_split_scratch_t *s;
    size_t len, n; /* bytes and records gathered */
} gathered_t;

/* Reading stopped for good at offset with err (a reason of base/reject.h)
 * and n more records of the window cannot be read: they are counted as
 * rejected for that reason, so that what was lost shows, and fail the split
 * under on_corrupt: fail. An err that is no reason (a read that failed: an
 * object store's refusal, a changed object, EIO) fails the split, also while
 * records before the window are passed over. Returns 0 to finish the split,
 * or the error. */
static int lose_rest(split_ctx_t *x, dpp_split_result_t *res, int err, uint64_t n, uint64_t off)
{
    if (err < 0 && !dpp_reject_is(err)) /* (a source's stuck() may say 1: a reason unnamed) */
        return take_outcome(x, res, err, off);
    if (n == 0)
        return 0;
    dpp_rejects_count(&res->rejects, err, n);
    const char *sep, *why = stuck_why(x, &sep);
    DPP_WARN("records_lost file=%s offset=%" PRIu64 " records=%" PRIu64 " reason=\"%s%s%s\"",
             x->task->rel_path, off, n, dpp_reject_words(err), sep, why);
    if (!x->plan->spec.on_corrupt_fail)
        return 0;
    set_error(res, err,
              "file %s: %s at offset %" PRIu64 "%s%s, %" PRIu64
              " records after it lost (on_corrupt: fail)",
              x->task->rel_path, dpp_reject_words(err), off, sep, why, n);
    return err;
}

/* The index the split came from must match the records: a window that ends
 * where its range ends finds the range's end there, and no window finds it
 * early. A stale or lying .idx sidecar is an error, never silent loss.
 * Returns 0 or DPP_EINDEX (set in res). */
static int check_index(split_ctx_t *x, dpp_source_t *src, dpp_split_result_t *res, int clean_end,
                       uint64_t reached)
{
    const dpp_task_t *t = x->task;
    dpp_source_row_t row = {0};
    const char *what = NULL;
    if (clean_end) {
        what = "fewer records";
        row.offset = t->byte_end;
    } else if (!src->ops->stuck(src) && t->range_records != 0 &&
               reached == t->record_start + t->range_records && src->ops->next(src, &row) != 0) {
        what = "more bytes after its last record";
    }
    if (what == NULL)
        return 0;
    /* only a TFRecord file has a sidecar to blame; a text range's records
     * are sequences, counted with the session's tokenizer */
    const char *why = x->plan->spec.format == DPP_FORMAT_TFRECORD
                          ? "the file changed since it was indexed, or its .idx sidecar (where "
                            "it has one) is wrong: rewrite the sidecar (dppctl index) or delete it"
                      : x->plan->spec.text != NULL
                          ? "the file changed since it was indexed (its sequences were counted "
                            "by an index task of this master): submit the session again"
                          : "the file changed since it was indexed: submit the session again";
    set_error(res, DPP_EINDEX,
              "file %s: the index says %" PRIu64 " records in bytes %" PRIu64 " to %" PRIu64
              ", the file has %s (found at offset %" PRIu64 "): %s",
              t->rel_path, t->range_records, t->byte_start, t->byte_end, what, row.offset, why);
    return DPP_EINDEX;
}

void dpp_split_scratch_free(dpp_split_scratch_t *s)
{
    free(s->bytes);
    free(s->recs);
    memset(s, 0, sizeof *s);
}

static int gather(gathered_t *g, const uint8_t *rec, size_t len, uint64_t index, uint64_t off)
{
    dpp_split_scratch_t *s = g->s;
    if (g->n == s->ncap) {
        size_t ncap = s->ncap ? s->ncap * 2 : 1024;
        void *p = realloc(s->recs, ncap * sizeof *s->recs);
        if (p == NULL)
            return -ENOMEM;
        s->recs = p;
        s->ncap = ncap;
    }
    if (g->len + len > s->cap) {
        size_t cap = s->cap ? s->cap : 1u << 20;
        while (cap < g->len + len)
            cap *= 2;
        void *p = realloc(s->bytes, cap);
        if (p == NULL)
            return -ENOMEM;
        s->bytes = p;
        s->cap = cap;
    }
    memcpy(s->bytes + g->len, rec, len);
    s->recs[g->n++] = (struct dpp_gathered_rec){g->len, len, index, off};
    g->len += len;
    return 0;
}

/* Sizes the gather buffers for the whole range at once when the index gave
 * its byte size and record count: growing them by doubling copied every
 * record about twice. An open-ended range (the whole file) grows. */
static int gather_reserve(gathered_t *g, const dpp_task_t *t)
{
    dpp_split_scratch_t *s = g->s;
    uint64_t range = t->byte_end - t->byte_start;
    size_t bytes = t->byte_end != UINT64_MAX && t->byte_end > t->byte_start && range <= (1ull << 32)
                       ? (size_t)range
                       : 0;
    size_t recs = (size_t)(t->record_take ? t->record_take : t->record_count);
    if (bytes > s->cap) {
        free(s->bytes);
        s->cap = 0;
        if ((s->bytes = malloc(bytes)) == NULL)
            return -ENOMEM;
        s->cap = bytes;
    }
    if (recs > s->ncap) {
        free(s->recs);
        s->ncap = 0;
        if ((s->recs = malloc(recs * sizeof *s->recs)) == NULL)
            return -ENOMEM;
        s->ncap = recs;
    }
    return 0;
}

/* Produces the gathered records in the order drawn from (seed, epoch, the
 * row key of the window's first record): the same rows in the same order
 * whichever worker produces the split. */
/* The order a shuffled window's records (or rows) take in an epoch: a
 * permutation of [0, n) drawn from (seed, epoch, the row key of the
 * window's first record), the same whichever worker makes the split.
 * NULL when out of memory. */
static uint32_t *window_order(const split_ctx_t *x, size_t n, uint64_t path_hash)
{
    const dpp_task_t *t = x->task;
    uint32_t *perm = malloc((n ? n : 1) * sizeof *perm);
    if (perm == NULL)
        return NULL;
    uint64_t salt = dpp_row_key(path_hash, t->record_start + t->record_skip);
    dpp_permute(perm, n, dpp_shuffle_seed(x->plan->spec.shuffle_seed, t->epoch, salt));
    return perm;
}

/* Produces the gathered records in the window's order (window_order), or,
 * capturing the split for the cache, in file order, noting which records
 * became rows: the entry serves the epoch's order from them. */
static int produce_gathered(split_ctx_t *x, const gathered_t *g, uint64_t path_hash,
                            dpp_split_result_t *res)
{
    const dpp_task_t *t = x->task;
    uint32_t *perm = x->capture ? NULL : window_order(x, g->n, path_hash);
    if (perm == NULL && !x->capture) {
        set_error(res, -ENOMEM, "split %s: %s", t->rel_path, dpp_strerror(-ENOMEM));
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < g->n && rc == 0; i++) {
        const struct dpp_gathered_rec *r = &g->s->recs[perm ? perm[i] : i];
        x->times = x->block_times && i % TIME_SAMPLE == 0 ? &x->sampled : NULL;
        int outcome = add_record(x, g->s->bytes + r->at, r->len, r->index, path_hash);
        if (x->capture && dpp_split_capture_record(x->capture, outcome == 0) != 0)
            outcome = -ENOMEM;
        rc = take_outcome(x, res, outcome, r->off);
    }
    free(perm);
    return rc;
}

/* Cuts what the builder holds into a block, then emits the empty block
 * that marks the split's end, so the client can count the split done
 * without the worker holding a block back to learn it was the last.
 * Returns 0 or the emit's error; res->blocks gets the blocks made. */
static int finish_blocks(split_ctx_t *x, dpp_split_result_t *res)
{
    if (x->cfg->stop_after == DPP_STAGE_TRANSFORM)
        drop_rows(x);
    int rc = x->builder.rows > 0 ? cut_block(x) : 0;
    if (rc || x->capture)
        return rc; /* a capture's end is the entry's serving */
    dpp_out_block_t *last = new_block(x, 0, NULL, 0);
    uint8_t *raw;
    size_t raw_len;
    rc = last ? dpp_block_builder_finish(&x->builder, &raw, &raw_len) : -ENOMEM;
    if (rc) {
        free(last);
        return rc;
    }
    last->data = raw;
    last->len = last->raw_size = raw_len;
    last->last = 1;
    res->blocks = x->next_index;
    return x->emit(x->emit_arg, last);
}

/* ---- the cache ---------------------------------------------------------------
 * A split whose session may use the worker's cache is made into an entry
 * first (its blocks before the epoch's shuffle, which records became rows:
 * split_cache.h), stored, and served from the entry; a later epoch or
 * session finds the entry and only serves it. Serving puts the entry's
 * rows in the order a worker without the cache adds them, so both make the
 * same blocks. */

/* The capture's emit: keeps the raw block. */
static int capture_emit(void *arg, dpp_out_block_t *b)
{
    split_ctx_t *x = arg;
    uint8_t *data = b->data;
    b->data = NULL;
    int rc = dpp_split_capture_block(x->capture, data, b->len, b->rows);
    dpp_out_block_free(b);
    return rc;
}

/* Emits the split's blocks from entry e: as stored without a shuffle, else
 * its rows in the window's order (window_order over the records gathered,
 * as produce_gathered adds them), cut every batch_size rows. */
static int serve_entry(split_ctx_t *x, const dpp_split_entry_t *e, int shuffle, uint64_t path_hash,
                       dpp_split_result_t *res)
{
    x->next_index = 0;
    int rc = 0;
    if (!shuffle) {
        for (size_t b = 0; b < e->nblocks && rc == 0; b++) {
            uint8_t *copy = malloc(e->block_len[b]);
            dpp_out_block_t *out =
                copy ? new_block(x, e->block_rows[b], copy, e->block_len[b]) : NULL;
            if (out == NULL) {
                free(copy);
                return -ENOMEM;
            }
            memcpy(copy, e->block[b], e->block_len[b]);
            if (x->compress && x->zctx)
                compress_block(x, out);
            x->res->raw_bytes += out->raw_size;
            x->res->wire_bytes += out->len;
            rc = x->emit(x->emit_arg, out);
        }
        return rc ? rc : finish_blocks(x, res);
    }
    if (e->ngathered > UINT32_MAX)
        return DPP_EINVAL;
    uint32_t *perm = window_order(x, (size_t)e->ngathered, path_hash);
    if (perm == NULL)
        return -ENOMEM;
    /* a batch's rows at a time, gathered column by column */
    uint32_t batch = x->plan->spec.batch_size;
    const uint8_t **from = malloc(batch * sizeof *from);
    uint32_t *rows = malloc(batch * sizeof *rows);
    if (from == NULL || rows == NULL)
        rc = -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < e->ngathered && rc == 0; i++) {
        int64_t row = dpp_split_entry_row(e, perm[i]);
        if (row < 0)
            continue;
        from[n] = e->block[(uint64_t)row / batch];
        rows[n++] = (uint32_t)((uint64_t)row % batch);
        if (x->builder.rows + n < batch)
            continue;
        rc = dpp_block_builder_gather(&x->builder, from, rows, n);
        n = 0;
        if (rc == 0)
            rc = cut_block(x);
    }
    if (rc == 0 && n > 0) /* the split's last rows; finish_blocks cuts them */
        rc = dpp_block_builder_gather(&x->builder, from, rows, n);
    free(perm);
    free(from);
    free(rows);
    return rc ? rc : finish_blocks(x, res);
}

/* What the entry says of the split, into res (a hit). */
static void summary_to_result(const dpp_split_summary_t *s, dpp_split_result_t *res)
{
    res->rows = s->rows;
    res->filtered = s->filtered;
    res->examined = s->examined;
    res->documents = s->documents;
    res->tokens = s->tokens;
    res->padding = s->padding;
    res->rejects = s->rejects;
    snprintf(res->reject_detail, sizeof res->reject_detail, "%s", s->reject_detail);
    if (s->absent_len <= sizeof res->absent) {
        memcpy(res->absent, s->absent, s->absent_len);
        res->nabsent = s->nabsent;
    }
    if (s->names_len <= sizeof res->names) {
        memcpy(res->names, s->names, s->names_len);
        res->nnames = s->nnames;
    }
}

/* The length of a NUL-separated list of n names. */
static size_t names_len(const char *s, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += strlen(s + at) + 1;
    return at;
}

/* Stores the captured split as an entry and serves it. Returns 0 or the
 * error (set in res). */
static int store_and_serve(split_ctx_t *x, const dpp_cache_key_t *key,
                           const dpp_split_identity_t *id, int shuffle, uint64_t path_hash,
                           dpp_split_result_t *res)
{
    dpp_split_summary_t sum = {
        .rows = res->rows,
        .filtered = res->filtered,
        .examined = res->examined,
        .documents = res->documents,
        .tokens = res->tokens,
        .padding = res->padding,
        .rejects = res->rejects,
        .reject_detail = res->reject_detail,
        .absent = res->absent,
        .absent_len = names_len(res->absent, res->nabsent),
        .nabsent = res->nabsent,
        .names = res->names,
        .names_len = names_len(res->names, res->nnames),
        .nnames = res->nnames,
    };
    /* written into the store's buffer, stored, and served from it */
    size_t len = dpp_split_entry_size(x->capture, &sum);
    dpp_cache_ref_t *ref = len ? dpp_cache_ref_new(len) : NULL;
    dpp_split_entry_t e;
    char why[256];
    int rc = ref ? 0 : -ENOMEM;
    if (rc == 0) {
        dpp_split_entry_write(x->capture, id, x->plan->spec.batch_size, &sum,
                              dpp_cache_ref_payload(ref));
        rc = dpp_split_entry_parse(dpp_cache_ref_payload(ref), len, &x->plan->shape,
                                   x->plan->spec.batch_size, &e, why, sizeof why);
    }
    if (rc) {
        dpp_cache_ref_put(ref);
        set_error(res, rc, "split %s: %s", x->task->rel_path,
                  rc == -ENOMEM ? dpp_strerror(rc) : why);
        return rc;
    }
    dpp_split_capture_free(x->capture);
    x->capture = NULL;
    dpp_cache_store_put_ref(x->cfg->cache, key, ref); /* where it fits: else a later miss */
    rc = serve_entry(x, &e, shuffle, path_hash, res);
    dpp_split_entry_close(&e);
    dpp_cache_ref_put(ref);
    if (rc && !res->error)
        set_error(res, rc, "split %s: %s", x->task->rel_path,
                  rc == DPP_ECLOSED ? "worker stopping" : dpp_strerror(rc));
    return rc;
}

/* Serves task t from the cache when it holds a current entry: 1 (res
 * filled), 0 when not (a miss: *id says who the file is now, to capture
 * it), or an error that ends the split. */
static int serve_cached(split_ctx_t *x, const dpp_cache_key_t *key, const dpp_split_identity_t *id,
                        int shuffle, uint64_t path_hash, dpp_split_result_t *res)
{
    dpp_cache_ref_t *ref = NULL;
    int tier = 0;
    if (dpp_cache_store_get(x->cfg->cache, key, &ref, &tier) != 0)
        return 0;
    size_t len = 0;
    const uint8_t *data = dpp_cache_ref_data(ref, &len);
    dpp_split_entry_t e;
    char why[256];
    int rc = dpp_split_entry_parse(data, len, &x->plan->shape, x->plan->spec.batch_size, &e, why,
                                   sizeof why);
    if (rc == 0 && memcmp(&e.identity, id, sizeof *id) != 0) {
        dpp_split_entry_close(&e);
        rc = DPP_ECORRUPT; /* made from another file, or with other vocabularies */
        snprintf(why, sizeof why, "the file changed since the entry was made");
    }
    if (rc) {
        dpp_cache_ref_put(ref);
        DPP_DEBUG("cache_entry_dropped file=%s reason=\"%s\"", x->task->rel_path, why);
        dpp_cache_store_remove(x->cfg->cache, key);
        return rc == -ENOMEM ? rc : 0;
    }
    summary_to_result(&e.summary, res);
    res->cache_tier = tier + 1;
    res->cache_bytes = len;
    rc = serve_entry(x, &e, shuffle, path_hash, res);
    dpp_split_entry_close(&e);
    dpp_cache_ref_put(ref);
    if (rc && !res->error)
        set_error(res, rc, "split %s: %s", x->task->rel_path,
                  rc == DPP_ECLOSED ? "worker stopping" : dpp_strerror(rc));
    return rc ? rc : 1;
}

int dpp_pipeline_run_split(const dpp_pipeline_config_t *cfg, void *reader_ptr, void *zctx,
                           dpp_split_scratch_t *scratch, int auto_compress, const dpp_task_t *t,
                           dpp_emit_cb emit, void *arg, dpp_split_result_t *res,
                           dpp_stage_times_t *times)
{
    dpp_reader_t *reader = reader_ptr;
    dpp_source_t src = {0};
    plan_t plan;
    dpp_split_scratch_t own = {0};
    dpp_split_capture_t cap = {0};
    gathered_t g = {.s = scratch ? scratch : &own};
    char err[DPP_SPEC_ERRLEN];
    memset(res, 0, sizeof *res);
    res->kind = DPP_TASK_SPLIT;
    res->lease_id = t->lease_id;
    memcpy(res->session, t->session, sizeof res->session);
    res->split = t->split;
    int rc = plan_init(&plan, t, cfg, err, sizeof err);
    if (rc) {
        set_error(res, rc, "spec: %s", rc == -ENOMEM ? "out of memory" : err);
        return rc;
    }
    split_ctx_t x = {.cfg = cfg,
                     .task = t,
                     .plan = &plan,
                     .res = res,
                     .zctx = zctx,
                     .emit = emit,
                     .emit_arg = arg,
                     .block_times = times};
    /* auto: as the worker decided for this client from the link and CPU it
     * measured (worker.c, auto_compress()) */
    x.compress = plan.spec.compression == DPP_COMPRESSION_ZSTD ||
                 (plan.spec.compression == DPP_COMPRESSION_AUTO && auto_compress == 1);
    res->compressed = x.compress;
    int shuffle = plan.spec.shuffle && cfg->stop_after == DPP_STAGE_ALL;
    dpp_reader_stats_t st0, st1;
    dpp_reader_get_stats(reader, &st0);
    if ((rc = ctx_init(&x, &plan)) != 0) {
        set_error(res, rc, "split %s: %s", t->rel_path, dpp_strerror(rc));
        goto out;
    }
    uint64_t path_hash = dpp_path_hash(t->rel_path);
    dpp_cache_key_t key = {0};
    dpp_split_identity_t id = {0};
    int compress = x.compress;
    res->cache_tier = -1;
    if (cfg->cache && !plan.spec.cache_off && cfg->stop_after == DPP_STAGE_ALL) {
        char root[4096];
        uint64_t k[2];
        dpp_source_data_root(cfg, t, plan.spec.table, root, sizeof root);
        dpp_spec_split_key(dpp_spec_cache_fingerprint(&plan.spec), t->path, t->byte_start,
                           t->byte_end, t->record_start, t->range_records, t->record_skip,
                           t->record_take, k);
        key = (dpp_cache_key_t){k[0], k[1]};
        /* a file that cannot be stat'ed is not cached (its open says why) */
        if (dpp_split_identity(t, &plan.spec, root, &id) == 0) {
            if ((rc = serve_cached(&x, &key, &id, shuffle, path_hash, res)) != 0)
                goto out; /* served (1), or failed */
            x.capture = &cap;
            x.emit = capture_emit;
            x.emit_arg = &x;
            x.compress = 0;
            res->cache_tier = 0;
        }
    }
    x.src = &src;
    if ((rc = plan.src->open(&src, reader, t, plan.proj, cfg, err, sizeof err)) != 0) {
        set_error(res, rc, "%s", err);
        goto out;
    }
    uint64_t record_index = t->record_start;
    /* The split may be a window of the byte range (ranks are balanced by
     * cutting ranges): records before it are passed over undecoded, and
     * reading stops after it. */
    uint64_t first = t->record_start + t->record_skip;
    uint64_t stop = t->record_take ? first + t->record_take : UINT64_MAX;
    int clean_end = 0; /* the range ended before stop */
    if (shuffle && (rc = gather_reserve(&g, t)) != 0) {
        set_error(res, rc, "split %s: %s", t->rel_path, dpp_strerror(rc));
        goto out;
    }
    if (src.ops->skip && first > record_index) {
        if ((rc = src.ops->skip(&src, first - record_index)) != 0) {
            /* the window's own reading would fail the same way */
            if (lose_rest(&x, res, rc, stop == UINT64_MAX ? 0 : stop - first, t->byte_start))
                goto out;
            record_index = stop;
        } else {
            record_index = first;
        }
    }
    for (; record_index < stop; record_index++) {
        dpp_source_row_t row = {0};
        x.times = times && record_index % TIME_SAMPLE == 0 ? &x.sampled : NULL;
        uint64_t t0 = x.times ? dpp_now_ns() : 0;
        rc = src.ops->next(&src, &row);
        if (x.times)
            x.times->read_ns += dpp_now_ns() - t0;
        if (rc == 0) {
            clean_end = 1;
            break;
        }
        if (record_index < first) {
            if (rc < 0 && src.ops->stuck(&src)) {
                /* the window's own reading would fail the same way */
                if (lose_rest(&x, res, rc, stop == UINT64_MAX ? 0 : stop - first, row.offset))
                    goto out;
                break;
            }
            continue;
        }
        if (rc == 1 && cfg->stop_after == DPP_STAGE_READ) {
            res->filtered++;
            continue;
        }
        if (rc == 1 && shuffle) {
            if ((rc = gather(&g, row.data, row.len, record_index, row.offset)) != 0) {
                set_error(res, rc, "split %s: %s", t->rel_path, dpp_strerror(rc));
                goto out;
            }
            continue;
        }
        if (rc == 1) {
            rc = add_record(&x, row.data, row.len, record_index, path_hash);
            if (x.capture && dpp_split_capture_record(x.capture, rc == 0) != 0)
                rc = -ENOMEM;
        }
        if (take_outcome(&x, res, rc, row.offset) != 0)
            goto out;
        if (rc < 0 && src.ops->stuck(&src)) {
            /* no record boundary after this point can be trusted: the rest
             * of the window is lost, and counted as such */
            if (lose_rest(&x, res, src.ops->stuck(&src),
                          stop == UINT64_MAX ? 0 : stop - record_index - 1, row.offset))
                goto out;
            break;
        }
    }
    if (stop != UINT64_MAX && (rc = check_index(&x, &src, res, clean_end, record_index)) != 0)
        goto out;
    if (shuffle && produce_gathered(&x, &g, path_hash, res) != 0)
        goto out;
    /* the spec's features that no record of the split had: the master's
     * schema check adds them up over splits (a misspelt name is absent from
     * every record) */
    res->examined = x.examined;
    for (size_t i = 0; x.examined > 0 && x.nseen < plan.nslots && i < plan.nslots; i++) {
        size_t l = strlen(plan.slot_names[i]), at = 0;
        for (size_t k = 0; k < res->nabsent; k++)
            at += strlen(res->absent + at) + 1;
        if (x.seen[i] || plan.slot_optional[i] || at + l + 1 > sizeof res->absent)
            continue;
        memcpy(res->absent + at, plan.slot_names[i], l + 1);
        res->nabsent++;
    }
    rc = finish_blocks(&x, res);
    if (rc == 0 && x.capture) {
        x.emit = emit;
        x.emit_arg = arg;
        x.compress = compress;
        rc = store_and_serve(&x, &key, &id, shuffle, path_hash, res);
    }
    if (rc && !res->error)
        set_error(res, rc, "split %s: %s", t->rel_path,
                  rc == DPP_ECLOSED ? "worker stopping" : dpp_strerror(rc));
out:
    dpp_reader_get_stats(reader, &st1);
    if (times) {
        times->read_ns += x.sampled.read_ns * TIME_SAMPLE;
        times->decode_ns += x.sampled.decode_ns * TIME_SAMPLE;
        times->transform_ns += x.sampled.transform_ns * TIME_SAMPLE;
        times->encode_ns += x.sampled.encode_ns * TIME_SAMPLE;
    }
    if (src.ops) {
        src.ops->close(&src); /* counts src.bytes_read, and inputs that were no rows */
        /* A range cut into windows (ranks balanced) is read by each of them
         * from its start; the last window reads all of it, and counts its
         * inputs that were no rows once. */
        if (t->record_take == 0 || t->range_records == 0 ||
            t->record_skip + t->record_take >= t->range_records) {
            dpp_rejects_add(&res->rejects, &src.rejects);
            res->filtered += src.filtered;
            res->documents += src.documents;
            res->tokens += src.tokens;
            res->padding += src.padding;
            if (!res->reject_detail[0] && src.reject_detail[0])
                snprintf(res->reject_detail, sizeof res->reject_detail, "%s", src.reject_detail);
        }
    }
    res->bytes_read = st1.bytes_read - st0.bytes_read + src.bytes_read;
    dpp_split_scratch_free(&own);
    dpp_split_capture_free(&cap);
    ctx_close(&x);
    plan_close(&plan);
    return res->error;
}

/* ---- index tasks ---------------------------------------------------------- */

/* Fills res's identity for index task t; returns 0, or the error (set in
 * res) that stops it before its file is looked at. */
static int index_begin(const dpp_task_t *t, dpp_split_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->kind = DPP_TASK_INDEX;
    res->lease_id = t->lease_id;
    memcpy(res->session, t->session, sizeof res->session);
    res->split = t->split;
    if (t->split_rows == 0) {
        set_error(res, DPP_EINVAL, "index %s: split_rows is 0", t->rel_path);
        return res->error;
    }
    if (t->format < 0) {
        set_error(res, DPP_EINVAL,
                  "index %s: format \"%s\" is not one this worker reads (it reads %s): "
                  "upgrade the worker",
                  t->rel_path, t->format_name, dpp_format_list());
        return res->error;
    }
    return 0;
}

int dpp_pipeline_run_index(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                           dpp_split_result_t *res)
{
    if (index_begin(t, res) != 0)
        return res->error;
    return dpp_source_ops((dpp_format_t)t->format, t->text)->index(cfg, t, res);
}

void dpp_pipeline_run_index_many(const dpp_pipeline_config_t *cfg, dpp_reader_t *reader,
                                 const dpp_task_t *const *t, dpp_split_result_t *const *res,
                                 size_t n)
{
    const dpp_task_t *batch[DPP_PIPELINE_INDEX_BATCH];
    dpp_split_result_t *bres[DPP_PIPELINE_INDEX_BATCH];
    size_t nb = 0;
    const dpp_source_ops_t *ops = NULL;
    for (size_t i = 0; i <= n; i++) {
        const dpp_source_ops_t *o = i < n && index_begin(t[i], res[i]) == 0
                                        ? dpp_source_ops((dpp_format_t)t[i]->format, t[i]->text)
                                        : NULL;
        /* a run of one format's tasks goes to it together */
        if (nb > 0 && (o != ops || i == n)) {
            if (ops->index_many)
                ops->index_many(cfg, reader, batch, bres, nb);
            else
                for (size_t k = 0; k < nb; k++)
                    ops->index(cfg, batch[k], bres[k]);
            nb = 0;
        }
        if (o) {
            ops = o;
            batch[nb] = t[i];
            bres[nb++] = res[i];
        }
    }
}

/* ---- threads -------------------------------------------------------------- */

/* emit callback of the threads: waits for budget, then queues the block. */
static int emit_block(void *arg, dpp_out_block_t *b)
{
    dpp_pipeline_t *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && b->generation == p->generation && p->buffered > 0 &&
           p->buffered + b->len > p->cfg.budget_bytes)
        pthread_cond_wait(&p->space_cv, &p->mu);
    if (p->stopping || b->generation != p->generation) { /* stopping, or the lease is gone */
        pthread_mutex_unlock(&p->mu);
        dpp_out_block_free(b);
        return DPP_ECLOSED;
    }
    b->next = NULL;
    *p->blocks_tail = b;
    p->blocks_tail = &b->next;
    p->buffered += b->len;
    if (p->buffered > p->buffered_peak)
        p->buffered_peak = p->buffered;
    pthread_mutex_unlock(&p->mu);
    uv_async_send(p->notify);
    return 0;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Compression "auto"'s decision for the client of (session, rank): 1 or 0
 * (also when none was made yet). */
static int client_compress(dpp_pipeline_t *p, const dpp_task_t *t)
{
    int compress = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->nlocal; i++)
        if (p->local[i].rank == t->rank && strcmp(p->local[i].session, t->session) == 0)
            compress = p->local[i].compress;
    pthread_mutex_unlock(&p->mu);
    return compress;
}

/* Runs a batch of index tasks and hands their results to the loop thread
 * together (one wake-up). */
static void run_index_batch(dpp_pipeline_t *p, dpp_reader_t *reader, dpp_task_t *const *t, size_t n)
{
    dpp_split_result_t *res[DPP_PIPELINE_INDEX_BATCH];
    for (size_t i = 0; i < n; i++)
        if ((res[i] = calloc(1, sizeof *res[i])) == NULL) {
            DPP_ERROR("out_of_memory where=split_result");
            abort();
        }
    dpp_pipeline_run_index_many(&p->cfg, reader, (const dpp_task_t *const *)t, res, n);
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < n; i++) {
        res[i]->generation = t[i]->generation; /* the runners reset res */
        *p->results_tail = res[i];
        p->results_tail = &res[i]->next;
    }
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < n; i++)
        dpp_task_free(t[i]);
    uv_async_send(p->notify);
}

static void *thread_main(void *arg)
{
    dpp_pipeline_t *p = arg;
    dpp_reader_t *reader = NULL;
    int rc = dpp_reader_new(&reader, &p->cfg.reader);
    ZSTD_CCtx *zctx = ZSTD_createCCtx();
    dpp_split_scratch_t scratch = {0};
    if (rc || zctx == NULL) {
        DPP_ERROR("pipeline_thread_failed error=\"%s\"", rc ? dpp_strerror(rc) : "no zstd context");
        abort(); /* a daemon: abort with a location, as alloc.h does */
    }
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
        /* index tasks: a run of them at once */
        dpp_task_t *batch[DPP_PIPELINE_INDEX_BATCH];
        size_t nb = 0;
        if (t->kind == DPP_TASK_INDEX) {
            batch[nb++] = t;
            while (nb < DPP_PIPELINE_INDEX_BATCH && p->tasks && p->tasks->kind == DPP_TASK_INDEX) {
                batch[nb++] = p->tasks;
                p->tasks = p->tasks->next;
            }
        }
        if (p->tasks == NULL)
            p->tasks_tail = &p->tasks;
        pthread_mutex_unlock(&p->mu);

        if (nb > 0) {
            run_index_batch(p, reader, batch, nb);
            continue;
        }
        dpp_split_result_t *res = calloc(1, sizeof *res);
        if (res == NULL) {
            DPP_ERROR("out_of_memory where=split_result");
            abort();
        }
        dpp_stage_times_t times = {0};
        uint64_t cpu0 = thread_cpu_ns();
        dpp_pipeline_run_split(&p->cfg, reader, zctx, &scratch, client_compress(p, t), t,
                               emit_block, p, res, &times);
        res->cpu_ns = thread_cpu_ns() - cpu0;
        res->times = times;              /* the runner resets res first */
        res->generation = t->generation; /* the runners reset res */
        dpp_task_free(t);
        pthread_mutex_lock(&p->mu);
        *p->results_tail = res;
        p->results_tail = &res->next;
        pthread_mutex_unlock(&p->mu);
        uv_async_send(p->notify);
    }
    ZSTD_freeCCtx(zctx);
    dpp_reader_free(reader);
    dpp_split_scratch_free(&scratch);
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

unsigned dpp_pipeline_generation(dpp_pipeline_t *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned g = p->generation;
    pthread_mutex_unlock(&p->mu);
    return g;
}

/* Frees the queued tasks; caller holds p->mu. */
static size_t drop_queued(dpp_pipeline_t *p, size_t *index_tasks)
{
    size_t n = 0, ni = 0;
    while (p->tasks) {
        dpp_task_t *t = p->tasks;
        p->tasks = t->next;
        ni += t->kind == DPP_TASK_INDEX;
        dpp_task_free(t);
        n++;
    }
    if (index_tasks)
        *index_tasks = ni;
    p->tasks_tail = &p->tasks;
    return n;
}

size_t dpp_pipeline_revoke(dpp_pipeline_t *p, size_t *index_tasks)
{
    pthread_mutex_lock(&p->mu);
    p->generation++;
    size_t n = drop_queued(p, index_tasks);
    pthread_cond_broadcast(&p->space_cv); /* emitters waiting for budget drop out */
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t dpp_pipeline_cancel_queued(dpp_pipeline_t *p, size_t *index_tasks)
{
    pthread_mutex_lock(&p->mu);
    size_t n = drop_queued(p, index_tasks);
    pthread_mutex_unlock(&p->mu);
    return n;
}

void dpp_pipeline_set_client(dpp_pipeline_t *p, const char *session, uint32_t rank, int compress)
{
    pthread_mutex_lock(&p->mu);
    size_t i = 0;
    while (i < p->nlocal &&
           !(p->local[i].rank == rank && strcmp(p->local[i].session, session) == 0))
        i++;
    if (i == p->nlocal) {
        if (p->nlocal == DPP_PIPELINE_MAX_CLIENTS) {
            /* forget the oldest: at worst its blocks go uncompressed until decided again */
            memmove(p->local, p->local + 1, (p->nlocal - 1) * sizeof *p->local);
            i = --p->nlocal;
        }
        p->nlocal++;
    }
    snprintf(p->local[i].session, sizeof p->local[i].session, "%s", session);
    p->local[i].rank = rank;
    p->local[i].compress = compress;
    pthread_mutex_unlock(&p->mu);
}

size_t dpp_pipeline_buffered_peak(dpp_pipeline_t *p)
{
    pthread_mutex_lock(&p->mu);
    size_t peak = p->buffered_peak;
    pthread_mutex_unlock(&p->mu);
    return peak;
}

size_t dpp_pipeline_buffered(dpp_pipeline_t *p)
{
    pthread_mutex_lock(&p->mu);
    size_t now = p->buffered;
    pthread_mutex_unlock(&p->mu);
    return now;
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
        free(r->bounds);
        free(r);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->space_cv);
}
