/* SPDX-License-Identifier: Apache-2.0 */
/* The documents of a text split (docs.h): lines of a byte range (JSON
 * Lines or plain text, plain or zstd-compressed), a file read whole, or a
 * Parquet string column's rows, passed through the spec's document filters. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <zstd.h>

#include "base/errtext.h"
#include "base/nearest.h"
#include "dpp/error.h"
#include "format/jsonl.h"
#include "parquet/column.h"
#include "spec/table.h"
#include "text/docs.h"

#define READ_CHUNK (1u << 20)
#define MAX_FIELDS (1 + DPP_TEXT_MAX_WHERE)

typedef enum kind {
    KIND_JSONL,   /* a JSON object a line */
    KIND_LINES,   /* a document a line */
    KIND_FILE,    /* the file is one document */
    KIND_PARQUET, /* a string column's rows */
} kind_t;

struct dpp_text_docs {
    kind_t kind;
    const dpp_text_spec_t *text;
    const char *rel_path;
    int on_corrupt_fail;
    uint64_t max_doc;
    const char *fields[MAX_FIELDS]; /* the text field, then the where fields */
    size_t nfields;
    dpp_rfile_t *in;   /* the lines' bytes: &local, or the caller's object */
    dpp_rfile_t local; /* the file opened here (fd -1: none) */
    uint64_t size;
    int64_t mtime_ns;
    uint64_t last; /* position of the input read last */
    /* lines: file bytes [buf_off, buf_off + len) in buf, the next line at
     * `at`; pos, end: the next read's offset and the range's end */
    uint64_t pos, end;
    uint8_t *buf;
    size_t cap, len, at;
    uint64_t buf_off;
    int eof;
    /* a .zst file: decompressed as a stream; pos, end and line offsets
     * count decompressed bytes, zpos the compressed ones read */
    ZSTD_DCtx *zctx;
    uint8_t *zin;
    size_t zin_len, zin_at;
    uint64_t zpos;
    size_t zlast; /* ZSTD_decompressStream's last hint: 0 at a frame's end */
    int broken;   /* reading failed for good: nothing after it */
    char why[512];
    uint8_t *unescaped; /* a JSON string's document, unescaped */
    size_t unescaped_cap;
    /* Parquet: the row group being read and its columns (the text column,
     * then the where columns), rows [row, row_end) of the file left */
    dpp_pq_file_t pq;
    dpp_pq_dctx_t dctx;
    const dpp_pq_field_t *pq_fields[MAX_FIELDS];
    dpp_pq_col_t *cols[MAX_FIELDS];
    uint32_t group;
    uint64_t group_end; /* first row after the open row group; 0: none open */
    uint64_t row, row_end;
    dpp_pq_buf_t slots;
    uint64_t bytes; /* read from the file, but by the open columns */
    dpp_text_docs_counts_t counts;
};

void dpp_text_docs_close(dpp_text_docs_t *d)
{
    if (d == NULL)
        return;
    if (d->local.fd >= 0)
        close(d->local.fd);
    ZSTD_freeDCtx(d->zctx);
    free(d->zin);
    free(d->buf);
    free(d->unescaped);
    for (size_t i = 0; i < MAX_FIELDS; i++)
        dpp_pq_col_free(d->cols[i]);
    dpp_pq_file_close(&d->pq);
    dpp_pq_dctx_free(&d->dctx);
    dpp_pq_buf_free(&d->slots);
    free(d);
}

/* ---- lines of a byte range --------------------------------------------- */

/* Up to n bytes of the file at off, as pread: a read error breaks the
 * reader for good, with the system's or the store's words in why. */
static ssize_t read_at(dpp_text_docs_t *d, void *buf, size_t n, uint64_t off)
{
    ssize_t got = dpp_rfile_read(d->in, buf, n, off);
    if (got < 0) {
        snprintf(d->why, sizeof d->why, "reading at byte %" PRIu64 ": %.460s", off,
                 d->in->why[0] ? d->in->why : dpp_strerror((int)got));
        d->broken = (int)got;
    }
    return got;
}

/* Decompresses up to n bytes of a .zst file into out: how many (0 at the
 * end of the file, after a whole frame), or DPP_ETRUNCATED / DPP_ECORRUPT
 * (the stream ends inside a frame, or is not zstd), or -errno. */
static ssize_t unzstd(dpp_text_docs_t *d, uint8_t *out, size_t n)
{
    ZSTD_outBuffer o = {out, n, 0};
    while (o.pos == 0) {
        if (d->zin_at == d->zin_len) {
            ssize_t got = read_at(d, d->zin, ZSTD_DStreamInSize(), d->zpos);
            if (got < 0)
                return got;
            if (got == 0 && d->zlast != 0) {
                snprintf(d->why, sizeof d->why,
                         "the zstd stream ends inside a frame after %" PRIu64
                         " compressed bytes: the file is truncated",
                         d->zpos);
                return d->broken = DPP_ETRUNCATED;
            }
            if (got == 0)
                return 0;
            d->zin_len = (size_t)got;
            d->zin_at = 0;
            d->zpos += (uint64_t)got;
            d->bytes += (uint64_t)got;
        }
        ZSTD_inBuffer i = {d->zin, d->zin_len, d->zin_at};
        size_t rc = ZSTD_decompressStream(d->zctx, &o, &i);
        d->zin_at = i.pos;
        if (ZSTD_isError(rc)) {
            snprintf(d->why, sizeof d->why, "zstd: %s (near compressed byte %" PRIu64 ")",
                     ZSTD_getErrorName(rc), d->zpos - (d->zin_len - d->zin_at));
            return d->broken = DPP_ECORRUPT;
        }
        d->zlast = rc;
    }
    return (ssize_t)o.pos;
}

static int is_zst(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".zst") == 0;
}

/* Reads more of the range into the buffer, keeping the line begun at
 * `at`. Returns 1, 0 at the range's end, or -errno. */
static int fill(dpp_text_docs_t *d)
{
    if (d->broken)
        return d->broken;
    if (d->eof || d->pos >= d->end)
        return 0;
    if (d->at > 0) {
        memmove(d->buf, d->buf + d->at, d->len - d->at);
        d->len -= d->at;
        d->buf_off += d->at;
        d->at = 0;
    }
    if (d->len == d->cap) {
        size_t cap = d->cap * 2;
        uint8_t *b = realloc(d->buf, cap);
        if (b == NULL)
            return -ENOMEM;
        d->buf = b;
        d->cap = cap;
    }
    size_t want = d->cap - d->len;
    if (d->end - d->pos < want)
        want = (size_t)(d->end - d->pos);
    ssize_t got = d->zctx ? unzstd(d, d->buf + d->len, want)
                          : read_at(d, d->buf + d->len, want, d->pos);
    if (got < 0)
        return (int)got;
    if (got == 0) {
        d->eof = 1;
        return 0;
    }
    if (d->zctx == NULL)
        d->bytes += (uint64_t)got;
    d->len += (size_t)got;
    d->pos += (uint64_t)got;
    return 1;
}

/* The next line of the range (the rest of the file when the file is one
 * document): 1 with line[0..*n) (no newline) at file offset *off, 0 at the
 * end, DPP_ETOOBIG for a line longer than max_doc (passed over, *off its
 * start), or -errno. */
static int next_line(dpp_text_docs_t *d, const uint8_t **line, size_t *n, uint64_t *off)
{
    size_t scanned = 0; /* bytes of the line searched for its newline */
    int whole = d->kind == KIND_FILE;
    for (;;) {
        const uint8_t *from = d->buf + d->at + scanned;
        uint8_t *nl = whole ? NULL : memchr(from, '\n', d->len - d->at - scanned);
        int exhausted = d->eof || d->pos >= d->end;
        if (nl || (exhausted && d->len > d->at)) {
            size_t stop = nl ? (size_t)(nl - d->buf) : d->len;
            *line = d->buf + d->at;
            *n = stop - d->at;
            *off = d->buf_off + d->at;
            if (!whole && *n && (*line)[*n - 1] == '\r')
                (*n)--;
            d->at = nl ? stop + 1 : stop;
            return 1;
        }
        if (exhausted)
            return 0;
        scanned = d->len - d->at;
        if (scanned > d->max_doc) {
            /* too long: drop what is buffered and read on to its end */
            *off = d->buf_off + d->at;
            for (;;) {
                d->at = d->len;
                int rc = fill(d);
                if (rc <= 0)
                    return rc < 0 ? rc : DPP_ETOOBIG;
                uint8_t *e = whole ? NULL : memchr(d->buf, '\n', d->len);
                if (e) {
                    d->at = (size_t)(e - d->buf) + 1;
                    return DPP_ETOOBIG;
                }
            }
        }
        int rc = fill(d); /* moves the line to the buffer's start */
        if (rc < 0)
            return rc;
    }
}

/* ---- counting what is no document -------------------------------------- */

/* Counts an input that is no document; under on_corrupt: fail returns the
 * error that ends the split, else 0. */
static int reject(dpp_text_docs_t *d, int reason, uint64_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int reject(dpp_text_docs_t *d, int reason, uint64_t pos, const char *fmt, ...)
{
    dpp_text_docs_counts_t *c = &d->counts;
    dpp_rejects_count(&c->rejects, reason, 1);
    if (c->reject_detail[0] == '\0') {
        int k = snprintf(c->reject_detail, sizeof c->reject_detail,
                         d->kind == KIND_PARQUET ? "file %s, row %" PRIu64 ": "
                         : d->kind == KIND_FILE  ? "file %s (read whole from offset %" PRIu64 "): "
                                                 : "file %s, line at offset %" PRIu64 ": ",
                         d->rel_path, pos);
        va_list ap;
        va_start(ap, fmt);
        if (k > 0 && (size_t)k < sizeof c->reject_detail)
            vsnprintf(c->reject_detail + k, sizeof c->reject_detail - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return d->on_corrupt_fail ? reason : 0;
}

int dpp_text_docs_refuse(dpp_text_docs_t *d, int reason, const char *why)
{
    if (d->counts.documents > 0)
        d->counts.documents--;
    return reject(d, reason, d->last, "%s", why);
}

static int grow_text(dpp_text_docs_t *d, size_t need)
{
    if (need <= d->unescaped_cap)
        return 0;
    size_t cap = d->unescaped_cap ? d->unescaped_cap : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *b = realloc(d->unescaped, cap);
    if (b == NULL)
        return -ENOMEM;
    d->unescaped = b;
    d->unescaped_cap = cap;
    return 0;
}

/* A document found: returned unless its length is outside the spec's. */
static int take(dpp_text_docs_t *d, const uint8_t *text, size_t len, const uint8_t **out,
                size_t *out_len)
{
    if (len < d->text->min_bytes || len > d->text->max_bytes) {
        d->counts.filtered++;
        return 1;
    }
    d->counts.documents++;
    *out = text;
    *out_len = len;
    return 1;
}

/* ---- JSON Lines ---------------------------------------------------------- */

/* "; did you mean "text"? (the line has: id, lang, text)" for a text field
 * a line does not have, from the line's top-level keys (a line that
 * dpp_jsonl_parse() accepted; jansson reads it again, once per split). */
static void line_keys_hint(const uint8_t *line, size_t n, const char *field, char *buf,
                           size_t len)
{
    enum { MAX_KEYS = 32 };
    json_t *obj = json_loadb((const char *)line, n, JSON_DECODE_ANY, NULL);
    const char *keys[MAX_KEYS];
    size_t k = 0;
    for (void *it = json_object_iter(obj); it && k < MAX_KEYS; it = json_object_iter_next(obj, it))
        keys[k++] = json_object_iter_key(it);
    if (k > 0)
        dpp_suggest(buf, len, field, keys, k, "the line has", 12);
    json_decref(obj);
}

/* A line's document: 1 with *out (NULL when the line is none), or the
 * error that ends the split. */
static int json_line(dpp_text_docs_t *d, const uint8_t *line, size_t n, uint64_t off,
                     const uint8_t **out, size_t *out_len)
{
    const dpp_text_spec_t *t = d->text;
    dpp_json_value_t vals[MAX_FIELDS];
    size_t at = 0;
    const char *why = NULL;
    int rc;
    if (dpp_jsonl_parse(line, n, d->fields, d->nfields, vals, &at, &why) != 0)
        return (rc = reject(d, DPP_ECORRUPT, off, "%s at byte %zu of the line", why, at)) ? rc : 1;
    if (vals[0].kind == DPP_JSON_ABSENT) {
        char hint[512] = "";
        if (d->counts.reject_detail[0] == '\0') /* the first one: worth a "did you mean" */
            line_keys_hint(line, n, t->field, hint, sizeof hint);
        rc = reject(d, DPP_EMISSING, off, "no field \"%s\" (text.field)%s", t->field, hint);
        return rc ? rc : 1;
    }
    if (vals[0].kind != DPP_JSON_STRING)
        return (rc = reject(d, DPP_ETYPE, off, "field \"%s\" is not a string", t->field)) ? rc
                                                                                          : 1;
    for (unsigned w = 0; w < t->nwhere; w++) {
        const dpp_json_value_t *v = &vals[1 + w];
        size_t want = strlen(t->where_values[w]);
        int pass = v->kind == DPP_JSON_STRING;
        if (pass && v->escaped) {
            if (grow_text(d, v->len) != 0)
                return -ENOMEM;
            size_t len = dpp_jsonl_unescape(line, v, d->unescaped);
            pass = len == want && memcmp(d->unescaped, t->where_values[w], want) == 0;
        } else if (pass) {
            pass = v->len == want && memcmp(line + v->off, t->where_values[w], want) == 0;
        }
        if (!pass) {
            d->counts.filtered++;
            return 1;
        }
    }
    if (!vals[0].escaped)
        return take(d, line + vals[0].off, vals[0].len, out, out_len);
    if (grow_text(d, vals[0].len) != 0)
        return -ENOMEM;
    size_t len = dpp_jsonl_unescape(line, &vals[0], d->unescaped);
    return take(d, d->unescaped, len, out, out_len);
}

/* The next line of a JSON Lines or plain text range, or the file read
 * whole, as dpp_text_docs_step. */
static int step_lines(dpp_text_docs_t *d, const uint8_t **out, size_t *out_len)
{
    const uint8_t *line;
    size_t n;
    uint64_t off = 0;
    int rc = next_line(d, &line, &n, &off);
    d->last = off;
    if (rc == DPP_ETOOBIG) {
        rc = reject(d, DPP_ETOOBIG, off,
                    "longer than the worker's %" PRIu64 " byte limit (--max-record-mb)",
                    d->max_doc);
        return rc ? rc : 1;
    }
    if (rc != 1)
        return rc;
    size_t lead = 0;
    while (lead < n && (line[lead] == ' ' || line[lead] == '\t' || line[lead] == '\r' ||
                        (d->kind == KIND_FILE && line[lead] == '\n')))
        lead++;
    if (lead == n) /* a blank line (or file) is no document, and no error */
        return 1;
    if (d->kind == KIND_JSONL)
        return json_line(d, line, n, off, out, out_len);
    return take(d, line, n, out, out_len);
}

/* ---- a Parquet string column -------------------------------------------- */

/* Opens the columns of row group g at its first row. */
static int open_group(dpp_text_docs_t *d, uint32_t g, char *err, size_t errlen)
{
    for (size_t i = 0; i < d->nfields; i++) {
        if (d->cols[i])
            d->bytes += dpp_pq_col_bytes_read(d->cols[i]);
        dpp_pq_col_free(d->cols[i]);
        d->cols[i] = NULL;
        if (dpp_pq_col_open(&d->cols[i], &d->pq, g, d->pq_fields[i], &d->dctx) != 0)
            return dpp_errf(-ENOMEM, err, errlen, "file %s: out of memory", d->rel_path);
    }
    const dpp_pq_row_group_t *rg = &d->pq.meta.row_groups[g];
    d->group = g;
    d->group_end = (uint64_t)(rg->first_row + rg->num_rows);
    return 0;
}

/* Reading stopped for good: the error, with why (the column reader's). */
static int pq_broken(dpp_text_docs_t *d, int rc, const char *why)
{
    snprintf(d->why, sizeof d->why, "%s", why);
    d->broken = rc == -ENOMEM ? rc : DPP_ECORRUPT;
    return d->broken;
}

/* A string column's value in a row's slots: 1 with *s, *n; 0 for null. */
static int slot_string(const dpp_feat_ref_t *r, const uint8_t **s, size_t *n)
{
    size_t pos = 0;
    return r->kind == DPP_FEAT_BYTES && dpp_feat_bytes_next(r, &pos, s, n) == 1;
}

static int step_parquet(dpp_text_docs_t *d, const uint8_t **out, size_t *out_len)
{
    if (d->broken)
        return d->broken;
    if (d->row >= d->row_end)
        return 0;
    char why[512];
    while (d->row >= d->group_end) {
        uint32_t g = d->group_end ? d->group + 1 : 0;
        const dpp_pq_meta_t *m = &d->pq.meta;
        while (g < m->nrow_groups &&
               d->row >= (uint64_t)(m->row_groups[g].first_row + m->row_groups[g].num_rows))
            g++;
        if (g == m->nrow_groups) {
            snprintf(why, sizeof why, "the file has %" PRId64 " rows, the split needs row %" PRIu64,
                     m->num_rows, d->row);
            return pq_broken(d, DPP_ECORRUPT, why);
        }
        int rc = open_group(d, g, why, sizeof why);
        uint64_t skip = d->row - (uint64_t)m->row_groups[g].first_row;
        for (size_t i = 0; rc == 0 && skip > 0 && i < d->nfields; i++)
            rc = dpp_pq_col_skip(d->cols[i], skip, why, sizeof why);
        if (rc)
            return pq_broken(d, rc, why);
    }
    d->slots.len = 0;
    for (size_t i = 0; i < d->nfields; i++) {
        int rc = dpp_pq_col_read(d->cols[i], &d->slots, NULL, why, sizeof why);
        if (rc)
            return pq_broken(d, rc, why);
    }
    dpp_feat_ref_t refs[MAX_FIELDS];
    if (dpp_pq_row_decode(d->slots.data, d->slots.len, d->nfields, refs) != 0)
        return pq_broken(d, DPP_ECORRUPT, "a row's values do not decode");
    uint64_t row = d->last = d->row++;
    const uint8_t *s;
    size_t n;
    int rc;
    if (!slot_string(&refs[0], &s, &n))
        return (rc = reject(d, DPP_EMISSING, row, "column \"%s\" (text.field) is null",
                            d->text->field))
                   ? rc
                   : 1;
    const dpp_text_spec_t *t = d->text;
    for (unsigned w = 0; w < t->nwhere; w++) {
        const uint8_t *v;
        size_t vn, want = strlen(t->where_values[w]);
        if (!slot_string(&refs[1 + w], &v, &vn) || vn != want ||
            memcmp(v, t->where_values[w], want) != 0) {
            d->counts.filtered++;
            return 1;
        }
    }
    return take(d, s, n, out, out_len);
}

/* The columns a Parquet text session reads: each a string (BYTE_ARRAY)
 * column of one value a row, named by text.field or a where key. */
static int open_parquet(dpp_text_docs_t *d, const char *path, dpp_rfile_t *object,
                        uint64_t start, uint64_t end, char *err, size_t errlen)
{
    int rc;
    if (object) {
        dpp_pq_file_attach(&d->pq, object, d->rel_path);
        rc = dpp_pq_file_footer(&d->pq, NULL, 0, err, errlen);
    } else {
        rc = dpp_pq_file_open(&d->pq, path, d->rel_path, err, errlen);
    }
    if (rc)
        return rc;
    d->size = d->pq.size;
    d->mtime_ns = d->pq.mtime_ns;
    const dpp_pq_meta_t *m = &d->pq.meta;
    for (size_t i = 0; i < d->nfields; i++) {
        const char *what = i == 0 ? "text.field" : "text.where";
        const dpp_pq_field_t *f = dpp_pq_meta_field(m, d->fields[i]);
        if (f == NULL) {
            enum { MAX_LISTED = 64 };
            const char *names[MAX_LISTED];
            size_t k = 0;
            for (uint32_t c = 0; c < m->nfields && k < MAX_LISTED; c++)
                names[k++] = m->fields[c].name;
            char hint[768];
            return dpp_errf(DPP_ESPEC, err, errlen, "file %s: no column \"%s\" (%s)%s",
                            d->rel_path, d->fields[i], what,
                            dpp_suggest(hint, sizeof hint, d->fields[i], names, k,
                                        "the file has", 16));
        }
        if ((rc = dpp_pq_field_check(&d->pq, f, err, errlen)) != 0)
            return rc;
        static const char *const types[] = {"BOOLEAN", "INT32", "INT64", "INT96",
                                            "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
        dpp_pq_type_t type = m->columns[f->column].type;
        if (f->shape != DPP_PQ_SCALAR || type != DPP_PQ_BYTE_ARRAY)
            return dpp_errf(DPP_ETYPE, err, errlen,
                            "file %s: column \"%s\" (%s) is %s%s, not a string column "
                            "(BYTE_ARRAY, one value a row)",
                            d->rel_path, d->fields[i], what,
                            f->shape == DPP_PQ_LIST ? "a list of " : "",
                            (unsigned)type < 8 ? types[type] : "of an unknown type");
        d->pq_fields[i] = f;
    }
    d->row = start;
    d->row_end = end < (uint64_t)m->num_rows ? end : (uint64_t)m->num_rows;
    return 0;
}

/* ---- the interface ---------------------------------------------------- */

int dpp_text_docs_open(dpp_text_docs_t **out, const dpp_spec_t *spec, const char *path,
                       dpp_rfile_t *object, const char *rel_path, char *const *roots,
                       size_t nroots, uint64_t start, uint64_t end, uint64_t max_doc, char *err,
                       size_t errlen)
{
    *out = NULL;
    dpp_text_docs_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "file %s: out of memory", rel_path);
    *out = d;
    d->local.fd = -1;
    d->text = spec->text;
    d->kind = spec->format == DPP_FORMAT_PARQUET ? KIND_PARQUET
              : spec->format == DPP_FORMAT_JSONL ? KIND_JSONL
              : spec->text->unit == DPP_TEXT_UNIT_FILE ? KIND_FILE
                                                        : KIND_LINES;
    d->rel_path = rel_path;
    d->on_corrupt_fail = spec->on_corrupt_fail;
    d->max_doc = max_doc;
    d->fields[d->nfields++] = spec->text->field;
    for (unsigned w = 0; w < spec->text->nwhere; w++)
        d->fields[d->nfields++] = spec->text->where_keys[w];
    int rc = object ? 0 : dpp_path_check_under(path, roots, nroots, NULL);
    if (rc)
        return dpp_errf(rc, err, errlen, "file %s: %s", rel_path,
                        rc == DPP_EPATH ? "outside the worker's data roots, or a symlink appeared "
                                          "since the master resolved it"
                                        : dpp_strerror(rc));
    if (d->kind == KIND_PARQUET)
        return open_parquet(d, path, object, start, end, err, errlen);
    d->pos = d->buf_off = start;
    d->end = end;
    if (object) {
        d->in = object;
    } else {
        struct stat sb;
        if ((d->local.fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(d->local.fd, &sb) != 0)
            return dpp_errf(-errno, err, errlen, "file %s: %s", rel_path, strerror(errno));
        dpp_rfile_local(&d->local, d->local.fd, (uint64_t)sb.st_size,
                        (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec);
        d->in = &d->local;
    }
    d->size = d->in->size;
    d->mtime_ns = d->in->version;
    if (end == UINT64_MAX && !is_zst(path))
        d->end = d->size; /* the file as it was when looked at (.zst: its stream's end) */
    if ((d->buf = malloc(READ_CHUNK)) == NULL ||
        (is_zst(path) &&
         ((d->zctx = ZSTD_createDCtx()) == NULL || (d->zin = malloc(ZSTD_DStreamInSize())) == NULL)))
        return dpp_errf(-ENOMEM, err, errlen, "file %s: out of memory", rel_path);
    d->cap = READ_CHUNK;
    /* a compressed stream is decompressed from its start up to the range */
    for (uint64_t skip = d->zctx ? start : 0; skip > 0;) {
        ssize_t got = unzstd(d, d->buf, skip < d->cap ? (size_t)skip : d->cap);
        if (got <= 0)
            return dpp_errf(got < 0 ? (int)got : DPP_EINDEX, err, errlen,
                            "file %s: %s before decompressed offset %" PRIu64
                            " where the split starts (the file changed since it was indexed?)",
                            rel_path, got == 0 ? "the stream ends" : d->why, start);
        skip -= (uint64_t)got;
    }
    return 0;
}

int dpp_text_docs_step(dpp_text_docs_t *d, const uint8_t **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    return d->kind == KIND_PARQUET ? step_parquet(d, text, len) : step_lines(d, text, len);
}

uint64_t dpp_text_docs_pos(const dpp_text_docs_t *d)
{
    return d->kind == KIND_PARQUET ? d->row : d->buf_off + d->at;
}

uint64_t dpp_text_docs_last(const dpp_text_docs_t *d)
{
    return d->last;
}

int dpp_text_docs_broken(const dpp_text_docs_t *d)
{
    return d->broken;
}

const char *dpp_text_docs_why(const dpp_text_docs_t *d)
{
    return d->broken ? d->why : NULL;
}

const dpp_text_docs_counts_t *dpp_text_docs_counts(dpp_text_docs_t *d)
{
    d->counts.bytes_read = d->bytes;
    for (size_t i = 0; i < d->nfields; i++)
        if (d->cols[i])
            d->counts.bytes_read += dpp_pq_col_bytes_read(d->cols[i]);
    return &d->counts;
}

void dpp_text_docs_stat(const dpp_text_docs_t *d, uint64_t *size, int64_t *mtime_ns)
{
    *size = d->size;
    *mtime_ns = d->mtime_ns;
}
