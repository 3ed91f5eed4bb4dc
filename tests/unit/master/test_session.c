// SPDX-License-Identifier: Apache-2.0
// Split bookkeeping at the master: counts, ranks, epoch turnover, and what a
// lost worker gives back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "master/session.h"

static dpp_session_t *make(size_t nfiles, unsigned epochs, unsigned consumers)
{
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN];
    char json[512];
    snprintf(json, sizeof json,
             "{\"table\":\"t\",\"batch_size\":4,\"epochs\":%u,\"consumers\":%u,"
             "\"features\":{\"sparse\":[{\"name\":\"c1\"}]},\"label\":{\"name\":\"label\"}}",
             epochs, consumers);
    assert_int_equal(dpp_spec_parse(json, strlen(json), &spec, err, sizeof err), 0);
    char **files = dpp_xcalloc(nfiles, sizeof *files);
    for (size_t i = 0; i < nfiles; i++) {
        char name[32];
        snprintf(name, sizeof name, "/t/part-%05zu", i);
        files[i] = dpp_xstrdup(name);
    }
    dpp_session_t *s = dpp_session_new("s1", &spec, dpp_xstrdup("/t"), files, nfiles);
    assert_non_null(s->spec_json);
    return s;
}

static void assert_counts(const dpp_session_t *s, size_t pending, size_t leased, size_t produced,
                          size_t consumed)
{
    assert_int_equal(s->counts[SPLIT_PENDING], pending);
    assert_int_equal(s->counts[SPLIT_LEASED], leased);
    assert_int_equal(s->counts[SPLIT_PRODUCED], produced);
    assert_int_equal(s->counts[SPLIT_CONSUMED], consumed);
}

static void test_ranks(void **state)
{
    (void)state;
    dpp_session_t *s = make(7, 1, 3);
    /* 7 splits over 3 ranks: 0,3,6 / 1,4 / 2,5 */
    assert_int_equal(dpp_session_rank_splits(s, 0), 3);
    assert_int_equal(dpp_session_rank_splits(s, 1), 2);
    assert_int_equal(dpp_session_rank_splits(s, 2), 2);
    size_t per_rank[3] = {0};
    for (size_t i = 0; i < 7; i++)
        per_rank[dpp_session_rank_of(s, i)]++;
    assert_int_equal(per_rank[0], 3);
    assert_int_equal(per_rank[1], 2);
    assert_int_equal(per_rank[2], 2);
    dpp_session_free(s);
}

static void test_epoch_turnover(void **state)
{
    (void)state;
    dpp_session_t *s = make(3, 2, 1);
    assert_counts(s, 3, 0, 0, 0);
    for (size_t i = 0; i < 3; i++)
        dpp_session_set(s, i, SPLIT_LEASED);
    dpp_session_set(s, 0, SPLIT_PRODUCED);
    assert_counts(s, 0, 2, 1, 0);
    assert_int_equal(dpp_session_consumed(s, 0), 0);
    assert_int_equal(dpp_session_consumed(s, 0), 0); /* a repeated ack changes nothing */
    assert_int_equal(dpp_session_consumed(s, 1), 0);
    assert_counts(s, 0, 1, 0, 2);
    /* the last split of epoch 0 starts epoch 1 with every split pending */
    assert_int_equal(dpp_session_consumed(s, 2), 1);
    assert_int_equal(s->epoch, 1);
    assert_int_equal(s->state, SESSION_RUNNING);
    assert_counts(s, 3, 0, 0, 0);
    for (size_t i = 0; i < 3; i++)
        dpp_session_consumed(s, i);
    assert_int_equal(s->state, SESSION_DONE);
    assert_int_equal(s->epoch, 1);
    dpp_session_free(s);
}

static void test_release_worker(void **state)
{
    (void)state;
    dpp_session_t *s = make(4, 1, 1);
    for (size_t i = 0; i < 4; i++) {
        dpp_session_set(s, i, SPLIT_LEASED);
        s->splits[i].worker_id = i < 3 ? 7 : 8;
        s->splits[i].lease_id = 100 + i;
    }
    dpp_session_set(s, 1, SPLIT_PRODUCED);
    s->splits[1].rows = 50;
    s->rows_produced = 50;
    dpp_session_consumed(s, 2);
    /* worker 7 dies: its leased and produced (not consumed) splits go back */
    assert_int_equal(dpp_session_release_worker(s, 7), 2);
    assert_counts(s, 2, 1, 0, 1);
    assert_int_equal(s->splits[0].lease_id, 0);
    assert_int_equal(s->splits[0].worker_id, 0);
    assert_int_equal(s->splits[2].state, SPLIT_CONSUMED);
    assert_int_equal(s->splits[3].state, SPLIT_LEASED);
    assert_int_equal(s->rows_produced, 0);
    assert_int_equal(dpp_session_release_worker(s, 7), 0);
    dpp_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks),
        cmocka_unit_test(test_epoch_turnover),
        cmocka_unit_test(test_release_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
