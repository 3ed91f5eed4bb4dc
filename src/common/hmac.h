/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and the small pieces cluster
 * token authentication needs around them: constant-time comparison, kernel
 * randomness and reading the token file. */
#ifndef DPP_COMMON_HMAC_H
#define DPP_COMMON_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define DPP_SHA256_LEN 32
#define DPP_SHA256_BLOCK 64

/* Token file limits: the file is at most DPP_TOKEN_FILE_MAX bytes and holds at
 * least DPP_TOKEN_MIN_LEN bytes once trailing whitespace is stripped. */
#define DPP_TOKEN_FILE_MAX 4096
#define DPP_TOKEN_MIN_LEN 16

/* Incremental SHA-256 state, in caller storage; no resources to release. */
typedef struct dpp_sha256_ctx {
    uint32_t state[8];
    uint64_t total;                  /* bytes hashed so far */
    uint8_t block[DPP_SHA256_BLOCK]; /* partial block not yet compressed */
    size_t fill;                     /* bytes used in block */
} dpp_sha256_ctx_t;

void dpp_sha256_init(dpp_sha256_ctx_t *ctx);
/* Hashes len more bytes of data (data may be NULL when len is 0). */
void dpp_sha256_update(dpp_sha256_ctx_t *ctx, const void *data, size_t len);
/* Writes the digest to out and wipes ctx; init it again to reuse it. */
void dpp_sha256_final(dpp_sha256_ctx_t *ctx, uint8_t out[DPP_SHA256_LEN]);

/* One-shot SHA-256 of data. */
void dpp_sha256(const void *data, size_t len, uint8_t out[DPP_SHA256_LEN]);

/* HMAC-SHA256 of msg under key (RFC 2104); a key longer than the 64-byte
 * block is hashed first, as the RFC says. Any key length, including 0, is
 * accepted; key and msg may be NULL when their length is 0. */
void dpp_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                     uint8_t out[DPP_SHA256_LEN]);

/* 1 when the n bytes at a and b are equal, else 0, in time that depends on n
 * only (for comparing MACs). n = 0 is equal. */
int dpp_ct_equal(const void *a, const void *b, size_t n);

/* Fills buf with n bytes from getrandom(2) (the urandom pool, blocking only
 * until it is initialised at boot). Returns 0 or -errno. */
int dpp_random_bytes(void *buf, size_t n);

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

#endif
