// SPDX-License-Identifier: Apache-2.0
// libdppclient, consumer side: open/attach, next, batch accessors, close.
// Nothing here aborts or exits: every failure is a negative return.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "client_internal.h"
#include "format/block.h"
#include "base/crc32c.h"
#include "wire/net.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"

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
    free_track(&core->track[0]);
    free_track(&core->track[1]);
    for (size_t i = 0; i < core->npool; i++)
        free(core->pool[i].p);
    free(core->credit_q);
    free(core->ack_q);
    free_names(core->dense_names, core->ndense);
    free_names(core->sparse_names, core->nsparse);
    free(core->dims);
    free(core->weighted);
    free(core->ones);
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
    free_track(t);
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
    unsigned w = core->prefetch_splits;
    if (core->max_split_bytes > 0 && core->budget / core->max_split_bytes < w)
        w = (unsigned)(core->budget / core->max_split_bytes);
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
    return malloc(*cap);
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

/* ---- open / close ------------------------------------------------------- */

void dpp_client_options_init(dpp_client_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->prefetch = DPP_CLIENT_DEFAULT_PREFETCH;
    o->memory_budget = DPP_CLIENT_DEFAULT_BUDGET;
    o->connect_timeout_ms = DPP_CLIENT_DEFAULT_TIMEOUT_MS;
    o->prefetch_splits = DPP_CLIENT_DEFAULT_PREFETCH_SPLITS;
}

/* ---- checkpoint tokens ----------------------------------------------------
 * 64 bytes, little-endian: magic "DPT1", version u16 (1), flags u16 (0),
 * session id (24 bytes, NUL-padded), then u32 rank, epoch, split position,
 * block index, row in that block, batches handed out in the epoch, splits
 * of the rank in the epoch (0xffffffff: not known yet), reserved (0), and
 * the CRC32C of the 60 bytes before it. */

#define TOKEN_MAGIC "DPT1"
#define TOKEN_UNKNOWN 0xffffffffu

typedef struct token {
    char session[24];
    uint32_t rank, epoch, seq, index, row, batches, rank_splits;
} token_t;

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void token_pack(const token_t *t, uint8_t *out)
{
    memset(out, 0, DPP_CHECKPOINT_SIZE);
    memcpy(out, TOKEN_MAGIC, 4);
    out[4] = 1; /* version */
    memcpy(out + 8, t->session, strnlen(t->session, sizeof t->session));
    const uint32_t v[] = {t->rank, t->epoch, t->seq, t->index, t->row, t->batches, t->rank_splits};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        put32(out + 32 + 4 * i, v[i]);
    put32(out + 60, dpp_crc32c(0, out, 60));
}

/* DPP_ETOKEN unless buf is an intact token of this library's version. */
static int token_unpack(const void *buf, size_t len, token_t *t)
{
    const uint8_t *p = buf;
    if (buf == NULL || len != DPP_CHECKPOINT_SIZE || memcmp(p, TOKEN_MAGIC, 4) != 0 || p[4] != 1 ||
        p[5] || p[6] || p[7] || dpp_load_le32(p + 60) != dpp_crc32c(0, p, 60) ||
        memchr(p + 8, 0, 24) == NULL || p[8] == 0)
        return DPP_ETOKEN;
    memcpy(t->session, p + 8, 24);
    uint32_t *v[] = {&t->rank, &t->epoch,   &t->seq,        &t->index,
                     &t->row,  &t->batches, &t->rank_splits};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        *v[i] = dpp_load_le32(p + 32 + 4 * i);
    return 0;
}

int dpp_client_checkpoint(const dpp_client_t *c, void *buf, size_t len)
{
    if (buf == NULL || len < DPP_CHECKPOINT_SIZE || c->core->order_fastest)
        return DPP_EINVAL;
    token_t t = {.rank = c->rank, .epoch = c->epoch, .batches = (uint32_t)c->epoch_batches_out};
    memcpy(t.session, c->session, sizeof t.session);
    if (c->cur.raw) { /* inside a block: the next batch starts at row_off */
        t.seq = c->cur.seq;
        t.index = c->cur.index;
        t.row = c->cur.row_off;
    } else {
        t.seq = c->next_seq;
        t.index = c->next_index;
        t.row = c->skip_rows;
    }
    dpp_core_t *core = c->core;
    pthread_mutex_lock(&core->mu);
    epoch_track_t *tr = dpp__core_epoch(core, c->epoch, 0);
    int64_t n = tr ? dpp__epoch_splits(core, tr) : core->rank_splits == 0 ? 0 : -1;
    pthread_mutex_unlock(&core->mu);
    t.rank_splits = n >= 0 ? (uint32_t)n : TOKEN_UNKNOWN;
    if (c->epoch >= c->epochs) { /* the session is over: nothing is left */
        t.epoch = c->epochs;
        t.seq = t.index = t.row = 0;
    }
    token_pack(&t, buf);
    return DPP_CHECKPOINT_SIZE;
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

static int attach(dpp_client_t *c, const char *master, int timeout_ms, const token_t *resume,
                  struct sockaddr_storage *master_ss, Dpp__AttachReply **reply)
{
    dpp_sync_conn_t conn;
    int rc = dpp_addr_parse(master, master_ss);
    if (rc)
        return rc;
    rc = dpp_sync_connect(&conn, master, "client", timeout_ms, &c->auth);
    if (rc)
        return rc;
    Dpp__AttachRequest req = DPP__ATTACH_REQUEST__INIT;
    req.session_id = c->session;
    req.rank = c->rank;
    req.prefetch_splits = c->core->prefetch_splits;
    if (resume) {
        req.resume = 1;
        req.resume_epoch = resume->epoch;
        req.resume_seq = resume->seq;
    }
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

void dpp__core_plan(dpp_core_t *core, const Dpp__AttachReply *r)
{
    if (strcmp(r->state, "indexing") == 0 || core->rank_splits >= 0)
        return;
    core->rank_splits = r->rank_splits_per_epoch;
    core->rank_records = r->rank_records_exact ? (int64_t)r->rank_records : -1;
    core->pad_batches = core->pad ? (int64_t)r->pad_batches : -1;
    pthread_cond_broadcast(&core->cv);
}

static int set_schema(dpp_core_t *core, const Dpp__AttachReply *r)
{
    if (r->n_dense_dims != r->n_dense_names || r->n_dense_names + r->n_sparse_names == 0 ||
        r->n_dense_names + r->n_sparse_names > DPP_BLOCK_MAX_FEATURES || r->batch_size == 0)
        return DPP_EMSG;
    core->ndense = (unsigned)r->n_dense_names;
    core->nsparse = (unsigned)r->n_sparse_names;
    if (copy_names(&core->dense_names, r->dense_names, r->n_dense_names) ||
        copy_names(&core->sparse_names, r->sparse_names, r->n_sparse_names))
        return -ENOMEM;
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
    core->batch_size = r->batch_size;
    core->keep_remainder = r->keep_remainder;
    core->pad = r->remainder_pad;
    core->order_fastest = r->order_fastest;
    if ((core->ones = malloc(r->batch_size)) == NULL)
        return -ENOMEM;
    memset(core->ones, 1, r->batch_size);
    return 0;
}

/* Puts a client opened from a checkpoint token at the token's position. */
static int start_at(dpp_client_t *c, const token_t *t)
{
    dpp_core_t *core = c->core;
    if (t->epoch >= c->epochs) { /* taken after the last batch */
        c->epoch = c->epochs;
        c->session_ended = 1;
        core->cur_epoch = c->epoch;
        return 0;
    }
    c->epoch = t->epoch;
    core->cur_epoch = t->epoch;
    c->next_seq = t->seq;
    c->next_index = t->index;
    c->skip_rows = t->row;
    c->epoch_batches_out = t->batches;
    if (t->rank_splits != TOKEN_UNKNOWN) {
        epoch_track_t *tr = dpp__core_epoch(core, t->epoch, 1);
        tr->rank_splits = t->rank_splits;
    }
    return 0;
}

int dpp_client_open_opts(dpp_client_t **out, const dpp_client_options_t *o)
{
    *out = NULL;
    token_t tok, *resume = NULL;
    if (o == NULL || o->master == NULL || o->master[0] == '\0' || o->prefetch == 0 ||
        o->prefetch > 1024 || o->memory_budget == 0 || o->prefetch_splits > 1024 ||
        o->max_block_mb > 4096)
        return DPP_EINVAL;
    if (o->resume_token) {
        int rc = token_unpack(o->resume_token, o->resume_token_len, &tok);
        if (rc)
            return rc;
        if ((o->session && strcmp(o->session, tok.session) != 0) || tok.rank != o->rank)
            return DPP_ETOKEN; /* another session's or rank's position */
        resume = &tok;
    }
    const char *session = resume ? tok.session : o->session;
    if (session == NULL || session[0] == '\0')
        return DPP_EINVAL;
    if (strlen(session) >= 24)
        return DPP_ENOSESSION;
    dpp_client_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    Dpp__AttachReply *r = NULL;
    int rc = -ENOMEM;
    if ((c->core = core_new()) == NULL || (c->zctx = ZSTD_createDCtx()) == NULL)
        goto fail;
    if (o->token) {
        /* the token itself; without it, the file $DPP_TOKEN_FILE names */
        char *t = strdup(o->token);
        if (t == NULL)
            goto fail;
        c->auth.token = (const uint8_t *)t;
        c->auth.len = strlen(t);
    } else {
        char why[256];
        if ((rc = dpp_auth_load(&c->auth, NULL, why, sizeof why)) != 0) {
            fprintf(stderr, "libdppclient: %s\n", why);
            goto fail;
        }
    }
    snprintf(c->session, sizeof c->session, "%s", session);
    c->rank = o->rank;
    dpp_core_t *core = c->core;
    core->prefetch = o->prefetch;
    core->prefetch_splits =
        o->prefetch_splits ? o->prefetch_splits : DPP_CLIENT_DEFAULT_PREFETCH_SPLITS;
    core->max_raw = (size_t)(o->max_block_mb ? o->max_block_mb : DPP_CLIENT_DEFAULT_MAX_BLOCK_MB)
                    << 20;
    /* A zstd frame may ask for a window larger than its content: bound the
     * decoder's memory by the largest block accepted, too. */
    unsigned wlog = 10;
    while (wlog < 31 && ((size_t)1 << wlog) < core->max_raw)
        wlog++;
    ZSTD_DCtx_setParameter(c->zctx, ZSTD_d_windowLogMax, (int)wlog);
    core->budget = o->memory_budget;
    struct sockaddr_storage master_ss;
    int timeout = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : DPP_CLIENT_DEFAULT_TIMEOUT_MS;
    /* A master that is not up yet (or restarting) is waited for until the
     * timeout, with backoff; any answer it gives ends the wait. */
    int64_t deadline = dpp_now_ms() + timeout;
    unsigned backoff_ms = 100;
    for (;;) {
        int64_t left = deadline - dpp_now_ms();
        rc = attach(c, o->master, left > 0 ? (int)left : 1, resume, &master_ss, &r);
        if (rc != -ECONNREFUSED && rc != DPP_ECLOSED && rc != -ECONNRESET)
            break;
        if (dpp_now_ms() + (int64_t)backoff_ms >= deadline)
            break;
        struct timespec ts = {backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        backoff_ms = backoff_ms >= 500 ? 1000 : backoff_ms * 2;
    }
    if (rc)
        goto fail;
    if (o->world_size && o->world_size != r->consumers) {
        rc = DPP_ERANK;
        goto fail;
    }
    if ((rc = set_schema(core, r)) != 0)
        goto fail;
    if ((rc = dpp_block_builder_init(&c->assembly, &core->shape)) != 0)
        goto fail;
    /* A failed session still opens, so that the trainer can read why with
     * dpp_client_error() after next() reports DPP_EFAILED. */
    if (strcmp(r->state, "failed") == 0)
        dpp__core_fail(core, DPP_EFAILED, r->error);
    c->epochs = r->epochs;
    c->batch_size = r->batch_size;
    dpp__core_plan(core, r);
    if (resume && (rc = start_at(c, resume)) != 0)
        goto fail;
    rc = dpp__io_start(c, &master_ss, r->workers, r->n_workers);
    if (rc)
        goto fail;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    *out = c;
    return 0;

fail:
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    dpp_block_builder_close(&c->assembly);
    ZSTD_freeDCtx(c->zctx);
    if (c->core)
        dpp__core_unref(c->core);
    free((void *)c->auth.token);
    free(c);
    return rc;
}

int dpp_client_open(dpp_client_t **out, const char *master_addr, const char *session, unsigned rank,
                    int timeout_ms)
{
    dpp_client_options_t o;
    dpp_client_options_init(&o);
    o.master = master_addr;
    o.session = session;
    o.rank = rank;
    if (timeout_ms > 0)
        o.connect_timeout_ms = timeout_ms;
    return dpp_client_open_opts(out, &o);
}

void dpp_client_close(dpp_client_t *c)
{
    if (c == NULL)
        return;
    dpp__io_stop(c->io);
    free(c->cur.raw);
    dpp_block_builder_close(&c->assembly);
    ZSTD_freeDCtx(c->zctx);
    dpp__core_unref(c->core);
    free((void *)c->auth.token);
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
        int64_t n = core->pad_batches;
        pthread_mutex_unlock(&core->mu);
        return n;
    }
    if (core->rank_records >= 0) {
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

/* Counts a block as taken; acknowledges its split when every block of it
 * has been taken. Caller holds core->mu. */
static int account_taken(dpp_core_t *core, epoch_track_t *t, const rblock_t *b)
{
    split_track_t *st = dpp__track_split(t, b->split);
    if (st == NULL)
        return -ENOMEM;
    st->delivered++;
    if (st->last_index >= 0 && st->delivered == (uint64_t)st->last_index + 1 && !st->done) {
        st->done = 1;
        t->done_splits++;
        return dpp__core_ack(core, b->epoch, b->split);
    }
    return 0;
}

/* Drops a block the consumer will not use. Caller holds core->mu. */
static void discard(dpp_core_t *core, rblock_t *b)
{
    dpp__core_credit(core, b->link_id);
    dpp__core_unhold(core, b->len);
    dpp__pool_put(core, b->data, b->cap);
    free(b);
}

/* order deterministic: unlinks the block at the consumer's position, (split
 * position next_seq, block next_index) of `epoch`, if it has arrived. Blocks
 * before that position (a resumed client's, delivered before its
 * checkpoint) are counted as taken and dropped on the way. Caller holds
 * core->mu. */
static int take_next(dpp_client_t *c, epoch_track_t *t, rblock_t **out)
{
    dpp_core_t *core = c->core;
    *out = NULL;
    for (rblock_t **pp = &core->ready; *pp;) {
        rblock_t *b = *pp;
        int before = b->seq < c->next_seq || (b->seq == c->next_seq && b->index < c->next_index);
        if (b->epoch != c->epoch ||
            (!before && (b->seq != c->next_seq || b->index != c->next_index))) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        if (core->ready_tail == &b->next)
            core->ready_tail = pp;
        core->nready--;
        if (!before) {
            *out = b;
            return 0;
        }
        int rc = account_taken(core, t, b);
        discard(core, b);
        if (rc)
            return rc;
    }
    return 0;
}

/* Decompresses and validates a received block into c->cur. Takes b's
 * memory either way. Called without core->mu. */
static int load_block(dpp_client_t *c, rblock_t *b)
{
    dpp_core_t *core = c->core;
    uint8_t *raw = b->data;
    size_t raw_len = b->len, raw_cap = b->cap;
    int rc = 0;
    if (b->codec == 1) {
        if ((rc = dpp_block_zstd_check(b->data, b->len, b->raw_size, core->max_raw)) == 0) {
            size_t n = (size_t)b->raw_size;
            pthread_mutex_lock(&core->mu);
            raw = dpp__pool_get(core, n, &raw_cap);
            pthread_mutex_unlock(&core->mu);
            if (raw == NULL)
                rc = -ENOMEM;
            else
                rc = dpp_block_zstd_decompress(c->zctx, b->data, b->len, raw, n);
            raw_len = n;
        }
    } else if (b->codec != 0 || b->raw_size != b->len) {
        rc = DPP_EBLOCK;
    }
    dpp_block_info_t info;
    if (rc == 0)
        rc = dpp_block_parse(raw, raw_len, &core->shape, &info);
    pthread_mutex_lock(&core->mu);
    core->bytes_raw += raw_len;
    dpp__core_unhold(core, b->len);
    if (raw != b->data) /* the compressed copy goes back, the raw one is held */
        dpp__pool_put(core, b->data, b->cap);
    if (rc) {
        dpp__core_credit(core, b->link_id);
        dpp__pool_put(core, raw, raw_cap);
    } else {
        core->held_bytes += raw_len;
    }
    pthread_mutex_unlock(&core->mu);
    if (rc) {
        free(b);
        return rc;
    }
    c->cur.raw = raw;
    c->cur.raw_len = raw_len;
    c->cur.raw_cap = raw_cap;
    c->cur.rows = info.rows;
    c->cur.row_off = 0;
    c->cur.epoch = b->epoch;
    c->cur.seq = b->seq;
    c->cur.index = b->index;
    c->cur.link_id = b->link_id;
    if (c->skip_rows) { /* resumed inside this block */
        c->cur.row_off = c->skip_rows < info.rows ? c->skip_rows : info.rows;
        c->skip_rows = 0;
    }
    free(b);
    return 0;
}

static dpp_batch_t *new_batch(dpp_client_t *c, uint8_t *buf, size_t bytes, size_t cap, size_t rows,
                              uint64_t link_id)
{
    dpp_batch_t *batch = calloc(1, sizeof *batch);
    if (batch == NULL)
        return NULL;
    batch->core = c->core;
    batch->buf = buf;
    batch->bytes = bytes;
    batch->cap = cap;
    batch->rows = batch->valid_rows = rows;
    batch->mask = c->core->ones;
    batch->epoch = c->epoch;
    batch->link_id = link_id;
    return batch;
}

/* Finishes the assembled rows as a batch. */
static int finish_assembly(dpp_client_t *c, dpp_batch_t **out)
{
    uint8_t *buf;
    size_t len, rows = c->assembly.rows;
    int rc = dpp_block_builder_finish(&c->assembly, &buf, &len);
    if (rc)
        return rc;
    dpp_batch_t *batch = new_batch(c, buf, len, len, rows, 0);
    if (batch == NULL) {
        free(buf);
        return -ENOMEM;
    }
    pthread_mutex_lock(&c->core->mu);
    c->core->refs++;
    c->core->held_bytes += len;
    c->core->trainer_bytes += len;
    dpp__core_unhold(c->core, c->assembly_bytes);
    pthread_mutex_unlock(&c->core->mu);
    c->assembly_bytes = 0;
    *out = batch;
    return 0;
}

/* Moves rows from the current block toward a batch: the whole block when it
 * is exactly a batch and nothing is half assembled (no copy), else as many
 * rows as the batch still needs (copied). Returns 1 with *out when a batch
 * is complete, 0 to go on, or an error. */
static int cut_rows(dpp_client_t *c, dpp_batch_t **out)
{
    dpp_core_t *core = c->core;
    cur_block_t *cur = &c->cur;
    if (c->assembly.rows == 0 && cur->row_off == 0 && cur->rows == c->batch_size) {
        dpp_batch_t *batch =
            new_batch(c, cur->raw, cur->raw_len, cur->raw_cap, cur->rows, cur->link_id);
        if (batch == NULL)
            return -ENOMEM;
        pthread_mutex_lock(&core->mu);
        core->refs++;
        core->trainer_bytes += batch->bytes;
        pthread_mutex_unlock(&core->mu);
        memset(cur, 0, sizeof *cur);
        c->stats.batches_zero_copy++;
        *out = batch;
        return 1;
    }
    size_t want = c->batch_size - c->assembly.rows;
    size_t take = cur->rows - cur->row_off < want ? cur->rows - cur->row_off : want;
    size_t before = dpp_block_builder_size(&c->assembly);
    int rc =
        dpp_block_builder_append_block(&c->assembly, cur->raw, cur->row_off, cur->row_off + take);
    if (rc)
        return rc;
    size_t grown = dpp_block_builder_size(&c->assembly) - before;
    cur->row_off += (uint32_t)take;
    pthread_mutex_lock(&core->mu);
    core->held_bytes += grown;
    c->assembly_bytes += grown;
    if (cur->row_off == cur->rows) { /* the block is spent: its worker may send another */
        dpp__core_credit(core, cur->link_id);
        dpp__core_unhold(core, cur->raw_len);
        dpp__pool_put(core, cur->raw, cur->raw_cap);
        memset(cur, 0, sizeof *cur);
    }
    pthread_mutex_unlock(&core->mu);
    if (c->assembly.rows == c->batch_size)
        return finish_assembly(c, out) == 0 ? 1 : -ENOMEM;
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

/* remainder "pad": completes the batch being assembled (or an empty one)
 * with empty rows (label 0, dense 0, no ids), which its mask marks 0. */
static int finish_padded(dpp_client_t *c, dpp_batch_t **out)
{
    dpp_core_t *core = c->core;
    size_t valid = c->assembly.rows, width = 0;
    for (unsigned i = 0; i < core->ndense; i++)
        width += core->dims[i];
    float *zeros = calloc(width + 1, sizeof *zeros);
    size_t *lens = calloc(core->nsparse + 1, sizeof *lens);
    uint8_t *mask = malloc(c->batch_size);
    int rc = zeros && lens && mask ? 0 : -ENOMEM;
    while (rc == 0 && c->assembly.rows < c->batch_size)
        rc = dpp_block_builder_append(&c->assembly, 0.0f, zeros, NULL, NULL, lens);
    if (rc == 0)
        rc = finish_assembly(c, out);
    free(zeros);
    free(lens);
    if (rc) {
        free(mask);
        return rc;
    }
    memset(mask, 1, valid);
    memset(mask + valid, 0, c->batch_size - valid);
    (*out)->valid_rows = valid;
    (*out)->mask = mask;
    c->stats.rows_padded += c->batch_size - valid;
    return 0;
}

/* The epoch's blocks are all taken: hands out a kept remainder or the
 * padded batches, else ends the epoch. Caller holds core->mu; returns with
 * it released. */
static int end_epoch(dpp_client_t *c, epoch_track_t *t, dpp_batch_t **out)
{
    dpp_core_t *core = c->core;
    if (core->pad && (c->assembly.rows > 0 || (int64_t)c->epoch_batches_out < core->pad_batches)) {
        pthread_mutex_unlock(&core->mu);
        int rc = finish_padded(c, out);
        return rc ? rc : DPP_BATCH;
    }
    if (c->assembly.rows > 0 && core->keep_remainder && !c->epoch_end_pending) {
        pthread_mutex_unlock(&core->mu);
        int rc = finish_assembly(c, out);
        if (rc)
            return rc;
        c->epoch_end_pending = 1;
        return DPP_BATCH;
    }
    if (c->assembly.rows > 0) { /* remainder "drop": fewer than batch_size rows */
        uint8_t *buf;
        size_t len;
        if (dpp_block_builder_finish(&c->assembly, &buf, &len) == 0)
            free(buf);
        dpp__core_unhold(core, c->assembly_bytes);
        c->assembly_bytes = 0;
    }
    free_track(t); /* frees the slot for epoch + 2 */
    c->epoch++;
    c->epoch_end_pending = 0;
    c->epoch_batches_out = 0;
    c->next_seq = c->next_index = 0;
    core->cur_epoch = c->epoch;
    if (c->epoch >= c->epochs)
        c->session_ended = 1;
    pthread_mutex_unlock(&core->mu);
    return DPP_EPOCH_END;
}

static int next_locked(dpp_client_t *c, dpp_batch_t **out, int timeout_ms,
                       const struct timespec *deadline)
{
    dpp_core_t *core = c->core;
    for (;;) {
        if (c->cur.raw) {
            pthread_mutex_unlock(&core->mu);
            int rc = cut_rows(c, out);
            if (rc == 1)
                return DPP_BATCH;
            if (rc < 0)
                return rc;
            pthread_mutex_lock(&core->mu);
            continue;
        }
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
        int64_t n = dpp__epoch_splits(core, t);
        int ended = n >= 0 && (core->order_fastest ? t->done_splits >= (uint64_t)n
                                                   : c->next_seq >= (uint64_t)n);
        /* padding needs the plan's batch count, which the next attach brings */
        if (ended && !(core->pad && core->pad_batches < 0))
            return end_epoch(c, t, out);
        rblock_t *b = NULL;
        if (ended) {
            /* wait below */
        } else if (core->order_fastest) {
            b = take_ready(core, c->epoch);
        } else {
            int rc = take_next(c, t, &b);
            if (rc) {
                pthread_mutex_unlock(&core->mu);
                return rc;
            }
        }
        if (b == NULL) {
            if (timeout_ms < 0) {
                pthread_cond_wait(&core->cv, &core->mu);
            } else if (pthread_cond_timedwait(&core->cv, &core->mu, deadline) == ETIMEDOUT) {
                pthread_mutex_unlock(&core->mu);
                return DPP_ETIMEDOUT;
            }
            continue;
        }
        if (!core->order_fastest) {
            c->next_index++;
            if (b->last) {
                c->next_seq++;
                c->next_index = 0;
            }
        }
        int rc = account_taken(core, t, b);
        if (rc || b->rows == 0) { /* rows 0: a split's end marker, nothing for the trainer */
            discard(core, b);
            if (rc == 0)
                continue;
            pthread_mutex_unlock(&core->mu);
            return rc;
        }
        pthread_mutex_unlock(&core->mu);
        if ((rc = load_block(c, b)) != 0)
            return rc;
        pthread_mutex_lock(&core->mu);
    }
}

int dpp_client_next(dpp_client_t *c, dpp_batch_t **out, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    uint64_t t0 = (uint64_t)deadline.tv_sec * 1000000000u + (uint64_t)deadline.tv_nsec;
    add_ms(&deadline, timeout_ms < 0 ? 0 : timeout_ms);
    *out = NULL;
    pthread_mutex_lock(&c->core->mu);
    int rc = next_locked(c, out, timeout_ms, &deadline);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t waited = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec - t0;
    c->stats.wait_ns += waited;
    unsigned bucket = 0;
    while (bucket < 15 && waited >= (10000ull << bucket))
        bucket++;
    c->stats.wait_hist[bucket]++;
    if (rc == DPP_BATCH) {
        c->stats.batches++;
        c->stats.rows += (*out)->valid_rows;
        c->epoch_batches_out++;
    }
    pthread_mutex_lock(&c->core->mu);
    c->core->rep_batches = c->stats.batches;
    c->core->rep_wait_ns = c->stats.wait_ns;
    memcpy(c->core->rep_hist, c->stats.wait_hist, sizeof c->core->rep_hist);
    pthread_mutex_unlock(&c->core->mu);
    return rc;
}

/* ---- batches ------------------------------------------------------------ */

size_t dpp_batch_rows(const dpp_batch_t *b)
{
    return b->rows;
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
    dpp_block_kjt_t k;
    dpp_block_kjt(b->buf, &b->core->shape, &k);
    out->nkeys = b->core->nsparse;
    out->stride = b->rows;
    out->values = k.values;
    out->nvalues = k.nvalues;
    out->lengths = k.lengths;
    out->offsets = k.offsets;
    out->weights = k.weights;
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
    if (b->link_id)
        dpp__core_credit(core, b->link_id);
    core->trainer_bytes -= b->bytes;
    dpp__core_unhold(core, b->bytes);
    /* after the client closed, nobody would take it from the pool */
    if (core->closed)
        free(b->buf);
    else
        dpp__pool_put(core, b->buf, b->cap);
    pthread_mutex_unlock(&core->mu);
    if (b->mask != core->ones)
        free((void *)b->mask);
    free(b);
    dpp__core_unref(core);
}
