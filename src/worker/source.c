/* SPDX-License-Identifier: Apache-2.0 */
/* Which source reads which format (source.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "source.h"

int dpp_source_fail(dpp_split_result_t *res, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof res->message, fmt, ap);
    va_end(ap);
    res->error = err;
    return err;
}

/* source.h */
void dpp_source_data_root(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                          const char *table, char *root, size_t len)
{
    root[0] = '\0';
    if (dpp_s3_is_url(t->path)) {
        /* the longest s3:// root the object is under */
        size_t best = 0;
        for (size_t i = 0; i < cfg->ns3_roots; i++) {
            size_t k = strlen(cfg->s3_roots[i]);
            if (k > best && strncmp(t->path, cfg->s3_roots[i], k) == 0 && t->path[k] == '/') {
                best = k;
                snprintf(root, len, "%s", cfg->s3_roots[i]);
            }
        }
        return;
    }
    size_t n = strlen(t->path), rel = strlen(t->rel_path), tab = strlen(table);
    root[0] = '\0';
    if (n < rel + tab + 2 || strcmp(t->path + n - rel, t->rel_path) != 0 ||
        t->path[n - rel - 1] != '/' || strncmp(t->path + n - rel - 1 - tab, table, tab) != 0 ||
        t->path[n - rel - tab - 2] != '/')
        return;
    snprintf(root, len, "%.*s", (int)(n - rel - tab - 2), t->path);
}

int dpp_source_object_check(const dpp_pipeline_config_t *cfg, const dpp_task_t *t, char *err,
                            size_t errlen)
{
    for (size_t i = 0; i < cfg->ns3_roots; i++) {
        size_t n = strlen(cfg->s3_roots[i]);
        if (strncmp(t->path, cfg->s3_roots[i], n) == 0 && t->path[n] == '/')
            return 0;
    }
    snprintf(err, errlen,
             "file %s: under no s3:// data root of this worker (%s%s): start it with "
             "--data-root s3://BUCKET[/PREFIX] covering the table",
             t->path, cfg->ns3_roots ? cfg->s3_roots[0] : "it has none",
             cfg->ns3_roots > 1 ? ", ..." : "");
    return DPP_EPATH;
}

int dpp_source_object_open(const dpp_pipeline_config_t *cfg, const dpp_task_t *t,
                           dpp_s3_rfile_t *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->rf.fd = -1;
    int rc = dpp_source_object_check(cfg, t, err, errlen);
    return rc ? rc
              : dpp_s3_rfile_open(o, dpp_s3_thread_client(), t->path, t->etag, t->object_size,
                                   err, errlen);
}

const dpp_source_ops_t *dpp_source_ops(dpp_format_t format, int text)
{
    if (text || format == DPP_FORMAT_JSONL || format == DPP_FORMAT_TEXT)
        return &dpp_source_text;
    return format == DPP_FORMAT_PARQUET ? &dpp_source_parquet : &dpp_source_tfrecord;
}
