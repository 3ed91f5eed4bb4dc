/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 sequences (utf8.h). */
#include "base/utf8.h"

size_t dpp_utf8_seq(const uint8_t *t, size_t len, size_t *bad)
{
    uint8_t c = t[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        *bad = 1;
        return 0;
    }
    for (size_t k = 1; k <= need; k++) {
        if (k >= len || t[k] < lo || t[k] > hi) {
            *bad = k;
            return 0;
        }
        lo = 0x80;
        hi = 0xbf;
    }
    return need + 1;
}

