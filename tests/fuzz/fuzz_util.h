/* SPDX-License-Identifier: Apache-2.0 */
/* Shared bits of the libFuzzer targets: a check that aborts with a message
 * (libFuzzer then saves the input as a crash file) and a reader that loads
 * every byte of a range, so ASan sees any out-of-bounds pointer a parser
 * hands back. */
#ifndef DPP_TESTS_FUZZ_UTIL_H
#define DPP_TESTS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Where fuzz_touch() leaves its result, so the reads cannot be dropped. */
static volatile uint8_t fuzz_sink;

/* Reads p[0..n) one byte at a time. */
static inline void fuzz_touch(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc ^= b[i];
    fuzz_sink = acc;
}

#endif
