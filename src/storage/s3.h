/* SPDX-License-Identifier: Apache-2.0 */
/* A client of an S3-compatible store, over libcurl's multi interface: GET of
 * byte ranges, HEAD and ListObjectsV2, each signed with SigV4, several in
 * flight on kept-alive connections, retried with jittered exponential
 * backoff where a retry can help (500, 502, 503, 504, 429, a reset or
 * refused connection, a stalled or short body), failed where it cannot
 * (403, 404, 412, an answer without the ETag asked for) with an error that
 * names the request (method, s3:// URL, range) and the HTTP status. A range
 * answered short (a 206 whose Content-Range ends before the range asked and
 * before the object) is read on from where it stopped.
 *
 * One dpp_s3_t belongs to one thread (a worker's pipeline thread, the
 * master's listing): its connections are reused by every request it makes,
 * so a split costs no new connection or TLS handshake. */
#ifndef DPP_STORAGE_S3_H
#define DPP_STORAGE_S3_H

#include <stddef.h>
#include <stdint.h>

#include "base/rfile.h"
#include "storage/s3_config.h"
#include "storage/s3_list.h"
#include "storage/sigv4.h"

typedef struct dpp_s3 dpp_s3_t;

/* An s3:// URL split: s3://bucket/key. */
typedef struct dpp_s3_url {
    char bucket[64]; /* S3's bucket names are 3 to 63 bytes */
    char key[DPP_S3_KEY_MAX + 1];
} dpp_s3_url_t;

/* 1 when s starts with "s3://". */
int dpp_s3_is_url(const char *s);

/* Splits "s3://bucket[/key]" into u (key "" when absent). Returns 0, or
 * DPP_EINVAL with err saying what is wrong (no bucket, a bucket name S3
 * does not allow, a key over DPP_S3_KEY_MAX bytes). */
int dpp_s3_url_parse(const char *s, dpp_s3_url_t *u, char *err, size_t errlen);

/* One request. The caller fills the inputs, keeps the struct (and buf)
 * alive until it is done, and reads the outputs once dpp_s3_wait() (or
 * dpp_s3_run()) returned for it. */
typedef struct dpp_s3_req {
    /* inputs: borrowed */
    const char *bucket;
    const char *key;
    int head;                       /* HEAD instead of GET */
    uint64_t off, len;              /* GET bytes [off, off + len); len 0: all of it */
    const char *if_match;           /* an ETag (no quotes): 412 is DPP_ECHANGED */
    const dpp_sigv4_param_t *query; /* [nquery]: ListObjectsV2's, with key "" */
    size_t nquery;
    char *buf; /* the body goes here (cap bytes); NULL: into body, malloc'd */
    size_t cap;
    /* Past deadline_ns (dpp_s3_now_ns's clock; 0: none) the request ends
     * with DPP_ETIMEDOUT, retries and all; once *stop (read atomically,
     * written by another thread; NULL: never) is non-zero, with -ECANCELED.
     * Either is seen within 100 ms, also in the middle of a slow body. */
    uint64_t deadline_ns;
    const int *stop;

    /* outputs */
    int rc;                     /* 0, or the error; err says it in words */
    long status;                /* the last HTTP status; 0 when none came */
    size_t got;                 /* body bytes */
    char *body;                 /* when buf was NULL: malloc'd (the caller frees), NUL-terminated */
    uint64_t size;              /* HEAD: Content-Length; ranged GET: the object's size */
    char etag[DPP_S3_ETAG_MAX]; /* without quotes, "" when none came */
    unsigned attempts;          /* how many were sent */
    char err[512];

    /* private */
    struct dpp_s3_xfer *xfer_;
    struct dpp_s3_req *next_;
} dpp_s3_req_t;

/* Makes a client of cfg (copied). Returns 0, -ENOMEM, or DPP_EINVAL when
 * libcurl cannot be set up. */
int dpp_s3_new(dpp_s3_t **out, const dpp_s3_config_t *cfg);
/* Cancels what is in flight and frees. Accepts NULL. */
void dpp_s3_free(dpp_s3_t *s);

/* Starts r. Returns 0 (its outcome comes from dpp_s3_wait) or -ENOMEM. */
int dpp_s3_start(dpp_s3_t *s, dpp_s3_req_t *r);
/* Drives every request of s until r is done (retries included) and
 * returns r->rc. */
int dpp_s3_wait(dpp_s3_t *s, dpp_s3_req_t *r);
/* Takes r back unfinished (a reader closed early); r->rc is -ECANCELED. */
void dpp_s3_cancel(dpp_s3_t *s, dpp_s3_req_t *r);
/* dpp_s3_start then dpp_s3_wait. */
int dpp_s3_run(dpp_s3_t *s, dpp_s3_req_t *r);

/* The client of the calling thread for the process's store: made at the
 * thread's first call from the configuration given to
 * dpp_s3_set_process_config (copied), freed when the thread exits. NULL
 * when no configuration was given (the process reads no s3:// files) or
 * libcurl cannot be set up. */
void dpp_s3_set_process_config(const dpp_s3_config_t *cfg);
dpp_s3_t *dpp_s3_thread_client(void);

/* Size and ETag of an object. Returns 0 or the error (err names the URL). */
int dpp_s3_head(dpp_s3_t *s, const char *bucket, const char *key, uint64_t *size, char *etag,
                char *err, size_t errlen);

/* dpp_s3_head of url (s3://bucket/key) on the calling thread's client
 * (dpp_s3_thread_client), ended by deadline_ns or *stop as a request's are
 * (0, NULL: never). err starts with `what` ("tokenizer.file"). Returns 0,
 * DPP_EPATH when the process reads no object storage, or the error. */
int dpp_s3_head_url(const char *what, const char *url, uint64_t deadline_ns, const int *stop,
                    uint64_t *size, char *etag, char *err, size_t errlen);

/* What a listing may cost before it is given up: a store whose pages do
 * not end, or come a few bytes a second, must not hold a thread or grow
 * memory without bound. Zeroed: no bounds. */
typedef struct dpp_s3_list_limits {
    uint64_t max_keys;    /* more keys than this: DPP_ETOOBIG */
    uint64_t max_pages;   /* more pages than this: DPP_ETOOBIG */
    uint64_t deadline_ns; /* as dpp_s3_req_t's: DPP_ETIMEDOUT */
    const int *stop;      /* as dpp_s3_req_t's: -ECANCELED */
} dpp_s3_list_limits_t;

/* The objects under prefix (ListObjectsV2, page after page of up to
 * max_keys, 0: the store's default of 1000) into l, a zeroed listing
 * (dpp_s3_listing_close frees it): every one, or those of the first
 * max_pages pages when max_pages > 0, within lim (NULL: no bounds).
 * Returns 0 or the error; err names the listing ("LIST s3://bucket/prefix"). */
int dpp_s3_list(dpp_s3_t *s, const char *bucket, const char *prefix, unsigned max_keys,
                unsigned max_pages, const dpp_s3_list_limits_t *lim, dpp_s3_listing_t *l, char *err,
                size_t errlen);

/* An object's version as the index cache and the journal key files by (in
 * the place of a file's mtime): a 63-bit hash of its ETag, never 0. */
int64_t dpp_s3_etag_version(const char *etag);

/* Now on the clock of dpp_s3_req_t's deadline_ns (CLOCK_MONOTONIC, ns). */
uint64_t dpp_s3_now_ns(void);

/* Retries this process made, over all clients: dpp_storage_retries_total
 * (ranges read on after a short answer included). */
uint64_t dpp_s3_retries_total(void);
/* Ranges a store answered short, read on from where the answer stopped:
 * dpp_storage_short_reads_total. */
uint64_t dpp_s3_short_reads_total(void);
/* Requests this process sent (attempts, retries included). */
uint64_t dpp_s3_requests_total(void);

/* An object read by offset (base/rfile.h), for the readers of Parquet and
 * text (a TFRecord reader streams its chunks itself: worker/reader.h). A
 * read is served from a block of DPP_S3_BLOCK bytes, got with one ranged GET
 * (If-Match the ETag listed); a read that goes on where the last block
 * ended is a stream, and the block after it is read ahead meanwhile. At
 * most two blocks are held. One thread at a time, the client's. */
#define DPP_S3_BLOCK (1u << 20)
struct dpp_s3_block {
    uint8_t *buf;
    uint64_t off;
    size_t len;
    int state; /* 0 empty, 1 in flight, 2 holds [off, off + len) */
    dpp_s3_req_t req;
};
typedef struct dpp_s3_rfile {
    dpp_rfile_t rf; /* first: what readers take */
    dpp_s3_t *s3;
    dpp_s3_url_t url;
    char etag[DPP_S3_ETAG_MAX];
    struct dpp_s3_block blocks[2];
    int cur; /* the block reads are served from */
} dpp_s3_rfile_t;

/* Sets o up to read url (s3://bucket/key) of `size` bytes at version etag
 * ("" or NULL: any) with s3 (NULL: DPP_EPATH, the process has no store).
 * Returns 0 or DPP_EINVAL for a bad URL, err saying it; close with
 * dpp_s3_rfile_close either way. */
int dpp_s3_rfile_open(dpp_s3_rfile_t *o, dpp_s3_t *s3, const char *url, const char *etag,
                       uint64_t size, char *err, size_t errlen);
void dpp_s3_rfile_close(dpp_s3_rfile_t *o);
ssize_t dpp_s3_rfile_read(dpp_rfile_t *f, void *buf, size_t len, uint64_t off);

/* The object f reads, or NULL when f is no object (a local file). */
dpp_s3_rfile_t *dpp_s3_rfile_of(dpp_rfile_t *f);

#endif
