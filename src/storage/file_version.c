/* SPDX-License-Identifier: Apache-2.0 */
/* Versions of the files a spec names beside its table (file_version.h). */
#include "storage/file_version.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "storage/s3.h"

void dpp_file_version_format(char *out, uint64_t size, int64_t mtime_ns, const char *etag)
{
    if (etag != NULL)
        snprintf(out, DPP_FILE_VERSION_MAX, "size=%" PRIu64 " etag=%s", size, etag);
    else
        snprintf(out, DPP_FILE_VERSION_MAX, "size=%" PRIu64 " mtime_ns=%" PRId64, size, mtime_ns);
}

int dpp_file_version_parse(const char *v, uint64_t *size, int64_t *mtime_ns, char *etag)
{
    char *end;
    if (strncmp(v, "size=", 5) != 0 || v[5] < '0' || v[5] > '9')
        return DPP_EINVAL;
    errno = 0;
    *size = strtoull(v + 5, &end, 10);
    if (errno != 0)
        return DPP_EINVAL;
    *mtime_ns = 0;
    etag[0] = '\0';
    if (strncmp(end, " etag=", 6) == 0) {
        size_t n = strlen(end + 6);
        if (n == 0 || n >= DPP_S3_ETAG_MAX)
            return DPP_EINVAL;
        memcpy(etag, end + 6, n + 1);
        return 0;
    }
    if (strncmp(end, " mtime_ns=", 10) != 0)
        return DPP_EINVAL;
    const char *m = end + 10;
    errno = 0;
    long long t = strtoll(m, &end, 10);
    if (errno != 0 || end == m || *end != '\0')
        return DPP_EINVAL;
    *mtime_ns = (int64_t)t;
    return 0;
}

int dpp_file_version_of(const char *what, const char *root, const char *file, uint64_t deadline_ns,
                        const int *stop, char *out, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", root, file) >= (int)sizeof path)
        return dpp_errf(-ENAMETOOLONG, err, errlen, "%s \"%s\": the path is too long", what, file);
    if (dpp_s3_is_url(root)) {
        uint64_t size;
        char etag[DPP_S3_ETAG_MAX];
        int rc = dpp_s3_head_url(what, path, deadline_ns, stop, &size, etag, err, errlen);
        if (rc)
            return rc;
        if (etag[0] == '\0')
            return dpp_errf(DPP_ESTORAGE, err, errlen,
                            "%s %s: the store answered without an ETag, so the version every "
                            "split must read cannot be pinned: use a store that sends ETags",
                            what, path);
        dpp_file_version_format(out, size, 0, etag);
        return 0;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return dpp_errf(-errno, err, errlen, "%s \"%s\" (under %s): %s%s", what, file, root,
                        strerror(errno),
                        errno == ENOENT ? ": put it there (every worker reads it under its data "
                                          "root too) or correct the name"
                                        : "");
    if (!S_ISREG(st.st_mode))
        return dpp_errf(DPP_ESPEC, err, errlen, "%s \"%s\" (under %s): not a regular file", what,
                        file, root);
    dpp_file_version_format(out, (uint64_t)st.st_size,
                            (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, NULL);
    return 0;
}

void dpp_file_version_words(const char *v, char *out, size_t outlen)
{
    uint64_t size;
    int64_t mtime_ns;
    char etag[DPP_S3_ETAG_MAX];
    if (dpp_file_version_parse(v, &size, &mtime_ns, etag) != 0) {
        snprintf(out, outlen, "\"%s\"", v);
        return;
    }
    if (etag[0]) {
        snprintf(out, outlen, "%" PRIu64 " bytes, ETag \"%s\"", size, etag);
        return;
    }
    time_t secs = (time_t)(mtime_ns / 1000000000);
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&secs, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outlen, "%" PRIu64 " bytes, modified %s.%09" PRId64 "Z", size, when,
             mtime_ns % 1000000000);
}
