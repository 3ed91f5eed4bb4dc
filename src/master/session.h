/* SPDX-License-Identifier: Apache-2.0 */
/* A session at the master: its spec, its files (one split per file) and the
 * state of every split of the current epoch. Epoch e+1 is leased only once
 * every split of epoch e is consumed, so only one epoch's state is kept. */
#ifndef DPP_MASTER_SESSION_H
#define DPP_MASTER_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec.h"

typedef enum split_state {
    SPLIT_PENDING = 0,  /* waiting for a worker */
    SPLIT_LEASED = 1,   /* a worker is producing its blocks */
    SPLIT_PRODUCED = 2, /* the worker has every block; the client may not */
    SPLIT_CONSUMED = 3, /* the client of its rank delivered every block */
} split_state_t;

typedef enum session_state {
    SESSION_RUNNING = 0,
    SESSION_DONE = 1,
    SESSION_FAILED = 2,
} session_state_t;

typedef struct dpp_split {
    split_state_t state;
    uint64_t lease_id; /* of the current lease, 0 when pending */
    uint64_t worker_id;
    uint64_t rows;
} dpp_split_t;

typedef struct dpp_session {
    char id[24];
    dpp_spec_t spec;
    char *spec_json; /* normalised, sent with every lease */
    char *table_path;
    char **files;
    size_t nfiles;
    dpp_split_t *splits; /* [nfiles], current epoch */
    unsigned epoch;      /* current epoch */
    session_state_t state;
    char *error;
    size_t counts[4]; /* splits of the current epoch per split_state_t */
    uint64_t rows_produced, records_rejected;
} dpp_session_t;

/* Makes a running session at epoch 0 with every split pending. Takes
 * ownership of spec's contents (the caller's spec is zeroed), table_path and
 * files. Aborts on out-of-memory (master only). */
dpp_session_t *dpp_session_new(const char *id, dpp_spec_t *spec, char *table_path, char **files,
                               size_t nfiles);
void dpp_session_free(dpp_session_t *s);

/* Moves split i to state st, keeping counts. */
void dpp_session_set(dpp_session_t *s, size_t i, split_state_t st);

/* The rank that consumes split i. */
static inline unsigned dpp_session_rank_of(const dpp_session_t *s, size_t i)
{
    return (unsigned)(i % s->spec.consumers);
}

/* Splits of one epoch that go to `rank`. */
size_t dpp_session_rank_splits(const dpp_session_t *s, unsigned rank);

/* Marks split i consumed. When that completes the epoch, starts the next one
 * (every split pending again) or ends the session. Returns 1 when new splits
 * became pending, else 0. */
int dpp_session_consumed(dpp_session_t *s, size_t i);

/* Returns every split leased to or produced by worker_id and not yet consumed
 * to pending. Returns how many went back. */
size_t dpp_session_release_worker(dpp_session_t *s, uint64_t worker_id);

const char *dpp_session_state_name(session_state_t st);

#endif
