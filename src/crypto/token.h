/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster token: read from its file (with the checks a secret deserves)
 * and carried as a dpp_auth_t by every process that authenticates peers. */
#ifndef DPP_CRYPTO_TOKEN_H
#define DPP_CRYPTO_TOKEN_H

#include <stddef.h>
#include <stdint.h>

/* Token file limits: the file is at most DPP_TOKEN_FILE_MAX bytes and holds at
 * least DPP_TOKEN_MIN_LEN bytes once trailing whitespace is stripped. */
#define DPP_TOKEN_FILE_MAX 4096
#define DPP_TOKEN_MIN_LEN 16

/* A process's cluster token; token NULL (len 0): none. */
typedef struct dpp_auth {
    const uint8_t *token;
    size_t len;
} dpp_auth_t;

static inline int dpp_auth_on(const dpp_auth_t *a)
{
    return a != NULL && a->token != NULL && a->len > 0;
}

/* Reads a cluster token file. The path is followed through symlinks: the
 * target must be a regular file (directories, FIFOs, sockets and devices are
 * refused, without blocking on a FIFO). Symlinks are accepted on purpose:
 * Kubernetes secret volumes and similar deployment tools install files as
 * symlinks into a versioned directory. The file is at most DPP_TOKEN_FILE_MAX
 * bytes; trailing whitespace (space, \t, \n, \r, \v, \f) is stripped and at
 * least DPP_TOKEN_MIN_LEN bytes must remain. The token is taken as raw bytes.
 *
 * Returns 0 with *token (malloc'd, len + 1 bytes with a NUL after the token;
 * the caller frees it, ideally after wiping it) and *len set. On error
 * *token is NULL and *len 0, and err holds "PATH: reason" (NUL-terminated
 * when errlen > 0): DPP_EINVAL for a file of the wrong type, size or content
 * ("PATH: not a regular file (a directory)", "PATH: token too short: at
 * least 16 bytes", ...), -ENOMEM, or -errno from stat/open/read.
 *
 * When loose_mode is not NULL it is set to 1 if the file (the symlink's
 * target) grants group or others any permission ((st_mode & 077) != 0), else
 * 0; such a token is still accepted, the caller decides whether to warn. */
int dpp_token_file_read(const char *path, uint8_t **token, size_t *len, char *err, size_t errlen,
                        int *loose_mode);

/* Reads the token of a daemon or tool: from path, else from the file named
 * by $DPP_TOKEN_FILE, else none (*a zeroed, returns 0). Returns 0 or a
 * negative error with the reason in err; warns (through the log) when the
 * file is readable by group or others. The caller frees a->token. */
int dpp_auth_load(dpp_auth_t *a, const char *path, char *err, size_t errlen);

#endif
