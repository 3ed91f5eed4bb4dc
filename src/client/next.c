/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient, dpp_client_next(): takes received blocks in order,
 * decompresses and validates them, and cuts or assembles them into batches
 * of batch_size rows; ends epochs and the session. Never aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "core.h"
#include "format/block.h"
#include "dpp/client.h"

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
    dpp__core_unhold(core, b->cap);
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

/* A split an elastic resume cut keeps output rows [skip, skip + take) of
 * its window (the rows before were another rank's, or delivered before the
 * checkpoint; those after are another new rank's): of block b, loaded into
 * c->cur, only those are handed out. Blocks hold batch_size rows but a
 * split's last, so block b starts at row index x batch_size. */
static void trim_block(dpp_client_t *c, const rblock_t *b)
{
    dpp_core_t *core = c->core;
    const struct dpp_trim_rows *tr = NULL;
    pthread_mutex_lock(&core->mu);
    for (size_t i = 0; core->rest && b->epoch == core->rest_epoch && i < core->ntrims; i++)
        if (core->trims[i].seq == b->seq)
            tr = &core->trims[i];
    uint64_t skip = tr ? tr->skip : 0, end = tr ? tr->skip + tr->take : 0;
    pthread_mutex_unlock(&core->mu);
    if (tr == NULL)
        return;
    uint64_t at = (uint64_t)b->index * c->batch_size;
    uint64_t hi = end > at ? end - at : 0, lo = skip > at ? skip - at : 0;
    if (hi < c->cur.rows)
        c->cur.rows = (uint32_t)hi;
    if (lo > c->cur.row_off)
        c->cur.row_off = (uint32_t)(lo < c->cur.rows ? lo : c->cur.rows);
    if (c->cur.row_off > c->cur.rows)
        c->cur.row_off = c->cur.rows;
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
    dpp__core_unhold(core, b->cap);
    if (raw != b->data) /* the compressed copy goes back, the raw one is held */
        dpp__pool_put(core, b->data, b->cap);
    if (rc) {
        dpp__core_credit(core, b->link_id);
        dpp__pool_put(core, raw, raw_cap);
    } else {
        core->held_bytes += raw_cap;
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
    c->cur.source = b->source;
    c->cur.link_id = b->link_id;
    if (c->skip_rows) { /* resumed inside this block */
        c->cur.row_off = c->skip_rows < info.rows ? c->skip_rows : info.rows;
        c->skip_rows = 0;
    }
    trim_block(c, b);
    free(b);
    return 0;
}

static dpp_batch_t *new_batch(dpp_client_t *c, uint8_t *buf, size_t cap, size_t rows,
                              uint64_t link_id)
{
    dpp_batch_t *batch = calloc(1, sizeof *batch);
    if (batch == NULL)
        return NULL;
    batch->core = c->core;
    batch->buf = buf;
    batch->cap = cap;
    batch->rows = batch->valid_rows = rows;
    batch->mask = c->core->ones;
    batch->epoch = c->epoch;
    batch->link_id = link_id;
    if (c->core->nsources > 0 &&
        (batch->source_ids = malloc((rows ? rows : 1) * sizeof *batch->source_ids)) == NULL) {
        free(batch);
        return NULL;
    }
    return batch;
}

/* Finishes the assembled rows as a batch. */
static int finish_assembly(dpp_client_t *c, dpp_batch_t **out)
{
    /* Into a buffer of the pool, which released batches and spent blocks
     * return to: a fresh malloc of a batch's megabytes is a fresh mapping,
     * and its first touch a page fault per 4 KiB. */
    size_t cap, len = dpp_block_builder_size(&c->assembly), rows = c->assembly.rows;
    pthread_mutex_lock(&c->core->mu);
    uint8_t *buf = dpp__pool_get(c->core, len, &cap);
    pthread_mutex_unlock(&c->core->mu);
    if (buf == NULL)
        return -ENOMEM;
    int rc = dpp_block_builder_finish_to(&c->assembly, buf);
    dpp_batch_t *batch = rc ? NULL : new_batch(c, buf, cap, rows, 0);
    if (batch == NULL) {
        free(buf);
        return rc ? rc : -ENOMEM;
    }
    if (batch->source_ids)
        memcpy(batch->source_ids, c->assembly_sources, rows * sizeof *batch->source_ids);
    pthread_mutex_lock(&c->core->mu);
    c->core->refs++;
    c->core->held_bytes += cap;
    c->core->trainer_bytes += cap;
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
            new_batch(c, cur->raw, cur->raw_cap, cur->rows, cur->link_id);
        if (batch == NULL)
            return -ENOMEM;
        for (size_t i = 0; batch->source_ids && i < cur->rows; i++)
            batch->source_ids[i] = (int32_t)cur->source;
        pthread_mutex_lock(&core->mu);
        core->refs++;
        core->trainer_bytes += batch->cap;
        pthread_mutex_unlock(&core->mu);
        memset(cur, 0, sizeof *cur);
        c->stats.batches_zero_copy++;
        *out = batch;
        return 1;
    }
    size_t want = c->batch_size - c->assembly.rows;
    size_t take = cur->rows - cur->row_off < want ? cur->rows - cur->row_off : want;
    size_t before = dpp_block_builder_size(&c->assembly);
    for (size_t i = 0; c->assembly_sources && i < take; i++)
        c->assembly_sources[c->assembly.rows + i] = (int32_t)cur->source;
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
        dpp__core_unhold(core, cur->raw_cap);
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
    while (rc == 0 && c->assembly.rows < c->batch_size) {
        if (c->assembly_sources)
            c->assembly_sources[c->assembly.rows] = -1; /* padding: no source */
        rc = dpp_block_builder_append(&c->assembly, 0.0f, zeros, NULL, NULL, lens);
    }
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
    if (core->pad && (c->assembly.rows > 0 ||
                      (int64_t)c->epoch_batches_out < dpp__core_pad_batches(core, c->epoch))) {
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
    dpp__track_reset(t); /* frees the slot for epoch + 2 */
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
        /* padding needs the plan's batch count, which the next attach
         * brings; the last epoch ends when the master has not failed the
         * session (core->verdict) */
        if (ended && !(core->pad && dpp__core_pad_batches(core, c->epoch) < 0)) {
            if (c->epoch + 1 < c->epochs || core->verdict == VERDICT_OK)
                return end_epoch(c, t, out);
            dpp__core_ask_verdict(core);
        }
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
