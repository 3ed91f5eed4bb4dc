// SPDX-License-Identifier: Apache-2.0
// The master's per-session and per-rank metric families, rendered from
// sessions built in memory: the per-scrape limit on rank series (running
// sessions first, shared evenly; the rest summed per session), no series for
// finished sessions, and a page that never fails on size (parts dropped and
// counted instead).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "daemon/metrics.h"
#include "master/metrics.h"
#include "master/session.h"

/* Ids as the master makes them: "s" and 16 hex digits. */
#define BIG "s00000000000000b1"
#define SMALL "s00000000000000a2"
/* test_finished_and_order's sessions 0 to 3 */
#define S_INDEXING "s0000000000000000"
#define S_RUNNING "s0000000000000001"
#define S_FAILED "s0000000000000002"
#define S_DONE "s0000000000000003"

/* A session of `consumers` ranks over one file, in state st; every rank's
 * client has reported: rank r took r + 1 batches, waited r ms, one wait in
 * bucket r % 16. */
static dpp_session_t *make(const char *id, unsigned consumers, session_state_t st)
{
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN];
    char json[512];
    snprintf(
        json, sizeof json,
        "{\"table\":\"t\",\"batch_size\":4,\"epochs\":1,\"consumers\":%u,"
        "\"split_rows\":4,\"remainder\":\"keep\",\"features\":{\"sparse\":[{\"name\":\"c1\"}]},"
        "\"label\":{\"name\":\"label\"}}",
        consumers);
    assert_int_equal(dpp_spec_parse(json, strlen(json), &spec, err, sizeof err), 0);
    char **files = dpp_xcalloc(1, sizeof *files);
    files[0] = dpp_xstrdup("/t/part-0");
    dpp_session_t *s = dpp_session_new(id, &spec, dpp_xstrdup("/t"), files, 1);
    if (st != SESSION_INDEXING) {
        uint64_t bounds[2] = {0, 400};
        assert_int_equal(dpp_session_file_indexed(s, 0, 4, bounds, 2), 1);
        assert_int_equal(s->state, SESSION_RUNNING);
    }
    if (st == SESSION_FAILED)
        dpp_session_fail(s, "broken");
    else if (st == SESSION_DONE)
        s->state = SESSION_DONE; /* as after its last split; the splits do not matter here */
    for (unsigned r = 0; r < consumers; r++) {
        dpp_rank_counts_t c = {
            .batches = r + 1, .wait_ns = (uint64_t)r * 1000000u, .open_ns = 10000000000u};
        c.hist[r % 16] = 1;
        dpp_session_report(s, r, 7, &c);
    }
    return s;
}

/* Lines of text that start with prefix. */
static size_t count_lines(const char *text, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);
    for (const char *p = text; *p;) {
        if (strncmp(p, prefix, len) == 0)
            n++;
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        p = nl + 1;
    }
    return n;
}

/* The value of the sample line that starts with `series ` (the name and
 * labels as written), or -1 when there is none. */
static double value_of(const char *text, const char *series)
{
    char pat[300];
    snprintf(pat, sizeof pat, "\n%s ", series);
    const char *p = strstr(text, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

static double dropped(const char *text, const char *family, const char *reason)
{
    char series[256];
    snprintf(series, sizeof series, "dpp_metrics_series_dropped{family=\"%s\",reason=\"%s\"}",
             family, reason);
    return value_of(text, series);
}

/* Every line is a comment or `name{labels} value`, and ends the text with '\n'. */
static void assert_well_formed(const char *text, size_t len)
{
    assert_int_equal(strlen(text), len);
    assert_true(len > 0 && text[len - 1] == '\n');
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        assert_true(strncmp(p, "# HELP dpp_", 11) == 0 || strncmp(p, "# TYPE dpp_", 11) == 0 ||
                    strncmp(p, "dpp_", 4) == 0);
        const char *sp = nl;
        while (sp > p && sp[-1] != ' ')
            sp--;
        assert_true(sp > p && sp < nl);
        p = nl + 1;
    }
}

#define SERIES(family, session, rest) family "{session=\"" session "\"" rest "}"

/* One client attached as 12,000 ranks: 1,000 series one by one, the other
 * 11,000 ranks summed per session, and the page renders (before, the ranks
 * alone passed the 16 MiB cap and /metrics answered 500). */
static void test_many_ranks(void **state)
{
    (void)state;
    dpp_session_t *s = make(BIG, 12000, SESSION_RUNNING);
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    dpp_metrics_build_info(&m, "master");
    assert_int_equal(dpp_master_metrics_sessions(&m, &s, 1, DPP_MASTER_METRICS_RANK_SERIES), 0);
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_well_formed(text, len);
    assert_true(len < 4u * 1024 * 1024);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{"), 1000);
    assert_int_equal(count_lines(text, "dpp_trainer_wait_seconds_count{"), 1000);
    assert_true(value_of(text, SERIES("dpp_trainer_batches_total", BIG, ",rank=\"0\"")) == 1);
    assert_true(value_of(text, SERIES("dpp_trainer_batches_total", BIG, ",rank=\"999\"")) == 1000);
    assert_true(value_of(text, SERIES("dpp_trainer_batches_total", BIG, ",rank=\"1000\"")) == -1);
    /* ranks 1000..11999 took 1001..12000 batches, one wait each */
    assert_true(value_of(text, SERIES("dpp_trainer_rest_ranks", BIG, "")) == 11000);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_batches_total", BIG, "")) ==
                (1001.0 + 12000.0) * 11000.0 / 2);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_wait_seconds_count", BIG, "")) == 11000);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_wait_seconds_bucket", BIG,
                                      ",le=\"+Inf\"")) == 11000);
    assert_true(value_of(text, SERIES("dpp_session_epoch", BIG, "")) == 0);
    assert_true(value_of(text, SERIES("dpp_session_starvation_ratio", BIG, "")) > 0);
    assert_true(dropped(text, "dpp_trainer_wait_seconds", "rank_limit") == 11000);
    assert_true(dropped(text, "dpp_trainer_batches_total", "rank_limit") == 11000);
    assert_true(dropped(text, "dpp_trainer_wait_seconds", "size_cap") == 0);
    assert_true(dropped(text, "dpp_trainer_rest_wait_seconds", "size_cap") == 0);
    assert_true(dropped(text, "dpp_session_epoch", "size_cap") == 0);
    dpp_metrics_close(&m);
    dpp_session_free(s);
}

/* ~10,000 (session, rank) pairs over a master's lifetime: the finished
 * sessions have no series; of the limit, running sessions' ranks come
 * first even when an indexing session was submitted before. */
static void test_finished_and_order(void **state)
{
    (void)state;
    enum { NS = 100, RANKS = 100 };
    dpp_session_t *ss[NS];
    for (int i = 0; i < NS; i++) {
        char id[24];
        snprintf(id, sizeof id, "s%016x", (unsigned)i);
        session_state_t st = i == 0   ? SESSION_INDEXING
                             : i == 1 ? SESSION_RUNNING
                             : i % 2  ? SESSION_DONE
                                      : SESSION_FAILED;
        ss[i] = make(id, RANKS, st);
    }
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    assert_int_equal(dpp_master_metrics_sessions(&m, ss, NS, DPP_MASTER_METRICS_RANK_SERIES), 0);
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_well_formed(text, len);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{"), 2 * RANKS);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"" S_INDEXING "\""),
                     RANKS);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"" S_RUNNING "\""),
                     RANKS);
    assert_null(strstr(text, "session=\"" S_DONE "\""));
    assert_null(strstr(text, "session=\"" S_FAILED "\""));
    assert_int_equal(count_lines(text, "dpp_trainer_rest_"), 0);
    assert_int_equal(count_lines(text, "dpp_session_epoch{"), 2);
    assert_int_equal(count_lines(text, "dpp_session_starvation_ratio{"), 1); /* running only */
    assert_true(dropped(text, "dpp_trainer_batches_total", "rank_limit") == 0);

    /* a limit of 150: the running session gets its 100, the indexing one 50 */
    dpp_metrics_reset(&m);
    assert_int_equal(dpp_master_metrics_sessions(&m, ss, NS, 150), 0);
    text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_well_formed(text, len);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"" S_RUNNING "\""),
                     RANKS);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"" S_INDEXING "\""), 50);
    assert_true(value_of(text, SERIES("dpp_trainer_batches_total", S_INDEXING, ",rank=\"49\"")) ==
                50);
    /* ranks 50..99 took 51..100 batches */
    assert_true(value_of(text, SERIES("dpp_trainer_rest_ranks", S_INDEXING, "")) == 50);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_batches_total", S_INDEXING, "")) ==
                (51 + 100) * 50 / 2);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_ranks", S_RUNNING, "")) == -1);
    assert_true(dropped(text, "dpp_trainer_wait_seconds", "rank_limit") == 50);
    dpp_metrics_close(&m);
    for (int i = 0; i < NS; i++)
        dpp_session_free(ss[i]);
}

/* Running sessions share the limit evenly (a small one passes what it does
 * not need on), so each keeps a sample of its ranks; indexing ones get what
 * is left. */
static void test_shares(void **state)
{
    (void)state;
    dpp_session_t *ss[4] = {make("s000000000000000a", 10, SESSION_RUNNING),
                            make("s000000000000000b", 500, SESSION_RUNNING),
                            make("s000000000000000c", 2000, SESSION_RUNNING),
                            make("s000000000000000d", 5, SESSION_INDEXING)};
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    assert_int_equal(dpp_master_metrics_sessions(&m, ss, 4, DPP_MASTER_METRICS_RANK_SERIES), 0);
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_well_formed(text, len);
    /* 333 each, a needs 10; then (1000 - 676) / 2 = 162 more to b and c */
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"s000000000000000a\""),
                     10);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"s000000000000000b\""),
                     495);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"s000000000000000c\""),
                     495);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{session=\"s000000000000000d\""),
                     0);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_ranks", "s000000000000000b", "")) == 5);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_ranks", "s000000000000000c", "")) == 1505);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_ranks", "s000000000000000d", "")) == 5);
    assert_true(dropped(text, "dpp_trainer_batches_total", "rank_limit") == 5 + 1505 + 5);

    /* a limit smaller than the running sessions: one each, in order */
    dpp_metrics_reset(&m);
    assert_int_equal(dpp_master_metrics_sessions(&m, ss, 4, 2), 0);
    text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_int_equal(count_lines(text, "dpp_trainer_batches_total{"), 2);
    assert_true(value_of(text, SERIES("dpp_trainer_batches_total", "s000000000000000a",
                                      ",rank=\"0\"")) == 1);
    assert_true(value_of(text, SERIES("dpp_trainer_batches_total", "s000000000000000b",
                                      ",rank=\"0\"")) == 1);
    assert_true(value_of(text, SERIES("dpp_trainer_rest_ranks", "s000000000000000c", "")) == 2000);
    dpp_metrics_close(&m);
    for (int i = 0; i < 4; i++)
        dpp_session_free(ss[i]);
}

/* Past the byte cap parts are dropped, not the page: without the rank
 * limit 12,000 ranks pass 16 MiB, and a tiny cap drops every part. What was
 * left out is counted. */
static void test_size_cap(void **state)
{
    (void)state;
    dpp_session_t *ss[2] = {make(BIG, 12000, SESSION_RUNNING), make(SMALL, 3, SESSION_RUNNING)};
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    dpp_metrics_build_info(&m, "master");
    assert_int_equal(dpp_master_metrics_sessions(&m, ss, 2, 100000), 0);
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_well_formed(text, len);
    assert_true(len <= DPP_METRICS_MAX_BYTES);
    assert_null(strstr(text, "# TYPE dpp_trainer_wait_seconds "));
    assert_null(strstr(text, "# TYPE dpp_trainer_batches_total "));
    assert_non_null(strstr(text, "\ndpp_build_info{"));
    assert_true(value_of(text, SERIES("dpp_session_epoch", SMALL, "")) == 0);
    assert_true(dropped(text, "dpp_trainer_wait_seconds", "size_cap") == 12003);
    assert_true(dropped(text, "dpp_trainer_batches_total", "size_cap") == 12003);
    assert_true(dropped(text, "dpp_trainer_wait_seconds", "rank_limit") == 0);
    assert_true(dropped(text, "dpp_session_epoch", "size_cap") == 0);

    /* room for the fixed part and the gauge only */
    dpp_metrics_reset(&m);
    dpp_metrics_build_info(&m, "master");
    m.max_bytes = m.len + 2100; /* the gauge's room (2 KiB) and a few bytes */
    assert_int_equal(dpp_master_metrics_sessions(&m, ss, 2, DPP_MASTER_METRICS_RANK_SERIES), 0);
    text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_well_formed(text, len);
    assert_null(strstr(text, "# TYPE dpp_session_epoch "));
    assert_null(strstr(text, "# TYPE dpp_trainer_rest_ranks "));
    assert_null(strstr(text, "# TYPE dpp_trainer_wait_seconds "));
    assert_true(dropped(text, "dpp_session_epoch", "size_cap") == 2);
    assert_true(dropped(text, "dpp_session_starvation_ratio", "size_cap") == 2);
    /* big shows 997 ranks (500 + the 497 small does not need), small 3 */
    assert_true(dropped(text, "dpp_trainer_batches_total", "size_cap") == 1000);
    assert_true(dropped(text, "dpp_trainer_batches_total", "rank_limit") == 11003);
    assert_true(dropped(text, "dpp_trainer_rest_ranks", "size_cap") == 1);
    assert_true(dropped(text, "dpp_trainer_rest_wait_seconds", "size_cap") == 1);
    dpp_metrics_close(&m);
    dpp_session_free(ss[0]);
    dpp_session_free(ss[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_ranks),
        cmocka_unit_test(test_finished_and_order),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_size_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
