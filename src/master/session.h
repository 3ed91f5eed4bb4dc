/* SPDX-License-Identifier: Apache-2.0 */
/* A session at the master: its spec, its files with their record counts, and
 * the state of every split of the current epoch. A file whose record count
 * is not known yet gets an index task first; splits (record ranges of about
 * split_rows records) are planned once every file is indexed, and again for
 * every epoch (with `shuffle` each epoch deals its ranges in another order).
 * A plan is a pure function of the indexes, the spec and the epoch, so a
 * restarted master plans the same splits. Epoch e+1 is leased only after
 * every split of epoch e is consumed, so one epoch's state is kept. */
#ifndef DPP_MASTER_SESSION_H
#define DPP_MASTER_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "base/reject.h"
#include "crypto/checkpoint_token.h"
#include "spec/schema.h"
#include "spec/spec.h"
#include "spec/table.h"

typedef enum split_state {
    SPLIT_PENDING = 0,  /* waiting for a worker */
    SPLIT_LEASED = 1,   /* a worker is producing its blocks */
    SPLIT_PRODUCED = 2, /* the worker has every block; the client may not */
    SPLIT_CONSUMED = 3, /* the client of its rank delivered every block */
} split_state_t;

typedef enum session_state {
    SESSION_INDEXING = 0, /* record counts of some files are not known yet */
    SESSION_RUNNING = 1,
    SESSION_DONE = 2,
    SESSION_FAILED = 3,
} session_state_t;

/* A task's lease: who holds it. Splits and index tasks share it. */
typedef struct dpp_lease_ref {
    uint64_t lease_id; /* 0 when not leased */
    uint64_t worker_id;
} dpp_lease_ref_t;

typedef struct dpp_file {
    char *path;     /* absolute */
    char *rel_path; /* relative to the table */
    int indexed;
    uint64_t records;
    uint64_t *bounds; /* byte offsets of its splits' starts, plus the end */
    size_t nbounds;
    /* The file as its index saw it, which is what the index may be reused
     * for (index cache key); index_size 0: not to be reused. */
    uint64_t index_size;
    int64_t index_mtime_ns;
    dpp_lease_ref_t index_lease;
    /* An s3:// file: its ETag (malloc'd) and size as the listing gave them;
     * NULL and 0 for a local file. */
    char *etag;
    uint64_t size;
    unsigned source; /* a mixture's: the source whose table it is in (0 otherwise) */
} dpp_file_t;

/* A split: a window of records of one file, for one rank. The byte range is
 * the index's (whole records from a split_rows boundary); the worker passes
 * over record_skip records of it and produces record_count. */
typedef struct dpp_split {
    split_state_t state;
    dpp_lease_ref_t lease;
    uint64_t rows; /* as produced */
    uint32_t file;
    unsigned rank;
    uint32_t seq; /* position among its rank's splits, the order its client consumes them */
    uint64_t record_start; /* index in the file of the byte range's first record */
    uint64_t record_skip, record_count;
    uint64_t range_records; /* in the byte range, by the index (the worker checks it) */
    uint64_t byte_start, byte_end;
    /* its client acknowledged it before its worker's SPLIT_DONE came (they
     * travel different connections): the report, with the split's counts,
     * is still due (dpp_session_t.reports_due) */
    int report_due;
    /* out_take > 0: of the window's output rows, only [out_skip, out_skip +
     * out_take) are this split's (the client keeps those; the worker makes
     * the whole window). An elastic resume cuts partly delivered splits so
     * (dpp_session_reshape); 0: every row of the window. */
    uint64_t out_skip, out_take;
    unsigned source; /* a mixture's: its file's source */
} dpp_split_t;

/* An elastic resume of the session (dpp_session_reshape): the old world's
 * checkpoint tokens (n_old of them, in rank order), the new world size and
 * the generation of the plan it made. Its tokens carry the generation of
 * the entry before it (the chain's first: base_generation); generations
 * need not be consecutive (a world started again from the tokens of an
 * earlier entry replaces that entry and those after it). */
typedef struct dpp_reshape {
    uint8_t *tokens;
    unsigned n_old, n_new;
    unsigned generation;
} dpp_reshape_t;

/* A feature the spec names, as the schema check sees it
 * (src/master/checks.c). */
typedef struct dpp_feature_check {
    dpp_spec_name_t n;       /* points into the session's spec */
    int seen;                /* some record had it */
    uint64_t absent_records; /* records of splits none of whose records had it */
} dpp_feature_check_t;

/* The client reading a rank: its id (AttachRequest.client_id; 0: none yet,
 * or forgotten by a restart) and, while its connection is open, the peer
 * (the master's peer_t, opaque here). */
typedef struct dpp_rank_holder {
    uint64_t client_id;
    void *peer;
    int64_t since_ms; /* its first attach */
} dpp_rank_holder_t;

/* What a rank's trainers reported (with their attach refreshes): batches
 * handed out, time waiting inside next(), time open, and the wait histogram
 * (bucket i: waits < 2^i * 10 us). */
typedef struct dpp_rank_counts {
    uint64_t batches, wait_ns, open_ns;
    uint64_t hist[16];
} dpp_rank_counts_t;

/* A rank's counts over every client that read it: a client reports its own
 * counts since it opened, so a takeover (or a read of a finished session)
 * adds to what the clients before it reported instead of replacing it. */
typedef struct dpp_rank_report {
    dpp_rank_counts_t sum;    /* every client of the rank so far */
    dpp_rank_counts_t before; /* the clients before the current one */
    uint64_t client_id;       /* the current one */
} dpp_rank_report_t;

typedef struct dpp_session {
    char id[24];
    dpp_spec_t spec;
    char *spec_json; /* normalised, sent with every lease */
    char *table_path;
    dpp_file_t *files;
    size_t nfiles, files_indexed;
    size_t index_next;   /* no file before it waits for an index task */
    dpp_split_t *splits; /* [nsplits], current epoch; planned once indexed */
    size_t nsplits;
    unsigned epoch;
    session_state_t state;
    int cancelled; /* SESSION_FAILED by dppctl cancel: shown as "cancelled" */
    char *error;
    size_t counts[4]; /* splits of the current epoch per split_state_t */
    uint64_t rows_produced, rows_filtered;
    uint64_t text_documents, text_tokens, text_padding; /* a text session's, summed */
    uint64_t rate_tokens;                               /* text_tokens at the last rate */
    double tokens_rate;                                 /* tokens a second, recently */
    dpp_rejects_t rejects;
    int64_t *rank_seen_ms;      /* [consumers]: last attach of each rank's client, 0: never */
    size_t *rank_first;         /* [consumers]: id of each rank's first split this epoch */
    size_t *rank_count;         /* [consumers]: splits of each rank this epoch */
    unsigned *rank_prefetch;    /* [consumers]: order deterministic: splits leased ahead */
    size_t *rank_cursor;        /* [consumers]: no split before this position is unconsumed */
    size_t *rank_pending;       /* [consumers]: no split before this position is pending */
    /* [consumers]: no split from this position on was leased this epoch,
     * and no split before this one is report_due (SIZE_MAX: none is): what
     * a worker's loss looks at lies between the two and the cursor */
    size_t *rank_leased_end, *rank_report_lo;
    uint64_t release_scanned;   /* splits worker losses looked at, for tests */
    unsigned grant_rank;        /* the rank the next grant starts with (they take turns) */
    uint64_t cursor_steps;      /* the two cursors' moves, for tests: amortised O(1) a split */
    uint64_t *prev_leases;      /* last epoch's lease ids: their SPLIT_DONE may come late */
    dpp_rank_report_t *reports; /* [consumers] */
    dpp_rank_holder_t *holders; /* [consumers]: which client reads each rank */
    size_t nprev;
    /* Wall-clock times (dpp_wall_ms): submitted (journaled), planned (every
     * file indexed), ended (done or failed; journaled; 0 while live), and
     * the last attach of any of its clients (or the submit, or the master's
     * start: the idle timeout counts from it). */
    int64_t submitted_ms, planned_ms, ended_ms, client_ms;
    /* splits consumed since it started (every epoch), and per second over
     * the last few seconds (the master's timer) */
    uint64_t consumed_total, rate_consumed;
    uint64_t cache_fp; /* dpp_spec_cache_fingerprint of the spec */
    /* the workers' cache: splits served from RAM, from disk, made by a
     * worker with a cache, and bytes served from it */
    uint64_t splits_from_ram, splits_from_disk, splits_made, bytes_from_cache;
    /* splits consumed before their worker's report came; with every split
     * consumed, the epoch is held (epoch_held, since held_ms) until the
     * reports are in, so that the checks and the end see every count */
    size_t reports_due;
    int epoch_held;
    int64_t held_ms;
    /* ranks taken over from a reader that was gone, and the rows that may
     * have come twice (the splits it stopped in, whole) */
    uint32_t takeovers;
    uint64_t redelivered_max;
    /* the schema check of epoch 0 (src/master/checks.c): the features the
     * spec names, the names a record had (NUL after each, for "did you
     * mean"), the first rejected record's detail; checks_done once epoch
     * 0 passed */
    dpp_feature_check_t *fchecks;
    size_t nfchecks;
    char *record_names;
    size_t nrecord_names;
    char *first_reject;
    int checks_done;
    double splits_rate;
    /* HMAC-SHA256 key of the session's checkpoint tokens, random, made with
     * the session and journaled with it (JournalSession.token_key); sent to
     * its clients in every AttachReply */
    uint8_t token_key[DPP_CKPT_KEY_LEN];
    /* replayed from a journal record without a key: token_key was made anew
     * at this start and must be journaled before a client is given it */
    int token_key_unsaved;
    /* Elastic resumes (docs/guarantees.md#elastic-resume). generation: how
     * many the session had (in every lease, block and token since).
     * spec.consumers is the world size now. The plan of epoch gen_epoch is
     * made from the plan base_consumers ranks had at base_generation, cut
     * again by each resume of `chain` in turn (the resumes of that epoch),
     * so that a token of it can roll the session back to it; later epochs
     * are planned for spec.consumers ranks as usual. */
    unsigned generation, gen_epoch, base_consumers, base_generation;
    dpp_reshape_t *chain;
    size_t nchain;
    /* of epoch gen_epoch's plan (with a chain), which clients still in it
     * need after the session moved on: its padded batch count and its cut
     * splits (rank, position, out_skip, out_take), by rank and position */
    uint64_t gen_pad_batches;
    struct dpp_trim {
        unsigned rank;
        uint32_t seq;
        uint64_t skip, take;
    } *gen_trims;
    size_t ngen_trims;
    /* [spec.consumers] of epoch gen_epoch's plan: the records each rank
     * gets in the epochs after it (dpp_session_plain_rank_records) */
    uint64_t *gen_plain_records;
    /* A mixture (spec.nsources > 0): each source's table (resolved), spec
     * as its leases carry it, cache fingerprint; its rows consumed over the
     * session, and this epoch's (whose share of the source's records says
     * how many times it was read, with exhausted "repeat"). */
    char **source_tables;
    char **source_json;
    uint64_t *source_fp;
    uint64_t *source_rows, *source_epoch_rows;
    uint64_t *source_records; /* every file of it */
} dpp_session_t;

/* The spec the splits and index tasks of file i are made with: its
 * source's in a mixture, else the session's. */
static inline const dpp_spec_t *dpp_session_file_spec(const dpp_session_t *s, size_t i)
{
    return s->spec.nsources ? &s->spec.sources[s->files[i].source].spec : &s->spec;
}
static inline const char *dpp_session_file_json(const dpp_session_t *s, size_t i)
{
    return s->spec.nsources ? s->source_json[s->files[i].source] : s->spec_json;
}
static inline uint64_t dpp_session_file_fp(const dpp_session_t *s, size_t i)
{
    return s->spec.nsources ? s->source_fp[s->files[i].source] : s->cache_fp;
}

/* Splits a rank's client may have in flight beyond its first unconsumed one
 * when it does not say (order deterministic). */
#define DPP_SESSION_DEFAULT_PREFETCH 4

/* Makes a session at epoch 0 from the listed files (absolute paths under
 * table_path, taken over with the table path and the spec's contents; the
 * caller's spec is zeroed). Nothing is stat'ed: index state starts
 * unknown (dpp_master_index_cache_apply may know it). The session gets a fresh random checkpoint-token key (a replay
 * then puts the journaled one in its place). Aborts on out-of-memory, or
 * when the kernel has no randomness to give (master only). */
dpp_session_t *dpp_session_new(const char *id, dpp_spec_t *spec, char *table_path, char **files,
                               size_t nfiles);

/* A mixture's files (dpp_session_new's, in source order): file i is in
 * source file_source[i], whose table is table_paths[source] (taken over,
 * with the array; table_paths[0] is the session's table_path). Each file's
 * rel_path is made relative to its own table. */
void dpp_session_set_sources(dpp_session_t *s, char **table_paths, const uint32_t *file_source);

/* File i of s is an s3:// object listed with etag and size (copied). */
void dpp_session_file_object(dpp_session_t *s, size_t i, const char *etag, uint64_t size);
void dpp_session_free(dpp_session_t *s);

/* The most splits an epoch's plan of a mixture may hold (a mixture's plan
 * cuts windows, and with exhausted "repeat" reads a small source many
 * times over: its size follows the spec's numbers, not the index). */
#define DPP_SESSION_MAX_PLAN_SPLITS (1u << 22)

/* Whether an epoch of s can be planned for nr ranks within
 * DPP_SESSION_MAX_PLAN_SPLITS (only a mixture's can fail: a plain plan is
 * no larger than its files' indexes): 0, or DPP_ESPEC with why naming the
 * source, the figures and what to change. Needs every file indexed. Pure. */
int dpp_session_plan_check(const dpp_session_t *s, unsigned nr, char *why, size_t whylen);

/* Records file i's index: `records` records, split boundaries bounds[0..n)
 * (copied). When that was the last file missing, plans the splits and the
 * session starts running (or fails, when dpp_session_plan_check refuses).
 * Returns 1 when splits became pending. */
int dpp_session_file_indexed(dpp_session_t *s, size_t i, uint64_t records, const uint64_t *bounds,
                             size_t n);

/* Moves split i to state st, keeping counts. */
void dpp_session_set(dpp_session_t *s, size_t i, split_state_t st);

/* The rank that consumes split i. */
static inline unsigned dpp_session_rank_of(const dpp_session_t *s, size_t i)
{
    return s->splits[i].rank;
}

/* Records rank `rank` gets per epoch (0 while indexing). */
uint64_t dpp_session_rank_records(const dpp_session_t *s, unsigned rank);

/* Records rank `rank` gets in an epoch planned for the session's world as
 * usual: dpp_session_rank_records(), but while the current epoch is one an
 * elastic resume re-planned, what the epochs after it give the rank. */
uint64_t dpp_session_plain_rank_records(const dpp_session_t *s, unsigned rank);

/* Splits of the current epoch that go to `rank` (0 while indexing). */
static inline size_t dpp_session_rank_splits(const dpp_session_t *s, unsigned rank)
{
    return s->rank_count ? s->rank_count[rank] : 0;
}

/* Position of rank r's first split of this epoch that is not consumed
 * (its split count when all are). Amortised O(1). */
size_t dpp_session_rank_cursor(dpp_session_t *s, unsigned r);

/* Rank r's first pending split (position among its splits; rank_count[r]
 * when none is), found from where the last call left off. */
size_t dpp_session_rank_pending(dpp_session_t *s, unsigned r);

/* Rank r's splits that may be leased now are the pending ones among
 * positions [dpp_session_rank_cursor(), this end). With order deterministic
 * the end is rank_prefetch splits past the first unconsumed one, which
 * bounds what the rank's client buffers; with order fastest, every split. */
size_t dpp_session_lease_end(dpp_session_t *s, unsigned r);

/* Batches every rank gets per epoch with remainder "pad" (0 otherwise or
 * while indexing). */
uint64_t dpp_session_pad_batches(const dpp_session_t *s);

/* Client client_id of rank r reports its counts since it opened (c). */
void dpp_session_report(dpp_session_t *s, unsigned r, uint64_t client_id,
                        const dpp_rank_counts_t *c);

/* Rank `rank` resumes from a checkpoint token at split position seq of
 * epoch: its splits before it count as consumed, those from it on are
 * produced again. A token from an earlier epoch rolls the session back to
 * that epoch (every other rank's splits of it count as consumed: they
 * resume with their own tokens). Returns 0, or DPP_ETOKEN when the
 * position is not one of this session's (see docs/protocol.md#resume). */
int dpp_session_resume(dpp_session_t *s, unsigned rank, unsigned epoch, unsigned seq);

/* Rows of split sp in its rank's epoch: its window's records, or with a
 * cut (out_take > 0) the part of them it keeps. Upper bounds with filters. */
static inline uint64_t dpp_split_rows(const dpp_split_t *sp)
{
    if (sp->out_take == 0)
        return sp->record_count;
    uint64_t left = sp->record_count > sp->out_skip ? sp->record_count - sp->out_skip : 0;
    return sp->out_take < left ? sp->out_take : left;
}

/* An elastic resume: the old world's checkpoint tokens (n_old of them,
 * DPP_CKPT_TOKEN_SIZE bytes each, rank i's i-th; their MACs checked by the
 * caller with dpp_session_check_token) give each rank's position, and the
 * rest of their epoch is planned again for n_new ranks: every row not
 * before some rank's position exactly once (a split a rank stopped inside
 * goes on from its position, cut with out_skip/out_take), dealt to the new
 * ranks in old rank and split order as plan_epoch deals (equal batches per
 * rank as the remainder policy says). Tokens at their epoch's end count as
 * at the next epoch's start; all must then be at one epoch, which the
 * session is rolled back or forward to. Tokens that are an entry of the
 * chain (dpp_session_chain_find: a world made from them is started again)
 * are not checked again: the chain is cut before that entry and the resume
 * made anew, so that whatever the worlds made from them read counts for
 * nothing. The session gets plan generation `generation` (above its own:
 * the next one live, the journaled one on replay); every rank's reader is
 * forgotten. With generation 0 only checks. Returns 0, or DPP_ETOKEN with
 * why naming the token and field. */
int dpp_session_reshape(dpp_session_t *s, const uint8_t *tokens, unsigned n_old, unsigned n_new,
                        unsigned generation, char *why, size_t whylen);

/* The entry of s's chain of elastic resumes whose tokens are
 * tokens[0..len) byte for byte, or NULL. Valid until the chain changes. */
const dpp_reshape_t *dpp_session_chain_find(const dpp_session_t *s, const uint8_t *tokens,
                                            size_t len);

/* Whether rank r of the world the last elastic resume made has read
 * anything of it: a split of the current epoch consumed, or the session
 * past the re-planned epoch with r having had splits in it. Another client
 * that opens rank r with that resume's tokens is then that rank started
 * again (dpp_session_resume back to the re-planned epoch's start), not a
 * rank of the same world opening late. */
int dpp_session_rank_went_on(const dpp_session_t *s, unsigned r);

/* Checks the checkpoint token token[0..len) that an attach for rank `rank`
 * presents to resume, asking for split position req_seq of req_epoch (which
 * must be the token's): its layout and version, its MAC under s's token
 * key, and every field against the plan: session id, rank (< consumers),
 * epoch (at most the session's current one: an earlier one is the rollback
 * dpp_session_resume() allows; the session's epoch count only once it is
 * done), split position (at most the rank's split count in that epoch's
 * plan, which is a position's end), rank_splits (that count, or unknown),
 * block index (at most the blocks the split's records can fill, its end
 * marker included), row (below batch_size and the rows that block can hold)
 * and batches (no more than the records before the position can fill).
 * Pure: changes nothing in s. Returns 0 with *t the token's fields and
 * *plan what the plan says at the token's position (zeros while indexing or
 * for a token taken after the last epoch), or DPP_ETOKEN with
 * why ("FIELD: the token says X, the plan says Y"; NUL-terminated when
 * whylen > 0). A failed session's plan is not checked (nothing will act on
 * the token: the reply tells the client that the session failed). */
typedef struct dpp_token_plan {
    uint32_t rank_splits;   /* splits of the rank in the token's epoch */
    uint64_t split_records; /* records of the split at the token's position (0: the epoch's end) */
} dpp_token_plan_t;
int dpp_session_check_token(const dpp_session_t *s, const void *token, size_t len, unsigned rank,
                            unsigned req_epoch, unsigned req_seq, dpp_ckpt_token_t *t,
                            dpp_token_plan_t *plan, char *why, size_t whylen);

/* Marks split i consumed. When that completes the epoch, starts the next one
 * (every split pending again) or ends the session. Returns 1 when new splits
 * became pending, else 0. live: a client's acknowledgement (not a replay or
 * a token's position): a split its worker has not reported yet is marked
 * report_due, and an epoch whose last split that was is held instead of
 * completed (dpp_session_unhold). */
int dpp_session_consumed(dpp_session_t *s, size_t i, int live);

/* 1 when a split of rank r in the current epoch is report_due. */
int dpp_session_rank_reports_due(const dpp_session_t *s, unsigned r);

/* Split i's worker report arrived after its client's acknowledgement. */
void dpp_session_reported(dpp_session_t *s, size_t i);

/* A held epoch ends when no report is due any more, or at once with force
 * (its worker's reports are not coming: they are dropped). Returns -1 when
 * nothing changed, else what dpp_session_consumed() returns for the split
 * that completes an epoch (1: the next epoch began; 0: the session is
 * done). */
int dpp_session_unhold(dpp_session_t *s, int force);

/* Returns every task leased to worker_id (index tasks, and splits leased or
 * produced but not yet consumed) to pending. Returns how many went back. */
size_t dpp_session_release_worker(dpp_session_t *s, uint64_t worker_id);

/* The same for rank r's splits only: its client lost its connection to the
 * worker, and the blocks in flight on it (queued, or in the kernel's
 * buffers) may be lost. Duplicates of what did arrive are dropped by the
 * client. Returns how many went back. */
size_t dpp_session_release_rank_worker(dpp_session_t *s, unsigned r, uint64_t worker_id);

/* Puts a running session at `epoch`, planned, with every split pending
 * (replaying a journal snapshot). */
void dpp_session_set_epoch(dpp_session_t *s, unsigned epoch);

/* The same for a session resumed at another world size before: `epoch`
 * planned for `consumers` ranks at `generation` (a journal snapshot). */
void dpp_session_set_world(dpp_session_t *s, unsigned epoch, unsigned consumers,
                           unsigned generation);

/* Marks the session failed with a message (copied). */
void dpp_session_fail(dpp_session_t *s, const char *message);

const char *dpp_session_state_name(session_state_t st);

/* What status, the metrics and dppctl call s's state: its state's name, or
 * "cancelled" for a session dppctl cancel ended. */
const char *dpp_session_state_label(const dpp_session_t *s);

#endif
