/* SPDX-License-Identifier: Apache-2.0 */
/* The status JSON that libdppclient writes by hand (client/control.c),
 * read back with jansson, an independent parser: strings with quotes,
 * backslashes, control characters and UTF-8 come back as they were; every
 * number, null time, the unbounded epochs, cache, text, rejects and ranks
 * are where docs/cli.md says; a text that outgrows the first buffer stays
 * whole. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/control.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"

static json_t *to_json(const Dpp__SessionStatus *s)
{
    dpp_jbuf_t b = {0};
    dpp__session_json(&b, s);
    assert_false(b.failed);
    assert_int_equal(strlen(b.text), b.len);
    json_error_t err;
    json_t *o = json_loadb(b.text, b.len, JSON_REJECT_DUPLICATES, &err);
    if (o == NULL)
        print_error("%s\n  at %d: %s\n", b.text, err.position, err.text);
    assert_non_null(o);
    free(b.text);
    return o;
}

static json_int_t int_at(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        print_error("%s: not an integer\n", key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void test_session_fields(void **state)
{
    (void)state;
    Dpp__SessionStatus s = DPP__SESSION_STATUS__INIT;
    s.session_id = "s00ff";
    s.state = "failed";
    /* every kind of character a table path or an error text may hold */
    s.table = "logs/\"q\"\\x";
    s.error = "file a\tb:\n bad \x01 record \xc3\xa9\xe6\x97\xa5 \xf0\x9f\x99\x82 \x7f end";
    s.epochs = 6;
    s.current_epoch = 2;
    s.consumers = 2;
    s.rows_produced = UINT64_C(9223372036854775807); /* the largest jansson reads back */
    s.submitted_unix_ms = 1700000000000;
    s.planned_unix_ms = 1700000000059;
    s.splits_per_second = 0;
    s.splits_from_ram = 3;
    s.splits_made = 1;
    s.text_documents = 5;
    s.text_tokens = 30;
    s.text_padding = 10;
    Dpp__Rejects rj = DPP__REJECTS__INIT;
    rj.corrupt = 4;
    s.rejects = &rj;
    Dpp__RankStatus r0 = DPP__RANK_STATUS__INIT, r1 = DPP__RANK_STATUS__INIT;
    r0.rank = 0;
    r0.splits = 7;
    r0.attached = 1;
    r0.batches = 99;
    r0.wait_ns = 1;
    r0.open_ns = 4;
    r1.rank = 1;
    Dpp__RankStatus *ranks[] = {&r0, &r1};
    s.ranks = ranks;
    s.n_ranks = 2;

    json_t *o = to_json(&s);
    assert_string_equal(json_string_value(json_object_get(o, "session")), "s00ff");
    assert_string_equal(json_string_value(json_object_get(o, "table")), s.table);
    assert_string_equal(json_string_value(json_object_get(o, "error")), s.error);
    assert_int_equal(int_at(o, "epochs"), 6);
    assert_int_equal(int_at(o, "epoch"), 2);
    assert_int_equal(int_at(o, "epochs_done"), 2); /* failed in epoch 2 */
    assert_true(int_at(o, "rows_produced") == INT64_MAX);
    assert_int_equal(int_at(o, "planning_ms"), 59);
    assert_true(json_is_null(json_object_get(o, "ended_unix_ms")));
    json_t *c = json_object_get(o, "cache");
    assert_int_equal(int_at(c, "splits_from_ram"), 3);
    assert_true(json_real_value(json_object_get(c, "hit_ratio")) == 0.75);
    json_t *t = json_object_get(o, "text");
    assert_int_equal(int_at(t, "tokens"), 30);
    assert_true(json_real_value(json_object_get(t, "padding_ratio")) == 0.25);
    assert_int_equal(int_at(json_object_get(o, "rejects"), "corrupt"), 4);
    json_t *rs = json_object_get(o, "ranks");
    assert_int_equal(json_array_size(rs), 2);
    json_t *a = json_array_get(rs, 0);
    assert_int_equal(int_at(a, "splits"), 7);
    assert_int_equal(int_at(a, "batches"), 99);
    assert_true(json_is_true(json_object_get(a, "attached")));
    assert_true(json_real_value(json_object_get(a, "wait_share")) == 0.25);
    assert_true(json_is_false(json_object_get(json_array_get(rs, 1), "attached")));
    json_decref(o);
}

static void test_listing_shape(void **state)
{
    (void)state;
    Dpp__SessionStatus s = DPP__SESSION_STATUS__INIT;
    s.session_id = "s1";
    s.state = "done";
    s.table = "t";
    s.error = "";
    s.epochs = DPP_EPOCHS_UNBOUNDED;
    json_t *o = to_json(&s);
    assert_string_equal(json_string_value(json_object_get(o, "epochs")), "unbounded");
    /* a listing's entry: no ranks, no cache or text without their work */
    assert_null(json_object_get(o, "ranks"));
    assert_null(json_object_get(o, "cache"));
    assert_null(json_object_get(o, "text"));
    assert_null(json_object_get(o, "planning_ms"));
    assert_true(json_is_null(json_object_get(o, "submitted_unix_ms")));
    json_decref(o);

    /* a long error grows the buffer past its first size several times */
    char *big = malloc(100001);
    assert_non_null(big);
    for (size_t i = 0; i < 100000; i++)
        big[i] = "ab\"\\\n"[i % 5];
    big[100000] = '\0';
    s.error = big;
    o = to_json(&s);
    assert_string_equal(json_string_value(json_object_get(o, "error")), big);
    json_decref(o);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_fields),
        cmocka_unit_test(test_listing_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
