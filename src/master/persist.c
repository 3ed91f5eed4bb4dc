/* SPDX-License-Identifier: Apache-2.0 */
/* The master's journal glue: packs its changes into journal records,
 * replays them at start and compacts the journal into a snapshot. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "index_cache.h"
#include "lease.h"
#include "master_internal.h"
#include "persist.h"

dpp_journal_rec_t dpp_master_pack_rec(uint8_t type, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = dpp_xmalloc(len ? len : 1);
    protobuf_c_message_pack(msg, buf);
    return (dpp_journal_rec_t){.type = type, .payload = buf, .len = len};
}

static int journal_put(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n, int commit, int now)
{
    int rc = dpp_journal_write(m->journal, recs, n);
    if (rc == 0 && now)
        rc = dpp_journal_flush(m->journal);
    m->commit_records += rc == 0 ? n : 0;
    if (rc == 0 && n > 0 && commit) {
        m->commit_pending = 1; /* from now on what the master says waits for the sync */
        if (m->stopping)       /* the loop turns no more for the commit */
            dpp_master_commit(m);
    }
    for (size_t i = 0; i < n; i++)
        free((void *)recs[i].payload);
    if (rc) {
        DPP_ERROR("journal_write_failed dir=%s error=\"%s\" action=stopping", m->state_dir,
                  dpp_strerror(rc));
        dpp_master_fail_stop(m);
        return rc;
    }
    /* Compaction comes after the change is applied (dpp_master_maybe_compact() at the
     * end of each handler): a snapshot taken here would miss it. */
    return 0;
}

int dpp_master_journal_put(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n)
{
    return journal_put(m, recs, n, 1, 0);
}

int dpp_master_journal_put_now(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n)
{
    return journal_put(m, recs, n, 1, 1);
}

int dpp_master_journal_put_lazy(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n)
{
    return journal_put(m, recs, n, 0, 0);
}

dpp_journal_rec_t dpp_master_session_rec(const dpp_session_t *s)
{
    Dpp__JournalSession js = DPP__JOURNAL_SESSION__INIT;
    js.session_id = (char *)s->id;
    js.spec_json = s->spec_json;
    js.table_path = s->table_path;
    js.token_key.data = (uint8_t *)s->token_key;
    js.token_key.len = sizeof s->token_key;
    js.submitted_unix_ms = s->submitted_ms;
    js.n_files = s->nfiles;
    js.files = dpp_xcalloc(s->nfiles + 1, sizeof *js.files);
    for (size_t i = 0; i < s->nfiles; i++)
        js.files[i] = s->files[i].path;
    int objects = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        objects |= s->files[i].etag != NULL;
    if (objects) { /* "" for a local file (of another source of a mixture) */
        js.n_etags = js.n_sizes = s->nfiles;
        js.etags = dpp_xcalloc(s->nfiles, sizeof *js.etags);
        js.sizes = dpp_xcalloc(s->nfiles, sizeof *js.sizes);
        for (size_t i = 0; i < s->nfiles; i++) {
            js.etags[i] = s->files[i].etag ? s->files[i].etag : (char *)"";
            js.sizes[i] = s->files[i].size;
        }
    }
    if (s->spec.nsources > 0) {
        js.n_source_tables = s->spec.nsources;
        js.source_tables = s->source_tables;
        js.n_file_sources = s->nfiles;
        js.file_sources = dpp_xcalloc(s->nfiles + 1, sizeof *js.file_sources);
        for (size_t i = 0; i < s->nfiles; i++)
            js.file_sources[i] = s->files[i].source;
    }
    dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_SESSION, &js.base);
    free(js.file_sources);
    free(js.files);
    free(js.etags);
    free(js.sizes);
    return rec;
}

dpp_journal_rec_t dpp_master_indexed_rec(const dpp_session_t *s, size_t i)
{
    Dpp__JournalIndexed r = DPP__JOURNAL_INDEXED__INIT;
    r.session_id = (char *)s->id;
    r.file = (uint32_t)i;
    r.records = s->files[i].records;
    r.n_boundaries = s->files[i].nbounds;
    r.boundaries = s->files[i].bounds;
    r.file_size = s->files[i].index_size;
    r.file_mtime_ns = s->files[i].index_mtime_ns;
    return dpp_master_pack_rec(DPP_J_INDEXED, &r.base);
}

void dpp_master_fail_session(dpp_master_t *m, dpp_session_t *s, const char *what,
                             const char *message)
{
    char q[1100];
    DPP_ERROR("session_failed session=%s %s error=%s", s->id, what,
              dpp_log_quote(message, q, sizeof q));
    dpp_session_fail(s, message);
    Dpp__JournalFailed jf = DPP__JOURNAL_FAILED__INIT;
    jf.session_id = s->id;
    jf.error = (char *)message;
    jf.ended_unix_ms = s->ended_ms;
    jf.cancelled = s->cancelled;
    dpp_journal_rec_t rec = dpp_master_pack_rec(DPP_J_FAILED, &jf.base);
    if (dpp_master_journal_put(m, &rec, 1) == 0)
        dpp_master_maybe_compact(m);
}

static dpp_journal_rec_t ended_rec(const dpp_session_t *s)
{
    Dpp__JournalEnded je = DPP__JOURNAL_ENDED__INIT;
    je.session_id = (char *)s->id;
    je.ended_unix_ms = s->ended_ms;
    return dpp_master_pack_rec(DPP_J_ENDED, &je.base);
}

void dpp_master_session_done(dpp_master_t *m, dpp_session_t *s)
{
    DPP_INFO("session_done session=%s rows=%" PRIu64 " rejected=%" PRIu64, s->id, s->rows_produced,
             dpp_rejects_total(&s->rejects));
    dpp_journal_rec_t rec = ended_rec(s);
    dpp_master_journal_put(m, &rec, 1);
}

void dpp_master_epoch_moved(dpp_master_t *m, dpp_session_t *s, unsigned epoch, int more)
{
    if (s->state == SESSION_DONE)
        dpp_master_session_done(m, s);
    else if (more == 1)
        DPP_INFO("epoch_done session=%s epoch=%u", s->id, epoch);
    dpp_master_grant_soon(m); /* a new epoch, or (order deterministic) splits within reach */
    dpp_master_maybe_compact(m);
}

/* Rebuilds one journaled change. A record that no longer applies (its
 * session gone, an epoch already past) is skipped: replay must reach the
 * state the master had acknowledged, never refuse to start over one record. */
int dpp_master_replay_record(void *arg, uint8_t type, const uint8_t *payload, size_t len)
{
    dpp_master_t *m = arg;
    const ProtobufCMessageDescriptor *d =
        type == DPP_J_SESSION    ? &dpp__journal_session__descriptor
        : type == DPP_J_INDEXED  ? &dpp__journal_indexed__descriptor
        : type == DPP_J_CONSUMED ? &dpp__journal_consumed__descriptor
        : type == DPP_J_FAILED   ? &dpp__journal_failed__descriptor
        : type == DPP_J_EPOCH    ? &dpp__journal_epoch__descriptor
        : type == DPP_J_RESUME   ? &dpp__journal_resume__descriptor
        : type == DPP_J_ENDED    ? &dpp__journal_ended__descriptor
        : type == DPP_J_RESHAPE  ? &dpp__journal_reshape__descriptor
                                 : NULL;
    if (d == NULL) {
        DPP_WARN("journal_record_skipped type=%u reason=\"unknown type\"", type);
        return 0;
    }
    ProtobufCMessage *msg = protobuf_c_message_unpack(d, NULL, len, payload);
    if (msg == NULL)
        return DPP_EMSG; /* CRC-valid but not ours: stop rather than guess */
    if (type == DPP_J_SESSION) {
        const Dpp__JournalSession *js = (const Dpp__JournalSession *)msg;
        dpp_session_t *s = dpp_master_find_session(m, js->session_id);
        int has_key = js->token_key.len == DPP_CKPT_KEY_LEN;
        dpp_spec_t spec;
        char err[DPP_SPEC_ERRLEN];
        if (s == NULL &&
            dpp_spec_parse(js->spec_json, strlen(js->spec_json), &spec, err, sizeof err) == 0) {
            char **files = dpp_xcalloc(js->n_files + 1, sizeof *files);
            for (size_t i = 0; i < js->n_files; i++)
                files[i] = dpp_xstrdup(js->files[i]);
            s = dpp_session_new(js->session_id, &spec, dpp_xstrdup(js->table_path), files,
                                js->n_files);
            if (js->n_etags == js->n_files && js->n_sizes == js->n_files)
                for (size_t i = 0; i < js->n_files; i++)
                    if (js->etags[i][0])
                        dpp_session_file_object(s, i, js->etags[i], js->sizes[i]);
            if (s->spec.nsources > 0 && js->n_source_tables == s->spec.nsources &&
                js->n_file_sources == js->n_files) {
                char **tables = dpp_xcalloc(s->spec.nsources, sizeof *tables);
                tables[0] = s->table_path;
                for (unsigned k = 1; k < s->spec.nsources; k++)
                    tables[k] = dpp_xstrdup(js->source_tables[k]);
                dpp_session_set_sources(s, tables, js->file_sources);
            } else if (s->spec.nsources > 0) {
                /* a record that lost its sources: kept, but not run */
                char **tables = dpp_xcalloc(s->spec.nsources, sizeof *tables);
                uint32_t *none = dpp_xcalloc(s->nfiles + 1, sizeof *none);
                tables[0] = s->table_path;
                for (unsigned k = 1; k < s->spec.nsources; k++)
                    tables[k] = dpp_xstrdup(s->table_path);
                dpp_session_set_sources(s, tables, none);
                free(none);
                dpp_session_fail(s, "journal: the mixture's record has no sources");
            }
            if (js->submitted_unix_ms > 0)
                s->submitted_ms = js->submitted_unix_ms;
            dpp_master_add_session(m, s);
            if (has_key) {
                /* the journaled key, never a new one: the session's tokens
                 * were signed with it */
                memcpy(s->token_key, js->token_key.data, DPP_CKPT_KEY_LEN);
            } else {
                s->token_key_unsaved = 1;
                DPP_WARN("session_token_key_new session=%s reason=\"journaled by an older master "
                         "without a checkpoint-token key\" effect=\"a new key, journaled at the "
                         "next attach\"",
                         s->id);
            }
        } else if (s && s->token_key_unsaved && has_key) {
            /* the key a master made for a keyless record, journaled later */
            memcpy(s->token_key, js->token_key.data, DPP_CKPT_KEY_LEN);
            s->token_key_unsaved = 0;
        }
    } else if (type == DPP_J_INDEXED) {
        const Dpp__JournalIndexed *ji = (const Dpp__JournalIndexed *)msg;
        dpp_session_t *s = dpp_master_find_session(m, ji->session_id);
        if (s && ji->file < s->nfiles && ji->n_boundaries > 0) {
            dpp_file_t *f = &s->files[ji->file];
            int was = f->indexed;
            dpp_session_file_indexed(s, ji->file, ji->records, ji->boundaries, ji->n_boundaries);
            if (f->indexed && !was) {
                /* cached under what the count was computed from, never the
                 * file as it is now: it may have changed while we were down */
                f->index_size = ji->file_size;
                f->index_mtime_ns = ji->file_mtime_ns;
                dpp_master_index_cache_put(m, f,
                                           dpp_spec_index_key(dpp_session_file_spec(s, ji->file)));
            }
        }
    } else if (type == DPP_J_CONSUMED) {
        const Dpp__JournalConsumed *jc = (const Dpp__JournalConsumed *)msg;
        dpp_session_t *s = dpp_master_find_session(m, jc->session_id);
        if (s && s->state == SESSION_RUNNING && jc->epoch == s->epoch &&
            jc->generation == s->generation && jc->split_id < s->nsplits)
            dpp_session_consumed(s, jc->split_id, 0);
    } else if (type == DPP_J_EPOCH) {
        const Dpp__JournalEpoch *je = (const Dpp__JournalEpoch *)msg;
        dpp_session_t *s = dpp_master_find_session(m, je->session_id);
        if (s && s->state == SESSION_RUNNING && je->consumers > 0 && je->epoch >= s->epoch &&
            je->epoch < s->spec.epochs)
            dpp_session_set_world(s, je->epoch, je->consumers, je->generation);
        else if (s && s->state == SESSION_RUNNING && je->epoch > s->epoch &&
                 je->epoch < s->spec.epochs)
            dpp_session_set_epoch(s, je->epoch);
    } else if (type == DPP_J_RESUME) {
        const Dpp__JournalResume *jr = (const Dpp__JournalResume *)msg;
        dpp_session_t *s = dpp_master_find_session(m, jr->session_id);
        if (s && jr->generation == s->generation)
            dpp_session_resume(s, jr->rank, jr->epoch, jr->seq);
    } else if (type == DPP_J_RESHAPE) {
        const Dpp__JournalReshape *jr = (const Dpp__JournalReshape *)msg;
        dpp_session_t *s = dpp_master_find_session(m, jr->session_id);
        char why[512];
        /* (a snapshot's chain may skip generations: a world started again
         * from the tokens of an entry took a new one in its place) */
        if (s && jr->generation > s->generation &&
            dpp_session_reshape(s, jr->tokens.data,
                                (unsigned)(jr->tokens.len / DPP_CKPT_TOKEN_SIZE), jr->consumers,
                                jr->generation, why, sizeof why) != 0) {
            char q[1024];
            DPP_WARN("journal_record_skipped type=%u session=%s error=%s", type, s->id,
                     dpp_log_quote(why, q, sizeof q));
        }
    } else if (type == DPP_J_ENDED) {
        const Dpp__JournalEnded *je = (const Dpp__JournalEnded *)msg;
        dpp_session_t *s = dpp_master_find_session(m, je->session_id);
        if (s && s->state == SESSION_DONE && je->ended_unix_ms > 0)
            s->ended_ms = je->ended_unix_ms; /* when it ended, not when it was replayed */
    } else {
        const Dpp__JournalFailed *jf = (const Dpp__JournalFailed *)msg;
        dpp_session_t *s = dpp_master_find_session(m, jf->session_id);
        if (s) {
            dpp_session_fail(s, jf->error);
            s->cancelled = jf->cancelled;
            if (jf->ended_unix_ms > 0)
                s->ended_ms = jf->ended_unix_ms;
        }
    }
    protobuf_c_message_free_unpacked(msg, NULL);
    return 0;
}

void dpp_master_snapshot_session(dpp_session_t *s, dpp_journal_rec_t **recs, size_t *n,
                                 size_t *cap)
{
    size_t need = *n + 6 + s->nfiles + s->nsplits + s->nchain;
    if (need > *cap) {
        *cap = need * 2;
        *recs = dpp_xrealloc(*recs, *cap * sizeof **recs);
    }
    (*recs)[(*n)++] = dpp_master_session_rec(s);
    for (size_t i = 0; i < s->nfiles; i++)
        if (s->files[i].indexed)
            (*recs)[(*n)++] = dpp_master_indexed_rec(s, i);
    if (s->nchain > 0) {
        /* resumed at another world size in epoch gen_epoch: its plan is
         * made again from the world before and the resumes in turn */
        Dpp__JournalEpoch je = DPP__JOURNAL_EPOCH__INIT;
        je.session_id = s->id;
        je.epoch = s->gen_epoch;
        je.consumers = s->base_consumers;
        je.generation = s->base_generation;
        (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_EPOCH, &je.base);
        for (size_t c = 0; c < s->nchain; c++) {
            Dpp__JournalReshape jr = DPP__JOURNAL_RESHAPE__INIT;
            jr.session_id = s->id;
            jr.epoch = s->gen_epoch;
            jr.consumers = s->chain[c].n_new;
            jr.tokens.data = s->chain[c].tokens;
            jr.tokens.len = (size_t)s->chain[c].n_old * DPP_CKPT_TOKEN_SIZE;
            jr.generation = s->chain[c].generation;
            (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_RESHAPE, &jr.base);
        }
    } else if (s->generation > 0) {
        Dpp__JournalEpoch je = DPP__JOURNAL_EPOCH__INIT;
        je.session_id = s->id;
        je.epoch = s->epoch;
        je.consumers = s->spec.consumers;
        je.generation = s->generation;
        (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_EPOCH, &je.base);
    }
    if (s->epoch > 0 && (s->nchain > 0 ? s->epoch > s->gen_epoch : s->generation == 0)) {
        Dpp__JournalEpoch je = DPP__JOURNAL_EPOCH__INIT;
        je.session_id = s->id;
        je.epoch = s->epoch;
        (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_EPOCH, &je.base);
    }
    for (size_t i = 0; i < s->nsplits; i++) {
        if (s->splits[i].state != SPLIT_CONSUMED)
            continue;
        Dpp__JournalConsumed jc = DPP__JOURNAL_CONSUMED__INIT;
        jc.session_id = s->id;
        jc.epoch = s->epoch;
        jc.split_id = (uint32_t)i;
        jc.generation = s->generation;
        (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_CONSUMED, &jc.base);
    }
    if (s->state == SESSION_FAILED) {
        Dpp__JournalFailed jf = DPP__JOURNAL_FAILED__INIT;
        jf.session_id = s->id;
        jf.error = s->error ? s->error : (char *)"";
        jf.ended_unix_ms = s->ended_ms;
        jf.cancelled = s->cancelled;
        (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_FAILED, &jf.base);
    } else if (s->state == SESSION_DONE) {
        (*recs)[(*n)++] = ended_rec(s);
    }
}

/* Rewrites the journal as a snapshot of every session; a failure stops the
 * master (its state could no longer be made durable). Returns 0 or it. */
static int compact(dpp_master_t *m, const dpp_journal_stats_t *st)
{
    dpp_journal_rec_t *recs = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < m->nsessions; i++)
        dpp_master_snapshot_session(m->sessions[i], &recs, &n, &cap);
    int rc = dpp_journal_compact(m->journal, recs, n);
    for (size_t i = 0; i < n; i++)
        free((void *)recs[i].payload);
    free(recs);
    if (rc) {
        DPP_ERROR("journal_compaction_failed dir=%s error=\"%s\" action=stopping", m->state_dir,
                  dpp_strerror(rc));
        dpp_master_fail_stop(m);
        return rc;
    }
    for (size_t i = 0; i < m->nsessions; i++)
        m->sessions[i]->token_key_unsaved = 0; /* the snapshot carries every key */
    m->pruned_since_compact = 0;
    DPP_INFO("journal_compacted dir=%s bytes_before=%" PRIu64 " records=%zu", m->state_dir,
             st->file_size, n);
    return 0;
}

void dpp_master_maybe_compact(dpp_master_t *m)
{
    dpp_journal_stats_t st;
    dpp_journal_get_stats(m->journal, &st);
    if (st.file_size > m->journal_compact_bytes && st.file_size > 2 * st.snapshot_bytes)
        compact(m, &st);
}

void dpp_master_compact_pruned(dpp_master_t *m, size_t pruned)
{
    m->pruned_since_compact += pruned;
    dpp_journal_stats_t st;
    dpp_journal_get_stats(m->journal, &st);
    if (st.file_size > m->journal_compact_bytes && m->pruned_since_compact >= m->nsessions)
        compact(m, &st);
    else
        dpp_master_maybe_compact(m);
}

void dpp_master_check_journal(dpp_master_t *m)
{
    int rc = dpp_journal_check_path(m->journal);
    if (rc == 0 || m->stopping)
        return;
    /* Everything appended to an unlinked file is lost at the next restart:
     * write the whole state anew, at once, and say so. */
    DPP_ERROR("journal_gone dir=%s error=\"%s\" action=\"rewriting it from memory\" hint=\"the "
              "journal was deleted or replaced: check what touches the state dir\"",
              m->state_dir, rc == -ESTALE ? "the path names another file" : dpp_strerror(rc));
    dpp_journal_stats_t st;
    dpp_journal_get_stats(m->journal, &st);
    if (compact(m, &st) == 0)
        DPP_WARN("journal_recreated dir=%s sessions=%zu", m->state_dir, m->nsessions);
}
