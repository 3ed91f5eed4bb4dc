/* SPDX-License-Identifier: Apache-2.0 */
/* The names a spec reads and the values it takes (schema.h). The value
 * rules mirror what the worker's pipeline accepts (worker/pipeline.c,
 * add_record): change both together. */
#include <stdio.h>
#include <string.h>

#include "base/nearest.h"
#include "spec/schema.h"
#include "spec/transform.h"

size_t dpp_spec_names_max(const dpp_spec_t *sp)
{
    return 1 + (size_t)sp->ndense + 2 * (size_t)sp->nsparse + sp->nfilters;
}

size_t dpp_spec_names(const dpp_spec_t *sp, dpp_spec_name_t *out)
{
    size_t n = 0;
    if (sp->label)
        out[n++] = (dpp_spec_name_t){.name = sp->label, .role = DPP_ROLE_LABEL};
    for (unsigned i = 0; i < sp->ndense; i++)
        out[n++] = (dpp_spec_name_t){.name = sp->dense[i].name,
                                     .role = DPP_ROLE_DENSE,
                                     .feature = &sp->dense[i],
                                     .optional = sp->dense[i].optional};
    for (unsigned k = 0; k < sp->nsparse; k++) {
        const dpp_feature_spec_t *f = &sp->sparse[k];
        out[n++] = (dpp_spec_name_t){
            .name = f->name, .role = DPP_ROLE_SPARSE, .feature = f, .optional = f->optional};
        if (f->weights)
            out[n++] = (dpp_spec_name_t){
                .name = f->weights, .role = DPP_ROLE_WEIGHTS, .feature = f, .optional = f->optional};
    }
    for (unsigned i = 0; i < sp->nfilters; i++)
        if (sp->filters[i].kind == DPP_FILTER_REQUIRE)
            out[n++] = (dpp_spec_name_t){.name = sp->filters[i].feature, .role = DPP_ROLE_REQUIRE};
    return n;
}

const char *dpp_role_words(dpp_role_t role)
{
    switch (role) {
    case DPP_ROLE_LABEL:
        return "the label";
    case DPP_ROLE_DENSE:
        return "a dense feature";
    case DPP_ROLE_SPARSE:
        return "a sparse feature";
    case DPP_ROLE_WEIGHTS:
        return "a sparse feature's weights";
    case DPP_ROLE_REQUIRE:
        return "named by a require filter";
    }
    return "a feature";
}

const char *dpp_schema_absent_text(char *buf, size_t len, const dpp_spec_name_t *n,
                                   const char *records, const char *const *names, size_t nnames)
{
    const char *or_optional =
        n->role == DPP_ROLE_LABEL || n->role == DPP_ROLE_REQUIRE ? ""
        : n->role == DPP_ROLE_DENSE
            ? " (or, if it may be missing from every record, mark it \"optional\": true and give "
              "it a fill_missing transform)"
            : " (or mark it \"optional\": true if it may be missing from every record)";
    /* the list only when nothing is near: 41 names hide one suggestion */
    size_t listed = dpp_nearest(n->name, names, nnames) ? 0 : 64;
    char hint[1024];
    snprintf(buf, len, "feature \"%s\" (%s) is in none of the %s: fix its name in the spec%s%s",
             n->name, dpp_role_words(n->role), records, or_optional,
             dpp_suggest(hint, sizeof hint, n->name, names, nnames, "the records hold", listed));
    return buf;
}

int dpp_schema_absent_rejects(const dpp_spec_name_t *n)
{
    if (n->role == DPP_ROLE_LABEL)
        return 1;
    if (n->role != DPP_ROLE_DENSE)
        return 0;
    const dpp_feature_spec_t *f = n->feature;
    return f->nops == 0 || f->ops[0].op != DPP_OP_FILL_MISSING;
}

static const char *kind_words(dpp_feat_kind_t kind)
{
    switch (kind) {
    case DPP_FEAT_BYTES:
        return "strings";
    case DPP_FEAT_FLOAT:
        return "floats";
    case DPP_FEAT_INT64:
        return "integers";
    case DPP_FEAT_ABSENT:
        break;
    }
    return "nothing";
}

/* label and dense: dim numbers */
static const char *numbers_problem(const dpp_spec_name_t *n, const dpp_feat_ref_t *ref,
                                   char *buf, size_t len)
{
    unsigned dim = n->role == DPP_ROLE_LABEL ? 1 : n->feature->dim;
    if (ref->kind == DPP_FEAT_BYTES) {
        snprintf(buf, len,
                 "holds strings, and %s takes numbers (floats or integers)%s",
                 dpp_role_words(n->role),
                 n->role == DPP_ROLE_DENSE
                     ? ": make it a sparse feature whose transforms start with \"hash\" or \"vocab\""
                     : "");
        return buf;
    }
    size_t count;
    if (dpp_feat_count(ref, ref->kind, &count) != 0) {
        snprintf(buf, len, "holds a damaged list of %s", kind_words(ref->kind));
        return buf;
    }
    if (count != dim) {
        snprintf(buf, len, "holds %zu values where %s %u", count,
                 n->role == DPP_ROLE_LABEL ? "a label has" : "the spec's dim is", dim);
        return buf;
    }
    return NULL;
}

static const char *sparse_problem(const dpp_spec_name_t *n, const dpp_feat_ref_t *ref, char *buf,
                                  size_t len)
{
    const dpp_feature_spec_t *f = n->feature;
    int strings = dpp_transform_takes_strings(f->ops, f->nops);
    if (ref->kind == DPP_FEAT_BYTES && !strings) {
        snprintf(buf, len,
                 "holds strings: start its transforms with a \"hash\" or \"vocab\" op to turn "
                 "them into ids");
        return buf;
    }
    if (ref->kind == DPP_FEAT_FLOAT) {
        snprintf(buf, len,
                 "holds floats, and a sparse feature takes integer ids (or strings, through a "
                 "\"hash\" or \"vocab\" op)");
        return buf;
    }
    if (ref->kind == DPP_FEAT_INT64 && f->nops > 0 && f->ops[0].op == DPP_OP_VOCAB) {
        snprintf(buf, len,
                 "holds integers, and a vocab op maps strings: use \"hash\" or \"modulo\" for ids");
        return buf;
    }
    size_t count;
    if (dpp_feat_count(ref, ref->kind, &count) != 0) {
        snprintf(buf, len, "holds a damaged list of %s", kind_words(ref->kind));
        return buf;
    }
    return NULL;
}

size_t dpp_schema_ids(const dpp_feat_ref_t *ref)
{
    size_t count = 0;
    if (ref->kind == DPP_FEAT_BYTES || ref->kind == DPP_FEAT_INT64)
        dpp_feat_count(ref, ref->kind, &count);
    return count;
}

const char *dpp_schema_value_problem(const dpp_spec_name_t *n, const dpp_feat_ref_t *ref,
                                     size_t nids, char *buf, size_t len)
{
    if (n->role == DPP_ROLE_WEIGHTS) {
        size_t count = 0;
        if (ref->kind != DPP_FEAT_ABSENT && ref->kind != DPP_FEAT_FLOAT) {
            snprintf(buf, len, "holds %s, and weights are floats", kind_words(ref->kind));
            return buf;
        }
        if (ref->kind == DPP_FEAT_FLOAT && dpp_feat_count(ref, ref->kind, &count) != 0) {
            snprintf(buf, len, "holds a damaged list of floats");
            return buf;
        }
        if (count != nids) {
            snprintf(buf, len, "holds %zu weights for the %zu ids of \"%s\"", count, nids,
                     n->feature->name);
            return buf;
        }
        return NULL;
    }
    if (ref->kind == DPP_FEAT_ABSENT)
        return NULL;
    switch (n->role) {
    case DPP_ROLE_LABEL:
    case DPP_ROLE_DENSE:
        return numbers_problem(n, ref, buf, len);
    case DPP_ROLE_SPARSE:
        return sparse_problem(n, ref, buf, len);
    case DPP_ROLE_WEIGHTS:
    case DPP_ROLE_REQUIRE:
        break;
    }
    return NULL;
}
