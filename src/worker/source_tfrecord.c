/* SPDX-License-Identifier: Apache-2.0 */
/* The TFRecord source (source.h): framing read and verified by the thread's
 * reader (reader.c), rows decoded as tf.Example (format/example_decode.c);
 * index tasks from a .idx sidecar or a scan of the framing. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/errtext.h"
#include "base/log.h"
#include "base/reject.h"
#include "dpp/error.h"
#include "format/tfindex.h"
#include "source.h"
#include "spec/table.h"
#include "storage/s3.h"

/* What decode() projects, and what a split does at a gap in the framing. */
typedef struct tf_proj {
    dpp_projection_t *names;
    int fail_on_corrupt; /* the spec's on_corrupt: fail */
} tf_proj_t;

/* An open split's own. */
typedef struct tf_split {
    int fail_on_corrupt;
    uint64_t gaps; /* the reader's gaps already counted */
    int failed;    /* a gap under on_corrupt: fail ended the split */
    char why[300]; /* the last gap, in words */
} tf_split_t;

static int projection_new(void **proj, const char *const *names, size_t n, const dpp_spec_t *spec,
                          const char *root, const dpp_pipeline_config_t *cfg, char *err,
                          size_t errlen)
{
    (void)root;
    (void)cfg;
    (void)err;
    (void)errlen;
    *proj = NULL;
    tf_proj_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->fail_on_corrupt = spec->on_corrupt_fail;
    int rc = dpp_projection_new(&p->names, names, n);
    if (rc) {
        free(p);
        return rc;
    }
    *proj = p;
    return 0;
}

static void projection_free(void *proj)
{
    tf_proj_t *p = proj;
    if (p == NULL)
        return;
    dpp_projection_free(p->names);
    free(p);
}

static const char *outside_roots =
    "outside the worker's data roots, or a symlink appeared since the master resolved it";

static int tf_open(dpp_source_t *s, dpp_reader_t *reader, const dpp_task_t *t, const void *proj,
                   const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    s->ops = &dpp_source_tfrecord;
    s->reader = reader;
    s->task = t;
    tf_split_t *x = calloc(1, sizeof *x);
    if (x == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "file %s: out of memory", t->rel_path);
    x->fail_on_corrupt = ((const tf_proj_t *)proj)->fail_on_corrupt;
    s->state = x;
    if (dpp_s3_is_url(t->path)) {
        int rc = dpp_source_object_check(cfg, t, err, errlen);
        if (rc == 0 && (rc = dpp_reader_open_object(reader, t->path, t->etag, t->object_size,
                                                    t->byte_start, t->byte_end)) != 0)
            /* the reader's words name the object already */
            snprintf(err, errlen, "%s",
                     dpp_reader_error_text(reader)[0] ? dpp_reader_error_text(reader)
                                                      : dpp_strerror(rc));
        return rc;
    }
    int rc = dpp_path_check_under(t->path, cfg->roots, cfg->nroots, NULL);
    if (rc == 0)
        rc = dpp_reader_open(reader, t->path, t->byte_start, t->byte_end);
    if (rc)
        snprintf(err, errlen, "file %s: %s", t->rel_path,
                 rc == DPP_EPATH ? outside_roots : dpp_strerror(rc));
    return rc;
}

/* Once stuck, the store's words on an object's failed GET, or the gap
 * that failed the split. */
static const char *tf_why(const dpp_source_t *s)
{
    const tf_split_t *x = s->state;
    const char *text = s->reader ? dpp_reader_error_text(s->reader) : "";
    return text[0] ? text : x && x->failed ? x->why : NULL;
}

/* A gap in the framing is no row: the rows keep their numbers (the index
 * counted records on both sides of it), and the gap counts as one corrupted
 * record of the range, once, like a text source's rejected inputs; under
 * on_corrupt: fail it ends the split. */
static int tf_next(dpp_source_t *s, dpp_source_row_t *row)
{
    tf_split_t *x = s->state;
    int rc = dpp_reader_next(s->reader, &row->data, &row->len, &row->offset);
    uint64_t from, to, gaps = dpp_reader_gaps(s->reader, &from, &to);
    if (gaps == x->gaps)
        return rc;
    x->gaps = gaps;
    snprintf(x->why, sizeof x->why,
             "the framing breaks there: %" PRIu64 " bytes that are no record, records resume "
             "at offset %" PRIu64,
             to - from, to);
    if (x->fail_on_corrupt) {
        x->failed = 1;
        row->offset = from;
        return DPP_ECORRUPT;
    }
    dpp_rejects_count(&s->rejects, DPP_ECORRUPT, 1);
    if (!s->reject_detail[0])
        snprintf(s->reject_detail, sizeof s->reject_detail,
                 "file %s: corrupted record at offset %" PRIu64 ": %s", s->task->rel_path, from,
                 x->why);
    DPP_WARN("framing_gap file=%s offset=%" PRIu64 " bytes=%" PRIu64 " resume=%" PRIu64,
             s->task->rel_path, from, to - from, to);
    return rc;
}

static int tf_stuck(const dpp_source_t *s)
{
    const tf_split_t *x = s->state;
    return x && x->failed ? DPP_ECORRUPT : dpp_reader_stuck(s->reader);
}

static int tf_decode(void *proj, const uint8_t *data, size_t len, dpp_feat_ref_t *refs)
{
    return dpp_example_decode(((tf_proj_t *)proj)->names, data, len, refs);
}

static void tf_close(dpp_source_t *s)
{
    if (s->reader)
        dpp_reader_close(s->reader);
    free(s->state);
    s->state = NULL;
}

/* Appends a record at off to idx (sizes are filled in later). */
static int add_offset(dpp_tfindex_t *idx, size_t *cap, uint64_t off)
{
    if (idx->n == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        uint64_t *o = realloc(idx->offsets, c * sizeof *o);
        if (o == NULL)
            return -ENOMEM;
        idx->offsets = o;
        *cap = c;
    }
    idx->offsets[idx->n++] = off;
    return 0;
}

/* The index of an object, read whole through the thread's reader (a scan:
 * every record's framing, and its payload CRC, checked on the way). A
 * broken tail ends the index where it starts, as the local scan does. */
static int scan_object(dpp_reader_t *reader, const dpp_task_t *t, dpp_tfindex_t *idx,
                       dpp_tfindex_scan_result_t *tail, char *err, size_t errlen)
{
    memset(idx, 0, sizeof *idx);
    memset(tail, 0, sizeof *tail);
    int rc = dpp_reader_open_object(reader, t->path, t->etag, t->object_size, 0, UINT64_MAX);
    if (rc != 0) {
        snprintf(err, errlen, "%s",
                 dpp_reader_error_text(reader)[0] ? dpp_reader_error_text(reader)
                                                  : dpp_strerror(rc));
        return rc;
    }
    size_t cap = 0;
    uint64_t end = 0;
    for (;;) {
        const uint8_t *payload;
        size_t len;
        uint64_t off;
        rc = dpp_reader_next(reader, &payload, &len, &off);
        if (rc == 0) {
            end = off;
            break;
        }
        if (rc < 0 && dpp_reader_stuck(reader)) {
            if (!dpp_reject_is(rc) || dpp_reader_error_text(reader)[0]) {
                snprintf(err, errlen, "%s",
                         dpp_reader_error_text(reader)[0] ? dpp_reader_error_text(reader)
                                                          : dpp_strerror(rc));
                goto fail;
            }
            tail->error = rc;
            tail->error_offset = end = off;
            break;
        }
        /* a record (or one with a bad payload CRC: indexed, rejected when read) */
        if ((rc = add_offset(idx, &cap, off)) != 0) {
            snprintf(err, errlen, "out of memory after %zu records", idx->n);
            goto fail;
        }
    }
    uint64_t from, to, gaps = dpp_reader_gaps(reader, &from, &to);
    if (gaps > 0 && to >= t->object_size && tail->error == 0) {
        /* a gap that runs to the end: a broken tail, as the local scan has */
        tail->error = DPP_ECORRUPT;
        tail->error_offset = end = from;
        gaps--;
    }
    tail->gaps = gaps;
    dpp_reader_close(reader);
    if ((idx->sizes = malloc((idx->n ? idx->n : 1) * sizeof *idx->sizes)) == NULL) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < idx->n; i++)
        idx->sizes[i] = (i + 1 < idx->n ? idx->offsets[i + 1] : end) - idx->offsets[i];
    return 0;
fail:
    dpp_reader_close(reader);
    dpp_tfindex_close(idx);
    return rc;
}

/* An object's .idx sidecar, if the store has one: 0 with idx, -ENOENT when
 * it has none, else the error with err. */
static int load_object_sidecar(const dpp_task_t *t, dpp_tfindex_t *idx, char *err, size_t errlen)
{
    char url[DPP_S3_KEY_MAX + 80];
    dpp_s3_url_t u;
    snprintf(url, sizeof url, "%s.idx", t->path);
    int rc = dpp_s3_url_parse(url, &u, err, errlen);
    dpp_s3_t *s3 = dpp_s3_thread_client();
    if (rc != 0 || s3 == NULL)
        return rc ? rc : DPP_EPATH;
    dpp_s3_req_t r = {.bucket = u.bucket, .key = u.key, .cap = DPP_TFINDEX_MAX_TEXT};
    rc = dpp_s3_run(s3, &r);
    if (rc == 0)
        rc = dpp_tfindex_parse(r.body ? r.body : "", r.got, t->object_size, idx, err, errlen);
    else if (rc != -ENOENT)
        snprintf(err, errlen, "%s", r.err);
    free(r.body);
    return rc;
}

static int tf_index_one(const dpp_pipeline_config_t *cfg, dpp_reader_t *reader, const dpp_task_t *t,
                        dpp_split_result_t *res)
{
    dpp_tfindex_t idx;
    char err[600];
    int rc;
    if (dpp_s3_is_url(t->path)) {
        if ((rc = dpp_source_object_check(cfg, t, err, sizeof err)) != 0)
            return dpp_source_fail(res, rc, "%s", err);
        /* the listing's size and ETag: what the index is of, and its cache key */
        res->file_size = t->object_size;
        res->file_mtime_ns = dpp_s3_etag_version(t->etag);
        rc = load_object_sidecar(t, &idx, err, sizeof err);
        if (rc == 0) {
            res->from_sidecar = 1;
            goto bounds;
        }
        if (rc != -ENOENT)
            DPP_WARN("index_sidecar_ignored file=%s.idx reason=\"%s\"", t->path, err);
        dpp_reader_t *own = NULL;
        if (reader == NULL && (rc = dpp_reader_new(&own, &cfg->reader)) != 0)
            return dpp_source_fail(res, rc, "index %s: %s", t->path, dpp_strerror(rc));
        dpp_tfindex_scan_result_t scan;
        rc = scan_object(reader ? reader : own, t, &idx, &scan, err, sizeof err);
        dpp_reader_free(own);
        if (rc)
            return dpp_source_fail(res, rc, "file %s: %s", t->path, err);
        if (scan.gaps)
            DPP_WARN("file_framing_gaps file=%s gaps=%" PRIu64
                     " reason=\"records resume after each; every read counts each as a "
                     "corrupted record\"",
                     t->path, scan.gaps);
        if (scan.error) {
            dpp_rejects_count(&res->rejects, scan.error, 1);
            snprintf(res->reject_detail, sizeof res->reject_detail,
                     "file %s: %s at offset %" PRIu64, t->rel_path, dpp_reject_words(scan.error),
                     scan.error_offset);
        }
        goto bounds;
    }
    struct stat st;
    int prc = dpp_path_check_under(t->path, cfg->roots, cfg->nroots, &st);
    if (prc)
        return dpp_source_fail(res, prc, "file %s: %s", t->rel_path,
                               prc == DPP_EPATH ? outside_roots : dpp_strerror(prc));
    res->file_size = (uint64_t)st.st_size;
    res->file_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;

    char idx_path[4200];
    snprintf(idx_path, sizeof idx_path, "%s.idx", t->path);
    rc = dpp_tfindex_load(idx_path, res->file_size, &idx, err, sizeof err);
    if (rc == 0) {
        res->from_sidecar = 1;
    } else {
        if (rc != -ENOENT)
            DPP_WARN("index_sidecar_ignored file=%s.idx reason=\"%s\"", t->rel_path, err);
        dpp_tfindex_scan_result_t scan;
        rc = dpp_tfindex_scan(t->path, cfg->reader.max_record, &idx, &scan, err, sizeof err);
        if (rc)
            return dpp_source_fail(res, rc, "file %s: %s", t->rel_path, err);
        if (scan.gaps)
            DPP_WARN("file_framing_gaps file=%s gaps=%" PRIu64 " first_offset=%" PRIu64
                     " resume=%" PRIu64 " bytes=%" PRIu64
                     " reason=\"records resume after each; every read counts each as a "
                     "corrupted record\"",
                     t->rel_path, scan.gaps, scan.gap_offset, scan.gap_resume, scan.gap_bytes);
        if (scan.error) {
            /* A broken tail: the records before it are served, the tail is
             * counted (and fails the session under on_corrupt: fail). */
            dpp_rejects_count(&res->rejects, scan.error, 1);
            snprintf(res->reject_detail, sizeof res->reject_detail,
                     "file %s: %s at offset %" PRIu64, t->rel_path, dpp_reject_words(scan.error),
                     scan.error_offset);
        }
    }
bounds:;
    size_t nsplits = (idx.n + t->split_rows - 1) / t->split_rows;
    res->bounds = malloc((nsplits + 1) * sizeof *res->bounds);
    if (res->bounds == NULL) {
        dpp_tfindex_close(&idx);
        return dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
    }
    for (size_t k = 0; k < nsplits; k++)
        res->bounds[k] = idx.offsets[k * t->split_rows];
    res->bounds[nsplits] = idx.n ? idx.offsets[idx.n - 1] + idx.sizes[idx.n - 1] : 0;
    res->nbounds = nsplits + 1;
    res->records = idx.n;
    dpp_tfindex_close(&idx);
    return 0;
}

static int tf_index(const dpp_pipeline_config_t *cfg, const dpp_task_t *t, dpp_split_result_t *res)
{
    return tf_index_one(cfg, NULL, t, res);
}

static void tf_index_many(const dpp_pipeline_config_t *cfg, dpp_reader_t *reader,
                          const dpp_task_t *const *t, dpp_split_result_t *const *res, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tf_index_one(cfg, reader, t[i], res[i]);
}

static size_t tf_names(const dpp_source_t *s, const uint8_t *row, size_t len, char *buf,
                       size_t buflen)
{
    (void)s;
    return dpp_example_keys(row, len, buf, buflen);
}

const dpp_source_ops_t dpp_source_tfrecord = {
    .projection_new = projection_new,
    .projection_free = projection_free,
    .open = tf_open,
    .next = tf_next,
    .stuck = tf_stuck,
    .decode = tf_decode,
    .close = tf_close,
    .index = tf_index,
    .index_many = tf_index_many,
    .names = tf_names,
    .why = tf_why,
};
