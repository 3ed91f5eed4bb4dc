/* SPDX-License-Identifier: Apache-2.0 */
/* Well-formed UTF-8 (Unicode 3.9, table 3-7): what the JSON Lines reader
 * accepts in a string and where the tokenizer puts U+FFFD. */
#ifndef DPP_BASE_UTF8_H
#define DPP_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the well-formed sequence at t[0..len) (len >= 1), or 0 with
 * *bad the length of its maximal invalid subpart (what one U+FFFD stands
 * for under the WHATWG and Python "replace" rule). */
size_t dpp_utf8_seq(const uint8_t *t, size_t len, size_t *bad);

#endif
