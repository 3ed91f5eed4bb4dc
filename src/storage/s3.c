/* SPDX-License-Identifier: Apache-2.0 */
/* S3 requests over libcurl's multi interface (s3.h).
 *
 * Each request is one transfer on the client's multi handle; the multi
 * handle keeps the connections, so consecutive requests to the store reuse
 * them (keep-alive, one TLS handshake per connection). A failed attempt that
 * a retry can cure is put on the client's pending list with a due time drawn
 * from full jitter (uniform in [0, min(max, base * 2^(attempt-1))], as in
 * AWS's "Exponential Backoff And Jitter"), and is sent again, re-signed,
 * when due. Everything happens in the thread that calls dpp_s3_wait. */
#include "storage/s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/errtext.h"
#include "dpp/error.h"

#define ERR_BODY_MAX (16u << 10)  /* bytes kept of an error response */
#define GROW_BODY_MAX (64u << 20) /* a listing page is < 1 MiB; more is no page */
#define POLL_MAX_MS 1000
#define POLL_STOP_MS 100 /* how soon a deadline or a stop is seen */

struct dpp_s3_xfer {
    CURL *easy;
    struct curl_slist *hdrs;
    char url[DPP_S3_KEY_MAX * 3 + 8192];
    uint64_t due_ns; /* on the pending list: when to send again */
    int in_multi;
    long status;
    uint64_t content_length, cr_start, cr_end, cr_total;
    int have_length, have_range;
    int overflow;
    size_t body_cap;
    char *ebody; /* the error response's body */
    size_t elen;
    char last[200]; /* why the last attempt failed, for the give-up message */
    /* A range read on after short answers: its first kept bytes came with
     * attempts up to progress_attempts, under ETag etag0. */
    uint64_t kept;
    unsigned progress_attempts;
    char etag0[DPP_S3_ETAG_MAX];
};

struct dpp_s3 {
    dpp_s3_config_t cfg;
    CURLM *multi;
    dpp_s3_req_t *pending; /* waiting for their retry, in no order */
    uint64_t rng;
    char host[256]; /* of the endpoint: name[:port] */
    char scheme[8]; /* "http" or "https" */
};

static uint64_t g_retries, g_requests, g_short_reads;

uint64_t dpp_s3_retries_total(void)
{
    return __atomic_load_n(&g_retries, __ATOMIC_RELAXED);
}

uint64_t dpp_s3_short_reads_total(void)
{
    return __atomic_load_n(&g_short_reads, __ATOMIC_RELAXED);
}

uint64_t dpp_s3_requests_total(void)
{
    return __atomic_load_n(&g_requests, __ATOMIC_RELAXED);
}

int64_t dpp_s3_etag_version(const char *etag)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)etag; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    h &= INT64_MAX;
    return h ? (int64_t)h : 1;
}

uint64_t dpp_s3_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;

static void curl_init_once(void)
{
    g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static dpp_s3_config_t g_process_cfg;
static int g_process_cfg_set;
static pthread_key_t g_thread_key;
static pthread_once_t g_thread_once = PTHREAD_ONCE_INIT;

static void thread_client_free(void *s)
{
    dpp_s3_free(s);
}

static void thread_key_once(void)
{
    pthread_key_create(&g_thread_key, thread_client_free);
}

void dpp_s3_set_process_config(const dpp_s3_config_t *cfg)
{
    g_process_cfg = *cfg;
    __atomic_store_n(&g_process_cfg_set, 1, __ATOMIC_RELEASE);
}

dpp_s3_t *dpp_s3_thread_client(void)
{
    if (!__atomic_load_n(&g_process_cfg_set, __ATOMIC_ACQUIRE))
        return NULL;
    pthread_once(&g_thread_once, thread_key_once);
    dpp_s3_t *s = pthread_getspecific(g_thread_key);
    if (s == NULL && dpp_s3_new(&s, &g_process_cfg) == 0)
        pthread_setspecific(g_thread_key, s);
    return s;
}

int dpp_s3_is_url(const char *s)
{
    return s != NULL && strncmp(s, "s3://", 5) == 0;
}

/* S3's bucket naming rules, as far as a URL goes: 3-63 of a-z 0-9 . -,
 * starting and ending with a letter or digit. */
static int bucket_ok(const char *b, size_t n)
{
    if (n < 3 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '.' || c == '-') && i > 0 && i + 1 < n))
            return 0;
    }
    return 1;
}

int dpp_s3_url_parse(const char *s, dpp_s3_url_t *u, char *err, size_t errlen)
{
    if (!dpp_s3_is_url(s))
        return dpp_errf(DPP_EINVAL, err, errlen, "%s: expected s3://bucket/prefix", s);
    const char *b = s + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    if (!bucket_ok(b, blen))
        return dpp_errf(DPP_EINVAL, err, errlen,
                        "%s: \"%.*s\" is no S3 bucket name (3 to 63 of a-z, 0-9, '.' and '-')", s,
                        (int)(blen > 80 ? 80 : blen), b);
    const char *key = slash ? slash + 1 : "";
    if (strlen(key) > DPP_S3_KEY_MAX)
        return dpp_errf(DPP_EINVAL, err, errlen, "%.80s...: the key is over %u bytes", s,
                        DPP_S3_KEY_MAX);
    memcpy(u->bucket, b, blen);
    u->bucket[blen] = '\0';
    memcpy(u->key, key, strlen(key) + 1);
    return 0;
}

int dpp_s3_new(dpp_s3_t **out, const dpp_s3_config_t *cfg)
{
    *out = NULL;
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init != CURLE_OK)
        return DPP_EINVAL;
    const char *sep = strstr(cfg->endpoint, "://");
    if (sep == NULL || (size_t)(sep - cfg->endpoint) >= sizeof((dpp_s3_t *)0)->scheme ||
        strlen(sep + 3) >= sizeof((dpp_s3_t *)0)->host || sep[3] == '\0')
        return DPP_EINVAL;
    dpp_s3_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->cfg = *cfg;
    memcpy(s->scheme, cfg->endpoint, (size_t)(sep - cfg->endpoint));
    snprintf(s->host, sizeof s->host, "%s", sep + 3);
    s->rng = dpp_s3_now_ns() ^ (uint64_t)(uintptr_t)s ^ 0x9e3779b97f4a7c15ull;
    if ((s->multi = curl_multi_init()) == NULL) {
        free(s);
        return -ENOMEM;
    }
    curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, 64L);
    *out = s;
    return 0;
}

static void xfer_free(dpp_s3_t *s, struct dpp_s3_xfer *x)
{
    if (x == NULL)
        return;
    if (x->in_multi)
        curl_multi_remove_handle(s->multi, x->easy);
    if (x->easy != NULL)
        curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->hdrs);
    free(x->ebody);
    free(x);
}

static void unlink_pending(dpp_s3_t *s, dpp_s3_req_t *r)
{
    for (dpp_s3_req_t **p = &s->pending; *p != NULL; p = &(*p)->next_)
        if (*p == r) {
            *p = r->next_;
            r->next_ = NULL;
            return;
        }
}

void dpp_s3_cancel(dpp_s3_t *s, dpp_s3_req_t *r)
{
    if (r->xfer_ == NULL)
        return;
    unlink_pending(s, r);
    xfer_free(s, r->xfer_);
    r->xfer_ = NULL;
    r->rc = -ECANCELED;
}

void dpp_s3_free(dpp_s3_t *s)
{
    if (s == NULL)
        return;
    /* Requests still in the multi handle are the caller's to cancel; those
     * forgotten are freed here with it. */
    while (s->pending != NULL)
        dpp_s3_cancel(s, s->pending);
    curl_multi_cleanup(s->multi);
    memset(&s->cfg, 0, sizeof s->cfg);
    free(s);
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    dpp_s3_req_t *r = arg;
    struct dpp_s3_xfer *x = r->xfer_;
    size_t len = size * n;
    char line[512];
    size_t l = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, data, l);
    line[l] = '\0';
    while (l > 0 && (line[l - 1] == '\r' || line[l - 1] == '\n'))
        line[--l] = '\0';
    if (strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue too): forget the last one's. */
        const char *sp = strchr(line, ' ');
        x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        x->have_length = x->have_range = 0;
        r->etag[0] = '\0';
        return len;
    }
    char *colon = strchr(line, ':');
    if (colon == NULL)
        return len;
    *colon = '\0';
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    if (strcasecmp(line, "etag") == 0) {
        size_t vl = strlen(v);
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
            v++;
            vl -= 2;
        }
        if (vl < DPP_S3_ETAG_MAX) {
            memcpy(r->etag, v, vl);
            r->etag[vl] = '\0';
        }
    } else if (strcasecmp(line, "content-length") == 0) {
        char *e;
        x->content_length = strtoull(v, &e, 10);
        x->have_length = e != v && *e == '\0';
    } else if (strcasecmp(line, "content-range") == 0) {
        unsigned long long a, b, t;
        if (sscanf(v, "bytes %llu-%llu/%llu", &a, &b, &t) == 3 && a <= b && b < t) {
            x->cr_start = a;
            x->cr_end = b;
            x->cr_total = t;
            x->have_range = 1;
        }
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    dpp_s3_req_t *r = arg;
    struct dpp_s3_xfer *x = r->xfer_;
    size_t len = size * n;
    if (x->status < 200 || x->status >= 300) {
        size_t keep = x->elen + len > ERR_BODY_MAX ? ERR_BODY_MAX - x->elen : len;
        if (keep > 0) {
            char *b = realloc(x->ebody, x->elen + keep + 1);
            if (b == NULL)
                return 0;
            memcpy(b + x->elen, data, keep);
            x->ebody = b;
            x->elen += keep;
            b[x->elen] = '\0';
        }
        return len;
    }
    if (r->buf != NULL) {
        if (len > r->cap - r->got) {
            x->overflow = 1;
            return 0;
        }
        memcpy(r->buf + r->got, data, len);
        r->got += len;
        return len;
    }
    size_t limit = r->cap ? r->cap : GROW_BODY_MAX;
    if (len > limit - r->got) {
        x->overflow = 1;
        return 0;
    }
    if (r->got + len + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 64u << 10;
        while (cap < r->got + len + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (b == NULL)
            return 0;
        r->body = b;
        x->body_cap = cap;
    }
    memcpy(r->body + r->got, data, len);
    r->got += len;
    r->body[r->got] = '\0';
    return len;
}

/* The bytes the next attempt of r asks for: [*from, *to]. 0 when r asks
 * for no range. */
static int range_of(const dpp_s3_req_t *r, uint64_t *from, uint64_t *to)
{
    if (r->head || r->len == 0)
        return 0;
    *from = r->off + (r->xfer_ ? r->xfer_->kept : 0);
    *to = r->off + r->len - 1;
    return 1;
}

/* What r asks, for messages: "GET s3://bucket/key bytes=A-B", "HEAD
 * s3://bucket/key" or "LIST s3://bucket/prefix". */
static const char *what_of(const dpp_s3_req_t *r, char *buf, size_t cap)
{
    uint64_t from, to;
    if (r->nquery > 0) {
        const char *prefix = "";
        for (size_t i = 0; i < r->nquery; i++)
            if (strcmp(r->query[i].name, "prefix") == 0)
                prefix = r->query[i].value;
        snprintf(buf, cap, "LIST s3://%s/%.300s", r->bucket, prefix);
    } else if (range_of(r, &from, &to)) {
        snprintf(buf, cap, "GET s3://%s/%.300s bytes=%llu-%llu", r->bucket, r->key,
                 (unsigned long long)from, (unsigned long long)to);
    } else {
        snprintf(buf, cap, "%s s3://%s/%.300s", r->head ? "HEAD" : "GET", r->bucket, r->key);
    }
    return buf;
}

static int add_header(struct dpp_s3_xfer *x, const char *fmt, const char *v)
{
    char line[4608];
    snprintf(line, sizeof line, fmt, v);
    struct curl_slist *l = curl_slist_append(x->hdrs, line);
    if (l == NULL)
        return -ENOMEM;
    x->hdrs = l;
    return 0;
}

/* Builds, signs and hands attempt r->attempts + 1 to the multi handle. */
static int send_attempt(dpp_s3_t *s, dpp_s3_req_t *r)
{
    struct dpp_s3_xfer *x = r->xfer_;
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    free(x->ebody);
    x->ebody = NULL;
    x->elen = 0;
    x->status = 0;
    x->have_length = x->have_range = x->overflow = 0;
    r->got = (size_t)x->kept;
    r->etag[0] = '\0';

    char host[320], path[DPP_S3_KEY_MAX + 80];
    if (s->cfg.path_style) {
        snprintf(host, sizeof host, "%s", s->host);
        snprintf(path, sizeof path, "/%s/%s", r->bucket, r->key);
        if (r->key[0] == '\0')
            path[strlen(path) - 1] = '\0'; /* "/bucket", not "/bucket/" */
    } else {
        snprintf(host, sizeof host, "%s.%s", r->bucket, s->host);
        snprintf(path, sizeof path, "/%s", r->key);
    }
    char range[64] = "";
    uint64_t from, to;
    if (range_of(r, &from, &to))
        snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)from,
                 (unsigned long long)to);
    char date[20];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);

    dpp_sigv4_cred_t cred = {s->cfg.key_id, s->cfg.secret, s->cfg.token, s->cfg.region};
    dpp_sigv4_req_t sr = {r->head ? "HEAD" : "GET", host, path, r->query, r->nquery,
                          range[0] ? range : NULL,  date};
    char auth[512];
    int rc = dpp_sigv4_authorization(&cred, &sr, auth, sizeof auth);
    if (rc != 0)
        return rc;

    size_t u = (size_t)snprintf(x->url, sizeof x->url, "%s://%s", s->scheme, host);
    u += dpp_sigv4_encode(path, strlen(path), 1, x->url + u, sizeof x->url - u);
    if (r->nquery > 0 && u + 1 < sizeof x->url) {
        x->url[u++] = '?';
        u += dpp_sigv4_query(r->query, r->nquery, x->url + u, sizeof x->url - u);
    }
    if (u >= sizeof x->url)
        return DPP_EINVAL;

    if ((rc = add_header(x, "Host: %s", host)) != 0 ||
        (rc = add_header(x, "x-amz-date: %s", date)) != 0 ||
        (rc = add_header(x, "x-amz-content-sha256: %s", DPP_SIGV4_EMPTY_SHA256)) != 0 ||
        (rc = add_header(x, "Authorization: %s", auth)) != 0 ||
        (range[0] && (rc = add_header(x, "Range: %s", range)) != 0) ||
        (s->cfg.token[0] && (rc = add_header(x, "x-amz-security-token: %s", s->cfg.token)) != 0) ||
        (r->if_match && (rc = add_header(x, "If-Match: \"%s\"", r->if_match)) != 0) ||
        (rc = add_header(x, "%s", "Expect:")) != 0)
        return rc;
    memset(auth, 0, sizeof auth);

    CURL *e = x->easy;
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, x->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(e, CURLOPT_NOBODY, r->head ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (s->cfg.ca_bundle[0] != '\0')
        curl_easy_setopt(e, CURLOPT_CAINFO, s->cfg.ca_bundle);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* A body that stops moving is a stalled connection: retried. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)s->cfg.stall_s);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L << 10);
    if (curl_multi_add_handle(s->multi, e) != CURLM_OK)
        return -ENOMEM;
    x->in_multi = 1;
    r->attempts++;
    __atomic_add_fetch(&g_requests, 1, __ATOMIC_RELAXED);
    return 0;
}

int dpp_s3_start(dpp_s3_t *s, dpp_s3_req_t *r)
{
    r->rc = 1; /* in flight */
    r->status = 0;
    r->got = 0;
    r->body = NULL;
    r->size = 0;
    r->etag[0] = r->err[0] = '\0';
    r->attempts = 0;
    r->next_ = NULL;
    if (r->key == NULL)
        r->key = "";
    struct dpp_s3_xfer *x = calloc(1, sizeof *x);
    if (x == NULL || (x->easy = curl_easy_init()) == NULL) {
        free(x);
        return r->rc = -ENOMEM;
    }
    r->xfer_ = x;
    int rc = send_attempt(s, r);
    if (rc != 0) {
        xfer_free(s, x);
        r->xfer_ = NULL;
        r->rc = rc;
        char u[480];
        dpp_errf(rc, r->err, sizeof r->err, "%s: the request cannot be made (%s)",
                 what_of(r, u, sizeof u), dpp_strerror(rc));
    }
    return rc;
}

static void finish(dpp_s3_t *s, dpp_s3_req_t *r, int rc)
{
    r->rc = rc;
    xfer_free(s, r->xfer_);
    r->xfer_ = NULL;
}

/* A failed attempt: retried when attempts remain, else r ends with why.
 * Attempts count from the last progress (a short range read on), so a
 * store that answers every range in pieces is read to the end. */
static void retry_or_fail(dpp_s3_t *s, dpp_s3_req_t *r, int rc, const char *why)
{
    struct dpp_s3_xfer *x = r->xfer_;
    char u[480];
    unsigned tries = r->attempts - x->progress_attempts;
    snprintf(x->last, sizeof x->last, "%s", why);
    if (tries >= s->cfg.max_attempts) {
        dpp_errf(rc, r->err, sizeof r->err,
                 "%s: %s, %u times; gave up (DPP_S3_MAX_ATTEMPTS=%u). Check the store at %s",
                 what_of(r, u, sizeof u), why, tries, s->cfg.max_attempts, s->cfg.endpoint);
        finish(s, r, rc);
        return;
    }
    uint64_t cap = (uint64_t)s->cfg.backoff_base_ms << (tries - 1 < 20 ? tries - 1 : 20);
    if (cap > s->cfg.backoff_max_ms)
        cap = s->cfg.backoff_max_ms;
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    x->due_ns = dpp_s3_now_ns() + (s->rng % (cap * 1000000u + 1));
    r->next_ = s->pending;
    s->pending = r;
    __atomic_add_fetch(&g_retries, 1, __ATOMIC_RELAXED);
}

static int status_retryable(long st)
{
    return st == 500 || st == 502 || st == 503 || st == 504 || st == 429;
}

static int curl_retryable(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return 1;
    default:
        return 0;
    }
}

/* `"ETAG"`, or `none` when the answer carried none: what came, for messages. */
static const char *etag_came(const dpp_s3_req_t *r, char *buf, size_t cap)
{
    if (r->etag[0] == '\0')
        return "none";
    snprintf(buf, cap, "\"%s\"", r->etag);
    return buf;
}

/* The outcome of an HTTP error status, in words. */
static void status_error(dpp_s3_t *s, dpp_s3_req_t *r)
{
    struct dpp_s3_xfer *x = r->xfer_;
    char code[64], msg[256], u[480], why[400], came[DPP_S3_ETAG_MAX + 2];
    dpp_s3_error_parse(x->ebody ? x->ebody : "", x->elen, code, sizeof code, msg, sizeof msg);
    snprintf(why, sizeof why, "HTTP %ld%s%s%s%s", x->status, code[0] ? " " : "", code,
             msg[0] ? ": " : "", msg);
    what_of(r, u, sizeof u);
    int rc;
    switch (x->status) {
    case 404:
        if (strcmp(code, "NoSuchBucket") == 0)
            rc = dpp_errf(-ENOENT, r->err, sizeof r->err,
                          "%s: bucket \"%s\" does not exist at %s (%s)", u, r->bucket,
                          s->cfg.endpoint, why);
        else
            rc = dpp_errf(-ENOENT, r->err, sizeof r->err, "%s: no such key in bucket \"%s\" (%s)",
                          u, r->bucket, why);
        break;
    case 403:
        rc = dpp_errf(DPP_EAUTH, r->err, sizeof r->err,
                      "%s: access denied (%s); the key id from %s may lack the permission "
                      "(s3:GetObject, s3:ListBucket), or its secret does not match",
                      u, why, s->cfg.source[0] ? s->cfg.source : "nowhere");
        break;
    case 412:
        rc = dpp_errf(DPP_ECHANGED, r->err, sizeof r->err,
                      "%s: changed since the session was planned (ETag \"%s\" expected, %s "
                      "read; %s); its rows would mix two versions, so nothing of it is read: "
                      "submit the session again",
                      u, r->if_match ? r->if_match : "", etag_came(r, came, sizeof came), why);
        break;
    case 416:
        rc = dpp_errf(DPP_ETRUNCATED, r->err, sizeof r->err, "%s: asked of a shorter object (%s)",
                      u, why);
        break;
    case 301:
    case 307:
        rc = dpp_errf(DPP_ESTORAGE, r->err, sizeof r->err,
                      "%s: the store sends elsewhere (%s): the bucket may be in another region "
                      "than %s (AWS_REGION) or need the other addressing style "
                      "(DPP_S3_ADDRESSING_STYLE)",
                      u, why, s->cfg.region);
        break;
    default:
        rc = dpp_errf(DPP_ESTORAGE, r->err, sizeof r->err, "%s: %s", u, why);
    }
    finish(s, r, rc);
}

/* A 2xx answer to a ranged GET: r is finished, read on or retried. */
static void range_done(dpp_s3_t *s, dpp_s3_req_t *r)
{
    struct dpp_s3_xfer *x = r->xfer_;
    char u[480], why[200];
    /* 206 with the bytes asked (fewer at the object's end), or 200 with the
     * whole object when it starts at 0 and fits */
    uint64_t at = r->off + x->kept, end = r->off + r->len, want;
    if (x->status == 206 && x->have_range && x->cr_start == at) {
        r->size = x->cr_total;
        want = x->cr_end - x->cr_start + 1;
    } else if (x->status == 200 && at == 0 && x->have_length && x->content_length <= r->len) {
        r->size = x->content_length;
        want = x->content_length;
    } else {
        dpp_errf(DPP_ESTORAGE, r->err, sizeof r->err, "%s: HTTP %ld without the range asked",
                 what_of(r, u, sizeof u), x->status);
        finish(s, r, DPP_ESTORAGE);
        return;
    }
    if (want > end - at || r->got - x->kept != want) {
        /* the connection ended early: this answer's bytes are asked again */
        snprintf(why, sizeof why, "HTTP %ld with a short body (%llu of %llu bytes)", x->status,
                 (unsigned long long)(r->got - x->kept), (unsigned long long)want);
        retry_or_fail(s, r, DPP_ESTORAGE, why);
        return;
    }
    if (x->kept > 0 && x->etag0[0] != '\0' && strcmp(r->etag, x->etag0) != 0) {
        char came[DPP_S3_ETAG_MAX + 2];
        dpp_errf(DPP_ECHANGED, r->err, sizeof r->err,
                 "%s: changed while it was read (ETag \"%s\" of its first bytes, %s read; HTTP "
                 "%ld); nothing of it is read: submit the session again",
                 what_of(r, u, sizeof u), x->etag0, etag_came(r, came, sizeof came), x->status);
        finish(s, r, DPP_ECHANGED);
        return;
    }
    if (x->status == 206 && x->cr_end + 1 < end && x->cr_end + 1 < x->cr_total) {
        /* A complete answer that ends before the range asked and before the
         * object: a store or proxy that caps a range's length. Its bytes
         * are kept, and the rest is asked for at once. */
        if (x->kept == 0)
            snprintf(x->etag0, sizeof x->etag0, "%s", r->etag);
        x->kept = r->got;
        x->progress_attempts = r->attempts;
        x->due_ns = 0;
        r->next_ = s->pending;
        s->pending = r;
        __atomic_add_fetch(&g_short_reads, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g_retries, 1, __ATOMIC_RELAXED);
        return;
    }
    finish(s, r, 0);
}

/* One attempt of r ended with curl's result c. */
static void attempt_done(dpp_s3_t *s, dpp_s3_req_t *r, CURLcode c)
{
    struct dpp_s3_xfer *x = r->xfer_;
    char u[480], why[200];
    r->status = x->status;
    if (x->overflow) {
        dpp_errf(DPP_ESTORAGE, r->err, sizeof r->err,
                 "%s: the store answered more than the %zu bytes asked (HTTP %ld)",
                 what_of(r, u, sizeof u), r->buf ? r->cap : (size_t)GROW_BODY_MAX, x->status);
        finish(s, r, DPP_ESTORAGE);
        return;
    }
    if (c != CURLE_OK) {
        snprintf(why, sizeof why, "no complete answer (%s)", curl_easy_strerror(c));
        if (curl_retryable(c)) {
            retry_or_fail(s, r, c == CURLE_OPERATION_TIMEDOUT ? DPP_ETIMEDOUT : -ECONNRESET, why);
            return;
        }
        int rc = c == CURLE_COULDNT_RESOLVE_HOST ? DPP_ERESOLVE : DPP_ESTORAGE;
        const char *hint = "";
        if (c == CURLE_PEER_FAILED_VERIFICATION)
            hint = s->cfg.ca_bundle[0] ? ": is AWS_CA_BUNDLE the CA that signed the store's "
                                         "certificate?"
                                       : ": a store with a private CA needs AWS_CA_BUNDLE=PEM file";
        dpp_errf(rc, r->err, sizeof r->err, "%s: %s (endpoint %s)%s", what_of(r, u, sizeof u), why,
                 s->cfg.endpoint, hint);
        finish(s, r, rc);
        return;
    }
    if (status_retryable(x->status)) {
        char code[64], msg[128];
        dpp_s3_error_parse(x->ebody ? x->ebody : "", x->elen, code, sizeof code, msg, sizeof msg);
        snprintf(why, sizeof why, "HTTP %ld%s%s", x->status, code[0] ? " " : "", code);
        retry_or_fail(s, r, DPP_ESTORAGE, why);
        return;
    }
    if (x->status < 200 || x->status >= 300) {
        status_error(s, r);
        return;
    }
    if (r->if_match != NULL && strcmp(r->etag, r->if_match) != 0) {
        /* A store that ignores If-Match still says which version it sent;
         * one that says none cannot be trusted to have sent the one asked. */
        if (r->etag[0] != '\0')
            dpp_errf(DPP_ECHANGED, r->err, sizeof r->err,
                     "%s: changed since the session was planned (ETag \"%s\" expected, \"%s\" "
                     "read; HTTP %ld); nothing of it is read: submit the session again",
                     what_of(r, u, sizeof u), r->if_match, r->etag, x->status);
        else
            dpp_errf(DPP_ECHANGED, r->err, sizeof r->err,
                     "%s: the answer names no version (ETag \"%s\" expected, none read; HTTP "
                     "%ld): the object may have changed since the session was planned, so "
                     "nothing of it is read; the store must answer every read with the "
                     "object's ETag (docs/guarantees.md)",
                     what_of(r, u, sizeof u), r->if_match, x->status);
        finish(s, r, DPP_ECHANGED);
        return;
    }
    if (r->head) {
        r->size = x->have_length ? x->content_length : 0;
        finish(s, r, 0);
        return;
    }
    if (r->len > 0) {
        range_done(s, r);
        return;
    }
    if (x->have_length && r->got != x->content_length) {
        snprintf(why, sizeof why, "HTTP %ld with a short body (%zu of %llu bytes)", x->status,
                 r->got, (unsigned long long)x->content_length);
        retry_or_fail(s, r, DPP_ESTORAGE, why);
        return;
    }
    r->size = r->got;
    finish(s, r, 0);
}

/* Sends the pending requests that are due; returns ms until the next one
 * (POLL_MAX_MS when none waits). */
static int send_due(dpp_s3_t *s)
{
    uint64_t now = dpp_s3_now_ns(), next = UINT64_MAX;
    for (dpp_s3_req_t **p = &s->pending; *p != NULL;) {
        dpp_s3_req_t *r = *p;
        if (r->xfer_->due_ns > now) {
            if (r->xfer_->due_ns < next)
                next = r->xfer_->due_ns;
            p = &r->next_;
            continue;
        }
        *p = r->next_;
        r->next_ = NULL;
        int rc = send_attempt(s, r);
        if (rc != 0) {
            char u[480];
            dpp_errf(rc, r->err, sizeof r->err, "%s: the request cannot be made (%s)",
                     what_of(r, u, sizeof u), dpp_strerror(rc));
            finish(s, r, rc);
        }
    }
    if (next == UINT64_MAX)
        return POLL_MAX_MS;
    uint64_t ms = (next - now) / 1000000u + 1;
    return ms < POLL_MAX_MS ? (int)ms : POLL_MAX_MS;
}

/* Ends r before its answer when its deadline passed or it was stopped.
 * Returns 1 when it did. */
static int cut_short(dpp_s3_t *s, dpp_s3_req_t *r)
{
    int stopped = r->stop != NULL && __atomic_load_n(r->stop, __ATOMIC_ACQUIRE) != 0;
    if (!stopped && (r->deadline_ns == 0 || dpp_s3_now_ns() < r->deadline_ns))
        return 0;
    char u[480], last[220] = "";
    if (r->xfer_->last[0])
        snprintf(last, sizeof last, "; the last attempt: %s", r->xfer_->last);
    int rc = stopped ? -ECANCELED : DPP_ETIMEDOUT;
    dpp_errf(rc, r->err, sizeof r->err, "%s: %s (%u attempt%s%s)", what_of(r, u, sizeof u),
             stopped ? "stopped, no one waits for its answer any more"
                     : "not answered by its deadline",
             r->attempts, r->attempts == 1 ? "" : "s", last);
    unlink_pending(s, r);
    finish(s, r, rc);
    return 1;
}

/* ms to wait in curl_multi_poll: at most wait_ms, and short enough that
 * r's deadline or stop is seen in time. */
static int poll_ms(const dpp_s3_req_t *r, int wait_ms)
{
    if (r->stop != NULL && wait_ms > POLL_STOP_MS)
        wait_ms = POLL_STOP_MS;
    if (r->deadline_ns != 0) {
        uint64_t now = dpp_s3_now_ns();
        uint64_t left = r->deadline_ns > now ? (r->deadline_ns - now) / 1000000u + 1 : 0;
        if (left < (uint64_t)wait_ms)
            wait_ms = (int)left;
    }
    return wait_ms;
}

int dpp_s3_wait(dpp_s3_t *s, dpp_s3_req_t *r)
{
    while (r->rc == 1) {
        int running = 0;
        curl_multi_perform(s->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(s->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            void *p = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
            dpp_s3_req_t *done = p;
            CURLcode c = m->data.result;
            curl_multi_remove_handle(s->multi, m->easy_handle);
            done->xfer_->in_multi = 0;
            attempt_done(s, done, c);
        }
        if (r->rc != 1 || cut_short(s, r))
            break;
        int wait_ms = send_due(s);
        if (r->rc != 1)
            break;
        curl_multi_poll(s->multi, NULL, 0, poll_ms(r, wait_ms), NULL);
    }
    return r->rc;
}

int dpp_s3_run(dpp_s3_t *s, dpp_s3_req_t *r)
{
    int rc = dpp_s3_start(s, r);
    return rc != 0 ? rc : dpp_s3_wait(s, r);
}

int dpp_s3_head(dpp_s3_t *s, const char *bucket, const char *key, uint64_t *size, char *etag,
                char *err, size_t errlen)
{
    dpp_s3_req_t r = {.bucket = bucket, .key = key, .head = 1};
    int rc = dpp_s3_run(s, &r);
    if (rc != 0)
        return dpp_errf(rc, err, errlen, "%s", r.err);
    *size = r.size;
    snprintf(etag, DPP_S3_ETAG_MAX, "%s", r.etag);
    return 0;
}

int dpp_s3_head_url(const char *what, const char *url, uint64_t deadline_ns, const int *stop,
                    uint64_t *size, char *etag, char *err, size_t errlen)
{
    dpp_s3_url_t u;
    int rc = dpp_s3_url_parse(url, &u, err, errlen);
    if (rc)
        return rc;
    dpp_s3_t *s = dpp_s3_thread_client();
    if (s == NULL)
        return dpp_errf(DPP_EPATH, err, errlen,
                        "%s %s: this process reads no object storage (start it with --data-root "
                        "s3://...)",
                        what, url);
    dpp_s3_req_t r = {
        .bucket = u.bucket, .key = u.key, .head = 1, .deadline_ns = deadline_ns, .stop = stop};
    if ((rc = dpp_s3_run(s, &r)) != 0)
        return dpp_errf(rc, err, errlen, "%s %s", what, r.err);
    *size = r.size;
    snprintf(etag, DPP_S3_ETAG_MAX, "%s", r.etag);
    return 0;
}

int dpp_s3_list(dpp_s3_t *s, const char *bucket, const char *prefix, unsigned max_keys,
                unsigned max_pages, const dpp_s3_list_limits_t *lim, dpp_s3_listing_t *l, char *err,
                size_t errlen)
{
    static const dpp_s3_list_limits_t none = {0};
    char *token = NULL, keys[16];
    int rc = 0;
    if (lim == NULL)
        lim = &none;
    snprintf(keys, sizeof keys, "%u", max_keys);
    for (unsigned page = 1;; page++) {
        dpp_sigv4_param_t q[5] = {{"list-type", "2"}, {"encoding-type", "url"}, {"prefix", prefix}};
        size_t nq = 3;
        if (max_keys > 0)
            q[nq++] = (dpp_sigv4_param_t){"max-keys", keys};
        if (token != NULL)
            q[nq++] = (dpp_sigv4_param_t){"continuation-token", token};
        dpp_s3_req_t r = {.bucket = bucket,
                          .key = "",
                          .query = q,
                          .nquery = nq,
                          .deadline_ns = lim->deadline_ns,
                          .stop = lim->stop};
        rc = dpp_s3_run(s, &r);
        if (rc != 0) {
            rc = page > 1 ? dpp_errf(rc, err, errlen, "%s (page %u)", r.err, page)
                          : dpp_errf(rc, err, errlen, "%s", r.err);
            free(r.body);
            break;
        }
        free(token);
        token = NULL;
        char perr[256];
        rc = dpp_s3_list_parse(l, r.body ? r.body : "", r.got, perr, sizeof perr);
        free(r.body);
        if (rc != 0) {
            rc = dpp_errf(rc, err, errlen, "LIST s3://%s/%s: page %u: %s", bucket, prefix, page,
                          perr);
            break;
        }
        if (lim->max_keys > 0 && l->n > lim->max_keys) {
            rc = dpp_errf(DPP_ETOOBIG, err, errlen,
                          "LIST s3://%s/%s: over %llu keys (%zu in %u pages%s)", bucket, prefix,
                          (unsigned long long)lim->max_keys, l->n, page,
                          l->truncated ? ", and the store says there are more" : "");
            break;
        }
        if (!l->truncated || page == max_pages)
            break;
        if (lim->max_pages > 0 && page >= lim->max_pages) {
            rc = dpp_errf(DPP_ETOOBIG, err, errlen,
                          "LIST s3://%s/%s: over %llu pages (%zu keys so far, and the store "
                          "says there are more)",
                          bucket, prefix, (unsigned long long)lim->max_pages, l->n);
            break;
        }
        token = l->next_token;
        l->next_token = NULL;
    }
    free(token);
    return rc;
}

/* ---- objects read by offset ------------------------------------------- */

dpp_s3_rfile_t *dpp_s3_rfile_of(dpp_rfile_t *f)
{
    return f != NULL && f->fd < 0 && f->read == dpp_s3_rfile_read ? (dpp_s3_rfile_t *)f : NULL;
}

/* Starts the GET of block b ([off, off + DPP_S3_BLOCK) of the object). */
static int block_start(dpp_s3_rfile_t *o, struct dpp_s3_block *b, uint64_t off)
{
    if (b->buf == NULL && (b->buf = malloc(DPP_S3_BLOCK)) == NULL)
        return -ENOMEM;
    uint64_t len = o->rf.size - off < DPP_S3_BLOCK ? o->rf.size - off : DPP_S3_BLOCK;
    b->off = off;
    b->len = 0;
    b->req = (dpp_s3_req_t){.bucket = o->url.bucket,
                            .key = o->url.key,
                            .off = off,
                            .len = len,
                            .if_match = o->etag[0] ? o->etag : NULL,
                            .buf = (char *)b->buf,
                            .cap = (size_t)len};
    int rc = dpp_s3_start(o->s3, &b->req);
    b->state = rc == 0 ? 1 : 0;
    return rc;
}

/* Waits for block b's GET: 0 with its bytes, or the error (in o's why). */
static int block_wait(dpp_s3_rfile_t *o, struct dpp_s3_block *b)
{
    if (b->state != 1)
        return b->state == 2 ? 0 : DPP_EINVAL;
    int rc = dpp_s3_wait(o->s3, &b->req);
    b->state = 0;
    if (rc != 0) {
        snprintf(o->rf.why, sizeof o->rf.why, "%s", b->req.err);
        return rc;
    }
    b->len = b->req.got;
    b->state = 2;
    return 0;
}

ssize_t dpp_s3_rfile_read(dpp_rfile_t *f, void *buf, size_t len, uint64_t off)
{
    dpp_s3_rfile_t *o = (dpp_s3_rfile_t *)f;
    f->why[0] = '\0';
    if (off >= f->size)
        return 0;
    if (len > f->size - off)
        len = (size_t)(f->size - off);
    size_t done = 0;
    while (done < len) {
        uint64_t at = off + done;
        struct dpp_s3_block *cur = &o->blocks[o->cur], *next = &o->blocks[!o->cur];
        if (cur->state == 2 && at >= cur->off && at < cur->off + cur->len) {
            size_t n = (size_t)(cur->off + cur->len - at);
            if (n > len - done)
                n = len - done;
            memcpy((char *)buf + done, cur->buf + (at - cur->off), n);
            done += n;
            continue;
        }
        int rc;
        if (next->state == 1 && next->off == at) {
            /* the block read ahead: take it, and read ahead the one after */
            o->cur = !o->cur;
            if ((rc = block_wait(o, next)) != 0)
                return rc;
            if (next->len == 0)
                break; /* shorter than listed */
            if (next->off + next->len < f->size)
                block_start(o, cur, next->off + next->len); /* a failure shows when needed */
            continue;
        }
        /* A miss: read from `at`. Reading on from where the last block
         * ended is a stream (a text file's lines, a zstd stream): the next
         * block is read ahead while this one is used. */
        int streaming = cur->state == 2 && at == cur->off + cur->len;
        if (next->state == 1)
            dpp_s3_cancel(o->s3, &next->req);
        next->state = 0;
        if ((rc = block_start(o, cur, at)) != 0 || (rc = block_wait(o, cur)) != 0) {
            if (!f->why[0])
                snprintf(f->why, sizeof f->why, "s3://%s/%.400s: %s", o->url.bucket, o->url.key,
                         dpp_strerror(rc));
            return rc;
        }
        if (cur->len == 0)
            break;
        if (streaming && cur->off + cur->len < f->size)
            block_start(o, next, cur->off + cur->len);
    }
    return (ssize_t)done;
}

int dpp_s3_rfile_open(dpp_s3_rfile_t *o, dpp_s3_t *s3, const char *url, const char *etag,
                       uint64_t size, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->rf.fd = -1;
    o->rf.read = dpp_s3_rfile_read;
    o->rf.size = size;
    int rc = dpp_s3_url_parse(url, &o->url, err, errlen);
    if (rc != 0)
        return rc;
    if (s3 == NULL)
        return dpp_errf(DPP_EPATH, err, errlen,
                        "%s: this process reads no object storage (start it with --data-root "
                        "s3://...)",
                        url);
    o->s3 = s3;
    snprintf(o->etag, sizeof o->etag, "%s", etag ? etag : "");
    o->rf.version = dpp_s3_etag_version(o->etag);
    return 0;
}

void dpp_s3_rfile_close(dpp_s3_rfile_t *o)
{
    for (int i = 0; i < 2; i++) {
        if (o->blocks[i].state == 1)
            dpp_s3_cancel(o->s3, &o->blocks[i].req);
        free(o->blocks[i].buf);
        o->blocks[i].buf = NULL;
        o->blocks[i].state = 0;
    }
}
