/* SPDX-License-Identifier: Apache-2.0 */
/* The TFRecord planner (planner.h). A TFRecord file is indexed by its .idx
 * sidecar or a scan of its framing (src/worker/source_tfrecord.c): the
 * result is the record count and the byte offset of every split_rows-th
 * record, plus the end of the last record, so range b holds split_rows
 * records (the last one the rest). */
#include <stdio.h>

#include "planner.h"

static int tf_check(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows,
                    char *err, size_t errlen)
{
    (void)bounds;
    if (n == 0 || n - 1 > records ||
        (records > 0 && n - 1 != (records + split_rows - 1) / split_rows)) {
        snprintf(err, errlen, "%zu boundaries for %llu records cut every %u", n,
                 (unsigned long long)records, split_rows);
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if (bounds[i] <= bounds[i - 1]) {
            snprintf(err, errlen, "boundary %zu (%llu) is not after boundary %zu (%llu)", i,
                     (unsigned long long)bounds[i], i - 1, (unsigned long long)bounds[i - 1]);
            return 0;
        }
    }
    return 1;
}

static size_t tf_nranges(uint64_t records, const uint64_t *bounds, size_t n)
{
    (void)records;
    (void)bounds;
    return n ? n - 1 : 0;
}

static void tf_range(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows,
                     size_t b, dpp_range_t *out)
{
    (void)n;
    uint64_t start = (uint64_t)b * split_rows;
    uint64_t end = start + split_rows;
    out->record_start = start;
    out->record_count = (end < records ? end : records) - start;
    out->byte_start = bounds[b];
    out->byte_end = bounds[b + 1];
}

const dpp_planner_t dpp_planner_tfrecord = {
    .check = tf_check,
    .nranges = tf_nranges,
    .range = tf_range,
};
