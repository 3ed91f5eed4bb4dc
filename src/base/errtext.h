/* SPDX-License-Identifier: Apache-2.0 */
/* An error's sentence for a person, written into the caller's buffer beside
 * the error code that travels on (the STYLE rule: codes, not strings, are
 * the errors; the text explains them). */
#ifndef DPP_BASE_ERRTEXT_H
#define DPP_BASE_ERRTEXT_H

#include <stddef.h>

/* Formats the text into buf (len bytes, always NUL-terminated when len > 0;
 * nothing written when len is 0) and returns code, so that a failure reads
 * `return dpp_errf(DPP_EINVAL, err, errlen, "line %d: ...", n);`. */
int dpp_errf(int code, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
