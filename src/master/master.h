/* SPDX-License-Identifier: Apache-2.0 */
/* The master daemon: accepts specs from dppctl, plans one split per file,
 * leases splits to workers that ask, tells clients which workers serve their
 * session and tracks every split until its client has consumed it. */
#ifndef DPP_MASTER_MASTER_H
#define DPP_MASTER_MASTER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct dpp_master_config {
    const char *listen;       /* HOST:PORT; port 0 picks a free one */
    const char *const *roots; /* data roots */
    size_t nroots;
    const char *state_dir;
    const char *port_file;        /* optional: bound address is written here */
    unsigned heartbeat_ms;        /* workers heartbeat this often */
    unsigned worker_timeout_ms;   /* silence after which a worker is dropped */
    size_t journal_compact_bytes; /* compact the journal past this size (0: 64 MiB) */
    const struct dpp_auth *auth;  /* cluster token every peer must prove; NULL: none */
    const char *http;             /* HOST:PORT for /metrics, /healthz, /readyz; NULL: none */
    unsigned handshake_ms;        /* a peer must finish HELLO (and AUTH) this fast (0: 10 s) */
    unsigned idle_ms;             /* a dppctl or client silent this long is closed (0: 60 s) */
    unsigned max_connections;     /* more are accepted and closed at once (0: 1024) */
    size_t max_spec_bytes;        /* submitted spec text (0: 1 MiB) */
    unsigned max_features;        /* dense + sparse features of a spec (0: 4096) */
    uint32_t max_msg_bytes;       /* a frame's message (0: 16 MiB) */
    /* a listing of an s3:// table: at most this many keys (0: 1,000,000)
     * in this many pages (0: 10,000), within this many seconds (0: 300) */
    uint64_t s3_list_max_keys, s3_list_max_pages;
    unsigned s3_list_timeout_s;
    /* a finished session is forgotten (memory, journal, metrics) this long
     * after it ended (0: at the next heartbeat tick); a live one with no
     * client attached for session_idle_ms ends as failed, "abandoned" (0:
     * never; a spec's idle_timeout_s overrides it) */
    int64_t session_retention_ms, session_idle_ms;
} dpp_master_config_t;

typedef struct dpp_master dpp_master_t;

/* Creates a master on loop: checks the roots, locks the state dir, listens.
 * Returns 0 with *out set, or a negative error (logged). Free with
 * dpp_master_free() after dpp_master_stop() and the loop has run dry. */
int dpp_master_new(dpp_master_t **out, uv_loop_t *loop, const dpp_master_config_t *cfg);

/* Closes the listener and every connection; the loop then ends by itself. */
void dpp_master_stop(dpp_master_t *m);

/* Frees a stopped master. Accepts NULL. */
void dpp_master_free(dpp_master_t *m);

/* 1 when the master stopped because of an error (its journal could not be
 * written): the process should exit non-zero so that a supervisor notices. */
int dpp_master_failed(const dpp_master_t *m);

/* The address the master listens on ("127.0.0.1:41234"). */
const char *dpp_master_addr(const dpp_master_t *m);

#endif
