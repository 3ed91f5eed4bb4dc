/* SPDX-License-Identifier: Apache-2.0 */
/* The XML an S3-compatible store answers: a ListObjectsV2 page (the keys,
 * sizes and ETags of a prefix, and where the next page starts) and an error
 * response (its Code and Message). Both come from the network and are not
 * trusted: anything malformed is refused with the reason and its offset. */
#ifndef DPP_STORAGE_S3_LIST_H
#define DPP_STORAGE_S3_LIST_H

#include <stddef.h>
#include <stdint.h>

#define DPP_S3_KEY_MAX 1024 /* bytes of UTF-8: S3's limit on a key */
#define DPP_S3_ETAG_MAX 128 /* without its quotes; MD5s and multipart ETags are < 40 */

typedef struct dpp_s3_object {
    char *key; /* malloc'd, decoded (entities, and %XY under EncodingType url) */
    uint64_t size;
    char etag[DPP_S3_ETAG_MAX]; /* quotes taken off */
} dpp_s3_object_t;

/* The objects of every page parsed into it, in the order of the pages;
 * caller storage, zero-initialised; free with dpp_s3_listing_close(). */
typedef struct dpp_s3_listing {
    dpp_s3_object_t *objs;
    size_t n, cap;
    int truncated;    /* the last page said IsTruncated true */
    char *next_token; /* its NextContinuationToken (malloc'd), NULL when not truncated */
} dpp_s3_listing_t;

/* Parses one ListObjectsV2 response page xml[0..len) and appends its
 * Contents to l; sets l->truncated and l->next_token from it. Returns 0; or
 * DPP_EINVAL with err naming what is wrong and at which byte (no
 * ListBucketResult, an entry without Key or Size, a Size that is not a
 * whole number, an unknown entity, a key longer than DPP_S3_KEY_MAX or not
 * UTF-8, a truncated page without a continuation token), in which case the
 * page adds nothing to l; -ENOMEM. */
int dpp_s3_list_parse(dpp_s3_listing_t *l, const char *xml, size_t len, char *err, size_t errlen);
void dpp_s3_listing_close(dpp_s3_listing_t *l);

/* The Code and Message of an S3 error response (<Error><Code>NoSuchKey
 * </Code>...), decoded; "" for what it lacks, for one that does not fit its
 * buffer or does not decode, and when xml is no error response at all. */
void dpp_s3_error_parse(const char *xml, size_t len, char *code, size_t codelen, char *msg,
                        size_t msglen);

#endif
