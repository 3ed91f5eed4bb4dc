/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's checkpoint tokens (format in checkpoint.h): packing the
 * consumer's position, unpacking a token and resuming at it. */
#include <stdint.h>
#include <string.h>

#include "checkpoint.h"
#include "client_internal.h"
#include "core.h"
#include "base/crc32c.h"
#include "base/util.h"
#include "dpp/client.h"

#define TOKEN_MAGIC "DPT1"
#define TOKEN_UNKNOWN 0xffffffffu

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
int dpp__token_unpack(const void *buf, size_t len, token_t *t)
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

/* Puts a client opened from a checkpoint token at the token's position. */
int dpp__client_start_at(dpp_client_t *c, const token_t *t)
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
