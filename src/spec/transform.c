// SPDX-License-Identifier: Apache-2.0
// Transform chains over one dense row or one sparse id list, and the row
// identity behind the sample filter. The math is the contract in
// docs/spec.md ("Transforms", "Filters"); change both together.
#include <math.h>
#include <string.h>

#include "dpp/error.h"
#include "spec/transform.h"
#include "spec/vocab.h"

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15u
#define FNV_OFFSET 0xcbf29ce484222325u
#define FNV_PRIME 0x100000001b3u

/* High 64 bits of the 128-bit product a * b. */
static inline uint64_t mulhi64(uint64_t a, uint64_t b)
{
#ifdef __SIZEOF_INT128__
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#else
    uint64_t a_lo = (uint32_t)a, a_hi = a >> 32, b_lo = (uint32_t)b, b_hi = b >> 32;
    uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi;
    uint64_t mid = (lo_lo >> 32) + (uint32_t)hi_lo + (uint32_t)lo_hi;
    return a_hi * b_hi + (hi_lo >> 32) + (lo_hi >> 32) + (mid >> 32);
#endif
}

/* a mod n (n >= 1) by Barrett reduction with recip = floor((2^64 - 1) / n).
 * Exact: recip >= (2^64 - n) / n, so a * recip / 2^64 > a / n - 1 and the
 * estimate q = floor(a * recip / 2^64) is floor(a / n) or one less (never
 * more, since recip <= 2^64 / n). a - q * n is thus in [0, 2n) and one
 * conditional subtraction ends it: two multiplications and a compare, where
 * a 64-bit divide takes tens of cycles on common x86-64 cores. */
static inline uint64_t mod_reduce(uint64_t a, uint64_t n, uint64_t recip)
{
    uint64_t r = a - mulhi64(a, recip) * n;
    return r >= n ? r - n : r;
}

/* Floor modulo of a signed id into [0, n). A negative id is handled through
 * ~id = -id - 1 >= 0: id mod n = n - 1 - (~id mod n), which also covers
 * INT64_MIN without overflow. Branch-free on the sign. */
static inline int64_t floor_mod(int64_t id, uint64_t n, uint64_t recip)
{
    uint64_t neg = 0 - ((uint64_t)id >> 63); /* all ones when id < 0 */
    uint64_t r = mod_reduce((uint64_t)id ^ neg, n, recip);
    return (int64_t)((r ^ neg) + (neg & n));
}

/* SplitMix64's finalizer; static so that the per-id loops inline it. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

uint64_t dpp_mix64(uint64_t z)
{
    return mix64(z);
}

uint64_t dpp_shuffle_seed(int64_t seed, uint32_t epoch, uint64_t salt)
{
    return mix64(mix64(mix64((uint64_t)seed) + epoch) + salt);
}

void dpp_permute(uint32_t *idx, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)i;
    uint64_t state = seed;
    for (size_t i = n; i > 1; i--) {
        state += GOLDEN_GAMMA;
        size_t j = (size_t)(((unsigned __int128)mix64(state) * i) >> 64);
        uint32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

uint64_t dpp_hash_id(int64_t id, int64_t salt)
{
    return mix64((uint64_t)id ^ ((uint64_t)salt * GOLDEN_GAMMA));
}

int64_t dpp_transform_string(const dpp_transform_t *t, const uint8_t *s, size_t len)
{
    if (t->op == DPP_OP_HASH)
        return (int64_t)mod_reduce(dpp_string_hash(s, len, t->salt), (uint64_t)t->n, t->n_recip);
    int64_t id = dpp_vocab_find(t->vocab, s, len);
    if (id >= 0)
        return id;
    int64_t n = (int64_t)dpp_vocab_size(t->vocab);
    return t->oov_buckets ? n + (int64_t)(dpp_string_hash(s, len, 0) % (uint64_t)t->oov_buckets)
                          : n;
}

void dpp_transform_prepare(dpp_transform_t *t)
{
    if ((t->op == DPP_OP_MODULO || t->op == DPP_OP_HASH) && t->n > 0)
        t->n_recip = UINT64_MAX / (uint64_t)t->n;
}

void dpp_filter_prepare(dpp_filter_t *f)
{
    if (f->kind != DPP_FILTER_SAMPLE)
        return;
    f->seed_mix = mix64((uint64_t)f->seed);
    /* keep iff draw < p * 2^64 as reals, i.e. draw < ceil(p * 2^64); p * 2^64
     * is exact in double (a power-of-two scaling) and below 2^64 for p < 1.
     * p >= 1 keeps every row, which no 64-bit threshold can say. */
    if (f->p >= 1.0)
        f->threshold = UINT64_MAX;
    else if (f->p > 0.0)
        f->threshold = (uint64_t)ceil(f->p * 0x1p64);
    else
        f->threshold = 0;
}

static inline uint32_t float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* (float)(int64_t)x where that is defined; NaN gives 0 and magnitudes from
 * 2^63 up saturate to +-2^63 (the int64 range's edge as a float). The int
 * conversion also turns -0.0 and (-1, 0) into +0.0, as an integer would. */
static inline float cast_int(float x)
{
    if (x != x)
        return 0.0f;
    if (x >= 0x1p63f)
        return 0x1p63f;
    if (x <= -0x1p63f)
        return -0x1p63f;
    return (float)(int64_t)x;
}

/* Nearest bfloat16 (the top 16 bits of a float32), ties to even: adding
 * 0x7fff plus the kept part's lowest bit carries into the kept part exactly
 * when the dropped half is above the midpoint, or at it with an odd kept
 * part. Carries run into the exponent correctly, up to infinity. */
static inline float round_bfloat16(float x)
{
    uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return bits_float((u & 0x80000000u) | 0x7fc00000u); /* quiet NaN, sign kept */
    u += 0x7fffu + ((u >> 16) & 1u);
    return bits_float(u & 0xffff0000u);
}

/* Nearest IEEE binary16, ties to even, as a float32. Normal halves (from
 * 2^-14) keep 10 of the 23 fraction bits, rounded as in round_bfloat16; a
 * result above 65504 (the largest half) is infinity. Below 2^-14 halves are
 * subnormal, multiples of 2^-24: the value is rounded to such a multiple in
 * integer arithmetic, so the result does not depend on the FPU's rounding
 * mode. */
static inline float round_float16(float x)
{
    uint32_t u = float_bits(x);
    uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u)
        return bits_float(sign | 0x7fc00000u);
    if (mag >= 0x38800000u) { /* 2^-14 */
        mag += 0xfffu + ((mag >> 13) & 1u);
        mag &= ~0x1fffu;
        if (mag > 0x477fe000u) /* 65504 */
            mag = 0x7f800000u;
        return bits_float(sign | mag);
    }
    /* value = m * 2^(e - 150) with e the biased exponent (1 for float32
     * subnormals), so value / 2^-24 = m / 2^(126 - e), shift >= 14. */
    uint32_t e = mag >> 23;
    uint32_t m = (mag & 0x7fffffu) | (e ? 0x800000u : 0);
    uint32_t shift = 126 - (e ? e : 1);
    if (shift > 24) /* m < 2^24, so the quotient is below 1/2 */
        return bits_float(sign);
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return bits_float(sign | float_bits((float)q * 0x1p-24f));
}

/* Number of boundaries b with b <= x (upper bound); NaN stays NaN. */
static inline float bucketize(const double *b, uint32_t nb, float x)
{
    if (x != x)
        return x;
    double v = (double)x;
    uint32_t lo = 0, hi = nb;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (b[mid] <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (float)lo;
}

/* log1p for a float, computed in double without libm and without a branch,
 * so that a column runs at one speed whatever its values hold (libm's
 * log1p branches on the range and cost four times as much on lognormal
 * data as on small counts).
 *
 * u = 1 + x rounds only when |x| < 2^-29 or |x| > 2^29; c = x - (u - 1)
 * is then the rounding error exactly (u - 1 is exact: 1 and u - 1 are
 * multiples of u's ulp below u). log1p(x) = log(u) + c / u, and c matters
 * only for tiny x, where u is within 2^-29 of 1 and c / u is c to well
 * below double precision; for big x, c / u < 2^-53 against log(u) > 20
 * and is dropped.
 *
 * log(u) = k ln 2 + log(m), u = 2^k m with m in [sqrt(1/2), sqrt(2)), and
 * log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716: the atanh
 * series 2s (1 + s^2/3 + s^4/5 + ...) to the s^20 term leaves a relative
 * error below 0.1716^22 / 23 < 2^-59. With the roundings of s, the series
 * and the sum, the double result is within 2^-50 of log1p(x) relative to
 * it, so the float result is log1p(x) rounded to nearest, or its neighbour
 * when log1p(x) lies within 2^-50 (relative) of a halfway point between
 * two floats: never more than 1 ulp from (float)log1p((double)x), and
 * equal to it on every float input but a handful (test_transform checks
 * the bound on 2^24 inputs; `bench_transform --exhaustive` counts the
 * differences over all 2^32: 2 inputs differ by 1 ulp, none by more). */
static inline float log1p_float(float xf)
{
    const double x = (double)xf;
    const double u = 1.0 + x;
    const double err = x - (u - 1.0);
    const double c = fabs(x) < 1.0 ? err : 0.0;
    /* u = 2^k m, m in [sqrt(1/2), sqrt(2)), in 64-bit integer operations
     * only (adds, masks, logical shifts), which vectorise on SSE2: t is u's
     * bits less sqrt(1/2)'s, so its exponent field is k; the 2^62 offset
     * makes it positive for every u from 2^-24 up. */
    const uint64_t sqrt_half = 0x3fe6a09e667f3bcdu;
    uint64_t bits;
    memcpy(&bits, &u, sizeof bits);
    const uint64_t t = bits - sqrt_half;
    const uint64_t mbits = (t & 0x000fffffffffffffu) + sqrt_half;
    const uint64_t kbits = 0x4330000000000000u | ((t + (1ull << 62)) >> 52); /* 2^52 + k + 1024 */
    double m, kd;
    memcpy(&m, &mbits, sizeof m);
    memcpy(&kd, &kbits, sizeof kd);
    kd -= 0x1p52 + 1024.0;
    const double f = m - 1.0, s = f / (2.0 + f), z = s * s;
    double p = 1.0 / 21;
    p = p * z + 1.0 / 19;
    p = p * z + 1.0 / 17;
    p = p * z + 1.0 / 15;
    p = p * z + 1.0 / 13;
    p = p * z + 1.0 / 11;
    p = p * z + 1.0 / 9;
    p = p * z + 1.0 / 7;
    p = p * z + 1.0 / 5;
    p = p * z + 1.0 / 3;
    const double two_s = s + s;
    float r = (float)(kd * 0x1.62e42fefa39efp-1 + (two_s + two_s * (z * p) + c));
    /* The rest is the plain math of docs/spec.md, as selects. */
    r = xf == 0.0f ? xf : r; /* -0 stays -0 */
    r = xf == INFINITY ? xf : r;
    r = xf == -1.0f ? -INFINITY : r;
    r = xf < -1.0f ? NAN : r;
    r = xf != xf ? xf : r;
    return r;
}

/* One op over x[0..n): a row's values, or a whole column's (the worker).
 * Commonest ops first. */
static void dense_op(const dpp_transform_t *t, size_t n, float *x)
{
    dpp_op_kind_t op = t->op;
    if (op == DPP_OP_CLAMP) {
        /* In double so that a bound that is not exactly a float compares as
         * written; NaN fails both tests and stays NaN. Selects, not
         * branches, so that a column's loop vectorises; the lower bound
         * wins, as it did when this was if / else if. */
        const double lo = t->min, hi = t->max;
        const float flo = (float)lo, fhi = (float)hi;
        for (size_t k = 0; k < n; k++) {
            double v = (double)x[k];
            float r = x[k];
            r = v > hi ? fhi : r;
            r = v < lo ? flo : r;
            x[k] = r;
        }
    } else if (op == DPP_OP_LOG1P) {
        for (size_t k = 0; k < n; k++)
            x[k] = log1p_float(x[k]);
    } else if (op == DPP_OP_STANDARDIZE) {
        for (size_t k = 0; k < n; k++)
            x[k] = (float)(((double)x[k] - t->mean) / t->std);
    } else if (op == DPP_OP_BUCKETIZE) {
        for (size_t k = 0; k < n; k++)
            x[k] = bucketize(t->boundaries, t->nboundaries, x[k]);
    } else if (op == DPP_OP_CAST) {
        if (t->cast_to == DPP_CAST_INT)
            for (size_t k = 0; k < n; k++)
                x[k] = cast_int(x[k]);
        else if (t->cast_to == DPP_CAST_BFLOAT16)
            for (size_t k = 0; k < n; k++)
                x[k] = round_bfloat16(x[k]);
        else
            for (size_t k = 0; k < n; k++)
                x[k] = round_float16(x[k]);
    }
    /* fill_missing is handled by the caller (only first); sparse ops are not
     * in a validated dense chain. */
}

void dpp_transform_dense_column(const dpp_transform_t *ops, unsigned nops, float *x, size_t n)
{
    for (unsigned i = nops > 0 && ops[0].op == DPP_OP_FILL_MISSING ? 1 : 0; i < nops; i++)
        dense_op(&ops[i], n, x);
}

int dpp_transform_dense(const dpp_transform_t *ops, unsigned nops, unsigned dim, int present,
                        const float *in, float *out)
{
    /* fill_missing is only valid first (the parser enforces it) and leaves a
     * present value alone. */
    if (!present) {
        if (nops == 0 || ops[0].op != DPP_OP_FILL_MISSING)
            return DPP_EMISSING;
        float v = (float)ops[0].value;
        for (unsigned k = 0; k < dim; k++)
            out[k] = v;
    } else if (in != out) {
        memmove(out, in, (size_t)dim * sizeof *out);
    }
    dpp_transform_dense_column(ops, nops, out, dim);
    return 0;
}

size_t dpp_transform_sparse_pick(const dpp_transform_t *ops, unsigned nops, int64_t *ids,
                                 float *weights, size_t len)
{
    for (unsigned i = 0; i < nops; i++) {
        const dpp_transform_t *t = &ops[i];
        if (t->op != DPP_OP_TRUNCATE || len <= t->max_len)
            continue;
        if (t->keep_last) {
            size_t drop = len - t->max_len;
            memmove(ids, ids + drop, (size_t)t->max_len * sizeof *ids);
            if (weights)
                memmove(weights, weights + drop, (size_t)t->max_len * sizeof *weights);
        }
        len = t->max_len;
    }
    return len;
}

void dpp_transform_sparse_column(const dpp_transform_t *ops, unsigned nops, int64_t *ids, size_t n)
{
    /* An if-chain for the reason given at dense_op(). The op's fields go
     * into locals first: ids are int64 too, so the compiler would otherwise
     * reload them after every store. Dense ops are not in a validated sparse
     * chain and are passed over. */
    for (unsigned i = 0; i < nops; i++) {
        const dpp_transform_t *t = &ops[i];
        dpp_op_kind_t op = t->op;
        if (op == DPP_OP_MODULO && t->n > 0) {
            const uint64_t m = (uint64_t)t->n, recip = t->n_recip;
            for (size_t k = 0; k < n; k++)
                ids[k] = floor_mod(ids[k], m, recip);
        } else if (op == DPP_OP_HASH && t->n > 0) {
            const uint64_t m = (uint64_t)t->n, recip = t->n_recip;
            const uint64_t salt = (uint64_t)t->salt * GOLDEN_GAMMA;
            for (size_t k = 0; k < n; k++)
                ids[k] = (int64_t)mod_reduce(mix64((uint64_t)ids[k] ^ salt), m, recip);
        }
    }
}

size_t dpp_transform_sparse(const dpp_transform_t *ops, unsigned nops, int64_t *ids, float *weights,
                            size_t len)
{
    len = dpp_transform_sparse_pick(ops, nops, ids, weights, len);
    dpp_transform_sparse_column(ops, nops, ids, len);
    return len;
}

int dpp_transform_sparse_prefix(const dpp_transform_t *ops, unsigned nops, size_t *keep)
{
    size_t k = SIZE_MAX;
    for (unsigned i = 0; i < nops; i++) {
        if (ops[i].op != DPP_OP_TRUNCATE)
            continue;
        if (ops[i].keep_last)
            return 0;
        if ((size_t)ops[i].max_len < k)
            k = (size_t)ops[i].max_len;
    }
    *keep = k;
    return 1;
}

uint64_t dpp_path_hash(const char *relative_path)
{
    uint64_t h = FNV_OFFSET;
    for (const unsigned char *c = (const unsigned char *)relative_path; *c; c++) {
        h ^= *c;
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t dpp_row_key(uint64_t path_hash, uint64_t record_index)
{
    return mix64(path_hash + record_index);
}

int dpp_filter_sample_keep(const dpp_filter_t *f, uint64_t row_key, float label)
{
    if (f->has_label && !(label == (float)f->label))
        return 1;
    if (f->p >= 1.0)
        return 1;
    return mix64(row_key ^ f->seed_mix) < f->threshold;
}
