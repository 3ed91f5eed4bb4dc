/* SPDX-License-Identifier: Apache-2.0 */
/* The planner of text sessions (planner.h), whatever the table's format
 * (JSON Lines, plain text, a Parquet string column). A text file is indexed
 * by a worker that reads it, tokenizes and packs its documents as the
 * session's spec says (src/worker/source_text.c), so that each split's
 * sequence count is known before the epoch is planned: that count is what
 * equal batches per rank are made of. The result is pairs (position of a
 * split's first document, sequences before it), one per split, then (the
 * end of the last document, the file's sequence count): range b holds the
 * sequences [bounds[2b + 1], bounds[2b + 3]) made of the documents in
 * positions [bounds[2b], bounds[2b + 2]). A position is a byte offset (of
 * a line, decompressed for .zst) or, in a Parquet file, a row number. A
 * file whose documents make no sequence has no range. */
#include <stdio.h>

#include "planner.h"

static int jl_check(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows,
                    char *err, size_t errlen)
{
    (void)split_rows; /* documents per split; filtered ones make splits longer */
    if (n < 2 || n % 2 != 0 || bounds[1] != 0 || bounds[n - 1] != records) {
        snprintf(err, errlen,
                 "%zu numbers for %llu sequences are not (offset, sequences before) pairs "
                 "from 0 to the sequence count",
                 n, (unsigned long long)records);
        return 0;
    }
    for (size_t i = 2; i < n; i += 2) {
        if (bounds[i] <= bounds[i - 2] || bounds[i + 1] <= bounds[i - 1]) {
            snprintf(err, errlen,
                     "range %zu (positions %llu to %llu, sequences %llu to %llu) is empty", i / 2 - 1,
                     (unsigned long long)bounds[i - 2], (unsigned long long)bounds[i],
                     (unsigned long long)bounds[i - 1], (unsigned long long)bounds[i + 1]);
            return 0;
        }
    }
    return 1;
}

static size_t jl_nranges(uint64_t records, const uint64_t *bounds, size_t n)
{
    (void)records;
    (void)bounds;
    return n >= 2 ? n / 2 - 1 : 0;
}

static void jl_range(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows,
                     size_t b, dpp_range_t *out)
{
    (void)records;
    (void)n;
    (void)split_rows;
    out->record_start = bounds[2 * b + 1];
    out->record_count = bounds[2 * b + 3] - bounds[2 * b + 1];
    out->byte_start = bounds[2 * b];
    out->byte_end = bounds[2 * b + 2];
}

const dpp_planner_t dpp_planner_text = {
    .check = jl_check,
    .nranges = jl_nranges,
    .range = jl_range,
};
