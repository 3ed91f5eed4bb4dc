/* SPDX-License-Identifier: Apache-2.0 */
/* The block shapes fuzz_block parses against and make_corpus writes seed
 * blocks for: labels only; dense only; dense and unweighted sparse; mixed
 * weighted and unweighted sparse; sparse only, all weighted; then without a
 * label: dense only; sparse only. New shapes go at the end, so that the
 * committed seeds keep the shape they were written for. */
#ifndef DPP_TESTS_FUZZ_SHAPES_H
#define DPP_TESTS_FUZZ_SHAPES_H

#include "format/block.h"

static const unsigned dpp_fuzz_dims_a[] = {1, 3};
static const unsigned dpp_fuzz_dims_b[] = {1};
static const unsigned dpp_fuzz_dims_c[] = {1, 4};
static const uint8_t dpp_fuzz_weighted_c[] = {1, 0, 1};
static const uint8_t dpp_fuzz_weighted_d[] = {1};

static const dpp_block_shape_t dpp_fuzz_shapes[] = {
    {.ndense = 0, .nsparse = 0},
    {.ndense = 2, .nsparse = 0, .dims = dpp_fuzz_dims_a},
    {.ndense = 1, .nsparse = 2, .dims = dpp_fuzz_dims_b},
    {.ndense = 2, .nsparse = 3, .dims = dpp_fuzz_dims_c, .weighted = dpp_fuzz_weighted_c},
    {.ndense = 0, .nsparse = 1, .weighted = dpp_fuzz_weighted_d},
    {.ndense = 2, .nsparse = 0, .dims = dpp_fuzz_dims_a, .no_label = 1},
    {.ndense = 0, .nsparse = 2, .no_label = 1},
};
#define DPP_FUZZ_NSHAPES (sizeof dpp_fuzz_shapes / sizeof dpp_fuzz_shapes[0])

#endif
