/* SPDX-License-Identifier: Apache-2.0 */
/* The Parquet source (source.h). A split is a range of rows inside one row
 * group (the index cuts row groups every split_rows rows); only the column
 * chunks of the spec's features are read: what the split needs of them (the
 * pages holding its rows, when the file has offset indexes) in a few
 * coalesced reads through the thread's io_uring reader, then each column
 * decoded page by page (src/parquet/column.h); a row travels as one slot
 * per projected feature, decoded back into native feature references.
 * Index tasks read the footer only. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errtext.h"
#include "base/log.h"
#include "base/reject.h"
#include "dpp/error.h"
#include "parquet/column.h"
#include "source.h"
#include "storage/s3.h"
#include "spec/table.h"

/* The projection: feature names in slot order. */
typedef struct pq_proj {
    size_t n;
    char **names;
} pq_proj_t;

/* Reads this close together are one read: a request costs more than the
 * gap's bytes (a network filesystem's round trip, a syscall), as DuckDB's
 * and Arrow's readers coalesce. An object store's GET costs milliseconds,
 * a MiB of bandwidth or more. */
#define HOLE_BYTES (64u << 10)
#define OBJECT_HOLE_BYTES (1u << 20)

typedef struct pq_split {
    dpp_pq_file_t file;
    dpp_s3_rfile_t obj; /* an s3:// file's: what file reads from */
    dpp_pq_span_t *spans; /* what was read ahead, in the reader's scratch */
    dpp_pq_dctx_t dctx;
    const pq_proj_t *proj;
    dpp_pq_col_t **cols; /* per slot; NULL where the file lacks the feature */
    uint32_t *leaf;      /* per slot: the leaf column cols[i] reads */
    dpp_pq_buf_t row;
    uint64_t left; /* rows of the range still to produce */
    int stuck;     /* the error that ended reading, repeated */
    uint64_t stuck_offset;
    char why[512]; /* what the column reader said of it */
} pq_split_t;

static void projection_free(void *proj)
{
    pq_proj_t *p = proj;
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->names[i]);
    free(p->names);
    free(p);
}

static int projection_new(void **proj, const char *const *names, size_t n,
                          const dpp_spec_t *spec, const char *root,
                          const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    (void)spec;
    (void)root;
    (void)cfg;
    (void)err;
    (void)errlen;
    pq_proj_t *p = calloc(1, sizeof *p);
    *proj = p;
    if (p == NULL || (p->names = calloc(n + 1, sizeof *p->names)) == NULL)
        goto nomem;
    for (; p->n < n; p->n++)
        if ((p->names[p->n] = strdup(names[p->n])) == NULL)
            goto nomem;
    return 0;
nomem:
    projection_free(p);
    *proj = NULL;
    return -ENOMEM;
}

static const char *outside_roots =
    "outside the worker's data roots, or a symlink appeared since the master resolved it";

/* The code a column's failure stops the split with: a damaged page is a
 * corrupted record (a reason: counted, skipped under on_corrupt: skip), but
 * a read that failed (an object store's refusal, an object changed since
 * the session was planned, EIO) keeps its own code and fails the split,
 * never counted as rejected rows. The decoder's own errors are reasons
 * already or DPP_EINVAL (src/parquet/column.c). */
static int page_error(int rc)
{
    return dpp_reject_is(rc) || rc != DPP_EINVAL ? rc : DPP_ECORRUPT;
}

/* Reading stopped at offset for err (a page error): later calls repeat it. */
static int stop_reading(pq_split_t *x, int err, uint64_t offset, const char *why)
{
    if (!x->stuck) {
        DPP_WARN("parquet_read_failed %s", why);
        snprintf(x->why, sizeof x->why, "%s", why);
    }
    x->stuck = err;
    x->stuck_offset = offset;
    return err;
}

static int pq_skip(dpp_source_t *s, uint64_t n);

/* A byte range [off, end) of the file. */
typedef struct want {
    uint64_t off, end;
} want_t;

static int by_offset(const void *a, const void *b)
{
    const want_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Sorts w[0..n) and merges ranges that overlap or lie within the hole of
 * f (HOLE_BYTES, OBJECT_HOLE_BYTES) of each other. Returns the ranges left. */
static size_t coalesce(const dpp_pq_file_t *f, want_t *w, size_t n)
{
    uint64_t hole = dpp_s3_rfile_of(f->in) ? OBJECT_HOLE_BYTES : HOLE_BYTES;
    if (n == 0)
        return 0;
    qsort(w, n, sizeof *w, by_offset);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (w[i].off <= w[k].end + hole) {
            if (w[i].end > w[k].end)
                w[k].end = w[i].end;
        } else {
            w[++k] = w[i];
        }
    }
    return k + 1;
}

/* Reads w[0..n) (coalesced) through the reader, as many as fit its scratch
 * in file order; fills spans[0..) and returns how many were read (0 when
 * the reads failed: the columns then read for themselves and report what
 * is wrong, with the offset). */
static size_t read_wants(dpp_reader_t *reader, dpp_rfile_t *src, const want_t *w, size_t n,
                         dpp_pq_span_t *spans, uint64_t *bytes)
{
    dpp_read_range_t *rr = calloc(n + 1, sizeof *rr);
    if (rr == NULL)
        return 0;
    size_t k = 0, total = 0, max = dpp_reader_ranges_max(reader);
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(w[i].end - w[i].off);
        if (len > max - total)
            continue; /* streamed by its columns' windows instead */
        rr[k++] = (dpp_read_range_t){.src = src, .off = w[i].off, .len = len};
        total += len;
    }
    int rc = dpp_reader_read_ranges(reader, -1, rr, k);
    if (rc) {
        DPP_DEBUG("parquet_read_ahead_failed error=\"%s\" effect=\"columns read for themselves\"",
                  dpp_strerror(rc));
        k = 0;
    }
    for (size_t i = 0; i < k; i++)
        spans[i] = (dpp_pq_span_t){rr[i].off, rr[i].len, rr[i].data};
    *bytes += rc ? 0 : total;
    free(rr);
    return k;
}

/* Where chunk k's pages start and end. */
static want_t chunk_bytes(const dpp_pq_chunk_t *k)
{
    uint64_t start = (uint64_t)k->data_page_offset;
    /* Some writers set dictionary_page_offset 0 for "none". */
    if (k->dictionary_page_offset > 0 && (uint64_t)k->dictionary_page_offset < start)
        start = (uint64_t)k->dictionary_page_offset;
    return (want_t){start, start + (uint64_t)k->total_compressed_size};
}

/* What rows [r0, r1) of a row group need of chunk k, appended to w: the
 * whole chunk, or with its offset index (locs) the pages before the first
 * data page (the dictionary) and the data pages that hold those rows. A
 * repeated column also needs the page after: its last row ends where the
 * next entry starts a row, which the reader sees there. */
static size_t chunk_wants(const dpp_pq_chunk_t *k, int repeated, const dpp_pq_page_loc_t *locs,
                          size_t nlocs, uint64_t r0, uint64_t r1, want_t *w)
{
    want_t all = chunk_bytes(k);
    size_t p0 = 0, p1 = 0;
    for (size_t i = 0; i < nlocs; i++) {
        if ((uint64_t)locs[i].first_row_index <= r0)
            p0 = i;
        if ((uint64_t)locs[i].first_row_index < r1)
            p1 = i;
    }
    if (repeated && p1 + 1 < nlocs)
        p1++;
    if (nlocs == 0 || locs[0].offset < (int64_t)all.off || locs[p1].compressed_page_size < 0 ||
        (uint64_t)locs[p1].offset + (uint64_t)locs[p1].compressed_page_size > all.end) {
        w[0] = all; /* no offset index, or one that does not fit the chunk */
        return 1;
    }
    size_t n = 0;
    if ((uint64_t)locs[0].offset > all.off)
        w[n++] = (want_t){all.off, (uint64_t)locs[0].offset};
    w[n++] = (want_t){(uint64_t)locs[p0].offset,
                      (uint64_t)locs[p1].offset + (uint64_t)locs[p1].compressed_page_size};
    return n;
}

/* Whether chunk k has an offset index inside the file. */
static int has_offset_index(const dpp_pq_chunk_t *k, uint64_t size)
{
    return k->offset_index_offset >= 0 && k->offset_index_length > 0 &&
           (uint64_t)k->offset_index_offset + (uint64_t)k->offset_index_length <= size;
}

/* Reads ahead what rows [r0, r1) of row group g need of the projected
 * columns (x->cols), in coalesced reads through the reader. A split of
 * part of a row group reads the columns' offset indexes first (one read,
 * usually: writers put them together), to read only the pages it needs. */
static void read_ahead(pq_split_t *x, dpp_reader_t *reader, uint32_t g, uint64_t r0, uint64_t r1,
                       uint64_t *bytes)
{
    const dpp_pq_meta_t *m = &x->file.meta;
    const dpp_pq_row_group_t *rg = &m->row_groups[g];
    size_t n = x->proj->n;
    int part = r0 > 0 || r1 < (uint64_t)rg->num_rows;
    want_t *w = calloc(3 * n + 1, sizeof *w);
    dpp_pq_span_t *spans = calloc(3 * n + 1, sizeof *spans);
    dpp_pq_page_loc_t **locs = calloc(n + 1, sizeof *locs);
    size_t *nlocs = calloc(n + 1, sizeof *nlocs);
    size_t nw = 0;
    if (w == NULL || spans == NULL || locs == NULL || nlocs == NULL)
        goto out;
    for (size_t i = 0; part && i < n; i++) {
        const dpp_pq_chunk_t *k = x->cols[i] ? &rg->chunks[x->leaf[i]] : NULL;
        if (k && has_offset_index(k, x->file.size))
            w[nw++] = (want_t){(uint64_t)k->offset_index_offset,
                               (uint64_t)k->offset_index_offset + (uint64_t)k->offset_index_length};
    }
    size_t nidx = read_wants(reader, x->file.in, w, coalesce(&x->file, w, nw), spans, bytes);
    x->file.spans = spans;
    x->file.nspans = nidx;
    nw = 0;
    for (size_t i = 0; i < n; i++) {
        if (x->cols[i] == NULL)
            continue;
        const dpp_pq_chunk_t *k = &rg->chunks[x->leaf[i]];
        char why[128];
        const uint8_t *idx;
        if (nidx > 0 && has_offset_index(k, x->file.size) &&
            (idx = dpp_pq_file_bytes(&x->file, (uint64_t)k->offset_index_offset,
                                     (size_t)k->offset_index_length)) != NULL &&
            dpp_pq_offset_index_parse(idx, (size_t)k->offset_index_length, &locs[i], &nlocs[i], why,
                                      sizeof why) != 0)
            nlocs[i] = 0; /* a bad index: the whole chunk, skipped by its headers */
        int repeated = m->columns[x->leaf[i]].max_rep > 0;
        nw += chunk_wants(k, repeated, locs[i], nlocs[i], r0, r1, &w[nw]);
        if (nlocs[i] > 0) /* again for the column's skip, read with the pages */
            w[nw++] = (want_t){(uint64_t)k->offset_index_offset,
                               (uint64_t)k->offset_index_offset + (uint64_t)k->offset_index_length};
    }
    /* the offset indexes' bytes are about to be overwritten */
    x->file.spans = NULL;
    x->file.nspans = 0;
    x->file.nspans = read_wants(reader, x->file.in, w, coalesce(&x->file, w, nw), spans, bytes);
    x->file.spans = spans;
    x->spans = spans;
    spans = NULL;
out:
    for (size_t i = 0; locs && i < n; i++)
        free(locs[i]);
    free(locs);
    free(nlocs);
    free(w);
    free(spans);
}

static int pq_open(dpp_source_t *s, dpp_reader_t *reader, const dpp_task_t *t, const void *proj,
                   const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    s->ops = &dpp_source_parquet;
    s->task = t;
    int object = dpp_s3_is_url(t->path);
    int rc = object ? 0 : dpp_path_check_under(t->path, cfg->roots, cfg->nroots, NULL);
    if (rc)
        return dpp_errf(rc, err, errlen, "file %s: %s", t->rel_path,
                        rc == DPP_EPATH ? outside_roots : dpp_strerror(rc));
    const pq_proj_t *p = proj;
    pq_split_t *x = calloc(1, sizeof *x);
    if (x == NULL || (x->cols = calloc(p->n + 1, sizeof *x->cols)) == NULL ||
        (x->leaf = calloc(p->n + 1, sizeof *x->leaf)) == NULL) {
        if (x)
            free(x->cols);
        free(x);
        return dpp_errf(-ENOMEM, err, errlen, "file %s: out of memory", t->rel_path);
    }
    s->state = x;
    x->proj = p;
    if (object) {
        if ((rc = dpp_source_object_open(cfg, t, &x->obj, err, errlen)) != 0)
            return rc;
        dpp_pq_file_attach(&x->file, &x->obj.rf, t->rel_path);
        rc = dpp_pq_file_footer(&x->file, NULL, 0, err, errlen);
    } else {
        rc = dpp_pq_file_open(&x->file, t->path, t->rel_path, err, errlen);
    }
    if (rc)
        return rc;
    const dpp_pq_meta_t *m = &x->file.meta;
    /* the range the index cut (a split may be a window of it) */
    uint64_t range = t->range_records ? t->range_records : t->record_count;
    uint32_t g = 0;
    while (g < m->nrow_groups &&
           t->record_start >= (uint64_t)(m->row_groups[g].first_row + m->row_groups[g].num_rows))
        g++;
    if (g == m->nrow_groups || t->record_start + range > (uint64_t)(m->row_groups[g].first_row +
                                                                    m->row_groups[g].num_rows))
        return dpp_errf(DPP_EINDEX, err, errlen,
                        "file %s: rows %" PRIu64 " to %" PRIu64
                        " are not inside one row group of the file (%" PRId64
                        " rows in %u row groups): the file changed since it was indexed",
                        t->rel_path, t->record_start, t->record_start + range, m->num_rows,
                        m->nrow_groups);
    const dpp_pq_row_group_t *rg = &m->row_groups[g];
    for (size_t i = 0; i < p->n; i++) {
        const dpp_pq_field_t *f = dpp_pq_meta_field(m, p->names[i]);
        if (f == NULL)
            continue; /* absent in every row, as a feature a record lacks */
        if ((rc = dpp_pq_field_check(&x->file, f, err, errlen)) != 0)
            return rc;
        dpp_pq_codec_t codec = rg->chunks[f->column].codec;
        if (codec == DPP_PQ_LZO || codec > DPP_PQ_LZ4_RAW)
            return dpp_errf(DPP_ETYPE, err, errlen,
                            "file %s: column \"%s\" is compressed with %s, which dpp does not "
                            "read (it reads SNAPPY, GZIP, ZSTD, LZ4, LZ4_RAW, BROTLI)",
                            t->rel_path, f->name, dpp_pq_codec_name(codec));
        x->leaf[i] = f->column;
        if ((rc = dpp_pq_col_open(&x->cols[i], &x->file, g, f, &x->dctx)) != 0)
            return dpp_errf(rc, err, errlen, "file %s: out of memory", t->rel_path);
    }
    uint64_t skip = t->record_start - (uint64_t)rg->first_row;
    read_ahead(x, reader, g, skip, skip + range, &s->bytes_read);
    if (skip > 0)
        pq_skip(s, skip); /* a damaged page on the way: next() reports it */
    x->left = range;
    return 0;
}

static int pq_skip(dpp_source_t *s, uint64_t n)
{
    pq_split_t *x = s->state;
    char why[512];
    if (x->stuck)
        return x->stuck;
    for (size_t i = 0; i < x->proj->n; i++) {
        if (x->cols[i] == NULL)
            continue;
        int rc = dpp_pq_col_skip(x->cols[i], n, why, sizeof why);
        if (rc)
            return stop_reading(x, rc == DPP_ETYPE ? DPP_ECORRUPT : page_error(rc), 0, why);
    }
    x->left -= n < x->left ? n : x->left;
    return 0;
}

static int pq_next(dpp_source_t *s, dpp_source_row_t *row)
{
    pq_split_t *x = s->state;
    if (x->stuck) {
        row->offset = x->stuck_offset;
        return x->stuck;
    }
    if (x->left == 0)
        return 0;
    x->row.len = 0;
    uint64_t first = UINT64_MAX;
    for (size_t i = 0; i < x->proj->n; i++) {
        char why[512];
        uint64_t off = 0;
        int rc = x->cols[i] ? dpp_pq_col_read(x->cols[i], &x->row, &off, why, sizeof why)
                            : dpp_pq_buf_absent(&x->row);
        if (rc == -ENOMEM)
            return rc;
        if (rc) {
            row->offset = off;
            return stop_reading(x, page_error(rc), off, why);
        }
        if (first == UINT64_MAX)
            first = off;
    }
    x->left--;
    row->data = x->row.data;
    row->len = x->row.len;
    row->offset = first == UINT64_MAX ? 0 : first;
    return 1;
}

static int pq_stuck(const dpp_source_t *s)
{
    const pq_split_t *x = s->state;
    return x && x->stuck != 0;
}

static const char *pq_why(const dpp_source_t *s)
{
    const pq_split_t *x = s->state;
    if (x == NULL || !x->stuck || !x->why[0])
        return NULL;
    /* the split's message names the file already */
    size_t n = x->file.name ? strlen(x->file.name) : 0;
    if (n && strncmp(x->why, "file ", 5) == 0 && strncmp(x->why + 5, x->file.name, n) == 0 &&
        strncmp(x->why + 5 + n, ": ", 2) == 0)
        return x->why + 7 + n;
    return x->why;
}

static size_t pq_names(const dpp_source_t *s, const uint8_t *row, size_t len, char *buf,
                       size_t buflen)
{
    (void)row;
    (void)len;
    const pq_split_t *x = s->state;
    size_t at = 0, n = 0;
    for (uint32_t i = 0; x && i < x->file.meta.nfields; i++) {
        size_t l = strlen(x->file.meta.fields[i].name);
        if (at + l + 1 > buflen)
            break;
        memcpy(buf + at, x->file.meta.fields[i].name, l + 1);
        at += l + 1;
        n++;
    }
    return n;
}

static int pq_decode(void *proj, const uint8_t *data, size_t len, dpp_feat_ref_t *refs)
{
    const pq_proj_t *p = proj;
    return dpp_pq_row_decode(data, len, p->n, refs);
}

static void pq_close(dpp_source_t *s)
{
    pq_split_t *x = s->state;
    if (x == NULL)
        return;
    for (size_t i = 0; x->cols && i < x->proj->n; i++) {
        if (x->cols[i])
            s->bytes_read += dpp_pq_col_bytes_read(x->cols[i]);
        dpp_pq_col_free(x->cols[i]);
    }
    free(x->cols);
    free(x->leaf);
    free(x->spans);
    dpp_pq_file_close(&x->file);
    dpp_s3_rfile_close(&x->obj);
    dpp_pq_dctx_free(&x->dctx);
    dpp_pq_buf_free(&x->row);
    free(x);
    s->state = NULL;
}

/* The first rows of the pages of row group g's largest column chunk (the
 * one whose pages cost most to decode twice), from its offset index: at
 * most cap of them into rows, in order. Returns how many (0: no usable
 * offset index). */
static size_t page_starts(dpp_pq_file_t *f, uint32_t g, uint64_t *rows, size_t cap)
{
    const dpp_pq_row_group_t *rg = &f->meta.row_groups[g];
    const dpp_pq_chunk_t *big = NULL;
    for (uint32_t c = 0; c < f->meta.ncolumns; c++)
        if (big == NULL || rg->chunks[c].total_compressed_size > big->total_compressed_size)
            big = &rg->chunks[c];
    if (big == NULL || !has_offset_index(big, f->size) || big->offset_index_length > (64 << 20))
        return 0;
    size_t len = (size_t)big->offset_index_length, n = 0, nlocs = 0;
    uint8_t *buf = malloc(len);
    dpp_pq_page_loc_t *locs = NULL;
    char why[128];
    if (buf && dpp_rfile_read_full(f->in, buf, len, (uint64_t)big->offset_index_offset) == 0 &&
        dpp_pq_offset_index_parse(buf, len, &locs, &nlocs, why, sizeof why) == 0)
        for (size_t i = 0; i < nlocs && n < cap; i++)
            if (locs[i].first_row_index > 0 && locs[i].first_row_index < rg->num_rows)
                rows[n++] = (uint64_t)locs[i].first_row_index;
    free(locs);
    free(buf);
    return n;
}

/* Where a range of a row group after `prev` (rows relative to the group) is
 * cut near `target`: at the page start of the group's largest chunk nearest
 * to it within a quarter of split_rows, so that neighbouring splits decode
 * no page of that column twice; at target where no page starts that near.
 * A range then holds at most 1.5 x split_rows rows (planner_parquet.c). */
static uint64_t cut_near(const uint64_t *starts, size_t n, uint64_t target, uint64_t prev,
                         uint32_t split_rows)
{
    uint64_t best = target, dist = split_rows / 4 + 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = starts[i] > target ? starts[i] - target : target - starts[i];
        if (starts[i] > prev && d < dist) {
            best = starts[i];
            dist = d;
        }
    }
    return best;
}

/* The index of a Parquet file is its footer: the row count, and a range
 * starting at every row group and about every split_rows rows inside one,
 * at a page boundary where the group's largest chunk has an offset index. */
static int pq_index(dpp_pq_file_t *f, const dpp_task_t *t, dpp_split_result_t *res)
{
    const dpp_pq_meta_t *m = &f->meta;
    size_t n = 1;
    for (uint32_t g = 0; g < m->nrow_groups; g++)
        n += ((uint64_t)m->row_groups[g].num_rows + t->split_rows - 1) / t->split_rows;
    res->bounds = malloc(n * sizeof *res->bounds);
    if (res->bounds == NULL)
        return dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
    size_t k = 0, cap = 0;
    uint64_t *starts = NULL;
    for (uint32_t g = 0; g < m->nrow_groups; g++) {
        const dpp_pq_row_group_t *rg = &m->row_groups[g];
        uint64_t rows = (uint64_t)rg->num_rows;
        res->bounds[k++] = (uint64_t)rg->first_row;
        if (rows <= t->split_rows)
            continue;
        /* pages of a sane writer hold at least a few rows each */
        size_t want = rows / 2 + 1 < 65536 ? rows / 2 + 1 : 65536;
        if (want > cap) {
            free(starts);
            cap = want;
            if ((starts = malloc(cap * sizeof *starts)) == NULL)
                cap = 0;
        }
        size_t ns = cap ? page_starts(f, g, starts, cap) : 0;
        uint64_t prev = 0;
        for (uint64_t target = t->split_rows; target < rows; target += t->split_rows) {
            uint64_t cut = cut_near(starts, ns, target, prev, t->split_rows);
            if (cut <= prev || cut >= rows)
                continue;
            res->bounds[k++] = (uint64_t)rg->first_row + cut;
            prev = cut;
        }
    }
    free(starts);
    res->bounds[k++] = (uint64_t)m->num_rows;
    res->nbounds = k;
    res->records = (uint64_t)m->num_rows;
    res->from_sidecar = 1; /* the footer (and offset indexes): no data page read */
    return 0;
}

/* An index task's file (an object: through o) is checked and opened (f's
 * size; rc, err: what the open said). */
static int index_start(const dpp_pipeline_config_t *cfg, const dpp_task_t *t, dpp_pq_file_t *f,
                       dpp_s3_rfile_t *o, dpp_split_result_t *res, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    memset(o, 0, sizeof *o);
    int object = dpp_s3_is_url(t->path);
    int rc = object ? 0 : dpp_path_check_under(t->path, cfg->roots, cfg->nroots, NULL);
    if (rc)
        return dpp_source_fail(res, rc, "file %s: %s", t->rel_path,
                               rc == DPP_EPATH ? outside_roots : dpp_strerror(rc));
    if (t->split_rows == 0)
        return dpp_source_fail(res, DPP_EINVAL, "index %s: split_rows 0", t->rel_path);
    if (object) {
        if ((rc = dpp_source_object_open(cfg, t, o, err, errlen)) == 0)
            dpp_pq_file_attach(f, &o->rf, t->rel_path);
    } else {
        rc = dpp_pq_file_start(f, t->path, t->rel_path, err, errlen);
    }
    if (rc)
        dpp_source_fail(res, rc, "%s", err);
    return rc;
}

/* The rest of an index task once its file is open: its footer (from tail,
 * when it was read with it) and the ranges; closes the file. */
static int index_finish(const dpp_task_t *t, dpp_pq_file_t *f, const uint8_t *tail, size_t tail_len,
                        dpp_split_result_t *res)
{
    char err[512];
    int rc = dpp_pq_file_footer(f, tail, tail_len, err, sizeof err);
    res->file_size = f->size;
    res->file_mtime_ns = f->mtime_ns;
    if (rc == DPP_ECORRUPT) {
        /* Not a Parquet file, or a damaged footer: none of its rows can be
         * found. Counted as one corrupted record (fails the session under
         * on_corrupt: fail), and the file contributes nothing. */
        dpp_rejects_count(&res->rejects, DPP_ECORRUPT, 1);
        snprintf(res->reject_detail, sizeof res->reject_detail, "%s", err);
        res->bounds = calloc(1, sizeof *res->bounds);
        res->nbounds = 1;
        res->records = 0;
        dpp_pq_file_close(f);
        return res->bounds ? 0
                           : dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
    }
    if (rc == 0)
        rc = pq_index(f, t, res);
    else
        dpp_source_fail(res, rc, "%s", err);
    dpp_pq_file_close(f);
    return rc;
}

static int pq_index_task(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                         dpp_split_result_t *res)
{
    dpp_pq_file_t f;
    dpp_s3_rfile_t o;
    char err[512];
    int rc = index_start(cfg, t, &f, &o, res, err, sizeof err);
    if (rc)
        dpp_pq_file_close(&f);
    else
        rc = index_finish(t, &f, NULL, 0, res);
    dpp_s3_rfile_close(&o);
    return rc;
}

/* Bytes of each file's end read with it: the footer of a file of a hundred
 * columns or so, its length and the magic, in the same read. A longer
 * footer is read again whole (Arrow reads 64 KiB, DuckDB 8 bytes first:
 * with thousands of small files in flight, 16 KiB is a fair middle). */
#define INDEX_TAIL (16u << 10)

/* Index tasks in a batch: every file opened, the tails of all of them read
 * in flight together through the ring, then each footer decoded. On a
 * filesystem with latency (NFS, Lustre, object stores behind FUSE) a
 * footer's round trip is paid once a batch, not once a file; locally the
 * saving is the second read of each file. */
static void pq_index_many(const dpp_pipeline_config_t *cfg, dpp_reader_t *reader,
                          const dpp_task_t *const *t, dpp_split_result_t *const *res, size_t n)
{
    dpp_pq_file_t *f = calloc(n + 1, sizeof *f);
    dpp_s3_rfile_t *o = calloc(n + 1, sizeof *o);
    dpp_read_range_t *rr = calloc(n + 1, sizeof *rr);
    size_t *of = calloc(n + 1, sizeof *of), nr = 0;
    char err[512];
    if (f == NULL || o == NULL || rr == NULL || of == NULL) {
        for (size_t i = 0; i < n; i++)
            pq_index_task(cfg, t[i], res[i]);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (index_start(cfg, t[i], &f[i], &o[i], res[i], err, sizeof err) != 0) {
            dpp_pq_file_close(&f[i]);
            continue;
        }
        size_t len = f[i].size < INDEX_TAIL ? (size_t)f[i].size : INDEX_TAIL;
        if (len == 0)
            continue;
        rr[nr] = (dpp_read_range_t){.src = f[i].in, .off = f[i].size - len, .len = len};
        of[i] = ++nr; /* 0: no tail read */
    }
    int rc = nr ? dpp_reader_read_ranges(reader, -1, rr, nr) : 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i].in == NULL)
            continue; /* failed to open: res says why */
        const dpp_read_range_t *r = rc == 0 && of[i] ? &rr[of[i] - 1] : NULL;
        index_finish(t[i], &f[i], r ? r->data : NULL, r ? r->len : 0, res[i]);
    }
out:
    for (size_t i = 0; o && i < n; i++)
        dpp_s3_rfile_close(&o[i]);
    free(o);
    free(f);
    free(rr);
    free(of);
}

const dpp_source_ops_t dpp_source_parquet = {
    .projection_new = projection_new,
    .projection_free = projection_free,
    .open = pq_open,
    .skip = pq_skip,
    .next = pq_next,
    .stuck = pq_stuck,
    .why = pq_why,
    .names = pq_names,
    .decode = pq_decode,
    .close = pq_close,
    .index = pq_index_task,
    .index_many = pq_index_many,
};
