/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster token files (see token.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errtext.h"
#include "base/log.h"
#include "crypto/token.h"
#include "dpp/error.h"

static int not_regular(const char *path, mode_t mode, char *err, size_t errlen)
{
    const char *kind = S_ISDIR(mode)    ? "a directory"
                       : S_ISFIFO(mode) ? "a FIFO"
                       : S_ISCHR(mode)  ? "a character device"
                       : S_ISBLK(mode)  ? "a block device"
                       : S_ISSOCK(mode) ? "a socket"
                                        : "unknown type";
    return dpp_errf(DPP_EINVAL, err, errlen, "%s: not a regular file (%s)", path, kind);
}

static int is_trailing_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int sys_err(const char *path, const char *what, char *err, size_t errlen)
{
    int e = errno;
    return dpp_errf(-e, err, errlen, "%s: %s%s", path, what, strerror(e));
}

int dpp_token_file_read(const char *path, uint8_t **token, size_t *len, char *err, size_t errlen,
                        int *loose_mode)
{
    uint8_t raw[DPP_TOKEN_FILE_MAX + 1]; /* one more byte tells "too big" */
    size_t got = 0;
    struct stat st;
    int fd = -1, rc;

    *token = NULL;
    *len = 0;
    if (loose_mode != NULL)
        *loose_mode = 0;
    dpp_errf(0, err, errlen, "%s", "");

    /* Look before opening: open() on a FIFO blocks until a writer comes, and
     * opening some devices has side effects. */
    if (stat(path, &st) != 0)
        return sys_err(path, "", err, errlen);
    if (!S_ISREG(st.st_mode))
        return not_regular(path, st.st_mode, err, errlen);
    /* The path may be swapped between stat() and open(): O_NONBLOCK keeps a
     * FIFO from hanging us and fstat() decides. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return sys_err(path, "", err, errlen);
    if (fstat(fd, &st) != 0) {
        rc = sys_err(path, "fstat: ", err, errlen);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = not_regular(path, st.st_mode, err, errlen);
        goto out;
    }

    /* Read to EOF instead of trusting st_size: the file may change under us,
     * and the limit must hold for what was actually read. */
    while (got < sizeof raw) {
        ssize_t n = read(fd, raw + got, sizeof raw - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = sys_err(path, "read: ", err, errlen);
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got > DPP_TOKEN_FILE_MAX) {
        rc = dpp_errf(DPP_EINVAL, err, errlen, "%s: token file larger than %d bytes", path,
                      DPP_TOKEN_FILE_MAX);
        goto out;
    }
    /* Editors and `echo >` add a newline that is not part of the secret. */
    while (got > 0 && is_trailing_space(raw[got - 1]))
        got--;
    if (got < DPP_TOKEN_MIN_LEN) {
        rc = dpp_errf(DPP_EINVAL, err, errlen, "%s: token too short: at least %d bytes", path,
                      DPP_TOKEN_MIN_LEN);
        goto out;
    }
    *token = malloc(got + 1);
    if (*token == NULL) {
        rc = dpp_errf(-ENOMEM, err, errlen, "%s: out of memory", path);
        goto out;
    }
    memcpy(*token, raw, got);
    (*token)[got] = '\0';
    *len = got;
    if (loose_mode != NULL)
        *loose_mode = (st.st_mode & 077) != 0;
    rc = 0;
out:
    explicit_bzero(raw, sizeof raw);
    if (fd >= 0)
        close(fd);
    return rc;
}

int dpp_auth_load(dpp_auth_t *a, const char *path, char *err, size_t errlen)
{
    a->token = NULL;
    a->len = 0;
    if (path == NULL || path[0] == '\0')
        path = getenv("DPP_TOKEN_FILE");
    if (path == NULL || path[0] == '\0')
        return 0;
    uint8_t *token;
    size_t len;
    int loose = 0;
    int rc = dpp_token_file_read(path, &token, &len, err, errlen, &loose);
    if (rc)
        return rc;
    if (loose)
        DPP_WARN("token_file_readable path=%s hint=\"chmod 600: others may read the cluster "
                 "token\"",
                 path);
    a->token = token;
    a->len = len;
    return 0;
}
