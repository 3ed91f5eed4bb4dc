/* SPDX-License-Identifier: Apache-2.0 */
/* Strict whole-number parsing for command-line options (see parse.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "parse.h"

int dpp_parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    if (s == NULL || *s == '\0')
        return -EINVAL;
    unsigned long long v = 0;
    int over = 0;
    /* every character is looked at, so that "99999999999999999999x" is
     * malformed rather than out of range */
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*p - '0');
        if (v > (ULLONG_MAX - d) / 10)
            over = 1;
        else
            v = v * 10 + d;
    }
    if (over || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int dpp_parse_option_uint(const char *prog, const char *opt, const char *arg,
                          unsigned long long min, unsigned long long max, const char *unit,
                          unsigned long long *out)
{
    unsigned long long v;
    int rc = dpp_parse_uint(arg, max, &v);
    if (rc == 0 && v < min)
        rc = -ERANGE;
    if (rc == -EINVAL)
        fprintf(stderr, "%s: --%s: \"%s\" is not a whole number%s%s\n", prog, opt, arg,
                unit ? " of " : "", unit ? unit : "");
    else if (rc)
        fprintf(stderr, "%s: --%s: \"%s\" is out of range: %llu to %llu%s%s\n", prog, opt, arg, min,
                max, unit ? " " : "", unit ? unit : "");
    else
        *out = v;
    return rc;
}
