/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 from FIPS 180-4, HMAC from RFC 2104, and the helpers around them
 * for cluster tokens: constant-time compare, getrandom(2). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto/hmac.h"
#include "dpp/error.h"

/* FIPS 180-4 4.2.2: first 32 bits of the fractional parts of the cube roots
 * of the first 64 primes. */
static const uint32_t round_k[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u,
};

static inline uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* FIPS 180-4 6.2.2: one 64-byte block into the state. */
static void compress(uint32_t state[8], const uint8_t *block)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = load_be32(block + 4 * i);
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + round_k[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
    /* The schedule is derived from the data, which under HMAC is the key. */
    explicit_bzero(w, sizeof w);
}

void dpp_sha256_init(dpp_sha256_ctx_t *ctx)
{
    /* FIPS 180-4 5.3.3: fractional parts of the square roots of the first 8
     * primes. */
    static const uint32_t iv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(ctx->state, iv, sizeof iv);
    ctx->total = 0;
    ctx->fill = 0;
}

void dpp_sha256_update(dpp_sha256_ctx_t *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;

    if (len == 0)
        return; /* data may be NULL, which memcpy must not see */
    ctx->total += len;
    if (ctx->fill > 0) {
        size_t take = DPP_SHA256_BLOCK - ctx->fill;
        if (take > len)
            take = len;
        memcpy(ctx->block + ctx->fill, p, take);
        ctx->fill += take;
        p += take;
        len -= take;
        if (ctx->fill < DPP_SHA256_BLOCK)
            return;
        compress(ctx->state, ctx->block);
        ctx->fill = 0;
    }
    for (; len >= DPP_SHA256_BLOCK; p += DPP_SHA256_BLOCK, len -= DPP_SHA256_BLOCK)
        compress(ctx->state, p);
    memcpy(ctx->block, p, len);
    ctx->fill = len;
}

void dpp_sha256_final(dpp_sha256_ctx_t *ctx, uint8_t out[DPP_SHA256_LEN])
{
    uint64_t bits = ctx->total * 8;

    /* FIPS 180-4 5.1.1: a 1 bit, zeros up to 56 mod 64, the 64-bit length. */
    ctx->block[ctx->fill++] = 0x80;
    if (ctx->fill > DPP_SHA256_BLOCK - 8) {
        memset(ctx->block + ctx->fill, 0, DPP_SHA256_BLOCK - ctx->fill);
        compress(ctx->state, ctx->block);
        ctx->fill = 0;
    }
    memset(ctx->block + ctx->fill, 0, DPP_SHA256_BLOCK - 8 - ctx->fill);
    store_be32(ctx->block + 56, (uint32_t)(bits >> 32));
    store_be32(ctx->block + 60, (uint32_t)bits);
    compress(ctx->state, ctx->block);
    for (int i = 0; i < 8; i++)
        store_be32(out + 4 * i, ctx->state[i]);
    explicit_bzero(ctx, sizeof *ctx);
}

void dpp_sha256(const void *data, size_t len, uint8_t out[DPP_SHA256_LEN])
{
    dpp_sha256_ctx_t ctx;
    dpp_sha256_init(&ctx);
    dpp_sha256_update(&ctx, data, len);
    dpp_sha256_final(&ctx, out);
}

void dpp_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                     uint8_t out[DPP_SHA256_LEN])
{
    uint8_t k0[DPP_SHA256_BLOCK] = {0}, pad[DPP_SHA256_BLOCK], inner[DPP_SHA256_LEN];
    dpp_sha256_ctx_t ctx;

    /* RFC 2104 section 2: K0 is the key zero-padded to the block size, or
     * its hash when it is longer. */
    if (keylen > DPP_SHA256_BLOCK)
        dpp_sha256(key, keylen, k0);
    else if (keylen > 0)
        memcpy(k0, key, keylen);

    for (int i = 0; i < DPP_SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x36;
    dpp_sha256_init(&ctx);
    dpp_sha256_update(&ctx, pad, sizeof pad);
    dpp_sha256_update(&ctx, msg, msglen);
    dpp_sha256_final(&ctx, inner);

    for (int i = 0; i < DPP_SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x5c;
    dpp_sha256_init(&ctx);
    dpp_sha256_update(&ctx, pad, sizeof pad);
    dpp_sha256_update(&ctx, inner, sizeof inner);
    dpp_sha256_final(&ctx, out);

    explicit_bzero(k0, sizeof k0);
    explicit_bzero(pad, sizeof pad);
    explicit_bzero(inner, sizeof inner);
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
