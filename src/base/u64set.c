/* SPDX-License-Identifier: Apache-2.0 */
/* A set of 64-bit keys (u64set.h). */
#include <errno.h>
#include <stdlib.h>

#include "base/u64set.h"

/* The slot key k starts its probe at: the key's low bits after a multiply,
 * so that keys that are not well mixed still spread. */
static size_t home(const dpp_u64set_t *s, uint64_t k)
{
    return (size_t)((k * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (s->cap - 1);
}

static int grow(dpp_u64set_t *s)
{
    size_t cap = s->cap ? 2 * s->cap : 64;
    uint64_t *slots = calloc(cap, sizeof *slots), *old = s->slots;
    if (slots == NULL)
        return -ENOMEM;
    size_t ocap = s->cap;
    s->slots = slots;
    s->cap = cap;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i] == 0)
            continue;
        size_t j = home(s, old[i]);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = old[i];
    }
    free(old);
    return 0;
}

int dpp_u64set_has(const dpp_u64set_t *s, uint64_t key)
{
    if (key == 0 || s->cap == 0)
        return 0;
    for (size_t j = home(s, key); s->slots[j]; j = (j + 1) & (s->cap - 1))
        if (s->slots[j] == key)
            return 1;
    return 0;
}

int dpp_u64set_add(dpp_u64set_t *s, uint64_t key)
{
    if (key == 0 || dpp_u64set_has(s, key))
        return 0;
    return dpp_u64set_insert(s, key);
}

int dpp_u64set_insert(dpp_u64set_t *s, uint64_t key)
{
    if (key == 0)
        return 0;
    if (2 * (s->n + 1) > s->cap && grow(s) != 0)
        return -ENOMEM;
    size_t j = home(s, key);
    while (s->slots[j])
        j = (j + 1) & (s->cap - 1);
    s->slots[j] = key;
    s->n++;
    return 1;
}

int dpp_u64set_remove(dpp_u64set_t *s, uint64_t key)
{
    if (key == 0 || s->cap == 0)
        return 0;
    size_t mask = s->cap - 1, j = home(s, key);
    while (s->slots[j] && s->slots[j] != key)
        j = (j + 1) & mask;
    if (s->slots[j] == 0)
        return 0;
    /* backward shift: move up every key of the run after j that may sit in
     * the hole, so that no probe stops early at it */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; s->slots[k]; k = (k + 1) & mask) {
        size_t h = home(s, s->slots[k]);
        /* k's key may move to the hole when its home is not in (hole, k] */
        int between = hole <= k ? (h > hole && h <= k) : (h > hole || h <= k);
        if (!between) {
            s->slots[hole] = s->slots[k];
            hole = k;
        }
    }
    s->slots[hole] = 0;
    s->n--;
    return 1;
}

void dpp_u64set_clear(dpp_u64set_t *s)
{
    free(s->slots);
    *s = (dpp_u64set_t){0};
}
