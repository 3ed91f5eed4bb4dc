/* SPDX-License-Identifier: Apache-2.0 */
/* Readers of protobuf varints for the tf.Example decoder, in a header so
 * that the worker's hot loop inlines the packed-run decoder too
 * (dpp_feat_unpack_int64s). dpp_pb_read_varint() and its two halves
 * advance *pp and return 0, or DPP_EEXAMPLE, reading nothing outside
 * [*pp, end); dpp_pb_unpack_varints() reads nothing outside [q, qend). */
#ifndef DPP_FORMAT_VARINT_H
#define DPP_FORMAT_VARINT_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dpp/error.h"

static inline uint32_t dpp_pb_load16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static inline uint32_t dpp_pb_load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t dpp_pb_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline int dpp_pb_varint_slow(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;

    /* At most 10 bytes; bits past 64 in the 10th byte are dropped, as every
     * protobuf parser does. */
    for (unsigned shift = 0; shift <= 63; shift += 7) {
        if (p == end)
            return DPP_EEXAMPLE;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = v;
            *pp = p;
            return 0;
        }
    }
    return DPP_EEXAMPLE;
}

/* With 10 bytes in reach no byte needs its own bounds check. */
static inline int dpp_pb_varint_unchecked(const uint8_t **pp, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = *p++ & 0x7f;

    for (unsigned shift = 7; shift <= 63; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = v;
            *pp = p;
            return 0;
        }
    }
    return DPP_EEXAMPLE;
}

static inline int dpp_pb_read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {
        *out = *p;
        *pp = p + 1;
        return 0;
    }
    if (end - p >= 10)
        return dpp_pb_varint_unchecked(pp, out);
    return dpp_pb_varint_slow(pp, end, out);
}

/* One varint of at most 8 bytes from the 8 bytes x (little-endian, read
 * from the varint's first byte): its value, and its length in *nbytes, or 0
 * when none of the 8 bytes ends it. No loop over bytes: ids are 5-7 byte
 * varints of varying length, and a byte loop's exit was mispredicted about
 * once per id. */
static inline uint64_t dpp_pb_varint8(uint64_t x, unsigned *nbytes)
{
    uint64_t stop = ~x & 0x8080808080808080u; /* bytes without the continuation bit */
    if (stop == 0) {
        *nbytes = 0;
        return 0;
    }
    *nbytes = ((unsigned)__builtin_ctzll(stop) >> 3) + 1;
    /* the bytes up to the first stop, 7 payload bits each, then packed:
     * 7-bit groups pairwise into 14 bits, those into 28, those into 56 */
    uint64_t v = x & (stop ^ (stop - 1)) & 0x7f7f7f7f7f7f7f7fu;
    v = (v & 0x007f007f007f007fu) | (v & 0x7f007f007f007f00u) >> 1;
    v = (v & 0x00003fff00003fffu) | (v & 0x3fff00003fff0000u) >> 2;
    v = (v & 0x000000000fffffffu) | (v & 0x0fffffff00000000u) >> 4;
    return v;
}

/* Decodes a packed varint run into out (at most cap - *w more values) and
 * counts every value into *total. Inlined into its callers: a Criteo row's
 * run holds one or two ids, and a call's entry and exit cost about as much
 * as decoding one. */
static inline __attribute__((always_inline)) int dpp_pb_unpack_varints(const uint8_t *q,
                                                                       const uint8_t *qend,
                                                                       int64_t *out, size_t cap,
                                                                       size_t *w, size_t *total)
{
    const uint8_t *q0 = q;
    size_t i = *w, t = *total;
    /* While 8 bytes are left, each varint is read from the 8 bytes at q,
     * with no bound to check per id (nor a branch for one-byte ones). */
    while (qend - q >= 8) {
        unsigned nb;
        uint64_t v = dpp_pb_varint8(dpp_pb_load64(q), &nb);
        if (nb != 0)
            q += nb;
        else if (dpp_pb_read_varint(&q, qend, &v) != 0) /* 9 or 10 bytes, or cut short */
            return DPP_EEXAMPLE;
        if (i < cap)
            out[i++] = (int64_t)v;
        t++;
    }
    if (q == qend)
        goto done;
    /* The last bytes, under 8, in one word: the run's last 8 shifted down,
     * or for a run under 8 bytes two overlapping loads (a memcpy to the
     * stack cost a failed store forwarding per id). Zero bytes above the
     * end end any varint, so one cut short reads as longer than what is
     * left. */
    size_t avail = (size_t)(qend - q);
    uint64_t x;
    if (qend - q0 >= 8)
        x = dpp_pb_load64(qend - 8) >> (8 * (8 - avail));
    else if (avail >= 4)
        x = dpp_pb_load32(q) | (uint64_t)dpp_pb_load32(qend - 4) << (8 * (avail - 4));
    else if (avail >= 2)
        x = dpp_pb_load16(q) | (uint64_t)dpp_pb_load16(qend - 2) << (8 * (avail - 2));
    else
        x = *q;
    while (avail > 0) {
        unsigned nb;
        uint64_t v = dpp_pb_varint8(x, &nb);
        if (nb == 0 || nb > avail)
            return DPP_EEXAMPLE; /* cut short by the run's end */
        x >>= 8 * nb;            /* nb <= avail < 8 */
        avail -= nb;
        if (i < cap)
            out[i++] = (int64_t)v;
        t++;
    }
done:
    *w = i;
    *total = t;
    return 0;
}

#endif
