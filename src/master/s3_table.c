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
        dpp_s3_list_limits_t lim = {.deadline_ns = dpp_s3_now_ns() +
                                                   (uint64_t)m->list_timeout_s * 1000000000u};
        rc = dpp_s3_list(m->s3, u.bucket, prefix, 1, 1, &lim, &l, err, sizeof err);
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

/* Sorts objects by key, and equal keys by their place in the listing. */
static int cmp_obj_key(const void *a, const void *b)
{
    const dpp_s3_object_t *x = *(const dpp_s3_object_t *const *)a;
    const dpp_s3_object_t *y = *(const dpp_s3_object_t *const *)b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x > y) - (x < y);
}

/* DPP_ESTORAGE when l names a key twice or one outside prefix (err says
 * which); else 0. */
static int listing_check(const dpp_spec_t *spec, const char *prefix, const dpp_s3_listing_t *l,
                         char *err, size_t errlen)
{
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < l->n; i++)
        if (strncmp(l->objs[i].key, prefix, plen) != 0)
            return dpp_errf(DPP_ESTORAGE, err, errlen,
                            "table \"%s\": the store listed key \"%.300s\" (object %zu of the "
                            "listing), which is not under the prefix \"%s\" asked for; a "
                            "listing that strays from its prefix cannot be trusted to name the "
                            "table's objects, so the table is refused: check the store",
                            spec->table, l->objs[i].key, i + 1, prefix);
    if (l->n < 2)
        return 0;
    const dpp_s3_object_t **by_key = dpp_xcalloc(l->n, sizeof *by_key);
    for (size_t i = 0; i < l->n; i++)
        by_key[i] = &l->objs[i];
    qsort(by_key, l->n, sizeof *by_key, cmp_obj_key);
    int rc = 0;
    for (size_t i = 1; i < l->n && rc == 0; i++)
        if (strcmp(by_key[i - 1]->key, by_key[i]->key) == 0)
            rc = dpp_errf(DPP_ESTORAGE, err, errlen,
                          "table \"%s\": the store listed key \"%.300s\" twice (objects %zu and "
                          "%zu of the listing); the table would read its rows twice, so it is "
                          "refused: check the store (its listing pages repeat keys)",
                          spec->table, by_key[i]->key, (size_t)(by_key[i - 1] - l->objs) + 1,
                          (size_t)(by_key[i] - l->objs) + 1);
    free(by_key);
    return rc;
}

int dpp_s3_table_from_listing(const dpp_spec_t *spec, const char *bucket, const char *prefix,
                              const dpp_s3_listing_t *l, dpp_s3_table_t *t, char *err,
                              size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (l->n == 0)
        return dpp_errf(-ENOENT, err, errlen, "table \"%s\": no objects under s3://%s/%s",
                        spec->table, bucket, prefix);
    int rc = listing_check(spec, prefix, l, err, errlen);
    if (rc != 0)
        return rc;
    size_t plen = strlen(prefix);
    const char **rel = dpp_xcalloc(l->n, sizeof *rel);
    unsigned char *keep = dpp_xcalloc(l->n, 1);
    for (size_t i = 0; i < l->n; i++)
        rel[i] = l->objs[i].key + plen;
    rc = dpp_table_select_keys(spec, rel, l->n, keep, err, errlen);
    size_t n = 0;
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        n += keep[i];
        if (keep[i] && l->objs[i].etag[0] == '\0')
            rc = dpp_errf(DPP_ESTORAGE, err, errlen,
                          "table \"%s\": the store listed \"s3://%s/%.300s\" without an ETag; "
                          "dpp reads every object at the version listed (If-Match its ETag) "
                          "and cannot pin this one, so the table is refused: the store must "
                          "list each object's ETag",
                          spec->table, bucket, l->objs[i].key);
    }
    if (rc == 0 && n > 0) {
        t->files = dpp_xcalloc(n, sizeof *t->files);
        t->etags = dpp_xcalloc(n, sizeof *t->etags);
        t->sizes = dpp_xcalloc(n, sizeof *t->sizes);
        for (size_t i = 0; i < l->n; i++) {
            if (!keep[i])
                continue;
            size_t need = strlen(bucket) + strlen(l->objs[i].key) + 8;
            char *path = dpp_xcalloc(need, 1);
            snprintf(path, need, "s3://%s/%s", bucket, l->objs[i].key);
            t->files[t->n] = path;
            t->etags[t->n] = dpp_xstrdup(l->objs[i].etag);
            t->sizes[t->n] = l->objs[i].size;
            t->n++;
        }
    }
    if (rc == 0) {
        /* the table's own URL: the prefix without its '/' */
        size_t need = strlen(bucket) + plen + 8;
        t->table_path = dpp_xcalloc(need, 1);
        snprintf(t->table_path, need, "s3://%s/%.*s", bucket, (int)(plen ? plen - 1 : 0), prefix);
        if (plen == 0)
            t->table_path[strlen(t->table_path) - 1] = '\0';
    }
    free(rel);
    free(keep);
    if (rc != 0)
        dpp_s3_table_close(t);
    return rc;
}

int dpp_master_list_s3(const dpp_master_t *m, const dpp_spec_t *spec, const int *stop,
                       uint64_t deadline_ns, dpp_s3_table_t *t, char *err, size_t errlen)
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
    dpp_s3_t *s3 = dpp_s3_thread_client();
    if (s3 == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "table \"%s\": cannot set up libcurl", spec->table);
    dpp_s3_list_limits_t lim = {.max_keys = m->list_max_keys,
                                .max_pages = m->list_max_pages,
                                .deadline_ns = deadline_ns,
                                .stop = stop};
    dpp_s3_listing_t l = {0};
    char why[700];
    rc = dpp_s3_list(s3, u.bucket, prefix, 0, 0, &lim, &l, why, sizeof why);
    if (rc == DPP_ETOOBIG || rc == DPP_ETIMEDOUT)
        dpp_errf(rc, err, errlen,
                 "table \"%s\": %s: this master lists a table of at most %llu keys in %llu "
                 "pages within %u s (--s3-list-max-keys, --s3-list-max-pages, "
                 "--s3-list-timeout)",
                 spec->table, why, (unsigned long long)m->list_max_keys,
                 (unsigned long long)m->list_max_pages, m->list_timeout_s);
    else if (rc != 0)
        dpp_errf(rc, err, errlen, "table \"%s\": %s", spec->table, why);
    else
        rc = dpp_s3_table_from_listing(spec, u.bucket, prefix, &l, t, err, errlen);
    dpp_s3_listing_close(&l);
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
