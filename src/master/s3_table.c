/* SPDX-License-Identifier: Apache-2.0 */
/* Tables in an S3-compatible store (docs/operations.md#object-storage):
 * the master's s3:// data roots, and the listing of a table under one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/errtext.h"
#include "base/log.h"
#include "dpp/error.h"
#include "master_internal.h"
#include "s3_table.h"
#include "spec/table.h"
#include "storage/s3.h"

int dpp_master_s3_root(dpp_master_t *m, const char *url)
{
    char err[700];
    dpp_s3_url_t u;
    int rc = dpp_s3_url_parse(url, &u, err, sizeof err);
    if (rc == 0 && m->s3 == NULL) {
        dpp_s3_config_t cfg;
        if ((rc = dpp_s3_config_load(&cfg, err, sizeof err)) == 0 &&
            (rc = dpp_s3_config_check(&cfg, url, err, sizeof err)) == 0 &&
            (rc = dpp_s3_new(&m->s3, &cfg)) != 0)
            snprintf(err, sizeof err, "%s: cannot set up libcurl", url);
        if (rc == 0) /* the listings' threads make their clients of it */
            dpp_s3_set_process_config(&cfg);
        memset(&cfg, 0, sizeof cfg);
    }
    if (rc == 0) {
        /* One key of it, to fail now on a wrong endpoint, bucket or key
         * rather than at the first submit. */
        size_t kl = strlen(u.key);
        while (kl > 0 && u.key[kl - 1] == '/')
            u.key[--kl] = '\0';
        char prefix[DPP_S3_KEY_MAX + 2];
        snprintf(prefix, sizeof prefix, "%s%s", u.key, kl ? "/" : "");
        dpp_s3_listing_t l = {0};
        rc = dpp_s3_list(m->s3, u.bucket, prefix, 1, 1, NULL, &l, err, sizeof err);
        dpp_s3_listing_close(&l);
    }
    if (rc != 0) {
        char q[800];
        DPP_ERROR("bad_data_root root=%s error=%s", url, dpp_log_quote(err, q, sizeof q));
        return rc;
    }
    char *root = m->s3_roots[m->ns3_roots++] = dpp_xstrdup(url);
    size_t n = strlen(root);
    while (n > 5 && root[n - 1] == '/')
        root[--n] = '\0';
    return 0;
}

/* The root table lies under: "" when none. */
static const char *root_of(const dpp_master_t *m, const char *table)
{
    for (size_t i = 0; i < m->ns3_roots; i++) {
        size_t n = strlen(m->s3_roots[i]);
        if (strncmp(table, m->s3_roots[i], n) == 0 && (table[n] == '\0' || table[n] == '/'))
            return m->s3_roots[i];
    }
    return NULL;
}

int dpp_master_list_s3(const dpp_master_t *m, const dpp_spec_t *spec, dpp_s3_table_t *t,
                       char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (root_of(m, spec->table) == NULL) {
        char roots[600] = "";
        size_t at = 0;
        for (size_t i = 0; i < m->ns3_roots && at < sizeof roots; i++)
            at += (size_t)snprintf(roots + at, sizeof roots - at, "%s%s", i ? ", " : "",
                                   m->s3_roots[i]);
        return dpp_errf(DPP_EPATH, err, errlen,
                        "table \"%s\": not under an s3:// data root of this master (%s): start "
                        "it with --data-root s3://BUCKET[/PREFIX] covering the table",
                        spec->table, m->ns3_roots ? roots : "it has none");
    }
    dpp_s3_url_t u;
    int rc = dpp_s3_url_parse(spec->table, &u, err, errlen);
    if (rc != 0)
        return rc;
    size_t kl = strlen(u.key);
    while (kl > 0 && u.key[kl - 1] == '/')
        u.key[--kl] = '\0';
    char prefix[DPP_S3_KEY_MAX + 2];
    snprintf(prefix, sizeof prefix, "%s%s", u.key, kl ? "/" : "");
    size_t plen = strlen(prefix);
    dpp_s3_listing_t l = {0};
    dpp_s3_t *s3 = dpp_s3_thread_client();
    if (s3 == NULL) {
        rc = dpp_errf(-ENOMEM, err, errlen, "table \"%s\": cannot set up libcurl", spec->table);
        goto out;
    }
    if ((rc = dpp_s3_list(s3, u.bucket, prefix, 0, 0, NULL, &l, err, errlen)) != 0)
        goto out;
    if (l.n == 0) {
        rc = dpp_errf(-ENOENT, err, errlen, "table \"%s\": no objects under s3://%s/%s",
                      spec->table, u.bucket, prefix);
        goto out;
    }
    const char **rel = dpp_xcalloc(l.n, sizeof *rel);
    unsigned char *keep = dpp_xcalloc(l.n, 1);
    for (size_t i = 0; i < l.n; i++)
        rel[i] = l.objs[i].key + plen;
    rc = dpp_table_select_keys(spec, rel, l.n, keep, err, errlen);
    size_t n = 0;
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        n += keep[i];
    if (rc == 0 && n > 0) {
        t->files = dpp_xcalloc(n, sizeof *t->files);
        t->etags = dpp_xcalloc(n, sizeof *t->etags);
        t->sizes = dpp_xcalloc(n, sizeof *t->sizes);
        for (size_t i = 0; i < l.n; i++) {
            if (!keep[i])
                continue;
            size_t need = strlen(u.bucket) + strlen(l.objs[i].key) + 8;
            char *path = dpp_xcalloc(need, 1);
            snprintf(path, need, "s3://%s/%s", u.bucket, l.objs[i].key);
            t->files[t->n] = path;
            t->etags[t->n] = dpp_xstrdup(l.objs[i].etag);
            t->sizes[t->n] = l.objs[i].size;
            t->n++;
        }
    }
    if (rc == 0) {
        size_t need = strlen(u.bucket) + kl + 8;
        t->table_path = dpp_xcalloc(need, 1);
        snprintf(t->table_path, need, "s3://%s/%s", u.bucket, u.key);
        if (kl == 0)
            t->table_path[strlen(t->table_path) - 1] = '\0';
    }
    free(rel);
    free(keep);
out:
    dpp_s3_listing_close(&l);
    if (rc != 0)
        dpp_s3_table_close(t);
    return rc;
}

void dpp_s3_table_close(dpp_s3_table_t *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->files ? t->files[i] : NULL);
        free(t->etags ? t->etags[i] : NULL);
    }
    free(t->files);
    free(t->etags);
    free(t->sizes);
    free(t->table_path);
    memset(t, 0, sizeof *t);
}
