/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers every part uses. */
#ifndef DPP_BASE_UTIL_H
#define DPP_BASE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The struct that embeds `ptr` as `member` (h2o style). */
#define dpp_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Intrusive doubly linked lists of structs with `prev` and `next` members,
 * headed by a pointer (NULL: empty): push at the head, unlink anywhere. */
#define DPP_DLIST_PUSH(head, node)                                                                 \
    do {                                                                                           \
        (node)->prev = NULL;                                                                       \
        (node)->next = (head);                                                                     \
        if (head)                                                                                  \
            (head)->prev = (node);                                                                 \
        (head) = (node);                                                                           \
    } while (0)
#define DPP_DLIST_UNLINK(head, node)                                                               \
    do {                                                                                           \
        if ((node)->prev)                                                                          \
            (node)->prev->next = (node)->next;                                                     \
        else                                                                                       \
            (head) = (node)->next;                                                                 \
        if ((node)->next)                                                                          \
            (node)->next->prev = (node)->prev;                                                     \
    } while (0)

/* Monotonic clock in nanoseconds and milliseconds. */
static inline uint64_t dpp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int64_t dpp_now_ms(void)
{
    return (int64_t)(dpp_now_ns() / 1000000u);
}

/* What --version prints for prog: "dppctl 0.1.0 (commit 1a2b3c4d5e6f,
 * RelWithDebInfo)". */
#define DPP_VERSION_LINE(prog) prog " " DPP_VERSION " (commit " DPP_GIT_COMMIT ", " DPP_BUILD_TYPE ")"

/* Wall-clock time, milliseconds since 1970: for what outlives the process
 * (journaled times, what dppctl shows); intervals use dpp_now_ms(). */
static inline int64_t dpp_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Little-endian loads that work at any alignment on any host. */
static inline uint32_t dpp_load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t dpp_load_le64(const uint8_t *p)
{
    return (uint64_t)dpp_load_le32(p) | (uint64_t)dpp_load_le32(p + 4) << 32;
}

static inline void dpp_store_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static inline void dpp_store_le64(uint8_t *p, uint64_t v)
{
    dpp_store_le32(p, (uint32_t)v);
    dpp_store_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
