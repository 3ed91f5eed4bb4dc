/* SPDX-License-Identifier: Apache-2.0 */
/* Strict parsing of numbers given on a command line: a value that is not a
 * plain whole number, or that is out of range, is refused rather than read
 * as 0 or as its leading digits (what strtoul would do). */
#ifndef DPP_BASE_PARSE_H
#define DPP_BASE_PARSE_H

/* Parses s as a whole decimal number no greater than max: ASCII digits only
 * (no sign, blank, prefix or suffix; not empty; leading zeros are fine).
 * Returns 0 with *out set; -EINVAL when s is not such a number; -ERANGE
 * when it is one greater than max. *out is left alone on an error. */
int dpp_parse_uint(const char *s, unsigned long long max, unsigned long long *out);

/* Parses the value arg of option --opt of program prog as dpp_parse_uint()
 * does, from min to max units (unit: "milliseconds", "MiB"... in the
 * message; NULL for a count). On an error prints one line on stderr and
 * returns it:
 *   PROG: --OPT: "ARG" is not a whole number of UNIT
 *   PROG: --OPT: "ARG" is out of range: MIN to MAX UNIT */
int dpp_parse_option_uint(const char *prog, const char *opt, const char *arg,
                          unsigned long long min, unsigned long long max, const char *unit,
                          unsigned long long *out);

#endif
