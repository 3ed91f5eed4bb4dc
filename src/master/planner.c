/* SPDX-License-Identifier: Apache-2.0 */
/* Which planner plans which format (planner.h). */
#include "planner.h"

const dpp_planner_t *dpp_planner_for(dpp_format_t format, int text)
{
    if (text || format == DPP_FORMAT_JSONL || format == DPP_FORMAT_TEXT)
        return &dpp_planner_text;
    return format == DPP_FORMAT_PARQUET ? &dpp_planner_parquet : &dpp_planner_tfrecord;
}
