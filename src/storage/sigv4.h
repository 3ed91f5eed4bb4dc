/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Signature Version 4 for S3 requests, in the Authorization header: the
 * canonical request, the string to sign and the derived signing key, as the
 * S3 API reference ("Authenticating Requests: Using the Authorization
 * Header") defines them. Requests without a body only (GET, HEAD): their
 * payload hash is that of the empty string. */
#ifndef DPP_STORAGE_SIGV4_H
#define DPP_STORAGE_SIGV4_H

#include <stddef.h>

/* SHA-256 of the empty payload, hex: the x-amz-content-sha256 of a GET. */
#define DPP_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Who signs, and where: borrowed strings, token NULL or "" without a
 * session token (AWS_SESSION_TOKEN). */
typedef struct dpp_sigv4_cred {
    const char *key_id;
    const char *secret;
    const char *token;
    const char *region;
} dpp_sigv4_cred_t;

/* A query parameter, unencoded (name "list-type", value "2"). */
typedef struct dpp_sigv4_param {
    const char *name;
    const char *value;
} dpp_sigv4_param_t;

/* The request as it is sent: borrowed strings. */
typedef struct dpp_sigv4_req {
    const char *method;             /* "GET" or "HEAD" */
    const char *host;               /* the Host header: name, or name:port */
    const char *path;               /* unencoded, from '/': "/bucket/a b.txt" */
    const dpp_sigv4_param_t *query; /* [nquery], any order */
    size_t nquery;
    const char *range;    /* the Range header's value, or NULL */
    const char *amz_date; /* x-amz-date: YYYYMMDD'T'HHMMSS'Z', UTC */
} dpp_sigv4_req_t;

/* URI-encodes s[0..len) as SigV4 wants it: every byte but the unreserved
 * A-Z a-z 0-9 - _ . ~ as %XY (upper-case hex), and '/' kept when keep_slash
 * (a path) or encoded (a query value). Writes at most cap bytes with the NUL;
 * returns the length it needs without the NUL (as snprintf does). */
size_t dpp_sigv4_encode(const char *s, size_t len, int keep_slash, char *out, size_t cap);

/* The canonical query string of q[0..n): each name and value encoded,
 * sorted by name (then value), joined with '&'. Same return as above. */
size_t dpp_sigv4_query(const dpp_sigv4_param_t *q, size_t n, char *out, size_t cap);

/* The Authorization header's value for req under cred, signing host,
 * range (when set), x-amz-content-sha256 (DPP_SIGV4_EMPTY_SHA256),
 * x-amz-date and x-amz-security-token (when cred has a token): the request
 * must send exactly those headers with those values. Returns 0; DPP_EINVAL
 * for a malformed amz_date or a header value with a line break; -ENOSPC
 * when out (cap bytes) is too small; -ENOMEM when libcrypto fails. The
 * secret is not kept anywhere (the derived keys are wiped). */
int dpp_sigv4_authorization(const dpp_sigv4_cred_t *cred, const dpp_sigv4_req_t *req, char *out,
                            size_t cap);

#endif
