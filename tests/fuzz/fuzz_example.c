// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the tf.Example decoder (src/format/example_decode.c), fed
// a record payload. The projection is built once, as src/worker/pipeline.c
// builds it from a spec: the label, dense and sparse features, a weights
// feature and a filter's feature, with names of every length class the
// name hash treats apart. Every projected list is then read through each
// accessor; counts, values and errors must agree between them.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/example_decode.h"
#include "dpp/error.h"
#include "fuzz_util.h"

static const char *const names[] = {
    "label", /* label */
    "i1",
    "i13",      /* dense */
    "user_emb", /* dense, dim 16 */
    "c1",
    "c26",                    /* sparse */
    "item_ids",               /* sparse, weighted */
    "item_weights_long_name", /* its weights (past 8 bytes: FNV-1a) */
    "y",                      /* a filter's feature */
};
#define NNAMES (sizeof names / sizeof names[0])

static dpp_projection_t *proj;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int rc = dpp_projection_new(&proj, names, NNAMES);
    FUZZ_CHECK(rc == 0 && dpp_projection_size(proj) == NNAMES, "projection: rc %d", rc);
    return 0;
}

/* Reads f as floats: a short buffer first (the pipeline's one pass that may
 * need a second), then one of exactly the reported size. */
static void read_floats(const dpp_feat_ref_t *f, int count_rc, size_t count)
{
    float small[4];
    size_t n = 0, n2 = 0;
    int rc = dpp_feat_floats(f, small, 4, &n);
    FUZZ_CHECK(rc == count_rc && n == count, "floats: rc %d n %zu, count: rc %d n %zu", rc, n,
               count_rc, count);
    if (rc != 0)
        return;
    float *all = malloc((n ? n : 1) * sizeof *all);
    FUZZ_CHECK(all != NULL, "out of memory");
    rc = dpp_feat_floats(f, all, n, &n2);
    FUZZ_CHECK(rc == 0 && n2 == n, "floats again: rc %d n %zu, before %zu", rc, n2, n);
    FUZZ_CHECK(memcmp(all, small, (n < 4 ? n : 4) * sizeof *all) == 0, "float prefix differs");
    fuzz_touch(all, n * sizeof *all);
    rc = dpp_feat_floats(f, small, 0, &n2);
    FUZZ_CHECK(rc == 0 && n2 == n, "floats with cap 0: rc %d n %zu", rc, n2);
    free(all);
}

static void read_int64s(const dpp_feat_ref_t *f, int count_rc, size_t count)
{
    int64_t small[4];
    size_t n = 0, n2 = 0;
    int rc = dpp_feat_int64s(f, small, 4, &n);
    FUZZ_CHECK(rc == count_rc && n == count, "int64s: rc %d n %zu, count: rc %d n %zu", rc, n,
               count_rc, count);
    if (rc != 0)
        return;
    int64_t *all = malloc((n ? n : 1) * sizeof *all);
    FUZZ_CHECK(all != NULL, "out of memory");
    rc = dpp_feat_int64s(f, all, n, &n2);
    FUZZ_CHECK(rc == 0 && n2 == n, "int64s again: rc %d n %zu, before %zu", rc, n2, n);
    FUZZ_CHECK(memcmp(all, small, (n < 4 ? n : 4) * sizeof *all) == 0, "int64 prefix differs");
    fuzz_touch(all, n * sizeof *all);
    rc = dpp_feat_int64s(f, small, 0, &n2);
    FUZZ_CHECK(rc == 0 && n2 == n, "int64s with cap 0: rc %d n %zu", rc, n2);
    free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dpp_feat_ref_t out[NNAMES];
    int rc = dpp_example_decode(proj, data, size, out);
    FUZZ_CHECK(rc == 0 || rc == DPP_EEXAMPLE, "rc %d", rc);
    if (rc != 0)
        return 0;
    for (size_t i = 0; i < NNAMES; i++) {
        const dpp_feat_ref_t *f = &out[i];
        size_t n = 0;
        FUZZ_CHECK((unsigned)f->kind <= DPP_FEAT_INT64, "%s: kind %d", names[i], (int)f->kind);
        if (f->kind == DPP_FEAT_ABSENT) {
            FUZZ_CHECK(dpp_feat_count(f, DPP_FEAT_INT64, &n) == DPP_ETYPE && n == 0,
                       "%s: absent but typed", names[i]);
            continue;
        }
        FUZZ_CHECK(f->list_len == 0 || (f->list >= data && f->list_len <= size &&
                                        (size_t)(f->list - data) <= size - f->list_len),
                   "%s: list outside the record", names[i]);
        fuzz_touch(f->list, f->list_len);
        FUZZ_CHECK(dpp_feat_count(f, DPP_FEAT_ABSENT, &n) == DPP_EINVAL && n == 0,
                   "%s: counted as absent", names[i]);
        int count_rc[4] = {0};
        size_t count[4] = {0};
        for (int kind = DPP_FEAT_BYTES; kind <= DPP_FEAT_INT64; kind++) {
            count_rc[kind] = dpp_feat_count(f, (dpp_feat_kind_t)kind, &count[kind]);
            if (kind == (int)f->kind)
                FUZZ_CHECK(count_rc[kind] == 0 || count_rc[kind] == DPP_EEXAMPLE, "%s: rc %d",
                           names[i], count_rc[kind]);
            else
                FUZZ_CHECK(count_rc[kind] == DPP_ETYPE && count[kind] == 0,
                           "%s: kind %d counted as %d", names[i], (int)f->kind, kind);
        }
        read_floats(f, count_rc[DPP_FEAT_FLOAT], count[DPP_FEAT_FLOAT]);
        read_int64s(f, count_rc[DPP_FEAT_INT64], count[DPP_FEAT_INT64]);
    }
    return 0;
}
