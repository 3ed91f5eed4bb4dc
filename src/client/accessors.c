/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient, what the trainer reads: an open client's getters (schema,
 * epochs, counters, error text) and a batch's accessors and release. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "core.h"
#include "format/block.h"
#include "dpp/client.h"

const char *dpp_client_error(const dpp_client_t *c)
{
    /* error_text is written once, under the lock, before error is set;
     * reading the flag under the lock makes the text safe to hand out. */
    pthread_mutex_lock(&c->core->mu);
    int failed = c->core->error != 0;
    pthread_mutex_unlock(&c->core->mu);
    return failed ? c->core->error_text : "";
}

unsigned dpp_client_epoch(const dpp_client_t *c)
{
    return c->epoch;
}

unsigned dpp_client_batch_size(const dpp_client_t *c)
{
    return c->batch_size;
}

unsigned dpp_client_num_epochs(const dpp_client_t *c)
{
    return c->epochs;
}

int64_t dpp_client_epoch_batches(const dpp_client_t *c)
{
    dpp_core_t *core = c->core;
    int64_t rows = -1;
    pthread_mutex_lock(&core->mu);
    if (core->pad) {
        int64_t n = dpp__core_pad_batches(core, c->epoch);
        pthread_mutex_unlock(&core->mu);
        return n;
    }
    /* an epoch an elastic resume re-planned has its own count; the epochs
     * after it are planned as usual */
    int rest = core->rest && c->epoch == core->rest_epoch;
    if (rest && core->rest_rank_records >= 0) {
        rows = core->rest_rank_records;
    } else if (!rest && core->rank_records >= 0) {
        rows = core->rank_records;
    } else if (core->rank_splits == 0) {
        rows = 0;
    } else {
        epoch_track_t *t = dpp__core_epoch(core, c->epoch, 0);
        int64_t n = t ? dpp__epoch_splits(core, t) : -1;
        if (n >= 0 && t->complete_splits >= (uint64_t)n)
            rows = (int64_t)t->rows_arrived;
    }
    pthread_mutex_unlock(&core->mu);
    if (rows < 0)
        return -1;
    int64_t bs = c->batch_size;
    return rows / bs + (core->keep_remainder && rows % bs ? 1 : 0);
}

unsigned dpp_client_num_dense(const dpp_client_t *c)
{
    return c->core->ndense;
}

unsigned dpp_client_num_sparse(const dpp_client_t *c)
{
    return c->core->nsparse;
}

const char *dpp_client_dense_name(const dpp_client_t *c, unsigned i)
{
    return i < c->core->ndense ? c->core->dense_names[i] : NULL;
}

const char *dpp_client_sparse_name(const dpp_client_t *c, unsigned i)
{
    return i < c->core->nsparse ? c->core->sparse_names[i] : NULL;
}

int dpp_client_sparse_weighted(const dpp_client_t *c, unsigned i)
{
    return i < c->core->nsparse && c->core->weighted[i];
}

const char *dpp_client_label_name(const dpp_client_t *c)
{
    return c->core->label_name;
}

unsigned dpp_client_dense_dim(const dpp_client_t *c, unsigned i)
{
    return i < c->core->ndense ? c->core->dims[i] : 0;
}

void dpp_client_get_stats(const dpp_client_t *c, dpp_client_stats_t *out)
{
    *out = c->stats;
    dpp_core_t *core = c->core;
    pthread_mutex_lock(&core->mu);
    out->bytes_wire = core->bytes_wire;
    out->bytes_raw = core->bytes_raw;
    out->blocks = core->blocks;
    out->blocks_duplicate = core->blocks_duplicate;
    out->reconnects = core->reconnects;
    pthread_mutex_unlock(&core->mu);
}

size_t dpp_batch_rows(const dpp_batch_t *b)
{
    return b->rows;
}

const int32_t *dpp_batch_source_ids(const dpp_batch_t *b)
{
    return b->source_ids;
}

unsigned dpp_client_num_sources(const dpp_client_t *c)
{
    return c->core->nsources;
}

const char *dpp_client_source_name(const dpp_client_t *c, unsigned i)
{
    return i < c->core->nsources ? c->core->source_names[i] : NULL;
}

size_t dpp_batch_valid_rows(const dpp_batch_t *b)
{
    return b->valid_rows;
}

const uint8_t *dpp_batch_mask(const dpp_batch_t *b)
{
    return b->mask;
}

unsigned dpp_batch_epoch(const dpp_batch_t *b)
{
    return b->epoch;
}

static int find_name(char *const *names, unsigned n, const char *name)
{
    for (unsigned i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    return -1;
}

int dpp_batch_dense_at(const dpp_batch_t *b, unsigned i, const float **data, unsigned *dim)
{
    if (i >= b->core->ndense)
        return DPP_ENOFEATURE;
    *data = dpp_block_dense(b->buf, i);
    *dim = b->core->dims[i];
    return 0;
}

int dpp_batch_dense(const dpp_batch_t *b, const char *name, const float **data, unsigned *dim)
{
    int i = find_name(b->core->dense_names, b->core->ndense, name);
    return i < 0 ? DPP_ENOFEATURE : dpp_batch_dense_at(b, (unsigned)i, data, dim);
}

int dpp_batch_sparse_at(const dpp_batch_t *b, unsigned k, const int64_t **values,
                        const int32_t **lengths, size_t *nvalues)
{
    if (k >= b->core->nsparse)
        return DPP_ENOFEATURE;
    *lengths = dpp_block_lengths(b->buf, &b->core->shape, k);
    *values = dpp_block_values(b->buf, &b->core->shape, k, nvalues);
    return 0;
}

int dpp_batch_sparse(const dpp_batch_t *b, const char *name, const int64_t **values,
                     const int32_t **lengths, size_t *nvalues)
{
    int k = find_name(b->core->sparse_names, b->core->nsparse, name);
    return k < 0 ? DPP_ENOFEATURE : dpp_batch_sparse_at(b, (unsigned)k, values, lengths, nvalues);
}

int dpp_batch_sparse_weights(const dpp_batch_t *b, const char *name, const float **weights)
{
    int k = find_name(b->core->sparse_names, b->core->nsparse, name);
    if (k < 0 || !b->core->weighted[k])
        return DPP_ENOFEATURE;
    *weights = dpp_block_weights(b->buf, &b->core->shape, (unsigned)k);
    return 0;
}

int dpp_batch_kjt(const dpp_batch_t *b, dpp_kjt_t *out)
{
    /* offsets[keys * rows] is readable without keys, as it is with them */
    static const int32_t no_offsets[1] = {0};
    dpp_block_kjt_t k;
    dpp_block_kjt(b->buf, &b->core->shape, &k);
    out->nkeys = b->core->nsparse;
    out->stride = b->rows;
    out->values = k.values;
    out->nvalues = k.nvalues;
    out->lengths = k.lengths;
    out->offsets = k.offsets ? k.offsets : no_offsets;
    out->weights = k.weights;
    return 0;
}

int dpp_batch_text(const dpp_batch_t *b, dpp_text_batch_t *out)
{
    static const char *const columns[] = {"input_ids", "labels", "position_ids", "cu_seqlens"};
    const dpp_core_t *c = b->core;
    memset(out, 0, sizeof *out);
    if (c->nsparse != 4 || c->ndense != 0)
        return DPP_ENOFEATURE;
    for (unsigned k = 0; k < 4; k++)
        if (strcmp(c->sparse_names[k], columns[k]) != 0)
            return DPP_ENOFEATURE;
    const int64_t **cols[3] = {&out->input_ids, &out->labels, &out->position_ids};
    size_t n;
    for (unsigned k = 0; k < 3; k++)
        *cols[k] = dpp_block_values(b->buf, &c->shape, k, &n);
    out->rows = b->valid_rows;
    out->length = out->rows ? (uint32_t)dpp_block_lengths(b->buf, &c->shape, 0)[0] : 0;
    out->cu_seqlens = dpp_block_values(b->buf, &c->shape, 3, &out->ncu);
    out->cu_lengths = dpp_block_lengths(b->buf, &c->shape, 3);
    out->padding = dpp_block_labels(b->buf, &c->shape);
    return 0;
}

int dpp_batch_labels(const dpp_batch_t *b, const float **labels)
{
    *labels = dpp_block_labels(b->buf, &b->core->shape);
    return *labels ? 0 : DPP_ENOFEATURE;
}

void dpp_batch_release(dpp_batch_t *b)
{
    if (b == NULL)
        return;
    dpp_core_t *core = b->core;
    pthread_mutex_lock(&core->mu);
    /* A lost credit only slows that worker link; it reconnects fresh. */
    if (b->link_id)
        dpp__core_credit(core, b->link_id);
    core->trainer_bytes -= b->cap;
    dpp__core_unhold(core, b->cap);
    /* after the client closed, nobody would take it from the pool */
    if (core->closed)
        free(b->buf);
    else
        dpp__pool_put(core, b->buf, b->cap);
    pthread_mutex_unlock(&core->mu);
    if (b->mask != core->ones)
        free((void *)b->mask);
    free(b->source_ids);
    free(b);
    dpp__core_unref(core);
}
