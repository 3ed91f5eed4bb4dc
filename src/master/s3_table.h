/* SPDX-License-Identifier: Apache-2.0 */
/* Tables in an S3-compatible store: the master's s3:// data roots and the
 * listing of a session's table under one. A listing is synchronous (its
 * pages one after the other, retried as storage/s3.h says): a submit's runs
 * on a thread of its own (rpc_ctl.c), on that thread's own S3 client. */
#ifndef DPP_MASTER_S3_TABLE_H
#define DPP_MASTER_S3_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "master.h"
#include "spec/spec.h"
#include "storage/s3_list.h"

/* A listed table: the data files (s3:// URLs, in key order) with their
 * ETags and sizes, and the table's own URL (no trailing '/'). */
typedef struct dpp_s3_table {
    char *table_path;
    char **files;
    char **etags;
    uint64_t *sizes;
    size_t n;
} dpp_s3_table_t;

/* Adds the s3:// data root url (--data-root): sets up the master's S3 client
 * at the first (credentials and endpoint from the environment, storage/
 * s3_config.h) and lists one key under it, so that a wrong endpoint, bucket
 * or credential stops the master at start. Returns 0 or the error (logged). */
int dpp_master_s3_root(dpp_master_t *m, const char *url);

/* Lists spec->table (an s3:// URL under one of the roots) within the
 * master's listing budget (--s3-list-max-keys, --s3-list-max-pages), by
 * deadline_ns (dpp_s3_now_ns's clock; 0: none) and while *stop (read
 * atomically; NULL: never) is 0, and keeps the files of the spec's
 * partitions (dpp_s3_table_from_listing). Returns 0 (t filled, t->n may be
 * 0), DPP_EPATH for a table under no root, -ENOENT for a prefix without
 * objects, DPP_ESPEC for a named partition not there, DPP_ETOOBIG or
 * DPP_ETIMEDOUT past the budget or the deadline, -ECANCELED once stopped,
 * DPP_ESTORAGE for a listing that repeats a key or strays from its prefix,
 * or the store's error; err says it. */
int dpp_master_list_s3(const dpp_master_t *m, const dpp_spec_t *spec, const int *stop,
                       uint64_t deadline_ns, dpp_s3_table_t *t, char *err, size_t errlen);

/* The table t in listing l of prefix (a table's key and '/', or "" for the
 * top of bucket): the keys the spec's partitions select
 * (dpp_table_select_keys) as s3://bucket/key URLs in the listing's order,
 * with their ETags and sizes (copied; free with dpp_s3_table_close). Every
 * key must lie under prefix, be listed once, and a kept one have an ETag:
 * a listing that breaks this would read an object twice, read outside the
 * table or read a version nothing pins, so it is refused (DPP_ESTORAGE,
 * err naming the key and spec->table). No I/O: the master's listings and
 * the fuzz target (tests/fuzz/fuzz_s3_list.c) share it. Returns 0 (t filled,
 * t->n may be 0), -ENOENT when l holds no object, DPP_ESPEC for a named
 * partition not there, or DPP_ESTORAGE. */
int dpp_s3_table_from_listing(const dpp_spec_t *spec, const char *bucket, const char *prefix,
                              const dpp_s3_listing_t *l, dpp_s3_table_t *t, char *err,
                              size_t errlen);
void dpp_s3_table_close(dpp_s3_table_t *t);

#endif
