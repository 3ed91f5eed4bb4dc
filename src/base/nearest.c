// SPDX-License-Identifier: Apache-2.0
// "Did you mean": edit distance between a misspelt name and the names that
// exist (optimal string alignment: a swap of neighbours is one edit).
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "base/nearest.h"

#define MAX_WORD 64 /* longer names are compared by their first 64 letters */

static size_t distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > MAX_WORD)
        n = MAX_WORD;
    if (m > MAX_WORD)
        m = MAX_WORD;
    /* three rows of the table: i - 2, i - 1, i */
    size_t r0[MAX_WORD + 1], r1[MAX_WORD + 1], r2[MAX_WORD + 1];
    size_t *pp = r0, *p = r1, *c = r2;
    for (size_t j = 0; j <= m; j++)
        p[j] = j;
    for (size_t i = 1; i <= n; i++) {
        c[0] = i;
        for (size_t j = 1; j <= m; j++) {
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            size_t v = p[j - 1] + !same;
            if (p[j] + 1 < v)
                v = p[j] + 1;
            if (c[j - 1] + 1 < v)
                v = c[j - 1] + 1;
            if (i > 1 && j > 1 &&
                tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) &&
                pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            c[j] = v;
        }
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    return p[m];
}

/* choice is word cut short or word is choice cut short ("label" and
 * "labels_v2", "log" and "log1p"), at least three letters in common. */
static int affix(const char *word, const char *choice)
{
    size_t w = strlen(word), c = strlen(choice);
    if (c >= 3 && c < w)
        return strncmp(word, choice, c) == 0 || strcmp(word + w - c, choice) == 0;
    if (w >= 3 && w < c)
        return strncmp(choice, word, w) == 0;
    return 0;
}

const char *dpp_nearest(const char *word, const char *const *choices, size_t n)
{
    size_t len = strlen(word);
    size_t limit = len <= 4 ? 1 : len <= 8 ? 2 : 3, best_d = limit + 1;
    const char *best = NULL;
    for (size_t i = 0; i < n && choices[i]; i++) {
        if (strcmp(word, choices[i]) == 0)
            return NULL; /* it is one: nothing to suggest */
        size_t d = distance(word, choices[i]);
        if (d < best_d || (d == best_d && best == NULL)) {
            best_d = d;
            best = choices[i];
        }
    }
    if (best && best_d <= limit)
        return best;
    for (size_t i = 0; i < n && choices[i]; i++)
        if (affix(word, choices[i]))
            return choices[i];
    return NULL;
}

const char *dpp_suggest(char *buf, size_t len, const char *word, const char *const *choices,
                        size_t n, const char *label, size_t max_listed)
{
    size_t count = 0;
    while (count < n && choices[count])
        count++;
    const char *near = dpp_nearest(word, choices, count);
    size_t at = 0;
    buf[0] = '\0';
    if (near)
        at += (size_t)snprintf(buf, len, "; did you mean \"%s\"?", near);
    if (count == 0 || count > max_listed || at >= len)
        return buf;
    at += (size_t)snprintf(buf + at, len - at, " (%s: ", label);
    for (size_t i = 0; i < count && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", choices[i]);
    if (at < len)
        snprintf(buf + at, len - at, ")");
    return buf;
}
