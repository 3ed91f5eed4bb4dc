/* SPDX-License-Identifier: Apache-2.0 */
/* The worker daemon's loop thread: registers with the master, heartbeats,
 * pulls leases for its pipeline threads, and streams finished blocks to the
 * clients subscribed to each (session, rank) within the credits they grant. */
#ifndef DPP_WORKER_WORKER_H
#define DPP_WORKER_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "reader.h"

typedef struct dpp_worker_config {
    const char *master;          /* HOST:PORT of the master */
    const char *listen;          /* HOST:PORT for clients; port 0 picks one */
    const char *advertise;       /* address given to clients; default: the bound one */
    const char *port_file;       /* optional: bound address written here */
    unsigned threads;            /* pipeline threads; 0 = one per core */
    size_t max_buffer_bytes;     /* blocks waiting for clients + readers' buffers */
    dpp_reader_config_t reader;  /* per pipeline thread */
    const struct dpp_auth *auth; /* cluster token (both ways); NULL: none */
    const char *http;            /* HOST:PORT for /metrics, /healthz, /readyz; NULL: none */
    unsigned handshake_ms;       /* a client must finish HELLO (and AUTH) this fast (0: 10 s) */
    unsigned idle_ms;            /* a client silent this long is closed (0: 60 s) */
    unsigned max_connections;    /* more clients are accepted and closed at once (0: 1024) */
    uint32_t max_msg_bytes;      /* a client frame's message (0: 16 MiB) */
    char **roots;                /* resolved data roots task files must be under; none: unchecked */
    size_t nroots;
    char **s3_roots; /* --data-root s3://...: objects must be under one */
    size_t ns3_roots;
    size_t cache_ram_bytes; /* split outputs kept in memory (cache_store.h); 0: none */
    const char *cache_dir;  /* ... and on disk here; NULL: no disk tier */
    uint64_t cache_disk_bytes;
} dpp_worker_config_t;

typedef struct dpp_worker dpp_worker_t;

/* Starts a worker on loop (listener, pipeline threads, master connection,
 * which is retried with backoff until the master answers). Returns 0 with
 * *out set or a negative error (logged). */
int dpp_worker_new(dpp_worker_t **out, uv_loop_t *loop, const dpp_worker_config_t *cfg);

/* Stops taking leases, lets the running tasks finish and their blocks reach
 * their clients for at most grace_ms, then stops as dpp_worker_stop() does
 * (splits not finished go to other workers when this one disconnects). */
void dpp_worker_drain(dpp_worker_t *w, unsigned grace_ms);

/* Stops the threads, closes every handle; the loop then ends by itself. */
void dpp_worker_stop(dpp_worker_t *w);

/* Frees a stopped worker after its loop has run dry. Accepts NULL. */
void dpp_worker_free(dpp_worker_t *w);

#endif
