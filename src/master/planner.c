/* SPDX-License-Identifier: Apache-2.0 */
/* Which planner plans which format (planner.h). */
#include "planner.h"

const dpp_planner_t *dpp_planner_for(dpp_format_t format)
{
    switch (format) {
    case DPP_FORMAT_TFRECORD:
        break;
    case DPP_FORMAT_PARQUET:
        return &dpp_planner_parquet;
    case DPP_FORMAT_JSONL:
        return &dpp_planner_jsonl;
    }
    return &dpp_planner_tfrecord;
}
