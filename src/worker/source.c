/* SPDX-License-Identifier: Apache-2.0 */
/* Which source reads which format (source.h). */
#include <stdarg.h>
#include <stdio.h>

#include "source.h"

int dpp_source_fail(dpp_split_result_t *res, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof res->message, fmt, ap);
    va_end(ap);
    res->error = err;
    return err;
}

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
