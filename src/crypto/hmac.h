/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and the small pieces cluster
 * token authentication needs around them: constant-time comparison and kernel
 * randomness. */
#ifndef DPP_CRYPTO_HMAC_H
#define DPP_CRYPTO_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define DPP_SHA256_LEN 32
#define DPP_SHA256_BLOCK 64

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

#endif
