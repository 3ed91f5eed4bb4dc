// SPDX-License-Identifier: Apache-2.0
// Split bookkeeping at the master: planning from file indexes, ranks, epoch
// turnover, and what a lost worker gives back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "dpp/error.h"
#include "master/session.h"

/* extra: more top-level keys, each followed by a comma */
static dpp_session_t *make_x(size_t nfiles, unsigned epochs, unsigned consumers,
                             unsigned split_rows, const char *remainder, const char *extra)
{
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN];
    char json[512];
    snprintf(json, sizeof json,
             "{\"table\":\"t\",\"batch_size\":4,\"epochs\":%u,\"consumers\":%u,"
             "\"split_rows\":%u,\"remainder\":\"%s\",%s"
             "\"features\":{\"sparse\":[{\"name\":\"c1\"}]},\"label\":{\"name\":\"label\"}}",
             epochs, consumers, split_rows, remainder, extra);
    assert_int_equal(dpp_spec_parse(json, strlen(json), &spec, err, sizeof err), 0);
    char **files = dpp_xcalloc(nfiles, sizeof *files);
    for (size_t i = 0; i < nfiles; i++) {
        char name[48];
        snprintf(name, sizeof name, "/t/ds=1/part-%05zu", i);
        files[i] = dpp_xstrdup(name);
    }
    dpp_session_t *s = dpp_session_new("s1", &spec, dpp_xstrdup("/t"), files, nfiles);
    assert_non_null(s->spec_json);
    assert_int_equal(s->state, SESSION_INDEXING);
    assert_string_equal(s->files[0].rel_path, "ds=1/part-00000");
    return s;
}

static dpp_session_t *make_r(size_t nfiles, unsigned epochs, unsigned consumers,
                             unsigned split_rows, const char *remainder)
{
    return make_x(nfiles, epochs, consumers, split_rows, remainder, "");
}

static dpp_session_t *make(size_t nfiles, unsigned epochs, unsigned consumers, unsigned split_rows)
{
    return make_r(nfiles, epochs, consumers, split_rows, "keep");
}

/* Indexes every file as one split of `records` records of 100 bytes. */
static void index_all(dpp_session_t *s, uint64_t records)
{
    for (size_t i = 0; i < s->nfiles; i++) {
        uint64_t bounds[2] = {0, records * 100};
        int planned = dpp_session_file_indexed(s, i, records, bounds, 2);
        assert_int_equal(planned, i + 1 == s->nfiles);
    }
    assert_int_equal(s->state, SESSION_RUNNING);
}

static void assert_counts(const dpp_session_t *s, size_t pending, size_t leased, size_t produced,
                          size_t consumed)
{
    assert_int_equal(s->counts[SPLIT_PENDING], pending);
    assert_int_equal(s->counts[SPLIT_LEASED], leased);
    assert_int_equal(s->counts[SPLIT_PRODUCED], produced);
    assert_int_equal(s->counts[SPLIT_CONSUMED], consumed);
}

static void test_planning(void **state)
{
    (void)state;
    dpp_session_t *s = make(3, 1, 1, 4);
    /* file 0: 10 records in 3 splits (4, 4, 2); file 1: empty; file 2: 4 records */
    uint64_t b0[] = {0, 400, 800, 1000};
    uint64_t b1[] = {0};
    uint64_t b2[] = {0, 64};
    assert_int_equal(dpp_session_file_indexed(s, 2, 4, b2, 2), 0);
    assert_int_equal(dpp_session_file_indexed(s, 0, 10, b0, 4), 0);
    assert_int_equal(dpp_session_file_indexed(s, 0, 10, b0, 4), 0); /* repeated: ignored */
    assert_int_equal(s->files_indexed, 2);
    assert_int_equal(s->state, SESSION_INDEXING);
    assert_int_equal(dpp_session_rank_splits(s, 0), 0);
    assert_int_equal(dpp_session_file_indexed(s, 1, 0, b1, 1), 1);
    assert_int_equal(s->state, SESSION_RUNNING);
    assert_int_equal(s->nsplits, 4);
    const struct {
        uint32_t file;
        uint64_t rec_start, rec_count, byte_start, byte_end;
    } want[] = {{0, 0, 4, 0, 400}, {0, 4, 4, 400, 800}, {0, 8, 2, 800, 1000}, {2, 0, 4, 0, 64}};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(s->splits[i].file, want[i].file);
        assert_int_equal(s->splits[i].record_start, want[i].rec_start);
        assert_int_equal(s->splits[i].record_skip, 0);
        assert_int_equal(s->splits[i].record_count, want[i].rec_count);
        assert_int_equal(s->splits[i].byte_start, want[i].byte_start);
        assert_int_equal(s->splits[i].byte_end, want[i].byte_end);
    }
    assert_counts(s, 4, 0, 0, 0);
    dpp_session_free(s);
}

static void test_all_empty_is_done(void **state)
{
    (void)state;
    dpp_session_t *s = make(1, 1, 1, 4);
    uint64_t b[] = {0};
    assert_int_equal(dpp_session_file_indexed(s, 0, 0, b, 1), 0);
    assert_int_equal(s->state, SESSION_DONE);
    dpp_session_free(s);
}

/* Records are dealt to ranks in file order, cutting index ranges into
 * windows where a rank's share ends: every rank gets the same number of
 * batches ("drop"), or the records as evenly as they go ("keep"). */
static void check_windows(const dpp_session_t *s, unsigned consumers)
{
    /* windows of one file never overlap and stay inside their range */
    for (size_t i = 0; i < s->nsplits; i++) {
        const dpp_split_t *sp = &s->splits[i];
        assert_true(sp->record_count > 0);
        assert_true(sp->record_skip + sp->record_count <= 10);
        assert_true(sp->rank < consumers);
        if (i > 0 && s->splits[i - 1].file == sp->file &&
            s->splits[i - 1].record_start == sp->record_start)
            assert_int_equal(s->splits[i - 1].record_skip + s->splits[i - 1].record_count,
                             sp->record_skip);
        if (i > 0)
            assert_true(s->splits[i - 1].rank <= sp->rank); /* contiguous per rank */
    }
}

static void test_ranks(void **state)
{
    (void)state;
    /* 7 files x 10 records = 70, 3 ranks, batch 4 */
    dpp_session_t *s = make_r(7, 1, 3, 100, "drop");
    index_all(s, 10);
    check_windows(s, 3);
    /* drop: 70 / 3 = 23 -> 20 records (5 batches) each; 10 dropped (< 3 x 4) */
    for (unsigned r = 0; r < 3; r++)
        assert_int_equal(dpp_session_rank_records(s, r), 20);
    size_t per_rank[3] = {0};
    for (size_t i = 0; i < s->nsplits; i++)
        per_rank[dpp_session_rank_of(s, i)]++;
    assert_int_equal(per_rank[0] + per_rank[1] + per_rank[2], s->nsplits);
    assert_int_equal(per_rank[0], dpp_session_rank_splits(s, 0));
    /* rank 0: files 0, 1 whole; rank 1 starts at file 2 */
    assert_int_equal(s->splits[0].rank, 0);
    assert_int_equal(s->splits[2].rank, 1);
    assert_int_equal(s->splits[2].file, 2);
    dpp_session_free(s);

    /* keep: 70 = 24 + 23 + 23, the boundary cuts a file's range */
    s = make_r(7, 1, 3, 100, "keep");
    index_all(s, 10);
    check_windows(s, 3);
    assert_int_equal(dpp_session_rank_records(s, 0), 24);
    assert_int_equal(dpp_session_rank_records(s, 1), 23);
    assert_int_equal(dpp_session_rank_records(s, 2), 23);
    /* file 2 is split: 4 records for rank 0, 6 for rank 1 */
    assert_int_equal(s->splits[2].file, 2);
    assert_int_equal(s->splits[2].record_count, 4);
    assert_int_equal(s->splits[3].file, 2);
    assert_int_equal(s->splits[3].record_skip, 4);
    assert_int_equal(s->splits[3].record_count, 6);
    assert_int_equal(s->splits[3].rank, 1);
    dpp_session_free(s);
}

static void test_epoch_turnover(void **state)
{
    (void)state;
    dpp_session_t *s = make(3, 2, 1, 100);
    index_all(s, 10);
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
    /* index tasks go back too */
    dpp_session_t *s = make(2, 1, 1, 100);
    s->files[0].index_lease.lease_id = 5;
    s->files[0].index_lease.worker_id = 7;
    s->files[1].index_lease.lease_id = 6;
    s->files[1].index_lease.worker_id = 8;
    assert_int_equal(dpp_session_release_worker(s, 7), 1);
    assert_int_equal(s->files[0].index_lease.lease_id, 0);
    assert_int_equal(s->files[1].index_lease.lease_id, 6);
    dpp_session_free(s);

    s = make(4, 1, 1, 100);
    index_all(s, 10);
    for (size_t i = 0; i < 4; i++) {
        dpp_session_set(s, i, SPLIT_LEASED);
        s->splits[i].lease.worker_id = i < 3 ? 7 : 8;
        s->splits[i].lease.lease_id = 100 + i;
    }
    dpp_session_set(s, 1, SPLIT_PRODUCED);
    s->splits[1].rows = 50;
    s->rows_produced = 50;
    dpp_session_consumed(s, 2);
    /* worker 7 dies: its leased and produced (not consumed) splits go back */
    assert_int_equal(dpp_session_release_worker(s, 7), 2);
    assert_counts(s, 2, 1, 0, 1);
    assert_int_equal(s->splits[0].lease.lease_id, 0);
    assert_int_equal(s->splits[0].lease.worker_id, 0);
    assert_int_equal(s->splits[2].state, SPLIT_CONSUMED);
    assert_int_equal(s->splits[3].state, SPLIT_LEASED);
    assert_int_equal(s->rows_produced, 0);
    assert_int_equal(dpp_session_release_worker(s, 7), 0);
    dpp_session_free(s);
}

/* The files of the current plan in split order, as a string of file
 * numbers, checking that every rank's splits are consecutive with seq
 * counting from 0 and every file appears once. */
static void plan_files(const dpp_session_t *s, char *out, size_t len)
{
    size_t used = 0;
    unsigned *times = calloc(s->nfiles, sizeof *times);
    for (size_t i = 0; i < s->nsplits; i++) {
        const dpp_split_t *sp = &s->splits[i];
        assert_true(i >= s->rank_first[sp->rank]);
        assert_int_equal(sp->seq, i - s->rank_first[sp->rank]);
        assert_true(sp->seq < s->rank_count[sp->rank]);
        times[sp->file]++;
        used += (size_t)snprintf(out + used, len - used, "%u,", sp->file);
        assert_true(used < len);
    }
    for (size_t f = 0; f < s->nfiles; f++)
        assert_int_equal(times[f], 1);
    free(times);
}

static void consume_all(dpp_session_t *s)
{
    unsigned epoch = s->epoch;
    for (size_t i = 0; i < s->nsplits && s->epoch == epoch && s->state == SESSION_RUNNING; i++)
        dpp_session_consumed(s, i);
}

/* shuffle: each epoch deals the ranges in another order, the same for the
 * same seed; without shuffle, file order every epoch. */
static void test_shuffle_plans(void **state)
{
    (void)state;
    char plans[2][3][256], other[256], plain[256];
    for (int run = 0; run < 2; run++) {
        dpp_session_t *s = make_x(24, 3, 2, 10, "keep", "\"shuffle\":{\"seed\":7},");
        index_all(s, 10);
        for (unsigned e = 0; e < 3; e++) {
            assert_int_equal(s->epoch, e);
            assert_int_equal(s->nsplits, 24);
            assert_int_equal(dpp_session_rank_splits(s, 0), 12);
            plan_files(s, plans[run][e], sizeof plans[run][e]);
            consume_all(s);
        }
        assert_int_equal(s->state, SESSION_DONE);
        dpp_session_free(s);
    }
    for (unsigned e = 0; e < 3; e++)
        assert_string_equal(plans[0][e], plans[1][e]);
    assert_string_not_equal(plans[0][0], plans[0][1]);
    assert_string_not_equal(plans[0][1], plans[0][2]);
    dpp_session_t *s = make_x(24, 1, 2, 10, "keep", "\"shuffle\":{\"seed\":8},");
    index_all(s, 10);
    plan_files(s, other, sizeof other);
    assert_string_not_equal(plans[0][0], other);
    dpp_session_free(s);
    s = make_x(24, 2, 2, 10, "keep", "");
    index_all(s, 10);
    plan_files(s, plain, sizeof plain);
    assert_string_equal(plain, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,");
    consume_all(s);
    plan_files(s, other, sizeof other);
    assert_string_equal(plain, other);
    dpp_session_free(s);
}

/* order deterministic: a rank's splits are leased at most rank_prefetch
 * past its first unconsumed one; fastest: no limit. */
static void test_held_back(void **state)
{
    (void)state;
    dpp_session_t *s = make_x(8, 1, 1, 10, "keep", "");
    index_all(s, 10);
    s->rank_prefetch[0] = 2;
    assert_int_equal(dpp_session_rank_cursor(s, 0), 0);
    assert_int_equal(dpp_session_lease_end(s, 0), 3); /* positions 0..2 */
    dpp_session_consumed(s, 1);                       /* out of order: seq 0 still open */
    assert_int_equal(dpp_session_lease_end(s, 0), 3);
    dpp_session_consumed(s, 0);
    assert_int_equal(dpp_session_rank_cursor(s, 0), 2);
    assert_int_equal(dpp_session_lease_end(s, 0), 5); /* positions 2..4 */
    for (size_t i = 2; i < 8; i++)
        dpp_session_consumed(s, i);
    assert_int_equal(s->state, SESSION_DONE);
    dpp_session_free(s);
    s = make_x(8, 1, 1, 10, "keep", "\"order\":\"fastest\",");
    index_all(s, 10);
    s->rank_prefetch[0] = 1;
    assert_int_equal(dpp_session_lease_end(s, 0), 8); /* no window */
    dpp_session_free(s);
}

/* remainder pad: every rank gets ceil(largest share / batch_size) batches. */
static void test_pad_batches(void **state)
{
    (void)state;
    dpp_session_t *s = make_x(3, 1, 3, 100, "pad", "");
    assert_int_equal(dpp_session_pad_batches(s), 0); /* indexing */
    index_all(s, 7);                                 /* 21 records: 7 per rank, batch_size 4 */
    assert_int_equal(dpp_session_pad_batches(s), 2);
    assert_int_equal(dpp_session_rank_records(s, 2), 7);
    dpp_session_free(s);
    s = make_x(1, 1, 3, 100, "pad", "");
    index_all(s, 13); /* 5, 4, 4 */
    assert_int_equal(dpp_session_pad_batches(s), 2);
    assert_int_equal(dpp_session_rank_records(s, 0), 5);
    assert_int_equal(dpp_session_rank_records(s, 2), 4);
    dpp_session_free(s);
    s = make_x(1, 1, 3, 100, "keep", "");
    index_all(s, 13);
    assert_int_equal(dpp_session_pad_batches(s), 0);
    dpp_session_free(s);
}

static size_t rank_state(const dpp_session_t *s, unsigned rank, split_state_t st)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nsplits; i++)
        n += s->splits[i].rank == rank && s->splits[i].state == st;
    return n;
}

/* A checkpoint token's position: before it consumed, from it on pending;
 * an earlier epoch rolls the session back; positions that cannot exist are
 * refused without changing anything. */
static void test_resume(void **state)
{
    (void)state;
    dpp_session_t *s = make_x(8, 3, 2, 10, "keep", "\"shuffle\":{\"seed\":3},");
    assert_int_equal(dpp_session_resume(s, 0, 0, 0), 0); /* indexing: from the start */
    assert_int_equal(dpp_session_resume(s, 0, 0, 1), DPP_ETOKEN);
    index_all(s, 10);
    size_t r0 = s->rank_first[0];
    dpp_session_set(s, r0, SPLIT_LEASED);
    dpp_session_set(s, r0 + 1, SPLIT_PRODUCED);
    dpp_session_consumed(s, r0 + 2); /* acknowledged, yet after the token */
    assert_int_equal(dpp_session_resume(s, 0, 0, 1), 0);
    assert_int_equal(s->splits[r0].state, SPLIT_CONSUMED);
    assert_int_equal(rank_state(s, 0, SPLIT_PENDING), 3);
    assert_int_equal(rank_state(s, 1, SPLIT_PENDING), 4);
    /* refused: past the rank's splits, a later epoch, an epoch past the
     * session, a rank that does not exist */
    assert_int_equal(dpp_session_resume(s, 0, 0, 5), DPP_ETOKEN);
    assert_int_equal(dpp_session_resume(s, 0, 1, 0), DPP_ETOKEN);
    assert_int_equal(dpp_session_resume(s, 0, 3, 0), DPP_ETOKEN);
    assert_int_equal(dpp_session_resume(s, 2, 0, 0), DPP_ETOKEN);
    assert_int_equal(rank_state(s, 0, SPLIT_CONSUMED), 1);
    /* at the end of the rank's epoch: its splits consumed, the others' not */
    assert_int_equal(dpp_session_resume(s, 0, 0, 4), 0);
    assert_int_equal(rank_state(s, 0, SPLIT_CONSUMED), 4);
    assert_int_equal(s->epoch, 0);
    consume_all(s);
    assert_int_equal(s->epoch, 1);
    char e1[256], e0[256];
    plan_files(s, e1, sizeof e1);
    /* rank 1 restarts from split 2 of epoch 0: back to epoch 0, rank 0 done */
    assert_int_equal(dpp_session_resume(s, 1, 0, 2), 0);
    assert_int_equal(s->epoch, 0);
    plan_files(s, e0, sizeof e0);
    assert_string_not_equal(e0, e1);
    assert_int_equal(rank_state(s, 0, SPLIT_CONSUMED), 4);
    assert_int_equal(rank_state(s, 1, SPLIT_CONSUMED), 2);
    assert_int_equal(rank_state(s, 1, SPLIT_PENDING), 2);
    consume_all(s);
    assert_int_equal(s->epoch, 1);
    plan_files(s, e0, sizeof e0);
    assert_string_equal(e0, e1); /* the same plan again */
    consume_all(s);
    consume_all(s);
    assert_int_equal(s->state, SESSION_DONE);
    /* a finished session reopens for a token of its last epoch */
    assert_int_equal(dpp_session_resume(s, 0, 2, 3), 0);
    assert_int_equal(s->state, SESSION_RUNNING);
    assert_int_equal(s->epoch, 2);
    assert_int_equal(rank_state(s, 0, SPLIT_PENDING), 1);
    assert_int_equal(s->counts[SPLIT_CONSUMED], 7);
    consume_all(s);
    assert_int_equal(s->state, SESSION_DONE);
    dpp_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planning),       cmocka_unit_test(test_all_empty_is_done),
        cmocka_unit_test(test_ranks),          cmocka_unit_test(test_epoch_turnover),
        cmocka_unit_test(test_release_worker), cmocka_unit_test(test_shuffle_plans),
        cmocka_unit_test(test_held_back),      cmocka_unit_test(test_pad_batches),
        cmocka_unit_test(test_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
