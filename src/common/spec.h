/* SPDX-License-Identifier: Apache-2.0 */
/* Session spec v1: parsing, validation and the normalised form that travels
 * to workers. Reference: docs/spec.md. */
#ifndef DPP_COMMON_SPEC_H
#define DPP_COMMON_SPEC_H

#include <stddef.h>
#include <stdint.h>

#define DPP_SPEC_ERRLEN 512

typedef enum dpp_op_kind {
    DPP_OP_FILL_MISSING, /* dense: absent -> value */
    DPP_OP_CLAMP,        /* dense: min and/or max */
    DPP_OP_LOG1P,        /* dense: log1p(x), computed in double */
    DPP_OP_MODULO,       /* sparse: floor-mod n (result in [0, n)) */
    DPP_OP_TRUNCATE,     /* sparse: keep the first max_len ids */
} dpp_op_kind_t;

typedef struct dpp_transform {
    dpp_op_kind_t op;
    double value;          /* fill_missing */
    double min, max;       /* clamp; -inf / +inf when not given */
    int64_t n;             /* modulo, > 0 */
    uint32_t max_len;      /* truncate */
} dpp_transform_t;

typedef struct dpp_feature_spec {
    char *name;
    unsigned dim; /* dense: values per row (1 in spec v1); sparse: 0 */
    dpp_transform_t *ops;
    unsigned nops;
} dpp_feature_spec_t;

typedef struct dpp_spec {
    char *table;        /* relative to a data root */
    char **partitions;  /* folder names such as "ds=2026-01-01" */
    unsigned npartitions; /* 0: every partition of the table */
    unsigned batch_size;
    unsigned epochs;      /* default 1 */
    unsigned consumers;   /* trainer ranks, default 1 */
    dpp_feature_spec_t *dense;
    unsigned ndense;
    dpp_feature_spec_t *sparse;
    unsigned nsparse;
    char *label;
} dpp_spec_t;

/* Parses and validates a spec (JSON text of len bytes). On failure returns
 * DPP_ESPEC and writes "<json path>: <problem>" into err (always
 * NUL-terminated), e.g. `features.dense[3].transforms[0].op: unknown op
 * "logp"`; *out is then left zeroed. On success the caller owns *out and
 * releases it with dpp_spec_close(). Returns -ENOMEM on allocation failure.
 * Checks structure only; whether the table exists is the master's job. */
int dpp_spec_parse(const char *json, size_t len, dpp_spec_t *out, char *err, size_t errlen);

/* Frees what a parsed spec owns; zeroes *spec. Safe on a zeroed spec. */
void dpp_spec_close(dpp_spec_t *spec);

/* Serialises a spec in normalised form (every default written out, keys in a
 * fixed order) so that parsing the result gives an equal spec. Returns a
 * malloc'd NUL-terminated string the caller frees, or NULL on -ENOMEM. */
char *dpp_spec_to_json(const dpp_spec_t *spec);

#endif
