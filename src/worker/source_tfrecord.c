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

#include "base/log.h"
#include "base/reject.h"
#include "dpp/error.h"
#include "format/tfindex.h"
#include "source.h"
#include "spec/table.h"

static int projection_new(void **proj, const char *const *names, size_t n,
                          const dpp_spec_t *spec, const char *root,
                          const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    (void)spec;
    (void)root;
    (void)cfg;
    (void)err;
    (void)errlen;
    dpp_projection_t *p = NULL;
    int rc = dpp_projection_new(&p, names, n);
    *proj = p;
    return rc;
}

static void projection_free(void *proj)
{
    dpp_projection_free(proj);
}

static const char *outside_roots =
    "outside the worker's data roots, or a symlink appeared since the master resolved it";

static int tf_open(dpp_source_t *s, dpp_reader_t *reader, const dpp_task_t *t, const void *proj,
                   const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    (void)proj; /* decode() projects */
    s->ops = &dpp_source_tfrecord;
    s->reader = reader;
    s->task = t;
    int rc = dpp_path_check_under(t->path, cfg->roots, cfg->nroots, NULL);
    if (rc == 0)
        rc = dpp_reader_open(reader, t->path, t->byte_start, t->byte_end);
    if (rc)
        snprintf(err, errlen, "file %s: %s", t->rel_path,
                 rc == DPP_EPATH ? outside_roots : dpp_strerror(rc));
    return rc;
}

static int tf_next(dpp_source_t *s, dpp_source_row_t *row)
{
    return dpp_reader_next(s->reader, &row->data, &row->len, &row->offset);
}

static int tf_stuck(const dpp_source_t *s)
{
    return dpp_reader_stuck(s->reader);
}

static int tf_decode(void *proj, const uint8_t *data, size_t len, dpp_feat_ref_t *refs)
{
    return dpp_example_decode(proj, data, len, refs);
}

static void tf_close(dpp_source_t *s)
{
    if (s->reader)
        dpp_reader_close(s->reader);
}

static int tf_index(const dpp_pipeline_config_t *cfg, const dpp_task_t *t, dpp_split_result_t *res)
{
    struct stat st;
    int prc = dpp_path_check_under(t->path, cfg->roots, cfg->nroots, &st);
    if (prc)
        return dpp_source_fail(res, prc, "file %s: %s", t->rel_path,
                               prc == DPP_EPATH ? outside_roots : dpp_strerror(prc));
    res->file_size = (uint64_t)st.st_size;
    res->file_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;

    dpp_tfindex_t idx;
    char err[256];
    char idx_path[4200];
    snprintf(idx_path, sizeof idx_path, "%s.idx", t->path);
    int rc = dpp_tfindex_load(idx_path, res->file_size, &idx, err, sizeof err);
    if (rc == 0) {
        res->from_sidecar = 1;
    } else {
        if (rc != -ENOENT)
            DPP_WARN("index_sidecar_ignored file=%s.idx reason=\"%s\"", t->rel_path, err);
        dpp_tfindex_scan_result_t scan;
        rc = dpp_tfindex_scan(t->path, cfg->reader.max_record, &idx, &scan, err, sizeof err);
        if (rc)
            return dpp_source_fail(res, rc, "file %s: %s", t->rel_path, err);
        if (scan.error) {
            /* A broken tail: the records before it are served, the tail is
             * counted (and fails the session under on_corrupt: fail). */
            dpp_rejects_count(&res->rejects, scan.error, 1);
            snprintf(res->reject_detail, sizeof res->reject_detail,
                     "file %s: %s at offset %" PRIu64, t->rel_path, dpp_reject_words(scan.error),
                     scan.error_offset);
        }
    }
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
    .names = tf_names,
};
