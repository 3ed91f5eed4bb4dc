/* SPDX-License-Identifier: Apache-2.0 */
/* Reasons a record is rejected (reject.h). */
#include <inttypes.h>
#include <stdio.h>

#include "base/reject.h"

const char *const dpp_reject_names[] = {
#define NAME(name, code, words) #name,
    DPP_REJECT_REASONS(NAME)
#undef NAME
};

int dpp_reject_is(int err)
{
#define IS(name, code, words)                                                                      \
    if (err == (code))                                                                             \
        return 1;
    DPP_REJECT_REASONS(IS)
#undef IS
    return 0;
}

void dpp_rejects_count(dpp_rejects_t *r, int err, uint64_t n)
{
#define COUNT(name, code, words)                                                                   \
    if (err == (code)) {                                                                           \
        r->name += n;                                                                              \
        return;                                                                                    \
    }
    DPP_REJECT_REASONS(COUNT)
#undef COUNT
    r->type += n;
}

const char *dpp_reject_words(int err)
{
#define WORDS(name, code, words)                                                                   \
    if (err == (code))                                                                             \
        return words;
    DPP_REJECT_REASONS(WORDS)
#undef WORDS
    return dpp_strerror(err);
}

void dpp_rejects_values(const dpp_rejects_t *r, uint64_t *v)
{
    size_t i = 0;
#define VALUE(name, code, words) v[i++] = r->name;
    DPP_REJECT_REASONS(VALUE)
#undef VALUE
}

void dpp_rejects_add(dpp_rejects_t *to, const dpp_rejects_t *from)
{
#define ADD(name, code, words) to->name += from->name;
    DPP_REJECT_REASONS(ADD)
#undef ADD
}

uint64_t dpp_rejects_total(const dpp_rejects_t *r)
{
    uint64_t n = 0;
#define SUM(name, code, words) n += r->name;
    DPP_REJECT_REASONS(SUM)
#undef SUM
    return n;
}

void dpp_rejects_describe(const dpp_rejects_t *r, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
#define DESCRIBE(name, code, words)                                                                \
    if (r->name && at < len)                                                                       \
        at += (size_t)snprintf(buf + at, len - at, "%s%s %" PRIu64, at ? ", " : "", words, r->name);
    DPP_REJECT_REASONS(DESCRIBE)
#undef DESCRIBE
}
