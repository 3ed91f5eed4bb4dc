// SPDX-License-Identifier: Apache-2.0
// Blocks: rows in, columns out (checked against the rows kept by the test),
// the documented header layout, and malformed blocks refused without crashes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>

#include "format/block.h"
#include "dpp/error.h"

#define ROWS 300
static const unsigned dims[2] = {1, 3};
static const uint8_t weighted[2] = {0, 1}; /* sparse feature 1 carries weights */
static const dpp_block_shape_t shape = {
    .ndense = 2, .nsparse = 2, .dims = dims, .weighted = weighted};

typedef struct rows {
    float label[ROWS];
    float dense[ROWS][4]; /* feature 0: [0]; feature 1: [1..3] */
    int64_t ids[2][ROWS][8];
    float weights[ROWS][8]; /* of sparse feature 1 */
    size_t lens[2][ROWS];
} rows_t;

/* A block of in's first nrows rows in shape s (of `shape`'s features, a
 * subset: dense features first in in->dense, sparse keys 0 and 1). */
static uint8_t *build_shape(const dpp_block_shape_t *s, const rows_t *in, size_t nrows, size_t *len)
{
    dpp_block_builder_t b;
    assert_int_equal(dpp_block_builder_init(&b, s), 0);
    for (size_t r = 0; r < nrows; r++) {
        const int64_t *ids[2] = {in->ids[0][r], in->ids[1][r]};
        const float *w[2] = {NULL, in->weights[r]};
        size_t lens[2] = {in->lens[0][r], in->lens[1][r]};
        assert_int_equal(dpp_block_builder_append(&b, in->label[r], in->dense[r], ids, w, lens), 0);
    }
    size_t want = dpp_block_builder_size(&b);
    uint8_t *buf;
    assert_int_equal(dpp_block_builder_finish(&b, &buf, len), 0);
    assert_int_equal(*len, want);
    assert_int_equal(b.rows, 0); /* finish empties the builder */
    dpp_block_builder_close(&b);
    return buf;
}

static uint8_t *build(const rows_t *in, size_t nrows, size_t *len)
{
    return build_shape(&shape, in, nrows, len);
}

static void fill(rows_t *in)
{
    srand(1);
    for (size_t r = 0; r < ROWS; r++) {
        in->label[r] = (float)(r % 2);
        for (int j = 0; j < 4; j++)
            in->dense[r][j] = (float)r + 0.25f * (float)j;
        for (int k = 0; k < 2; k++) {
            in->lens[k][r] = (size_t)(rand() % 9); /* 0..8, empty lists included */
            for (size_t j = 0; j < in->lens[k][r]; j++) {
                in->ids[k][r][j] = (int64_t)(r * 1000 + j) * (k ? -1 : 1);
                in->weights[r][j] = 0.5f * (float)j - (float)r;
            }
        }
    }
}

static void test_roundtrip(void **state)
{
    (void)state;
    static rows_t in;
    fill(&in);
    size_t len;
    uint8_t *buf = build(&in, ROWS, &len);
    dpp_block_info_t info;
    assert_int_equal(dpp_block_parse(buf, len, &shape, &info), 0);
    assert_int_equal(info.rows, ROWS);
    /* labels, 2 dense, then KJT lengths, offsets, values, weights */
    assert_int_equal(info.ncols, 1 + 2 + 4);
    const float *labels = dpp_block_labels(buf, &shape);
    const float *d0 = dpp_block_dense(buf, 0);
    const float *d1 = dpp_block_dense(buf, 1);
    for (size_t r = 0; r < ROWS; r++) {
        assert_true(labels[r] == in.label[r]);
        assert_true(d0[r] == in.dense[r][0]);
        for (int j = 0; j < 3; j++)
            assert_true(d1[r * 3 + j] == in.dense[r][1 + j]);
    }
    for (unsigned k = 0; k < 2; k++) {
        const int32_t *lengths = dpp_block_lengths(buf, &shape, k);
        size_t n;
        const int64_t *values = dpp_block_values(buf, &shape, k, &n);
        const float *w = dpp_block_weights(buf, &shape, k);
        assert_true((w != NULL) == (k == 1));
        size_t pos = 0;
        for (size_t r = 0; r < ROWS; r++) {
            assert_int_equal(lengths[r], in.lens[k][r]);
            for (size_t j = 0; j < in.lens[k][r]; j++) {
                if (w)
                    assert_true(w[pos] == in.weights[r][j]);
                assert_true(values[pos++] == in.ids[k][r][j]);
            }
        }
        assert_int_equal(pos, n);
    }
    /* header fields at their documented offsets */
    assert_memory_equal(buf, "DPB1", 4);
    uint64_t total;
    memcpy(&total, buf + 24, 8);
    assert_int_equal(total, len);
    free(buf);
}

/* The KJT view: key-major lengths, offsets = prefix sums, values and
 * weights of every key back to back (1.0 for the unweighted key). */
static void test_kjt_layout(void **state)
{
    (void)state;
    static rows_t in;
    fill(&in);
    size_t len, nrows = 40;
    uint8_t *buf = build(&in, nrows, &len);
    dpp_block_info_t info;
    assert_int_equal(dpp_block_parse(buf, len, &shape, &info), 0);
    dpp_block_kjt_t kjt;
    dpp_block_kjt(buf, &shape, &kjt);
    assert_non_null(kjt.weights);
    size_t pos = 0;
    assert_int_equal(kjt.offsets[0], 0);
    for (unsigned k = 0; k < 2; k++) {
        for (size_t r = 0; r < nrows; r++) {
            size_t cell = k * nrows + r;
            assert_int_equal(kjt.lengths[cell], in.lens[k][r]);
            assert_int_equal(kjt.offsets[cell], pos);
            for (size_t j = 0; j < in.lens[k][r]; j++, pos++) {
                assert_true(kjt.values[pos] == in.ids[k][r][j]);
                assert_true(kjt.weights[pos] == (k == 1 ? in.weights[r][j] : 1.0f));
            }
        }
    }
    assert_int_equal(kjt.offsets[2 * nrows], pos);
    assert_int_equal(kjt.nvalues, pos);
    /* offsets that are not the prefix sums are refused */
    ((int32_t *)kjt.offsets)[3] += 1;
    assert_int_equal(dpp_block_parse(buf, len, &shape, &info), DPP_EBLOCK);
    free(buf);
}

/* Batches cut across block boundaries: every split of 3 blocks into ranges
 * re-assembles to the same rows. */
static void test_append_block_ranges(void **state)
{
    (void)state;
    static rows_t in;
    fill(&in);
    size_t nrows = 90, len;
    uint8_t *whole = build(&in, nrows, &len);
    dpp_block_info_t info;
    assert_int_equal(dpp_block_parse(whole, len, &shape, &info), 0);
    const size_t cuts[][2] = {{0, 90}, {0, 1}, {1, 90}, {0, 0}, {45, 45}, {7, 64}, {64, 90}};
    for (size_t t = 0; t < sizeof cuts / sizeof cuts[0]; t++) {
        for (size_t mid = cuts[t][0]; mid <= cuts[t][1]; mid += 13) {
            dpp_block_builder_t b;
            assert_int_equal(dpp_block_builder_init(&b, &shape), 0);
            assert_int_equal(dpp_block_builder_append_block(&b, whole, cuts[t][0], mid), 0);
            assert_int_equal(dpp_block_builder_append_block(&b, whole, mid, cuts[t][1]), 0);
            uint8_t *got;
            size_t got_len;
            assert_int_equal(dpp_block_builder_finish(&b, &got, &got_len), 0);
            dpp_block_builder_close(&b);
            assert_int_equal(dpp_block_parse(got, got_len, &shape, &info), 0);
            size_t r0 = cuts[t][0], n = cuts[t][1] - r0;
            assert_int_equal(info.rows, n);
            for (size_t r = 0; r < n; r++) {
                assert_true(dpp_block_labels(got, &shape)[r] == in.label[r0 + r]);
                for (int j = 0; j < 3; j++)
                    assert_true(dpp_block_dense(got, 1)[r * 3 + j] == in.dense[r0 + r][1 + j]);
            }
            for (unsigned k = 0; k < 2; k++) {
                size_t nv;
                const int64_t *v = dpp_block_values(got, &shape, k, &nv);
                const int32_t *l = dpp_block_lengths(got, &shape, k);
                const float *w = dpp_block_weights(got, &shape, k);
                size_t pos = 0;
                for (size_t r = 0; r < n; r++) {
                    assert_int_equal(l[r], in.lens[k][r0 + r]);
                    for (size_t j = 0; j < in.lens[k][r0 + r]; j++, pos++) {
                        assert_true(v[pos] == in.ids[k][r0 + r][j]);
                        if (w)
                            assert_true(w[pos] == in.weights[r0 + r][j]);
                    }
                }
                assert_int_equal(pos, nv);
            }
            free(got);
            if (mid == cuts[t][1])
                break;
        }
    }
    dpp_block_builder_t b;
    assert_int_equal(dpp_block_builder_init(&b, &shape), 0);
    assert_int_equal(dpp_block_builder_append_block(&b, whole, 5, 91), DPP_EINVAL);
    assert_int_equal(dpp_block_builder_append_block(&b, whole, 6, 5), DPP_EINVAL);
    dpp_block_builder_close(&b);
    free(whole);
}

/* Gathered rows from two blocks in a shuffled order, in several calls,
 * give byte for byte the block that appending the same rows one at a time
 * gives; a row past its block is refused and appends nothing. */
static void test_gather(void **state)
{
    (void)state;
    static rows_t in, in2;
    fill(&in);
    fill(&in2);
    for (size_t r = 0; r < ROWS; r++) /* the second block's rows differ */
        in2.label[r] = 2.0f + (float)r;
    size_t len_a, len_b;
    uint8_t *a = build(&in, 70, &len_a), *bb = build(&in2, 50, &len_b);
    enum { N = 120 };
    const uint8_t *from[N];
    uint32_t rows[N];
    uint64_t x = 12345;
    for (size_t j = 0; j < N; j++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int second = (x >> 40) % 3 == 0;
        from[j] = second ? bb : a;
        rows[j] = (uint32_t)((x >> 20) % (second ? 50 : 70));
    }
    dpp_block_builder_t one, all;
    assert_int_equal(dpp_block_builder_init(&one, &shape), 0);
    assert_int_equal(dpp_block_builder_init(&all, &shape), 0);
    for (size_t j = 0; j < N; j++)
        assert_int_equal(dpp_block_builder_append_block(&one, from[j], rows[j], rows[j] + 1), 0);
    const size_t parts[] = {0, 1, 40, 41, 100, N};
    for (size_t p = 0; p + 1 < sizeof parts / sizeof parts[0]; p++)
        assert_int_equal(dpp_block_builder_gather(&all, from + parts[p], rows + parts[p],
                                                  parts[p + 1] - parts[p]),
                         0);
    uint32_t bad[2] = {3, 70};
    const uint8_t *bad_from[2] = {a, a};
    assert_int_equal(dpp_block_builder_gather(&all, bad_from, bad, 2), DPP_EINVAL);
    uint8_t *want, *got;
    size_t want_len, got_len;
    assert_int_equal(dpp_block_builder_finish(&one, &want, &want_len), 0);
    assert_int_equal(dpp_block_builder_finish(&all, &got, &got_len), 0);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    dpp_block_builder_close(&one);
    dpp_block_builder_close(&all);
    free(want);
    free(got);
    free(a);
    free(bb);

    /* rows from more blocks than one chunk's table holds (40), 1,300 rows:
     * more than one chunk either way */
    enum { NB = 40, M = 1300 };
    uint8_t *many[NB];
    size_t many_rows[NB];
    for (size_t i = 0; i < NB; i++) {
        many_rows[i] = 3 + i % 5;
        many[i] = build(i % 2 ? &in : &in2, many_rows[i], &len_a);
    }
    static const uint8_t *mfrom[M];
    static uint32_t mrows[M];
    for (size_t j = 0; j < M; j++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = (size_t)(x >> 33) % NB;
        mfrom[j] = many[i];
        mrows[j] = (uint32_t)((x >> 13) % many_rows[i]);
    }
    assert_int_equal(dpp_block_builder_init(&one, &shape), 0);
    assert_int_equal(dpp_block_builder_init(&all, &shape), 0);
    for (size_t j = 0; j < M; j++)
        assert_int_equal(dpp_block_builder_append_block(&one, mfrom[j], mrows[j], mrows[j] + 1), 0);
    assert_int_equal(dpp_block_builder_gather(&all, mfrom, mrows, M), 0);
    assert_int_equal(dpp_block_builder_finish(&one, &want, &want_len), 0);
    assert_int_equal(dpp_block_builder_finish(&all, &got, &got_len), 0);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    dpp_block_builder_close(&one);
    dpp_block_builder_close(&all);
    free(want);
    free(got);
    for (size_t i = 0; i < NB; i++)
        free(many[i]);
}

static void test_empty_block(void **state)
{
    (void)state;
    static rows_t in;
    size_t len;
    uint8_t *buf = build(&in, 0, &len);
    dpp_block_info_t info;
    assert_int_equal(dpp_block_parse(buf, len, &shape, &info), 0);
    assert_int_equal(info.rows, 0);
    free(buf);
}

static void test_shape_mismatch(void **state)
{
    (void)state;
    static rows_t in;
    fill(&in);
    size_t len;
    uint8_t *buf = build(&in, 10, &len);
    dpp_block_info_t info;
    const unsigned other_dims[2] = {1, 2};
    const uint8_t unweighted[2] = {0, 0};
    dpp_block_shape_t other = shape;
    other.dims = other_dims;
    assert_int_equal(dpp_block_parse(buf, len, &other, &info), DPP_EBLOCK);
    other = shape;
    other.weighted = unweighted;
    assert_int_equal(dpp_block_parse(buf, len, &other, &info), DPP_EBLOCK);
    other = shape;
    other.ndense = 1;
    assert_int_equal(dpp_block_parse(buf, len, &other, &info), DPP_EBLOCK);
    other = shape;
    other.nsparse = 1;
    assert_int_equal(dpp_block_parse(buf, len, &other, &info), DPP_EBLOCK);
    assert_int_equal(dpp_block_parse(buf, len - 8, &shape, &info), DPP_EBLOCK);
    assert_int_equal(dpp_block_parse(buf, 10, &shape, &info), DPP_EBLOCK);
    free(buf);
}

/* Corrupting any header or column-table byte, or a lengths entry, must be
 * refused or still describe a block whose columns lie inside the buffer. */
static void test_corruptions(void **state)
{
    (void)state;
    static rows_t in;
    fill(&in);
    size_t len;
    uint8_t *good = build(&in, 50, &len);
    size_t table_end = DPP_BLOCK_HEADER_SIZE + 7 * DPP_BLOCK_COL_ENTRY_SIZE;
    uint8_t *buf = malloc(len);
    srand(3);
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, good, len);
        size_t pos = iter < (int)table_end * 8 ? (size_t)iter / 8 : (size_t)rand() % len;
        buf[pos] ^= (uint8_t)(1u << (iter % 8));
        dpp_block_info_t info;
        if (dpp_block_parse(buf, len, &shape, &info) != 0)
            continue;
        /* accepted: every column must be readable without leaving buf */
        volatile float sink = 0;
        const float *l = dpp_block_labels(buf, &shape);
        for (uint32_t r = 0; r < info.rows; r++)
            sink += l[r];
        for (unsigned k = 0; k < 2; k++) {
            size_t n;
            const int64_t *v = dpp_block_values(buf, &shape, k, &n);
            const float *w = dpp_block_weights(buf, &shape, k);
            for (size_t j = 0; j < n; j++)
                sink += (float)v[j] + (w ? w[j] : 0);
        }
        (void)sink;
    }
    /* a negative length is refused */
    memcpy(buf, good, len);
    int32_t *lengths = (int32_t *)dpp_block_lengths(buf, &shape, 0);
    lengths[0] = -1;
    dpp_block_info_t info;
    assert_int_equal(dpp_block_parse(buf, len, &shape, &info), DPP_EBLOCK);
    /* lengths whose prefix sums pass 2^32 and come back to the same total
     * (two of INT32_MAX, the third making up the difference), the offsets
     * their prefix sums modulo 2^32: consistent in 32-bit arithmetic and
     * with the values column's size, so only a negative offset shows it */
    memcpy(buf, good, len);
    lengths = (int32_t *)dpp_block_lengths(buf, &shape, 0);
    dpp_block_kjt_t kj;
    dpp_block_kjt(buf, &shape, &kj);
    int32_t *offs = (int32_t *)kj.offsets;
    size_t cells = 2 * (size_t)50; /* 2 keys of the 50 rows built above */
    int32_t first3 = lengths[0] + lengths[1] + lengths[2];
    lengths[0] = lengths[1] = INT32_MAX;
    lengths[2] = first3 + 2;
    for (size_t c = 0; c < cells; c++)
        offs[c + 1] = (int32_t)((uint32_t)offs[c] + (uint32_t)lengths[c]);
    assert_int_equal(dpp_block_parse(buf, len, &shape, &info), DPP_EBLOCK);
    free(buf);
    free(good);
}

/* Every cell of the lengths and offsets, one at a time: a length made
 * negative, an offset off by one, an offset's sign bit set, a length and
 * the next offset grown together past it (the sums still right from there
 * but not after). 37 rows x 2 keys = 74 cells: every lane of the checker's
 * eight-cell steps and its scalar tail. The block stays intact apart from
 * the one change, and is accepted again once it is undone. */
static void test_each_cell_checked(void **state)
{
    (void)state;
    static rows_t in;
    fill(&in);
    const size_t nrows = 37, cells = 2 * nrows;
    size_t len;
    uint8_t *buf = build(&in, nrows, &len);
    dpp_block_info_t info;
    dpp_block_kjt_t kj;
    dpp_block_kjt(buf, &shape, &kj);
    int32_t *lengths = (int32_t *)kj.lengths, *offs = (int32_t *)kj.offsets;
    for (size_t c = 0; c < cells; c++) {
        int32_t l = lengths[c], o = offs[c + 1];
        lengths[c] = -1;
        assert_int_equal(dpp_block_parse(buf, len, &shape, &info), DPP_EBLOCK);
        lengths[c] = l;
        offs[c + 1] = o + 1;
        assert_int_equal(dpp_block_parse(buf, len, &shape, &info), DPP_EBLOCK);
        offs[c + 1] = (int32_t)((uint32_t)o | 0x80000000u);
        assert_int_equal(dpp_block_parse(buf, len, &shape, &info), DPP_EBLOCK);
        if (c + 1 < cells) { /* the next cell's sum is then one off */
            lengths[c] = l + 1;
            offs[c + 1] = o + 1;
            assert_int_equal(dpp_block_parse(buf, len, &shape, &info), DPP_EBLOCK);
        }
        lengths[c] = l;
        offs[c + 1] = o;
        assert_int_equal(dpp_block_parse(buf, len, &shape, &info), 0);
    }
    free(buf);
}

static uint64_t col_bytes(const uint8_t *buf, unsigned col)
{
    uint64_t n;
    memcpy(&n, buf + DPP_BLOCK_HEADER_SIZE + (size_t)col * DPP_BLOCK_COL_ENTRY_SIZE + 8, 8);
    return n;
}

/* A spec without a label, with only dense or only sparse features: the
 * labels column is there and empty, the others hold what the rows gave;
 * rows copied between such blocks stay the same; and a block is refused
 * by the shape with the other answer to "is there a label". */
static void test_no_label(void **state)
{
    (void)state;
    static rows_t in;
    fill(&in);
    const dpp_block_shape_t dense_only = {.ndense = 2, .dims = dims, .no_label = 1};
    const dpp_block_shape_t sparse_only = {.nsparse = 2, .weighted = weighted, .no_label = 1};
    const dpp_block_shape_t *shapes[2] = {&dense_only, &sparse_only};
    const size_t nrows = 61;
    for (int t = 0; t < 2; t++) {
        const dpp_block_shape_t *s = shapes[t];
        size_t len, labelled_len;
        uint8_t *buf = build_shape(s, &in, nrows, &len);
        dpp_block_shape_t with_label = *s;
        with_label.no_label = 0;
        uint8_t *labelled = build_shape(&with_label, &in, nrows, &labelled_len);
        dpp_block_info_t info;
        assert_int_equal(dpp_block_parse(buf, len, s, &info), 0);
        assert_int_equal(info.rows, nrows);
        assert_int_equal(info.ncols, 1 + s->ndense + (s->nsparse ? 4 : 0));
        assert_null(dpp_block_labels(buf, s));
        assert_int_equal(col_bytes(buf, 0), 0);
        assert_int_equal(col_bytes(labelled, 0), nrows * sizeof(float));
        /* the label column's bytes, rounded to 8, are all that differ in size */
        assert_int_equal(labelled_len - len, (nrows * sizeof(float) + 7) & ~(size_t)7);
        assert_int_equal(dpp_block_parse(buf, len, &with_label, &info), DPP_EBLOCK);
        assert_int_equal(dpp_block_parse(labelled, labelled_len, s, &info), DPP_EBLOCK);
        for (unsigned i = 0; i < s->ndense; i++)
            for (size_t r = 0; r < nrows; r++)
                for (unsigned j = 0; j < dims[i]; j++)
                    assert_true(dpp_block_dense(buf, i)[r * dims[i] + j] == in.dense[r][i + j]);
        dpp_block_kjt_t kjt;
        dpp_block_kjt(buf, s, &kjt);
        if (s->nsparse == 0) {
            assert_null(kjt.lengths);
            assert_int_equal(kjt.nvalues, 0);
        }
        size_t nvalues = 0;
        for (unsigned k = 0; k < s->nsparse; k++) {
            size_t n;
            const int64_t *v = dpp_block_values(buf, s, k, &n);
            const int32_t *l = dpp_block_lengths(buf, s, k);
            size_t pos = 0;
            for (size_t r = 0; r < nrows; r++) {
                assert_int_equal(l[r], in.lens[k][r]);
                for (size_t j = 0; j < in.lens[k][r]; j++)
                    assert_true(v[pos++] == in.ids[k][r][j]);
            }
            assert_int_equal(pos, n);
            nvalues += n;
        }
        assert_int_equal(kjt.nvalues, nvalues);

        /* cut in two and put back together, and gathered row by row: the
         * same bytes */
        dpp_block_builder_t b;
        assert_int_equal(dpp_block_builder_init(&b, s), 0);
        assert_int_equal(dpp_block_builder_append_block(&b, buf, 0, 17), 0);
        assert_int_equal(dpp_block_builder_append_block(&b, buf, 17, nrows), 0);
        uint8_t *again;
        size_t again_len;
        assert_int_equal(dpp_block_builder_finish(&b, &again, &again_len), 0);
        assert_int_equal(again_len, len);
        assert_memory_equal(again, buf, len);
        free(again);
        const uint8_t *from[61];
        uint32_t rows[61];
        for (uint32_t r = 0; r < nrows; r++) {
            from[r] = buf;
            rows[r] = r;
        }
        assert_int_equal(dpp_block_builder_gather(&b, from, rows, nrows), 0);
        assert_int_equal(dpp_block_builder_finish(&b, &again, &again_len), 0);
        assert_int_equal(again_len, len);
        assert_memory_equal(again, buf, len);
        free(again);
        dpp_block_builder_close(&b);
        free(labelled);
        free(buf);
    }
}

static void test_builder_rejects_zero_dim(void **state)
{
    (void)state;
    dpp_block_builder_t b;
    const unsigned bad[1] = {0};
    const dpp_block_shape_t zero_dim = {.ndense = 1, .dims = bad};
    assert_int_equal(dpp_block_builder_init(&b, &zero_dim), DPP_EINVAL);
}

/* The checks a receiver makes before and after decompressing a block. */
static void test_decompress(void **state)
{
    (void)state;
    size_t n = 1u << 20;
    uint8_t *raw = malloc(n);
    for (size_t i = 0; i < n; i++)
        raw[i] = (uint8_t)(i * 2654435761u >> 13);
    size_t bound = ZSTD_compressBound(n);
    uint8_t *z = malloc(bound);
    size_t zn = ZSTD_compress(z, bound, raw, n, 1);
    assert_false(ZSTD_isError(zn));
    uint8_t *out;
    size_t out_len;
    assert_int_equal(dpp_block_decompress(NULL, z, zn, 1, n, n, &out, &out_len), 0);
    assert_int_equal(out_len, n);
    assert_memory_equal(out, raw, n);
    free(out);
    /* over the limit, a wrong declared size, a cut frame */
    assert_int_equal(dpp_block_zstd_check(z, zn, n, n - 1), DPP_EBLOCK);
    assert_int_equal(dpp_block_decompress(NULL, z, zn, 1, n, n - 1, &out, &out_len), DPP_EBLOCK);
    assert_null(out);
    assert_int_equal(dpp_block_decompress(NULL, z, zn, 1, n + 1, 2 * n, &out, &out_len),
                     DPP_EBLOCK);
    assert_int_equal(dpp_block_decompress(NULL, z, zn / 2, 1, n, n, &out, &out_len), DPP_EBLOCK);
    /* a bomb: 13 bytes whose header declares 4 GiB, refused from the header */
    uint8_t bomb[13] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 1, 0, 0, 0};
    assert_int_equal(ZSTD_getFrameContentSize(bomb, sizeof bomb), 1ull << 32);
    assert_int_equal(dpp_block_zstd_check(bomb, sizeof bomb, 1ull << 32, 256u << 20), DPP_EBLOCK);
    /* a frame that does not say its size */
    assert_int_equal(dpp_block_zstd_check(raw, 64, 64, n), DPP_EBLOCK);
    /* codec 0: the size must match; other codecs do not exist */
    assert_int_equal(dpp_block_decompress(NULL, raw, 100, 0, 101, n, &out, &out_len), DPP_EBLOCK);
    assert_int_equal(dpp_block_decompress(NULL, raw, 100, 0, 100, n, &out, &out_len), 0);
    assert_memory_equal(out, raw, 100);
    free(out);
    assert_int_equal(dpp_block_decompress(NULL, z, zn, 2, n, n, &out, &out_len), DPP_EBLOCK);
    free(z);
    free(raw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_kjt_layout),
        cmocka_unit_test(test_append_block_ranges),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_empty_block),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_corruptions),
        cmocka_unit_test(test_each_cell_checked),
        cmocka_unit_test(test_no_label),
        cmocka_unit_test(test_builder_rejects_zero_dim),
        cmocka_unit_test(test_decompress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
