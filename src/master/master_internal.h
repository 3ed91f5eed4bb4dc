/* SPDX-License-Identifier: Apache-2.0 */
/* The master's state, shared by its files: the hub (master.c), connections
 * (peer.c), leasing (lease.c), the RPC families (rpc_*.c), the journal glue
 * (persist.c), the index cache (index_cache.c) and metrics (metrics.c).
 * Loop thread only. */
#ifndef DPP_MASTER_INTERNAL_H
#define DPP_MASTER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "wire/handshake.h"
#include "daemon/listener.h"
#include "wire/conn.h"
#include "journal.h"
#include "base/u64set.h"
#include "master.h"
#include "session.h"

/* A peer's role: the index of its HELLO role in the listener's roles
 * ("ctl", "worker", "client"), plus one; ROLE_NONE before HELLO. */
typedef enum peer_role { ROLE_NONE, ROLE_CTL, ROLE_WORKER, ROLE_CLIENT } peer_role_t;

/* Makes the journal records written since the last call durable (one
 * fdatasync) and releases the frames held meanwhile; when the sync fails the
 * held frames are dropped and the master stops. */
void dpp_master_commit(dpp_master_t *m);

/* The journal failed: marks the master failed (it exits non-zero) and
 * stops it on the next turn of the loop. */
void dpp_master_fail_stop(dpp_master_t *m);

/* Sessions in one listing (dppctl list, workers): without ranks a session's
 * status is a few hundred bytes, so this many stay far below a frame. */
#define DPP_MASTER_MAX_LISTED 10000

/* Listings of s3:// tables run at once, each on a thread of its own (a
 * store that drips its pages holds one for up to --s3-list-timeout); more
 * wait their turn. Local tables are listed on libuv's threadpool, never
 * behind them. */
#define DPP_MASTER_S3_LISTINGS 8

/* How long an epoch whose splits were all consumed waits for worker reports
 * still due (dpp_session_unhold) before it ends without them. */
#define DPP_MASTER_HOLD_MAX_MS 10000

/* A connection the master accepted (daemon/listener.h owns it). */
typedef struct peer {
    dpp_peer_t base; /* first: the listener allocates and frees the struct */
    dpp_master_t *m;
    uint64_t worker_id;
    char data_addr[64];
    unsigned threads;
    unsigned lease_want;     /* a LeaseRequest waits for splits (at most this many) */
    unsigned index_cap;      /* index tasks the worker keeps queued (LeaseRequest) */
    unsigned index_out;      /* index tasks leased to it without an INDEX_DONE yet */
    unsigned splits_out;     /* splits leased to it without a SPLIT_DONE yet */
    uint64_t lease_since_ns; /* when that request arrived */
    uint64_t defer_since_ns; /* when it was first left waiting for a split's holder (0: not) */
    char held_session[24];   /* a client: the session whose rank it holds ("": none) */
    unsigned held_rank;
    struct peer *prev, *next; /* on the master's waiting list while lease_want > 0 */
    int waiting;
    dpp_u64set_t cache_keys; /* a worker: the split outputs its cache holds (key[1]) */
    struct dpp_submit_job *submit; /* dppctl: its submit whose table is being listed */
} peer_t;

static inline peer_role_t peer_role(const peer_t *p)
{
    return (peer_role_t)(p->base.hs.role + 1);
}

/* Every open peer: for (peer_t *p = first_peer(m); p; p = next_peer(p)). */
#define first_peer(m) ((peer_t *)(m)->lst.peers)
#define next_peer(p) ((peer_t *)(p)->base.next)

/* Split boundaries of files already indexed, so that a later session on the
 * same unchanged files needs no index task. Keyed by path, size, mtime and
 * the spec's index key (split_rows; for text also tokenizer and packing); kept for the master's lifetime and rebuilt from the journal's
 * index records at restart. */
typedef struct index_entry {
    struct index_entry *next; /* in its bucket */
    uint64_t hash;
    char *path;
    uint64_t size;
    int64_t mtime_ns;
    uint64_t key;
    uint64_t records;
    uint64_t *bounds;
    size_t nbounds;
} index_entry_t;

typedef struct dpp_index_cache {
    index_entry_t **buckets; /* [nbuckets], a power of two (0: empty) */
    size_t nbuckets, n;
} dpp_index_cache_t;

/* Buckets of the lease latency histogram (seconds): how long a worker's
 * LeaseRequest waited for work. */
#define DPP_LEASE_BUCKETS 12

#define DPP_MASTER_SNAPS 6
#define DPP_MASTER_SNAP_MS 10000

/* Counters since the master started, for /metrics. */
typedef struct dpp_master_counters {
    uint64_t sessions_submitted, splits_leased, splits_consumed, splits_released;
    uint64_t index_leased, index_done, resumes, cancels, takeovers;
    /* files and split positions grants looked at: with the cursors this
     * stays a small multiple of what they handed out, however many tasks
     * a session has (tests and /metrics hold it to that) */
    uint64_t grant_scanned, lease_replies;
    /* the workers' caches: splits leased to a worker holding them, and
     * splits served from a cache or made afresh by a worker with one */
    uint64_t cache_leases, cache_hits, cache_misses;
    uint64_t sessions_pruned, sessions_abandoned;
    /* planning time of sessions (submit to every file indexed), seconds */
    uint64_t plan_hist[DPP_LEASE_BUCKETS + 1];
    double plan_sum;
    uint64_t plan_count;
    /* splits consumed per second over the last few seconds (the timer) */
    double splits_rate;
    uint64_t rate_consumed;
    int64_t rate_ms;
    uint64_t rows_produced, rows_filtered, bytes_read;
    dpp_rejects_t rejects;
    uint64_t lease_hist[DPP_LEASE_BUCKETS + 1]; /* the last: +Inf */
    double lease_sum;
    uint64_t lease_count;
    /* group commits: the journal's fdatasync and the answers it released */
    uint64_t commit_hist[DPP_LEASE_BUCKETS + 1];
    double commit_sum;
    uint64_t commit_count, commit_records;
    /* the two histograms every DPP_MASTER_SNAP_MS, the last DPP_MASTER_SNAPS
     * times: dppctl status shows their quantiles over the last minute */
    struct dpp_master_snap {
        int64_t ms;
        uint64_t lease[DPP_LEASE_BUCKETS + 1], commit[DPP_LEASE_BUCKETS + 1];
    } snaps[DPP_MASTER_SNAPS];
    unsigned snap_next, nsnaps;
    int64_t started_ms;
} dpp_master_counters_t;

/* Upper bounds of the lease latency buckets, seconds. */
extern const double dpp_lease_bounds[DPP_LEASE_BUCKETS];
/* Upper bounds of the planning time buckets, seconds. */
extern const double dpp_plan_bounds[DPP_LEASE_BUCKETS];

struct dpp_master {
    uv_loop_t *loop;
    dpp_listener_t lst; /* every connection: dppctl, workers, clients */
    uv_timer_t timer;
    /* grants again when an idle worker's wait for a busy holder's split
     * ends (lease.c: DPP_CACHE_WAIT_MS); cache_wake_ns: that moment, 0 none */
    uv_timer_t cache_timer;
    uint64_t cache_wake_ns;
    char **roots; /* the local data roots, resolved */
    size_t nroots;
    /* the s3:// data roots (no trailing '/'), and the client that lists
     * them (NULL without such roots) */
    char **s3_roots;
    size_t ns3_roots;
    struct dpp_s3 *s3;
    /* a listing of an s3:// table: at most list_max_keys keys in
     * list_max_pages pages within list_timeout_s (--s3-list-*); at most
     * DPP_MASTER_S3_LISTINGS run at once, each on a thread of its own, the
     * rest wait in s3_queue (rpc_ctl.c) */
    uint64_t list_max_keys, list_max_pages;
    unsigned list_timeout_s;
    unsigned s3_listings;
    struct dpp_submit_job *s3_queue, *s3_queue_tail;
    char *state_dir;
    unsigned heartbeat_ms, worker_timeout_ms;
    char addr[64];
    int lock_fd;
    dpp_session_t **sessions; /* in submit order */
    size_t nsessions;
    /* sessions by id: open addressing, a power of two at least twice
     * nsessions (every message names its session; a retention of a day of
     * short sessions holds many) */
    dpp_session_t **by_id;
    size_t nby_id;
    int64_t retention_ms, idle_ms; /* --session-retention, --session-idle-timeout (0: never) */
    size_t pruned_since_compact;
    dpp_index_cache_t index_cache;
    /* every worker's cache_keys, a copy per worker holding the key: splits
     * some worker holds are left to it by a busy worker (lease.c) */
    dpp_u64set_t cache_holders;
    dpp_journal_t *journal;
    /* Group commit: handlers add journal records to the journal's buffer
     * (no syscall) and set commit_pending; every frame the master sends is
     * held in its connection (conn.hold, hold_frames: 1 until the stop),
     * and the connections holding some are on held_conns. Before the loop
     * waits for I/O again (prepare) and after each round of I/O callbacks
     * (check), dpp_master_commit() writes the buffer, syncs once if a record
     * asks for it and releases what was held, one write per connection:
     * nothing the master says depends on a record that is not durable, one
     * write and one fdatasync cover every change of a loop turn, and a
     * turn's answers to a peer share a write. */
    int commit_pending;
    int hold_frames;
    /* Workers whose LeaseRequest waits, oldest first (grants go in request
     * order); grant_due: something changed that may serve them, granted
     * once at the end of the loop turn (dpp_master_grant_soon). */
    peer_t *waiting, *waiting_tail;
    int grant_due;
    struct dpp_lease_pick *grant_picks; /* a grant's scratch, reused */
    struct Dpp__Lease *grant_leases, **grant_ptrs;
    size_t grant_cap;
    dpp_conn_t *held_conns;
    uint64_t commit_records; /* records written since the last sync */
    uv_prepare_t commit_prepare;
    uv_check_t commit_check;
    size_t journal_compact_bytes;
    uint64_t next_worker_id, next_lease_id;
    int stopping;
    int failed; /* stopped by an error (the journal): exit non-zero */
    dpp_master_counters_t n;
    dpp_auth_t auth; /* copied from the config; the token is the caller's */
    size_t max_spec_bytes;
    unsigned max_features;
    struct dpp_http *http; /* --http, NULL when not serving */
};

/* The session with id, or NULL. Valid until it is pruned (after its
 * retention) or the master is freed: do not keep it past the current
 * callback. */
dpp_session_t *dpp_master_find_session(dpp_master_t *m, const char *id);

/* Adds a session the master now owns (submitted or replayed). */
void dpp_master_add_session(dpp_master_t *m, dpp_session_t *s);

/* Session s has been planned (its splits known): counts its planning time
 * for /metrics. */
void dpp_master_count_planning(dpp_master_t *m, const dpp_session_t *s);

/* The session's idle timeout: the spec's idle_timeout_s, or the master's;
 * 0: never abandoned. */
int64_t dpp_master_idle_ms(const dpp_master_t *m, const dpp_session_t *s);

/* Workers registered now. */
unsigned dpp_master_live_workers(dpp_master_t *m);

#endif
