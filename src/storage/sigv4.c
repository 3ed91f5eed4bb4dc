/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Signature Version 4 of S3 GET and HEAD requests (sigv4.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/hmac.h"
#include "dpp/error.h"
#include "storage/sigv4.h"

/* A growing string; len counts what was asked for, so an allocation failure
 * shows as failed and the rest of the appends are no-ops. */
typedef struct text {
    char *buf;
    size_t len, cap;
    int failed;
} text_t;

static void put(text_t *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *b = realloc(t->buf, cap);
        if (b == NULL) {
            t->failed = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void puts_(text_t *t, const char *s)
{
    put(t, s, strlen(s));
}

static void put_encoded(text_t *t, const char *s, int keep_slash)
{
    size_t n = dpp_sigv4_encode(s, strlen(s), keep_slash, NULL, 0);
    char *e = malloc(n + 1);
    if (e == NULL) {
        t->failed = 1;
        return;
    }
    dpp_sigv4_encode(s, strlen(s), keep_slash, e, n + 1);
    put(t, e, n);
    free(e);
}

static int unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

size_t dpp_sigv4_encode(const char *s, size_t len, int keep_slash, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[3] = {(char)c, 0, 0};
        size_t w = 1;
        if (!unreserved(c) && !(keep_slash && c == '/')) {
            e[0] = '%', e[1] = hex[c >> 4], e[2] = hex[c & 15];
            w = 3;
        }
        for (size_t k = 0; k < w; k++, n++)
            if (n + 1 < cap)
                out[n] = e[k];
    }
    if (cap > 0)
        out[n < cap ? n : cap - 1] = '\0';
    return n;
}

typedef struct pair {
    char *name, *value; /* encoded */
} pair_t;

static int cmp_pair(const void *a, const void *b)
{
    const pair_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

static char *encoded(const char *s)
{
    size_t n = dpp_sigv4_encode(s, strlen(s), 0, NULL, 0);
    char *e = malloc(n + 1);
    if (e)
        dpp_sigv4_encode(s, strlen(s), 0, e, n + 1);
    return e;
}

/* The canonical query into t (nothing for no parameters). */
static void put_query(text_t *t, const dpp_sigv4_param_t *q, size_t n)
{
    if (n == 0)
        return;
    pair_t *p = calloc(n, sizeof *p);
    if (p == NULL) {
        t->failed = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        p[i].name = encoded(q[i].name);
        p[i].value = encoded(q[i].value ? q[i].value : "");
        if (p[i].name == NULL || p[i].value == NULL)
            t->failed = 1;
    }
    if (!t->failed) {
        qsort(p, n, sizeof *p, cmp_pair);
        for (size_t i = 0; i < n; i++) {
            if (i)
                puts_(t, "&");
            puts_(t, p[i].name);
            puts_(t, "=");
            puts_(t, p[i].value);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(p[i].name), free(p[i].value);
    free(p);
}

size_t dpp_sigv4_query(const dpp_sigv4_param_t *q, size_t n, char *out, size_t cap)
{
    text_t t = {0};
    put_query(&t, q, n);
    size_t len = t.failed ? 0 : t.len;
    if (cap > 0) {
        size_t w = len < cap ? len : cap - 1;
        if (w)
            memcpy(out, t.buf, w);
        out[w] = '\0';
    }
    free(t.buf);
    return len;
}

static void hex32(const uint8_t d[DPP_SHA256_LEN], char out[2 * DPP_SHA256_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < DPP_SHA256_LEN; i++)
        out[2 * i] = hex[d[i] >> 4], out[2 * i + 1] = hex[d[i] & 15];
    out[2 * DPP_SHA256_LEN] = '\0';
}

static int one_line(const char *s)
{
    return s == NULL || strpbrk(s, "\r\n") == NULL;
}

/* YYYYMMDD'T'HHMMSS'Z' */
static int amz_date_ok(const char *d)
{
    if (d == NULL || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
        return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (d[i] < '0' || d[i] > '9'))
            return 0;
    return 1;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date), region), "s3"),
 * "aws4_request"), then the signature of sts under it. */
static int sign(const dpp_sigv4_cred_t *cred, const char *date8, const text_t *sts,
                char sig[2 * DPP_SHA256_LEN + 1])
{
    size_t sl = strlen(cred->secret);
    char *k0 = malloc(sl + 4);
    if (k0 == NULL)
        return -ENOMEM;
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, cred->secret, sl);
    uint8_t k[DPP_SHA256_LEN], mac[DPP_SHA256_LEN];
    int rc = dpp_hmac_sha256(k0, sl + 4, date8, 8, k);
    explicit_bzero(k0, sl + 4);
    free(k0);
    const char *steps[] = {cred->region, "s3", "aws4_request"};
    for (size_t i = 0; rc == 0 && i < 3; i++) {
        rc = dpp_hmac_sha256(k, sizeof k, steps[i], strlen(steps[i]), mac);
        memcpy(k, mac, sizeof k);
    }
    if (rc == 0)
        rc = dpp_hmac_sha256(k, sizeof k, sts->buf, sts->len, mac);
    if (rc == 0)
        hex32(mac, sig);
    explicit_bzero(k, sizeof k);
    explicit_bzero(mac, sizeof mac);
    return rc;
}

int dpp_sigv4_authorization(const dpp_sigv4_cred_t *cred, const dpp_sigv4_req_t *req, char *out,
                            size_t cap)
{
    if (!amz_date_ok(req->amz_date) || !one_line(req->host) || !one_line(req->range) ||
        !one_line(cred->token) || req->path == NULL || req->path[0] != '/')
        return DPP_EINVAL;
    int token = cred->token && cred->token[0];
    char signed_headers[96]; /* in the canonical order: sorted by name */
    snprintf(signed_headers, sizeof signed_headers, "host%s;x-amz-content-sha256;x-amz-date%s",
             req->range ? ";range" : "", token ? ";x-amz-security-token" : "");
    text_t cr = {0}, sts = {0};
    puts_(&cr, req->method);
    puts_(&cr, "\n");
    put_encoded(&cr, req->path, 1);
    puts_(&cr, "\n");
    put_query(&cr, req->query, req->nquery);
    puts_(&cr, "\nhost:");
    puts_(&cr, req->host);
    if (req->range) {
        puts_(&cr, "\nrange:");
        puts_(&cr, req->range);
    }
    puts_(&cr, "\nx-amz-content-sha256:" DPP_SIGV4_EMPTY_SHA256 "\nx-amz-date:");
    puts_(&cr, req->amz_date);
    if (token) {
        puts_(&cr, "\nx-amz-security-token:");
        puts_(&cr, cred->token);
    }
    puts_(&cr, "\n\n");
    puts_(&cr, signed_headers);
    puts_(&cr, "\n" DPP_SIGV4_EMPTY_SHA256);

    char date8[9], scope[160], hash[2 * DPP_SHA256_LEN + 1], sig[2 * DPP_SHA256_LEN + 1];
    memcpy(date8, req->amz_date, 8);
    date8[8] = '\0';
    int rc = cr.failed ? -ENOMEM : 0;
    if (rc == 0 && (size_t)snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", date8,
                                    cred->region) >= sizeof scope)
        rc = DPP_EINVAL;
    uint8_t d[DPP_SHA256_LEN];
    if (rc == 0 && (rc = dpp_sha256(cr.buf, cr.len, d)) == 0) {
        hex32(d, hash);
        puts_(&sts, "AWS4-HMAC-SHA256\n");
        puts_(&sts, req->amz_date);
        puts_(&sts, "\n");
        puts_(&sts, scope);
        puts_(&sts, "\n");
        puts_(&sts, hash);
        rc = sts.failed ? -ENOMEM : sign(cred, date8, &sts, sig);
    }
    if (rc == 0 && (size_t)snprintf(out, cap,
                                    "AWS4-HMAC-SHA256 Credential=%s/%s,SignedHeaders=%s,"
                                    "Signature=%s",
                                    cred->key_id, scope, signed_headers, sig) >= cap)
        rc = -ENOSPC;
    free(cr.buf);
    free(sts.buf);
    return rc;
}
