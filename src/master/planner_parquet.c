/* SPDX-License-Identifier: Apache-2.0 */
/* The Parquet planner (planner.h). A Parquet file is indexed by its footer
 * (src/worker/source_parquet.c): the result is the row count and the first
 * row of every range (each row group, cut about every split_rows rows, at a
 * page boundary within a quarter of split_rows when the offset index shows
 * one), then the row count; range b holds rows [bounds[b], bounds[b + 1]),
 * at most 1.5 x split_rows of them, never across a row group. Byte
 * positions are the worker's to find from the footer. */
#include <stdio.h>

#include "planner.h"

static int pq_check(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows,
                    char *err, size_t errlen)
{
    if (n == 0 || bounds[0] != 0 || bounds[n - 1] != records) {
        snprintf(err, errlen, "%zu range starts for %llu rows do not run from 0 to the row count",
                 n, (unsigned long long)records);
        return 0;
    }
    uint64_t longest = (uint64_t)split_rows + split_rows / 2;
    for (size_t i = 1; i < n; i++) {
        if (bounds[i] <= bounds[i - 1] || bounds[i] - bounds[i - 1] > longest) {
            snprintf(err, errlen,
                     "range %zu (rows %llu to %llu) is empty or longer than %llu rows (1.5 x "
                     "split_rows)",
                     i - 1, (unsigned long long)bounds[i - 1], (unsigned long long)bounds[i],
                     (unsigned long long)longest);
            return 0;
        }
    }
    return 1;
}

static size_t pq_nranges(uint64_t records, const uint64_t *bounds, size_t n)
{
    (void)records;
    (void)bounds;
    return n ? n - 1 : 0;
}

static void pq_range(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows,
                     size_t b, dpp_range_t *out)
{
    (void)records;
    (void)n;
    (void)split_rows;
    out->record_start = bounds[b];
    out->record_count = bounds[b + 1] - bounds[b];
    out->byte_start = 0;
    out->byte_end = 0;
}

const dpp_planner_t dpp_planner_parquet = {
    .check = pq_check,
    .nranges = pq_nranges,
    .range = pq_range,
};
