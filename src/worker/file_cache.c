/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's cache of loaded files (file_cache.h). Process-wide, behind one
 * mutex: plan_init() runs per split on any pipeline thread with only the
 * pipeline's configuration at hand, and a process has one set of data
 * roots. Entries nobody uses are kept up to MAX_IDLE, then freed oldest
 * first. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "spec/table.h"
#include "storage/file_version.h"
#include "storage/s3.h"
#include "file_cache.h"

#define MAX_IDLE 8

typedef struct entry {
    struct entry *next;
    char *path; /* real path */
    off_t size;
    struct timespec mtime;
    const dpp_file_kind_t *kind;
    char *arg; /* NULL: none */
    void *obj;
    unsigned refs;
} entry_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry_t *entries; /* newest first */

/* Frees idle entries past MAX_IDLE, and idle ones of a stale file. */
static void trim(void)
{
    unsigned idle = 0;
    for (entry_t **e = &entries; *e;) {
        if ((*e)->refs == 0 && ++idle > MAX_IDLE) {
            entry_t *dead = *e;
            *e = dead->next;
            dead->kind->unload(dead->obj);
            free(dead->path);
            free(dead->arg);
            free(dead);
            continue;
        }
        e = &(*e)->next;
    }
}

static int resolve(const char *what, const char *root, char *const *roots, size_t nroots,
                   const char *file, char *real, char *err, size_t errlen)
{
    char joined[PATH_MAX];
    if (snprintf(joined, sizeof joined, "%s/%s", root, file) >= (int)sizeof joined)
        return dpp_errf(-ENAMETOOLONG, err, errlen, "%s %s: path too long", what, file);
    if (realpath(joined, real) == NULL)
        return dpp_errf(-errno, err, errlen, "%s %s (under %s): %s", what, file, root,
                        strerror(errno));
    if (nroots > 0 && dpp_path_check_under(real, roots, nroots, NULL) != 0)
        return dpp_errf(DPP_EPATH, err, errlen,
                        "%s %s: resolves outside the worker's data roots", what, file);
    return 0;
}

static int same_arg(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* An object of size bytes at version etag as st: its size, and as mtime
 * the ETag's hash; DPP_ESPEC when it is larger than kind takes. */
static int object_stat(const dpp_file_kind_t *kind, const char *url, uint64_t size,
                       const char *etag, struct stat *st, char *err, size_t errlen)
{
    if (size > kind->max_bytes)
        return dpp_errf(DPP_ESPEC, err, errlen, "%s %s: %llu bytes, more than the %llu dpp takes",
                        kind->what, url, (unsigned long long)size,
                        (unsigned long long)kind->max_bytes);
    memset(st, 0, sizeof *st);
    st->st_size = (off_t)size;
    st->st_mtim.tv_sec = (time_t)dpp_s3_etag_version(etag);
    return 0;
}

/* The version of object url: st's size, and mtime (the ETag's hash),
 * from a HEAD; etag for the GET. */
static int object_head(const dpp_file_kind_t *kind, const char *url, struct stat *st, char *etag,
                       char *err, size_t errlen)
{
    uint64_t size;
    int rc = dpp_s3_head_url(kind->what, url, 0, NULL, &size, etag, err, errlen);
    return rc ? rc : object_stat(kind, url, size, etag, st, err, errlen);
}

/* The object url whole, at version etag and size bytes, into *buf
 * (malloc'd). */
static int object_get(const dpp_file_kind_t *kind, const char *url, const char *etag,
                      uint64_t size, uint8_t **buf, char *err, size_t errlen)
{
    dpp_s3_url_t u;
    int rc = dpp_s3_url_parse(url, &u, err, errlen);
    if (rc)
        return rc;
    if ((*buf = malloc(size ? size : 1)) == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "%s %s: out of memory", kind->what, url);
    dpp_s3_req_t r = {.bucket = u.bucket,
                      .key = u.key,
                      .len = size,
                      .if_match = etag,
                      .buf = (char *)*buf,
                      .cap = (size_t)size};
    if (size > 0 && (rc = dpp_s3_run(dpp_s3_thread_client(), &r)) == 0 && r.got != size)
        rc = dpp_errf(DPP_ETRUNCATED, r.err, sizeof r.err, "%s: %zu of %llu bytes came", url,
                      r.got, (unsigned long long)size);
    if (rc) {
        free(*buf);
        *buf = NULL;
        return dpp_errf(rc, err, errlen, "%s %s", kind->what, r.err);
    }
    return 0;
}

/* The version pin names (storage/file_version.h) as st's size and mtime
 * (an object's: the ETag's hash), and its ETag. */
static int pinned_object(const dpp_file_kind_t *kind, const char *url, const char *pin,
                         struct stat *st, char *etag, char *err, size_t errlen)
{
    uint64_t size;
    int64_t mtime_ns;
    if (dpp_file_version_parse(pin, &size, &mtime_ns, etag) != 0 || etag[0] == '\0')
        return dpp_errf(DPP_EINVAL, err, errlen,
                        "%s %s: the session pins it to \"%s\", which is no object's version",
                        kind->what, url, pin);
    return object_stat(kind, url, size, etag, st, err, errlen);
}

/* 0 when the local file of st is the version pin names, else
 * DPP_ECHANGED saying both. */
static int check_pin(const dpp_file_kind_t *kind, const char *file, const char *pin,
                     const struct stat *st, char *err, size_t errlen)
{
    char now[DPP_FILE_VERSION_MAX];
    dpp_file_version_format(now, (uint64_t)st->st_size,
                            (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec, NULL);
    if (strcmp(now, pin) == 0)
        return 0;
    char then_w[256], now_w[256];
    dpp_file_version_words(pin, then_w, sizeof then_w);
    dpp_file_version_words(now, now_w, sizeof now_w);
    return dpp_errf(DPP_ECHANGED, err, errlen,
                    "%s %s changed since the session was submitted (then %s; now %s): its "
                    "splits would mix two versions, so none is read with it; submit the session "
                    "again (or restore the file)",
                    kind->what, file, then_w, now_w);
}

int dpp_file_cache_get(const dpp_file_kind_t *kind, const char *arg, const char *root,
                       char *const *roots, size_t nroots, const char *file, const char *pin,
                       void **out, char *err, size_t errlen)
{
    char real[PATH_MAX];
    struct stat st;
    uint8_t *bytes = NULL; /* an object's, fetched */
    char etag[DPP_S3_ETAG_MAX];
    *out = NULL;
    int rc, object = dpp_s3_is_url(root);
    if (object) {
        if (snprintf(real, sizeof real, "%s/%s", root, file) >= (int)sizeof real)
            return dpp_errf(-ENAMETOOLONG, err, errlen, "%s %s: name too long", kind->what, file);
        /* a pinned object needs no HEAD: its GET asks for that ETag */
        rc = pin ? pinned_object(kind, real, pin, &st, etag, err, errlen)
                 : object_head(kind, real, &st, etag, err, errlen);
        if (rc != 0)
            return rc;
    } else {
        if ((rc = resolve(kind->what, root, roots, nroots, file, real, err, errlen)) != 0)
            return rc;
        if (stat(real, &st) != 0)
            return dpp_errf(-errno, err, errlen, "%s %s: %s", kind->what, file, strerror(errno));
        if (pin && (rc = check_pin(kind, file, pin, &st, err, errlen)) != 0)
            return rc;
    }
    pthread_mutex_lock(&mu);
    for (entry_t *e = entries; e; e = e->next) {
        if (e->kind == kind && same_arg(e->arg, arg) && strcmp(e->path, real) == 0 &&
            e->size == st.st_size &&
            e->mtime.tv_sec == st.st_mtim.tv_sec && e->mtime.tv_nsec == st.st_mtim.tv_nsec) {
            e->refs++;
            *out = e->obj;
            pthread_mutex_unlock(&mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&mu);
    /* Loaded outside the lock: two threads may load the same file at once,
     * and both copies are kept until idle; cheaper than stalling every
     * other thread behind a large file. */
    entry_t *e = calloc(1, sizeof *e);
    if (e == NULL || (e->path = strdup(real)) == NULL ||
        (arg && (e->arg = strdup(arg)) == NULL)) {
        if (e)
            free(e->path);
        free(e);
        return dpp_errf(-ENOMEM, err, errlen, "%s %s: out of memory", kind->what, file);
    }
    if (!object)
        rc = kind->load(real, file, arg, &e->obj, err, errlen);
    else if ((rc = object_get(kind, real, etag, (uint64_t)st.st_size, &bytes, err, errlen)) == 0)
        rc = kind->load_bytes(bytes, (size_t)st.st_size, file, arg, &e->obj, err, errlen);
    free(bytes);
    if (rc != 0) {
        free(e->path);
        free(e->arg);
        free(e);
        return rc;
    }
    e->kind = kind;
    e->size = st.st_size;
    e->mtime = st.st_mtim;
    e->refs = 1;
    pthread_mutex_lock(&mu);
    e->next = entries;
    entries = e;
    trim();
    pthread_mutex_unlock(&mu);
    *out = e->obj;
    return 0;
}

void dpp_file_cache_put(const void *obj)
{
    if (obj == NULL)
        return;
    pthread_mutex_lock(&mu);
    for (entry_t *e = entries; e; e = e->next)
        if (e->obj == obj && e->refs > 0) {
            e->refs--;
            break;
        }
    trim();
    pthread_mutex_unlock(&mu);
}
