/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C (Castagnoli) and TFRecord's masking of it. */
#ifndef DPP_BASE_CRC32C_H
#define DPP_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of buf, continuing from crc (start with 0). Uses the SSE4.2 crc32
 * instruction when the CPU has it, a table otherwise; both give the same
 * value. */
uint32_t dpp_crc32c(uint32_t crc, const void *buf, size_t len);

/* The two implementations behind dpp_crc32c(), same contract, exposed so that
 * tests and benchmarks can compare them. dpp__crc32c_hw() may only be called
 * when dpp__crc32c_hw_available() returns nonzero (x86-64 with SSE4.2). */
uint32_t dpp__crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t dpp__crc32c_hw(uint32_t crc, const void *buf, size_t len);
int dpp__crc32c_hw_available(void);

/* TFRecord mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8 (record_writer.h). */
static inline uint32_t dpp_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static inline uint32_t dpp_crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

#endif
