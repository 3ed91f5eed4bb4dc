/* SPDX-License-Identifier: Apache-2.0 */
/* Reads by offset of a local file or an object (rfile.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/rfile.h"
#include "dpp/error.h"

void dpp_rfile_local(dpp_rfile_t *f, int fd, uint64_t size, int64_t mtime_ns)
{
    memset(f, 0, sizeof *f);
    f->fd = fd;
    f->size = size;
    f->version = mtime_ns;
}

ssize_t dpp_rfile_read(dpp_rfile_t *f, void *buf, size_t len, uint64_t off)
{
    if (f->fd < 0)
        return f->read ? f->read(f, buf, len, off) : DPP_EINVAL;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(f->fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            snprintf(f->why, sizeof f->why, "%s", strerror(e));
            return -e;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int dpp_rfile_read_full(dpp_rfile_t *f, void *buf, size_t len, uint64_t off)
{
    ssize_t n = dpp_rfile_read(f, buf, len, off);
    if (n < 0)
        return (int)n;
    return (size_t)n == len ? 0 : DPP_ETRUNCATED;
}
