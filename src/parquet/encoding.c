/* SPDX-License-Identifier: Apache-2.0 */
/* Decoders of Parquet's encodings (parquet-format Encodings.md): the
 * RLE/bit-packed hybrid and the deprecated BIT_PACKED levels, dictionary
 * indices, and values in PLAIN, RLE, DELTA_* and BYTE_STREAM_SPLIT. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errtext.h"
#include "base/util.h"
#include "dpp/error.h"
#include "parquet/encoding.h"

/* PLAIN fixed-width values are copied as they lie, and Parquet stores them
 * little-endian. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "src/parquet/encoding.c assumes a little-endian host"
#endif

/* For the per-width copies of the unpackers: the width must be a constant
 * inside them for the shifts and load offsets to fold. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Julian day of 1970-01-01 (INT96 timestamps). */
#define JULIAN_EPOCH 2440588
#define NS_PER_DAY 86400000000000LL

/* Values of a bit-packed run decoded at once when they go through a
 * conversion (levels, booleans): a multiple of 8, so every chunk starts on a
 * byte boundary. */
#define CHUNK 256

void dpp_pq_scratch_free(dpp_pq_scratch_t *s)
{
    if (!s)
        return;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

static int scratch_reserve(dpp_pq_scratch_t *s, size_t size)
{
    if (size <= s->cap)
        return 0;
    size_t cap = s->cap + s->cap / 2 > size ? s->cap + s->cap / 2 : size;
    uint8_t *p = realloc(s->buf, cap);
    if (!p)
        return -ENOMEM;
    s->buf = p;
    s->cap = cap;
    return 0;
}

const char *dpp_pq_encoding_name(dpp_pq_encoding_t enc)
{
    static _Thread_local char other[24];
    switch (enc) {
    case DPP_PQ_PLAIN:
        return "PLAIN";
    case DPP_PQ_PLAIN_DICTIONARY:
        return "PLAIN_DICTIONARY";
    case DPP_PQ_RLE:
        return "RLE";
    case DPP_PQ_BIT_PACKED:
        return "BIT_PACKED";
    case DPP_PQ_DELTA_BINARY_PACKED:
        return "DELTA_BINARY_PACKED";
    case DPP_PQ_DELTA_LENGTH_BYTE_ARRAY:
        return "DELTA_LENGTH_BYTE_ARRAY";
    case DPP_PQ_DELTA_BYTE_ARRAY:
        return "DELTA_BYTE_ARRAY";
    case DPP_PQ_RLE_DICTIONARY:
        return "RLE_DICTIONARY";
    case DPP_PQ_BYTE_STREAM_SPLIT:
        return "BYTE_STREAM_SPLIT";
    }
    snprintf(other, sizeof other, "encoding %d", (int)enc);
    return other;
}

static const char *type_name(dpp_pq_type_t type)
{
    static _Thread_local char other[24];
    switch (type) {
    case DPP_PQ_BOOLEAN:
        return "BOOLEAN";
    case DPP_PQ_INT32:
        return "INT32";
    case DPP_PQ_INT64:
        return "INT64";
    case DPP_PQ_INT96:
        return "INT96";
    case DPP_PQ_FLOAT:
        return "FLOAT";
    case DPP_PQ_DOUBLE:
        return "DOUBLE";
    case DPP_PQ_BYTE_ARRAY:
        return "BYTE_ARRAY";
    case DPP_PQ_FIXED_LEN_BYTE_ARRAY:
        return "FIXED_LEN_BYTE_ARRAY";
    }
    snprintf(other, sizeof other, "type %d", (int)type);
    return other;
}

size_t dpp_pq_value_size(dpp_pq_type_t type)
{
    switch (type) {
    case DPP_PQ_BOOLEAN:
        return sizeof(uint8_t);
    case DPP_PQ_INT32:
        return sizeof(int32_t);
    case DPP_PQ_INT64:
    case DPP_PQ_INT96:
        return sizeof(int64_t);
    case DPP_PQ_FLOAT:
        return sizeof(float);
    case DPP_PQ_DOUBLE:
        return sizeof(double);
    case DPP_PQ_BYTE_ARRAY:
    case DPP_PQ_FIXED_LEN_BYTE_ARRAY:
        return sizeof(dpp_pq_bytes_t);
    }
    return 0;
}

/* ULEB128 of at most 64 bits at buf[*pos..end); advances *pos. -1 when it is
 * cut off by end or longer than 64 bits. */
static int read_uleb(const uint8_t *buf, size_t end, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= end)
            return -1;
        uint8_t b = buf[(*pos)++];
        if (shift == 63 && b > 1)
            return -1;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static uint64_t unzigzag(uint64_t z)
{
    return (z >> 1) ^ (0 - (z & 1));
}

static uint32_t mask32(unsigned w)
{
    return w >= 32 ? UINT32_MAX : ((uint32_t)1 << w) - 1;
}

/* Bytes of n values of w bits packed back to back, without overflowing
 * n * w. */
static size_t packed_bytes(size_t n, unsigned w)
{
    return n / 8 * w + (n % 8 * w + 7) / 8;
}

/* The value of w bits (1..64) at bit `bit` of p, LSB first, reading only the
 * bytes that hold its bits. */
static uint64_t bits_at(const uint8_t *p, size_t bit, unsigned w)
{
    const uint8_t *q = p + (bit >> 3);
    unsigned shift = bit & 7, nb = (shift + w + 7) >> 3;
    uint64_t v = q[0] >> shift;
    for (unsigned k = 1; k < nb; k++)
        v |= (uint64_t)q[k] << (8 * k - shift);
    return w == 64 ? v : v & (((uint64_t)1 << w) - 1);
}

/* Eight values of w bits from p, LSB first; reads up to p[w + 8). */
static ALWAYS_INLINE void unpack8_32(const uint8_t *p, uint32_t *out, unsigned w)
{
    const uint64_t m = ((uint64_t)1 << w) - 1;
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) {
        unsigned bit = j * w;
        out[j] = (uint32_t)(dpp_load_le64(p + (bit >> 3)) >> (bit & 7) & m);
    }
}

/* The same into 64 bits for w up to 64: a value that starts s bits into a
 * byte and has w + s > 64 bits takes its top bits from a ninth byte. */
static ALWAYS_INLINE void unpack8_64(const uint8_t *p, uint64_t *out, unsigned w)
{
    const uint64_t m = w == 64 ? UINT64_MAX : ((uint64_t)1 << w) - 1;
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) {
        unsigned bit = j * w, s = bit & 7;
        uint64_t v = dpp_load_le64(p + (bit >> 3)) >> s;
        if (w + s > 64)
            v |= (uint64_t)p[(bit >> 3) + 8] << (64 - s);
        out[j] = v & m;
    }
}

/* Groups of 8 that unpack8_* may decode from p with avail bytes readable:
 * group g reads p[g * w .. g * w + w + 8). */
static ALWAYS_INLINE size_t fast_groups(size_t avail, size_t n, unsigned w)
{
    size_t g = avail >= w + 8 ? (avail - w - 8) / w + 1 : 0;
    return g < n / 8 ? g : n / 8;
}

static ALWAYS_INLINE void unpack32_w(const uint8_t *p, size_t avail, uint32_t *out, size_t n,
                                     unsigned w)
{
    size_t g = fast_groups(avail, n, w);
    for (size_t k = 0; k < g; k++)
        unpack8_32(p + k * w, out + 8 * k, w);
    for (size_t i = 8 * g; i < n; i++)
        out[i] = (uint32_t)bits_at(p, i * w, w);
}

static ALWAYS_INLINE void unpack64_w(const uint8_t *p, size_t avail, uint64_t *out, size_t n,
                                     unsigned w)
{
    size_t g = fast_groups(avail, n, w);
    for (size_t k = 0; k < g; k++)
        unpack8_64(p + k * w, out + 8 * k, w);
    for (size_t i = 8 * g; i < n; i++)
        out[i] = bits_at(p, i * w, w);
}

/* clang-format off */
#define WIDTHS_1_32(X)                                                                             \
    X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17)  \
    X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) X(32)
#define WIDTHS_33_64(X)                                                                            \
    X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47)     \
    X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60) X(61) X(62)     \
    X(63) X(64)
/* clang-format on */

/* n values of w bits (0..32), LSB first, from p into out. p[0..avail) is
 * readable and holds at least packed_bytes(n, w); bytes past the values are
 * read but not used. */
static void unpack32(const uint8_t *p, size_t avail, uint32_t *out, size_t n, unsigned w)
{
    switch (w) {
#define UNPACK32_CASE(W)                                                                           \
    case W:                                                                                        \
        unpack32_w(p, avail, out, n, W);                                                           \
        return;
        WIDTHS_1_32(UNPACK32_CASE)
#undef UNPACK32_CASE
    default: /* width 0 */
        memset(out, 0, n * sizeof *out);
    }
}

/* The same for w in 0..64 into 64-bit values. */
static void unpack64(const uint8_t *p, size_t avail, uint64_t *out, size_t n, unsigned w)
{
    switch (w) {
#define UNPACK64_CASE(W)                                                                           \
    case W:                                                                                        \
        unpack64_w(p, avail, out, n, W);                                                           \
        return;
        WIDTHS_1_32(UNPACK64_CASE)
        WIDTHS_33_64(UNPACK64_CASE)
#undef UNPACK64_CASE
    default: /* width 0 */
        memset(out, 0, n * sizeof *out);
    }
}

/* ---- the RLE/bit-packed hybrid ---- */

typedef enum out_kind {
    OUT_U32, /* dictionary indices */
    OUT_I16, /* levels */
    OUT_U8,  /* booleans */
} out_kind_t;

/* A hybrid stream at buf[pos..end). Offsets in errors are into buf, the
 * caller's whole buffer. */
typedef struct hybrid {
    const char *what; /* "RLE levels", ... */
    const char *item; /* what one value is: "level", "index", ... */
    const uint8_t *buf;
    size_t pos, end;
    unsigned width;
    uint32_t max; /* largest value allowed */
} hybrid_t;

/* The loops below work in blocks of a fixed count because gcc's -O2 (the
 * project's release flags) vectorises a loop only when its trip count is a
 * multiple of the vector length; the blocks are such loops. */

static void fill(void *out, out_kind_t kind, size_t at, size_t count, uint32_t v)
{
    size_t i = 0;
    if (kind == OUT_U32) {
        uint32_t *o = (uint32_t *)out + at;
        for (; i + 8 <= count; i += 8)
            for (unsigned j = 0; j < 8; j++)
                o[i + j] = v;
        for (; i < count; i++)
            o[i] = v;
    } else if (kind == OUT_I16) {
        int16_t *o = (int16_t *)out + at;
        for (; i + 16 <= count; i += 16)
            for (unsigned j = 0; j < 16; j++)
                o[i + j] = (int16_t)v;
        for (; i < count; i++)
            o[i] = (int16_t)v;
    } else {
        memset((uint8_t *)out + at, (int)v, count);
    }
}

/* Whether any of v[0..n) exceeds max, all below 2^31: max - v has bit 31
 * set exactly when v > max. ORing differences into 8 lanes vectorises; a
 * running maximum did not (SSE2 has no unsigned maximum) and cost 5x the
 * unpacking of width-17 indices. */
static int any_above31(const uint32_t *v, size_t n, uint32_t max)
{
    uint32_t lanes[8] = {0}, acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (unsigned j = 0; j < 8; j++)
            lanes[j] |= max - v[i + j];
    for (unsigned j = 0; j < 8; j++)
        acc |= lanes[j];
    for (; i < n; i++)
        acc |= max - v[i];
    return acc >> 31;
}

/* Checks unpacked values v[0..n), which start at bit 0 of byte `at`,
 * against h->max. */
static int check_max(const hybrid_t *h, const uint32_t *v, size_t n, size_t at, char *err,
                     size_t errlen)
{
    if (h->max >= mask32(h->width))
        return 0;
    if (h->width < 32 && !any_above31(v, n, h->max))
        return 0;
    size_t i = 0;
    while (i < n && v[i] <= h->max)
        i++;
    if (i == n)
        return 0;
    return dpp_errf(DPP_ECORRUPT, err, errlen, "%s: %s %u at byte %zu (at most %u)", h->what,
                    h->item, v[i], at + i * h->width / 8, h->max);
}

/* A bit-packed run of `take` values at h->pos into out[done..). */
static int hybrid_packed(const hybrid_t *h, void *out, out_kind_t kind, size_t done, size_t take,
                         char *err, size_t errlen)
{
    const uint8_t *p = h->buf + h->pos;
    size_t avail = h->end - h->pos;
    if (kind == OUT_U32) {
        uint32_t *o = (uint32_t *)out + done;
        unpack32(p, avail, o, take, h->width);
        return check_max(h, o, take, h->pos, err, errlen);
    }
    uint32_t tmp[CHUNK];
    for (size_t c = 0; c < take; c += CHUNK) {
        size_t k = take - c < CHUNK ? take - c : CHUNK;
        size_t skip = c / 8 * h->width;
        unpack32(p + skip, avail - skip, tmp, k, h->width);
        int rc = check_max(h, tmp, k, h->pos + skip, err, errlen);
        if (rc)
            return rc;
        if (kind == OUT_I16) {
            int16_t *o = (int16_t *)out + done + c;
            for (size_t i = 0; i < k; i++)
                o[i] = (int16_t)tmp[i];
        } else {
            uint8_t *o = (uint8_t *)out + done + c;
            for (size_t i = 0; i < k; i++)
                o[i] = (uint8_t)tmp[i];
        }
    }
    return 0;
}

/* n values of the hybrid into out (elements by kind). A run may be longer
 * than the values left: writers pad the last one (DuckDB writes bit-packed
 * runs of whole 256-value blocks), so only the values wanted are taken, and
 * the last bit-packed run needs only their bytes (parquet-mr's and Arrow's
 * readers accept both). An empty run is passed over. */
static int hybrid_decode(hybrid_t *h, void *out, out_kind_t kind, size_t n, char *err,
                         size_t errlen)
{
    size_t done = 0;
    while (done < n) {
        size_t at = h->pos, left = n - done;
        uint64_t header;
        if (at >= h->end)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "%s: data ends at byte %zu after %zu of %zu values", h->what, at, done,
                            n);
        if (read_uleb(h->buf, h->end, &h->pos, &header) != 0)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "%s: run header at byte %zu is cut off or longer than 64 bits", h->what,
                            at);
        uint64_t count = header >> 1;
        if (!(header & 1)) {
            if (count > left)
                count = left;
            size_t vb = (h->width + 7) / 8;
            if (vb > h->end - h->pos)
                return dpp_errf(DPP_ECORRUPT, err, errlen,
                                "%s: value of the RLE run at byte %zu is cut off", h->what, at);
            uint32_t v = 0;
            for (size_t k = 0; k < vb; k++)
                v |= (uint32_t)h->buf[h->pos + k] << (8 * k);
            if (v > mask32(h->width))
                return dpp_errf(DPP_ECORRUPT, err, errlen,
                                "%s: RLE run value %u at byte %zu does not fit %u bits", h->what, v,
                                h->pos, h->width);
            if (v > h->max)
                return dpp_errf(DPP_ECORRUPT, err, errlen, "%s: %s %u at byte %zu (at most %u)",
                                h->what, h->item, v, h->pos, h->max);
            fill(out, kind, done, (size_t)count, v);
            h->pos += vb;
            done += (size_t)count;
            continue;
        }
        size_t take = count < (left + 7) / 8 ? (size_t)count * 8 : left;
        size_t bytes = packed_bytes(take, h->width);
        if (bytes > h->end - h->pos)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "%s: bit-packed run at byte %zu needs %zu bytes, %zu left", h->what, at,
                            bytes, h->end - h->pos);
        int rc = hybrid_packed(h, out, kind, done, take, err, errlen);
        if (rc)
            return rc;
        h->pos += bytes;
        done += take;
    }
    return 0;
}

/* Levels in the deprecated BIT_PACKED encoding: MSB first, no runs. */
static int bit_packed_levels(const uint8_t *buf, size_t len, unsigned w, int max_level,
                             int16_t *out, size_t n, char *err, size_t errlen)
{
    size_t bytes = packed_bytes(n, w);
    if (bytes > len)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "BIT_PACKED levels: %zu levels of %u bits need %zu bytes, %zu present", n,
                        w, bytes, len);
    for (size_t i = 0; i < n; i++) {
        size_t bit = i * w, byte = bit >> 3;
        /* w <= 15 and the value starts within its first byte: three bytes hold it. */
        uint32_t window = (uint32_t)buf[byte] << 16;
        if (byte + 1 < bytes)
            window |= (uint32_t)buf[byte + 1] << 8;
        if (byte + 2 < bytes)
            window |= buf[byte + 2];
        uint32_t v = window >> (24 - (bit & 7) - w) & mask32(w);
        if (v > (uint32_t)max_level)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "BIT_PACKED levels: level %u at byte %zu (at most %d)", v, byte,
                            max_level);
        out[i] = (int16_t)v;
    }
    return 0;
}

static unsigned bit_width(uint32_t max)
{
    return max ? 32 - (unsigned)__builtin_clz(max) : 0;
}

int dpp_pq_levels_decode(dpp_pq_encoding_t enc, int max_level, const uint8_t *buf, size_t len,
                         int16_t *out, size_t n, char *err, size_t errlen)
{
    if (enc != DPP_PQ_RLE && enc != DPP_PQ_BIT_PACKED)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "levels in %s (RLE or BIT_PACKED expected)",
                        dpp_pq_encoding_name(enc));
    if (max_level < 0 || max_level > INT16_MAX)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "levels: max level %d out of range", max_level);
    if (max_level == 0) {
        memset(out, 0, n * sizeof *out);
        return 0;
    }
    unsigned w = bit_width((uint32_t)max_level);
    if (enc == DPP_PQ_BIT_PACKED)
        return bit_packed_levels(buf, len, w, max_level, out, n, err, errlen);
    hybrid_t h = {"RLE levels", "level", buf, 0, len, w, (uint32_t)max_level};
    return hybrid_decode(&h, out, OUT_I16, n, err, errlen);
}

int dpp_pq_indices_decode(const uint8_t *buf, size_t len, uint32_t *out, size_t n,
                          uint32_t dict_size, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    if (len == 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "dictionary indices: no bit width byte for %zu values", n);
    if (buf[0] > 32)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "dictionary indices: bit width %u at byte 0 (at most 32)", buf[0]);
    if (dict_size == 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "dictionary indices: %zu values but the dictionary is empty", n);
    hybrid_t h = {"dictionary indices", "index", buf, 1, len, buf[0], dict_size - 1};
    return hybrid_decode(&h, out, OUT_U32, n, err, errlen);
}

/* ---- DELTA_BINARY_PACKED ---- */

/* Exactly n (>= 1) values of DELTA_BINARY_PACKED at buf[*pos..len) into out
 * (uint64_t elements when is64, else uint32_t, all arithmetic wrapping in
 * that width); *pos ends after the last miniblock holding values. `what`
 * names the stream in errors. */
static int dbp_decode(const char *what, const uint8_t *buf, size_t len, size_t *pos, int is64,
                      void *out, size_t n, char *err, size_t errlen)
{
    size_t p = *pos;
    uint64_t block, nmini, total, first;
    if (read_uleb(buf, len, &p, &block) != 0 || read_uleb(buf, len, &p, &nmini) != 0 ||
        read_uleb(buf, len, &p, &total) != 0 || read_uleb(buf, len, &p, &first) != 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "%s: header at byte %zu is cut off or holds a varint over 64 bits", what,
                        *pos);
    /* Encodings.md: the block size is a multiple of 128 and a miniblock's
     * values a multiple of 32, which keeps every miniblock whole bytes. */
    if (block == 0 || block % 128 != 0 || block > UINT32_MAX)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "%s: block size %llu at byte %zu (a multiple of 128 expected)", what,
                        (unsigned long long)block, *pos);
    if (nmini == 0 || block % nmini != 0 || block / nmini % 32 != 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "%s: %llu miniblocks in a block of %llu values at byte %zu (each must "
                        "hold a multiple of 32)",
                        what, (unsigned long long)nmini, (unsigned long long)block, *pos);
    if (total != n)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "%s: header at byte %zu holds %llu values, %zu expected", what, *pos,
                        (unsigned long long)total, n);
    uint64_t *o64 = out;
    uint32_t *o32 = out;
    uint64_t last = unzigzag(first);
    if (is64)
        o64[0] = last;
    else
        o32[0] = (uint32_t)last;
    size_t done = 1, per_mini = (size_t)(block / nmini);
    /* INT32 deltas may need 33 bits (DuckDB writes them so); the arithmetic
     * wraps modulo 2^32 all the same. */
    const unsigned wmax = 64;
    while (done < n) {
        size_t at = p;
        uint64_t zz;
        if (read_uleb(buf, len, &p, &zz) != 0)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "%s: min delta at byte %zu is cut off or longer than 64 bits", what,
                            at);
        uint64_t min_delta = unzigzag(zz);
        if (nmini > len - p)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "%s: %llu miniblock bit widths at byte %zu, %zu bytes left", what,
                            (unsigned long long)nmini, p, len - p);
        size_t widths = p;
        p += (size_t)nmini;
        /* Miniblocks past the last value have a width byte but no data, and
         * their width may be anything (Encodings.md). */
        for (size_t m = 0; m < nmini && done < n; m++) {
            unsigned w = buf[widths + m];
            if (w > wmax)
                return dpp_errf(DPP_ECORRUPT, err, errlen,
                                "%s: miniblock bit width %u at byte %zu (at most %u)", what, w,
                                widths + m, wmax);
            size_t bytes = per_mini / 8 * w;
            if (bytes > len - p)
                return dpp_errf(DPP_ECORRUPT, err, errlen,
                                "%s: miniblock at byte %zu needs %zu bytes, %zu left", what, p,
                                bytes, len - p);
            size_t take = per_mini < n - done ? per_mini : n - done;
            if (is64) {
                uint64_t *d = o64 + done;
                unpack64(buf + p, len - p, d, take, w);
                for (size_t i = 0; i < take; i++) {
                    last += min_delta + d[i];
                    d[i] = last;
                }
            } else if (w <= 32) {
                uint32_t *d = o32 + done, last32 = (uint32_t)last, md = (uint32_t)min_delta;
                unpack32(buf + p, len - p, d, take, w);
                for (size_t i = 0; i < take; i++) {
                    last32 += md + d[i];
                    d[i] = last32;
                }
                last = last32;
            } else {
                /* wider than the output: unpacked 256 at a time (a multiple
                 * of 8 values keeps each piece on a byte boundary) */
                uint32_t *d = o32 + done, last32 = (uint32_t)last, md = (uint32_t)min_delta;
                uint64_t wide[256];
                for (size_t c = 0; c < take; c += 256) {
                    size_t k = take - c < 256 ? take - c : 256, off = c / 8 * w;
                    unpack64(buf + p + off, len - p - off, wide, k, w);
                    for (size_t i = 0; i < k; i++) {
                        last32 += md + (uint32_t)wide[i];
                        d[c + i] = last32;
                    }
                }
                last = last32;
            }
            p += bytes;
            done += take;
        }
    }
    *pos = p;
    return 0;
}

/* ---- byte arrays ---- */

static int plain_byte_array(const uint8_t *buf, size_t len, dpp_pq_bytes_t *out, size_t n,
                            size_t *used, char *err, size_t errlen)
{
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        if (len - p < 4)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "PLAIN BYTE_ARRAY: length of value %zu at byte %zu is cut off", i, p);
        uint32_t l = dpp_load_le32(buf + p);
        if (l > len - p - 4)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "PLAIN BYTE_ARRAY: value %zu of %u bytes at byte %zu, %zu bytes left",
                            i, l, p, len - p - 4);
        out[i].ptr = buf + p + 4;
        out[i].len = l;
        p += 4 + (size_t)l;
    }
    *used = p;
    return 0;
}

static int delta_length_byte_array(const uint8_t *buf, size_t len, dpp_pq_bytes_t *out, size_t n,
                                   dpp_pq_scratch_t *scratch, size_t *used, char *err,
                                   size_t errlen)
{
    if (scratch_reserve(scratch, n * sizeof(uint32_t)) != 0)
        return -ENOMEM;
    uint32_t *lens = (uint32_t *)scratch->buf;
    size_t p = 0;
    int rc = dbp_decode("DELTA_LENGTH_BYTE_ARRAY lengths", buf, len, &p, 0, lens, n, err, errlen);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > INT32_MAX)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "DELTA_LENGTH_BYTE_ARRAY: value %zu has length %d", i,
                            (int32_t)lens[i]);
        if (lens[i] > len - p)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "DELTA_LENGTH_BYTE_ARRAY: value %zu of %u bytes at byte %zu, %zu "
                            "bytes left",
                            i, lens[i], p, len - p);
        out[i].ptr = buf + p;
        out[i].len = lens[i];
        p += lens[i];
    }
    *used = p;
    return 0;
}

/* DELTA_BYTE_ARRAY: value i is the first prefix[i] bytes of value i - 1
 * followed by its suffix. A value that is only a prefix points into the
 * previous one and a value without a prefix at its suffix in buf; the rest
 * are rebuilt in scratch, after the two length arrays. type_length > 0: every
 * value must be that long (FIXED_LEN_BYTE_ARRAY). */
static int delta_byte_array(const uint8_t *buf, size_t len, int32_t type_length,
                            dpp_pq_bytes_t *out, size_t n, dpp_pq_scratch_t *scratch, size_t *used,
                            char *err, size_t errlen)
{
    size_t lens_size = 2 * n * sizeof(uint32_t);
    if (scratch_reserve(scratch, lens_size) != 0)
        return -ENOMEM;
    size_t p = 0;
    int rc = dbp_decode("DELTA_BYTE_ARRAY prefix lengths", buf, len, &p, 0, scratch->buf, n, err,
                        errlen);
    if (rc == 0)
        rc = dbp_decode("DELTA_BYTE_ARRAY suffix lengths", buf, len, &p, 0,
                        (uint32_t *)scratch->buf + n, n, err, errlen);
    if (rc)
        return rc;
    const uint32_t *pre = (const uint32_t *)scratch->buf, *suf = pre + n;
    /* First pass: check the lengths and size the rebuilt values, so that
     * scratch grows once and the pointers into it stay put. */
    size_t data = p, suffixes = 0, rebuilt = 0;
    uint32_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        if (pre[i] > INT32_MAX || suf[i] > INT32_MAX)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "DELTA_BYTE_ARRAY: value %zu has prefix length %d, suffix length %d", i,
                            (int32_t)pre[i], (int32_t)suf[i]);
        if (pre[i] > prev)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "DELTA_BYTE_ARRAY: value %zu has a prefix of %u bytes, the value "
                            "before it %u",
                            i, pre[i], prev);
        if (suf[i] > len - data - suffixes)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "DELTA_BYTE_ARRAY: suffix %zu of %u bytes at byte %zu, %zu bytes left",
                            i, suf[i], data + suffixes, len - data - suffixes);
        suffixes += suf[i];
        uint32_t cur = pre[i] + suf[i];
        if (type_length > 0 && cur != (uint32_t)type_length)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "DELTA_BYTE_ARRAY: value %zu has %u bytes, FIXED_LEN_BYTE_ARRAY(%d)", i,
                            cur, type_length);
        if (pre[i] && suf[i]) {
            rebuilt += cur;
            if (rebuilt > DPP_PQ_MAX_PAGE)
                return dpp_errf(DPP_ECORRUPT, err, errlen,
                                "DELTA_BYTE_ARRAY: rebuilt values pass %u MiB at value %zu",
                                DPP_PQ_MAX_PAGE >> 20, i);
        }
        prev = cur;
    }
    if (scratch_reserve(scratch, lens_size + rebuilt) != 0)
        return -ENOMEM;
    pre = (const uint32_t *)scratch->buf;
    suf = pre + n;
    uint8_t *dst = scratch->buf + lens_size;
    const uint8_t *s = buf + data, *prev_ptr = s;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *v = s;
        if (pre[i] && suf[i]) {
            memcpy(dst, prev_ptr, pre[i]);
            memcpy(dst + pre[i], s, suf[i]);
            v = dst;
            dst += pre[i] + suf[i];
        } else if (pre[i]) {
            v = prev_ptr;
        }
        out[i].ptr = v;
        out[i].len = pre[i] + suf[i];
        prev_ptr = v;
        s += suf[i];
    }
    *used = data + suffixes;
    return 0;
}

/* ---- fixed-width values ---- */

static void plain_boolean(const uint8_t *buf, uint8_t *out, size_t n)
{
    size_t full = n / 8;
    for (size_t k = 0; k < full; k++) {
        uint8_t b = buf[k];
#pragma GCC unroll 8
        for (unsigned j = 0; j < 8; j++)
            out[8 * k + j] = b >> j & 1;
    }
    for (size_t i = 8 * full; i < n; i++)
        out[i] = buf[i / 8] >> (i % 8) & 1;
}

/* INT96: 8 bytes LE nanoseconds of the day, 4 bytes LE Julian day. */
static int plain_int96(const uint8_t *buf, int64_t *out, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *v = buf + 12 * i;
        int64_t nanos = (int64_t)dpp_load_le64(v), days = (int64_t)dpp_load_le32(v + 8);
        int64_t ns;
        if (__builtin_mul_overflow(days - JULIAN_EPOCH, NS_PER_DAY, &ns) ||
            __builtin_add_overflow(ns, nanos, &ns))
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "PLAIN INT96: value %zu at byte %zu (Julian day %lld, %lld ns) "
                            "overflows 64-bit nanoseconds since 1970",
                            i, 12 * i, (long long)days, (long long)nanos);
        out[i] = ns;
    }
    return 0;
}

static ALWAYS_INLINE void bss_k(const uint8_t *src, size_t n, size_t k, uint8_t *dst)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++)
            dst[i * k + j] = src[j * n + i];
}

/* BYTE_STREAM_SPLIT: byte j of value i is src[j * n + i]. */
static void byte_stream_split(const uint8_t *src, size_t n, size_t k, uint8_t *dst)
{
    if (k == 4)
        bss_k(src, n, 4, dst);
    else if (k == 8)
        bss_k(src, n, 8, dst);
    else
        bss_k(src, n, k, dst);
}

/* Whether enc applies to values of type (Encodings.md's table). */
static int applies(dpp_pq_encoding_t enc, dpp_pq_type_t type)
{
    if (type < DPP_PQ_BOOLEAN || type > DPP_PQ_FIXED_LEN_BYTE_ARRAY)
        return 0;
    switch (enc) {
    case DPP_PQ_PLAIN:
        return 1;
    case DPP_PQ_RLE:
        return type == DPP_PQ_BOOLEAN;
    case DPP_PQ_DELTA_BINARY_PACKED:
        return type == DPP_PQ_INT32 || type == DPP_PQ_INT64;
    case DPP_PQ_DELTA_LENGTH_BYTE_ARRAY:
        return type == DPP_PQ_BYTE_ARRAY;
    case DPP_PQ_DELTA_BYTE_ARRAY:
        return type == DPP_PQ_BYTE_ARRAY || type == DPP_PQ_FIXED_LEN_BYTE_ARRAY;
    case DPP_PQ_BYTE_STREAM_SPLIT:
        return type != DPP_PQ_BOOLEAN && type != DPP_PQ_INT96 && type != DPP_PQ_BYTE_ARRAY;
    default:
        return 0;
    }
}

/* Bytes of one PLAIN or BYTE_STREAM_SPLIT value of a fixed-width type. */
static size_t fixed_width(dpp_pq_type_t type, int32_t type_length)
{
    switch (type) {
    case DPP_PQ_INT32:
    case DPP_PQ_FLOAT:
        return 4;
    case DPP_PQ_INT64:
    case DPP_PQ_DOUBLE:
        return 8;
    case DPP_PQ_INT96:
        return 12;
    default:
        return (size_t)type_length;
    }
}

static int plain_decode(dpp_pq_type_t type, int32_t type_length, const uint8_t *buf, size_t len,
                        void *out, size_t n, size_t *used, char *err, size_t errlen)
{
    if (type == DPP_PQ_BYTE_ARRAY)
        return plain_byte_array(buf, len, out, n, used, err, errlen);
    if (type == DPP_PQ_BOOLEAN) {
        size_t bytes = packed_bytes(n, 1);
        if (bytes > len)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "PLAIN BOOLEAN: %zu values need %zu bytes at byte 0, %zu present", n,
                            bytes, len);
        plain_boolean(buf, out, n);
        *used = bytes;
        return 0;
    }
    size_t k = fixed_width(type, type_length);
    if (n > len / k)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "PLAIN %s: %zu values of %zu bytes at byte 0, %zu bytes present",
                        type_name(type), n, k, len);
    *used = n * k;
    if (type == DPP_PQ_INT96)
        return plain_int96(buf, out, n, err, errlen);
    if (type == DPP_PQ_FIXED_LEN_BYTE_ARRAY) {
        dpp_pq_bytes_t *o = out;
        for (size_t i = 0; i < n; i++) {
            o[i].ptr = buf + i * k;
            o[i].len = (uint32_t)k;
        }
        return 0;
    }
    memcpy(out, buf, n * k);
    return 0;
}

static int bss_decode(dpp_pq_type_t type, int32_t type_length, const uint8_t *buf, size_t len,
                      void *out, size_t n, dpp_pq_scratch_t *scratch, size_t *used, char *err,
                      size_t errlen)
{
    size_t k = fixed_width(type, type_length);
    /* The streams have no length of their own: they end with the page
     * (Encodings.md), so the page must hold exactly k streams of n. */
    if (n > len / k || n * k != len)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "BYTE_STREAM_SPLIT %s: %zu streams of %zu values in %zu bytes",
                        type_name(type), k, n, len);
    *used = len;
    if (type != DPP_PQ_FIXED_LEN_BYTE_ARRAY) {
        byte_stream_split(buf, n, k, out);
        return 0;
    }
    if (scratch_reserve(scratch, len) != 0)
        return -ENOMEM;
    byte_stream_split(buf, n, k, scratch->buf);
    dpp_pq_bytes_t *o = out;
    for (size_t i = 0; i < n; i++) {
        o[i].ptr = scratch->buf + i * k;
        o[i].len = (uint32_t)k;
    }
    return 0;
}

static int rle_boolean(const uint8_t *buf, size_t len, uint8_t *out, size_t n, size_t *used,
                       char *err, size_t errlen)
{
    if (len < 4)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "RLE BOOLEAN: the 4-byte length at byte 0 is cut off (%zu bytes)", len);
    uint32_t l = dpp_load_le32(buf);
    if (l > len - 4)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "RLE BOOLEAN: length %u at byte 0, %zu bytes follow", l, len - 4);
    hybrid_t h = {"RLE BOOLEAN", "value", buf, 4, 4 + (size_t)l, 1, 1};
    int rc = hybrid_decode(&h, out, OUT_U8, n, err, errlen);
    if (rc == 0)
        *used = 4 + (size_t)l;
    return rc;
}

int dpp_pq_values_decode(dpp_pq_encoding_t enc, dpp_pq_type_t type, int32_t type_length,
                         const uint8_t *buf, size_t len, void *out, size_t n,
                         dpp_pq_scratch_t *scratch, size_t *used, char *err, size_t errlen)
{
    if (!applies(enc, type))
        return dpp_errf(DPP_EINVAL, err, errlen, "%s does not apply to %s",
                        dpp_pq_encoding_name(enc), type_name(type));
    if (type == DPP_PQ_FIXED_LEN_BYTE_ARRAY && type_length < 1)
        return dpp_errf(DPP_EINVAL, err, errlen, "%s FIXED_LEN_BYTE_ARRAY of type_length %d",
                        dpp_pq_encoding_name(enc), type_length);
    int needs_scratch = enc == DPP_PQ_DELTA_LENGTH_BYTE_ARRAY || enc == DPP_PQ_DELTA_BYTE_ARRAY ||
                        (enc == DPP_PQ_BYTE_STREAM_SPLIT && type == DPP_PQ_FIXED_LEN_BYTE_ARRAY);
    if (needs_scratch && !scratch)
        return dpp_errf(DPP_EINVAL, err, errlen, "%s %s needs a scratch buffer",
                        dpp_pq_encoding_name(enc), type_name(type));
    size_t consumed = 0;
    int rc = 0;
    if (n > 0) {
        switch (enc) {
        case DPP_PQ_PLAIN:
            rc = plain_decode(type, type_length, buf, len, out, n, &consumed, err, errlen);
            break;
        case DPP_PQ_RLE:
            rc = rle_boolean(buf, len, out, n, &consumed, err, errlen);
            break;
        case DPP_PQ_DELTA_BINARY_PACKED:
            rc = dbp_decode("DELTA_BINARY_PACKED", buf, len, &consumed, type == DPP_PQ_INT64, out,
                            n, err, errlen);
            break;
        case DPP_PQ_DELTA_LENGTH_BYTE_ARRAY:
            rc = delta_length_byte_array(buf, len, out, n, scratch, &consumed, err, errlen);
            break;
        case DPP_PQ_DELTA_BYTE_ARRAY:
            rc = delta_byte_array(buf, len, type == DPP_PQ_FIXED_LEN_BYTE_ARRAY ? type_length : 0,
                                  out, n, scratch, &consumed, err, errlen);
            break;
        default: /* BYTE_STREAM_SPLIT; applies() let no other through */
            rc = bss_decode(type, type_length, buf, len, out, n, scratch, &consumed, err, errlen);
            break;
        }
    }
    if (rc == 0 && used)
        *used = consumed;
    return rc;
}
