/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's core: the state the consumer side and the I/O thread share
 * (see core.h): epoch and split tracking, the buffer pool, queued credits and
 * acknowledgements, the plan and the first failure. Never aborts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core.h"
#include "base/util.h"
#include "dpp/error.h"
#include "dpp.pb-c.h"

static void free_names(char **names, unsigned n)
{
    if (names)
        for (unsigned i = 0; i < n; i++)
            free(names[i]);
    free(names);
}

void dpp__track_reset(epoch_track_t *t)
{
    for (size_t i = 0; i < t->nsplits; i++)
        free(t->splits[i].seen);
    free(t->splits);
    memset(t, 0, sizeof *t);
    t->epoch = -1;
    t->rank_splits = -1;
}

void dpp__core_unref(dpp_core_t *core)
{
    pthread_mutex_lock(&core->mu);
    int left = --core->refs;
    pthread_mutex_unlock(&core->mu);
    if (left > 0)
        return;
    while (core->ready) {
        rblock_t *b = core->ready;
        core->ready = b->next;
        free(b->data);
        free(b);
    }
    dpp__track_reset(&core->track[0]);
    dpp__track_reset(&core->track[1]);
    for (size_t i = 0; i < core->npool; i++)
        free(core->pool[i].p);
    free(core->credit_q);
    free(core->ack_q);
    free_names(core->dense_names, core->ndense);
    free_names(core->sparse_names, core->nsparse);
    free(core->label_name);
    free(core->dims);
    free(core->trims);
    for (unsigned i = 0; core->source_names && i < core->nsources; i++)
        free(core->source_names[i]);
    free(core->source_names);
    free(core->weighted);
    free(core->ones);
    explicit_bzero(core->token_key, sizeof core->token_key);
    pthread_cond_destroy(&core->cv);
    pthread_mutex_destroy(&core->mu);
    free(core);
}

dpp_core_t *dpp__core_new(void)
{
    dpp_core_t *core = calloc(1, sizeof *core);
    if (core == NULL)
        return NULL;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&core->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&core->mu, NULL);
    core->refs = 1;
    core->ready_tail = &core->ready;
    core->track[0].epoch = core->track[1].epoch = -1;
    core->track[0].rank_splits = core->track[1].rank_splits = -1;
    core->rank_splits = -1;
    core->pad_batches = -1;
    core->open_ns = dpp_now_ns();
    core->rank_records = -1;
    return core;
}

epoch_track_t *dpp__core_epoch(dpp_core_t *core, uint32_t epoch, int create)
{
    epoch_track_t *t = &core->track[epoch % 2];
    if (t->epoch == (int64_t)epoch)
        return t;
    if (!create || t->epoch > (int64_t)epoch)
        return NULL;
    dpp__track_reset(t);
    t->epoch = epoch;
    return t;
}

int64_t dpp__epoch_splits(const dpp_core_t *core, const epoch_track_t *t)
{
    /* a rank without records has none in any epoch, and no block says so */
    return core->rank_splits == 0 ? 0 : t->rank_splits;
}

unsigned dpp__core_window(const dpp_core_t *core)
{
    /* What the trainer holds is spent budget: a trainer hoarding batches
     * must not also have a full budget of splits leased ahead, or the
     * client would reach twice its budget. */
    size_t room = core->budget > core->trainer_bytes ? core->budget - core->trainer_bytes : 0;
    unsigned w = core->prefetch_splits;
    if (core->max_split_bytes > 0 && room / core->max_split_bytes < w)
        w = (unsigned)(room / core->max_split_bytes);
    return w ? w : 1;
}

split_track_t *dpp__track_split(epoch_track_t *t, uint32_t id)
{
    if (id >= t->nsplits) {
        size_t n = t->nsplits ? t->nsplits : 16;
        while (n <= id)
            n *= 2;
        split_track_t *s = realloc(t->splits, n * sizeof *s);
        if (s == NULL)
            return NULL;
        memset(s + t->nsplits, 0, (n - t->nsplits) * sizeof *s);
        for (size_t i = t->nsplits; i < n; i++)
            s[i].last_index = -1;
        t->splits = s;
        t->nsplits = n;
    }
    return &t->splits[id];
}

static void wake_io(dpp_core_t *core)
{
    if (!core->closed && core->wake)
        uv_async_send(core->wake);
}

int dpp__core_credit(dpp_core_t *core, uint64_t link_id)
{
    if (core->closed || link_id == 0)
        return 0;
    if (core->ncredit == core->credit_cap) {
        size_t cap = core->credit_cap ? core->credit_cap * 2 : 32;
        uint64_t *q = realloc(core->credit_q, cap * sizeof *q);
        if (q == NULL)
            return -ENOMEM;
        core->credit_q = q;
        core->credit_cap = cap;
    }
    core->credit_q[core->ncredit++] = link_id;
    wake_io(core);
    return 0;
}

int dpp__core_ack(dpp_core_t *core, uint32_t epoch, uint32_t split)
{
    if (core->nack == core->ack_cap) {
        size_t cap = core->ack_cap ? core->ack_cap * 2 : 32;
        uint32_t(*q)[2] = realloc(core->ack_q, cap * sizeof *q);
        if (q == NULL)
            return -ENOMEM;
        core->ack_q = q;
        core->ack_cap = cap;
    }
    core->ack_q[core->nack][0] = epoch;
    core->ack_q[core->nack][1] = split;
    core->nack++;
    wake_io(core);
    return 0;
}

/* A new buffer of cap bytes. One of megabytes (a block) starts on a 2 MiB
 * boundary and asks for transparent huge pages where the kernel grants
 * them on request (enabled = madvise, Debian's default): its first touch,
 * by recv() filling it, is then one page fault per 2 MiB instead of one
 * per 4 KiB, which on a virtual machine cost a consumer as much CPU as
 * everything else it did per block. */
static void *pool_alloc(size_t cap)
{
    enum { HUGE = 2u << 20 };
    if (cap < HUGE)
        return malloc(cap);
    void *p;
    if (posix_memalign(&p, HUGE, cap) != 0)
        return NULL;
    (void)madvise(p, cap & ~(size_t)(HUGE - 1), MADV_HUGEPAGE); /* advice only */
    return p;
}

void *dpp__pool_get(dpp_core_t *core, size_t size, size_t *cap)
{
    size_t best = core->npool;
    for (size_t i = 0; i < core->npool; i++) {
        size_t c = core->pool[i].cap;
        /* not more than twice the size: a big buffer stays for a big block */
        if (c >= size && c / 2 <= size && (best == core->npool || c < core->pool[best].cap))
            best = i;
    }
    if (best < core->npool) {
        void *p = core->pool[best].p;
        *cap = core->pool[best].cap;
        core->pool_bytes -= *cap;
        core->pool[best] = core->pool[--core->npool];
        return p;
    }
    *cap = size ? size : 1;
    return pool_alloc(*cap);
}

void dpp__pool_put(dpp_core_t *core, void *p, size_t cap)
{
    if (p == NULL)
        return;
    if (core->npool == DPP_CLIENT_POOL_SLOTS ||
        core->held_bytes + core->pool_bytes + cap > core->budget) {
        free(p);
        return;
    }
    core->pool[core->npool].p = p;
    core->pool[core->npool].cap = cap;
    core->npool++;
    core->pool_bytes += cap;
}

void dpp__core_unhold(dpp_core_t *core, size_t bytes)
{
    core->held_bytes -= bytes < core->held_bytes ? bytes : core->held_bytes;
    wake_io(core);
}

void dpp__core_fail(dpp_core_t *core, int err, const char *text)
{
    if (core->error == 0) {
        core->error = err;
        snprintf(core->error_text, sizeof core->error_text, "%s", text);
    }
    pthread_cond_broadcast(&core->cv);
}

void dpp__core_ask_verdict(dpp_core_t *core)
{
    if (core->verdict == VERDICT_NONE) {
        core->verdict = VERDICT_ASKED;
        wake_io(core);
    }
}

int dpp__state_failed(const char *state)
{
    return strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0;
}

static int copy_names(char ***out, char *const *names, size_t n)
{
    *out = calloc(n + 1, sizeof **out);
    if (*out == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (((*out)[i] = strdup(names[i])) == NULL)
            return -ENOMEM;
    return 0;
}

int dpp__core_set_schema(dpp_core_t *core, const Dpp__AttachReply *r)
{
    if (r->n_dense_dims != r->n_dense_names || r->n_dense_names + r->n_sparse_names == 0 ||
        r->n_dense_names + r->n_sparse_names > DPP_BLOCK_MAX_FEATURES || r->batch_size == 0)
        return DPP_EMSG;
    core->ndense = (unsigned)r->n_dense_names;
    core->nsparse = (unsigned)r->n_sparse_names;
    if (copy_names(&core->dense_names, r->dense_names, r->n_dense_names) ||
        copy_names(&core->sparse_names, r->sparse_names, r->n_sparse_names))
        return -ENOMEM;
    /* proto3 has no absent string: "" is a spec without a label */
    if (r->label_name && r->label_name[0] && (core->label_name = strdup(r->label_name)) == NULL)
        return -ENOMEM;
    if (r->n_sources > DPP_BLOCK_MAX_FEATURES ||
        copy_names(&core->source_names, r->sources, r->n_sources))
        return r->n_sources > DPP_BLOCK_MAX_FEATURES ? DPP_EMSG : -ENOMEM;
    core->nsources = (unsigned)r->n_sources;
    if ((core->dims = calloc(core->ndense + 1, sizeof *core->dims)) == NULL ||
        (core->weighted = calloc(core->nsparse + 1, sizeof *core->weighted)) == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < core->ndense; i++) {
        core->dims[i] = r->dense_dims[i];
        if (core->dims[i] == 0 || core->dims[i] > 1u << 20)
            return DPP_EMSG;
    }
    for (unsigned k = 0; k < core->nsparse && k < r->n_sparse_weighted; k++)
        core->weighted[k] = r->sparse_weighted[k] ? 1 : 0;
    core->shape.ndense = core->ndense;
    core->shape.nsparse = core->nsparse;
    core->shape.dims = core->dims;
    core->shape.weighted = core->weighted;
    core->shape.no_label = core->label_name == NULL;
    core->batch_size = r->batch_size;
    core->keep_remainder = r->keep_remainder;
    core->pad = r->remainder_pad;
    core->order_fastest = r->order_fastest;
    if ((core->ones = malloc(r->batch_size)) == NULL)
        return -ENOMEM;
    memset(core->ones, 1, r->batch_size);
    return 0;
}

void dpp__core_plan(dpp_core_t *core, const Dpp__AttachReply *r)
{
    if (strcmp(r->state, "indexing") == 0 || core->rank_splits >= 0)
        return;
    core->rank_splits = r->rank_splits_per_epoch;
    core->rank_records = r->rank_records_exact ? (int64_t)r->rank_records : -1;
    core->pad_batches = core->pad ? (int64_t)r->pad_batches : -1;
    pthread_cond_broadcast(&core->cv);
}

int dpp__core_take_rest(dpp_core_t *core, const Dpp__AttachReply *r)
{
    core->generation = r->generation;
    if (!r->rest || r->n_trim_skips != r->n_trim_seqs || r->n_trim_takes != r->n_trim_seqs)
        return 0;
    /* one plan per generation: what a reply says of it does not change */
    if (core->rest && core->rest_epoch == r->rest_epoch && core->ntrims == r->n_trim_seqs)
        return 0;
    struct dpp_trim_rows *t = calloc(r->n_trim_seqs + 1, sizeof *t);
    if (t == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < r->n_trim_seqs; i++)
        t[i] = (struct dpp_trim_rows){r->trim_seqs[i], r->trim_skips[i], r->trim_takes[i]};
    free(core->trims);
    core->trims = t;
    core->ntrims = r->n_trim_seqs;
    core->rest = 1;
    core->rest_epoch = r->rest_epoch;
    core->rest_pad_batches = r->rest_pad_batches;
    /* said of the epoch the session is in only (a client opening later
     * than it does not read it) */
    core->rest_rank_records =
        r->rank_records_exact && r->epoch == r->rest_epoch ? (int64_t)r->rest_rank_records : -1;
    return 0;
}

int64_t dpp__core_pad_batches(const dpp_core_t *core, uint32_t epoch)
{
    if (core->rest && epoch == core->rest_epoch)
        return core->rest_pad_batches;
    return core->pad_batches;
}

void dpp__core_take_key(dpp_core_t *core, const Dpp__AttachReply *r)
{
    if (r->token_key.len != sizeof core->token_key)
        return;
    memcpy(core->token_key, r->token_key.data, sizeof core->token_key);
    core->token_key_set = 1;
}
