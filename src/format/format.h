/* SPDX-License-Identifier: Apache-2.0 */
/* The table formats dpp reads: what a spec's "format" may name. Each format
 * is a planner in the master (src/master/planner.h: count a file's records,
 * cut splits) and a source in the worker (src/worker/source.h: a split's
 * rows into the pipeline); nothing above those two interfaces names one. */
#ifndef DPP_FORMAT_FORMAT_H
#define DPP_FORMAT_FORMAT_H

typedef enum dpp_format {
    DPP_FORMAT_TFRECORD = 0, /* TFRecord files of tf.Example records (the default) */
    DPP_FORMAT_PARQUET = 1,  /* Parquet files (src/parquet) */
    DPP_FORMAT_JSONL = 2,    /* JSON Lines documents, tokenized and packed (src/text) */
    DPP_FORMAT_TEXT = 3,     /* plain text: a document per line or per file, as JSONL */
} dpp_format_t;

/* Names in dpp_format_t order, NULL-terminated. */
extern const char *const dpp_format_names[];

/* "\"tfrecord\"" or "\"a\", \"b\" or \"c\"": the names for an error message. */
const char *dpp_format_list(void);

#endif
