/* SPDX-License-Identifier: Apache-2.0 */
/* "Did you mean": the name nearest to a misspelt one, for error messages
 * (unknown keys, ops, tables, partitions, features, commands). */
#ifndef DPP_BASE_NEAREST_H
#define DPP_BASE_NEAREST_H

#include <stddef.h>

/* The choice nearest to word by edit distance (insertions, deletions,
 * substitutions and swaps of neighbours, upper and lower case alike), when
 * it is near enough to be a slip: at most one edit for words of up to four
 * letters, two up to eight, three beyond; a choice that word starts or
 * ends with ("label" for "labels_v2"), or that starts with word ("log1p"
 * for "log"), counts too. NULL when none is near.
 * choices[0..n) (n may be SIZE_MAX for a NULL-terminated list). */
const char *dpp_nearest(const char *word, const char *const *choices, size_t n);

/* Writes into buf ("; did you mean \"x\"?" when one is near, then, when
 * there are at most max_listed choices, " (LABEL: a, b, c)") the words a
 * person needs after "unknown ..."; "" when there is nothing to say.
 * Returns buf. */
const char *dpp_suggest(char *buf, size_t len, const char *word, const char *const *choices,
                        size_t n, const char *label, size_t max_listed);

#endif
