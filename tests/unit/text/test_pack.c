/* SPDX-License-Identifier: Apache-2.0 */
/* The sequence packer (text/pack.h): concat against a token-by-token
 * reference that cuts the stream every L, best_fit against a direct
 * best-fit-decreasing and an invariant check, hand-worked examples, the
 * same output for any add/next interleaving and across reset(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dpp/error.h"
#include "text/pack.h"

#define FIRST_ID 100 /* unique token ids start here, above bos, eos and pad */

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        fail_msg("out of memory");
    return q;
}

/* xorshift64*: the tests' own generator */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Du;
}

static uint32_t rng_below(uint64_t *state, uint32_t n)
{
    return (uint32_t)(rng_next(state) % n);
}

/* ---- documents and the sequences a run hands out ---- */

typedef struct docs {
    size_t n;
    uint32_t **ids;
    size_t *len;
} docs_t;

static void docs_add(docs_t *d, const uint32_t *ids, size_t len)
{
    d->ids = xrealloc(d->ids, (d->n + 1) * sizeof *d->ids);
    d->len = xrealloc(d->len, (d->n + 1) * sizeof *d->len);
    d->ids[d->n] = xrealloc(NULL, len * sizeof **d->ids);
    if (len)
        memcpy(d->ids[d->n], ids, len * sizeof *ids);
    d->len[d->n++] = len;
}

static void docs_free(docs_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->ids[i]);
    free(d->ids);
    free(d->len);
    *d = (docs_t){0};
}

/* n documents of lengths around L: empty ones, short ones, some much
 * longer. unique: ids FIRST_ID, FIRST_ID + 1, ... across all documents;
 * otherwise small ids that also collide with bos, eos and pad. */
static docs_t docs_random(uint64_t *rng, size_t n, uint32_t L, int unique)
{
    docs_t d = {0};
    uint32_t next_id = FIRST_ID;
    uint32_t *buf = NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t kind = rng_below(rng, 10), len;
        if (kind < 2)
            len = 0;
        else if (kind < 7)
            len = 1 + rng_below(rng, L + 1);
        else if (kind < 9)
            len = L + rng_below(rng, 2 * L + 2);
        else
            len = rng_below(rng, 10 * L + 10);
        buf = xrealloc(buf, len * sizeof *buf);
        for (uint32_t k = 0; k < len; k++)
            buf[k] = unique ? next_id++ : rng_below(rng, 8);
        docs_add(&d, buf, len);
    }
    free(buf);
    return d;
}

/* A document's item: [bos] + tokens + [eos]; returns its length. */
static size_t make_item(const dpp_pack_config_t *cfg, const docs_t *d, size_t i, int32_t *out)
{
    size_t n = 0;
    if (cfg->bos >= 0)
        out[n++] = (int32_t)cfg->bos;
    for (size_t k = 0; k < d->len[i]; k++)
        out[n++] = (int32_t)d->ids[i][k];
    if (cfg->eos >= 0)
        out[n++] = (int32_t)cfg->eos;
    return n;
}

static size_t item_len(const dpp_pack_config_t *cfg, const docs_t *d, size_t i)
{
    return d->len[i] + (cfg->bos >= 0) + (cfg->eos >= 0);
}

typedef struct run {
    uint32_t L;
    size_t n, cap;
    int32_t *ids, *labels, *pos, *cu; /* n * L each; cu n * (L + 1) */
    uint32_t *nseg, *padding, *documents;
} run_t;

static void run_init(run_t *r, uint32_t L)
{
    *r = (run_t){.L = L};
}

static void run_free(run_t *r)
{
    free(r->ids);
    free(r->labels);
    free(r->pos);
    free(r->cu);
    free(r->nseg);
    free(r->padding);
    free(r->documents);
    *r = (run_t){0};
}

/* A new zeroed sequence at the end of r: its index. */
static size_t run_push(run_t *r)
{
    size_t k = r->n++, L = r->L;
    if (r->n > r->cap) {
        size_t c = r->cap = r->cap ? 2 * r->cap : 16;
        r->ids = xrealloc(r->ids, c * L * sizeof *r->ids);
        r->labels = xrealloc(r->labels, c * L * sizeof *r->labels);
        r->pos = xrealloc(r->pos, c * L * sizeof *r->pos);
        r->cu = xrealloc(r->cu, c * (L + 1) * sizeof *r->cu);
        r->nseg = xrealloc(r->nseg, c * sizeof *r->nseg);
        r->padding = xrealloc(r->padding, c * sizeof *r->padding);
        r->documents = xrealloc(r->documents, c * sizeof *r->documents);
    }
    memset(r->ids + k * L, 0, L * sizeof *r->ids);
    memset(r->labels + k * L, 0, L * sizeof *r->labels);
    memset(r->pos + k * L, 0, L * sizeof *r->pos);
    memset(r->cu + k * (L + 1), 0, (L + 1) * sizeof *r->cu);
    r->nseg[k] = r->padding[k] = r->documents[k] = 0;
    return k;
}

/* Takes every ready sequence, checking the shape every one must have. */
static size_t drain(dpp_packer_t *p, run_t *r)
{
    dpp_sequence_t s;
    size_t got = 0;
    while (dpp_packer_next(p, &s) == 1) {
        uint32_t L = r->L;
        assert_int_equal(s.length, L);
        assert_true(s.nsegments >= 1 && s.nsegments <= L);
        assert_int_equal(s.cu_seqlens[0], 0);
        assert_int_equal(s.cu_seqlens[s.nsegments], L);
        for (uint32_t k = 0; k < s.nsegments; k++)
            assert_true(s.cu_seqlens[k] < s.cu_seqlens[k + 1]);
        assert_true(s.padding < L); /* never an empty sequence */
        size_t k = run_push(r);
        memcpy(r->ids + k * L, s.input_ids, L * sizeof *s.input_ids);
        memcpy(r->labels + k * L, s.labels, L * sizeof *s.labels);
        memcpy(r->pos + k * L, s.position_ids, L * sizeof *s.position_ids);
        memcpy(r->cu + k * (L + 1), s.cu_seqlens, (s.nsegments + 1) * sizeof *s.cu_seqlens);
        r->nseg[k] = s.nsegments;
        r->padding[k] = s.padding;
        r->documents[k] = s.documents;
        got++;
    }
    assert_int_equal(dpp_packer_next(p, &s), 0); /* and stays so */
    return got;
}

static void assert_runs_equal(const run_t *a, const run_t *b)
{
    assert_int_equal(a->L, b->L);
    assert_int_equal(a->n, b->n);
    size_t L = a->L;
    for (size_t k = 0; k < a->n; k++) {
        assert_memory_equal(a->ids + k * L, b->ids + k * L, L * sizeof *a->ids);
        assert_memory_equal(a->labels + k * L, b->labels + k * L, L * sizeof *a->labels);
        assert_memory_equal(a->pos + k * L, b->pos + k * L, L * sizeof *a->pos);
        assert_int_equal(a->nseg[k], b->nseg[k]);
        assert_memory_equal(a->cu + k * (L + 1), b->cu + k * (L + 1),
                            (a->nseg[k] + 1) * sizeof *a->cu);
        assert_int_equal(a->padding[k], b->padding[k]);
        assert_int_equal(a->documents[k], b->documents[k]);
    }
}

enum feed { FEED_EACH, FEED_AT_END, FEED_RANDOM };

/* Packs d with p in one of the usage patterns: next() after every add(),
 * only after finish(), or at random points (rng). */
static void feed(dpp_packer_t *p, const docs_t *d, enum feed how, uint64_t *rng, run_t *out)
{
    for (size_t i = 0; i < d->n; i++) {
        assert_int_equal(dpp_packer_add(p, d->ids[i], d->len[i]), 0);
        if (how == FEED_EACH || (how == FEED_RANDOM && rng_below(rng, 3) == 0))
            drain(p, out);
    }
    assert_int_equal(dpp_packer_finish(p), 0);
    drain(p, out);
    assert_int_equal(dpp_packer_finish(p), 0); /* a second finish adds nothing */
    drain(p, out);
}

static void pack(const dpp_pack_config_t *cfg, const docs_t *d, enum feed how, uint64_t seed,
                 run_t *out)
{
    dpp_packer_t *p;
    assert_int_equal(dpp_packer_new(&p, cfg), 0);
    run_init(out, cfg->length);
    feed(p, d, how, &seed, out);
    dpp_packer_free(p);
}

/* ---- the references ---- */

/* concat, token by token: the stream of items with each token's document
 * and position, cut every L. */
static void ref_concat(const dpp_pack_config_t *cfg, const docs_t *d, run_t *want)
{
    uint32_t L = cfg->length;
    size_t total = 0;
    for (size_t i = 0; i < d->n; i++)
        total += item_len(cfg, d, i);
    int32_t *tok = xrealloc(NULL, total * sizeof *tok);
    size_t *doc = xrealloc(NULL, total * sizeof *doc), *pos = xrealloc(NULL, total * sizeof *pos);
    size_t t = 0;
    for (size_t i = 0; i < d->n; i++) {
        size_t n = make_item(cfg, d, i, tok + t);
        for (size_t k = 0; k < n; k++) {
            doc[t + k] = i;
            pos[t + k] = k;
        }
        t += n;
    }
    run_init(want, L);
    for (size_t s0 = 0; s0 < total; s0 += L) {
        size_t k = run_push(want);
        int32_t *cu = want->cu + k * (L + 1);
        uint32_t nseg = 0;
        for (size_t j = 0; j < L; j++) {
            size_t g = s0 + j;
            if (g >= total) {
                want->ids[k * L + j] = (int32_t)cfg->pad;
                want->labels[k * L + j] = -100;
                want->pos[k * L + j] = 0;
                want->padding[k]++;
                continue;
            }
            if (j > 0 && doc[g] != doc[g - 1])
                cu[++nseg] = (int32_t)j;
            int ends = g + 1 == total || doc[g + 1] != doc[g];
            want->ids[k * L + j] = tok[g];
            want->labels[k * L + j] = ends ? -100 : tok[g + 1];
            want->pos[k * L + j] = (int32_t)pos[g];
            want->documents[k] += ends;
        }
        if (want->padding[k])
            cu[++nseg] = (int32_t)(L - want->padding[k]);
        cu[++nseg] = (int32_t)L;
        want->nseg[k] = nseg;
    }
    free(tok);
    free(doc);
    free(pos);
}

/* A run of item tokens item[start, start + len) of an item of n tokens. */
typedef struct ref_piece {
    const int32_t *item;
    size_t n, start, len;
} ref_piece_t;

static void ref_emit(const dpp_pack_config_t *cfg, const ref_piece_t *pc, size_t npc, run_t *want)
{
    uint32_t L = cfg->length;
    size_t k = run_push(want), j = 0;
    int32_t *cu = want->cu + k * (L + 1);
    for (size_t i = 0; i < npc; i++) {
        for (size_t t = pc[i].start; t < pc[i].start + pc[i].len; t++, j++) {
            want->ids[k * L + j] = pc[i].item[t];
            want->labels[k * L + j] = t + 1 < pc[i].n ? pc[i].item[t + 1] : -100;
            want->pos[k * L + j] = (int32_t)t;
        }
        cu[++want->nseg[k]] = (int32_t)j;
        want->documents[k] += pc[i].start + pc[i].len == pc[i].n;
    }
    assert_true(j <= L);
    if (j < L) {
        want->padding[k] = (uint32_t)(L - j);
        for (; j < L; j++) {
            want->ids[k * L + j] = (int32_t)cfg->pad;
            want->labels[k * L + j] = -100;
        }
        cu[++want->nseg[k]] = (int32_t)L;
    }
}

/* best_fit, as its definition reads: windows of non-empty documents, long
 * items' L-pieces first, then a stable sort and a scan of every bin. */
static void ref_best_fit(const dpp_pack_config_t *cfg, const docs_t *d, run_t *want)
{
    uint32_t L = cfg->length;
    run_init(want, L);
    int32_t **items = xrealloc(NULL, (d->n + 1) * sizeof *items);
    size_t *lens = xrealloc(NULL, (d->n + 1) * sizeof *lens);
    size_t nwin = 0;
    for (size_t i = 0; i <= d->n; i++) {
        if (i < d->n) {
            items[nwin] = xrealloc(NULL, item_len(cfg, d, i) * sizeof **items);
            lens[nwin] = make_item(cfg, d, i, items[nwin]);
            if (lens[nwin] == 0) {
                free(items[nwin]);
                continue;
            }
            nwin++;
        }
        if (nwin == 0 || (nwin < cfg->window && i < d->n))
            continue;
        ref_piece_t *rest = xrealloc(NULL, nwin * sizeof *rest);
        size_t nrest = 0;
        for (size_t w = 0; w < nwin; w++) {
            size_t start = 0;
            if (lens[w] > L) {
                for (; lens[w] - start >= L; start += L) {
                    ref_piece_t one = {items[w], lens[w], start, L};
                    ref_emit(cfg, &one, 1, want);
                }
            }
            if (start < lens[w])
                rest[nrest++] = (ref_piece_t){items[w], lens[w], start, lens[w] - start};
        }
        for (size_t a = 1; a < nrest; a++) { /* insertion sort: stable */
            ref_piece_t x = rest[a];
            size_t b = a;
            for (; b > 0 && rest[b - 1].len < x.len; b--)
                rest[b] = rest[b - 1];
            rest[b] = x;
        }
        ref_piece_t *bin = xrealloc(NULL, nrest * nrest * sizeof *bin);
        size_t *fill = xrealloc(NULL, nrest * sizeof *fill),
               *count = xrealloc(NULL, nrest * sizeof *count);
        size_t nbins = 0;
        for (size_t a = 0; a < nrest; a++) {
            size_t best = SIZE_MAX;
            for (size_t b = 0; b < nbins; b++) {
                size_t room = L - fill[b];
                if (room >= rest[a].len && (best == SIZE_MAX || room < L - fill[best]))
                    best = b;
            }
            if (best == SIZE_MAX) {
                best = nbins++;
                fill[best] = count[best] = 0;
            }
            bin[best * nrest + count[best]++] = rest[a];
            fill[best] += rest[a].len;
        }
        for (size_t b = 0; b < nbins; b++)
            ref_emit(cfg, bin + b * nrest, count[b], want);
        free(bin);
        free(fill);
        free(count);
        free(rest);
        for (size_t w = 0; w < nwin; w++)
            free(items[w]);
        nwin = 0;
    }
    free(items);
    free(lens);
}

/* best_fit's promises, on documents of unique ids: every item token once,
 * in order within its document; an item of at most L tokens whole in one
 * segment; labels the next token of the same document or -100; positions
 * the index in the item; one segment per item run, one item per segment,
 * padding the last segment; documents counted. */
static void check_best_fit(const dpp_pack_config_t *cfg, const docs_t *d, const run_t *r)
{
    uint32_t L = cfg->length;
    int has_bos = cfg->bos >= 0, has_eos = cfg->eos >= 0;
    size_t ids = 0;
    for (size_t i = 0; i < d->n; i++)
        for (size_t k = 0; k < d->len[i]; k++)
            if (d->ids[i][k] - FIRST_ID >= ids)
                ids = d->ids[i][k] - FIRST_ID + 1;
    size_t *doc_of = xrealloc(NULL, ids * sizeof *doc_of);  /* by id - FIRST_ID */
    size_t *next_q = xrealloc(NULL, d->n * sizeof *next_q); /* item tokens seen */
    int32_t **items = xrealloc(NULL, d->n * sizeof *items);
    size_t *lens = xrealloc(NULL, d->n * sizeof *lens);
    size_t empty_seen = 0, tokens = 0, ends = 0;
    for (size_t i = 0; i < d->n; i++) {
        items[i] = xrealloc(NULL, item_len(cfg, d, i) * sizeof **items);
        lens[i] = make_item(cfg, d, i, items[i]);
        next_q[i] = 0;
        for (size_t k = 0; k < d->len[i]; k++)
            doc_of[d->ids[i][k] - FIRST_ID] = i;
        tokens += lens[i];
        ends += lens[i] > 0;
    }
    size_t *in_seq = xrealloc(NULL, L * sizeof *in_seq);
    size_t out_tokens = 0, out_ends = 0;
    for (size_t s = 0; s < r->n; s++) {
        const int32_t *id = r->ids + s * L, *lab = r->labels + s * L, *pos = r->pos + s * L;
        const int32_t *cu = r->cu + s * (L + 1);
        uint32_t nseg = r->nseg[s], pad = r->padding[s], docs = 0;
        size_t nin = 0;
        if (pad) {
            assert_int_equal(cu[nseg - 1], L - pad);
            for (uint32_t j = L - pad; j < L; j++) {
                assert_int_equal(id[j], cfg->pad);
                assert_int_equal(lab[j], -100);
                assert_int_equal(pos[j], 0);
            }
        }
        for (uint32_t g = 0; g < nseg - (pad > 0); g++) {
            size_t a = (size_t)cu[g], b = (size_t)cu[g + 1], j0 = a;
            while (j0 < b && id[j0] < FIRST_ID)
                j0++;
            size_t doc = SIZE_MAX, start = 0;
            if (j0 < b) {
                doc = doc_of[id[j0] - FIRST_ID];
                size_t q = (size_t)has_bos;
                while (items[doc][q] != id[j0])
                    q++;
                assert_true(q >= j0 - a);
                start = q - (j0 - a);
            } else if (b - a == (size_t)(has_bos + has_eos) && pos[a] == 0 && lab[b - 1] == -100) {
                /* an empty document's whole item: [bos, eos], [bos] or [eos] */
                for (size_t j = a; j < b; j++) {
                    assert_int_equal(id[j], j == a && has_bos ? cfg->bos : cfg->eos);
                    assert_int_equal(pos[j], j - a);
                    assert_int_equal(lab[j], j + 1 < b ? cfg->eos : -100);
                }
                empty_seen++;
                docs++;
                out_tokens += b - a;
                continue;
            } else {
                /* bos or eos cut from its item (L = 1): the first document
                 * whose item goes on there with these tokens and labels
                 * (they name it: a label is the next, unique, token) */
                start = (size_t)pos[a];
                for (size_t i = 0; i < d->n && doc == SIZE_MAX; i++) {
                    if (next_q[i] != start || start + (b - a) > lens[i])
                        continue;
                    size_t j = a;
                    for (; j < b; j++) {
                        size_t q = start + (j - a);
                        if (id[j] != items[i][q] ||
                            lab[j] != (q + 1 < lens[i] ? items[i][q + 1] : -100))
                            break;
                    }
                    if (j == b)
                        doc = i;
                }
                assert_true(doc != SIZE_MAX);
            }
            assert_int_equal(start, next_q[doc]); /* in order, each once */
            assert_true(start + (b - a) <= lens[doc]);
            if (lens[doc] <= L) /* whole */
                assert_true(start == 0 && b - a == lens[doc]);
            for (size_t k = 0; k < nin; k++)
                assert_true(in_seq[k] != doc); /* pieces of an item never meet */
            in_seq[nin++] = doc;
            for (size_t j = a; j < b; j++) {
                size_t q = start + (j - a);
                assert_int_equal(id[j], items[doc][q]);
                assert_int_equal(pos[j], q);
                assert_int_equal(lab[j], q + 1 < lens[doc] ? items[doc][q + 1] : -100);
            }
            next_q[doc] = start + (b - a);
            docs += next_q[doc] == lens[doc];
            out_tokens += b - a;
        }
        assert_int_equal(r->documents[s], docs);
        out_ends += docs;
    }
    size_t empty_unnamed = 0; /* the empty items seen whole, not told apart */
    for (size_t i = 0; i < d->n; i++) {
        if (d->len[i] == 0 && lens[i] && next_q[i] == 0)
            empty_unnamed++;
        else
            assert_int_equal(next_q[i], lens[i]);
    }
    assert_int_equal(empty_seen, empty_unnamed);
    assert_int_equal(out_tokens, tokens);
    assert_int_equal(out_ends, ends);
    for (size_t i = 0; i < d->n; i++)
        free(items[i]);
    free(items);
    free(lens);
    free(doc_of);
    free(next_q);
    free(in_seq);
}

/* ---- tests ---- */

static dpp_pack_config_t config(dpp_pack_mode_t mode, uint32_t L, int64_t bos, int64_t eos,
                                uint32_t window)
{
    return (dpp_pack_config_t){
        .mode = mode, .length = L, .bos = bos, .eos = eos, .pad = 0, .window = window};
}

static void test_config(void **state)
{
    (void)state;
    dpp_packer_t *p = (dpp_packer_t *)1;
    dpp_pack_config_t bad[] = {
        config(DPP_PACK_CONCAT, 0, -1, -1, 1),
        config(DPP_PACK_BEST_FIT, 0, -1, -1, 1),
        config(DPP_PACK_CONCAT, DPP_PACK_MAX_LENGTH + 1, -1, -1, 1),
        config(DPP_PACK_BEST_FIT, 8, -1, -1, 0),
        config(DPP_PACK_CONCAT, 8, -2, -1, 1),
        config(DPP_PACK_CONCAT, 8, -1, (int64_t)INT32_MAX + 1, 1),
        config((dpp_pack_mode_t)2, 8, -1, -1, 1),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dpp_packer_new(&p, &bad[i]), DPP_EINVAL);
        assert_null(p);
    }
    dpp_pack_config_t c = config(DPP_PACK_CONCAT, 8, -1, -1, 0);
    c.pad = (uint32_t)INT32_MAX + 1;
    assert_int_equal(dpp_packer_new(&p, &c), DPP_EINVAL);

    /* concat ignores window; the bounds themselves are fine */
    dpp_pack_config_t good[] = {
        config(DPP_PACK_CONCAT, 8, -1, -1, 0),
        config(DPP_PACK_CONCAT, 1, INT32_MAX, 0, 0),
        config(DPP_PACK_BEST_FIT, DPP_PACK_MAX_LENGTH, 0, INT32_MAX, 1),
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(dpp_packer_new(&p, &good[i]), 0);
        dpp_packer_free(p);
    }
    dpp_packer_free(NULL);
}

/* L = 4, bos 1, eos 2: items [1 10 11 12 2] [1 20 2], 8 tokens, 2 sequences. */
static void test_concat_example(void **state)
{
    (void)state;
    dpp_pack_config_t c = config(DPP_PACK_CONCAT, 4, 1, 2, 0);
    dpp_packer_t *p;
    assert_int_equal(dpp_packer_new(&p, &c), 0);
    dpp_sequence_t s;
    const uint32_t a[] = {10, 11, 12}, b[] = {20};

    assert_int_equal(dpp_packer_add(p, a, 3), 0);
    /* the cut falls inside the item, whose next token is already here */
    assert_int_equal(dpp_packer_next(p, &s), 1);
    assert_memory_equal(s.input_ids, ((int32_t[]){1, 10, 11, 12}), 16);
    assert_memory_equal(s.labels, ((int32_t[]){10, 11, 12, 2}), 16);
    assert_memory_equal(s.position_ids, ((int32_t[]){0, 1, 2, 3}), 16);
    assert_int_equal(s.nsegments, 1);
    assert_memory_equal(s.cu_seqlens, ((int32_t[]){0, 4}), 8);
    assert_int_equal(s.padding, 0);
    assert_int_equal(s.documents, 0);
    assert_int_equal(dpp_packer_next(p, &s), 0);

    assert_int_equal(dpp_packer_add(p, b, 1), 0);
    assert_int_equal(dpp_packer_next(p, &s), 1);
    assert_memory_equal(s.input_ids, ((int32_t[]){2, 1, 20, 2}), 16);
    assert_memory_equal(s.labels, ((int32_t[]){-100, 20, 2, -100}), 16);
    assert_memory_equal(s.position_ids, ((int32_t[]){4, 0, 1, 2}), 16);
    assert_int_equal(s.nsegments, 2);
    assert_memory_equal(s.cu_seqlens, ((int32_t[]){0, 1, 4}), 12);
    assert_int_equal(s.documents, 2);
    assert_int_equal(dpp_packer_finish(p), 0);
    assert_int_equal(dpp_packer_next(p, &s), 0); /* nothing pending: no padded sequence */

    /* reset: a new split; a partial sequence is padded at finish() */
    dpp_packer_reset(p);
    assert_int_equal(dpp_packer_add(p, b, 1), 0);
    assert_int_equal(dpp_packer_next(p, &s), 0);
    assert_int_equal(dpp_packer_finish(p), 0);
    assert_int_equal(dpp_packer_next(p, &s), 1);
    assert_memory_equal(s.input_ids, ((int32_t[]){1, 20, 2, 0}), 16);
    assert_memory_equal(s.labels, ((int32_t[]){20, 2, -100, -100}), 16);
    assert_memory_equal(s.position_ids, ((int32_t[]){0, 1, 2, 0}), 16);
    assert_memory_equal(s.cu_seqlens, ((int32_t[]){0, 3, 4}), 12);
    assert_int_equal(s.nsegments, 2);
    assert_int_equal(s.padding, 1);
    assert_int_equal(s.documents, 1);
    assert_int_equal(dpp_packer_next(p, &s), 0);
    dpp_packer_free(p);
}

static void expect_seq(dpp_packer_t *p, uint32_t L, const int32_t *ids, const int32_t *labels,
                       const int32_t *pos, const int32_t *cu, uint32_t nseg, uint32_t padding,
                       uint32_t documents)
{
    dpp_sequence_t s;
    assert_int_equal(dpp_packer_next(p, &s), 1);
    assert_int_equal(s.length, L);
    assert_memory_equal(s.input_ids, ids, L * sizeof *ids);
    assert_memory_equal(s.labels, labels, L * sizeof *labels);
    assert_memory_equal(s.position_ids, pos, L * sizeof *pos);
    assert_int_equal(s.nsegments, nseg);
    assert_memory_equal(s.cu_seqlens, cu, (nseg + 1) * sizeof *cu);
    assert_int_equal(s.padding, padding);
    assert_int_equal(s.documents, documents);
}

/* L = 8, window 6, no bos/eos, pad 99. Lengths A5 B3 C6 D2 E11 F4: E's
 * first 8 tokens are a sequence of their own, its remainder E' (3, from
 * position 8) an item. Sorted: C6 A5 F4 B3 E'3 D2. C opens bin 1 (room 2),
 * A bin 2 (room 3), F bin 3 (room 4); B goes to bin 2 (room 3 is the least
 * that fits), E' to bin 3 (4), D to bin 1 (2). */
static void test_best_fit_example(void **state)
{
    (void)state;
    dpp_pack_config_t c = config(DPP_PACK_BEST_FIT, 8, -1, -1, 6);
    c.pad = 99;
    dpp_packer_t *p;
    assert_int_equal(dpp_packer_new(&p, &c), 0);
    const uint32_t A[] = {10, 11, 12, 13, 14}, B[] = {20, 21, 22}, C[] = {30, 31, 32, 33, 34, 35},
                   D[] = {40, 41}, E[] = {50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60},
                   F[] = {70, 71, 72, 73};
    const uint32_t *docs[] = {A, B, C, D, E, F};
    const size_t lens[] = {5, 3, 6, 2, 11, 4};
    dpp_sequence_t s;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(dpp_packer_next(p, &s), 0); /* the window is not full */
        assert_int_equal(dpp_packer_add(p, docs[i], lens[i]), 0);
    }
    expect_seq(p, 8, (int32_t[]){50, 51, 52, 53, 54, 55, 56, 57},
               (int32_t[]){51, 52, 53, 54, 55, 56, 57, 58}, (int32_t[]){0, 1, 2, 3, 4, 5, 6, 7},
               (int32_t[]){0, 8}, 1, 0, 0);
    expect_seq(p, 8, (int32_t[]){30, 31, 32, 33, 34, 35, 40, 41},
               (int32_t[]){31, 32, 33, 34, 35, -100, 41, -100}, (int32_t[]){0, 1, 2, 3, 4, 5, 0, 1},
               (int32_t[]){0, 6, 8}, 2, 0, 2);
    expect_seq(p, 8, (int32_t[]){10, 11, 12, 13, 14, 20, 21, 22},
               (int32_t[]){11, 12, 13, 14, -100, 21, 22, -100}, (int32_t[]){0, 1, 2, 3, 4, 0, 1, 2},
               (int32_t[]){0, 5, 8}, 2, 0, 2);
    expect_seq(p, 8, (int32_t[]){70, 71, 72, 73, 58, 59, 60, 99},
               (int32_t[]){71, 72, 73, -100, 59, 60, -100, -100},
               (int32_t[]){0, 1, 2, 3, 8, 9, 10, 0}, (int32_t[]){0, 4, 7, 8}, 3, 1, 2);
    assert_int_equal(dpp_packer_next(p, &s), 0);
    assert_int_equal(dpp_packer_finish(p), 0);
    assert_int_equal(dpp_packer_next(p, &s), 0);
    dpp_packer_free(p);

    /* L = 6, bos 1, eos 2, window 4 (the last window, at finish(), holds
     * the 3): P [1 10 11 2] and Q [1 20 21 2] open bins with room 2 each;
     * the empty R [1 2] fits both and goes to the earlier, P's. */
    c = config(DPP_PACK_BEST_FIT, 6, 1, 2, 4);
    assert_int_equal(dpp_packer_new(&p, &c), 0);
    const uint32_t P[] = {10, 11}, Q[] = {20, 21};
    assert_int_equal(dpp_packer_add(p, P, 2), 0);
    assert_int_equal(dpp_packer_add(p, Q, 2), 0);
    assert_int_equal(dpp_packer_add(p, NULL, 0), 0);
    assert_int_equal(dpp_packer_next(p, &s), 0);
    assert_int_equal(dpp_packer_finish(p), 0);
    expect_seq(p, 6, (int32_t[]){1, 10, 11, 2, 1, 2}, (int32_t[]){10, 11, 2, -100, 2, -100},
               (int32_t[]){0, 1, 2, 3, 0, 1}, (int32_t[]){0, 4, 6}, 2, 0, 2);
    expect_seq(p, 6, (int32_t[]){1, 20, 21, 2, 0, 0}, (int32_t[]){20, 21, 2, -100, -100, -100},
               (int32_t[]){0, 1, 2, 3, 0, 0}, (int32_t[]){0, 4, 6}, 2, 2, 1);
    assert_int_equal(dpp_packer_next(p, &s), 0);
    dpp_packer_free(p);
}

static const int64_t bos_eos[][2] = {{-1, -1}, {1, -1}, {-1, 2}, {1, 2}};
static const uint32_t lengths[] = {1, 2, 3, 7, 16, 61};

static void test_concat_reference(void **state)
{
    (void)state;
    uint64_t rng = 0x9E3779B97F4A7C15u;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        for (size_t be = 0; be < 4; be++) {
            for (int round = 0; round < 4; round++) {
                uint32_t L = lengths[li];
                dpp_pack_config_t c = config(DPP_PACK_CONCAT, L, bos_eos[be][0], bos_eos[be][1], 0);
                c.pad = 3;
                docs_t d = docs_random(&rng, 1 + rng_below(&rng, 60), L, round & 1);
                run_t want, got;
                ref_concat(&c, &d, &want);
                for (enum feed how = FEED_EACH; how <= FEED_RANDOM; how++) {
                    pack(&c, &d, how, rng_next(&rng), &got);
                    assert_runs_equal(&got, &want);
                    run_free(&got);
                }
                run_free(&want);
                docs_free(&d);
            }
        }
    }
}

static void test_best_fit_reference(void **state)
{
    (void)state;
    static const uint32_t windows[] = {1, 2, 3, 7, 50, 1000};
    uint64_t rng = 0xD1B54A32D192ED03u;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
            for (size_t be = 0; be < 4; be++) {
                uint32_t L = lengths[li];
                dpp_pack_config_t c =
                    config(DPP_PACK_BEST_FIT, L, bos_eos[be][0], bos_eos[be][1], windows[wi]);
                c.pad = 3;
                docs_t d = docs_random(&rng, 1 + rng_below(&rng, 120), L, 1);
                run_t want, got;
                ref_best_fit(&c, &d, &want);
                for (enum feed how = FEED_EACH; how <= FEED_RANDOM; how++) {
                    pack(&c, &d, how, rng_next(&rng), &got);
                    check_best_fit(&c, &d, &got);
                    assert_runs_equal(&got, &want);
                    run_free(&got);
                }
                run_free(&want);
                docs_free(&d);
            }
        }
    }
}

/* Many documents in bins of many rooms: the bitmap and heaps against the
 * scan of every bin. */
static void test_best_fit_large(void **state)
{
    (void)state;
    uint64_t rng = 42;
    dpp_pack_config_t c = config(DPP_PACK_BEST_FIT, 300, 1, 2, 500);
    docs_t d = {0};
    uint32_t buf[700];
    for (uint32_t k = 0; k < 700; k++)
        buf[k] = FIRST_ID + k;
    for (int i = 0; i < 3000; i++) {
        /* mostly short, so that bins take many items and rooms repeat */
        uint32_t len = rng_below(&rng, 4) ? rng_below(&rng, 40) : rng_below(&rng, 700);
        docs_add(&d, buf, len);
    }
    run_t want, got;
    ref_best_fit(&c, &d, &want);
    pack(&c, &d, FEED_EACH, 0, &got);
    assert_runs_equal(&got, &want);
    run_free(&got);
    run_free(&want);
    docs_free(&d);
}

/* Two packers on the same input hand out identical sequences, whatever
 * the interleaving; the count is the same in a count pass that only
 * counts. */
static void test_deterministic(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        uint64_t rng = 7 + (uint64_t)mode;
        dpp_pack_config_t c = config((dpp_pack_mode_t)mode, 32, 1, 2, 16);
        docs_t d = docs_random(&rng, 400, 32, 0);
        dpp_packer_t *p1, *p2;
        assert_int_equal(dpp_packer_new(&p1, &c), 0);
        assert_int_equal(dpp_packer_new(&p2, &c), 0);
        run_t r1, r2;
        run_init(&r1, 32);
        run_init(&r2, 32);
        size_t counted = 0;
        for (size_t i = 0; i < d.n; i++) {
            assert_int_equal(dpp_packer_add(p1, d.ids[i], d.len[i]), 0);
            assert_int_equal(dpp_packer_add(p2, d.ids[i], d.len[i]), 0);
            drain(p1, &r1);
            if (i % 5 == 4)
                counted += drain(p2, &r2);
        }
        assert_int_equal(dpp_packer_finish(p1), 0);
        assert_int_equal(dpp_packer_finish(p2), 0);
        drain(p1, &r1);
        counted += drain(p2, &r2);
        assert_true(r1.n > 10);
        assert_int_equal(counted, r1.n);
        assert_runs_equal(&r1, &r2);
        run_free(&r1);
        run_free(&r2);
        dpp_packer_free(p1);
        dpp_packer_free(p2);
        docs_free(&d);
    }
}

/* reset() in the middle of a split (sequences pending, a partial window or
 * sequence) and after one: the next split packs as on a new packer. */
static void test_reset(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        uint64_t rng = 99 + (uint64_t)mode;
        dpp_pack_config_t c = config((dpp_pack_mode_t)mode, 16, -1, 5, 4);
        docs_t a = docs_random(&rng, 50, 16, 0), b = docs_random(&rng, 50, 16, 0);
        run_t fresh, got, ignored;
        pack(&c, &b, FEED_EACH, 0, &fresh);
        dpp_packer_t *p;
        assert_int_equal(dpp_packer_new(&p, &c), 0);
        run_init(&ignored, 16);
        for (size_t i = 0; i < 23; i++)
            assert_int_equal(dpp_packer_add(p, a.ids[i], a.len[i]), 0);
        dpp_packer_reset(p);
        run_init(&got, 16);
        feed(p, &b, FEED_EACH, &rng, &got);
        assert_runs_equal(&got, &fresh);
        run_free(&got);
        /* after a finished split, and with a window's sequences half taken */
        dpp_packer_reset(p);
        feed(p, &a, FEED_AT_END, &rng, &ignored);
        dpp_packer_reset(p);
        for (size_t i = 0; i < 30; i++)
            assert_int_equal(dpp_packer_add(p, a.ids[i], a.len[i]), 0);
        dpp_sequence_t s;
        assert_int_equal(dpp_packer_next(p, &s), 1);
        dpp_packer_reset(p);
        run_init(&got, 16);
        feed(p, &b, FEED_RANDOM, &rng, &got);
        assert_runs_equal(&got, &fresh);
        run_free(&got);
        run_free(&fresh);
        run_free(&ignored);
        dpp_packer_free(p);
        docs_free(&a);
        docs_free(&b);
    }
}

/* Documents of 0 tokens: nothing without bos/eos (no sequence at all, no
 * place in a window), an item of bos/eos otherwise. */
static void test_empty_documents(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        dpp_pack_config_t c = config((dpp_pack_mode_t)mode, 4, -1, -1, 2);
        dpp_packer_t *p;
        assert_int_equal(dpp_packer_new(&p, &c), 0);
        dpp_sequence_t s;
        for (int i = 0; i < 10; i++)
            assert_int_equal(dpp_packer_add(p, NULL, 0), 0);
        assert_int_equal(dpp_packer_finish(p), 0);
        assert_int_equal(dpp_packer_next(p, &s), 0);

        /* empty ones between two of one token: still one window of 2 */
        dpp_packer_reset(p);
        const uint32_t one = 7;
        assert_int_equal(dpp_packer_add(p, &one, 1), 0);
        assert_int_equal(dpp_packer_add(p, NULL, 0), 0);
        assert_int_equal(dpp_packer_next(p, &s), 0);
        assert_int_equal(dpp_packer_add(p, &one, 1), 0);
        if (mode == DPP_PACK_BEST_FIT)
            expect_seq(p, 4, (int32_t[]){7, 7, 0, 0}, (int32_t[]){-100, -100, -100, -100},
                       (int32_t[]){0, 0, 0, 0}, (int32_t[]){0, 1, 2, 4}, 3, 2, 2);
        assert_int_equal(dpp_packer_finish(p), 0);
        if (mode == DPP_PACK_CONCAT)
            expect_seq(p, 4, (int32_t[]){7, 7, 0, 0}, (int32_t[]){-100, -100, -100, -100},
                       (int32_t[]){0, 0, 0, 0}, (int32_t[]){0, 1, 2, 4}, 3, 2, 2);
        assert_int_equal(dpp_packer_next(p, &s), 0);
        dpp_packer_free(p);

        /* eos only: each empty document is [eos], a document of its own */
        c = config((dpp_pack_mode_t)mode, 4, -1, 2, 2);
        assert_int_equal(dpp_packer_new(&p, &c), 0);
        for (int i = 0; i < 4; i++)
            assert_int_equal(dpp_packer_add(p, NULL, 0), 0);
        assert_int_equal(dpp_packer_finish(p), 0);
        if (mode == DPP_PACK_CONCAT)
            expect_seq(p, 4, (int32_t[]){2, 2, 2, 2}, (int32_t[]){-100, -100, -100, -100},
                       (int32_t[]){0, 0, 0, 0}, (int32_t[]){0, 1, 2, 3, 4}, 4, 0, 4);
        else
            for (int w = 0; w < 2; w++)
                expect_seq(p, 4, (int32_t[]){2, 2, 0, 0}, (int32_t[]){-100, -100, -100, -100},
                           (int32_t[]){0, 0, 0, 0}, (int32_t[]){0, 1, 2, 4}, 3, 2, 2);
        assert_int_equal(dpp_packer_next(p, &s), 0);
        dpp_packer_free(p);
    }
}

/* L = 1: every position a sequence, labels still the next token. */
static void test_length_one(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        dpp_pack_config_t c = config((dpp_pack_mode_t)mode, 1, 1, 2, 3);
        dpp_packer_t *p;
        assert_int_equal(dpp_packer_new(&p, &c), 0);
        const uint32_t a[] = {10, 11};
        assert_int_equal(dpp_packer_add(p, a, 2), 0);
        assert_int_equal(dpp_packer_finish(p), 0);
        static const int32_t ids[] = {1, 10, 11, 2}, labels[] = {10, 11, 2, -100};
        for (int32_t k = 0; k < 4; k++)
            expect_seq(p, 1, &ids[k], &labels[k], &k, (int32_t[]){0, 1}, 1, 0, k == 3);
        dpp_sequence_t s;
        assert_int_equal(dpp_packer_next(p, &s), 0);
        dpp_packer_free(p);
    }
}

/* A document much longer than L, alone and among short ones. */
static void test_long_document(void **state)
{
    (void)state;
    docs_t d = {0};
    uint32_t *big = xrealloc(NULL, 100003 * sizeof *big);
    for (uint32_t k = 0; k < 100003; k++)
        big[k] = FIRST_ID + k;
    const uint32_t small[] = {FIRST_ID + 200000, FIRST_ID + 200001};
    docs_add(&d, small, 2);
    docs_add(&d, big, 100003);
    docs_add(&d, small, 0);
    for (int mode = 0; mode < 2; mode++) {
        dpp_pack_config_t c = config((dpp_pack_mode_t)mode, 64, 1, 2, 2);
        run_t want, got;
        if (mode == DPP_PACK_CONCAT)
            ref_concat(&c, &d, &want);
        else
            ref_best_fit(&c, &d, &want);
        pack(&c, &d, FEED_EACH, 0, &got);
        assert_runs_equal(&got, &want);
        if (mode == DPP_PACK_BEST_FIT)
            check_best_fit(&c, &d, &got);
        assert_int_equal(got.n, mode == DPP_PACK_CONCAT ? (4 + 100005 + 2 + 63) / 64
                                                        : 100005 / 64 + 1 + 1);
        run_free(&got);
        run_free(&want);
    }
    docs_free(&d);
    free(big);
}

/* An id above INT32_MAX is refused and adds nothing; so is add() after
 * finish() until reset(). */
static void test_add_errors(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        dpp_pack_config_t c = config((dpp_pack_mode_t)mode, 4, -1, 2, 1);
        dpp_packer_t *p;
        assert_int_equal(dpp_packer_new(&p, &c), 0);
        const uint32_t bad[] = {5, 6, (uint32_t)INT32_MAX + 1}, good[] = {5, 6};
        assert_int_equal(dpp_packer_add(p, bad, 3), DPP_EINVAL);
        assert_int_equal(dpp_packer_add(p, good, 2), 0);
        assert_int_equal(dpp_packer_finish(p), 0);
        expect_seq(p, 4, (int32_t[]){5, 6, 2, 0}, (int32_t[]){6, 2, -100, -100},
                   (int32_t[]){0, 1, 2, 0}, (int32_t[]){0, 3, 4}, 2, 1, 1);
        assert_int_equal(dpp_packer_add(p, good, 2), DPP_EINVAL);
        dpp_packer_reset(p);
        assert_int_equal(dpp_packer_add(p, good, 2), 0);
        dpp_packer_free(p); /* with input pending */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_concat_example),
        cmocka_unit_test(test_best_fit_example),
        cmocka_unit_test(test_concat_reference),
        cmocka_unit_test(test_best_fit_reference),
        cmocka_unit_test(test_best_fit_large),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_empty_documents),
        cmocka_unit_test(test_length_one),
        cmocka_unit_test(test_long_document),
        cmocka_unit_test(test_add_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
