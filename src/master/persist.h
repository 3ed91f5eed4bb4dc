/* SPDX-License-Identifier: Apache-2.0 */
/* The master's journal glue: the records that make its state durable (the
 * Journal* messages of proto/dpp.proto), their replay at start and the
 * snapshot that compacts them. Loop thread only. */
#ifndef DPP_MASTER_PERSIST_H
#define DPP_MASTER_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "journal.h"
#include "master.h"
#include "session.h"

/* Journal record types (payloads: the Journal* messages of proto/dpp.proto). */
enum {
    DPP_J_SESSION = 1,
    DPP_J_INDEXED = 2,
    DPP_J_CONSUMED = 3,
    DPP_J_FAILED = 4,
    DPP_J_EPOCH = 5,
    DPP_J_RESUME = 6,
    DPP_J_ENDED = 7,
    DPP_J_RESHAPE = 8,
};

/* Packs msg into a record of `type`; its payload is heap memory that
 * dpp_master_journal_put() frees. */
dpp_journal_rec_t dpp_master_pack_rec(uint8_t type, const ProtobufCMessage *msg);

/* The record that recreates session s (spec, table, files). */
dpp_journal_rec_t dpp_master_session_rec(const dpp_session_t *s);

/* The record of file i's index in session s. */
dpp_journal_rec_t dpp_master_indexed_rec(const dpp_session_t *s, size_t i);

/* Appends to recs (grown, *n of *cap) the records that rebuild session s
 * (compaction's snapshot): its record, its indexes, its epoch (with an
 * elastic resume's world before it and the resumes), its consumed splits. */
void dpp_master_snapshot_session(dpp_session_t *s, dpp_journal_rec_t **recs, size_t *n,
                                 size_t *cap);

/* Writes recs[0..n) to the journal and frees their payloads. They become
 * durable at the loop turn's group commit (dpp_master_commit()); until then
 * every frame the master sends is held, so the caller may apply the change
 * and answer at once. A master that cannot journal would acknowledge state a
 * restart loses: on an error it logs, marks itself failed and stops; the
 * error is returned. */
int dpp_master_journal_put(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n);

/* Like dpp_master_journal_put(), but written to the file before it returns
 * (the journal buffers a turn's records otherwise): for a caller that tells
 * its requester why the write failed (disk full at a submit). */
int dpp_master_journal_put_now(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n);

/* Like dpp_master_journal_put(), for records whose loss a restart repairs by
 * itself (a file's index: the replayed session indexes the file again and,
 * a plan being a function of the files, plans the same splits). They ask
 * for no commit and hold no answer: the next commit makes them durable with
 * everything before it, and since the journal is one file appended in
 * order, no later record (a consumed split of their plan) can be durable
 * without them. While a table is indexed, this is what lets workers get
 * their next index tasks without waiting for an fdatasync per answer. */
int dpp_master_journal_put_lazy(dpp_master_t *m, dpp_journal_rec_t *recs, size_t n);

/* Rewrites the journal as a snapshot of the current state once it has grown
 * past --journal-compact-kb and to more than twice its last snapshot. Call
 * it after a change is applied, never between journaling and applying: the
 * snapshot would miss the change. */
void dpp_master_maybe_compact(dpp_master_t *m);

/* Fails session s with message (copied), logged with `what`
 * ("cause=...") and journaled. */
void dpp_master_fail_session(dpp_master_t *m, dpp_session_t *s, const char *what,
                             const char *message);

/* Session s is done: says so and journals when (the retention counts from
 * it). */
void dpp_master_session_done(dpp_master_t *m, dpp_session_t *s);

/* After a change that may have ended epoch `epoch` of s (more: what
 * dpp_session_consumed() or dpp_session_unhold() returned): says the
 * session is done or the epoch is, and lets grants and compaction see the
 * new state. */
void dpp_master_epoch_moved(dpp_master_t *m, dpp_session_t *s, unsigned epoch, int more);

/* The dpp_journal_open() callback (arg: the master): rebuilds one journaled
 * change. A record that no longer applies is skipped. */
int dpp_master_replay_record(void *arg, uint8_t type, const uint8_t *payload, size_t len);

/* Checks that the journal file is still in place (not unlinked or replaced
 * under the master); when it is not, rewrites it from memory with a
 * snapshot, loudly, or stops the master if that fails. From the timer. */
void dpp_master_check_journal(dpp_master_t *m);

/* Sessions were pruned: once they are at least as many as the sessions
 * left (most of the journal then describes what is gone) and the journal
 * is past --journal-compact-kb, it is rewritten as a snapshot, so that a
 * stream of short sessions leaves it bounded by what is retained. */
void dpp_master_compact_pruned(dpp_master_t *m, size_t pruned);

#endif
