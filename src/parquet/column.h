/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a Parquet file row by row for dpp: the footer (dpp_pq_file_t) and,
 * per projected field, a column chunk streamed page by page (dpp_pq_col_t):
 * read by offset (a local file, or an object of a store: base/rfile.h)
 * through a window of at most one page plus its header,
 * decompressed (codec.c), levels and values decoded (encoding.c), and one
 * row's value or list appended to a row buffer in the form
 * dpp_pq_row_decode() turns into feature references (format/
 * example_decode.h, native lists). Memory per column: its window, one
 * decompressed page and its dictionary; a row group never has to fit.
 * Bytes a caller read ahead (dpp_pq_file_t.spans) are used in place. */
#ifndef DPP_PARQUET_COLUMN_H
#define DPP_PARQUET_COLUMN_H

#include <stddef.h>
#include <stdint.h>

#include "base/rfile.h"
#include "format/example_decode.h"
#include "parquet/codec.h"
#include "parquet/encoding.h"
#include "parquet/meta.h"

/* File bytes [off, off + len) that a caller read ahead, at data. */
typedef struct dpp_pq_span {
    uint64_t off;
    size_t len;
    const uint8_t *data;
} dpp_pq_span_t;

/* An open file and its footer. */
typedef struct dpp_pq_file {
    dpp_rfile_t *in;   /* where its bytes come from: &local, or the caller's */
    dpp_rfile_t local; /* the file dpp_pq_file_start opened */
    uint64_t size;
    int64_t mtime_ns;
    const char *name; /* for messages: the caller's, e.g. the path relative to the table */
    dpp_pq_meta_t meta;
    /* Bytes the caller read ahead for the columns it opens (the worker: a
     * split's pages, in a few coalesced reads): a column takes the pages and
     * offset indexes these hold in place and reads through its own window
     * only what they do not. The caller keeps them valid while the file's
     * columns are read. NULL: none. */
    const dpp_pq_span_t *spans;
    size_t nspans;
} dpp_pq_file_t;

/* Opens path and decodes its footer. Returns 0, -errno (open, read) or
 * DPP_ECORRUPT with a sentence in err naming `name` (not a Parquet file, a
 * damaged footer). Close with dpp_pq_file_close (also after a failure). */
int dpp_pq_file_open(dpp_pq_file_t *f, const char *path, const char *name, char *err,
                     size_t errlen);

/* dpp_pq_file_open() in two halves, for a caller that reads many files'
 * tails at once: start opens path (f's local file, size and mtime; -errno
 * with err naming `name`), or attach reads from `in` instead (an object;
 * the caller keeps it open until dpp_pq_file_close), footer decodes the
 * footer, taken from tail when the
 * caller read the file's last tail_len bytes already and it lies in them
 * (tail NULL: it is read here). Both: close with dpp_pq_file_close. */
int dpp_pq_file_start(dpp_pq_file_t *f, const char *path, const char *name, char *err,
                      size_t errlen);
void dpp_pq_file_attach(dpp_pq_file_t *f, dpp_rfile_t *in, const char *name);
int dpp_pq_file_footer(dpp_pq_file_t *f, const uint8_t *tail, size_t tail_len, char *err,
                       size_t errlen);
void dpp_pq_file_close(dpp_pq_file_t *f);

/* File bytes [off, off + len) when one of f's spans holds them all, else
 * NULL. */
const uint8_t *dpp_pq_file_bytes(const dpp_pq_file_t *f, uint64_t off, size_t len);

/* Whether a field can be read as a dpp feature: 0, or DPP_ETYPE with a
 * sentence naming the file and the column (a MAP, a struct, a list of
 * lists, a DECIMAL, an encrypted column). */
int dpp_pq_field_check(const dpp_pq_file_t *f, const dpp_pq_field_t *field, char *err,
                       size_t errlen);

/* A growable byte buffer that rows are appended to. Zeroed: empty. */
typedef struct dpp_pq_buf {
    uint8_t *data;
    size_t len, cap;
} dpp_pq_buf_t;
void dpp_pq_buf_free(dpp_pq_buf_t *b);

typedef struct dpp_pq_col dpp_pq_col_t;

/* Opens the chunk of `field` (checked with dpp_pq_field_check) in row group
 * rg, positioned at its first row. dctx is the thread's decompression
 * state, shared by the columns it reads. Returns 0, -ENOMEM. */
int dpp_pq_col_open(dpp_pq_col_t **out, const dpp_pq_file_t *f, uint32_t rg,
                    const dpp_pq_field_t *field, dpp_pq_dctx_t *dctx);
void dpp_pq_col_free(dpp_pq_col_t *c);

/* Bytes this column has read from the file so far. */
uint64_t dpp_pq_col_bytes_read(const dpp_pq_col_t *c);

/* Skips the next n rows (pages before the target are passed over by their
 * headers, or by the chunk's offset index when it has one, without being
 * decompressed). Returns 0 or an error as dpp_pq_col_read. */
int dpp_pq_col_skip(dpp_pq_col_t *c, uint64_t n, char *err, size_t errlen);

/* Appends the next row's value of this column to b as one slot: a byte of
 * dpp_feat_kind_t (ABSENT for a null value or list), a host-order uint32
 * payload length, the payload (a native list, example_decode.h). BOOLEAN,
 * INT32, INT64 and INT96 (nanoseconds since 1970) become INT64 lists, FLOAT
 * and DOUBLE (rounded) FLOAT lists, byte arrays BYTES lists; null elements
 * of a list are left out. Returns 0; DPP_ECORRUPT with err (file, column,
 * row group, byte offset) when a page is damaged or the chunk ends before
 * the row; -errno for a read error; -ENOMEM. After an error the column is
 * done: every later call fails the same way. *offset, when not NULL, is set
 * to the file offset of the page the row was in (for messages). */
int dpp_pq_col_read(dpp_pq_col_t *c, dpp_pq_buf_t *b, uint64_t *offset, char *err, size_t errlen);

/* Turns a row of nslots slots (as dpp_pq_col_read appends them) into
 * refs[0..nslots), pointing into row. Returns 0 or DPP_EEXAMPLE when the
 * bytes do not hold exactly nslots slots. */
int dpp_pq_row_decode(const uint8_t *row, size_t len, size_t nslots, dpp_feat_ref_t *refs);

/* Appends an ABSENT slot (a field the file does not have). */
int dpp_pq_buf_absent(dpp_pq_buf_t *b);

#endif
