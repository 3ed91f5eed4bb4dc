/* SPDX-License-Identifier: Apache-2.0 */
/* The documents of a text session's split (the worker's source_text.c
 * tokenizes and packs them; dppctl validate --table samples them), read
 * from a range of one file in the table's format:
 *  - JSON Lines (format "jsonl", also .zst): a line's text field, where its
 *    `where` fields equal their values;
 *  - plain text (format "text", also .zst): each line, or the whole file
 *    (text.unit "file");
 *  - Parquet (format "parquet" with a text section): a string column, row
 *    by row, where the `where` string columns equal their values.
 * Documents shorter than text.min_bytes or longer than max_bytes are
 * filtered. An input that is no document (a malformed line, a missing or
 * null text) is counted as rejected, with the file and its position in the
 * first one's sentence. A range is positions [start, end): byte offsets of
 * whole lines (decompressed bytes for .zst), or row numbers of a Parquet
 * file; a file read whole is one range. One thread at a time. */
#ifndef DPP_TEXT_DOCS_H
#define DPP_TEXT_DOCS_H

#include <stddef.h>
#include <stdint.h>

#include "base/reject.h"
#include "base/rfile.h"
#include "spec/spec.h"

typedef struct dpp_text_docs dpp_text_docs_t;

/* What the reader turned away, for the split's or index's counts. */
typedef struct dpp_text_docs_counts {
    uint64_t documents, filtered;
    dpp_rejects_t rejects;
    char reject_detail[512]; /* the first reject: file, position, what */
    uint64_t bytes_read;
} dpp_text_docs_counts_t;

/* Opens the file at path (absolute; with roots, nroots > 0, it must lie
 * under one of them and be no symlink: spec/table.h), or reads object
 * instead when not NULL (an object of a store, path its URL; the caller
 * keeps it open until dpp_text_docs_close), to read the documents
 * of positions [start, end) (end UINT64_MAX: to the end of the file) as
 * spec's text section says; spec->on_corrupt_fail makes a reject end the
 * split. rel_path names the file in messages; max_doc bounds a line or a
 * file read whole. spec must outlive the reader. Returns 0 with *out, or
 * an error with a sentence naming the file in err (a column the Parquet
 * file does not have, with "did you mean"); close with dpp_text_docs_close
 * either way (*out may be NULL). */
int dpp_text_docs_open(dpp_text_docs_t **out, const dpp_spec_t *spec, const char *path,
                       dpp_rfile_t *object, const char *rel_path, char *const *roots,
                       size_t nroots, uint64_t start, uint64_t end, uint64_t max_doc, char *err,
                       size_t errlen);
void dpp_text_docs_close(dpp_text_docs_t *d);

/* Reads the range's next input: 1 with *text, *len set to a document
 * (valid until the next call) or *text NULL (an input that was filtered,
 * rejected or blank), 0 at the range's end, or an error that ends the
 * split (a reject under on_corrupt: fail, a read error, a broken stream). */
int dpp_text_docs_step(dpp_text_docs_t *d, const uint8_t **text, size_t *len);

/* The document step() returned last is refused after all (its tokens would
 * not fit the worker's bounds): counted as rejected for reason (a
 * reject.h reason: DPP_ETOOBIG), with "file F, line at offset O: " and
 * why as the first reject's detail. Returns 0, or reason under on_corrupt:
 * fail (the split ends). */
int dpp_text_docs_refuse(dpp_text_docs_t *d, int reason, const char *why);

/* The position of the next input (where a split after the inputs read so
 * far would start), and of the input read last (for messages). */
uint64_t dpp_text_docs_pos(const dpp_text_docs_t *d);
uint64_t dpp_text_docs_last(const dpp_text_docs_t *d);

/* When reading broke for good (a truncated or damaged .zst stream, a
 * damaged Parquet page): the error, and a phrase of what was found; 0 and
 * NULL otherwise. */
int dpp_text_docs_broken(const dpp_text_docs_t *d);
const char *dpp_text_docs_why(const dpp_text_docs_t *d);

/* What the reader counted so far (valid until the next call on d). */
const dpp_text_docs_counts_t *dpp_text_docs_counts(dpp_text_docs_t *d);

/* The file's size and mtime as opened (index tasks report them). */
void dpp_text_docs_stat(const dpp_text_docs_t *d, uint64_t *size, int64_t *mtime_ns);

#endif
