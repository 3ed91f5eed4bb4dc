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

/* The hardware path runs three streams of STREAM bytes side by side: one
 * crc32 instruction has a latency of three cycles and a throughput of one,
 * so a single stream leaves two thirds of the unit idle. Joining them needs
 * "the CRC register after STREAM zero bytes" of the first two: shift_table
 * maps each byte of a register to its part of that (the map is linear). */
#define STREAM 128
static uint32_t shift_table[4][256];
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
    for (int k = 0; k < 4; k++)
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n << (8 * k);
            for (int i = 0; i < STREAM; i++) /* a zero byte: the register's low byte goes */
                c = (c >> 8) ^ slice_table[0][c & 0xff];
            shift_table[k][n] = c;
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
static inline uint32_t shift_stream(uint32_t c)
{
    return shift_table[0][c & 0xff] ^ shift_table[1][(c >> 8) & 0xff] ^
           shift_table[2][(c >> 16) & 0xff] ^ shift_table[3][c >> 24];
}

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
    while (len >= 3 * STREAM) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < STREAM; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + STREAM + i, 8);
            memcpy(&w2, p + 2 * STREAM + i, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        /* streams 1 and 2 began from a zero register: the CRC being linear,
         * the whole is each earlier register moved past what follows it */
        c = shift_stream(shift_stream((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * STREAM;
        len -= 3 * STREAM;
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
    pthread_once(&init_once, init_tables);
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
