/* SPDX-License-Identifier: Apache-2.0 */
/* A worker's store of split outputs (entries: opaque bytes under a 128-bit
 * key; split_cache.h says what they hold), in two tiers:
 *  - RAM: entries in memory, least recently used evicted past ram_bytes;
 *  - disk: a file an entry under dir (in 256 folders "00".."ff" by the
 *    key's first byte, named by the key's 32 hex digits and ".dpc"), least
 *    recently used (by file mtime across restarts) evicted past disk_bytes.
 *    It survives a restart: dpp_cache_store_open() finds the entries again.
 * Lookups try RAM, then disk (a disk hit is promoted to RAM). Every entry
 * file carries checksums of its header and payload: a damaged or partial
 * one (a worker killed while writing it, a full disk, a flipped bit) is a
 * miss, deleted and counted, never served; files are written under a
 * temporary name and renamed into place, so no fsync is needed.
 *
 * Entry file, little-endian: "DPC1", u32 version 1, the key (u64 hi, u64
 * lo), u64 payload length, u32 CRC32C of the payload, u32 CRC32C of the 36
 * bytes before it; then the payload.
 *
 * Thread-safe: pipeline threads look up and insert at once; file reads and
 * writes happen outside the store's lock. */
#ifndef DPP_WORKER_CACHE_STORE_H
#define DPP_WORKER_CACHE_STORE_H

#include <stddef.h>
#include <stdint.h>

#define DPP_CACHE_HEADER_SIZE 40

typedef struct dpp_cache_key {
    uint64_t hi, lo;
} dpp_cache_key_t;

typedef struct dpp_cache_store_config {
    size_t ram_bytes;    /* 0: no RAM tier */
    const char *dir;     /* NULL: no disk tier */
    uint64_t disk_bytes; /* the disk tier's bound (file bytes) */
} dpp_cache_store_config_t;

typedef struct dpp_cache_tier_stats {
    uint64_t hits, misses, bytes_served, insertions, evictions, entries, bytes;
} dpp_cache_tier_stats_t;

typedef struct dpp_cache_store_stats {
    dpp_cache_tier_stats_t ram, disk;
    uint64_t damaged;      /* entries found damaged and deleted */
    uint64_t write_errors; /* entries that could not be written to disk */
} dpp_cache_store_stats_t;

typedef struct dpp_cache_store dpp_cache_store_t;
typedef struct dpp_cache_ref dpp_cache_ref_t;

/* Opens a store (creating dir and its folders when missing; removing
 * leftover temporary files and damaged entries). Returns 0 with *out, or
 * -errno / -ENOMEM with a sentence naming the dir in err. */
int dpp_cache_store_open(dpp_cache_store_t **out, const dpp_cache_store_config_t *cfg, char *err,
                         size_t errlen);

/* Frees the store; NULL accepted. No call may be running; references
 * handed out must have been put back. */
void dpp_cache_store_close(dpp_cache_store_t *s);

/* Looks key up: 0 with *ref (the entry's payload, valid until
 * dpp_cache_ref_put) and *tier (0 RAM, 1 disk), -ENOENT on a miss,
 * -ENOMEM. */
int dpp_cache_store_get(dpp_cache_store_t *s, const dpp_cache_key_t *key, dpp_cache_ref_t **ref,
                        int *tier);
/* The payload of a reference: 8-byte aligned, *len bytes. */
const uint8_t *dpp_cache_ref_data(const dpp_cache_ref_t *ref, size_t *len);
void dpp_cache_ref_put(dpp_cache_ref_t *ref);

/* Stores data[0..len) (copied) under key in each tier it fits, replacing
 * what the key held. A tier that cannot take it (an entry bigger than its
 * bound, a write that fails: counted and logged once) just does not hold
 * it. Returns 0 or -ENOMEM. */
int dpp_cache_store_put(dpp_cache_store_t *s, const dpp_cache_key_t *key, const uint8_t *data,
                        size_t len);

/* Drops key from both tiers (its entry was found stale). */
void dpp_cache_store_remove(dpp_cache_store_t *s, const dpp_cache_key_t *key);

void dpp_cache_store_stats(dpp_cache_store_t *s, dpp_cache_store_stats_t *out);

/* The low halves of the keys the store holds in any tier, at most max of
 * them into out (any order); returns how many it holds. version changes
 * whenever that set does. */
size_t dpp_cache_store_keys(dpp_cache_store_t *s, uint64_t *out, size_t max);
uint64_t dpp_cache_store_version(dpp_cache_store_t *s);

/* Checks buf[0..len) as an entry file: 0 with *key and the payload span,
 * or DPP_ECORRUPT with the reason in err. Pure (the fuzz target's). */
int dpp_cache_entry_parse(const uint8_t *buf, size_t len, dpp_cache_key_t *key,
                          const uint8_t **payload, size_t *payload_len, char *err, size_t errlen);

#endif
