/* SPDX-License-Identifier: Apache-2.0 */
/* The master's exactly-once leasing rules (lease.c), driven without
 * sockets: re-leasing what a lost worker held, fencing of revoked leases,
 * the lease window, equal batches per rank, resume, and a randomised run of
 * workers that come, go and answer late. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/log.h"
#include "dpp/error.h"
#include "master/lease.h"
#include "master/master_internal.h"
#include "master/session.h"
#include "session_fixture.h"

/* The grants' clock; clients attach at it. */
#define NOW 1000000

/* A master with no connections, journal or listener: the rules only need
 * its sessions and counters. */
typedef struct fixture {
    dpp_master_t m;
} fixture_t;

static void fixture_init(fixture_t *fx)
{
    memset(fx, 0, sizeof *fx);
}

static void fixture_add(fixture_t *fx, dpp_session_t *s)
{
    dpp_master_add_session(&fx->m, s);
}

static void fixture_close(fixture_t *fx)
{
    for (size_t i = 0; i < fx->m.nsessions; i++)
        dpp_session_free(fx->m.sessions[i]);
    free(fx->m.sessions);
    free(fx->m.by_id);
}

/* Indexes file i with records[i] records, split_rows to a range. */
static void index_files(dpp_session_t *s, const uint64_t *records)
{
    for (size_t i = 0; i < s->nfiles; i++) {
        uint64_t bounds[64];
        size_t n = 0;
        for (uint64_t r = 0; r < records[i]; r += s->spec.split_rows)
            bounds[n++] = r * 100;
        bounds[n++] = records[i] * 100;
        dpp_session_file_indexed(s, i, records[i], bounds, n);
    }
    assert_int_equal(s->state, SESSION_RUNNING);
}

static void index_uniform(dpp_session_t *s, uint64_t records)
{
    uint64_t *r = dpp_xcalloc(s->nfiles, sizeof *r);
    for (size_t i = 0; i < s->nfiles; i++)
        r[i] = records;
    index_files(s, r);
    free(r);
}

static void attach_all(dpp_session_t *s)
{
    for (unsigned r = 0; r < s->spec.consumers; r++)
        s->rank_seen_ms[r] = NOW;
}

/* What one LeaseRequest of worker for up to max tasks would get: chosen
 * and taken. picks: [max]. Returns how many. */
static size_t grant(fixture_t *fx, uint64_t worker, size_t max, dpp_lease_pick_t *picks)
{
    /* index tasks first, as a worker with max split slots gets them */
    size_t n = dpp_master_choose_leases(&fx->m, NOW, picks, max, 0, NULL);
    if (n < max)
        n += dpp_master_choose_leases(&fx->m, NOW, picks + n, 0, max - n, NULL);
    for (size_t k = 0; k < n; k++)
        dpp_master_lease_take(&fx->m, &picks[k], worker);
    return n;
}

static size_t grant_any(fixture_t *fx, uint64_t worker, size_t max)
{
    dpp_lease_pick_t picks[64];
    assert_true(max <= 64);
    return grant(fx, worker, max, picks);
}

/* The worker holding split i's lease reports it done and it is produced
 * (its rows counted, as the SPLIT_DONE handler does). */
static void produce(fixture_t *fx, dpp_session_t *s, size_t i)
{
    dpp_session_t *got = NULL;
    size_t split = 0;
    const dpp_split_t *sp = &s->splits[i];
    assert_int_equal(dpp_master_split_done(&fx->m, s->id, (uint32_t)i, sp->lease.lease_id,
                                           sp->lease.worker_id, &got, &split),
                     DPP_SPLIT_DONE_PRODUCED);
    assert_ptr_equal(got, s);
    assert_int_equal(split, i);
    s->rows_produced += sp->record_count;
    dpp_master_split_produced(s, i, sp->record_count);
}

/* Split i's client acknowledges it; returns 1 when that counted. */
static int consume(fixture_t *fx, dpp_session_t *s, size_t i)
{
    dpp_session_t *got =
        dpp_master_consumed_split(&fx->m, s->id, s->epoch, (uint32_t)i, s->splits[i].rank, 0);
    if (got == NULL)
        return 0;
    assert_ptr_equal(got, s);
    dpp_session_consumed(s, i, 0);
    return 1;
}

static int picked(const dpp_lease_pick_t *picks, size_t n, const dpp_session_t *s, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (picks[k].session == s && !picks[k].index && picks[k].i == i)
            return 1;
    return 0;
}

/* At scale: 1,000 files of 100 splits (100,000 splits, 8 ranks) are
 * indexed and planned, and leased, produced and consumed 64 at a time by
 * workers that come back for more, with some leases lost and re-leased on
 * the way. Grants must cost what they hand out: the files, split positions
 * and cursor moves they look at stay a small multiple of the tasks, and a
 * grant late in the epoch (most splits consumed) looks at no more than an
 * early one. Every split is consumed once. */
static void test_scale(void **state)
{
    (void)state;
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 1000, 1, 8, 10, "keep", "");
    fixture_add(&fx, s);
    enum { RECORDS = 1000, TASKS = 64 };
    dpp_lease_pick_t picks[TASKS];
    size_t indexed = 0;
    uint64_t bounds[RECORDS / 10 + 1];
    for (size_t r = 0; r <= RECORDS / 10; r++)
        bounds[r] = r * 10 * 100;
    while (s->state == SESSION_INDEXING) {
        size_t n = dpp_master_choose_leases(&fx.m, NOW, picks, TASKS, 0, NULL);
        assert_true(n > 0);
        for (size_t k = 0; k < n; k++) {
            dpp_master_lease_take(&fx.m, &picks[k], 1);
            dpp_session_file_indexed(s, picks[k].i, RECORDS, bounds, RECORDS / 10 + 1);
            indexed++;
        }
    }
    assert_int_equal(indexed, 1000);
    assert_int_equal(s->nsplits, 100000);
    assert_true(fx.m.n.grant_scanned <= 2 * 1000);
    attach_all(s);
    for (unsigned r = 0; r < 8; r++)
        s->rank_prefetch[r] = 1000; /* a window wide enough for several grants */
    uint64_t scanned0 = fx.m.n.grant_scanned, steps0 = s->cursor_steps;
    /* splits stay in flight (leased, then produced) for DELAY grants
     * before their clients acknowledge them, as a busy cluster holds
     * hundreds: a grant must not look at them again */
    enum { DELAY = 10 };
    size_t *flight = dpp_xcalloc(DELAY * TASKS, sizeof *flight), nflight = 0, head = 0;
    size_t consumed = 0, round = 0;
    uint64_t early = 0, late = 0;
    while (consumed < s->nsplits) {
        uint64_t before = fx.m.n.grant_scanned + s->cursor_steps;
        size_t n = nflight < DELAY * TASKS - TASKS ? grant(&fx, 2 + round % 16, TASKS, picks) : 0;
        uint64_t cost = fx.m.n.grant_scanned + s->cursor_steps - before;
        if (round == 20)
            early = cost;
        if (consumed > s->nsplits * 9 / 10 && late == 0 && n == TASKS)
            late = cost;
        for (size_t k = 0; k < n; k++) {
            size_t i = picks[k].i;
            if ((round + k) % 97 == 0) { /* lost: back to pending, leased again later */
                dpp_session_set(s, i, SPLIT_PENDING);
                continue;
            }
            produce(&fx, s, i);
            flight[(head + nflight++) % (DELAY * TASKS)] = i;
        }
        /* the oldest grant's splits reach their trainers */
        for (size_t k = 0; k < TASKS && nflight > 0 && (n == 0 || nflight > DELAY * TASKS / 2);
             k++) {
            consumed += consume(&fx, s, flight[head]);
            head = (head + 1) % (DELAY * TASKS);
            nflight--;
        }
        round++;
    }
    free(flight);
    assert_int_equal(s->state, SESSION_DONE);
    uint64_t looked = fx.m.n.grant_scanned - scanned0 + s->cursor_steps - steps0;
    print_message("100,000 splits in %zu grants: %llu entries looked at (%.2f a split); a grant "
                  "early %llu, late %llu\n",
                  round, (unsigned long long)looked, (double)looked / 100000,
                  (unsigned long long)early, (unsigned long long)late);
    assert_true(looked <= 4 * 100000);
    assert_true(early > 0 && early <= 4 * TASKS);
    assert_true(late > 0 && late <= 4 * TASKS);
    fixture_close(&fx);
}

/* 100,000 splits, 8 ranks, 16 workers holding 64 splits each (some
 * leased, some produced, some acknowledged by their clients before their
 * workers reported them), with most of the epoch consumed before: losing
 * every worker puts back exactly the leased and produced splits of each,
 * forgets its missing reports, and looks at the splits in flight, not at
 * the plan (it used to look at all 100,000 splits for every worker). */
static void test_release_cost(void **state)
{
    (void)state;
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 2000, 1, 8, 10, "keep", "");
    fixture_add(&fx, s);
    index_uniform(s, 500); /* 50 splits a file: within index_files' bounds */
    assert_int_equal(s->nsplits, 100000);
    attach_all(s);
    for (unsigned r = 0; r < 8; r++)
        s->rank_prefetch[r] = 100000;
    enum { WORKERS = 16, TASKS = 64 };
    dpp_lease_pick_t picks[TASKS];
    /* most of the epoch goes through first */
    size_t consumed = 0;
    while (consumed < 90000) {
        size_t n = grant(&fx, 100, TASKS, picks);
        assert_int_equal(n, TASKS);
        for (size_t k = 0; k < n; k++) {
            produce(&fx, s, picks[k].i);
            consumed += consume(&fx, s, picks[k].i);
        }
    }
    size_t held[WORKERS + 2] = {0}, reports = 0;
    for (uint64_t w = 2; w < 2 + WORKERS; w++) {
        assert_int_equal(grant(&fx, w, TASKS, picks), TASKS);
        for (size_t k = 0; k < TASKS; k++) {
            size_t i = picks[k].i;
            if (k % 3 == 1) {
                produce(&fx, s, i);
            } else if (k % 3 == 2) { /* the client was faster than the worker's report */
                dpp_session_consumed(s, i, 1);
                reports++;
                continue;
            }
            held[w]++;
        }
    }
    assert_int_equal(s->reports_due, reports);
    /* what an attach tells each rank's client, against a plain scan */
    for (unsigned r = 0; r < 8; r++) {
        int due = 0;
        for (size_t j = 0; j < s->rank_count[r]; j++)
            due |= s->splits[s->rank_first[r] + j].report_due;
        assert_int_equal(dpp_session_rank_reports_due(s, r), due);
    }
    uint64_t scanned0 = s->release_scanned;
    for (uint64_t w = 2; w < 2 + WORKERS; w++) {
        size_t pending = s->counts[SPLIT_PENDING];
        assert_int_equal(dpp_session_release_worker(s, w), held[w]);
        assert_int_equal(s->counts[SPLIT_PENDING], pending + held[w]);
    }
    assert_int_equal(s->counts[SPLIT_LEASED] + s->counts[SPLIT_PRODUCED], 0);
    assert_int_equal(s->reports_due, 0);
    for (size_t i = 0; i < s->nsplits; i++)
        assert_false(s->splits[i].report_due);
    for (unsigned r = 0; r < 8; r++)
        assert_int_equal(dpp_session_rank_reports_due(s, r), 0);
    uint64_t looked = s->release_scanned - scanned0;
    print_message("16 workers lost: %llu split positions looked at\n", (unsigned long long)looked);
    assert_true(looked <= (uint64_t)WORKERS * 2 * WORKERS * TASKS);
    fixture_close(&fx);
}

/* Grants share the ranks out: with 8 ranks attached and wide windows, a
 * grant of 8 splits gives every rank one, grants of 4 take turns (every
 * rank served once in two grants), and a rank with nothing left gives its
 * part to the others. */
static void test_fair_share(void **state)
{
    (void)state;
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 8, 1, 8, 10, "keep", "");
    fixture_add(&fx, s);
    index_uniform(s, 400); /* 320 splits, 40 a rank */
    attach_all(s);
    for (unsigned r = 0; r < 8; r++)
        s->rank_prefetch[r] = 100;
    dpp_lease_pick_t picks[64];
    unsigned per_rank[8] = {0};
    size_t n = grant(&fx, 1, 8, picks);
    assert_int_equal(n, 8);
    for (size_t k = 0; k < n; k++)
        per_rank[s->splits[picks[k].i].rank]++;
    for (unsigned r = 0; r < 8; r++)
        assert_int_equal(per_rank[r], 1);
    memset(per_rank, 0, sizeof per_rank);
    for (int g = 0; g < 2; g++) {
        n = grant(&fx, 2, 4, picks);
        assert_int_equal(n, 4);
        for (size_t k = 0; k < n; k++)
            per_rank[s->splits[picks[k].i].rank]++;
    }
    for (unsigned r = 0; r < 8; r++)
        assert_int_equal(per_rank[r], 1);
    /* rank 3 absent: its share goes to the others */
    s->rank_seen_ms[3] = 0;
    memset(per_rank, 0, sizeof per_rank);
    n = grant(&fx, 3, 14, picks);
    assert_int_equal(n, 14);
    for (size_t k = 0; k < n; k++)
        per_rank[s->splits[picks[k].i].rank]++;
    assert_int_equal(per_rank[3], 0);
    for (unsigned r = 0; r < 8; r++)
        if (r != 3)
            assert_int_equal(per_rank[r], 2);
    fixture_close(&fx);
}

/* A lost worker's leased and produced-but-not-consumed splits go back to
 * pending and are leased again, under new lease ids; consumed ones never;
 * other workers keep theirs. Index tasks go back the same way. */
static void test_release_and_relet(void **state)
{
    (void)state;
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 6, 1, 1, 100, "keep", "\"order\":\"fastest\",");
    fixture_add(&fx, s);
    index_uniform(s, 10);
    attach_all(s);
    assert_int_equal(s->nsplits, 6);
    assert_int_equal(grant_any(&fx, 1, 3), 3); /* splits 0..2 */
    assert_int_equal(grant_any(&fx, 2, 3), 3); /* splits 3..5 */
    assert_int_equal(grant_any(&fx, 3, 8), 0); /* nothing pending: nothing twice */
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(s->splits[i].lease.worker_id, i < 3 ? 1 : 2);
    uint64_t old_lease[6];
    for (size_t i = 0; i < 6; i++)
        old_lease[i] = s->splits[i].lease.lease_id;

    produce(&fx, s, 0); /* produced, its client has not consumed it */
    produce(&fx, s, 1); /* produced and consumed */
    assert_true(consume(&fx, s, 1));
    produce(&fx, s, 3); /* worker 2's */
    assert_int_equal(s->rows_produced, 30);

    assert_int_equal(dpp_master_release_worker(&fx.m, 1), 2);
    assert_int_equal(s->splits[0].state, SPLIT_PENDING);
    assert_int_equal(s->splits[1].state, SPLIT_CONSUMED);
    assert_int_equal(s->splits[2].state, SPLIT_PENDING);
    assert_int_equal(s->splits[3].state, SPLIT_PRODUCED);
    assert_int_equal(s->splits[4].state, SPLIT_LEASED);
    assert_int_equal(fx.m.n.splits_released, 2);
    assert_int_equal(s->rows_produced, 20); /* split 0's rows are made again */

    dpp_lease_pick_t picks[8];
    size_t n = grant(&fx, 3, 8, picks);
    assert_int_equal(n, 2);
    assert_true(picked(picks, n, s, 0));
    assert_true(picked(picks, n, s, 2));
    for (size_t i = 0; i < 6; i++) {
        if (i == 0 || i == 2) {
            assert_int_equal(s->splits[i].lease.worker_id, 3);
            assert_true(s->splits[i].lease.lease_id > old_lease[5]); /* a new lease */
        } else {
            assert_int_equal(s->splits[i].lease.lease_id, old_lease[i]);
        }
    }
    /* a second loss of the same worker gives nothing back; nor does an
     * unknown one */
    assert_int_equal(dpp_master_release_worker(&fx.m, 1), 0);
    assert_int_equal(dpp_master_release_worker(&fx.m, 99), 0);

    /* everything consumed once: the session ends; every acknowledgement
     * after that changes nothing */
    for (size_t i = 0; i < 6; i++) {
        if (s->splits[i].state == SPLIT_LEASED)
            produce(&fx, s, i);
        if (i != 1)
            assert_true(consume(&fx, s, i));
    }
    assert_int_equal(s->state, SESSION_DONE);
    assert_false(consume(&fx, s, 1));

    /* index tasks: leased once, back to pending with their worker */
    dpp_session_t *t = fixture_session("s2", 3, 1, 1, 100, "keep", "");
    fixture_add(&fx, t);
    assert_int_equal(grant(&fx, 4, 8, picks), 3);
    for (size_t k = 0; k < 3; k++) {
        assert_true(picks[k].index);
        assert_ptr_equal(picks[k].session, t);
        assert_int_equal(picks[k].i, k);
    }
    assert_int_equal(grant_any(&fx, 5, 8), 0);
    dpp_session_file_indexed(t, 1, 10, (uint64_t[]){0, 1000}, 2); /* file 1's came back */
    assert_int_equal(dpp_master_release_worker(&fx.m, 4), 2);
    assert_int_equal(grant(&fx, 5, 8, picks), 2);
    assert_int_equal(picks[0].i, 0);
    assert_int_equal(picks[1].i, 2);
    assert_int_equal(t->files[0].index_lease.worker_id, 5);
    fixture_close(&fx);
}

/* A SPLIT_DONE counts only for the split's current lease and the worker
 * holding it; an INDEX_DONE likewise; a consumed acknowledgement only once,
 * from the split's own rank, in the current epoch. */
static void test_fencing(void **state)
{
    (void)state;
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 2, 2, 1, 100, "keep", "");
    fixture_add(&fx, s);
    index_uniform(s, 10);
    attach_all(s);
    dpp_session_t *got;
    size_t split;

    assert_int_equal(grant_any(&fx, 1, 1), 1);
    uint64_t l1 = s->splits[0].lease.lease_id;
    dpp_master_release_worker(&fx.m, 1); /* revoked */
    assert_int_equal(grant_any(&fx, 2, 1), 1);
    uint64_t l2 = s->splits[0].lease.lease_id;
    assert_true(l2 != l1);
    /* the lost worker's answer comes late: ignored, the split stays leased
     * to worker 2 */
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 0, l1, 1, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);
    /* the current lease id from another worker, a lease of another split,
     * an unknown session or split: ignored */
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 0, l2, 1, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 1, l2, 2, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);
    assert_int_equal(dpp_master_split_done(&fx.m, "nope", 0, l2, 2, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 7, l2, 2, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);
    assert_int_equal(s->splits[0].state, SPLIT_LEASED);
    assert_int_equal(s->splits[0].lease.worker_id, 2);
    /* the holder's answer counts, once */
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 0, l2, 2, &got, &split),
                     DPP_SPLIT_DONE_PRODUCED);
    assert_ptr_equal(got, s);
    assert_int_equal(split, 0);
    s->rows_produced += 10;
    dpp_master_split_produced(s, 0, 10);
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 0, l2, 2, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);

    /* the client acknowledges: only from the split's rank, in this epoch,
     * once */
    assert_null(dpp_master_consumed_split(&fx.m, "s1", 0, 0, 1, 0)); /* another rank */
    assert_null(dpp_master_consumed_split(&fx.m, "s1", 1, 0, 0, 0)); /* another epoch */
    assert_null(dpp_master_consumed_split(&fx.m, "s1", 0, 9, 0, 0)); /* no such split */
    assert_null(dpp_master_consumed_split(&fx.m, "s1", 0, 0, 0, 1)); /* another generation */
    assert_true(consume(&fx, s, 0));
    assert_false(consume(&fx, s, 0));
    /* a SPLIT_DONE after the client consumed the split: counters only */
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 0, l2, 2, &got, &split),
                     DPP_SPLIT_DONE_COUNTED);

    /* the last split ends epoch 0; its lease's SPLIT_DONE arrives in epoch
     * 1: counters only, and epoch 1's split is untouched */
    assert_int_equal(grant_any(&fx, 2, 1), 1);
    uint64_t l3 = s->splits[1].lease.lease_id;
    assert_true(consume(&fx, s, 1)); /* the client was faster than the worker */
    assert_int_equal(s->epoch, 1);
    assert_int_equal(s->splits[1].state, SPLIT_PENDING);
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 1, l3, 2, &got, &split),
                     DPP_SPLIT_DONE_COUNTED);
    assert_int_equal(s->splits[1].state, SPLIT_PENDING);
    assert_int_equal(s->counts[SPLIT_PENDING], 2);

    /* a failed session takes no answers */
    assert_int_equal(grant_any(&fx, 2, 1), 1);
    uint64_t l4 = s->splits[0].lease.lease_id;
    dpp_session_fail(s, "test");
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", 0, l4, 2, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);
    assert_int_equal(grant_any(&fx, 2, 8), 0);

    /* index tasks: only the current lease, from its holder */
    dpp_session_t *t = fixture_session("s2", 1, 1, 1, 100, "keep", "");
    fixture_add(&fx, t);
    assert_int_equal(grant_any(&fx, 1, 1), 1);
    uint64_t i1 = t->files[0].index_lease.lease_id;
    dpp_master_release_worker(&fx.m, 1);
    assert_int_equal(grant_any(&fx, 3, 1), 1);
    uint64_t i2 = t->files[0].index_lease.lease_id;
    assert_null(dpp_master_index_lease(&fx.m, "s2", 0, i1, 1));
    assert_null(dpp_master_index_lease(&fx.m, "s2", 0, i2, 1));
    assert_null(dpp_master_index_lease(&fx.m, "s2", 1, i2, 3)); /* no such file */
    assert_null(dpp_master_index_lease(&fx.m, "s1", 0, i2, 3)); /* another session */
    assert_ptr_equal(dpp_master_index_lease(&fx.m, "s2", 0, i2, 3), t);
    dpp_session_file_indexed(t, 0, 10, (uint64_t[]){0, 1000}, 2);
    assert_null(dpp_master_index_lease(&fx.m, "s2", 0, i2, 3)); /* a repeat */
    fixture_close(&fx);
}

/* Order deterministic: a rank's split is leased only within rank_prefetch
 * splits past its first unconsumed one, in plan order; only to ranks whose
 * client is attached; index tasks come first; never more than asked. */
static void test_window(void **state)
{
    (void)state;
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 10, 1, 2, 100, "keep", "");
    fixture_add(&fx, s);
    index_uniform(s, 10);
    attach_all(s);
    assert_int_equal(dpp_session_rank_splits(s, 0), 5);
    size_t f0 = s->rank_first[0], f1 = s->rank_first[1];
    s->rank_prefetch[0] = 1;
    s->rank_prefetch[1] = 2;

    dpp_lease_pick_t picks[64];
    size_t n = grant(&fx, 1, 64, picks);
    size_t want[] = {f0, f0 + 1, f1, f1 + 1, f1 + 2};
    assert_int_equal(n, 5);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(picks[k].i, want[k]);
    assert_int_equal(grant_any(&fx, 1, 64), 0);

    for (size_t i = 0; i < s->nsplits; i++)
        if (s->splits[i].state == SPLIT_LEASED)
            produce(&fx, s, i);
    /* rank 0 acknowledges its second split first: its window stays */
    assert_true(consume(&fx, s, f0 + 1));
    assert_int_equal(grant_any(&fx, 1, 64), 0);
    assert_true(consume(&fx, s, f0));
    n = grant(&fx, 1, 64, picks);
    assert_int_equal(n, 2);
    assert_int_equal(picks[0].i, f0 + 2);
    assert_int_equal(picks[1].i, f0 + 3);

    /* a rank whose client is gone or has not refreshed gets nothing */
    assert_true(consume(&fx, s, f1));
    s->rank_seen_ms[1] = 0;
    assert_int_equal(grant_any(&fx, 1, 64), 0);
    s->rank_seen_ms[1] = NOW - RANK_ABSENT_MS - 1;
    assert_int_equal(grant_any(&fx, 1, 64), 0);
    s->rank_seen_ms[1] = NOW - RANK_ABSENT_MS;
    assert_int_equal(grant(&fx, 1, 64, picks), 1);
    assert_int_equal(picks[0].i, f1 + 3);

    /* index tasks of a session still indexing come first; max is kept */
    dpp_session_t *t = fixture_session("s2", 3, 1, 1, 100, "keep", "");
    fixture_add(&fx, t);
    assert_true(consume(&fx, s, f1 + 1)); /* f1 + 4 comes into reach */
    n = grant(&fx, 1, 2, picks);
    assert_int_equal(n, 2);
    assert_true(picks[0].index && picks[1].index);
    n = grant(&fx, 1, 64, picks);
    assert_int_equal(n, 2);
    assert_true(picks[0].index);
    assert_false(picks[1].index);
    assert_int_equal(picks[1].i, f1 + 4);
    fixture_close(&fx);

    /* order fastest: no window */
    fixture_init(&fx);
    s = fixture_session("s1", 10, 1, 2, 100, "keep", "\"order\":\"fastest\",");
    fixture_add(&fx, s);
    index_uniform(s, 10);
    attach_all(s);
    s->rank_prefetch[0] = s->rank_prefetch[1] = 1;
    assert_int_equal(grant_any(&fx, 1, 64), 10);
    fixture_close(&fx);
}

/* Runs the current epoch to its end: worker 1 takes whatever is leasable,
 * produces it, and each rank's client consumes in plan order. Adds each
 * rank's consumed records to rank_records. */
static void run_epoch(fixture_t *fx, dpp_session_t *s, uint64_t *rank_records)
{
    unsigned epoch = s->epoch;
    for (int round = 0; round < 10000 && s->epoch == epoch && s->state == SESSION_RUNNING;
         round++) {
        dpp_lease_pick_t picks[64];
        size_t n = grant(fx, 1, 64, picks);
        for (size_t k = 0; k < n; k++)
            produce(fx, s, picks[k].i);
        int progress = 0;
        for (unsigned r = 0; r < s->spec.consumers && s->epoch == epoch; r++) {
            size_t i = s->rank_first[r] + dpp_session_rank_cursor(s, r);
            if (dpp_session_rank_cursor(s, r) < dpp_session_rank_splits(s, r) &&
                s->splits[i].state == SPLIT_PRODUCED) {
                uint64_t records = s->splits[i].record_count;
                assert_true(consume(fx, s, i));
                rank_records[r] += records;
                progress = 1;
            }
        }
        assert_true(progress || n > 0);
    }
    assert_true(s->epoch != epoch || s->state != SESSION_RUNNING);
}

/* remainder drop: every rank gets the same whole number of batches in
 * every epoch, whatever the files hold; what a rank is leased is what its
 * client is told it gets. */
static void test_equal_batches(void **state)
{
    (void)state;
    const uint64_t records[] = {7, 13, 10, 3, 9, 1, 12, 0, 5}; /* 60 */
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        fixture_t fx;
        fixture_init(&fx);
        dpp_session_t *s =
            fixture_session("s1", 9, 3, 3, 5, "drop", shuffle ? "\"shuffle\":{\"seed\":11}," : "");
        fixture_add(&fx, s);
        index_files(s, records);
        attach_all(s);
        for (unsigned e = 0; e < 3; e++) {
            uint64_t got[3] = {0};
            uint64_t told[3];
            for (unsigned r = 0; r < 3; r++)
                told[r] = dpp_session_rank_records(s, r);
            run_epoch(&fx, s, got);
            for (unsigned r = 0; r < 3; r++) {
                assert_int_equal(got[r], told[r]);
                assert_int_equal(got[r] % s->spec.batch_size, 0); /* whole batches */
                assert_int_equal(got[r], got[0]);                 /* the same for all */
            }
            assert_int_equal(got[0], 20); /* 60 / 3 = 20: 5 batches each */
        }
        assert_int_equal(s->state, SESSION_DONE);
        fixture_close(&fx);
    }
    /* 55 records for 3 ranks of batch 4: 16 each (4 batches), 7 dropped */
    fixture_t fx;
    fixture_init(&fx);
    const uint64_t fewer[] = {7, 13, 10, 3, 9, 1, 12};
    dpp_session_t *s = fixture_session("s1", 7, 1, 3, 5, "drop", "");
    fixture_add(&fx, s);
    index_files(s, fewer);
    attach_all(s);
    uint64_t got[3] = {0};
    run_epoch(&fx, s, got);
    for (unsigned r = 0; r < 3; r++)
        assert_int_equal(got[r], 16);
    fixture_close(&fx);
}

static size_t rank_in_state(const dpp_session_t *s, unsigned rank, split_state_t st)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nsplits; i++)
        n += s->splits[i].rank == rank && s->splits[i].state == st;
    return n;
}

/* Resume: the rank's splits from the token's position go back to pending
 * and are leased again (the old leases fenced off), those before count as
 * consumed and are never leased again; other ranks keep their leases. An
 * earlier epoch's token rolls the session back to it. */
static void test_resume(void **state)
{
    (void)state;
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 8, 2, 2, 100, "keep", "\"order\":\"fastest\",");
    fixture_add(&fx, s);
    index_uniform(s, 10);
    attach_all(s);
    size_t f0 = s->rank_first[0], f1 = s->rank_first[1];
    assert_int_equal(grant_any(&fx, 1, 64), 8);
    produce(&fx, s, f0);
    produce(&fx, s, f0 + 1);
    produce(&fx, s, f0 + 2);
    assert_true(consume(&fx, s, f0));
    assert_true(consume(&fx, s, f0 + 1));
    uint64_t old = s->splits[f0 + 2].lease.lease_id;

    /* the trainer's token says it had split 0 of rank 0 only */
    assert_int_equal(dpp_session_resume(s, 0, 0, 1), 0);
    assert_int_equal(s->splits[f0].state, SPLIT_CONSUMED);
    assert_int_equal(rank_in_state(s, 0, SPLIT_PENDING), 3);
    assert_int_equal(rank_in_state(s, 1, SPLIT_LEASED), 4);
    dpp_lease_pick_t picks[64];
    size_t n = grant(&fx, 2, 64, picks);
    assert_int_equal(n, 3);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(picks[k].i, f0 + 1 + k);
    assert_false(picked(picks, n, s, f0));
    dpp_session_t *got;
    size_t split;
    assert_int_equal(dpp_master_split_done(&fx.m, "s1", (uint32_t)(f0 + 2), old, 1, &got, &split),
                     DPP_SPLIT_DONE_IGNORED);

    /* finish epoch 0, then rank 1 resumes from its split 2 of epoch 0 */
    for (size_t i = 0; i < s->nsplits && s->epoch == 0; i++) {
        if (s->splits[i].state == SPLIT_LEASED)
            produce(&fx, s, i);
        consume(&fx, s, i);
    }
    assert_int_equal(s->epoch, 1);
    assert_int_equal(dpp_session_resume(s, 1, 0, 2), 0);
    assert_int_equal(s->epoch, 0);
    n = grant(&fx, 3, 64, picks);
    assert_int_equal(n, 2);
    assert_int_equal(picks[0].i, f1 + 2);
    assert_int_equal(picks[1].i, f1 + 3);
    assert_int_equal(rank_in_state(s, 0, SPLIT_CONSUMED), 4);
    fixture_close(&fx);
}

static uint64_t next_rand(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A SPLIT_DONE on its way: sent by worker for (split, lease) of epoch. */
typedef struct done_msg {
    uint64_t worker, lease;
    uint32_t split;
    unsigned epoch;
} done_msg_t;

#define SIM_WORKERS 4
#define SIM_MSGS 256

/* Workers take leases, answer in any order and late, die and are replaced;
 * clients consume what was produced. Every split of every epoch is
 * consumed exactly once, no answer of a dead worker (or of an epoch past)
 * makes a split produced, and no split stays with a dead worker. */
static void simulate(uint64_t seed, int fastest)
{
    fixture_t fx;
    fixture_init(&fx);
    dpp_session_t *s = fixture_session("s1", 12, 3, 3, 4, "keep",
                                       fastest ? "\"order\":\"fastest\",\"shuffle\":{\"seed\":5},"
                                               : "\"shuffle\":{\"seed\":5},");
    fixture_add(&fx, s);
    uint64_t x = seed;
    const uint64_t records[] = {9, 4, 0, 13, 7, 8, 1, 10, 6, 4, 12, 3};
    index_files(s, records);
    attach_all(s);
    uint64_t alive[SIM_WORKERS], next_worker = 1;
    for (int w = 0; w < SIM_WORKERS; w++)
        alive[w] = next_worker++;
    done_msg_t msgs[SIM_MSGS];
    size_t nmsgs = 0;
    unsigned times[64] = {0}; /* consumed per split this epoch */
    size_t nsplits = s->nsplits;
    unsigned epoch = 0;
    int steps = 0;
    while (s->state == SESSION_RUNNING) {
        assert_true(++steps < 200000);
        assert_true(s->nsplits <= 64);
        if (s->epoch != epoch) {
            for (size_t i = 0; i < nsplits; i++)
                assert_int_equal(times[i], 1);
            memset(times, 0, sizeof times);
            nsplits = s->nsplits;
            epoch = s->epoch;
        }
        switch (next_rand(&x) % 6) {
        case 0:
        case 1: { /* a worker asks for leases */
            uint64_t w = alive[next_rand(&x) % SIM_WORKERS];
            dpp_lease_pick_t picks[4];
            size_t n = grant(&fx, w, 1 + next_rand(&x) % 4, picks);
            for (size_t k = 0; k < n && nmsgs < SIM_MSGS; k++)
                msgs[nmsgs++] = (done_msg_t){w, s->splits[picks[k].i].lease.lease_id,
                                             (uint32_t)picks[k].i, s->epoch};
            break;
        }
        case 2: { /* one answer arrives, whichever */
            if (nmsgs == 0)
                break;
            size_t k = next_rand(&x) % nmsgs;
            done_msg_t d = msgs[k];
            msgs[k] = msgs[--nmsgs];
            int dead = 1;
            for (int w = 0; w < SIM_WORKERS; w++)
                dead &= alive[w] != d.worker;
            dpp_session_t *got;
            size_t split;
            dpp_split_done_t r =
                dpp_master_split_done(&fx.m, "s1", d.split, d.lease, d.worker, &got, &split);
            if (dead || d.epoch != s->epoch)
                assert_int_not_equal(r, DPP_SPLIT_DONE_PRODUCED);
            if (r == DPP_SPLIT_DONE_PRODUCED) {
                assert_int_equal(s->splits[split].lease.worker_id, d.worker);
                s->rows_produced += s->splits[split].record_count;
                dpp_master_split_produced(s, split, s->splits[split].record_count);
            }
            break;
        }
        case 3: { /* a client consumes a produced split (in order unless fastest) */
            unsigned r = (unsigned)(next_rand(&x) % s->spec.consumers);
            size_t cur = dpp_session_rank_cursor(s, r), n = dpp_session_rank_splits(s, r);
            for (size_t seq = cur; seq < n; seq++) {
                size_t i = s->rank_first[r] + seq;
                if (s->splits[i].state == SPLIT_PRODUCED) {
                    times[i]++;
                    assert_true(consume(&fx, s, i));
                    break;
                }
                if (!fastest)
                    break;
            }
            break;
        }
        case 4: /* a repeated acknowledgement changes nothing */
            for (size_t i = 0; i < s->nsplits; i++)
                if (s->splits[i].state == SPLIT_CONSUMED) {
                    assert_false(consume(&fx, s, i));
                    break;
                }
            break;
        case 5: /* now and then a worker dies and another takes its place */
            if (next_rand(&x) % 8 == 0) {
                int w = (int)(next_rand(&x) % SIM_WORKERS);
                dpp_master_release_worker(&fx.m, alive[w]);
                alive[w] = next_worker++;
            }
            break;
        }
        /* no leased or produced split is left with a dead worker */
        for (size_t i = 0; i < s->nsplits; i++) {
            const dpp_split_t *sp = &s->splits[i];
            if (sp->state != SPLIT_LEASED && sp->state != SPLIT_PRODUCED)
                continue;
            int held = 0;
            for (int w = 0; w < SIM_WORKERS; w++)
                held |= alive[w] == sp->lease.worker_id;
            assert_true(held);
        }
        /* a worker whose messages were lost for good still gets its
         * splits released when it dies; keep the queue from filling */
        if (nmsgs == SIM_MSGS)
            nmsgs = 0;
    }
    assert_int_equal(s->state, SESSION_DONE);
    assert_int_equal(s->epoch, 2);
    for (size_t i = 0; i < s->nsplits; i++)
        assert_int_equal(times[i], 1);
    fixture_close(&fx);
}

/* The low half of split i's cache key, computed here as a worker does
 * (spec.h), not through lease.c. */
static uint64_t key_of(const dpp_session_t *s, size_t i)
{
    const dpp_split_t *sp = &s->splits[i];
    uint64_t k[2];
    dpp_spec_split_key(s->cache_fp, s->files[sp->file].path, sp->byte_start, sp->byte_end,
                       sp->record_start, sp->range_records, sp->record_skip, sp->record_count, k);
    return k[1];
}

/* What a grant of up to 8 splits would pick for an asker holding held, as
 * a bitmask of split indices; *left: the splits it passed over. */
static unsigned choose_mask(fixture_t *fx, const dpp_u64set_t *held, int idle, size_t *left)
{
    dpp_lease_pick_t picks[8];
    dpp_lease_asker_t a = {.held = held, .idle = idle};
    size_t n = dpp_master_choose_leases(&fx->m, NOW, picks, 0, 8, &a);
    unsigned mask = 0;
    for (size_t k = 0; k < n; k++)
        mask |= 1u << picks[k].i;
    *left = a.left;
    return mask;
}

/* Cache-aware picks over 8 splits, worker A holding splits 2 and 5, B
 * holding 3 (and 5: two holders), C nothing: an asker's held splits come
 * first; a busy one leaves the others' to them; an idle one takes
 * everything; the holders' record forgets a worker that goes away; a spec
 * with "cache": "off" ignores caches. */
static void test_cache_aware(void **state)
{
    (void)state;
    for (int off = 0; off <= 1; off++) {
        fixture_t fx;
        fixture_init(&fx);
        dpp_session_t *s = fixture_session("s1", 8, 1, 1, 100, "keep",
                                           off ? "\"order\":\"fastest\",\"cache\":\"off\","
                                               : "\"order\":\"fastest\",");
        fixture_add(&fx, s);
        index_uniform(s, 100);
        attach_all(s);
        assert_int_equal(s->nsplits, 8);
        peer_t a = {0}, b = {0}, c = {0};
        const size_t ha[] = {2, 5}, hb[] = {3, 5};
        for (size_t k = 0; k < 2; k++) {
            assert_int_equal(dpp_u64set_add(&a.cache_keys, key_of(s, ha[k])), 1);
            assert_int_equal(dpp_u64set_insert(&fx.m.cache_holders, key_of(s, ha[k])), 1);
            assert_int_equal(dpp_u64set_add(&b.cache_keys, key_of(s, hb[k])), 1);
            assert_int_equal(dpp_u64set_insert(&fx.m.cache_holders, key_of(s, hb[k])), 1);
        }
        size_t left;
        dpp_lease_pick_t picks[8];
        dpp_lease_asker_t asker = {.held = &a.cache_keys, .idle = 0};
        size_t n = dpp_master_choose_leases(&fx.m, NOW, picks, 0, 8, &asker);
        if (off) {
            assert_int_equal(n, 8);
            assert_int_equal(picks[0].i, 0); /* plain order */
            assert_int_equal(choose_mask(&fx, &c.cache_keys, 0, &left), 0xff);
            assert_int_equal(left, 0);
        } else {
            /* A busy: 2 and 5 first, then in order without B's 3 */
            assert_int_equal(n, 7);
            assert_int_equal(picks[0].i, 2);
            assert_int_equal(picks[1].i, 5);
            assert_int_equal(picks[2].i, 0);
            assert_int_equal(asker.left, 1);
            assert_false(picked(picks, n, s, 3));
            /* B busy: 3 and 5, without A's 2 */
            assert_int_equal(choose_mask(&fx, &b.cache_keys, 0, &left), 0xff & ~(1u << 2));
            assert_int_equal(left, 1);
            /* C busy leaves 2, 3 and 5; idle, it takes everything */
            assert_int_equal(choose_mask(&fx, &c.cache_keys, 0, &left),
                             0xff & ~(1u << 2 | 1u << 3 | 1u << 5));
            assert_int_equal(left, 3);
            assert_int_equal(choose_mask(&fx, &c.cache_keys, 1, &left), 0xff);
            assert_int_equal(left, 0);
            /* B goes away: only A's 2 and 5 stay with A */
            dpp_master_forget_cache(&fx.m, &b);
            assert_int_equal(fx.m.cache_holders.n, 2);
            assert_int_equal(choose_mask(&fx, &c.cache_keys, 0, &left),
                             0xff & ~(1u << 2 | 1u << 5));
            assert_int_equal(left, 2);
            assert_int_equal(fx.m.n.cache_leases, 4); /* A's two, B's two */
        }
        dpp_u64set_clear(&a.cache_keys);
        dpp_u64set_clear(&b.cache_keys);
        dpp_u64set_clear(&fx.m.cache_holders);
        fixture_close(&fx);
    }
}

static void test_exactly_once_random(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        simulate(seed, 0);
        simulate(seed, 1);
    }
}

int main(void)
{
    dpp_log_set_level(DPP_LOG_ERROR); /* worker_lost lines would flood the output */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_fair_share),
        cmocka_unit_test(test_release_and_relet),
        cmocka_unit_test(test_release_cost),
        cmocka_unit_test(test_fencing),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_equal_batches),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_cache_aware),
        cmocka_unit_test(test_exactly_once_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
