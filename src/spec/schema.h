/* SPDX-License-Identifier: Apache-2.0 */
/* What a spec reads from records and what each value must be: the one list
 * that the master's checks at run time (master/checks.c) and dppctl's check
 * of a sample of the table (ctl/sample.c) both use, so that they agree on
 * what a record must hold and say it in the same words.
 * docs/spec.md#features-that-are-not-there. */
#ifndef DPP_SPEC_SCHEMA_H
#define DPP_SPEC_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "format/example_decode.h"
#include "spec/spec.h"

typedef enum dpp_role {
    DPP_ROLE_LABEL,
    DPP_ROLE_DENSE,
    DPP_ROLE_SPARSE,
    DPP_ROLE_WEIGHTS, /* a sparse feature's per-id weights */
    DPP_ROLE_REQUIRE, /* named by a require filter */
} dpp_role_t;

/* A name the spec reads from records. */
typedef struct dpp_spec_name {
    const char *name; /* points into the spec */
    dpp_role_t role;
    /* dense, sparse, weights: the feature (for weights: the sparse feature
     * whose ids they weigh); NULL for the label and a require filter */
    const dpp_feature_spec_t *feature;
    int optional; /* the feature's "optional": true; never for label and require */
} dpp_spec_name_t;

/* How many names dpp_spec_names() may write for sp (an upper bound). */
size_t dpp_spec_names_max(const dpp_spec_t *sp);

/* The names sp reads, into out[0..dpp_spec_names_max(sp)): the label
 * (when the spec has one), the dense features, each sparse feature then
 * its weights, the require filters' names. A name may come twice (a
 * require filter on the label). Returns how many. */
size_t dpp_spec_names(const dpp_spec_t *sp, dpp_spec_name_t *out);

/* "the label", "a dense feature", ... for messages. */
const char *dpp_role_words(dpp_role_t role);

/* The sentence for a name that no record had: `feature "X" (ROLE) is in
 * none of the RECORDS: fix its name in the spec (or mark it ...); did you
 * mean "Y"?`, the suggestion from names[0..nnames) (what the records hold;
 * listed, up to 64, when none is near). records is e.g. "3000 records of
 * epoch 0". Returns buf. */
const char *dpp_schema_absent_text(char *buf, size_t len, const dpp_spec_name_t *n,
                                   const char *records, const char *const *names, size_t nnames);

/* 1 when a record that lacks n is rejected (missing feature): the label, and
 * a dense feature whose chain does not start with fill_missing. */
int dpp_schema_absent_rejects(const dpp_spec_name_t *n);

/* What is wrong with the value of n in one record, as a phrase after "the
 * record " ("holds strings, and a dense feature takes numbers"), or NULL when
 * it is what the pipeline takes. ref is n's value (DPP_FEAT_ABSENT when the
 * record lacks it: then only weights can be wrong); nids is, for weights,
 * the number of ids of their sparse feature in the same record. The phrase
 * is written into buf. */
const char *dpp_schema_value_problem(const dpp_spec_name_t *n, const dpp_feat_ref_t *ref,
                                     size_t nids, char *buf, size_t len);

/* The number of ids a sparse feature's value gives (strings or integers;
 * 0 when absent or malformed). */
size_t dpp_schema_ids(const dpp_feat_ref_t *ref);

#endif
