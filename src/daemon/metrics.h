/* SPDX-License-Identifier: Apache-2.0 */
/* Renders metrics in the Prometheus text exposition format 0.0.4 into a
 * bounded, growable buffer. The writer checks what a scrape needs to parse:
 * valid names, HELP/TYPE once and before a family's samples, contiguous
 * families, cumulative histograms. A failure (bad input, out of memory, size
 * limit) is recorded once and turns every later call into a no-op, so a
 * renderer writes everything and checks once, at dpp_metrics_text(). */
#ifndef DPP_DAEMON_METRICS_H
#define DPP_DAEMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/reject.h"

/* The Content-Type of a scrape response (text format 0.0.4). */
#define DPP_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Default cap on the rendered text; past it the render fails with -ENOBUFS. */
#define DPP_METRICS_MAX_BYTES (16u * 1024 * 1024)

/* Longest metric name accepted (without the _bucket/_sum/_count suffixes). */
#define DPP_METRICS_MAX_NAME 127

typedef enum dpp_metric_type {
    DPP_METRIC_COUNTER,
    DPP_METRIC_GAUGE,
    DPP_METRIC_HISTOGRAM,
} dpp_metric_type_t;

/* One label: name matches [a-zA-Z_][a-zA-Z0-9_]* and does not start with
 * "__"; value is any NUL-terminated UTF-8 text (escaped on output). */
typedef struct dpp_metrics_label {
    const char *name;
    const char *value;
} dpp_metrics_label_t;

/* Caller storage; the fields are private to metrics.c. */
typedef struct dpp_metrics {
    char *buf;
    size_t len, cap;
    size_t max_bytes; /* limit on len; dpp_metrics_init() sets the default */
    int error;        /* first failure, 0 while none */
    int has_family;
    dpp_metric_type_t type;                /* of the current family */
    char family[DPP_METRICS_MAX_NAME + 1]; /* name of the current family */
} dpp_metrics_t;

/* Prepares an empty buffer (no allocation yet). Pair with dpp_metrics_close().
 * The caller may lower m->max_bytes afterwards. */
void dpp_metrics_init(dpp_metrics_t *m);

/* Frees the buffer; m may be initialised again. */
void dpp_metrics_close(dpp_metrics_t *m);

/* Empties the text and clears a recorded error, keeping the memory, to render
 * the next scrape. Pointers from dpp_metrics_text() become invalid. */
void dpp_metrics_reset(dpp_metrics_t *m);

/* Starts a family: writes `# HELP name help` (unless help is NULL; backslash
 * and newline escaped) and `# TYPE name type`. Samples that follow must use
 * this name (histograms: dpp_metrics_histogram() with this name). A name
 * must match [a-zA-Z_:][a-zA-Z0-9_:]* and appear once per render.
 * Returns 0 or the recorded error: DPP_EINVAL for a rule broken, -ENOMEM,
 * -ENOBUFS past max_bytes. The same holds for the writers below. */
int dpp_metrics_family(dpp_metrics_t *m, const char *name, dpp_metric_type_t type,
                       const char *help);

/* Writes `name{labels} value` for the current counter or gauge family.
 * Doubles are written in the shortest form that parses back to the same
 * bits (integral values as integers), and +Inf, -Inf, NaN as Prometheus
 * spells them. labels may be NULL when nlabels is 0. */
int dpp_metrics_sample(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *labels,
                       size_t nlabels, double value);

/* The same for an integer value, written exactly (a double is exact only up
 * to 2^53). */
int dpp_metrics_sample_u64(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *labels,
                           size_t nlabels, uint64_t value);

/* Writes one histogram of the current histogram family: name_bucket{...,le="b"}
 * for each of the nbuckets finite, strictly increasing upper bounds, with
 * counts[i] the cumulative number of observations <= bounds[i]
 * (non-decreasing), then le="+Inf" with count, then name_sum and name_count.
 * count must be >= counts[nbuckets-1]. labels must not contain "le". */
int dpp_metrics_histogram(dpp_metrics_t *m, const char *name, const dpp_metrics_label_t *labels,
                          size_t nlabels, const double *bounds, const uint64_t *counts,
                          size_t nbuckets, double sum, uint64_t count);

/* A family of one sample without labels (counter or gauge). */
int dpp_metrics_counter(dpp_metrics_t *m, const char *name, const char *help, uint64_t v);
int dpp_metrics_gauge(dpp_metrics_t *m, const char *name, const char *help, double v);

/* dpp_build_info{version="...",role} 1, the family every daemon serves. */
int dpp_metrics_build_info(dpp_metrics_t *m, const char *role);

/* The process families Prometheus' client libraries export under these
 * names, so that dashboards and alerts written for them work:
 * process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds,
 * process_start_time_seconds (from /proc; a value it cannot read is left
 * out). */
int dpp_metrics_process(dpp_metrics_t *m);

/* The records-rejected counter family, one sample per reason of
 * base/reject.h (label reason="NAME"). */
int dpp_metrics_rejects(dpp_metrics_t *m, const char *help, const dpp_rejects_t *r);

/* A point in a render to come back to: a renderer marks before an optional
 * part of the page and, when that part failed (say with -ENOBUFS, past
 * max_bytes), rewinds and goes on without it. */
typedef struct dpp_metrics_mark {
    size_t len;
    int error, has_family;
    dpp_metric_type_t type;
    char family[DPP_METRICS_MAX_NAME + 1];
} dpp_metrics_mark_t;

/* Records in *mark where m stands now. */
void dpp_metrics_mark(const dpp_metrics_t *m, dpp_metrics_mark_t *mark);

/* Puts m back where mark was taken: drops the text written since (families
 * declared since may be declared again) and an error recorded since. mark
 * must come from this render: no reset or close in between. */
void dpp_metrics_rewind(dpp_metrics_t *m, const dpp_metrics_mark_t *mark);

/* The rendered text and its length (every line ends with '\n'), or NULL
 * after a failure (see dpp_metrics_error()). The text is NUL-terminated and
 * owned by m: valid until the next write, reset or close. */
const char *dpp_metrics_text(const dpp_metrics_t *m, size_t *len);

/* The recorded failure, or 0. */
int dpp_metrics_error(const dpp_metrics_t *m);

#endif
