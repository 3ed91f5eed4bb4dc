/* SPDX-License-Identifier: Apache-2.0 */
/* The list of table formats (format.h). */
#include <stddef.h>

#include "format/format.h"

const char *const dpp_format_names[] = {"tfrecord", "parquet", "jsonl", "text", NULL};

const char *dpp_format_list(void)
{
    /* Kept by hand beside the names: a format is added in both lines. */
    return "\"tfrecord\", \"parquet\", \"jsonl\" or \"text\"";
}
