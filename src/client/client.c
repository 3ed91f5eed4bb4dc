// SPDX-License-Identifier: Apache-2.0
// libdppclient, consumer side: open/attach, next, batch accessors, close.
// Nothing here aborts or exits: every failure is a negative return.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "client_internal.h"
#include "common/block.h"
#include "common/net.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"

/* Largest block the client accepts once decompressed (a decompression bomb
 * is refused before anything is allocated). */
#define MAX_RAW_BLOCK (256u << 20)

/* ---- core --------------------------------------------------------------- */

static void free_names(char **names, unsigned n)
{
    if (names)
        for (unsigned i = 0; i < n; i++)
            free(names[i]);
    free(names);
}

static void free_track(epoch_track_t *t)
{
    for (size_t i = 0; i < t->nsplits; i++)
        free(t->splits[i].seen);
    free(t->splits);
    memset(t, 0, sizeof *t);
    t->epoch = -1;
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
    free_track(&core->track[0]);
    free_track(&core->track[1]);
    free(core->credit_q);
    free(core->ack_q);
    free_names(core->dense_names, core->ndense);
    free_names(core->sparse_names, core->nsparse);
    free(core->dims);
    free(core->weighted);
    pthread_cond_destroy(&core->cv);
    pthread_mutex_destroy(&core->mu);
    free(core);
}

static dpp_core_t *core_new(void)
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
    core->rank_splits = -1;
    return core;
}

epoch_track_t *dpp__core_epoch(dpp_core_t *core, uint32_t epoch, int create)
{
    epoch_track_t *t = &core->track[epoch % 2];
    if (t->epoch == (int64_t)epoch)
        return t;
    if (!create || t->epoch > (int64_t)epoch)
        return NULL;
    free_track(t);
    t->epoch = epoch;
    return t;
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
    if (core->closed)
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

void dpp__core_fail(dpp_core_t *core, int err, const char *text)
{
    if (core->error == 0) {
        core->error = err;
        snprintf(core->error_text, sizeof core->error_text, "%s", text);
    }
    pthread_cond_broadcast(&core->cv);
}

/* ---- open / close ------------------------------------------------------- */

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

static int attach(dpp_client_t *c, const char *master, int timeout_ms,
                  struct sockaddr_storage *master_ss, Dpp__AttachReply **reply)
{
    dpp_sync_conn_t conn;
    int rc = dpp_addr_parse(master, master_ss);
    if (rc)
        return rc;
    rc = dpp_sync_connect(&conn, master, "client", timeout_ms);
    if (rc)
        return rc;
    Dpp__AttachRequest req = DPP__ATTACH_REQUEST__INIT;
    req.session_id = c->session;
    req.rank = c->rank;
    uint16_t type;
    ProtobufCMessage *m = NULL;
    rc = dpp_sync_call(&conn, DPP_MSG_ATTACH, &req.base, &type, &m, timeout_ms);
    dpp_sync_close(&conn);
    if (rc)
        return rc;
    if (type == DPP_MSG_ATTACH_REPLY) {
        *reply = (Dpp__AttachReply *)m;
        return 0;
    }
    rc = type == DPP_MSG_ERROR ? ((Dpp__Error *)m)->code : DPP_EMSGTYPE;
    protobuf_c_message_free_unpacked(m, NULL);
    return rc < 0 ? rc : DPP_EMSG;
}

int dpp_client_open(dpp_client_t **out, const char *master_addr, const char *session,
                    unsigned rank, int timeout_ms)
{
    *out = NULL;
    if (master_addr == NULL || session == NULL || strlen(session) >= 24)
        return session && strlen(session) >= 24 ? DPP_ENOSESSION : DPP_EINVAL;
    dpp_client_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    Dpp__AttachReply *r = NULL;
    int rc = -ENOMEM;
    if ((c->core = core_new()) == NULL)
        goto fail;
    snprintf(c->session, sizeof c->session, "%s", session);
    c->rank = rank;
    struct sockaddr_storage master_ss;
    rc = attach(c, master_addr, timeout_ms, &master_ss, &r);
    if (rc)
        goto fail;
    rc = DPP_EMSG;
    if (r->n_dense_dims != r->n_dense_names || r->n_dense_names + r->n_sparse_names == 0 ||
        r->n_dense_names + r->n_sparse_names > DPP_BLOCK_MAX_FEATURES)
        goto fail;
    dpp_core_t *core = c->core;
    /* A failed session still opens, so that the trainer can read why with
     * dpp_client_error() after next() reports DPP_EFAILED. */
    if (strcmp(r->state, "failed") == 0)
        dpp__core_fail(core, DPP_EFAILED, r->error);
    core->ndense = (unsigned)r->n_dense_names;
    core->nsparse = (unsigned)r->n_sparse_names;
    rc = -ENOMEM;
    if (copy_names(&core->dense_names, r->dense_names, r->n_dense_names) ||
        copy_names(&core->sparse_names, r->sparse_names, r->n_sparse_names))
        goto fail;
    if ((core->dims = calloc(core->ndense + 1, sizeof *core->dims)) == NULL ||
        (core->weighted = calloc(core->nsparse + 1, sizeof *core->weighted)) == NULL)
        goto fail;
    for (unsigned k = 0; k < core->nsparse && k < r->n_sparse_weighted; k++)
        core->weighted[k] = r->sparse_weighted[k] ? 1 : 0;
    core->shape.ndense = core->ndense;
    core->shape.nsparse = core->nsparse;
    core->shape.dims = core->dims;
    core->shape.weighted = core->weighted;
    for (unsigned i = 0; i < core->ndense; i++) {
        core->dims[i] = r->dense_dims[i];
        if (core->dims[i] == 0 || core->dims[i] > 1u << 20) {
            rc = DPP_EMSG;
            goto fail;
        }
    }
    c->epochs = r->epochs;
    c->batch_size = r->batch_size;
    if (strcmp(r->state, "indexing") != 0)
        core->rank_splits = r->rank_splits_per_epoch;
    rc = dpp__io_start(c, &master_ss, r->workers, r->n_workers);
    if (rc)
        goto fail;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    *out = c;
    return 0;

fail:
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    if (c->core)
        dpp__core_unref(c->core);
    free(c);
    return rc;
}

void dpp_client_close(dpp_client_t *c)
{
    if (c == NULL)
        return;
    dpp__io_stop(c->io);
    dpp__core_unref(c->core);
    free(c);
}

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

unsigned dpp_client_dense_dim(const dpp_client_t *c, unsigned i)
{
    return i < c->core->ndense ? c->core->dims[i] : 0;
}

/* ---- next --------------------------------------------------------------- */

/* Unlinks the first ready block of `epoch`. Caller holds core->mu. */
static rblock_t *take_ready(dpp_core_t *core, uint32_t epoch)
{
    for (rblock_t **pp = &core->ready; *pp; pp = &(*pp)->next) {
        rblock_t *b = *pp;
        if (b->epoch != epoch)
            continue;
        *pp = b->next;
        if (core->ready_tail == &b->next)
            core->ready_tail = pp;
        core->nready--;
        return b;
    }
    return NULL;
}

/* Turns a received block into a batch: decompress, validate, wrap. */
static int make_batch(dpp_client_t *c, rblock_t *b, dpp_batch_t **out)
{
    dpp_core_t *core = c->core;
    uint8_t *raw = b->data;
    size_t raw_len = b->len;
    if (b->codec == 1) {
        unsigned long long n = ZSTD_getFrameContentSize(b->data, b->len);
        if (n != b->raw_size || n > MAX_RAW_BLOCK)
            return DPP_EBLOCK;
        if ((raw = malloc(n ? n : 1)) == NULL)
            return -ENOMEM;
        size_t got = ZSTD_decompress(raw, n, b->data, b->len);
        if (ZSTD_isError(got) || got != n) {
            free(raw);
            return DPP_EBLOCK;
        }
        raw_len = n;
    } else if (b->codec != 0 || b->raw_size != b->len) {
        return DPP_EBLOCK;
    }
    dpp_block_info_t info;
    int rc = dpp_block_parse(raw, raw_len, &core->shape, &info);
    dpp_batch_t *batch = rc ? NULL : calloc(1, sizeof *batch);
    if (batch == NULL) {
        if (raw != b->data)
            free(raw);
        return rc ? rc : -ENOMEM;
    }
    if (raw != b->data)
        free(b->data);
    b->data = NULL;
    batch->core = core;
    batch->buf = raw;
    batch->rows = info.rows;
    batch->epoch = b->epoch;
    batch->link_id = b->link_id;
    *out = batch;
    return 0;
}

static void add_ms(struct timespec *ts, int ms)
{
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int dpp_client_next(dpp_client_t *c, dpp_batch_t **out, int timeout_ms)
{
    dpp_core_t *core = c->core;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    add_ms(&deadline, timeout_ms < 0 ? 0 : timeout_ms);
    *out = NULL;
    pthread_mutex_lock(&core->mu);
    for (;;) {
        if (c->session_ended) {
            pthread_mutex_unlock(&core->mu);
            return DPP_SESSION_END;
        }
        if (core->error) {
            int err = core->error;
            pthread_mutex_unlock(&core->mu);
            return err;
        }
        epoch_track_t *t = dpp__core_epoch(core, c->epoch, 1);
        if (core->rank_splits >= 0 && t->done_splits >= (uint64_t)core->rank_splits) {
            free_track(t); /* frees the slot for epoch + 2 */
            c->epoch++;
            core->cur_epoch = c->epoch;
            if (c->epoch >= c->epochs)
                c->session_ended = 1;
            pthread_mutex_unlock(&core->mu);
            return DPP_EPOCH_END;
        }
        rblock_t *b = take_ready(core, c->epoch);
        if (b == NULL) {
            if (timeout_ms < 0) {
                pthread_cond_wait(&core->cv, &core->mu);
            } else if (pthread_cond_timedwait(&core->cv, &core->mu, &deadline) == ETIMEDOUT) {
                pthread_mutex_unlock(&core->mu);
                return DPP_ETIMEDOUT;
            }
            continue;
        }
        split_track_t *st = dpp__track_split(t, b->split);
        int rc = st ? 0 : -ENOMEM;
        if (st) {
            st->delivered++;
            if (st->last_index >= 0 && st->delivered == (uint64_t)st->last_index + 1 &&
                !st->done) {
                st->done = 1;
                t->done_splits++;
                rc = dpp__core_ack(core, b->epoch, b->split);
            }
        }
        if (rc == 0 && b->rows == 0) {
            /* an empty split's marker block: nothing for the trainer */
            rc = dpp__core_credit(core, b->link_id);
            free(b->data);
            free(b);
            if (rc == 0)
                continue;
            pthread_mutex_unlock(&core->mu);
            return rc;
        }
        pthread_mutex_unlock(&core->mu);
        if (rc == 0)
            rc = make_batch(c, b, out);
        if (rc) {
            pthread_mutex_lock(&core->mu);
            dpp__core_credit(core, b->link_id);
            pthread_mutex_unlock(&core->mu);
            free(b->data);
            free(b);
            return rc;
        }
        free(b);
        pthread_mutex_lock(&core->mu);
        core->refs++;
        pthread_mutex_unlock(&core->mu);
        return DPP_BATCH;
    }
}

/* ---- batches ------------------------------------------------------------ */

size_t dpp_batch_rows(const dpp_batch_t *b)
{
    return b->rows;
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

int dpp_batch_dense(const dpp_batch_t *b, const char *name, const float **data, unsigned *dim)
{
    int i = find_name(b->core->dense_names, b->core->ndense, name);
    if (i < 0)
        return DPP_ENOFEATURE;
    *data = dpp_block_dense(b->buf, (unsigned)i);
    *dim = b->core->dims[i];
    return 0;
}

int dpp_batch_sparse(const dpp_batch_t *b, const char *name, const int64_t **values,
                     const int32_t **lengths, size_t *nvalues)
{
    int k = find_name(b->core->sparse_names, b->core->nsparse, name);
    if (k < 0)
        return DPP_ENOFEATURE;
    *lengths = dpp_block_lengths(b->buf, &b->core->shape, (unsigned)k);
    *values = dpp_block_values(b->buf, &b->core->shape, (unsigned)k, nvalues);
    return 0;
}

int dpp_batch_sparse_weights(const dpp_batch_t *b, const char *name, const float **weights)
{
    int k = find_name(b->core->sparse_names, b->core->nsparse, name);
    if (k < 0 || !b->core->weighted[k])
        return DPP_ENOFEATURE;
    *weights = dpp_block_weights(b->buf, &b->core->shape, (unsigned)k);
    return 0;
}

int dpp_batch_labels(const dpp_batch_t *b, const float **labels)
{
    *labels = dpp_block_labels(b->buf);
    return 0;
}

void dpp_batch_release(dpp_batch_t *b)
{
    if (b == NULL)
        return;
    dpp_core_t *core = b->core;
    pthread_mutex_lock(&core->mu);
    /* A lost credit only slows that worker link; it reconnects fresh. */
    dpp__core_credit(core, b->link_id);
    pthread_mutex_unlock(&core->mu);
    free(b->buf);
    free(b);
    dpp__core_unref(core);
}
