/* SPDX-License-Identifier: Apache-2.0 */
/* The master's client requests: attach (a trainer rank joins, refreshes,
 * resumes from a checkpoint token or detaches) and consumed splits. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/errtext.h"
#include "base/log.h"
#include "base/util.h"
#include "dpp/error.h"
#include "lease.h"
#include "persist.h"
#include "rpc_client.h"
#include "wire/conn.h"

/* p (client client_id) reads rank r of s from now on. */
static void hold(peer_t *p, dpp_session_t *s, unsigned r, uint64_t client_id)
{
    dpp_rank_holder_t *h = &s->holders[r];
    if (h->client_id != client_id)
        h->since_ms = dpp_now_ms();
    h->client_id = client_id;
    h->peer = p;
    snprintf(p->held_session, sizeof p->held_session, "%s", s->id);
    p->held_rank = r;
}

/* Whether rank r has splits at or after position seq that were leased,
 * produced or (order fastest) consumed: what a reader that is gone may have
 * taken part of. */
static int rank_in_flight(const dpp_session_t *s, unsigned r, uint32_t seq)
{
    for (size_t j = seq; j < s->rank_count[r]; j++)
        if (s->splits[s->rank_first[r] + j].state != SPLIT_PENDING)
            return 1;
    return 0;
}

/* A rank has one reader. The client that holds it refreshes; another one
 * is refused while the holder's connection is open, and otherwise takes the
 * rank over where it stands: at its first split not consumed, the splits
 * from there on leased anew (the rows of a split the gone client had partly
 * taken come again). Returns 0, or an error already sent. */
static int hold_rank(peer_t *p, dpp_session_t *s, const Dpp__AttachRequest *req,
                     uint32_t *start_seq, uint64_t *start_records, int *taken_over)
{
    dpp_master_t *m = p->m;
    unsigned r = req->rank;
    dpp_rank_holder_t *h = &s->holders[r];
    if (h->client_id == req->client_id) {
        hold(p, s, r, req->client_id); /* the same client, maybe on a new connection */
        return 0;
    }
    if (h->client_id != 0 && h->peer != NULL && h->peer != p) {
        const peer_t *holder = h->peer;
        dpp_conn_send_error(&p->base.conn, DPP_EHELD,
                            "rank %u of session %s is read by another client (%s, for %.0f s): "
                            "a rank has one reader; stop that one first (a new one then "
                            "continues where it stopped), or read another rank",
                            r, s->id, holder->base.conn.peer,
                            (double)(dpp_now_ms() - h->since_ms) / 1000.0);
        return DPP_EHELD;
    }
    if (s->state == SESSION_RUNNING) {
        uint32_t seq = (uint32_t)dpp_session_rank_cursor(s, r);
        if (!rank_in_flight(s, r, seq))
            goto place; /* nothing of the rank is out: nothing to lease again */
        Dpp__JournalResume jr = DPP__JOURNAL_RESUME__INIT;
        jr.session_id = s->id;
        jr.rank = r;
        jr.epoch = s->epoch;
        jr.seq = seq;
        jr.generation = s->generation;
        dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_RESUME, &jr.base);
        int rc = dpp_master_journal_put(m, &rec, 1);
        if (rc == 0)
            rc = dpp_session_resume(s, r, s->epoch, seq);
        if (rc) {
            dpp_conn_send_error(&p->base.conn, rc, "rank %u of session %s: cannot take it over: %s",
                                r, s->id, dpp_strerror(rc));
            return rc;
        }
        m->n.takeovers++;
        s->takeovers++;
        /* the old reader took the rank's splits in order: of the first one
         * not consumed it may have read any part, which now comes again */
        s->redelivered_max += dpp_split_rows(&s->splits[s->rank_first[r] + seq]);
        DPP_WARN("rank_taken_over session=%s rank=%u peer=%s epoch=%u from_split=%u reason=\"%s\"",
                 s->id, r, p->base.conn.peer, s->epoch, seq,
                 h->client_id ? "its reader is gone"
                              : "a new reader, the last one unknown (a master restart)");
    place:
        for (uint32_t j = 0; j < seq; j++)
            *start_records += dpp_split_rows(&s->splits[s->rank_first[r] + j]);
        *start_seq = seq;
        *taken_over = 1;
    }
    hold(p, s, r, req->client_id);
    return 0;
}

/* The client lost its connections to these workers: what they had sent
 * may be lost with them. Returns the splits that go back to pending. */
static size_t lost_workers(dpp_master_t *m, dpp_session_t *s, const Dpp__AttachRequest *req)
{
    size_t n = 0;
    for (size_t i = 0; i < req->n_lost_workers; i++) {
        for (peer_t *w = first_peer(m); w; w = next_peer(w)) {
            if (peer_role(w) != ROLE_WORKER || w->worker_id == 0 ||
                strcmp(w->data_addr, req->lost_workers[i]) != 0)
                continue;
            size_t k = dpp_session_release_rank_worker(s, req->rank, w->worker_id);
            if (k)
                DPP_WARN("client_lost_worker session=%s rank=%u worker=%" PRIu64
                         " splits_again=%zu",
                         s->id, req->rank, w->worker_id, k);
            m->n.splits_released += k;
            n += k;
        }
    }
    return n;
}

/* A rank of the world the last elastic resume made opens with that
 * resume's tokens (AttachRequest.elastic_tokens, the same world size). A
 * rank of that world that has read nothing yet is one opening late:
 * nothing to do. One that has read some of it was started again (its
 * world died before its first checkpoint; the job restarts every rank from
 * the same tokens): the rank goes back alone to the start of the
 * re-planned epoch, as a resume from a token there would, so that what
 * the rank read before comes again whichever ranks start again, and in
 * whatever order. A rank whose reader is still connected is left to
 * hold_rank(), which refuses the new one. Returns 0, or an error already
 * sent. */
static int elastic_rejoin(peer_t *p, dpp_session_t *s, const Dpp__AttachRequest *req)
{
    unsigned r = req->rank;
    if (r >= s->spec.consumers)
        return 0; /* refused by the attach */
    const dpp_rank_holder_t *h = &s->holders[r];
    if (h->client_id == req->client_id || (h->client_id != 0 && h->peer != NULL && h->peer != p) ||
        !dpp_session_rank_went_on(s, r))
        return 0;
    Dpp__JournalResume jr = DPP__JOURNAL_RESUME__INIT;
    jr.session_id = s->id;
    jr.rank = r;
    jr.epoch = s->gen_epoch;
    jr.seq = 0;
    jr.generation = s->generation;
    dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_RESUME, &jr.base);
    unsigned was = s->state == SESSION_DONE ? s->spec.epochs : s->epoch;
    int rc = dpp_master_journal_put(p->m, &rec, 1);
    if (rc == 0)
        rc = dpp_session_resume(s, r, s->gen_epoch, 0);
    if (rc) {
        dpp_conn_send_error(&p->base.conn, rc,
                            "rank %u of session %s cannot start again from its elastic resume's "
                            "checkpoint tokens (generation %u, epoch %u): %s",
                            r, s->id, s->generation, s->gen_epoch, dpp_strerror(rc));
        return rc;
    }
    p->m->n.resumes++;
    DPP_WARN("elastic_rank_restarted session=%s rank=%u peer=%s generation=%u epoch=%u "
             "from_epoch=%u reason=\"a client opens the rank with the tokens of the resume that "
             "made this world, and the rank had read from it: it starts again at the re-planned "
             "epoch's start\"",
             s->id, r, p->base.conn.peer, s->generation, s->gen_epoch, was);
    dpp_master_grant_soon(p->m);
    return 0;
}

/* An elastic resume (AttachRequest.elastic_tokens): every token checked
 * as a resume would check it, journaled, then the rest of their epoch
 * planned for the new world. The same tokens and world size as the last
 * resume (each rank of the new world sends them) find it done, or start
 * their rank again (elastic_rejoin). Tokens of an earlier resume of the
 * chain, or of the last at another world size, make that resume again (a
 * new world that died before its first checkpoint, started again): what
 * the worlds made from them read counts for nothing. The old world's
 * clients still attached are taken over: they are refused from their next
 * attach on (DPP_ERANK), and workers send them nothing of the new plan.
 * Returns 0, or an error already sent. */
static int elastic_resume(peer_t *p, dpp_session_t *s, const Dpp__AttachRequest *req)
{
    dpp_master_t *m = p->m;
    const uint8_t *tokens = req->elastic_tokens.data;
    size_t len = req->elastic_tokens.len;
    unsigned n_old = (unsigned)(len / DPP_CKPT_TOKEN_SIZE), n_new = req->elastic_consumers;
    const dpp_reshape_t *again = dpp_session_chain_find(s, tokens, len);
    if (again && again == &s->chain[s->nchain - 1] && again->n_new == n_new)
        return elastic_rejoin(p, s, req); /* a rank of the world it made */
    char why[768] = "";
    int rc = 0;
    if (len == 0 || len % DPP_CKPT_TOKEN_SIZE != 0)
        rc = dpp_errf(DPP_ETOKEN, why, sizeof why,
                      "%zu bytes of tokens: expected every old rank's %d-byte token, concatenated",
                      len, DPP_CKPT_TOKEN_SIZE);
    /* (the tokens of an entry of the chain were checked when it was made) */
    for (unsigned i = 0; rc == 0 && again == NULL && i < n_old; i++) {
        dpp_ckpt_token_t t;
        dpp_token_plan_t plan;
        char field[600];
        const uint8_t *tok = tokens + (size_t)i * DPP_CKPT_TOKEN_SIZE;
        rc = dpp_ckpt_token_parse(tok, DPP_CKPT_TOKEN_SIZE, &t, field, sizeof field);
        if (rc == 0)
            rc = dpp_session_check_token(s, tok, DPP_CKPT_TOKEN_SIZE, i, t.epoch, t.seq, &t,
                                         &plan, field, sizeof field);
        if (rc)
            snprintf(why, sizeof why, "token %u (rank %u of %u): %s", i, i, n_old, field);
    }
    if (rc == 0)
        rc = dpp_session_reshape(s, tokens, n_old, n_new, 0, why, sizeof why);
    unsigned old_gen = s->generation, old_ranks = s->spec.consumers, attached = 0;
    size_t from_entry = again ? (size_t)(again - s->chain) : s->nchain;
    for (unsigned r = 0; rc == 0 && r < s->spec.consumers; r++)
        attached += s->holders[r].peer != NULL && s->holders[r].peer != p;
    if (rc == 0) {
        /* journaled first: a restarted master makes the same plan */
        Dpp__JournalReshape jr = DPP__JOURNAL_RESHAPE__INIT;
        jr.session_id = s->id;
        jr.epoch = s->epoch;
        jr.consumers = n_new;
        jr.tokens.data = (uint8_t *)tokens;
        jr.tokens.len = len;
        jr.generation = s->generation + 1;
        dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_RESHAPE, &jr.base);
        rc = dpp_master_journal_put(m, &rec, 1);
        if (rc == 0)
            rc = dpp_session_reshape(s, tokens, n_old, n_new, jr.generation, why, sizeof why);
        else
            snprintf(why, sizeof why, "journal write failed");
    }
    if (rc) {
        char q[1024];
        DPP_WARN("elastic_resume_refused session=%s ranks=%u new_ranks=%u peer=%s error=%s", s->id,
                 n_old, n_new, p->base.conn.peer, dpp_log_quote(why, q, sizeof q));
        dpp_conn_send_error(&p->base.conn, rc,
                            "session %s cannot resume at %u ranks from these checkpoint tokens: %s",
                            s->id, n_new, why);
        return rc;
    }
    m->n.resumes++;
    if (again)
        DPP_WARN("session_reshaped_again session=%s ranks=%u new_ranks=%u epoch=%u "
                 "generation=%u was_generation=%u resume=%zu reason=\"these tokens were resumed "
                 "from before: the worlds made from them since are dropped, what they read comes "
                 "again\"",
                 s->id, n_old, n_new, s->epoch, s->generation, old_gen, from_entry);
    else
        DPP_INFO("session_reshaped session=%s ranks=%u new_ranks=%u epoch=%u generation=%u "
                 "splits=%zu",
                 s->id, n_old, n_new, s->epoch, s->generation, s->nsplits);
    if (attached > 0)
        DPP_WARN("elastic_takeover session=%s generation=%u old_generation=%u old_ranks=%u "
                 "attached=%u reason=\"the old world's readers are still attached: they are "
                 "refused from their next attach on (DPP_ERANK), and the workers send them "
                 "nothing of the new plan\"",
                 s->id, s->generation, old_gen, old_ranks, attached);
    dpp_master_grant_soon(m);
    return 0;
}

void dpp_master_client_attach(peer_t *p, const Dpp__AttachRequest *req)
{
    int newly_present = 0;
    dpp_master_t *m = p->m;
    dpp_session_t *s = dpp_master_find_session(m, req->session_id);
    if (s == NULL) {
        dpp_conn_send_error(&p->base.conn, DPP_ENOSESSION,
                            "no session \"%s\" on this master (dppctl list shows its sessions; a "
                            "finished one is forgotten after --session-retention)",
                            req->session_id);
        return;
    }
    if (req->elastic_tokens.len > 0 && !req->detach && elastic_resume(p, s, req) != 0)
        return;
    if (req->generation_known && req->generation != s->generation && !req->resume) {
        /* (a token's generation is checked with the token) */
        dpp_conn_send_error(&p->base.conn, DPP_ERANK,
                            "rank %u of session %s reads the plan of generation %u, and the "
                            "session was resumed at %u ranks since (generation %u): this reader "
                            "belongs to the old world; start the new world's ranks from the "
                            "checkpoint",
                            req->rank, s->id, req->generation, s->spec.consumers, s->generation);
        return;
    }
    if (req->rank >= s->spec.consumers) {
        dpp_conn_send_error(&p->base.conn, DPP_ERANK,
                            "rank %u is out of range: session %s has %u consumer%s (ranks 0 to %u)",
                            req->rank, s->id, s->spec.consumers, s->spec.consumers == 1 ? "" : "s",
                            s->spec.consumers - 1);
        return;
    }
    uint32_t start_seq = 0;
    uint64_t start_records = 0;
    int taken_over = 0;
    if (!req->detach && !req->resume &&
        hold_rank(p, s, req, &start_seq, &start_records, &taken_over) != 0)
        return;
    if (req->resume && !req->detach)
        hold(p, s, req->rank, req->client_id);
    if (req->detach && s->holders[req->rank].client_id == req->client_id)
        memset(&s->holders[req->rank], 0, sizeof s->holders[req->rank]);
    newly_present |= lost_workers(m, s, req) > 0;
    if (s->token_key_unsaved) {
        /* replayed from a journal without a key: the one made at this start
         * is journaled before any client signs a token with it */
        dpp_journal_rec_t rec = dpp_master_session_rec(s);
        if (dpp_master_journal_put_now(m, &rec, 1) != 0) {
            dpp_conn_send_error(&p->base.conn, DPP_EFAILED, "session %s: journal write failed",
                                s->id);
            return;
        }
        s->token_key_unsaved = 0;
    }
    dpp_token_plan_t plan = {0};
    if (req->resume) {
        dpp_ckpt_token_t tok;
        char why[768];
        int rc = DPP_ETOKEN;
        if (req->resume_token.len == 0)
            snprintf(why, sizeof why,
                     "token: the attach resumes at epoch %u split %u without a signed checkpoint "
                     "token (a client older than this master): resume with a token of this "
                     "version of dpp",
                     req->resume_epoch, req->resume_seq);
        else
            rc = dpp_session_check_token(s, req->resume_token.data, req->resume_token.len,
                                         req->rank, req->resume_epoch, req->resume_seq, &tok, &plan,
                                         why, sizeof why);
        if (rc == 0) {
            /* journaled first: a restarted master must not hand the rank
             * what the token says it already has */
            Dpp__JournalResume jr = DPP__JOURNAL_RESUME__INIT;
            jr.session_id = s->id;
            jr.rank = req->rank;
            jr.epoch = tok.epoch;
            jr.seq = tok.seq;
            jr.generation = s->generation;
            dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_RESUME, &jr.base);
            rc = dpp_master_journal_put(m, &rec, 1);
            if (rc == 0)
                rc = dpp_session_resume(s, req->rank, tok.epoch, tok.seq);
            if (rc)
                snprintf(why, sizeof why, "%s",
                         rc == DPP_ETOKEN ? "not a position of this session" : dpp_strerror(rc));
        }
        if (rc) {
            char q[1024];
            DPP_WARN("resume_refused session=%s rank=%u peer=%s error=%s", s->id, req->rank,
                     p->base.conn.peer, dpp_log_quote(why, q, sizeof q));
            dpp_conn_send_error(
                &p->base.conn, rc,
                "rank %u of session %s cannot resume from this checkpoint token: %s", req->rank,
                s->id, why);
            return;
        }
        m->n.resumes++;
        DPP_INFO("rank_resumed session=%s rank=%u epoch=%u seq=%u index=%u row=%u now_epoch=%u",
                 s->id, req->rank, tok.epoch, tok.seq, tok.index, tok.row, s->epoch);
    }
    if (req->prefetch_splits > 0)
        s->rank_prefetch[req->rank] = req->prefetch_splits;
    if (req->open_ns > 0) { /* the trainer's side, for /metrics */
        dpp_rank_counts_t c = {.batches = req->batches, .wait_ns = req->wait_ns,
                               .open_ns = req->open_ns};
        for (size_t i = 0; i < 16 && i < req->n_wait_hist; i++)
            c.hist[i] = req->wait_hist[i];
        dpp_session_report(s, req->rank, req->client_id, &c);
    }
    int64_t now = dpp_now_ms();
    int64_t *seen = &s->rank_seen_ms[req->rank];
    newly_present = *seen == 0 || now - *seen > RANK_ABSENT_MS;
    *seen = req->detach ? 0 : now; /* a closing client: nothing more for this rank */
    s->client_ms = dpp_wall_ms();  /* the idle timeout counts from the last attach */
    Dpp__AttachReply r = DPP__ATTACH_REPLY__INIT;
    r.session_id = s->id;
    r.rank = req->rank;
    r.consumers = s->spec.consumers;
    r.epochs = s->spec.epochs;
    r.batch_size = s->spec.batch_size;
    r.rank_splits_per_epoch =
        s->state == SESSION_INDEXING ? 0 : (uint32_t)dpp_session_rank_splits(s, req->rank);
    r.keep_remainder = s->spec.remainder == DPP_REMAINDER_KEEP;
    r.pad_batches = (uint32_t)dpp_session_pad_batches(s);
    r.order_fastest = s->spec.order_fastest;
    r.remainder_pad = s->spec.remainder == DPP_REMAINDER_PAD;
    r.rank_records = dpp_session_plain_rank_records(s, req->rank);
    r.rank_records_exact = s->state != SESSION_INDEXING && s->spec.nfilters == 0;
    r.n_dense_names = r.n_dense_dims = s->spec.ndense;
    r.dense_names = dpp_xcalloc(s->spec.ndense + 1, sizeof(char *));
    r.dense_dims = dpp_xcalloc(s->spec.ndense + 1, sizeof(uint32_t));
    for (unsigned i = 0; i < s->spec.ndense; i++) {
        r.dense_names[i] = s->spec.dense[i].name;
        r.dense_dims[i] = s->spec.dense[i].dim;
    }
    r.n_sparse_names = r.n_sparse_weighted = s->spec.nsparse;
    r.sparse_names = dpp_xcalloc(s->spec.nsparse + 1, sizeof(char *));
    r.sparse_weighted = dpp_xcalloc(s->spec.nsparse + 1, sizeof(protobuf_c_boolean));
    for (unsigned k = 0; k < s->spec.nsparse; k++) {
        r.sparse_names[k] = s->spec.sparse[k].name;
        r.sparse_weighted[k] = s->spec.sparse[k].weights != NULL;
    }
    r.label_name = s->spec.label ? s->spec.label : (char *)""; /* "": no label */
    r.n_sources = s->spec.nsources;
    r.sources = dpp_xcalloc(s->spec.nsources + 1, sizeof(char *));
    for (unsigned i = 0; i < s->spec.nsources; i++)
        r.sources[i] = s->spec.sources[i].spec.table;
    r.workers = dpp_xcalloc(dpp_master_live_workers(m) + 1, sizeof(char *));
    for (peer_t *w = first_peer(m); w; w = next_peer(w))
        if (peer_role(w) == ROLE_WORKER && w->worker_id != 0)
            r.workers[r.n_workers++] = w->data_addr;
    r.token_key.data = s->token_key;
    r.token_key.len = sizeof s->token_key;
    r.epoch = s->epoch;
    r.resume_rank_splits = plan.rank_splits;
    r.resume_split_records = plan.split_records;
    r.start_seq = start_seq;
    r.start_records = start_records;
    r.taken_over = taken_over;
    r.rank_reports_due = dpp_session_rank_reports_due(s, req->rank);
    r.generation = s->generation;
    r.rest = s->nchain > 0;
    r.rest_epoch = s->gen_epoch;
    r.rest_pad_batches = (uint32_t)s->gen_pad_batches;
    if (r.rest && s->epoch == s->gen_epoch && s->state == SESSION_RUNNING)
        r.rest_rank_records = dpp_session_rank_records(s, req->rank);
    size_t ntrim = 0;
    for (size_t i = 0; r.rest && i < s->ngen_trims; i++)
        ntrim += s->gen_trims[i].rank == req->rank;
    r.trim_seqs = dpp_xcalloc(ntrim + 1, sizeof *r.trim_seqs);
    r.trim_skips = dpp_xcalloc(ntrim + 1, sizeof *r.trim_skips);
    r.trim_takes = dpp_xcalloc(ntrim + 1, sizeof *r.trim_takes);
    for (size_t i = 0; ntrim && i < s->ngen_trims; i++) {
        const struct dpp_trim *t = &s->gen_trims[i];
        if (t->rank != req->rank)
            continue;
        r.trim_seqs[r.n_trim_seqs++] = t->seq;
        r.trim_skips[r.n_trim_skips++] = t->skip;
        r.trim_takes[r.n_trim_takes++] = t->take;
    }
    r.state = (char *)dpp_session_state_name(s->state);
    r.error = s->error ? s->error : (char *)"";
    dpp_conn_send(&p->base.conn, DPP_MSG_ATTACH_REPLY, &r.base);
    /* new splits may have come into a resumed or faster-prefetching rank's
     * reach as well */
    newly_present |= req->resume || req->prefetch_splits > 0;
    free(r.dense_names);
    free(r.dense_dims);
    free(r.sparse_names);
    free(r.sparse_weighted);
    free(r.workers);
    free(r.sources);
    free(r.trim_seqs);
    free(r.trim_skips);
    free(r.trim_takes);
    if (newly_present)
        dpp_master_grant_soon(m);
}

void dpp_master_client_consumed(peer_t *p, const Dpp__SplitConsumed *msg)
{
    dpp_master_t *m = p->m;
    dpp_session_t *s =
        dpp_master_consumed_split(m, msg->session_id, msg->epoch, msg->split_id, msg->rank,
                                  msg->generation);
    if (s == NULL)
        return; /* late, foreign or repeated: nothing to change */
    Dpp__JournalConsumed jc = DPP__JOURNAL_CONSUMED__INIT;
    jc.session_id = s->id;
    jc.epoch = msg->epoch;
    jc.split_id = msg->split_id;
    jc.generation = msg->generation;
    dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_CONSUMED, &jc.base);
    if (dpp_master_journal_put(m, &rec, 1) != 0)
        return;
    unsigned epoch = s->epoch;
    m->n.splits_consumed++;
    dpp_master_epoch_moved(m, s, epoch, dpp_session_consumed(s, msg->split_id, 1));
}
