/* SPDX-License-Identifier: Apache-2.0 */
/* libdppclient's checkpoint tokens: the consumer's position signed with the
 * session's token key, the checks a token gets against the master's attach
 * reply, and resuming at it (layout in crypto/checkpoint_token.h). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/errtext.h"
#include "checkpoint.h"
#include "client_internal.h"
#include "core.h"
#include "crypto/checkpoint_token.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"

_Static_assert(DPP_CHECKPOINT_SIZE == DPP_CKPT_TOKEN_SIZE, "the public size is the token's");

int dpp_client_checkpoint(const dpp_client_t *c, void *buf, size_t len)
{
    if (buf == NULL || len < DPP_CHECKPOINT_SIZE || c->core->order_fastest)
        return DPP_EINVAL;
    dpp_ckpt_token_t t = {
        .rank = c->rank, .epoch = c->epoch, .batches = (uint32_t)c->epoch_batches_out};
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
    uint8_t key[DPP_CKPT_KEY_LEN];
    pthread_mutex_lock(&core->mu);
    epoch_track_t *tr = dpp__core_epoch(core, c->epoch, 0);
    int64_t n = tr ? dpp__epoch_splits(core, tr) : core->rank_splits == 0 ? 0 : -1;
    int have_key = core->token_key_set;
    t.generation = core->generation;
    memcpy(key, core->token_key, sizeof key);
    pthread_mutex_unlock(&core->mu);
    if (!have_key)
        return DPP_EVERSION; /* the master is older than tokens that it can verify */
    t.rank_splits = n >= 0 ? (uint32_t)n : DPP_CKPT_SPLITS_UNKNOWN;
    if (c->epoch >= c->epochs) { /* the session is over: nothing is left */
        t.epoch = c->epochs;
        t.seq = t.index = t.row = t.batches = 0;
        t.rank_splits = DPP_CKPT_SPLITS_UNKNOWN;
    }
    int rc = dpp_ckpt_token_pack(&t, key, buf);
    explicit_bzero(key, sizeof key);
    return rc ? rc : DPP_CHECKPOINT_SIZE;
}

int dpp__token_check_reply(const dpp_ckpt_token_t *t, const uint8_t *raw, const Dpp__AttachReply *r,
                           char *why, size_t whylen)
{
    if (r->token_key.len != DPP_CKPT_KEY_LEN)
        return dpp_errf(DPP_EVERSION, why, whylen,
                        "the master sent no checkpoint-token key: it is older than this client and "
                        "cannot verify tokens");
    if (!dpp_ckpt_token_verify(raw, r->token_key.data))
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "mac: the token's HMAC-SHA256 does not verify under session %s's token key "
                        "(from the master): it was changed after it was signed",
                        r->session_id);
    if (strcmp(t->session, r->session_id) != 0)
        return dpp_errf(DPP_ETOKEN, why, whylen, "session: the token says \"%s\", the master %s",
                        t->session, r->session_id);
    if (t->rank != r->rank || t->rank >= r->consumers)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "rank: the token says %u, the master answered for rank %u of %u", t->rank,
                        r->rank, r->consumers);
    if (t->generation != r->generation)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "generation: the token says %u, the master's plan is generation %u",
                        t->generation, r->generation);
    if (r->epochs != DPP_EPOCHS_UNBOUNDED && t->epoch > r->epochs)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "epoch: the token says %u, the session has %u epochs", t->epoch, r->epochs);
    if (r->epochs != DPP_EPOCHS_UNBOUNDED && t->epoch == r->epochs) {
        if (t->seq || t->index || t->row || t->batches)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "position: the token says split %u block %u row %u after %u batches, a "
                            "token taken after the last epoch says 0",
                            t->seq, t->index, t->row, t->batches);
        return 0;
    }
    if (strcmp(r->state, "failed") == 0)
        return 0; /* next() reports the failure */
    if (strcmp(r->state, "indexing") == 0) {
        if (t->epoch || t->seq || t->index || t->row || t->batches)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "position: the token says epoch %u split %u block %u row %u after %u "
                            "batches, the session is still indexing (nothing was read yet)",
                            t->epoch, t->seq, t->index, t->row, t->batches);
        return 0;
    }
    if (t->epoch > r->epoch && strcmp(r->state, "done") != 0)
        return dpp_errf(DPP_ETOKEN, why, whylen, "epoch: the token says %u, the session is at %u",
                        t->epoch, r->epoch);
    if (t->rank_splits != DPP_CKPT_SPLITS_UNKNOWN && t->rank_splits != r->resume_rank_splits)
        return dpp_errf(
            DPP_ETOKEN, why, whylen,
            "rank_splits: the token says %u, the master's plan of epoch %u gives rank %u "
            "%u splits",
            t->rank_splits, t->epoch, t->rank, r->resume_rank_splits);
    if (t->seq > r->resume_rank_splits)
        return dpp_errf(
            DPP_ETOKEN, why, whylen,
            "seq: the token says split position %u, the master's plan of epoch %u gives "
            "rank %u %u splits",
            t->seq, t->epoch, t->rank, r->resume_rank_splits);
    if (t->row >= r->batch_size)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "row: the token says %u, a block holds at most batch_size = %u rows",
                        t->row, r->batch_size);
    if (t->seq == r->resume_rank_splits && (t->index || t->row))
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "index: the token says block %u row %u at the end of rank %u's %u splits, "
                        "where there are no blocks",
                        t->index, t->row, t->rank, r->resume_rank_splits);
    if (t->seq < r->resume_rank_splits) {
        /* a split's blocks hold batch_size rows but its last, then comes
         * its end marker; a record gives at most one row */
        uint64_t bs = r->batch_size, records = r->resume_split_records;
        uint64_t blocks = (records + bs - 1) / bs, at = (uint64_t)t->index * bs;
        if (t->index > blocks)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "index: the token says block %u, split position %u has %llu records "
                            "in the master's plan: blocks 0..%llu (the last its end marker)",
                            t->index, t->seq, (unsigned long long)records,
                            (unsigned long long)blocks);
        if (t->row > 0 && (at >= records || t->row >= records - at))
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "row: the token says %u, block %u of split position %u (%llu records) "
                            "has fewer rows",
                            t->row, t->index, t->seq, (unsigned long long)records);
    }
    return 0;
}

/* Puts a client opened from a checkpoint token at the token's position. */
int dpp__client_start_at(dpp_client_t *c, const dpp_ckpt_token_t *t)
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
    if (t->rank_splits != DPP_CKPT_SPLITS_UNKNOWN) {
        epoch_track_t *tr = dpp__core_epoch(core, t->epoch, 1);
        tr->rank_splits = t->rank_splits;
    }
    return 0;
}
