/* SPDX-License-Identifier: Apache-2.0 */
/* Which source reads which format (source.h). */
#include "source.h"

const dpp_source_ops_t *dpp_source_ops(dpp_format_t format)
{
    switch (format) {
    case DPP_FORMAT_TFRECORD:
        break;
    case DPP_FORMAT_PARQUET:
        return &dpp_source_parquet;
    }
    return &dpp_source_tfrecord;
}
