/* SPDX-License-Identifier: Apache-2.0 */
/* A table format on the master's side (format/format.h): what an index
 * task's result means and how it cuts a file into record ranges, the pieces
 * splits are made of. The result (a record count and a list of boundaries)
 * is produced by the same format's worker source (src/worker/source.h,
 * index()) and read only here: session.c plans epochs from ranges, leasing
 * and the journal carry the result as opaque numbers. Loop thread only. */
#ifndef DPP_MASTER_PLANNER_H
#define DPP_MASTER_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"

/* Records [record_start, record_start + record_count) of a file, stored in
 * bytes [byte_start, byte_end). */
typedef struct dpp_range {
    uint64_t record_start, record_count;
    uint64_t byte_start, byte_end;
} dpp_range_t;

typedef struct dpp_planner {
    /* Whether an index result is one this format can produce for a file
     * cut every split_rows records: 1, or 0 with a sentence in err. Checked
     * before the result is journaled. */
    int (*check)(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows, char *err,
                 size_t errlen);

    /* How many ranges an index result holds, and range b of them. */
    size_t (*nranges)(uint64_t records, const uint64_t *bounds, size_t n);
    void (*range)(uint64_t records, const uint64_t *bounds, size_t n, unsigned split_rows, size_t b,
                  dpp_range_t *out);
} dpp_planner_t;

/* The planner of a format's tables, or (text 1) of a text session over a
 * table of that format; never NULL for a dpp_format_t value. */
const dpp_planner_t *dpp_planner_for(dpp_format_t format, int text);

/* One for each format, in its own file. */
extern const dpp_planner_t dpp_planner_tfrecord;
extern const dpp_planner_t dpp_planner_parquet;
extern const dpp_planner_t dpp_planner_text;

#endif
