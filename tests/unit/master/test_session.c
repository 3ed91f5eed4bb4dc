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
#include "base/crc32c.h"
#include "crypto/checkpoint_token.h"
#include "crypto/hmac.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "master/master_internal.h"
#include "master/persist.h"
#include "master/session.h"
#include "session_fixture.h"

/* extra: more top-level keys, each followed by a comma */
static dpp_session_t *make_x(size_t nfiles, unsigned epochs, unsigned consumers,
                             unsigned split_rows, const char *remainder, const char *extra)
{
    dpp_session_t *s =
        fixture_session("s1", nfiles, epochs, consumers, split_rows, remainder, extra);
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
    assert_int_equal(dpp_session_consumed(s, 0, 0), 0);
    assert_int_equal(dpp_session_consumed(s, 0, 0), 0); /* a repeated ack changes nothing */
    assert_int_equal(dpp_session_consumed(s, 1, 0), 0);
    assert_counts(s, 0, 1, 0, 2);
    /* the last split of epoch 0 starts epoch 1 with every split pending */
    assert_int_equal(dpp_session_consumed(s, 2, 0), 1);
    assert_int_equal(s->epoch, 1);
    assert_int_equal(s->state, SESSION_RUNNING);
    assert_counts(s, 3, 0, 0, 0);
    for (size_t i = 0; i < 3; i++)
        dpp_session_consumed(s, i, 0);
    assert_int_equal(s->state, SESSION_DONE);
    assert_int_equal(s->epoch, 1);
    dpp_session_free(s);
}

/* A client's acknowledgement can come before its worker's report (two
 * connections): the last one holds the epoch until the reports are in, so
 * that the checks and the session's end see every count. */
static void test_epoch_held_for_reports(void **state)
{
    (void)state;
    dpp_session_t *s = make(2, 2, 1, 100);
    index_all(s, 10);
    for (size_t i = 0; i < 2; i++) {
        dpp_session_set(s, i, SPLIT_LEASED);
        s->splits[i].lease.worker_id = 7;
    }
    assert_int_equal(dpp_session_consumed(s, 0, 1), 0); /* still leased: report due */
    assert_int_equal(s->reports_due, 1);
    assert_int_equal(dpp_session_unhold(s, 0), -1); /* nothing is held yet */
    dpp_session_set(s, 1, SPLIT_PRODUCED);
    assert_int_equal(dpp_session_consumed(s, 1, 1), 0); /* produced: nothing due for it */
    assert_int_equal(s->epoch_held, 1);
    assert_int_equal(s->epoch, 0);
    assert_int_equal(dpp_session_unhold(s, 0), -1); /* split 0's report is still due */
    dpp_session_reported(s, 0);
    dpp_session_reported(s, 0); /* twice changes nothing */
    assert_int_equal(s->reports_due, 0);
    assert_int_equal(dpp_session_unhold(s, 0), 1);
    assert_int_equal(s->epoch, 1);
    assert_int_equal(s->epoch_held, 0);
    assert_counts(s, 2, 0, 0, 0);

    /* epoch 1: the worker is lost with a report due: the epoch ends, the
     * session with it */
    for (size_t i = 0; i < 2; i++) {
        dpp_session_set(s, i, SPLIT_LEASED);
        s->splits[i].lease.worker_id = 7;
        dpp_session_consumed(s, i, 1);
    }
    assert_int_equal(s->reports_due, 2);
    assert_int_equal(s->state, SESSION_RUNNING);
    assert_int_equal(dpp_session_release_worker(s, 7), 0); /* consumed splits stay consumed */
    assert_int_equal(s->reports_due, 0);
    assert_int_equal(dpp_session_unhold(s, 0), 0);
    assert_int_equal(s->state, SESSION_DONE);
    dpp_session_free(s);

    /* force ends a hold whose reports never come */
    s = make(1, 1, 1, 100);
    index_all(s, 10);
    dpp_session_set(s, 0, SPLIT_LEASED);
    dpp_session_consumed(s, 0, 1);
    assert_int_equal(dpp_session_unhold(s, 0), -1);
    assert_int_equal(dpp_session_unhold(s, 1), 0);
    assert_int_equal(s->state, SESSION_DONE);
    assert_int_equal(s->reports_due, 0);
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
    dpp_session_consumed(s, 2, 0);
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
        dpp_session_consumed(s, i, 0);
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
    dpp_session_consumed(s, 1, 0);                    /* out of order: seq 0 still open */
    assert_int_equal(dpp_session_lease_end(s, 0), 3);
    dpp_session_consumed(s, 0, 0);
    assert_int_equal(dpp_session_rank_cursor(s, 0), 2);
    assert_int_equal(dpp_session_lease_end(s, 0), 5); /* positions 2..4 */
    for (size_t i = 2; i < 8; i++)
        dpp_session_consumed(s, i, 0);
    assert_int_equal(s->state, SESSION_DONE);
    dpp_session_free(s);
    s = make_x(8, 1, 1, 10, "keep", "\"order\":\"fastest\",");
    index_all(s, 10);
    s->rank_prefetch[0] = 1;
    assert_int_equal(dpp_session_lease_end(s, 0), 8); /* no window */
    dpp_session_free(s);
}

/* A rank's counts add up over its clients: a client's refresh replaces its
 * own last report, a new client (a takeover, a read of a finished session)
 * adds to the ones before it. */
static void test_rank_reports(void **state)
{
    (void)state;
    dpp_session_t *s = make_x(3, 1, 2, 100, "keep", "");
    dpp_rank_counts_t c = {.batches = 5, .wait_ns = 10, .open_ns = 100, .hist = {[3] = 5}};
    dpp_session_report(s, 1, 11, &c);
    c.batches = 9, c.wait_ns = 20, c.open_ns = 200, c.hist[3] = 9; /* the same client, later */
    dpp_session_report(s, 1, 11, &c);
    assert_int_equal(s->reports[1].sum.batches, 9);
    assert_int_equal(s->reports[1].sum.hist[3], 9);
    dpp_rank_counts_t next = {.batches = 0, .wait_ns = 1, .open_ns = 3, .hist = {[0] = 1}};
    dpp_session_report(s, 1, 12, &next); /* another client takes the rank over */
    assert_int_equal(s->reports[1].sum.batches, 9);
    assert_int_equal(s->reports[1].sum.wait_ns, 21);
    assert_int_equal(s->reports[1].sum.open_ns, 203);
    assert_int_equal(s->reports[1].sum.hist[0], 1);
    assert_int_equal(s->reports[1].sum.hist[3], 9);
    next.batches = 4;
    dpp_session_report(s, 1, 12, &next);
    assert_int_equal(s->reports[1].sum.batches, 13);
    assert_int_equal(s->reports[0].sum.batches, 0); /* the other rank: untouched */
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
    dpp_session_consumed(s, r0 + 2, 0); /* acknowledged, yet after the token */
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

/* Every session gets its own random checkpoint-token key. */
static void test_token_key(void **state)
{
    (void)state;
    dpp_session_t *a = make(1, 1, 1, 10), *b = make(1, 1, 1, 10);
    static const uint8_t zero[DPP_CKPT_KEY_LEN];
    assert_memory_not_equal(a->token_key, zero, DPP_CKPT_KEY_LEN);
    assert_memory_not_equal(a->token_key, b->token_key, DPP_CKPT_KEY_LEN);
    assert_int_equal(a->token_key_unsaved, 0);
    dpp_session_free(a);
    dpp_session_free(b);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static dpp_ckpt_token_t tok_at(unsigned rank, unsigned epoch, unsigned seq, unsigned index,
                               unsigned row, unsigned batches, unsigned rank_splits)
{
    dpp_ckpt_token_t t = {.rank = rank,
                          .epoch = epoch,
                          .seq = seq,
                          .index = index,
                          .row = row,
                          .batches = batches,
                          .rank_splits = rank_splits};
    snprintf(t.session, sizeof t.session, "s1");
    return t;
}

/* Checks the token raw as an attach of `rank` asking for the token's own
 * position; the refusal must say `words`, and nothing in s changes. */
static int check_raw(dpp_session_t *s, const uint8_t *raw, size_t len, unsigned rank,
                     const char *words, dpp_token_plan_t *plan)
{
    size_t counts[4];
    memcpy(counts, s->counts, sizeof counts);
    unsigned epoch = s->epoch;
    session_state_t st = s->state;
    dpp_ckpt_token_t t;
    dpp_token_plan_t p;
    char why[768] = "";
    unsigned e = len >= 40 ? (unsigned)(raw[36] | raw[37] << 8) : 0;
    unsigned q = len >= 44 ? (unsigned)(raw[40] | raw[41] << 8) : 0;
    int rc =
        dpp_session_check_token(s, raw, len, rank, e, q, &t, plan ? plan : &p, why, sizeof why);
    if (words && strstr(why, words) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", why, words);
    if (rc == 0 && why[0] && words == NULL)
        fail_msg("accepted, yet said \"%s\"", why);
    assert_memory_equal(counts, s->counts, sizeof counts);
    assert_int_equal(epoch, s->epoch);
    assert_int_equal(st, s->state);
    return rc;
}

/* Signs t with s's key and checks it. */
static int check_tok(dpp_session_t *s, dpp_ckpt_token_t t, const char *words)
{
    uint8_t raw[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(&t, s->token_key, raw);
    return check_raw(s, raw, sizeof raw, t.rank, words, NULL);
}

#define U DPP_CKPT_SPLITS_UNKNOWN

/* The master verifies a token's MAC and every field against the plan, names
 * the field that does not fit and changes nothing. 8 files of 10 records,
 * 2 ranks, batch_size 4: each rank has 4 splits of 10 records per epoch
 * (blocks 0..2 of 4, 4 and 2 rows, then the end marker 3). */
static void test_check_token(void **state)
{
    (void)state;
    dpp_session_t *s = make_x(8, 3, 2, 10, "keep", "\"shuffle\":{\"seed\":3},");
    /* indexing: only the start fits */
    assert_int_equal(check_tok(s, tok_at(0, 0, 0, 0, 0, 0, U), NULL), 0);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 0, 0, 0, U), "seq: the token says 1"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 0, 0, 0, 0, 4), "rank_splits: the token says 4"),
                     DPP_ETOKEN);
    index_all(s, 10);

    dpp_ckpt_token_t good = tok_at(0, 0, 1, 1, 2, 3, 4); /* 10 + 4 + 2 records before: 4 batches */
    uint8_t raw[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(&good, s->token_key, raw);
    dpp_token_plan_t plan;
    assert_int_equal(check_raw(s, raw, sizeof raw, 0, NULL, &plan), 0);
    assert_int_equal(plan.rank_splits, 4);
    assert_int_equal(plan.split_records, 10);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 1, 2, 4, U), NULL), 0);
    assert_int_equal(check_tok(s, tok_at(1, 0, 0, 0, 0, 0, 4), NULL), 0);

    /* each field */
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 1, 2, 3, 5),
                               "rank_splits: the token says 5, the plan of epoch 0 gives rank 0 4 "
                               "splits"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 1, 2, 3, 0), "rank_splits: the token says 0"),
                     DPP_ETOKEN);
    assert_int_equal(
        check_tok(s, tok_at(0, 0, 5, 0, 0, 0, 4), "seq: the token says split position 5"),
        DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 4, 1, 0, 0, 4), "index: the token says 1"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 4, 0, 0, 10, 4), NULL), 0); /* the epoch's end */
    assert_int_equal(check_tok(s, tok_at(0, 0, 4, 0, 0, 11, 4), "batches: the token says 11"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 4, 0, 0, 4), "index: the token says block 4"),
                     DPP_ETOKEN);
    assert_int_equal(
        check_tok(s, tok_at(0, 0, 1, 9999, 0, 0, 4), "index: the token says block 9999"),
        DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 3, 0, 3, 4), NULL), 0); /* the end marker */
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 3, 1, 3, 4), "row: the token says 1"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 2, 2, 3, 4), "row: the token says 2, block 2"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 0, 4, 0, 4),
                               "row: the token says 4, a block holds at most batch_size = 4"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 0, 1, 0, 0, 3, 4), "batches: the token says 3"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 1, 0, 0, 0, 0, 4),
                               "epoch: the token says 1, the session is at epoch 0"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 3, 0, 0, 0, 0, U), "(after the last epoch)"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 4, 0, 0, 0, 0, U), "the session has 3 epochs"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(2, 0, 0, 0, 0, 0, U), "the session has 2 consumers"),
                     DPP_ETOKEN);
    dpp_ckpt_token_t t = good;
    snprintf(t.session, sizeof t.session, "s2");
    assert_int_equal(check_tok(s, t, "session: the token says \"s2\""), DPP_ETOKEN);
    uint8_t f[DPP_CKPT_TOKEN_SIZE];
    memcpy(f, raw, sizeof f);
    put32(f + 60, 1); /* a generation, signed (the MAC fits), the session never had */
    dpp_hmac_sha256(s->token_key, DPP_CKPT_KEY_LEN, f, 64, f + 64);
    assert_int_equal(check_raw(s, f, sizeof f, 0,
                               "generation: the token says 1, session s1 is at generation 0",
                               NULL),
                     DPP_ETOKEN);
    /* another rank's token, or a position the attach does not ask for */
    dpp_ckpt_token_t tt;
    char why[768] = "";
    assert_int_equal(
        dpp_session_check_token(s, raw, sizeof raw, 1, 0, 1, &tt, &plan, why, sizeof why),
        DPP_ETOKEN);
    assert_non_null(strstr(why, "rank: the token says 0, the attach is for rank 1"));
    assert_int_equal(
        dpp_session_check_token(s, raw, sizeof raw, 0, 0, 2, &tt, &plan, why, sizeof why),
        DPP_ETOKEN);
    assert_non_null(strstr(why, "the attach asks for epoch 0 split position 2"));

    /* forgeries: no key, so the MAC fails; the refusal names the field */
    memcpy(f, raw, sizeof f);
    put32(f + 44, 9999); /* index */
    assert_int_equal(check_raw(s, f, sizeof f, 0, "index: the token says block 9999", NULL),
                     DPP_ETOKEN);
    assert_int_equal(check_raw(s, f, sizeof f, 0, "MAC does not verify", NULL), DPP_ETOKEN);
    memcpy(f, raw, sizeof f);
    put32(f + 56, 7); /* rank_splits */
    assert_int_equal(check_raw(s, f, sizeof f, 0, "rank_splits: the token says 7", NULL),
                     DPP_ETOKEN);
    memcpy(f, raw, sizeof f);
    f[95] ^= 1; /* fields that fit, a MAC that does not */
    assert_int_equal(check_raw(s, f, sizeof f, 0, "mac: ", NULL), DPP_ETOKEN);
    uint8_t other[DPP_CKPT_KEY_LEN] = {1};
    dpp_ckpt_token_pack(&good, other, f); /* another session's key */
    assert_int_equal(check_raw(s, f, sizeof f, 0, "mac: ", NULL), DPP_ETOKEN);
    /* a version-1 token: 64 bytes and a CRC32C */
    uint8_t v1[64] = {'D', 'P', 'T', '1', 1};
    memcpy(v1 + 8, "s1", 2);
    put32(v1 + 60, dpp_crc32c(0, v1, 60));
    assert_int_equal(check_raw(s, v1, sizeof v1, 0, "version 1, from an older version", NULL),
                     DPP_ETOKEN);

    /* an earlier epoch is planned again to check against, and may be
     * resumed (the rollback) */
    consume_all(s);
    assert_int_equal(s->epoch, 1);
    assert_int_equal(check_tok(s, tok_at(1, 0, 2, 1, 0, 5, 4), NULL), 0);
    assert_int_equal(check_tok(s, tok_at(1, 0, 2, 1, 0, 5, 3), "the plan of epoch 0"), DPP_ETOKEN);
    consume_all(s);
    consume_all(s);
    assert_int_equal(s->state, SESSION_DONE);
    assert_int_equal(check_tok(s, tok_at(0, 3, 0, 0, 0, 0, U), NULL), 0);
    assert_int_equal(check_tok(s, tok_at(0, 3, 0, 0, 0, 1, U), "batches: the token says 1"),
                     DPP_ETOKEN);
    assert_int_equal(check_tok(s, tok_at(0, 3, 0, 0, 0, 0, 4), "rank_splits"), DPP_ETOKEN);
    dpp_session_free(s);

    /* remainder pad: at the epoch's end a rank may have had the plan's
     * padded batch count: 13 records to 3 ranks (5, 4, 4), batch_size 4 */
    s = make_x(1, 1, 3, 100, "pad", "");
    index_all(s, 13);
    assert_int_equal(check_tok(s, tok_at(2, 0, 1, 0, 0, 2, 1), NULL), 0);
    assert_int_equal(check_tok(s, tok_at(2, 0, 1, 0, 0, 3, 1), "batches: the token says 3"),
                     DPP_ETOKEN);
    dpp_session_free(s);
}

/* The key is journaled with the session and replay keeps it; a record
 * without one (an older master's) gets a new key, which a later record
 * for the same session puts in place. */
/* ---- elastic resume ---- */

/* Marks rows [lo, hi) of split sp's window in seen[] (a row: its file's
 * record index, output row o of a window being its o-th record: any
 * bijection shows exactly-once); fails on a row marked twice. */
static void mark_rows(const dpp_split_t *sp, uint64_t lo, uint64_t hi, uint64_t per_file,
                      uint8_t *seen)
{
    for (uint64_t o = lo; o < hi; o++) {
        uint64_t row = sp->file * per_file + sp->record_start + sp->record_skip + o;
        assert_int_equal(seen[row], 0);
        seen[row] = 1;
    }
}

/* Rank r's position after `k` of its rows in the current plan, as a signed
 * token; marks the rows before it. */
static void take_rows(dpp_session_t *s, unsigned r, uint64_t k, uint64_t per_file, uint8_t *seen,
                      uint8_t *out)
{
    size_t first = s->rank_first[r], n = s->rank_count[r], j = 0;
    uint64_t at = 0, batches = k / s->spec.batch_size;
    for (; j < n; j++) {
        const dpp_split_t *sp = &s->splits[first + j];
        uint64_t lo = sp->out_take ? sp->out_skip : 0, rows = dpp_split_rows(sp);
        if (k < rows) {
            mark_rows(sp, lo, lo + k, per_file, seen);
            at = lo + k;
            break;
        }
        mark_rows(sp, lo, lo + rows, per_file, seen);
        k -= rows;
    }
    dpp_ckpt_token_t t = tok_at(r, s->epoch, (unsigned)j, (unsigned)(at / s->spec.batch_size),
                                (unsigned)(at % s->spec.batch_size), (unsigned)batches,
                                (unsigned)n);
    t.generation = s->generation;
    assert_int_equal(dpp_ckpt_token_pack(&t, s->token_key, out), 0);
}

/* Every rank's rows of the current plan (each at most once with seen). */
static void take_all(const dpp_session_t *s, uint64_t per_file, uint8_t *seen)
{
    for (size_t i = 0; i < s->nsplits; i++) {
        const dpp_split_t *sp = &s->splits[i];
        uint64_t lo = sp->out_take ? sp->out_skip : 0;
        mark_rows(sp, lo, lo + dpp_split_rows(sp), per_file, seen);
    }
}

/* Each rank's rows in the current plan are within one of the others' (the
 * remainder "pad" deals them so: equal padded batches). */
static void assert_even(const dpp_session_t *s)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned r = 0; r < s->spec.consumers; r++) {
        uint64_t n = dpp_session_rank_records(s, r);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
    }
    assert_true(hi - lo <= 1);
    assert_int_equal(s->gen_pad_batches, (hi + s->spec.batch_size - 1) / s->spec.batch_size);
}

/* A copy of s's plan (the caller frees it). */
static dpp_split_t *plan_copy(const dpp_session_t *s)
{
    dpp_split_t *copy = dpp_xcalloc(s->nsplits + 1, sizeof *copy);
    memcpy(copy, s->splits, s->nsplits * sizeof *copy);
    return copy;
}

/* s's plan deals the rows of plan[0..n) to the same ranks in the same order. */
static void assert_plan_equal(const dpp_split_t *plan, size_t n, const dpp_session_t *s)
{
    assert_int_equal(s->nsplits, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(plan[i].file, s->splits[i].file);
        assert_int_equal(plan[i].rank, s->splits[i].rank);
        assert_int_equal(plan[i].seq, s->splits[i].seq);
        assert_int_equal(plan[i].out_skip, s->splits[i].out_skip);
        assert_int_equal(plan[i].out_take, s->splits[i].out_take);
        assert_int_equal(plan[i].record_skip, s->splits[i].record_skip);
        assert_int_equal(plan[i].record_count, s->splits[i].record_count);
    }
}

static void test_reshape(void **state)
{
    (void)state;
    const uint64_t per_file = 37;
    dpp_session_t *s = make_r(5, 2, 4, 100, "pad");
    index_all(s, per_file);
    uint8_t seen[5 * 37] = {0}, tokens[6 * DPP_CKPT_TOKEN_SIZE];
    char why[512];
    /* 4 ranks read 40% (18 of their 46-47 rows), then 3 ranks */
    for (unsigned r = 0; r < 4; r++)
        take_rows(s, r, 18, per_file, seen, tokens + r * DPP_CKPT_TOKEN_SIZE);
    assert_int_equal(dpp_session_reshape(s, tokens, 3, 3, s->generation + 1, why, sizeof why), DPP_ETOKEN);
    assert_non_null(strstr(why, "3 tokens for session s1's 4 ranks"));
    int rc = dpp_session_reshape(s, tokens, 4, 3, s->generation + 1, why, sizeof why);
    if (rc)
        fprintf(stderr, "reshape: %s\n", why);
    assert_int_equal(rc, 0);
    assert_int_equal(s->spec.consumers, 3);
    assert_int_equal(s->generation, 1);
    assert_int_equal(s->epoch, 0);
    assert_counts(s, s->nsplits, 0, 0, 0);
    assert_even(s);
    /* the same plan when made again (a rollback to the epoch, a replay) */
    size_t n = s->nsplits;
    dpp_split_t *again = plan_copy(s);
    dpp_session_set_epoch(s, 0);
    assert_plan_equal(again, n, s);
    free(again);
    /* an old world's token no longer resumes */
    dpp_ckpt_token_t t;
    dpp_token_plan_t plan;
    assert_int_equal(dpp_session_check_token(s, tokens, DPP_CKPT_TOKEN_SIZE, 0, 0, 1, &t, &plan,
                                             why, sizeof why),
                     DPP_ETOKEN);
    assert_non_null(strstr(why, "generation: the token says 0, session s1 is at generation 1"));
    /* the 3 ranks read 9 rows each, then 6 ranks read the rest */
    for (unsigned r = 0; r < 3; r++)
        take_rows(s, r, 9, per_file, seen, tokens + r * DPP_CKPT_TOKEN_SIZE);
    for (unsigned r = 0; r < 3; r++) { /* they are tokens of this plan */
        const uint8_t *raw = tokens + r * DPP_CKPT_TOKEN_SIZE;
        assert_int_equal(dpp_ckpt_token_parse(raw, DPP_CKPT_TOKEN_SIZE, &t, NULL, 0), 0);
        rc = dpp_session_check_token(s, raw, DPP_CKPT_TOKEN_SIZE, r, 0, t.seq, &t, &plan, why,
                                     sizeof why);
        if (rc)
            fprintf(stderr, "token %u: %s\n", r, why);
        assert_int_equal(rc, 0);
    }
    assert_int_equal(dpp_session_reshape(s, tokens, 3, 6, s->generation + 1, why, sizeof why), 0);
    assert_int_equal(s->generation, 2);
    assert_int_equal(s->nchain, 2);
    assert_even(s);
    take_all(s, per_file, seen);
    for (size_t i = 0; i < sizeof seen; i++)
        assert_int_equal(seen[i], 1); /* every row exactly once */
    /* the next epoch is planned for 6 ranks as usual */
    consume_all(s);
    assert_int_equal(s->epoch, 1);
    assert_int_equal(s->spec.consumers, 6);
    uint64_t total = 0;
    for (unsigned r = 0; r < 6; r++)
        total += dpp_session_rank_records(s, r);
    assert_int_equal(total, 5 * per_file);
    /* a resume in a later epoch (rank 5 had nothing yet) starts a new chain */
    memset(seen, 0, sizeof seen);
    for (unsigned r = 0; r < 6; r++)
        take_rows(s, r, r == 5 ? 0 : 2, per_file, seen, tokens + r * DPP_CKPT_TOKEN_SIZE);
    assert_int_equal(dpp_session_reshape(s, tokens, 6, 2, s->generation + 1, why, sizeof why), 0);
    assert_int_equal(s->generation, 3);
    assert_int_equal(s->nchain, 1); /* a new epoch's chain */
    assert_int_equal(s->base_consumers, 6);
    take_all(s, per_file, seen);
    for (size_t i = 0; i < sizeof seen; i++)
        assert_int_equal(seen[i], 1);
    dpp_session_free(s);
}

/* A session resumed at other world sizes, snapshot (compaction) and
 * replayed: the same world, generation and plan, the same splits consumed;
 * in the next epoch too, whose snapshot still carries the resumes. */
static void assert_replays_to(dpp_journal_rec_t *recs, size_t n, const dpp_session_t *s)
{
    dpp_master_t *m = dpp_xcalloc(1, sizeof *m);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(dpp_master_replay_record(m, recs[i].type, recs[i].payload, recs[i].len),
                         0);
        free((void *)recs[i].payload);
    }
    free(recs);
    assert_int_equal(m->nsessions, 1);
    const dpp_session_t *r = m->sessions[0];
    assert_int_equal(r->state, s->state);
    assert_int_equal(r->epoch, s->epoch);
    assert_int_equal(r->generation, s->generation);
    assert_int_equal(r->spec.consumers, s->spec.consumers);
    assert_int_equal(r->nchain, s->nchain);
    for (size_t c = 0; c < s->nchain; c++)
        assert_int_equal(r->chain[c].generation, s->chain[c].generation);
    assert_int_equal(r->gen_epoch, s->gen_epoch);
    assert_int_equal(r->gen_pad_batches, s->gen_pad_batches);
    assert_int_equal(r->nsplits, s->nsplits);
    for (size_t i = 0; i < s->nsplits; i++) {
        assert_int_equal(r->splits[i].rank, s->splits[i].rank);
        assert_int_equal(r->splits[i].record_skip, s->splits[i].record_skip);
        assert_int_equal(r->splits[i].out_skip, s->splits[i].out_skip);
        assert_int_equal(r->splits[i].out_take, s->splits[i].out_take);
        assert_int_equal(r->splits[i].state == SPLIT_CONSUMED,
                         s->splits[i].state == SPLIT_CONSUMED);
    }
    dpp_session_free(m->sessions[0]);
    free(m->sessions);
    free(m->by_id);
    free(m);
}

static void replay_equal(dpp_session_t *s)
{
    dpp_journal_rec_t *recs = NULL;
    size_t n = 0, cap = 0;
    dpp_master_snapshot_session(s, &recs, &n, &cap);
    assert_replays_to(recs, n, s);
}

static void test_reshape_journal(void **state)
{
    (void)state;
    dpp_session_t *s = make_r(4, 2, 4, 100, "pad");
    index_all(s, 30);
    uint8_t seen[4 * 30] = {0}, tokens[4 * DPP_CKPT_TOKEN_SIZE];
    char why[512];
    for (unsigned r = 0; r < 4; r++)
        take_rows(s, r, 11, 30, seen, tokens + r * DPP_CKPT_TOKEN_SIZE);
    assert_int_equal(dpp_session_reshape(s, tokens, 4, 3, s->generation + 1, why, sizeof why), 0);
    dpp_session_consumed(s, s->rank_first[1], 0); /* rank 1's first split came */
    replay_equal(s);
    for (unsigned r = 0; r < 3; r++)
        take_rows(s, r, 3, 30, seen, tokens + r * DPP_CKPT_TOKEN_SIZE);
    assert_int_equal(dpp_session_reshape(s, tokens, 3, 2, s->generation + 1, why, sizeof why), 0);
    replay_equal(s);
    consume_all(s); /* epoch 1, planned for 2 ranks */
    assert_int_equal(s->epoch, 1);
    dpp_session_consumed(s, 0, 0);
    replay_equal(s);
    dpp_session_free(s);
}

/* What the master journals for an elastic resume (rpc_client.c), appended
 * to recs[0..*n), cap *cap, and then applies. */
static void journal_reshape(dpp_session_t *s, const uint8_t *tokens, unsigned n_old,
                            unsigned n_new, dpp_journal_rec_t **recs, size_t *n, size_t *cap)
{
    char why[512];
    Dpp__JournalReshape jr = DPP__JOURNAL_RESHAPE__INIT;
    jr.session_id = s->id;
    jr.epoch = s->epoch;
    jr.consumers = n_new;
    jr.tokens.data = (uint8_t *)tokens;
    jr.tokens.len = (size_t)n_old * DPP_CKPT_TOKEN_SIZE;
    jr.generation = s->generation + 1;
    *recs = dpp_xrealloc(*recs, (*cap = *n + 1) * sizeof **recs);
    (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_RESHAPE, &jr.base);
    int rc = dpp_session_reshape(s, tokens, n_old, n_new, jr.generation, why, sizeof why);
    if (rc)
        fprintf(stderr, "reshape: %s\n", why);
    assert_int_equal(rc, 0);
}

/* The same for rank r going back to the start of the re-planned epoch. */
static void journal_rejoin(dpp_session_t *s, unsigned r, dpp_journal_rec_t **recs, size_t *n,
                           size_t *cap)
{
    Dpp__JournalResume jr = DPP__JOURNAL_RESUME__INIT;
    jr.session_id = s->id;
    jr.rank = r;
    jr.epoch = s->gen_epoch;
    jr.generation = s->generation;
    *recs = dpp_xrealloc(*recs, (*cap = *n + 1) * sizeof **recs);
    (*recs)[(*n)++] = dpp_master_pack_rec(DPP_J_RESUME, &jr.base);
    assert_int_equal(dpp_session_resume(s, r, s->gen_epoch, 0), 0);
}

/* A world made by an elastic resume dies before its first checkpoint and
 * is started again from the same tokens (docs/guarantees.md): at another
 * world size the resume is made anew in place of its chain entry, at the
 * same size each rank that had read goes back alone; either way the rows
 * are those of resuming once, and a replay of the journal (as written, and
 * as a snapshot whose chain skips generations) makes the same session. */
static void test_reshape_again(void **state)
{
    (void)state;
    const uint64_t per_file = 37;
    const size_t T = DPP_CKPT_TOKEN_SIZE;
    dpp_session_t *s = make_r(5, 2, 4, 100, "pad");
    index_all(s, per_file);
    dpp_journal_rec_t *recs = NULL;
    size_t nrec = 0, cap = 0;
    dpp_master_snapshot_session(s, &recs, &nrec, &cap); /* the session and its indexes */
    uint8_t seen[5 * 37] = {0}, before[sizeof seen];
    uint8_t t4[4 * DPP_CKPT_TOKEN_SIZE], t2[2 * DPP_CKPT_TOKEN_SIZE];
    char why[512];
    for (unsigned r = 0; r < 4; r++)
        take_rows(s, r, 18, per_file, seen, t4 + r * T);
    memcpy(before, seen, sizeof seen);
    journal_reshape(s, t4, 4, 3, &recs, &nrec, &cap);
    size_t n3 = s->nsplits;
    dpp_split_t *p3 = plan_copy(s);
    assert_ptr_equal(dpp_session_chain_find(s, t4, sizeof t4), &s->chain[0]);
    assert_null(dpp_session_chain_find(s, t4, 3 * T));

    /* the 3 ranks read (rank 0 a whole split) and die: rank 0 went on, the
     * others would be ranks of this world opening late */
    for (unsigned r = 0; r < 3; r++)
        assert_false(dpp_session_rank_went_on(s, r));
    dpp_session_consumed(s, s->rank_first[0], 0);
    Dpp__JournalConsumed jc = DPP__JOURNAL_CONSUMED__INIT;
    jc.session_id = s->id;
    jc.split_id = (uint32_t)s->rank_first[0];
    jc.generation = s->generation;
    recs = dpp_xrealloc(recs, (cap = nrec + 1) * sizeof *recs);
    recs[nrec++] = dpp_master_pack_rec(DPP_J_CONSUMED, &jc.base);
    assert_true(dpp_session_rank_went_on(s, 0));
    assert_false(dpp_session_rank_went_on(s, 1));
    /* started again at 3 ranks: rank 0 goes back, and the plan is the same */
    journal_rejoin(s, 0, &recs, &nrec, &cap);
    assert_false(dpp_session_rank_went_on(s, 0));
    assert_counts(s, n3, 0, 0, 0);
    assert_plan_equal(p3, n3, s);
    assert_int_equal(s->generation, 1);

    /* it dies again; started at 2 ranks from the same tokens (refused as
     * "generation 0, the session is at 1" before): made anew, every row of
     * the rest once */
    dpp_session_consumed(s, s->rank_first[1], 0);
    journal_reshape(s, t4, 4, 2, &recs, &nrec, &cap);
    assert_int_equal(s->generation, 2);
    assert_int_equal(s->nchain, 1);
    assert_int_equal(s->chain[0].generation, 2);
    assert_int_equal(s->chain[0].n_new, 2);
    assert_int_equal(s->spec.consumers, 2);
    assert_counts(s, s->nsplits, 0, 0, 0);
    assert_even(s);
    take_all(s, per_file, seen);
    for (size_t i = 0; i < sizeof seen; i++)
        assert_int_equal(seen[i], 1);
    memcpy(seen, before, sizeof seen); /* the 4 ranks' rows only */
    /* the journal as written replays to the same session */
    dpp_journal_rec_t *copy = dpp_xcalloc(nrec, sizeof *copy);
    for (size_t i = 0; i < nrec; i++) {
        copy[i] = recs[i];
        uint8_t *payload = dpp_xcalloc(recs[i].len + 1, 1);
        memcpy(payload, recs[i].payload, recs[i].len);
        copy[i].payload = payload;
    }
    assert_replays_to(copy, nrec, s);

    /* the 2 ranks checkpoint, 6 resume from them, then the job goes back
     * to the first tokens at 3 ranks: the plan of resuming from them once */
    for (unsigned r = 0; r < 2; r++)
        take_rows(s, r, 5, per_file, seen, t2 + r * T);
    journal_reshape(s, t2, 2, 6, &recs, &nrec, &cap);
    assert_int_equal(s->nchain, 2);
    replay_equal(s);
    journal_reshape(s, t4, 4, 3, &recs, &nrec, &cap);
    assert_int_equal(s->generation, 4);
    assert_int_equal(s->nchain, 1);
    assert_int_equal(s->chain[0].generation, 4);
    assert_plan_equal(p3, n3, s);
    replay_equal(s); /* a snapshot's chain: generation 0, then 4 */
    assert_replays_to(recs, nrec, s);
    /* the 2-rank world's tokens are of a plan no longer in the chain */
    assert_int_equal(dpp_session_reshape(s, t2, 2, 6, 0, why, sizeof why), DPP_ETOKEN);

    /* the 3-rank world reads into epoch 1 and dies; its ranks start again
     * from the first tokens, in any order: back to the re-planned epoch */
    consume_all(s);
    assert_int_equal(s->epoch, 1);
    for (unsigned r = 0; r < 3; r++)
        assert_true(dpp_session_rank_went_on(s, r));
    unsigned order[3] = {2, 0, 1};
    for (unsigned i = 0; i < 3; i++) {
        assert_true(dpp_session_rank_went_on(s, order[i]));
        assert_int_equal(dpp_session_resume(s, order[i], s->gen_epoch, 0), 0);
        assert_int_equal(s->epoch, 0);
    }
    assert_counts(s, n3, 0, 0, 0);
    assert_plan_equal(p3, n3, s);
    free(p3);
    dpp_session_free(s);
}

/* After an elastic resume the client learns the rank's rows in the
 * re-planned epoch and in the epochs after it (AttachReply rank_records,
 * rest_rank_records): those a plan of the next epoch gives. */
static void test_reshape_rank_records(void **state)
{
    (void)state;
    const char *remainders[] = {"keep", "drop", "pad"};
    for (size_t k = 0; k < 3; k++) {
        dpp_session_t *s = make_r(5, 2, 4, 100, remainders[k]);
        index_all(s, 37);
        uint8_t seen[5 * 37] = {0}, tokens[4 * DPP_CKPT_TOKEN_SIZE];
        char why[512];
        uint64_t left = 0; /* of the 4 ranks' plan, after what they read */
        for (unsigned r = 0; r < 4; r++) {
            left += dpp_session_rank_records(s, r) - (9 + r);
            take_rows(s, r, 9 + r, 37, seen, tokens + r * DPP_CKPT_TOKEN_SIZE);
        }
        assert_int_equal(dpp_session_reshape(s, tokens, 4, 3, 1, why, sizeof why), 0);
        uint64_t later[3], rest = 0;
        for (unsigned r = 0; r < 3; r++) {
            later[r] = dpp_session_plain_rank_records(s, r);
            rest += dpp_session_rank_records(s, r);
        }
        /* "drop": equal full batches, fewer than 3 x 4 rows left out */
        assert_int_equal(rest, left - (k == 1 ? left % (3 * 4) : 0));
        consume_all(s);
        assert_int_equal(s->epoch, 1);
        for (unsigned r = 0; r < 3; r++) {
            assert_int_equal(later[r], dpp_session_rank_records(s, r));
            assert_int_equal(dpp_session_plain_rank_records(s, r), later[r]);
        }
        dpp_session_free(s);
    }
}

/* An elastic resume of a mixture (remainder "drop", always): the rest of
 * the epoch is dealt by rows, every row of it at most once and fewer than
 * N' x batch_size left out (docs/spec.md#mixtures). 2 sources of 2 files
 * of 40 records, window 1 (2 + 2 rows), 2 ranks read 10 rows, 3 resume. */
static void test_reshape_mixture(void **state)
{
    (void)state;
    const char *json = "{\"batch_size\":4,\"epochs\":1,\"consumers\":2,\"split_rows\":100,"
                       "\"mixture\":{\"window\":1},\"sources\":[{\"table\":\"a\",\"weight\":1},"
                       "{\"table\":\"b\",\"weight\":1}],\"features\":{\"sparse\":[{\"name\":"
                       "\"c1\"}]},\"label\":{\"name\":\"label\"}}";
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN], why[512];
    if (dpp_spec_parse(json, strlen(json), &spec, err, sizeof err) != 0)
        fprintf(stderr, "spec: %s\n", err);
    assert_int_equal(spec.nsources, 2);
    char **files = dpp_xcalloc(4, sizeof *files), **tables = dpp_xcalloc(2, sizeof *tables);
    uint32_t source[4] = {0, 0, 1, 1};
    for (size_t i = 0; i < 4; i++) {
        char name[48];
        snprintf(name, sizeof name, "/t/%c/part-%05zu", i < 2 ? 'a' : 'b', i);
        files[i] = dpp_xstrdup(name);
    }
    dpp_session_t *s = dpp_session_new("s1", &spec, dpp_xstrdup("/t/a"), files, 4);
    tables[0] = s->table_path;
    tables[1] = dpp_xstrdup("/t/b");
    dpp_session_set_sources(s, tables, source);
    index_all(s, 40);
    assert_int_equal(dpp_session_rank_records(s, 0), 80);
    uint8_t seen[4 * 40] = {0}, tokens[2 * DPP_CKPT_TOKEN_SIZE];
    for (unsigned r = 0; r < 2; r++)
        take_rows(s, r, 10, 40, seen, tokens + r * DPP_CKPT_TOKEN_SIZE);
    assert_int_equal(dpp_session_reshape(s, tokens, 2, 3, 1, why, sizeof why), 0);
    take_all(s, 40, seen); /* fails on a row twice */
    size_t missing = 0;
    for (size_t i = 0; i < sizeof seen; i++)
        missing += !seen[i];
    assert_true(missing < 3 * 4);
    assert_int_equal(missing, (160 - 20) % (3 * 4)); /* 140 rows: 3 x 44, 8 left out */
    for (unsigned r = 0; r < 3; r++)
        assert_int_equal(dpp_session_rank_records(s, r), 44);
    dpp_session_free(s);
}

static void test_token_key_journal(void **state)
{
    (void)state;
    dpp_session_t *s = make(2, 1, 1, 10);
    dpp_journal_rec_t rec = dpp_master_session_rec(s);
    dpp_master_t *m = dpp_xcalloc(1, sizeof *m);
    assert_int_equal(dpp_master_replay_record(m, rec.type, rec.payload, rec.len), 0);
    assert_int_equal(m->nsessions, 1);
    assert_memory_equal(m->sessions[0]->token_key, s->token_key, DPP_CKPT_KEY_LEN);
    assert_int_equal(m->sessions[0]->token_key_unsaved, 0);
    free((void *)rec.payload);

    /* the same record without its key */
    rec = dpp_master_session_rec(s);
    Dpp__JournalSession *js = dpp__journal_session__unpack(NULL, rec.len, rec.payload);
    assert_non_null(js);
    free((void *)rec.payload);
    js->token_key.len = 0;
    dpp_journal_rec_t old = dpp_master_pack_rec(DPP_J_SESSION, &js->base);
    dpp__journal_session__free_unpacked(js, NULL);
    dpp_master_t *m2 = dpp_xcalloc(1, sizeof *m2);
    assert_int_equal(dpp_master_replay_record(m2, old.type, old.payload, old.len), 0);
    dpp_session_t *r = m2->sessions[0];
    assert_int_equal(r->token_key_unsaved, 1);
    assert_memory_not_equal(r->token_key, s->token_key, DPP_CKPT_KEY_LEN);
    rec = dpp_master_session_rec(s); /* journaled later, with a key */
    assert_int_equal(dpp_master_replay_record(m2, rec.type, rec.payload, rec.len), 0);
    assert_int_equal(m2->nsessions, 1);
    assert_int_equal(r->token_key_unsaved, 0);
    assert_memory_equal(r->token_key, s->token_key, DPP_CKPT_KEY_LEN);
    /* once saved, another record does not replace it */
    uint8_t kept[DPP_CKPT_KEY_LEN];
    memcpy(kept, r->token_key, sizeof kept);
    free((void *)rec.payload);
    s->token_key[0] ^= 0xff;
    rec = dpp_master_session_rec(s);
    assert_int_equal(dpp_master_replay_record(m2, rec.type, rec.payload, rec.len), 0);
    assert_memory_equal(r->token_key, kept, DPP_CKPT_KEY_LEN);
    free((void *)rec.payload);
    free((void *)old.payload);
    for (dpp_master_t *x = m; x; x = x == m ? m2 : NULL) {
        for (size_t i = 0; i < x->nsessions; i++)
            dpp_session_free(x->sessions[i]);
        free(x->sessions);
        free(x->by_id);
        free(x);
    }
    dpp_session_free(s);
}

/* A mixture whose epoch would be planned as more splits than a plan may
 * hold (exhausted "repeat": a 1-record source read through once per
 * window of a 1.5M-record one) fails at planning, naming the source and
 * what to change, instead of planning millions of splits on the loop
 * thread; the same spec over a smaller large source is planned. */
static void test_mixture_plan_bound(void **state)
{
    (void)state;
    static const char spec_json[] =
        "{\"batch_size\":2,\"mixture\":{\"window\":1,\"exhausted\":\"repeat\"},"
        "\"features\":{\"sparse\":[{\"name\":\"c1\"}]},\"sources\":[{\"table\":\"a\","
        "\"weight\":1},{\"table\":\"b\",\"weight\":1}]}";
    const uint64_t large[2] = {1500000, 1000};
    for (int k = 0; k < 2; k++) {
        dpp_spec_t spec;
        char err[DPP_SPEC_ERRLEN];
        assert_int_equal(dpp_spec_parse(spec_json, strlen(spec_json), &spec, err, sizeof err), 0);
        char **files = dpp_xcalloc(2, sizeof *files);
        files[0] = dpp_xstrdup("/a/part-0");
        files[1] = dpp_xstrdup("/b/part-0");
        dpp_session_t *s = dpp_session_new("s-mix", &spec, dpp_xstrdup("/a"), files, 2);
        char **tables = dpp_xcalloc(2, sizeof *tables);
        tables[0] = s->table_path;
        tables[1] = dpp_xstrdup("/b");
        const uint32_t file_source[2] = {0, 1};
        dpp_session_set_sources(s, tables, file_source);
        /* TFRecord indexes cut every split_rows (65536) records */
        const uint64_t records[2] = {1, large[k]};
        for (size_t i = 0; i < 2; i++) {
            size_t n = (size_t)((records[i] + 65535) / 65536) + 1;
            uint64_t *bounds = dpp_xcalloc(n, sizeof *bounds);
            for (size_t b = 0; b < n; b++)
                bounds[b] = 100 * b;
            dpp_session_file_indexed(s, i, records[i], bounds, n);
            free(bounds);
        }
        if (k == 0) {
            assert_int_equal(s->state, SESSION_FAILED);
            assert_non_null(s->error);
            if (strstr(s->error, "mixture: an epoch for 1 ranks would be planned as up to "
                                 "4500023 splits, more than the 4194304 an epoch's plan may "
                                 "hold: 1500000 windows per rank, and source 0 (table a, 1 "
                                 "records, 1 of each window) read through 1500000 times") == NULL)
                fail_msg("%s", s->error);
            assert_int_equal(s->nsplits, 0);
        } else {
            assert_int_equal(s->state, SESSION_RUNNING);
            assert_int_equal(s->nsplits, 2 * 1000); /* a row of each source a window */
        }
        dpp_session_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planning),
        cmocka_unit_test(test_all_empty_is_done),
        cmocka_unit_test(test_ranks),
        cmocka_unit_test(test_epoch_turnover),
        cmocka_unit_test(test_release_worker),
        cmocka_unit_test(test_shuffle_plans),
        cmocka_unit_test(test_epoch_held_for_reports),
        cmocka_unit_test(test_held_back),
        cmocka_unit_test(test_pad_batches),
        cmocka_unit_test(test_rank_reports),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_token_key),
        cmocka_unit_test(test_check_token),
        cmocka_unit_test(test_token_key_journal),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_reshape_journal),
        cmocka_unit_test(test_reshape_again),
        cmocka_unit_test(test_reshape_rank_records),
        cmocka_unit_test(test_reshape_mixture),
        cmocka_unit_test(test_mixture_plan_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
