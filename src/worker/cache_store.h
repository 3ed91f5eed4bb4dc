/* SPDX-License-Identifier: Apache-2.0 */
/* A worker's store of split outputs (entries: opaque bytes under a 128-bit
 * key; split_cache.h says what they hold), in two tiers:
 *  - RAM: entries in memory, least recently used evicted past ram_bytes;
 *  - disk: a file an entry under dir (in 256 folders "00".."ff" by the
 *    key's first byte, named by the key's 32 hex digits and ".dpc"), least
 *    recently used evicted past disk_bytes. It survives a restart:
 *    dpp_cache_store_open() finds the entries again, in their order of use
 *    by the files' mtimes (a write or a read sets it).
 * Lookups try RAM, then disk (a disk hit is promoted to RAM). Every entry
 * file carries checksums of its header and payload: a damaged or partial
 * one (a worker killed while writing it, a full disk, a flipped bit) is a
 * miss, deleted and counted, never served; files are written under a
 * temporary name (".tmp-*", removed at the next open) and renamed into
 * place, so no fsync is needed. A file "lock" in dir, flock'd while the
 * store is open, keeps a second worker out of the same dir.
 *
 * Entry file, little-endian:
 *   offset  0  "DPC1"
 *           4  u32 version, 1
 *           8  the key: u64 hi, u64 lo
 *          24  u64 payload length (at most DPP_CACHE_MAX_PAYLOAD)
 *          32  u32 CRC32C of the payload
 *          36  u32 CRC32C of bytes 0..36
 *          40  the payload
 *
 * Thread-safe: pipeline threads look up and insert at once. One mutex
 * guards the index; entries' bytes are read and written outside it. */
#ifndef DPP_WORKER_CACHE_STORE_H
#define DPP_WORKER_CACHE_STORE_H

#include <stddef.h>
#include <stdint.h>

#define DPP_CACHE_HEADER_SIZE 40
#define DPP_CACHE_MAX_PAYLOAD (UINT64_C(1) << 30)

typedef struct dpp_cache_key {
    uint64_t hi, lo;
} dpp_cache_key_t;

/* Both bounds count each entry's payload and its 40-byte header (the RAM
 * tier's copy is the file's image), not the index (about 100 bytes an
 * entry) nor entries evicted while a reference still holds them. */
typedef struct dpp_cache_store_config {
    size_t ram_bytes;    /* 0: no RAM tier */
    const char *dir;     /* NULL: no disk tier */
    uint64_t disk_bytes; /* the disk tier's bound (file bytes) */
} dpp_cache_store_config_t;

/* hits + misses are the lookups that reached the tier (a disk lookup is a
 * RAM miss); bytes_served counts payload bytes of hits. */
typedef struct dpp_cache_tier_stats {
    uint64_t hits, misses, bytes_served, insertions, evictions, entries, bytes;
} dpp_cache_tier_stats_t;

typedef struct dpp_cache_store_stats {
    dpp_cache_tier_stats_t ram, disk;
    uint64_t damaged;      /* entry files found damaged and deleted */
    uint64_t write_errors; /* entries that could not be written to disk */
} dpp_cache_store_stats_t;

typedef struct dpp_cache_store dpp_cache_store_t;
typedef struct dpp_cache_ref dpp_cache_ref_t;

/* Opens a store; cfg->dir (copied) is created with its parents and
 * folders when missing, then scanned: entries found again, leftover
 * temporary files and entries with a bad header deleted. Returns 0 with
 * *out (free with dpp_cache_store_close), or -errno (-EBUSY: another
 * store holds the dir) with a sentence naming the dir in err. Out of
 * memory aborts, as in every daemon allocation. */
int dpp_cache_store_open(dpp_cache_store_t **out, const dpp_cache_store_config_t *cfg, char *err,
                         size_t errlen);

/* Frees the store; NULL accepted. No call may be running. References
 * handed out stay valid until put back. */
void dpp_cache_store_close(dpp_cache_store_t *s);

/* Looks key up: 0 with *ref (the caller's, until dpp_cache_ref_put;
 * eviction or replacement of the entry meanwhile does not touch it) and
 * *tier (0 RAM, 1 disk), -ENOENT on a miss (also for a damaged or vanished
 * file), -ENOMEM when the entry cannot be read into memory. */
int dpp_cache_store_get(dpp_cache_store_t *s, const dpp_cache_key_t *key, dpp_cache_ref_t **ref,
                        int *tier);
/* The payload of a reference: *len bytes, 8-byte aligned, read-only, valid
 * while the reference is held. */
const uint8_t *dpp_cache_ref_data(const dpp_cache_ref_t *ref, size_t *len);
/* Gives a reference back; NULL accepted. Any thread, no lock. */
void dpp_cache_ref_put(dpp_cache_ref_t *ref);

/* Stores data[0..len) (copied) under key in each tier it fits, replacing
 * what the key held in every tier. A tier that cannot take it (an entry
 * bigger than its bound or DPP_CACHE_MAX_PAYLOAD, a write that fails:
 * counted and logged once) just does not hold it. Returns 0, or -ENOMEM
 * (nothing changed) when the copy cannot be allocated. */
int dpp_cache_store_put(dpp_cache_store_t *s, const dpp_cache_key_t *key, const uint8_t *data,
                        size_t len);

/* The same without the copy: r is a new reference (dpp_cache_ref_new)
 * whose payload the caller has written and does not change afterwards;
 * the store takes references of its own (the caller still puts r back).
 * Where the entry fits nowhere it is simply not kept. */
void dpp_cache_store_put_ref(dpp_cache_store_t *s, const dpp_cache_key_t *key,
                             dpp_cache_ref_t *r);
/* A new reference with room for a payload of len bytes (8-byte aligned, at
 * dpp_cache_ref_payload), to fill and give to dpp_cache_store_put_ref;
 * NULL when out of memory. */
dpp_cache_ref_t *dpp_cache_ref_new(size_t len);
uint8_t *dpp_cache_ref_payload(dpp_cache_ref_t *ref);

/* Drops key from both tiers (its entry was found stale). */
void dpp_cache_store_remove(dpp_cache_store_t *s, const dpp_cache_key_t *key);

/* Counters and the tiers' sizes now, into *out. */
void dpp_cache_store_stats(dpp_cache_store_t *s, dpp_cache_store_stats_t *out);

/* The low halves of the keys the store holds in any tier (each once), at
 * most max of them into out (NULL when max is 0), in no order; returns how
 * many it holds. version changes whenever that set does, and only then. */
size_t dpp_cache_store_keys(dpp_cache_store_t *s, uint64_t *out, size_t max);
uint64_t dpp_cache_store_version(dpp_cache_store_t *s);

/* Checks buf[0..len) as a whole entry file: 0 with *key and the payload
 * span (inside buf), or DPP_ECORRUPT with the reason in err. Pure: no
 * allocation, no I/O (the fuzz target's). */
int dpp_cache_entry_parse(const uint8_t *buf, size_t len, dpp_cache_key_t *key,
                          const uint8_t **payload, size_t *payload_len, char *err, size_t errlen);

#endif
