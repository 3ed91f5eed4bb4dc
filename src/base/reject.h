/* SPDX-License-Identifier: Apache-2.0 */
/* Why a record is turned away: the one list of reasons. The worker counts
 * them, the master sums them, the wire carries one field per reason (proto
 * Rejects, same names), /metrics labels them (reason="NAME"), and dppctl and
 * the logs print them. A new reason is a new line here and a field in
 * proto/dpp.proto's Rejects. */
#ifndef DPP_BASE_REJECT_H
#define DPP_BASE_REJECT_H

#include <stddef.h>
#include <stdint.h>

#include "dpp/error.h"

/* X(name, error code, words for a log line or an error message) */
#define DPP_REJECT_REASONS(X)                                                                      \
    X(corrupt, DPP_ECORRUPT, "corrupted record")                                                   \
    X(truncated, DPP_ETRUNCATED, "truncated record")                                               \
    X(too_big, DPP_ETOOBIG, "record longer than the worker's limit")                               \
    X(example, DPP_EEXAMPLE, "unparsable tf.Example")                                              \
    X(missing, DPP_EMISSING, "missing feature")                                                    \
    X(type, DPP_ETYPE, "feature has the wrong type or length")

/* Records rejected, by reason. Zeroed: none. */
typedef struct dpp_rejects {
#define DPP_REJECT_FIELD(name, code, words) uint64_t name;
    DPP_REJECT_REASONS(DPP_REJECT_FIELD)
#undef DPP_REJECT_FIELD
} dpp_rejects_t;

/* How many reasons there are, and their names in list order. */
#define DPP_REJECT_NREASONS (sizeof(dpp_rejects_t) / sizeof(uint64_t))
extern const char *const dpp_reject_names[];

/* 1 when err is the code of a reason: a record error, counted and handled
 * per on_corrupt; 0 for anything else (which fails the split). */
int dpp_reject_is(int err);

/* Counts n records rejected for err (a code that is no reason counts as
 * "type"). */
void dpp_rejects_count(dpp_rejects_t *r, int err, uint64_t n);

/* The words for err: the reason's words, else dpp_strerror(err). */
const char *dpp_reject_words(int err);

/* r's counts in list order, into v[0..DPP_REJECT_NREASONS). */
void dpp_rejects_values(const dpp_rejects_t *r, uint64_t *v);

void dpp_rejects_add(dpp_rejects_t *to, const dpp_rejects_t *from);
uint64_t dpp_rejects_total(const dpp_rejects_t *r);

/* "missing feature 100000, corrupted record 3": the reasons with counts,
 * into buf ("" when none). */
void dpp_rejects_describe(const dpp_rejects_t *r, char *buf, size_t len);

#endif
