/* SPDX-License-Identifier: Apache-2.0 */
/* Test-side reference for TFRecord framing: CRC32C one bit at a time,
 * straight from the definition (Castagnoli polynomial, reflected 0x82f63b78,
 * init and final xor ~0), and TFRecord's mask. Shares nothing with the code
 * under test; header-only so each suite stays one file. */
#ifndef DPP_TESTS_REF_TFRECORD_H
#define DPP_TESTS_REF_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t ref_crc(const uint8_t *p, size_t len)
{
    uint32_t c = 0xffffffffu;
    while (len--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
    }
    return ~c;
}

static inline uint32_t ref_mask(uint32_t c)
{
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* Writes the n low bytes of v little-endian. */
static inline void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#endif
