// SPDX-License-Identifier: Apache-2.0
// Columnar block building (worker) and validation/reading in place (client).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "format/block.h"
#include "dpp/error.h"

/* Header, little-endian: magic u32, version u16, flags u16, rows u32,
 * ndense u16, nsparse u16, ncols u32, reserved u32, total_size u64.
 * Then ncols entries of {offset u64, nbytes u64}, then the columns, each
 * starting 8-byte aligned: labels, dense features, and with any sparse
 * feature the KJT columns lengths, offsets, values and (when any feature is
 * weighted) weights. A spec without a label keeps the labels column, empty
 * (0 bytes): the other columns keep their numbers, and a labelled session's
 * blocks are what they were before labels became optional. Only
 * little-endian hosts are supported; the block is read in place. */
#define ALIGN8(x) (((x) + 7u) & ~(size_t)7u)

static void put_u16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, 2);
}
static void put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static void put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static uint16_t get_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int is_weighted(const dpp_block_shape_t *shape, unsigned k)
{
    return shape->weighted && shape->weighted[k];
}

static int any_weighted(const dpp_block_shape_t *shape)
{
    for (unsigned k = 0; k < shape->nsparse; k++)
        if (is_weighted(shape, k))
            return 1;
    return 0;
}

static unsigned ncols_of(const dpp_block_shape_t *shape)
{
    return 1 + shape->ndense + (shape->nsparse ? 3 + (unsigned)any_weighted(shape) : 0);
}

/* Column numbers of the KJT columns. */
#define COL_LENGTHS(nd) (1 + (nd))
#define COL_OFFSETS(nd) (2 + (nd))
#define COL_VALUES(nd) (3 + (nd))
#define COL_WEIGHTS(nd) (4 + (nd))

int dpp_block_builder_init(dpp_block_builder_t *b, const dpp_block_shape_t *shape)
{
    memset(b, 0, sizeof *b);
    unsigned nd = shape->ndense, ns = shape->nsparse;
    if (nd + ns > DPP_BLOCK_MAX_FEATURES)
        return DPP_EINVAL;
    b->ndense = nd;
    b->nsparse = ns;
    b->no_label = shape->no_label;
    b->dims = calloc(nd ? nd : 1, sizeof *b->dims);
    b->first = calloc(nd ? nd : 1, sizeof *b->first);
    b->weighted = calloc(ns ? ns : 1, sizeof *b->weighted);
    b->values = calloc(ns ? ns : 1, sizeof *b->values);
    b->weights = calloc(ns ? ns : 1, sizeof *b->weights);
    b->nvalues = calloc(ns ? ns : 1, sizeof *b->nvalues);
    b->cap_values = calloc(ns ? ns : 1, sizeof *b->cap_values);
    if (!b->dims || !b->first || !b->weighted || !b->values || !b->weights || !b->nvalues ||
        !b->cap_values) {
        dpp_block_builder_close(b);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < nd; i++) {
        if (shape->dims[i] == 0) {
            dpp_block_builder_close(b);
            return DPP_EINVAL;
        }
        b->dims[i] = shape->dims[i];
        b->first[i] = b->dense_width;
        b->dense_width += shape->dims[i];
    }
    for (unsigned k = 0; k < ns; k++)
        b->weighted[k] = (uint8_t)is_weighted(shape, k);
    return 0;
}

void dpp_block_builder_close(dpp_block_builder_t *b)
{
    for (unsigned k = 0; k < b->nsparse; k++) {
        if (b->values)
            free(b->values[k]);
        if (b->weights)
            free(b->weights[k]);
    }
    free(b->values);
    free(b->weights);
    free(b->nvalues);
    free(b->cap_values);
    free(b->dims);
    free(b->first);
    free(b->weighted);
    free(b->labels);
    free(b->dense);
    free(b->lengths);
    memset(b, 0, sizeof *b);
}

static int grow_rows(dpp_block_builder_t *b)
{
    size_t cap = b->cap_rows ? b->cap_rows * 2 : 256;
    float *labels = realloc(b->labels, cap * sizeof *labels);
    if (labels == NULL)
        return -ENOMEM;
    b->labels = labels;
    /* dense and lengths are column after column, each cap rows long: they
     * are laid out again for the new row capacity. */
    float *dense = malloc(cap * (b->dense_width ? b->dense_width : 1) * sizeof *dense);
    int32_t *lengths = malloc(cap * (b->nsparse ? b->nsparse : 1) * sizeof *lengths);
    if (dense == NULL || lengths == NULL) {
        free(dense);
        free(lengths);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < b->ndense && b->dense; i++)
        memcpy(dense + cap * b->first[i], dpp_block_builder_dense_row(b, i, 0),
               b->rows * b->dims[i] * sizeof *dense);
    for (unsigned k = 0; k < b->nsparse && b->lengths; k++)
        memcpy(lengths + k * cap, b->lengths + k * b->cap_rows, b->rows * sizeof *lengths);
    free(b->dense);
    free(b->lengths);
    b->dense = dense;
    b->lengths = lengths;
    b->cap_rows = cap;
    return 0;
}

static int grow_values(dpp_block_builder_t *b, unsigned k, size_t need)
{
    size_t cap = b->cap_values[k] ? b->cap_values[k] : 1024;
    while (cap < need)
        cap *= 2;
    int64_t *v = realloc(b->values[k], cap * sizeof *v);
    if (v == NULL)
        return -ENOMEM;
    b->values[k] = v;
    if (b->weighted[k]) {
        float *w = realloc(b->weights[k], cap * sizeof *w);
        if (w == NULL)
            return -ENOMEM;
        b->weights[k] = w;
    }
    b->cap_values[k] = cap;
    return 0;
}

int dpp_block_builder_reserve_row(dpp_block_builder_t *b)
{
    return b->rows < b->cap_rows ? 0 : grow_rows(b);
}

int dpp_block_builder_reserve_values(dpp_block_builder_t *b, unsigned k, size_t n)
{
    size_t need = b->nvalues[k] + n;
    return need <= b->cap_values[k] ? 0 : grow_values(b, k, need);
}

void dpp_block_builder_commit_row(dpp_block_builder_t *b, float label, const size_t *lens)
{
    size_t r = b->rows;
    b->labels[r] = label;
    for (unsigned k = 0; k < b->nsparse; k++) {
        b->nvalues[k] += lens[k];
        b->lengths[k * b->cap_rows + r] = (int32_t)lens[k];
    }
    b->rows++;
}

int dpp_block_builder_append(dpp_block_builder_t *b, float label, const float *dense,
                             const int64_t *const *ids, const float *const *weights,
                             const size_t *lens)
{
    if (dpp_block_builder_reserve_row(b) != 0)
        return -ENOMEM;
    for (unsigned k = 0; k < b->nsparse; k++) {
        if (lens[k] > INT32_MAX)
            return DPP_EINVAL;
        if (dpp_block_builder_reserve_values(b, k, lens[k]) != 0)
            return -ENOMEM;
    }
    for (unsigned i = 0; i < b->ndense; i++)
        memcpy(dpp_block_builder_dense_row(b, i, b->rows), dense + b->first[i],
               b->dims[i] * sizeof *dense);
    for (unsigned k = 0; k < b->nsparse; k++) {
        if (lens[k]) { /* an empty list may meet a never-allocated column */
            memcpy(b->values[k] + b->nvalues[k], ids[k], lens[k] * sizeof(int64_t));
            if (b->weighted[k])
                memcpy(b->weights[k] + b->nvalues[k], weights[k], lens[k] * sizeof(float));
        }
    }
    dpp_block_builder_commit_row(b, label, lens);
    return 0;
}

/* The labels column of a block of rows rows. */
static size_t label_bytes(int no_label, size_t rows)
{
    return no_label ? 0 : rows * sizeof(float);
}

static int builder_weighted(const dpp_block_builder_t *b)
{
    for (unsigned k = 0; k < b->nsparse; k++)
        if (b->weighted[k])
            return 1;
    return 0;
}

static unsigned builder_ncols(const dpp_block_builder_t *b)
{
    return 1 + b->ndense + (b->nsparse ? 3 + (unsigned)builder_weighted(b) : 0);
}

static size_t builder_nvalues(const dpp_block_builder_t *b)
{
    size_t n = 0;
    for (unsigned k = 0; k < b->nsparse; k++)
        n += b->nvalues[k];
    return n;
}

size_t dpp_block_builder_size(const dpp_block_builder_t *b)
{
    unsigned ncols = builder_ncols(b);
    size_t size = ALIGN8(DPP_BLOCK_HEADER_SIZE + (size_t)ncols * DPP_BLOCK_COL_ENTRY_SIZE);
    size += ALIGN8(label_bytes(b->no_label, b->rows));
    for (unsigned i = 0; i < b->ndense; i++)
        size += ALIGN8(b->rows * b->dims[i] * sizeof(float));
    if (b->nsparse) {
        size_t cells = (size_t)b->nsparse * b->rows, nv = builder_nvalues(b);
        size += ALIGN8(cells * sizeof(int32_t)) + ALIGN8((cells + 1) * sizeof(int32_t));
        size += nv * sizeof(int64_t);
        if (builder_weighted(b))
            size += ALIGN8(nv * sizeof(float));
    }
    return size;
}

/* Appends one column's entry to the table and reserves its bytes, zeroing
 * the alignment padding after them. */
static uint8_t *put_col(uint8_t *buf, unsigned *col, size_t *off, size_t nbytes)
{
    uint8_t *entry = buf + DPP_BLOCK_HEADER_SIZE + (size_t)*col * DPP_BLOCK_COL_ENTRY_SIZE;
    put_u64(entry, *off);
    put_u64(entry + 8, nbytes);
    uint8_t *data = buf + *off;
    memset(data + nbytes, 0, ALIGN8(nbytes) - nbytes);
    *off += ALIGN8(nbytes);
    (*col)++;
    return data;
}

int dpp_block_builder_finish(dpp_block_builder_t *b, uint8_t **out, size_t *len)
{
    if (builder_nvalues(b) > INT32_MAX) /* KJT offsets are int32 */
        return DPP_EINVAL;
    size_t total = dpp_block_builder_size(b);
    uint8_t *buf = malloc(total);
    if (buf == NULL)
        return -ENOMEM;
    dpp_block_builder_finish_to(b, buf);
    *out = buf;
    *len = total;
    return 0;
}

int dpp_block_builder_finish_to(dpp_block_builder_t *b, uint8_t *buf)
{
    size_t nv = builder_nvalues(b);
    if (nv > INT32_MAX) /* KJT offsets are int32 */
        return DPP_EINVAL;
    size_t total = dpp_block_builder_size(b);
    unsigned ncols = builder_ncols(b);
    size_t off = ALIGN8(DPP_BLOCK_HEADER_SIZE + (size_t)ncols * DPP_BLOCK_COL_ENTRY_SIZE);
    /* Only the header needs zeroing: every column byte and its padding is
     * written below. */
    memset(buf, 0, off);
    put_u32(buf, DPP_BLOCK_MAGIC);
    put_u16(buf + 4, DPP_BLOCK_VERSION);
    put_u16(buf + 6, 0);
    put_u32(buf + 8, (uint32_t)b->rows);
    put_u16(buf + 12, (uint16_t)b->ndense);
    put_u16(buf + 14, (uint16_t)b->nsparse);
    put_u32(buf + 16, ncols);
    put_u32(buf + 20, 0);
    put_u64(buf + 24, total);

    unsigned col = 0;
    size_t rows = b->rows, n = label_bytes(b->no_label, rows);
    uint8_t *dst = put_col(buf, &col, &off, n);
    if (n) /* an empty builder may never have allocated its columns */
        memcpy(dst, b->labels, n);
    for (unsigned i = 0; i < b->ndense; i++) {
        size_t nb = rows * b->dims[i] * sizeof(float);
        uint8_t *f = put_col(buf, &col, &off, nb);
        if (nb)
            memcpy(f, dpp_block_builder_dense_row(b, i, 0), nb);
    }
    if (b->nsparse == 0)
        goto done;
    size_t cells = (size_t)b->nsparse * rows;
    int32_t *lengths = (int32_t *)put_col(buf, &col, &off, cells * sizeof(int32_t));
    int32_t *offsets = (int32_t *)put_col(buf, &col, &off, (cells + 1) * sizeof(int32_t));
    int64_t *values = (int64_t *)put_col(buf, &col, &off, nv * sizeof(int64_t));
    float *weights =
        builder_weighted(b) ? (float *)put_col(buf, &col, &off, nv * sizeof(float)) : NULL;
    size_t at = 0;
    offsets[0] = 0;
    for (unsigned k = 0; k < b->nsparse; k++) {
        if (rows)
            memcpy(lengths + k * rows, b->lengths + k * b->cap_rows, rows * sizeof(int32_t));
        for (size_t r = 0; r < rows; r++)
            offsets[k * rows + r + 1] = offsets[k * rows + r] + lengths[k * rows + r];
        size_t m = b->nvalues[k];
        if (m) {
            memcpy(values + at, b->values[k], m * sizeof(int64_t));
            if (weights && b->weighted[k])
                memcpy(weights + at, b->weights[k], m * sizeof(float));
            else if (weights)
                for (size_t j = 0; j < m; j++)
                    weights[at + j] = 1.0f;
        }
        at += m;
    }
done:
    b->rows = 0;
    for (unsigned k = 0; k < b->nsparse; k++)
        b->nvalues[k] = 0;
    return 0;
}

int dpp_block_zstd_check(const uint8_t *data, size_t len, uint64_t raw_size, size_t max_raw)
{
    /* The declared size is trusted only once it matches the header and the
     * limit, so a small frame cannot make the receiver allocate a lot. */
    unsigned long long n = ZSTD_getFrameContentSize(data, len);
    if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR || n != raw_size ||
        n > max_raw)
        return DPP_EBLOCK;
    return 0;
}

int dpp_block_zstd_decompress(void *zctx, const uint8_t *data, size_t len, uint8_t *out,
                              size_t raw_size)
{
    size_t got = zctx ? ZSTD_decompressDCtx(zctx, out, raw_size, data, len)
                      : ZSTD_decompress(out, raw_size, data, len);
    return ZSTD_isError(got) || got != raw_size ? DPP_EBLOCK : 0;
}

int dpp_block_decompress(void *zctx, const uint8_t *data, size_t len, uint32_t codec,
                         uint64_t raw_size, size_t max_raw, uint8_t **out, size_t *out_len)
{
    uint8_t *raw = NULL;
    *out = NULL;
    *out_len = 0;
    if (codec == 0) {
        if (raw_size != len)
            return DPP_EBLOCK;
        /* malloc(0) may return NULL; one spare byte keeps -ENOMEM meaningful. */
        if ((raw = malloc(len ? len : 1)) == NULL)
            return -ENOMEM;
        if (len)
            memcpy(raw, data, len);
    } else if (codec == 1) {
        if (dpp_block_zstd_check(data, len, raw_size, max_raw) != 0)
            return DPP_EBLOCK;
        if ((raw = malloc(raw_size ? (size_t)raw_size : 1)) == NULL)
            return -ENOMEM;
        if (dpp_block_zstd_decompress(zctx, data, len, raw, (size_t)raw_size) != 0) {
            free(raw);
            return DPP_EBLOCK;
        }
    } else {
        return DPP_EBLOCK;
    }
    *out = raw;
    *out_len = (size_t)raw_size;
    return 0;
}

static const uint8_t *col_entry(const uint8_t *buf, unsigned col)
{
    return buf + DPP_BLOCK_HEADER_SIZE + (size_t)col * DPP_BLOCK_COL_ENTRY_SIZE;
}

/* Checks one column: inside the buffer, aligned, of the expected size. */
static int check_col(const uint8_t *buf, size_t len, size_t data_start, unsigned col,
                     uint64_t want_bytes)
{
    uint64_t off = get_u64(col_entry(buf, col));
    uint64_t nbytes = get_u64(col_entry(buf, col) + 8);
    if (off < data_start || off % 8 != 0 || off > len || nbytes > len - off)
        return DPP_EBLOCK;
    return nbytes == want_bytes ? 0 : DPP_EBLOCK;
}

static const void *col_data(const uint8_t *buf, unsigned col)
{
    return buf + get_u64(col_entry(buf, col));
}

/* Eight uint32 lanes: GCC and clang's vector extension, two SSE2
 * registers on a baseline x86-64, whatever the target has elsewhere. */
typedef uint32_t u32x8 __attribute__((vector_size(32)));

/* Whether offsets[0..cells] are exactly the prefix sums of
 * lengths[0..cells) (offsets[0] checked by the caller), every length and
 * offset in [0, 2^31): then offset + length cannot wrap 32 bits, so the sum
 * in uint32 is exact. The client checks every block it gets (TorchRec
 * trusts offsets), 26 x 4096 cells a Criteo block: eight cells a step with
 * no exit per cell, the violations OR-ed together. The build's -O2 does
 * not vectorise the plain loop, which was a quarter of the client's CPU in
 * bench_client. */
static int prefix_sums_ok(const int32_t *lengths, const int32_t *offsets, uint64_t cells)
{
    u32x8 acc = {0};
    uint64_t c = 0;
    for (; c + 8 <= cells; c += 8) {
        u32x8 l, o0, o1;
        memcpy(&l, lengths + c, sizeof l);
        memcpy(&o0, offsets + c, sizeof o0);
        memcpy(&o1, offsets + c + 1, sizeof o1);
        /* a sign bit of a length or offset, or any bit of a difference */
        acc |= ((l | o1) & 0x80000000u) | ((o0 + l) ^ o1);
    }
    uint32_t bad = 0;
    for (unsigned i = 0; i < 8; i++)
        bad |= acc[i];
    for (; c < cells; c++)
        bad |= (((uint32_t)lengths[c] | (uint32_t)offsets[c + 1]) & 0x80000000u) |
               (((uint32_t)offsets[c] + (uint32_t)lengths[c]) ^ (uint32_t)offsets[c + 1]);
    return bad == 0;
}

int dpp_block_parse(const uint8_t *buf, size_t len, const dpp_block_shape_t *shape,
                    dpp_block_info_t *info)
{
    if (len < DPP_BLOCK_HEADER_SIZE || ((uintptr_t)buf & 7u) != 0)
        return DPP_EBLOCK;
    if (get_u32(buf) != DPP_BLOCK_MAGIC || get_u16(buf + 4) != DPP_BLOCK_VERSION)
        return DPP_EBLOCK;
    uint32_t rows = get_u32(buf + 8);
    unsigned ncols = get_u32(buf + 16);
    unsigned nd = shape->ndense;
    if (get_u16(buf + 12) != nd || get_u16(buf + 14) != shape->nsparse ||
        ncols != ncols_of(shape) || get_u64(buf + 24) != len)
        return DPP_EBLOCK;
    size_t data_start = DPP_BLOCK_HEADER_SIZE + (size_t)ncols * DPP_BLOCK_COL_ENTRY_SIZE;
    if (data_start > len)
        return DPP_EBLOCK;
    unsigned col = 0;
    if (check_col(buf, len, data_start, col++, label_bytes(shape->no_label, rows)))
        return DPP_EBLOCK;
    for (unsigned i = 0; i < nd; i++)
        if (check_col(buf, len, data_start, col++, (uint64_t)rows * shape->dims[i] * sizeof(float)))
            return DPP_EBLOCK;
    if (shape->nsparse) {
        uint64_t cells = (uint64_t)shape->nsparse * rows;
        if (check_col(buf, len, data_start, COL_LENGTHS(nd), cells * sizeof(int32_t)) ||
            check_col(buf, len, data_start, COL_OFFSETS(nd), (cells + 1) * sizeof(int32_t)))
            return DPP_EBLOCK;
        const int32_t *lengths = col_data(buf, COL_LENGTHS(nd));
        const int32_t *offsets = col_data(buf, COL_OFFSETS(nd));
        /* offsets must be exactly the prefix sums: the client hands them to
         * TorchRec, which trusts them. */
        if (offsets[0] != 0)
            return DPP_EBLOCK;
        if (!prefix_sums_ok(lengths, offsets, cells))
            return DPP_EBLOCK;
        uint64_t nv = (uint64_t)offsets[cells];
        if (check_col(buf, len, data_start, COL_VALUES(nd), nv * sizeof(int64_t)))
            return DPP_EBLOCK;
        if (any_weighted(shape) &&
            check_col(buf, len, data_start, COL_WEIGHTS(nd), nv * sizeof(float)))
            return DPP_EBLOCK;
    }
    info->rows = rows;
    info->ncols = ncols;
    return 0;
}

const float *dpp_block_labels(const uint8_t *buf, const dpp_block_shape_t *shape)
{
    return shape->no_label ? NULL : col_data(buf, 0);
}

const float *dpp_block_dense(const uint8_t *buf, unsigned i)
{
    return col_data(buf, 1 + i);
}

static uint32_t block_rows(const uint8_t *buf)
{
    return get_u32(buf + 8);
}

const int32_t *dpp_block_lengths(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k)
{
    const int32_t *lengths = col_data(buf, COL_LENGTHS(shape->ndense));
    return lengths + (size_t)k * block_rows(buf);
}

const int64_t *dpp_block_values(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k,
                                size_t *n)
{
    const int32_t *offsets = col_data(buf, COL_OFFSETS(shape->ndense));
    size_t rows = block_rows(buf);
    *n = (size_t)(offsets[(k + 1) * rows] - offsets[k * rows]);
    const int64_t *values = col_data(buf, COL_VALUES(shape->ndense));
    return values + offsets[k * rows];
}

const float *dpp_block_weights(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k)
{
    if (!is_weighted(shape, k))
        return NULL;
    const int32_t *offsets = col_data(buf, COL_OFFSETS(shape->ndense));
    const float *weights = col_data(buf, COL_WEIGHTS(shape->ndense));
    return weights + offsets[(size_t)k * block_rows(buf)];
}

void dpp_block_kjt(const uint8_t *buf, const dpp_block_shape_t *shape, dpp_block_kjt_t *out)
{
    memset(out, 0, sizeof *out);
    if (shape->nsparse == 0)
        return;
    unsigned nd = shape->ndense;
    out->lengths = col_data(buf, COL_LENGTHS(nd));
    out->offsets = col_data(buf, COL_OFFSETS(nd));
    out->values = col_data(buf, COL_VALUES(nd));
    out->weights = any_weighted(shape) ? col_data(buf, COL_WEIGHTS(nd)) : NULL;
    out->nvalues = (size_t)out->offsets[(size_t)shape->nsparse * block_rows(buf)];
}

/* One chunk of dpp_block_builder_gather: at most GATHER_CHUNK rows from at
 * most GATHER_SLOTS distinct blocks, whose column addresses are looked up
 * once per column rather than once per row. Returns 0 or -ENOMEM. */
#define GATHER_CHUNK 512
#define GATHER_SLOTS 32
typedef struct gather_src {
    const uint8_t *buf;
    uint32_t rows;
    size_t nvalues;  /* of every key */
    const void *col; /* the column being copied */
} gather_src_t;

/* Lists of at most this many ids are copied as a whole run of them, past
 * their end: a fixed-size copy instead of a loop whose length a branch
 * must guess for every row. */
#define GATHER_RUN 8
#define GATHER_AHEAD 16

static int gather_chunk(dpp_block_builder_t *b, gather_src_t *src, const uint8_t *slot,
                        const uint32_t *rows, size_t n)
{
    unsigned nd = b->ndense, nsrc = 0;
    while (nsrc < GATHER_SLOTS && src[nsrc].buf)
        nsrc++;
    for (unsigned s = 0; s < nsrc && !b->no_label; s++)
        src[s].col = col_data(src[s].buf, 0);
    for (size_t j = 0; j < n && !b->no_label; j++)
        b->labels[b->rows + j] = ((const float *)src[slot[j]].col)[rows[j]];
    for (unsigned i = 0; i < nd; i++) {
        unsigned d = b->dims[i];
        for (unsigned s = 0; s < nsrc; s++)
            src[s].col = dpp_block_dense(src[s].buf, i);
        float *dst = dpp_block_builder_dense_row(b, i, b->rows);
        for (size_t j = 0; j < n; j++, dst += d) {
            if (j + GATHER_AHEAD < n)
                __builtin_prefetch((const float *)src[slot[j + GATHER_AHEAD]].col +
                                   (size_t)rows[j + GATHER_AHEAD] * d);
            const float *f = (const float *)src[slot[j]].col + (size_t)rows[j] * d;
            for (unsigned q = 0; q < d; q++)
                dst[q] = f[q];
        }
    }
    const int64_t *vals[GATHER_SLOTS];
    const float *wts[GATHER_SLOTS];
    for (unsigned s = 0; s < nsrc; s++) {
        vals[s] = col_data(src[s].buf, COL_VALUES(nd));
        wts[s] = builder_weighted(b) ? col_data(src[s].buf, COL_WEIGHTS(nd)) : NULL;
    }
    for (unsigned k = 0; k < b->nsparse; k++) {
        /* the key's offsets in each block */
        for (unsigned s = 0; s < nsrc; s++)
            src[s].col =
                (const int32_t *)col_data(src[s].buf, COL_OFFSETS(nd)) + (size_t)k * src[s].rows;
        /* Rows come in a random order: the loads of the rows ahead are
         * started early (prefetch), or each waits for memory in turn. */
        size_t m = 0;
        for (size_t j = 0; j < n; j++) {
            if (j + GATHER_AHEAD < n)
                __builtin_prefetch((const int32_t *)src[slot[j + GATHER_AHEAD]].col +
                                   rows[j + GATHER_AHEAD]);
            const int32_t *o = (const int32_t *)src[slot[j]].col + rows[j];
            m += (size_t)(o[1] - o[0]);
        }
        /* room for the last run copied whole */
        if (b->nvalues[k] + m + GATHER_RUN > b->cap_values[k] &&
            grow_values(b, k, b->nvalues[k] + m + GATHER_RUN) != 0)
            return -ENOMEM;
        int32_t *lengths = b->lengths + k * b->cap_rows + b->rows;
        int64_t *values = b->values[k] + b->nvalues[k];
        float *weights = b->weighted[k] ? b->weights[k] + b->nvalues[k] : NULL;
        m = 0;
        for (size_t j = 0; j < n; j++) {
            if (j + GATHER_AHEAD < n) /* its offsets are cached by the loop above */
                __builtin_prefetch(
                    vals[slot[j + GATHER_AHEAD]] +
                    ((const int32_t *)src[slot[j + GATHER_AHEAD]].col)[rows[j + GATHER_AHEAD]]);
            const gather_src_t *g = &src[slot[j]];
            const int32_t *o = (const int32_t *)g->col + rows[j];
            size_t from = (size_t)o[0], len = (size_t)(o[1] - o[0]);
            lengths[j] = (int32_t)len; /* the lengths column holds the same */
            const int64_t *v = vals[slot[j]] + from;
            if (len <= GATHER_RUN && from + GATHER_RUN <= g->nvalues)
                memcpy(values + m, v,
                       GATHER_RUN * sizeof *v); /* the next row overwrites the rest */
            else
                for (size_t q = 0; q < len; q++)
                    values[m + q] = v[q];
            if (weights) {
                const float *w = wts[slot[j]] + from;
                for (size_t q = 0; q < len; q++)
                    weights[m + q] = w[q];
            }
            m += len;
        }
        b->nvalues[k] += m;
    }
    b->rows += n;
    return 0;
}

int dpp_block_builder_gather(dpp_block_builder_t *b, const uint8_t *const *blocks,
                             const uint32_t *rows, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (rows[j] >= block_rows(blocks[j]))
            return DPP_EINVAL;
    while (b->rows + n > b->cap_rows)
        if (grow_rows(b) != 0)
            return -ENOMEM;
    size_t rows_before = b->rows, *nvalues_before = NULL;
    if (b->nsparse && (nvalues_before = malloc(b->nsparse * sizeof *nvalues_before)) == NULL)
        return -ENOMEM;
    if (b->nsparse)
        memcpy(nvalues_before, b->nvalues, b->nsparse * sizeof *nvalues_before);
    int rc = 0;
    for (size_t j0 = 0; j0 < n && rc == 0;) {
        gather_src_t src[GATHER_SLOTS + 1] = {{0}};
        uint8_t slot[GATHER_CHUNK];
        unsigned nsrc = 0;
        size_t cn = 0;
        for (; cn < GATHER_CHUNK && j0 + cn < n; cn++) {
            const uint8_t *buf = blocks[j0 + cn];
            unsigned s = 0;
            while (s < nsrc && src[s].buf != buf)
                s++;
            if (s == nsrc) {
                if (nsrc == GATHER_SLOTS)
                    break; /* the chunk ends here */
                uint32_t brows = block_rows(buf);
                const int32_t *off = col_data(buf, COL_OFFSETS(b->ndense));
                src[nsrc++] = (gather_src_t){
                    buf, brows, b->nsparse ? (size_t)off[(size_t)b->nsparse * brows] : 0, NULL};
            }
            slot[cn] = (uint8_t)s;
        }
        rc = gather_chunk(b, src, slot, rows + j0, cn);
        j0 += cn;
    }
    if (rc) { /* nothing appended */
        b->rows = rows_before;
        memcpy(b->nvalues, nvalues_before, b->nsparse * sizeof *nvalues_before);
    }
    free(nvalues_before);
    return rc;
}

int dpp_block_builder_append_block(dpp_block_builder_t *b, const uint8_t *block, size_t r0,
                                   size_t r1)
{
    size_t brows = block_rows(block);
    if (r0 > r1 || r1 > brows)
        return DPP_EINVAL;
    size_t n = r1 - r0;
    while (b->rows + n > b->cap_rows)
        if (grow_rows(b) != 0)
            return -ENOMEM;
    const int32_t *offsets = NULL;
    const int64_t *values = NULL;
    const float *weights = NULL;
    if (b->nsparse) {
        offsets = col_data(block, COL_OFFSETS(b->ndense));
        values = col_data(block, COL_VALUES(b->ndense));
        weights = builder_weighted(b) ? col_data(block, COL_WEIGHTS(b->ndense)) : NULL;
        for (unsigned k = 0; k < b->nsparse; k++) {
            size_t m = (size_t)(offsets[k * brows + r1] - offsets[k * brows + r0]);
            if (b->nvalues[k] + m > b->cap_values[k] && grow_values(b, k, b->nvalues[k] + m) != 0)
                return -ENOMEM;
        }
    }
    if (n && !b->no_label)
        memcpy(b->labels + b->rows, (const float *)col_data(block, 0) + r0, n * sizeof(float));
    for (unsigned i = 0; i < b->ndense; i++) {
        unsigned d = b->dims[i];
        if (n)
            memcpy(dpp_block_builder_dense_row(b, i, b->rows), dpp_block_dense(block, i) + r0 * d,
                   n * d * sizeof(float));
    }
    for (unsigned k = 0; k < b->nsparse; k++) {
        const int32_t *lengths = (const int32_t *)col_data(block, COL_LENGTHS(b->ndense));
        if (n)
            memcpy(b->lengths + k * b->cap_rows + b->rows, lengths + k * brows + r0,
                   n * sizeof(int32_t));
        size_t from = (size_t)offsets[k * brows + r0];
        size_t m = (size_t)offsets[k * brows + r1] - from;
        if (m) {
            memcpy(b->values[k] + b->nvalues[k], values + from, m * sizeof(int64_t));
            if (b->weighted[k])
                memcpy(b->weights[k] + b->nvalues[k], weights + from, m * sizeof(float));
        }
        b->nvalues[k] += m;
    }
    b->rows += n;
    return 0;
}
