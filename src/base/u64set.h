/* SPDX-License-Identifier: Apache-2.0 */
/* A set of 64-bit keys (well-mixed hashes: the master's record of which
 * split outputs each worker's cache holds), open addressing with linear
 * probing and backward-shift deletion, grown by doubling at half full.
 * Used as a multiset through dpp_u64set_insert (n counts copies).
 * The key 0 is never stored (it marks an empty slot); callers map it. */
#ifndef DPP_BASE_U64SET_H
#define DPP_BASE_U64SET_H

#include <stddef.h>
#include <stdint.h>

typedef struct dpp_u64set {
    uint64_t *slots; /* [cap], a power of two; 0: empty */
    size_t cap, n;
} dpp_u64set_t;

/* Zeroed: empty. Returns 1 added, 0 present already, -ENOMEM. */
int dpp_u64set_add(dpp_u64set_t *s, uint64_t key);
/* Adds key once more (a multiset: each insert is matched by a remove; the
 * master counts the holders of a split this way). Returns 1, 0 for the key
 * 0, -ENOMEM. */
int dpp_u64set_insert(dpp_u64set_t *s, uint64_t key);
/* Returns 1 removed (one copy), 0 absent. */
int dpp_u64set_remove(dpp_u64set_t *s, uint64_t key);
int dpp_u64set_has(const dpp_u64set_t *s, uint64_t key);
/* Empties the set and frees its memory; zeroed again. */
void dpp_u64set_clear(dpp_u64set_t *s);

#endif
