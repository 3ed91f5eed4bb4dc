/* SPDX-License-Identifier: Apache-2.0 */
/* dpp-s3cat: the storage layer's S3 client from a shell, for tests/integration/s3.sh
 * (whose reference is boto3, an independent client):
 *
 *   dpp-s3cat ls   s3://bucket/prefix [--max-keys N]   key<TAB>size<TAB>etag per object
 *   dpp-s3cat head s3://bucket/key                     size<TAB>etag
 *   dpp-s3cat get  s3://bucket/key [--chunk B] [--depth D] [--if-match ETAG]
 *                                                      the object on stdout, read in
 *                                                      ranged GETs of B bytes, D in flight
 *
 * Credentials and endpoint as the daemons take them (AWS_* variables). On
 * exit it prints "requests N retries M short S" on stderr (S: ranges the
 * store answered short, read on); an error is one line on
 * stderr and exit status 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/s3.h"

static int fail(const char *msg)
{
    fprintf(stderr, "dpp-s3cat: %s\n", msg);
    return 1;
}

static int do_get(dpp_s3_t *s, const dpp_s3_url_t *u, size_t chunk, unsigned depth,
                  const char *if_match)
{
    char err[600], etag[DPP_S3_ETAG_MAX];
    uint64_t size;
    if (dpp_s3_head(s, u->bucket, u->key, &size, etag, err, sizeof err) != 0)
        return fail(err);
    if (if_match == NULL)
        if_match = etag;
    uint64_t nchunks = (size + chunk - 1) / chunk;
    dpp_s3_req_t *reqs = calloc(depth, sizeof *reqs);
    char *bufs = malloc((size_t)depth * chunk);
    if (reqs == NULL || bufs == NULL)
        return fail("out of memory");
    uint64_t sent = 0, done = 0;
    int rc = 0;
    while (done < nchunks && rc == 0) {
        while (sent < nchunks && sent - done < depth) {
            dpp_s3_req_t *r = &reqs[sent % depth];
            *r = (dpp_s3_req_t){.bucket = u->bucket,
                                .key = u->key,
                                .off = sent * chunk,
                                .len = chunk,
                                .if_match = if_match,
                                .buf = bufs + (sent % depth) * chunk,
                                .cap = chunk};
            if ((rc = dpp_s3_start(s, r)) != 0)
                break;
            sent++;
        }
        if (rc != 0)
            break;
        dpp_s3_req_t *r = &reqs[done % depth];
        if ((rc = dpp_s3_wait(s, r)) != 0) {
            fail(r->err);
            break;
        }
        fwrite(r->buf, 1, r->got, stdout);
        done++;
    }
    for (uint64_t i = done; i < sent; i++)
        dpp_s3_cancel(s, &reqs[i % depth]);
    free(reqs);
    free(bufs);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: dpp-s3cat ls|head|get s3://bucket/key [options]\n");
        return 2;
    }
    const char *cmd = argv[1];
    unsigned max_keys = 0, depth = 4;
    size_t chunk = 1u << 20;
    const char *if_match = NULL;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--max-keys") == 0)
            max_keys = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--chunk") == 0)
            chunk = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--depth") == 0)
            depth = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--if-match") == 0)
            if_match = argv[i + 1];
    }
    if (chunk == 0 || depth == 0)
        return fail("--chunk and --depth must be > 0");
    char err[600];
    dpp_s3_config_t cfg;
    dpp_s3_url_t u;
    dpp_s3_t *s;
    if (dpp_s3_config_load(&cfg, err, sizeof err) != 0 ||
        dpp_s3_config_check(&cfg, argv[2], err, sizeof err) != 0 ||
        dpp_s3_url_parse(argv[2], &u, err, sizeof err) != 0)
        return fail(err);
    if (dpp_s3_new(&s, &cfg) != 0)
        return fail("cannot set up libcurl");
    int rc = 0;
    if (strcmp(cmd, "ls") == 0) {
        dpp_s3_listing_t l = {0};
        if (dpp_s3_list(s, u.bucket, u.key, max_keys, 0, NULL, &l, err, sizeof err) != 0)
            rc = fail(err);
        for (size_t i = 0; i < l.n; i++)
            printf("%s\t%llu\t%s\n", l.objs[i].key, (unsigned long long)l.objs[i].size,
                   l.objs[i].etag);
        dpp_s3_listing_close(&l);
    } else if (strcmp(cmd, "head") == 0) {
        uint64_t size;
        char etag[DPP_S3_ETAG_MAX];
        if (dpp_s3_head(s, u.bucket, u.key, &size, etag, err, sizeof err) != 0)
            rc = fail(err);
        else
            printf("%llu\t%s\n", (unsigned long long)size, etag);
    } else if (strcmp(cmd, "get") == 0) {
        rc = do_get(s, &u, chunk, depth, if_match);
    } else {
        rc = fail("unknown command: expected ls, head or get");
    }
    dpp_s3_free(s);
    fprintf(stderr, "requests %llu retries %llu short %llu\n",
            (unsigned long long)dpp_s3_requests_total(), (unsigned long long)dpp_s3_retries_total(),
            (unsigned long long)dpp_s3_short_reads_total());
    return rc;
}
