/* SPDX-License-Identifier: Apache-2.0 */
/* Transform chains applied by workers to each row's features. The math is
 * written down in docs/spec.md; the integration test re-implements it. */
#ifndef DPP_COMMON_TRANSFORM_H
#define DPP_COMMON_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "spec.h"

/* Runs a dense chain on one value. present = 0 means the record lacks the
 * feature: a leading fill_missing supplies the value; with none the result
 * is DPP_EMISSING. Returns 0 with *out set or DPP_EMISSING. NaN passes clamp
 * unchanged. */
int dpp_transform_dense(const dpp_transform_t *ops, unsigned nops, int present, float in,
                        float *out);

/* Runs a sparse chain over ids[0..len) in place and returns the new length
 * (truncate shortens, modulo rewrites). An absent sparse feature is an empty
 * list, so there is no missing case. */
size_t dpp_transform_sparse(const dpp_transform_t *ops, unsigned nops, int64_t *ids, size_t len);

#endif
