/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint tokens: the version-2 layout and its HMAC-SHA256
 * (crypto/checkpoint_token.c), the refusal of version-1 and malformed
 * tokens, what a forger who recomputes the old CRC32C gets, the client's
 * checks against an attach reply, and dpp_client_checkpoint() itself. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/util.h"
#include "client/checkpoint.h"
#include "client/client_internal.h"
#include "client/core.h"
#include "crypto/checkpoint_token.h"
#include "crypto/hmac.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"
#include "dpp/error.h"

static const uint8_t key[DPP_CKPT_KEY_LEN] = {
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
    0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0};

static dpp_ckpt_token_t sample(void)
{
    dpp_ckpt_token_t t = {
        .rank = 1, .epoch = 0, .seq = 2, .index = 1, .row = 10, .batches = 9, .rank_splits = 4};
    snprintf(t.session, sizeof t.session, "s-00000001");
    return t;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* What a forger who knows only the version-1 recipe does: change a field,
 * then recompute the CRC32C of the 60 bytes before offset 60. */
static void crc_forge(uint8_t *tok, size_t off, uint32_t v)
{
    put32(tok + off, v);
    put32(tok + 60, dpp_crc32c(0, tok, 60));
}

static void test_layout(void **state)
{
    (void)state;
    assert_int_equal(DPP_CHECKPOINT_SIZE, DPP_CKPT_TOKEN_SIZE);
    assert_int_equal(DPP_CHECKPOINT_SIZE, 96);
    dpp_ckpt_token_t t = sample();
    uint8_t tok[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(&t, key, tok);
    assert_memory_equal(tok, "DPT1", 4);
    assert_int_equal(tok[4], 2); /* version, u16 LE */
    assert_int_equal(tok[5], 0);
    assert_int_equal(tok[6] | tok[7], 0); /* flags */
    assert_string_equal((const char *)tok + 8, "s-00000001");
    for (size_t i = 8 + strlen("s-00000001"); i < 32; i++)
        assert_int_equal(tok[i], 0);
    const uint32_t want[] = {1, 0, 2, 1, 10, 9, 4, 0};
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(dpp_load_le32(tok + 32 + 4 * i), want[i]);
    uint8_t mac[DPP_SHA256_LEN];
    dpp_hmac_sha256(key, sizeof key, tok, 64, mac);
    assert_memory_equal(tok + 64, mac, 32);
}

static void test_roundtrip(void **state)
{
    (void)state;
    dpp_ckpt_token_t t = sample(), u;
    uint8_t tok[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(&t, key, tok);
    char why[256] = "";
    assert_int_equal(dpp_ckpt_token_parse(tok, sizeof tok, &u, why, sizeof why), 0);
    assert_memory_equal(&t, &u, sizeof t);
    assert_int_equal(dpp_ckpt_token_verify(tok, key), 1);
    uint8_t other[DPP_CKPT_KEY_LEN];
    memcpy(other, key, sizeof other);
    other[31] ^= 1;
    assert_int_equal(dpp_ckpt_token_verify(tok, other), 0);
}

/* Any one flipped bit is caught: by the parser or by the MAC. */
static void test_every_bit(void **state)
{
    (void)state;
    dpp_ckpt_token_t t = sample(), u;
    uint8_t tok[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(&t, key, tok);
    for (size_t bit = 0; bit < 8 * sizeof tok; bit++) {
        tok[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        int parsed = dpp_ckpt_token_parse(tok, sizeof tok, &u, NULL, 0) == 0;
        assert_false(parsed && dpp_ckpt_token_verify(tok, key));
        tok[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    assert_int_equal(dpp_ckpt_token_verify(tok, key), 1);
}

/* The forgeries: a token with a recomputed CRC32C and another index
 * or rank_splits. Version 1 took them; version 2's MAC does not verify. */
static void test_crc_forgery(void **state)
{
    (void)state;
    dpp_ckpt_token_t t = sample(), u;
    const size_t offs[] = {44 /* index */, 56 /* rank_splits */};
    for (size_t i = 0; i < 2; i++) {
        uint8_t tok[DPP_CKPT_TOKEN_SIZE];
        dpp_ckpt_token_pack(&t, key, tok);
        crc_forge(tok, offs[i], 9999);
        assert_int_equal(dpp_ckpt_token_parse(tok, sizeof tok, &u, NULL, 0), 0);
        assert_int_equal(offs[i] == 44 ? u.index : u.rank_splits, 9999);
        assert_int_equal(dpp_ckpt_token_verify(tok, key), 0);
        /* also when the forger leaves the bytes after the fields alone */
        dpp_ckpt_token_pack(&t, key, tok);
        put32(tok + offs[i], 9999);
        assert_int_equal(dpp_ckpt_token_verify(tok, key), 0);
    }
}

/* A token as version 1 wrote it: 64 bytes, a CRC32C of the first 60. */
static void test_v1_refused(void **state)
{
    (void)state;
    uint8_t v1[64] = {'D', 'P', 'T', '1', 1, 0, 0, 0};
    memcpy(v1 + 8, "s-00000001", 10);
    const uint32_t v[] = {0, 0, 1, 0, 0, 3, 4};
    for (size_t i = 0; i < 7; i++)
        put32(v1 + 32 + 4 * i, v[i]);
    put32(v1 + 60, dpp_crc32c(0, v1, 60));
    dpp_ckpt_token_t u;
    char why[256] = "";
    assert_int_equal(dpp_ckpt_token_parse(v1, sizeof v1, &u, why, sizeof why), DPP_ETOKEN);
    assert_non_null(strstr(why, "version 1"));
    assert_non_null(strstr(why, "older version"));
}

static void expect_refused(const void *buf, size_t len, const char *words)
{
    dpp_ckpt_token_t u;
    char why[256] = "";
    assert_int_equal(dpp_ckpt_token_parse(buf, len, &u, why, sizeof why), DPP_ETOKEN);
    if (strstr(why, words) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", why, words);
}

static void test_malformed(void **state)
{
    (void)state;
    dpp_ckpt_token_t t = sample();
    uint8_t tok[DPP_CKPT_TOKEN_SIZE + 1], bad[DPP_CKPT_TOKEN_SIZE + 1];
    dpp_ckpt_token_pack(&t, key, tok);
    expect_refused(NULL, 0, "magic");
    expect_refused(tok, 3, "magic");
    expect_refused(tok, DPP_CKPT_TOKEN_SIZE - 1, "length");
    expect_refused(tok, DPP_CKPT_TOKEN_SIZE + 1, "length");
    expect_refused(tok, 64, "length");
    memcpy(bad, tok, sizeof tok);
    bad[0] = 'X';
    expect_refused(bad, DPP_CKPT_TOKEN_SIZE, "magic");
    memcpy(bad, tok, sizeof tok);
    bad[4] = 3;
    expect_refused(bad, DPP_CKPT_TOKEN_SIZE, "version 3");
    memcpy(bad, tok, sizeof tok);
    bad[6] = 1;
    expect_refused(bad, DPP_CKPT_TOKEN_SIZE, "flags");
    memcpy(bad, tok, sizeof tok);
    memset(bad + 8, 0, 24);
    expect_refused(bad, DPP_CKPT_TOKEN_SIZE, "empty");
    memcpy(bad, tok, sizeof tok);
    memset(bad + 8, 'a', 24);
    expect_refused(bad, DPP_CKPT_TOKEN_SIZE, "not terminated");
}

/* An attach reply that resumed rank 1 of s-00000001 (2 epochs, batch_size
 * 100) in epoch 0, where the rank has 4 splits and the token's split 250
 * records. */
static Dpp__AttachReply reply(uint8_t *keybuf)
{
    Dpp__AttachReply r = DPP__ATTACH_REPLY__INIT;
    r.session_id = "s-00000001";
    r.rank = 1;
    r.consumers = 2;
    r.epochs = 2;
    r.batch_size = 100;
    r.state = "running";
    r.error = "";
    r.token_key.data = keybuf;
    r.token_key.len = DPP_CKPT_KEY_LEN;
    r.epoch = 0;
    r.resume_rank_splits = 4;
    r.resume_split_records = 250;
    return r;
}

/* Packs t (signed with the right key) and checks it against r. */
static int check(const dpp_ckpt_token_t *t, const Dpp__AttachReply *r, const char *words)
{
    uint8_t tok[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(t, key, tok);
    dpp_ckpt_token_t u;
    assert_int_equal(dpp_ckpt_token_parse(tok, sizeof tok, &u, NULL, 0), 0);
    char why[512] = "";
    int rc = dpp__token_check_reply(&u, tok, r, why, sizeof why);
    if (words && strstr(why, words) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", why, words);
    return rc;
}

static void test_check_reply(void **state)
{
    (void)state;
    uint8_t k[DPP_CKPT_KEY_LEN];
    memcpy(k, key, sizeof k);
    Dpp__AttachReply r = reply(k);
    dpp_ckpt_token_t t = sample();
    assert_int_equal(check(&t, &r, NULL), 0);
    t.rank_splits = DPP_CKPT_SPLITS_UNKNOWN; /* a client that did not know it yet */
    assert_int_equal(check(&t, &r, NULL), 0);

    t = sample();
    t.rank_splits = 5;
    assert_int_equal(check(&t, &r, "rank_splits: the token says 5"), DPP_ETOKEN);
    t = sample();
    t.seq = 5;
    t.rank_splits = DPP_CKPT_SPLITS_UNKNOWN;
    assert_int_equal(check(&t, &r, "seq: the token says split position 5"), DPP_ETOKEN);
    t = sample();
    t.index = 4; /* 250 records: blocks 0..2, end marker 3 */
    assert_int_equal(check(&t, &r, "index: the token says block 4"), DPP_ETOKEN);
    t.index = 3;
    t.row = 0;
    assert_int_equal(check(&t, &r, NULL), 0);
    t.index = 2;
    t.row = 50; /* block 2 holds 50 rows: 0..49 */
    assert_int_equal(check(&t, &r, "row: the token says 50"), DPP_ETOKEN);
    t = sample();
    t.row = 100;
    assert_int_equal(check(&t, &r, "row: the token says 100"), DPP_ETOKEN);
    t = sample();
    t.epoch = 3;
    assert_int_equal(check(&t, &r, "epoch: the token says 3"), DPP_ETOKEN);
    t = sample();
    t.epoch = 1;
    assert_int_equal(check(&t, &r, "epoch: the token says 1, the session is at 0"), DPP_ETOKEN);
    t = sample();
    t.rank = 0;
    assert_int_equal(check(&t, &r, "rank"), DPP_ETOKEN);
    t = sample();
    snprintf(t.session, sizeof t.session, "s-00000002");
    assert_int_equal(check(&t, &r, "session"), DPP_ETOKEN);
    t = sample();
    t.seq = 4; /* the end of the epoch: no blocks there */
    t.index = 1;
    assert_int_equal(check(&t, &r, "index"), DPP_ETOKEN);
    t.index = t.row = 0;
    assert_int_equal(check(&t, &r, NULL), 0);

    /* after the last epoch: a position of nothing */
    t = (dpp_ckpt_token_t){.rank = 1, .epoch = 2, .rank_splits = DPP_CKPT_SPLITS_UNKNOWN};
    snprintf(t.session, sizeof t.session, "s-00000001");
    assert_int_equal(check(&t, &r, NULL), 0);
    t.batches = 3;
    assert_int_equal(check(&t, &r, "position"), DPP_ETOKEN);

    /* a forgery with a recomputed CRC32C: the MAC */
    t = sample();
    uint8_t tok[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(&t, key, tok);
    crc_forge(tok, 44, 9999);
    dpp_ckpt_token_t u;
    assert_int_equal(dpp_ckpt_token_parse(tok, sizeof tok, &u, NULL, 0), 0);
    char why[512] = "";
    assert_int_equal(dpp__token_check_reply(&u, tok, &r, why, sizeof why), DPP_ETOKEN);
    assert_non_null(strstr(why, "mac"));

    /* a master older than signed tokens sends no key */
    r.token_key.len = 0;
    t = sample();
    assert_int_equal(check(&t, &r, "no checkpoint-token key"), DPP_EVERSION);
    r = reply(k);
    r.state = "indexing";
    assert_int_equal(check(&t, &r, "indexing"), DPP_ETOKEN);
}

static dpp_client_t *fake_client(void)
{
    dpp_client_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    assert_non_null(c->core = dpp__core_new());
    snprintf(c->session, sizeof c->session, "s-00000001");
    c->rank = 1;
    c->epochs = 2;
    c->batch_size = 100;
    return c;
}

static void free_client(dpp_client_t *c)
{
    dpp__core_unref(c->core);
    free(c);
}

/* dpp_client_checkpoint() signs with the key of the last attach reply; the
 * token puts a new client where the old one was. */
static void test_client_checkpoint(void **state)
{
    (void)state;
    dpp_client_t *c = fake_client();
    c->epoch = 1;
    c->next_seq = 2;
    c->next_index = 1;
    c->skip_rows = 10;
    c->epoch_batches_out = 9;
    uint8_t tok[DPP_CHECKPOINT_SIZE];
    assert_int_equal(dpp_client_checkpoint(c, tok, sizeof tok), DPP_EVERSION); /* no key yet */
    uint8_t k[DPP_CKPT_KEY_LEN];
    memcpy(k, key, sizeof k);
    Dpp__AttachReply r = reply(k);
    dpp__core_take_key(c->core, &r);
    assert_int_equal(dpp_client_checkpoint(c, tok, sizeof tok - 1), DPP_EINVAL);
    assert_int_equal(dpp_client_checkpoint(c, tok, sizeof tok), DPP_CHECKPOINT_SIZE);
    assert_int_equal(dpp_ckpt_token_verify(tok, key), 1);
    dpp_ckpt_token_t u;
    assert_int_equal(dpp_ckpt_token_parse(tok, sizeof tok, &u, NULL, 0), 0);
    assert_string_equal(u.session, "s-00000001");
    assert_int_equal(u.rank, 1);
    assert_int_equal(u.epoch, 1);
    assert_int_equal(u.seq, 2);
    assert_int_equal(u.index, 1);
    assert_int_equal(u.row, 10);
    assert_int_equal(u.batches, 9);
    assert_int_equal(u.rank_splits, DPP_CKPT_SPLITS_UNKNOWN);

    dpp_client_t *d = fake_client();
    assert_int_equal(dpp__client_start_at(d, &u), 0);
    assert_int_equal(d->epoch, 1);
    assert_int_equal(d->next_seq, 2);
    assert_int_equal(d->next_index, 1);
    assert_int_equal(d->skip_rows, 10);
    assert_int_equal(d->epoch_batches_out, 9);
    free_client(d);

    /* after the last epoch every position field is 0 */
    c->epoch = 2;
    assert_int_equal(dpp_client_checkpoint(c, tok, sizeof tok), DPP_CHECKPOINT_SIZE);
    assert_int_equal(dpp_ckpt_token_parse(tok, sizeof tok, &u, NULL, 0), 0);
    assert_int_equal(u.epoch, 2);
    assert_int_equal(u.seq | u.index | u.row | u.batches, 0);

    c->core->order_fastest = 1;
    assert_int_equal(dpp_client_checkpoint(c, tok, sizeof tok), DPP_EINVAL);
    free_client(c);
}

/* A refused resume token fails dpp_client_open_opts() before any
 * connection, naming the field. */
static void test_open_refuses(void **state)
{
    (void)state;
    dpp_client_options_t o;
    dpp_client_options_init(&o);
    o.master = "127.0.0.1:1"; /* never reached */
    o.connect_timeout_ms = 100;
    uint8_t v1[64] = {'D', 'P', 'T', '1', 1};
    memcpy(v1 + 8, "s-00000001", 10);
    put32(v1 + 60, dpp_crc32c(0, v1, 60));
    o.resume_token = v1;
    o.resume_token_len = sizeof v1;
    dpp_client_t *c = NULL;
    assert_int_equal(dpp_client_open_opts(&c, &o), DPP_ETOKEN);
    assert_null(c);
    assert_non_null(strstr(dpp_client_open_error(), "version 1"));

    dpp_ckpt_token_t t = sample();
    uint8_t tok[DPP_CKPT_TOKEN_SIZE];
    dpp_ckpt_token_pack(&t, key, tok);
    o.resume_token = tok;
    o.resume_token_len = sizeof tok;
    o.rank = 0; /* the token is rank 1's */
    assert_int_equal(dpp_client_open_opts(&c, &o), DPP_ETOKEN);
    assert_non_null(strstr(dpp_client_open_error(), "rank: the token says 1"));
    o.rank = 1;
    o.session = "s-00000002";
    assert_int_equal(dpp_client_open_opts(&c, &o), DPP_ETOKEN);
    assert_non_null(strstr(dpp_client_open_error(), "session"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),       cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_every_bit),    cmocka_unit_test(test_crc_forgery),
        cmocka_unit_test(test_v1_refused),   cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_check_reply),  cmocka_unit_test(test_client_checkpoint),
        cmocka_unit_test(test_open_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
