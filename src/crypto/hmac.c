/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 and HMAC-SHA256 through OpenSSL's libcrypto, and the helpers around
 * them for cluster tokens and request signing: constant-time compare,
 * getrandom(2). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "crypto/hmac.h"

/* libcrypto allocates a context per call, so these can fail when memory
 * runs out: the caller (the client library among them) gets -ENOMEM and
 * must not use out, which is zeroed. */
int dpp_sha256(const void *data, size_t len, uint8_t out[DPP_SHA256_LEN])
{
    static const uint8_t none;
    unsigned n = 0;
    if (EVP_Digest(len ? data : &none, len, out, &n, EVP_sha256(), NULL) && n == DPP_SHA256_LEN)
        return 0;
    memset(out, 0, DPP_SHA256_LEN);
    return -ENOMEM;
}

int dpp_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                    uint8_t out[DPP_SHA256_LEN])
{
    static const uint8_t none;
    unsigned n = 0;
    if (HMAC(EVP_sha256(), keylen ? key : &none, (int)keylen, msglen ? msg : &none, msglen, out,
             &n) != NULL &&
        n == DPP_SHA256_LEN)
        return 0;
    memset(out, 0, DPP_SHA256_LEN);
    return -ENOMEM;
}

int dpp_ct_equal(const void *a, const void *b, size_t n)
{
    /* volatile reads keep the compiler from turning the loop into an early
     * exit, which would leak how many leading bytes of a MAC matched. */
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;

    for (size_t i = 0; i < n; i++)
        diff |= x[i] ^ y[i];
    /* Branch-free: 1 only when diff - 1 borrows, i.e. diff == 0. */
    return (int)((((uint32_t)diff - 1) >> 8) & 1);
}

int dpp_random_bytes(void *buf, size_t n)
{
    uint8_t *p = buf;

    /* getrandom() may return fewer bytes than asked for requests above 256
     * bytes when a signal arrives, and at most 32 MiB - 1 per call. */
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}
