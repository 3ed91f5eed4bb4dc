// SPDX-License-Identifier: Apache-2.0
// What a batch hands out (src/client/accessors.c) for the schema an attach
// reply gives (dpp__core_set_schema): with a label, dense and sparse
// features; without a label (dpp_batch_labels() is DPP_ENOFEATURE with
// NULL); with no dense features (every dense accessor DPP_ENOFEATURE); with
// no sparse features (an empty KJT whose one offset is 0).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/core.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"
#include "dpp/error.h"

#define ROWS 5

/* A client and a batch of ROWS rows over the schema of an attach reply
 * naming the given features and label ("" for none). Row r: label r, dense
 * value 10 r + i for feature i, r % 3 ids 100 k + j for sparse key k. */
typedef struct fixture {
    dpp_client_t client;
    struct dpp_batch batch;
} fixture_t;

static void open_fixture(fixture_t *f, char **dense, size_t ndense, char **sparse, size_t nsparse,
                         char *label)
{
    memset(f, 0, sizeof *f);
    uint32_t dims[4] = {1, 1, 1, 1};
    Dpp__AttachReply r = DPP__ATTACH_REPLY__INIT;
    r.batch_size = ROWS;
    r.dense_names = dense;
    r.n_dense_names = r.n_dense_dims = ndense;
    r.dense_dims = dims;
    r.sparse_names = sparse;
    r.n_sparse_names = nsparse;
    r.label_name = label;
    dpp_core_t *core = dpp__core_new();
    assert_non_null(core);
    assert_int_equal(dpp__core_set_schema(core, &r), 0);
    f->client.core = core;

    dpp_block_builder_t b;
    assert_int_equal(dpp_block_builder_init(&b, &core->shape), 0);
    for (unsigned row = 0; row < ROWS; row++) {
        float values[4];
        int64_t ids[4][3];
        const int64_t *idp[4];
        size_t lens[4];
        for (unsigned i = 0; i < ndense; i++)
            values[i] = (float)(10 * row + i);
        for (unsigned k = 0; k < nsparse; k++) {
            lens[k] = row % 3;
            for (size_t j = 0; j < lens[k]; j++)
                ids[k][j] = 100 * k + j;
            idp[k] = ids[k];
        }
        assert_int_equal(dpp_block_builder_append(&b, (float)row, values, idp, NULL, lens), 0);
    }
    size_t len;
    assert_int_equal(dpp_block_builder_finish(&b, &f->batch.buf, &len), 0);
    dpp_block_builder_close(&b);
    dpp_block_info_t info;
    assert_int_equal(dpp_block_parse(f->batch.buf, len, &core->shape, &info), 0);
    f->batch.core = core;
    f->batch.rows = f->batch.valid_rows = ROWS;
    f->batch.mask = core->ones;
}

static void close_fixture(fixture_t *f)
{
    free(f->batch.buf);
    dpp__core_unref(f->client.core);
}

static void test_labelled(void **state)
{
    (void)state;
    char *dense[] = {"d0"}, *sparse[] = {"s0"};
    fixture_t f;
    open_fixture(&f, dense, 1, sparse, 1, "y");
    assert_string_equal(dpp_client_label_name(&f.client), "y");
    const float *labels = NULL;
    assert_int_equal(dpp_batch_labels(&f.batch, &labels), 0);
    assert_non_null(labels);
    for (unsigned r = 0; r < ROWS; r++)
        assert_true(labels[r] == (float)r);
    close_fixture(&f);
}

static void test_no_label_no_dense(void **state)
{
    (void)state;
    char *sparse[] = {"s0", "s1"};
    fixture_t f;
    open_fixture(&f, NULL, 0, sparse, 2, "");
    const dpp_client_t *c = &f.client;
    assert_null(dpp_client_label_name(c));
    const float *labels = (const float *)&f; /* anything but NULL */
    assert_int_equal(dpp_batch_labels(&f.batch, &labels), DPP_ENOFEATURE);
    assert_null(labels);
    assert_int_equal(dpp_client_num_dense(c), 0);
    assert_null(dpp_client_dense_name(c, 0));
    const float *d;
    unsigned dim;
    assert_int_equal(dpp_batch_dense_at(&f.batch, 0, &d, &dim), DPP_ENOFEATURE);
    assert_int_equal(dpp_client_num_sparse(c), 2);
    dpp_kjt_t kjt;
    assert_int_equal(dpp_batch_kjt(&f.batch, &kjt), 0);
    assert_int_equal(kjt.nkeys, 2);
    assert_int_equal(kjt.stride, ROWS);
    size_t want = 0;
    for (unsigned k = 0; k < 2; k++) {
        const int64_t *v;
        const int32_t *l;
        size_t n;
        assert_int_equal(dpp_batch_sparse_at(&f.batch, k, &v, &l, &n), 0);
        for (unsigned r = 0; r < ROWS; r++)
            assert_int_equal(l[r], r % 3);
        for (size_t j = 0; j < n; j++)
            assert_true(v[j] >= 100 * (int64_t)k && v[j] < 100 * (int64_t)k + 3);
        want += n;
    }
    assert_int_equal(kjt.nvalues, want);
    assert_int_equal(kjt.offsets[2 * ROWS], (int32_t)want);
    close_fixture(&f);
}

static void test_no_label_no_sparse(void **state)
{
    (void)state;
    char *dense[] = {"d0", "d1"};
    fixture_t f;
    open_fixture(&f, dense, 2, NULL, 0, "");
    const float *labels;
    assert_int_equal(dpp_batch_labels(&f.batch, &labels), DPP_ENOFEATURE);
    assert_null(labels);
    for (unsigned i = 0; i < 2; i++) {
        const float *d;
        unsigned dim;
        assert_int_equal(dpp_batch_dense_at(&f.batch, i, &d, &dim), 0);
        assert_int_equal(dim, 1);
        for (unsigned r = 0; r < ROWS; r++)
            assert_true(d[r] == (float)(10 * r + i));
    }
    assert_int_equal(dpp_client_num_sparse(&f.client), 0);
    dpp_kjt_t kjt;
    assert_int_equal(dpp_batch_kjt(&f.batch, &kjt), 0);
    assert_int_equal(kjt.nkeys, 0);
    assert_int_equal(kjt.stride, ROWS);
    assert_int_equal(kjt.nvalues, 0);
    assert_null(kjt.values);
    assert_null(kjt.lengths);
    assert_null(kjt.weights);
    assert_non_null(kjt.offsets);
    assert_int_equal(kjt.offsets[0], 0);
    const int64_t *v;
    const int32_t *l;
    size_t n;
    assert_int_equal(dpp_batch_sparse_at(&f.batch, 0, &v, &l, &n), DPP_ENOFEATURE);
    close_fixture(&f);
}

/* A reply with no feature at all is not one a master sends. */
static void test_no_features_refused(void **state)
{
    (void)state;
    Dpp__AttachReply r = DPP__ATTACH_REPLY__INIT;
    r.batch_size = ROWS;
    dpp_core_t *core = dpp__core_new();
    assert_non_null(core);
    assert_int_equal(dpp__core_set_schema(core, &r), DPP_EMSG);
    dpp__core_unref(core);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labelled),
        cmocka_unit_test(test_no_label_no_dense),
        cmocka_unit_test(test_no_label_no_sparse),
        cmocka_unit_test(test_no_features_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
