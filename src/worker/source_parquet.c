/* SPDX-License-Identifier: Apache-2.0 */
/* The Parquet source (source.h). A split is a range of rows inside one row
 * group (the index cuts row groups every split_rows rows); only the column
 * chunks of the spec's features are read, each streamed page by page
 * (src/parquet/column.h), and a row travels as one slot per projected
 * feature, decoded back into native feature references. Index tasks read
 * the footer only. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errtext.h"
#include "base/log.h"
#include "base/reject.h"
#include "dpp/error.h"
#include "parquet/column.h"
#include "source.h"
#include "spec/table.h"

/* The projection: feature names in slot order. */
typedef struct pq_proj {
    size_t n;
    char **names;
} pq_proj_t;

typedef struct pq_split {
    dpp_pq_file_t file;
    dpp_pq_dctx_t dctx;
    const pq_proj_t *proj;
    dpp_pq_col_t **cols; /* per slot; NULL where the file lacks the feature */
    dpp_pq_buf_t row;
    uint64_t left; /* rows of the range still to produce */
    int stuck;     /* the error that ended reading, repeated */
    uint64_t stuck_offset;
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

static int projection_new(void **proj, const char *const *names, size_t n)
{
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

/* Reading stopped at offset for err (a page error): later calls repeat it. */
static int stop_reading(pq_split_t *x, int err, uint64_t offset, const char *why)
{
    if (!x->stuck)
        DPP_WARN("parquet_read_failed %s", why);
    x->stuck = err;
    x->stuck_offset = offset;
    return err;
}

static int pq_skip(dpp_source_t *s, uint64_t n);

static int pq_open(dpp_source_t *s, dpp_reader_t *reader, const dpp_task_t *t, const void *proj,
                   const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    (void)reader; /* Parquet is read by column, not through the record reader */
    s->ops = &dpp_source_parquet;
    s->task = t;
    int rc = dpp_path_check_under(t->path, cfg->roots, cfg->nroots, NULL);
    if (rc)
        return dpp_errf(rc, err, errlen, "file %s: %s", t->rel_path,
                        rc == DPP_EPATH ? outside_roots : dpp_strerror(rc));
    const pq_proj_t *p = proj;
    pq_split_t *x = calloc(1, sizeof *x);
    if (x == NULL || (x->cols = calloc(p->n + 1, sizeof *x->cols)) == NULL) {
        free(x);
        return dpp_errf(-ENOMEM, err, errlen, "file %s: out of memory", t->rel_path);
    }
    s->state = x;
    x->proj = p;
    x->file.fd = -1;
    if ((rc = dpp_pq_file_open(&x->file, t->path, t->rel_path, err, errlen)) != 0)
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
        if ((rc = dpp_pq_col_open(&x->cols[i], &x->file, g, f, &x->dctx)) != 0)
            return dpp_errf(rc, err, errlen, "file %s: out of memory", t->rel_path);
    }
    uint64_t skip = t->record_start - (uint64_t)rg->first_row;
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
            return stop_reading(x, rc == DPP_ECORRUPT || rc == DPP_ETYPE ? DPP_ECORRUPT : rc, 0,
                                why);
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
            return stop_reading(x, dpp_reject_is(rc) ? rc : DPP_ECORRUPT, off, why);
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

static int pq_decode(const void *proj, const uint8_t *data, size_t len, dpp_feat_ref_t *refs)
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
    dpp_pq_file_close(&x->file);
    dpp_pq_dctx_free(&x->dctx);
    dpp_pq_buf_free(&x->row);
    free(x);
    s->state = NULL;
}

/* The index of a Parquet file is its footer: the row count, and a range
 * starting at every row group and every split_rows rows inside one. */
static int pq_index(const dpp_pq_file_t *f, const dpp_task_t *t, dpp_split_result_t *res)
{
    const dpp_pq_meta_t *m = &f->meta;
    size_t n = 1;
    for (uint32_t g = 0; g < m->nrow_groups; g++)
        n += ((uint64_t)m->row_groups[g].num_rows + t->split_rows - 1) / t->split_rows;
    res->bounds = malloc(n * sizeof *res->bounds);
    if (res->bounds == NULL)
        return dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
    size_t k = 0;
    for (uint32_t g = 0; g < m->nrow_groups; g++) {
        const dpp_pq_row_group_t *rg = &m->row_groups[g];
        for (uint64_t r = 0; r < (uint64_t)rg->num_rows; r += t->split_rows)
            res->bounds[k++] = (uint64_t)rg->first_row + r;
    }
    res->bounds[k++] = (uint64_t)m->num_rows;
    res->nbounds = k;
    res->records = (uint64_t)m->num_rows;
    res->from_sidecar = 1; /* the footer: nothing scanned */
    return 0;
}

static int pq_index_task(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                         dpp_split_result_t *res)
{
    int rc = dpp_path_check_under(t->path, cfg->roots, cfg->nroots, NULL);
    if (rc)
        return dpp_source_fail(res, rc, "file %s: %s", t->rel_path,
                               rc == DPP_EPATH ? outside_roots : dpp_strerror(rc));
    if (t->split_rows == 0)
        return dpp_source_fail(res, DPP_EINVAL, "index %s: split_rows 0", t->rel_path);
    dpp_pq_file_t f;
    char err[512];
    rc = dpp_pq_file_open(&f, t->path, t->rel_path, err, sizeof err);
    res->file_size = f.size;
    res->file_mtime_ns = f.mtime_ns;
    if (rc == DPP_ECORRUPT) {
        /* Not a Parquet file, or a damaged footer: none of its rows can be
         * found. Counted as one corrupted record (fails the session under
         * on_corrupt: fail), and the file contributes nothing. */
        dpp_rejects_count(&res->rejects, DPP_ECORRUPT, 1);
        snprintf(res->reject_detail, sizeof res->reject_detail, "%s", err);
        res->bounds = calloc(1, sizeof *res->bounds);
        res->nbounds = 1;
        res->records = 0;
        dpp_pq_file_close(&f);
        return res->bounds ? 0
                           : dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
    }
    if (rc == 0)
        rc = pq_index(&f, t, res);
    else
        dpp_source_fail(res, rc, "%s", err);
    dpp_pq_file_close(&f);
    return rc;
}

const dpp_source_ops_t dpp_source_parquet = {
    .format = DPP_FORMAT_PARQUET,
    .projection_new = projection_new,
    .projection_free = projection_free,
    .open = pq_open,
    .skip = pq_skip,
    .next = pq_next,
    .stuck = pq_stuck,
    .decode = pq_decode,
    .close = pq_close,
    .index = pq_index_task,
};
