/* SPDX-License-Identifier: Apache-2.0 */
/* SentencePiece models (src/text/spm.c): models refused with a sentence
 * naming the file and the problem (cut short anywhere, a piece twice, no
 * unknown piece, WORD models, suffix whitespace, byte fallback without its
 * pieces, a normalizer without its charsmap, a damaged charsmap), and the
 * encoding rules a small hand-made model makes visible. The ids of real
 * models are checked against libsentencepiece in tests/text/sentencepiece.sh. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dpp/error.h"
#include "text/spm.h"
#include "text/spm_model.h"

static spm_w_t w;

static void refused(const spm_opts_t *o, const char *says)
{
    spm_model(&w, o);
    dpp_spm_t *sp = (dpp_spm_t *)1;
    char err[512] = "";
    assert_int_equal(dpp_spm_new(&sp, "m.model", w.b, w.n, err, sizeof err), DPP_ESPEC);
    assert_null(sp);
    if (strstr(err, says) == NULL || strncmp(err, "m.model: ", 9) != 0)
        fail_msg("expected \"%s\" in: %s", says, err);
}

static void test_refusals(void **state)
{
    (void)state;
    refused(&(spm_opts_t){.duplicate = 1}, "piece \"ab\" twice (ids 262 and 271)");
    refused(&(spm_opts_t){.no_unk = 1}, "no piece of type UNKNOWN");
    refused(&(spm_opts_t){.model_type = 3}, "model_type 3 (WORD): dpp encodes UNIGRAM (1) and BPE (2)");
    refused(&(spm_opts_t){.model_type = 4}, "(CHAR)");
    refused(&(spm_opts_t){.suffix_whitespace = 1}, "treat_whitespace_as_suffix is set");
    refused(&(spm_opts_t){.byte_fallback = 1, .no_bytes = 1},
            "byte_fallback is set but there is no byte piece <0x00>");
    refused(&(spm_opts_t){.normalizer = "nmt_nfkc"},
            "normalizer \"nmt_nfkc\" comes without its precompiled_charsmap");
    static const uint8_t short_map[] = {8, 0, 0, 0, 1, 2};
    refused(&(spm_opts_t){.normalizer = "nmt_nfkc", .charsmap = short_map, .charsmap_len = 6},
            "precompiled_charsmap: its trie says 8 bytes, of the 2 there");
    refused(&(spm_opts_t){.normalizer = "nmt_nfkc", .charsmap = short_map, .charsmap_len = 3},
            "expected a 4-byte trie size first");

    /* Cut short at every length: refused (or, cut between whole fields,
     * a model without what followed), never a crash. */
    spm_model(&w, &(spm_opts_t){.byte_fallback = 1});
    size_t whole = w.n;
    for (size_t n = 0; n < whole; n++) {
        dpp_spm_t *sp;
        char err[512];
        int rc = dpp_spm_new(&sp, "m.model", w.b, n, err, sizeof err);
        if (rc == 0)
            dpp_spm_free(sp);
        else
            assert_int_equal(rc, DPP_ESPEC);
    }
    char err[512];
    dpp_spm_t *sp;
    assert_int_equal(dpp_spm_new(&sp, "m.model", w.b, 7, err, sizeof err), DPP_ESPEC);
    assert_non_null(strstr(err, "m.model: not a SentencePiece model (a ModelProto)"));
    static const char vocab[] = "<unk>\t0\n<s>\t0\n\xe2\x96\x81the\t-3.1\n";
    assert_int_equal(dpp_spm_new(&sp, "m.vocab", (const uint8_t *)vocab, sizeof vocab - 1, err,
                                 sizeof err),
                     DPP_ESPEC);
    assert_non_null(strstr(err, "m.vocab: not a SentencePiece model"));
    assert_non_null(strstr(err, "the file reads as text: give the binary .model file"));
    assert_int_equal(dpp_spm_load(&sp, "/nonexistent/x.model", err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/x.model: No such file or directory"));
}

static void encode(const dpp_spm_t *sp, const char *text, const uint32_t *want, size_t nwant)
{
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(dpp_spm_encode(sp, (const uint8_t *)text, strlen(text), &ids, &n, &cap), 0);
    if (n != nwant || (n > 0 && memcmp(ids, want, n * sizeof *ids) != 0)) {
        char got[256] = "";
        for (size_t i = 0, at = 0; i < n && at < sizeof got - 12; i++)
            at += (size_t)snprintf(got + at, sizeof got - at, " %u", ids[i]);
        fail_msg("\"%s\": got%s", text, got);
    }
    free(ids);
}

/* Ids of the hand-made model: <unk> 0, <s> 1, <sep> 2, <0xXX> 3 + XX,
 * then "▁" 259, "a" 260, "b" 261, "ab" 262, "▁ab" 263, "the" 264,
 * "▁the" 265, "e" 266, "h" 267, "t" 268, "数" 269, U+FFFD 270; scores fall
 * with the id (-1.5, -2.5, ...). */
static void test_encode(void **state)
{
    (void)state;
    char err[512];
    dpp_spm_t *uni, *bpe, *plain;
    spm_model(&w, &(spm_opts_t){.model_type = 1, .byte_fallback = 1});
    assert_int_equal(dpp_spm_new(&uni, "u.model", w.b, w.n, err, sizeof err), 0);
    spm_model(&w, &(spm_opts_t){.model_type = 2, .byte_fallback = 1});
    assert_int_equal(dpp_spm_new(&bpe, "b.model", w.b, w.n, err, sizeof err), 0);
    spm_model(&w, &(spm_opts_t){.model_type = 1});
    assert_int_equal(dpp_spm_new(&plain, "p.model", w.b, w.n, err, sizeof err), 0);
    assert_int_equal(dpp_spm_size(uni), 271);

    /* Empty and whitespace-only texts give nothing; spaces at either end
     * and runs inside collapse (remove_extra_whitespaces), a dummy "▁"
     * comes first. */
    encode(uni, "", NULL, 0);
    encode(uni, "    ", NULL, 0);
    /* Identity normalization: a tab is no space (NFKC makes it one). */
    encode(uni, "\t", (const uint32_t[]){259, 3 + '\t'}, 2);
    encode(uni, "  ab   ab ", (const uint32_t[]){263, 263}, 2);
    /* Unigram: "▁the" (one piece, -8.5) beats "▁" + "the" (-1.5 - 7.5). */
    encode(uni, "the", (const uint32_t[]){265}, 1);
    /* <sep> is matched before normalizing and kept whole. */
    encode(uni, "a<sep>b", (const uint32_t[]){259, 260, 2, 261}, 4);
    /* An unknown character: its bytes (byte fallback), or one <unk> for a
     * run of them without. */
    encode(uni, "xy", (const uint32_t[]){259, 3 + 'x', 3 + 'y'}, 3);
    encode(plain, "xy", (const uint32_t[]){259, 0}, 2);
    /* An invalid byte is U+FFFD, which is a piece here. */
    encode(uni, "a\xff", (const uint32_t[]){259, 260, 270}, 3);
    /* BPE merges the best-scored pair first: "▁" + "t" ... ends at "▁the"
     * only through pieces that exist: "▁the" needs "▁" + "the", and "the"
     * needs "t" + "he", which is no piece: so "▁", "t", "h", "e". */
    encode(bpe, "the", (const uint32_t[]){259, 268, 267, 266}, 4);
    encode(bpe, "ab", (const uint32_t[]){263}, 1);
    encode(bpe, "数", (const uint32_t[]){259, 269}, 2);
    dpp_spm_free(uni);
    dpp_spm_free(bpe);
    dpp_spm_free(plain);
}

/* What encoding may hold is bounded (spm.h): a normalization that grows a
 * text past the scratch's bound, and a stretch with no place to cut for
 * longer than a sixteenth of it, are refused (DPP_ETOOBIG, saying which);
 * a long text is encoded stretch by stretch into the ids the whole text
 * gives, and the scratch is reused from text to text. */
static void test_bounds(void **state)
{
    (void)state;
    char err[512], *text = malloc(300000);
    assert_non_null(text);
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    /* "x" normalizes to 16,000 "a"s: 200 of them to 3.2 MB, more than twice
     * the bound */
    static char rep[16000];
    memset(rep, 'a', sizeof rep);
    static uint8_t map[17000];
    size_t maplen = spm_charsmap_one(map, sizeof map, 'x', rep, sizeof rep);
    assert_true(maplen > 0);
    spm_model(&w, &(spm_opts_t){.model_type = 1, .byte_fallback = 1, .normalizer = "grow",
                                .charsmap = map, .charsmap_len = maplen});
    dpp_spm_t *sp;
    assert_int_equal(dpp_spm_new(&sp, "g.model", w.b, w.n, err, sizeof err), 0);
    dpp_spm_scratch_t *x = dpp_spm_scratch_new(1u << 20);
    assert_non_null(x);
    assert_int_equal(dpp_spm_encode_scratch(sp, x, (const uint8_t *)"bxb", 3, &ids, &n, &cap, err,
                                            sizeof err),
                     0);
    assert_int_equal(n, 16002); /* "▁", "b", 15,999 "a"s, "ab" */
    assert_int_equal(ids[0], 259);
    assert_int_equal(ids[2], 260);
    memset(text, 'x', 200);
    n = 0;
    assert_int_equal(
        dpp_spm_encode_scratch(sp, x, (const uint8_t *)text, 200, &ids, &n, &cap, err, sizeof err),
        DPP_ETOOBIG);
    assert_int_equal(n, 0);
    assert_string_equal(err, "its 200 bytes of text normalize to more than 2097152 bytes (the "
                             "model's normalization grows it past what the tokenizer takes: "
                             "twice the worker's --max-record-mb)");
    /* 100 of them normalize within it, to 1.6 million "a"s: more ids than
     * the bound */
    n = 0;
    assert_int_equal(
        dpp_spm_encode_scratch(sp, x, (const uint8_t *)text, 100, &ids, &n, &cap, err, sizeof err),
        DPP_ETOOBIG);
    assert_string_equal(err, "its 100 bytes of text make more than 1048576 tokens (the most the "
                             "tokenizer holds for a document: the worker's --max-record-mb, a "
                             "token a byte)");
    dpp_spm_scratch_free(x);
    dpp_spm_free(sp);

    /* "aa" a piece: a run of "a"s has no place to cut (every boundary in
     * it is inside some "aa"), and past 256 KiB (the least bound of a
     * stretch; an eighth of 1 MiB is less) it is refused, by both models */
    for (int type = 1; type <= 2; type++) {
        spm_model(&w, &(spm_opts_t){.model_type = type, .extra_piece = "aa"});
        assert_int_equal(dpp_spm_new(&sp, "r.model", w.b, w.n, err, sizeof err), 0);
        x = dpp_spm_scratch_new(1u << 20);
        memset(text, 'a', 300000);
        n = 0;
        assert_int_equal(dpp_spm_encode_scratch(sp, x, (const uint8_t *)text, 300000, &ids, &n,
                                                &cap, err, sizeof err),
                         DPP_ETOOBIG);
        assert_non_null(strstr(err, "its normalized text has no place to cut for more than 262144 "
                                    "bytes from byte 0"));
        /* 200 KB of it fits, as one stretch */
        n = 0;
        assert_int_equal(dpp_spm_encode_scratch(sp, x, (const uint8_t *)text, 200000, &ids, &n,
                                                &cap, err, sizeof err),
                         0);
        assert_int_equal(n, type == 1 ? 200001 : 100001); /* "▁", then "a"s (or BPE: "aa"s) */
        dpp_spm_scratch_free(x);
        dpp_spm_free(sp);
    }

    /* "the ab " 40,000 times (280 KB, many stretches): the ids of one,
     * again and again, as the whole text gives them */
    for (int type = 1; type <= 2; type++) {
        spm_model(&w, &(spm_opts_t){.model_type = type, .byte_fallback = 1});
        assert_int_equal(dpp_spm_new(&sp, "m.model", w.b, w.n, err, sizeof err), 0);
        x = dpp_spm_scratch_new(1u << 20);
        for (int i = 0; i < 40000; i++)
            memcpy(text + 7 * i, "the ab ", 7);
        n = 0;
        assert_int_equal(dpp_spm_encode_scratch(sp, x, (const uint8_t *)text, 280000, &ids, &n,
                                                &cap, err, sizeof err),
                         0);
        /* Unigram: ▁the ▁ab; BPE: ▁ t h e ▁ab */
        static const uint32_t uni[] = {265, 263}, bpe[] = {259, 268, 267, 266, 263};
        const uint32_t *one = type == 1 ? uni : bpe;
        size_t k = type == 1 ? 2 : 5;
        assert_int_equal(n, 40000 * k);
        for (size_t i = 0; i < n; i++)
            if (ids[i] != one[i % k])
                fail_msg("model type %d: id %zu is %u, expected %u", type, i, ids[i], one[i % k]);
        dpp_spm_scratch_free(x);
        dpp_spm_free(sp);
    }

    /* cut at every place the encoder may cut: the ids of the whole text */
    static const char mixed[] = "  The data <sep>ab \xe6\x95\xb0\xe6\x95\xb0 the   ab\xff\tthe "
                                "x<sep><sep>aab bba \xe2\x96\x81the\xe2\x96\x81 ";
    for (int type = 1; type <= 2; type++) {
        spm_model(&w, &(spm_opts_t){.model_type = type, .byte_fallback = 1});
        assert_int_equal(dpp_spm_new(&sp, "m.model", w.b, w.n, err, sizeof err), 0);
        x = dpp_spm_scratch_new(0);
        uint32_t *whole = NULL;
        size_t wn = 0, wcap = 0;
        dpp_spm_scratch_set_stretch(x, SIZE_MAX);
        assert_int_equal(dpp_spm_encode_scratch(sp, x, (const uint8_t *)mixed, sizeof mixed - 1,
                                                &whole, &wn, &wcap, err, sizeof err),
                         0);
        dpp_spm_scratch_set_stretch(x, 1);
        n = 0;
        assert_int_equal(dpp_spm_encode_scratch(sp, x, (const uint8_t *)mixed, sizeof mixed - 1,
                                                &ids, &n, &cap, err, sizeof err),
                         0);
        assert_int_equal(n, wn);
        assert_memory_equal(ids, whole, n * sizeof *ids);
        free(whole);
        dpp_spm_scratch_free(x);
        dpp_spm_free(sp);
    }
    free(ids);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
