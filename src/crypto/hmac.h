/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), computed by OpenSSL's
 * libcrypto, and the small pieces cluster token authentication needs around
 * them: constant-time comparison and kernel randomness. */
#ifndef DPP_CRYPTO_HMAC_H
#define DPP_CRYPTO_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define DPP_SHA256_LEN 32

/* SHA-256 of data into out. Returns 0, or -ENOMEM (out zeroed, not a
 * digest: never compare or send it). */
int dpp_sha256(const void *data, size_t len, uint8_t out[DPP_SHA256_LEN]);

/* HMAC-SHA256 of msg under key (RFC 2104); a key longer than the 64-byte
 * block is hashed first, as the RFC says. Any key length, including 0, is
 * accepted; key and msg may be NULL when their length is 0. Returns 0, or
 * -ENOMEM (out zeroed, not a MAC: never compare or send it). */
int dpp_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                    uint8_t out[DPP_SHA256_LEN]);

/* 1 when the n bytes at a and b are equal, else 0, in time that depends on n
 * only (for comparing MACs). n = 0 is equal. */
int dpp_ct_equal(const void *a, const void *b, size_t n);

/* Fills buf with n bytes from getrandom(2) (the urandom pool, blocking only
 * until it is initialised at boot). Returns 0 or -errno. */
int dpp_random_bytes(void *buf, size_t n);

#endif
