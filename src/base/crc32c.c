/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 crc32
 * instruction where the CPU has it, slice-by-8 tables otherwise. */
#include <pthread.h>
#include <string.h>

#include "base/crc32c.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_CRC 1
#include <nmmintrin.h>
#else
#define HAVE_X86_CRC 0
#endif

#define CRC32C_POLY 0x82f63b78u

static uint32_t slice_table[8][256];
static int use_hw;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Table k maps a byte to its CRC contribution k bytes further back, so eight
 * lookups fold eight input bytes at once. */
static void init_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int bit = 0; bit < 8; bit++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        slice_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++) {
            uint32_t prev = slice_table[k - 1][n];
            slice_table[k][n] = (prev >> 8) ^ slice_table[0][prev & 0xff];
        }
#if HAVE_X86_CRC
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t dpp__crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint32_t c = ~crc;

    pthread_once(&init_once, init_tables);
    while (len >= 8) {
        uint32_t lo = c ^ load_le32(p);
        uint32_t hi = load_le32(p + 4);
        c = slice_table[7][lo & 0xff] ^ slice_table[6][(lo >> 8) & 0xff] ^
            slice_table[5][(lo >> 16) & 0xff] ^ slice_table[4][lo >> 24] ^
            slice_table[3][hi & 0xff] ^ slice_table[2][(hi >> 8) & 0xff] ^
            slice_table[1][(hi >> 16) & 0xff] ^ slice_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ slice_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if HAVE_X86_CRC
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                               size_t len)
{
    uint64_t c = ~crc;

    /* Align first: 8-byte loads that cross cache lines cost more than the
     * few single-byte steps. */
    while (len > 0 && ((uintptr_t)p & 7) != 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

int dpp__crc32c_hw_available(void)
{
    pthread_once(&init_once, init_tables);
    return use_hw;
}

uint32_t dpp__crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
#if HAVE_X86_CRC
    return crc32c_sse42(crc, buf, len);
#else
    return dpp__crc32c_sw(crc, buf, len);
#endif
}

uint32_t dpp_crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&init_once, init_tables);
#if HAVE_X86_CRC
    if (use_hw)
        return crc32c_sse42(crc, buf, len);
#endif
    return dpp__crc32c_sw(crc, buf, len);
}
