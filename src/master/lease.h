/* SPDX-License-Identifier: Apache-2.0 */
/* The exactly-once leasing rules: which task goes to which worker, what a
 * lost worker gives back, and which SPLIT_DONE, INDEX_DONE and consumed
 * acknowledgements still count (fencing by lease id). The rules are pure
 * functions over the master's sessions, testable without sockets;
 * dpp_master_grant_leases() is the one place that sends what they chose.
 * Split states themselves move in session.c. Loop thread only. */
#ifndef DPP_MASTER_LEASE_H
#define DPP_MASTER_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "base/u64set.h"
#include "master.h"
#include "session.h"

/* A rank whose client has not attached for this long gets no new leases
 * (clients refresh their attach every second). */
#define RANK_ABSENT_MS 5000

/* A task the rules chose: file i's index task, or split i of the current
 * epoch. session points into the master's sessions. */
typedef struct dpp_lease_pick {
    dpp_session_t *session;
    size_t i;
    int index; /* 1: an index task */
} dpp_lease_pick_t;

/* Chooses tasks to lease now into out[0..max_index + max_splits), changing
 * no state beyond its cursors (index_next, dpp_session_rank_cursor()): up to
 * max_index index tasks not yet leased (they unblock planning), then up to
 * max_splits splits, in session and rank order, the pending splits of every
 * rank whose client attached within RANK_ABSENT_MS of now_ms, from its first
 * unconsumed split to dpp_session_lease_end(). With asker (NULL: no
 * regard for the workers' caches), a rank's share starts with the splits
 * among its next DPP_CACHE_LOOKAHEAD pending ones that the asking worker's
 * cache holds, then goes on in order; a busy asker passes over the splits
 * another worker holds (m->cache_holders), counted in asker->left, while an
 * idle one takes them. Returns how many. */
#define DPP_CACHE_LOOKAHEAD 64
/* An idle worker takes a split a busy worker holds once its request has
 * waited this long (delay scheduling, as Spark's locality wait): a cache
 * hit takes a few milliseconds, making the split again tens to hundreds,
 * so the holder is worth a short wait, but no split waits for it longer
 * while another worker has nothing to do. */
#define DPP_CACHE_WAIT_MS 30
typedef struct dpp_lease_asker {
    const dpp_u64set_t *held; /* the split outputs its cache holds */
    int idle;                 /* it takes splits another holds */
    size_t left;              /* out: splits passed over for their holders */
} dpp_lease_asker_t;
size_t dpp_master_choose_leases(dpp_master_t *m, int64_t now_ms, dpp_lease_pick_t *out,
                                size_t max_index, size_t max_splits, dpp_lease_asker_t *asker);


/* Leases a chosen task to worker_id under a new lease id (a split becomes
 * SPLIT_LEASED); a lease id it had before is revoked by that. Returns the
 * new lease id. */
uint64_t dpp_master_lease_take(dpp_master_t *m, const dpp_lease_pick_t *t, uint64_t worker_id);

/* Answers the waiting LeaseRequests that pending work can serve, oldest
 * first, with the tasks dpp_master_choose_leases() picks for each; stops
 * at the first request nothing is left for. */
void dpp_master_grant_leases(dpp_master_t *m);

/* Something changed that may serve a waiting request (a split back to
 * pending, a rank attached or done with a split, a new session): the grant
 * runs once at the end of the loop turn (master.c), whatever number of
 * messages asked for it in the turn. */
void dpp_master_grant_soon(dpp_master_t *m);

/* A worker's LeaseRequest waits (at the end of the list), or no longer
 * does (answered, or the worker gone). */
struct peer;
void dpp_master_wait_lease(dpp_master_t *m, struct peer *p);
void dpp_master_unwait_lease(dpp_master_t *m, struct peer *p);

/* The same for one worker's connection (a peer_t of master_internal.h);
 * patient: it takes no split another worker's cache holds, even when idle.
 * Returns the tasks it could have taken of each kind that were not there:
 * (*short_index, *short_splits) set when fewer than it asked for were. */
size_t dpp_master_grant_peer(dpp_master_t *m, struct peer *p, int patient, int *short_index,
                             int *short_splits);

/* Forgets what worker p's cache holds (it reset its list or went away). */
void dpp_master_forget_cache(dpp_master_t *m, struct peer *p);

/* A worker is gone: every task leased to it (index tasks, and splits leased
 * or produced but not consumed) goes back to pending and is granted to the
 * workers waiting. Returns how many went back. */
size_t dpp_master_release_worker(dpp_master_t *m, uint64_t worker_id);

/* What a worker's SPLIT_DONE does. */
typedef enum dpp_split_done {
    DPP_SPLIT_DONE_IGNORED,  /* a revoked or unknown lease, or a failed session */
    DPP_SPLIT_DONE_COUNTED,  /* its client already consumed the split: counters only */
    DPP_SPLIT_DONE_PRODUCED, /* the split's current lease: it becomes produced */
} dpp_split_done_t;

/* Judges a SPLIT_DONE of worker_id naming (session_id, split_id, lease_id).
 * For COUNTED and PRODUCED *session is set; for PRODUCED *split too. A
 * lease of the epoch before (the client consumed the split before the
 * worker's SPLIT_DONE arrived) counts; a re-leased split's old lease is
 * ignored. Changes nothing. */
dpp_split_done_t dpp_master_split_done(dpp_master_t *m, const char *session_id, uint32_t split_id,
                                       uint64_t lease_id, uint64_t worker_id,
                                       dpp_session_t **session, size_t *split);

/* Split i (PRODUCED by dpp_master_split_done()) has every block at its
 * worker: `rows` rows. */
void dpp_master_split_produced(dpp_session_t *s, size_t i, uint64_t rows);

/* Session session_id when file `file`'s index task is still lease_id, held
 * by worker_id while the session indexes, or NULL: a stale INDEX_DONE. */
dpp_session_t *dpp_master_index_lease(dpp_master_t *m, const char *session_id, uint32_t file,
                                      uint64_t lease_id, uint64_t worker_id);

/* The session in which a client's acknowledgement of (epoch, split_id) by
 * rank, reading the plan of `generation`, still changes something: running,
 * the current epoch and generation, the rank's own split, not consumed yet. NULL for a late, foreign or repeated one. */
dpp_session_t *dpp_master_consumed_split(dpp_master_t *m, const char *session_id, unsigned epoch,
                                         uint32_t split_id, unsigned rank, unsigned generation);

#endif
