/* SPDX-License-Identifier: Apache-2.0 */
/* A table format on the worker's side: how a split of one file becomes rows
 * for the transform pipeline, and how an index task counts a file's records
 * and cuts its splits. pipeline.c calls only this interface; TFRecord of
 * tf.Example (source_tfrecord.c) is the first implementation. Pipeline
 * threads only: each thread opens one source at a time, on its own reader.
 *
 * A row travels as opaque bytes that the same format decodes later
 * (decode()), so that a shuffled split can gather its rows and produce them
 * in a permuted order without knowing what they are. */
#ifndef DPP_WORKER_SOURCE_H
#define DPP_WORKER_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/reject.h"
#include "format/example_decode.h"
#include "format/format.h"
#include "pipeline.h"
#include "spec/spec.h"
#include "reader.h"
#include "storage/s3.h"

/* One row as a source hands it over. data is valid until the next call of
 * next() or close() on the same source; copy it to keep it. Rows are
 * numbered in the order next() returns them, from the task's record_start,
 * a row error counting as a row: that number is the row's identity (for
 * sampling and shuffling), so a source must return the same rows in the
 * same order whichever worker reads the split. */
typedef struct dpp_source_row {
    const uint8_t *data;
    size_t len;
    uint64_t offset; /* byte offset in the file, for error messages */
} dpp_source_row_t;

/* An open split. The fields are the source's; pipeline.c only passes it. */
typedef struct dpp_source {
    const struct dpp_source_ops *ops;
    dpp_reader_t *reader; /* the pipeline thread's (io_uring or pread) */
    const dpp_task_t *task;
    void *state;         /* the format's own, from open() to close() */
    uint64_t bytes_read; /* by a source that does not read through `reader` */
    /* A source whose rows are made of inputs that are not rows (a text
     * source's sequences, made of JSON lines) counts the inputs it turns
     * away here, by close(): the pipeline adds them to the split's. */
    dpp_rejects_t rejects;
    char reject_detail[512]; /* the first of them, naming file and offset */
    uint64_t filtered;
    /* A text source: the documents it packed, and the tokens and padding
     * positions of every sequence it made (counted, like the rejects, once
     * a range) */
    uint64_t documents, tokens, padding;
} dpp_source_t;

typedef struct dpp_source_ops {
    /* What decode() needs to find the features names[0..n) (slot order) in a
     * row of a split of spec's table (under data root `root`), and for a
     * format that makes its rows (text), what it makes them with. Returns 0
     * with *proj (freed by projection_free, NULL accepted), -ENOMEM, or an
     * error with a sentence in err (a tokenizer that cannot be loaded). */
    int (*projection_new)(void **proj, const char *const *names, size_t n, const dpp_spec_t *spec,
                          const char *root, const dpp_pipeline_config_t *cfg, char *err,
                          size_t errlen);
    void (*projection_free)(void *proj);

    /* Opens task t's file and positions at its range (with the thread's
     * reader, for a format that reads through it), to produce the features
     * of proj. Returns 0, or an error with a sentence naming the file in err
     * (DPP_EPATH: outside the worker's roots). close() follows either way. */
    int (*open)(dpp_source_t *s, dpp_reader_t *reader, const dpp_task_t *t, const void *proj,
                const dpp_pipeline_config_t *cfg, char *err, size_t errlen);

    /* Optional: passes over the next n rows without producing them (the
     * rows before a split's window), cheaper than n calls of next(). Returns
     * 0, or a row error after which stuck() is 1. NULL: next() is called. */
    int (*skip)(dpp_source_t *s, uint64_t n);

    /* The split's next row in file order: 1 with *row set, 0 at the end of
     * the range, or a negative row error (a base/reject.h reason, counted
     * and handled per on_corrupt) at row->offset, or another error that
     * ends the split. */
    int (*next)(dpp_source_t *s, dpp_source_row_t *row);

    /* After a row error: 1 when nothing after it can be trusted (the
     * framing is lost), so reading stops; 0 when the next row is sound. */
    int (*stuck)(const dpp_source_t *s);

    /* Optional: once stuck, what the format found, as a phrase for the
     * split's error and log ("column \"c12\", row group 0: page CRC
     * mismatch"), owned by s; NULL when it has nothing to add. */
    const char *(*why)(const dpp_source_t *s);

    /* Optional: the feature names the split's records carry, for messages
     * ("did you mean"): TFRecord the keys of the row given (a record as
     * next() handed it), Parquet the file's columns. Each followed by a NUL
     * into buf[0..buflen), as many as fit; returns how many. */
    size_t (*names)(const dpp_source_t *s, const uint8_t *row, size_t len, char *buf,
                    size_t buflen);

    /* Decodes a row's bytes: refs[i] for feature slot i of proj, pointing
     * into data. Returns 0 or a row error (DPP_EEXAMPLE...). */
    int (*decode)(void *proj, const uint8_t *data, size_t len, dpp_feat_ref_t *refs);

    void (*close)(dpp_source_t *s);

    /* An index task: fills res with the file's record count and the byte
     * bounds of splits of t->split_rows records (res->bounds, malloc'd);
     * a damaged tail is counted in res->rejects with res->reject_detail.
     * Returns res->error. */
    int (*index)(const dpp_pipeline_config_t *cfg, const dpp_task_t *t, dpp_split_result_t *res);

    /* Optional: index tasks t[0..n) at once, each as index() would (res[i]
     * for t[i]), with the thread's reader: a format whose index is a few
     * bytes of each file (a footer) reads them all in one batch of reads in
     * flight, not one file after the other. NULL: index() for each. */
    void (*index_many)(const dpp_pipeline_config_t *cfg, dpp_reader_t *reader,
                       const dpp_task_t *const *t, dpp_split_result_t *const *res, size_t n);
} dpp_source_ops_t;

/* An index task failed: err and the sentence go into res (message, error);
 * returns err. */
int dpp_source_fail(dpp_split_result_t *res, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The data root the master found task t's table (spec `table`) under: its
 * path without the file's path in the table and the table's path in the
 * root; for an object, the worker's s3:// root it is under. Empty when the
 * paths do not end that way. */
void dpp_source_data_root(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                          const char *table, char *root, size_t len);

/* An s3:// task's object must lie under one of the worker's s3:// data
 * roots: 0, or DPP_EPATH with err naming the object and the roots. */
int dpp_source_object_check(const dpp_pipeline_config_t *cfg, const dpp_task_t *t, char *err,
                            size_t errlen);

/* An s3:// task's object, checked so and set up in o (zeroed here) to be
 * read by offset on the thread's client at the version the master listed.
 * Returns 0 or the error, err naming the object; close o with
 * dpp_s3_rfile_close either way. */
int dpp_source_object_open(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                           dpp_s3_rfile_t *o, char *err, size_t errlen);

/* The source of a format's tables, or (text 1) of a text session over a
 * table of that format (source_text.c reads them all); never NULL for a
 * dpp_format_t value. */
const dpp_source_ops_t *dpp_source_ops(dpp_format_t format, int text);

/* One for each format, in its own file. */
extern const dpp_source_ops_t dpp_source_tfrecord;
extern const dpp_source_ops_t dpp_source_parquet;
extern const dpp_source_ops_t dpp_source_text;

#endif
