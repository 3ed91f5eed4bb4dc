/* SPDX-License-Identifier: Apache-2.0 */
/* Transform chains and row filters applied by workers to each row. The math
 * is written down in docs/spec.md; the integration test re-implements it.
 * Everything here is called per row: no allocation, no locks, no divides in
 * the per-id loops. */
#ifndef DPP_SPEC_TRANSFORM_H
#define DPP_SPEC_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "spec/spec.h"

/* Fills the constants derived from an op's parameters (n_recip of modulo and
 * hash); other ops are left as they are. The spec parser calls it; call it
 * on a hand-built op before using it. */
void dpp_transform_prepare(dpp_transform_t *t);

/* Fills the constants derived from a sample filter's p and seed (threshold,
 * seed_mix); a require filter is left as it is. The spec parser calls it. */
void dpp_filter_prepare(dpp_filter_t *f);

/* Runs a dense chain over one row of dim values: in[0..dim) when present
 * (not read otherwise), result in out[0..dim); in == out is allowed. When the
 * record lacks the feature (present = 0) a leading fill_missing supplies
 * every value; without one the result is DPP_EMISSING and out is untouched.
 * Each op works elementwise and stores float32. Returns 0 or DPP_EMISSING. */
int dpp_transform_dense(const dpp_transform_t *ops, unsigned nops, unsigned dim, int present,
                        const float *in, float *out);

/* Runs a sparse chain in place over ids[0..len) and, when the feature has
 * weights, weights[0..len) (NULL otherwise); returns the new length. truncate
 * keeps the matching weights (moving them with their ids for keep "last");
 * modulo and hash rewrite ids only. An absent sparse feature is an empty
 * list, so there is no missing case. */
size_t dpp_transform_sparse(const dpp_transform_t *ops, unsigned nops, int64_t *ids, float *weights,
                            size_t len);

/* The two chains a column at a time, as the worker runs them: every dense
 * op and every sparse op but truncate maps each value on its own, so a
 * chain over a column of rows is the chain over each row, and truncate,
 * which only picks positions, commutes with the maps. So a row's sparse
 * list is picked when it is read (dpp_transform_sparse_pick) and its values
 * mapped later with the rest of the block's (dpp_transform_sparse_column);
 * dense values are read raw (fill_missing's value for an absent one) and
 * the chain runs over the column (dpp_transform_dense_column). The row
 * functions above are exactly those compositions. */

/* The dense chain, its leading fill_missing passed over, on x[0..n). */
void dpp_transform_dense_column(const dpp_transform_t *ops, unsigned nops, float *x, size_t n);

/* The chain's truncates on one row's ids[0..len) (and weights, or NULL), in
 * order; returns the new length. */
size_t dpp_transform_sparse_pick(const dpp_transform_t *ops, unsigned nops, int64_t *ids,
                                 float *weights, size_t len);

/* The chain's maps (modulo, hash of ids) on ids[0..n), in order. */
void dpp_transform_sparse_column(const dpp_transform_t *ops, unsigned nops, int64_t *ids, size_t n);

/* 1 when the chain keeps a prefix of every list (no truncate keeps the
 * last ids), with *keep its longest length (SIZE_MAX: the whole list); a
 * reader then need not store the ids past it. 0 otherwise. */
int dpp_transform_sparse_prefix(const dpp_transform_t *ops, unsigned nops, size_t *keep);

/* A string feature's id by the first op of its chain (hash: XXH3 of the
 * bytes with the salt as seed, mod n; vocab: the line number in t->vocab,
 * which must be loaded, else the out-of-vocabulary id: size, or size + XXH3
 * mod oov_buckets). Any other op: not for strings (the caller checks). */
int64_t dpp_transform_string(const dpp_transform_t *t, const uint8_t *s, size_t len);

/* 1 when the chain can take strings (its first op is hash or vocab). */
static inline int dpp_transform_takes_strings(const dpp_transform_t *ops, unsigned nops)
{
    return nops > 0 && (ops[0].op == DPP_OP_HASH || ops[0].op == DPP_OP_VOCAB);
}

/* The 64-bit hash the hash op reduces mod n: the SplitMix64 finalizer of
 * (uint64_t)id ^ (salt * 0x9E3779B97F4A7C15). */
uint64_t dpp_hash_id(int64_t id, int64_t salt);

/* SplitMix64's finalizer (dpp_hash_id with salt 0). */
uint64_t dpp_mix64(uint64_t z);

/* Seed of one shuffle (spec `shuffle`): mixes the spec's seed, the epoch and
 * a salt naming what is permuted (0: the epoch's order of index ranges; the
 * row key of a split's first record: that split's rows). */
uint64_t dpp_shuffle_seed(int64_t seed, uint32_t epoch, uint64_t salt);

/* Fills idx[0..n) with a permutation of 0..n-1: Fisher-Yates from the top,
 * slot i swapped with slot (draw * (i + 1)) >> 64, draws from SplitMix64
 * started at seed. */
void dpp_permute(uint32_t *idx, size_t n, uint64_t seed);

/* FNV-1a 64 of a file's path relative to the table folder, such as
 * "ds=2026-01-01/part-00000.tfrecord" (bytes, no terminating NUL). Computed
 * once per split. */
uint64_t dpp_path_hash(const char *relative_path);

/* Identity of a record that does not depend on how the file is split:
 * mix64(path_hash + record_index), record_index counting every record of the
 * file from 0. */
uint64_t dpp_row_key(uint64_t path_hash, uint64_t record_index);

/* Sample filter decision for one row: 1 keep, 0 drop. A row whose label
 * differs from the filter's label (when it has one) is not subject to
 * sampling and is kept. f must have been prepared (the parser does it). */
int dpp_filter_sample_keep(const dpp_filter_t *f, uint64_t row_key, float label);

#endif
