// SPDX-License-Identifier: Apache-2.0
// Columnar block building (worker) and validation/reading in place (client).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "dpp/error.h"

/* Header, little-endian: magic u32, version u16, flags u16, rows u32,
 * ndense u16, nsparse u16, ncols u32, reserved u32, total_size u64.
 * Then ncols entries of {offset u64, nbytes u64}, then the columns, each
 * starting 8-byte aligned. Only little-endian hosts are supported; the block
 * is read in place. */
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

static unsigned ncols_of(const dpp_block_shape_t *shape)
{
    unsigned n = 1 + shape->ndense + 2 * shape->nsparse;
    for (unsigned k = 0; k < shape->nsparse; k++)
        n += is_weighted(shape, k) ? 1 : 0;
    return n;
}

/* Column number of sparse feature k's lengths; values follow, then weights. */
static unsigned sparse_col(const dpp_block_shape_t *shape, unsigned k)
{
    unsigned col = 1 + shape->ndense + 2 * k;
    for (unsigned j = 0; j < k; j++)
        col += is_weighted(shape, j) ? 1 : 0;
    return col;
}

int dpp_block_builder_init(dpp_block_builder_t *b, const dpp_block_shape_t *shape)
{
    memset(b, 0, sizeof *b);
    unsigned nd = shape->ndense, ns = shape->nsparse;
    if (nd + ns > DPP_BLOCK_MAX_FEATURES)
        return DPP_EINVAL;
    b->ndense = nd;
    b->nsparse = ns;
    b->dims = calloc(nd ? nd : 1, sizeof *b->dims);
    b->weighted = calloc(ns ? ns : 1, sizeof *b->weighted);
    b->values = calloc(ns ? ns : 1, sizeof *b->values);
    b->weights = calloc(ns ? ns : 1, sizeof *b->weights);
    b->nvalues = calloc(ns ? ns : 1, sizeof *b->nvalues);
    b->cap_values = calloc(ns ? ns : 1, sizeof *b->cap_values);
    if (!b->dims || !b->weighted || !b->values || !b->weights || !b->nvalues || !b->cap_values) {
        dpp_block_builder_close(b);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < nd; i++) {
        if (shape->dims[i] == 0) {
            dpp_block_builder_close(b);
            return DPP_EINVAL;
        }
        b->dims[i] = shape->dims[i];
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
    float *dense = realloc(b->dense, cap * (b->dense_width ? b->dense_width : 1) * sizeof *dense);
    if (dense == NULL)
        return -ENOMEM;
    b->dense = dense;
    /* lengths is [nsparse][cap]: re-lay it out for the new row capacity. */
    int32_t *lengths = malloc(cap * (b->nsparse ? b->nsparse : 1) * sizeof *lengths);
    if (lengths == NULL)
        return -ENOMEM;
    for (unsigned k = 0; k < b->nsparse && b->lengths; k++)
        memcpy(lengths + k * cap, b->lengths + k * b->cap_rows, b->rows * sizeof *lengths);
    free(b->lengths);
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

int dpp_block_builder_append(dpp_block_builder_t *b, float label, const float *dense,
                             const int64_t *const *ids, const float *const *weights,
                             const size_t *lens)
{
    if (b->rows == b->cap_rows && grow_rows(b) != 0)
        return -ENOMEM;
    for (unsigned k = 0; k < b->nsparse; k++) {
        if (lens[k] > INT32_MAX)
            return DPP_EINVAL;
        size_t need = b->nvalues[k] + lens[k];
        if (need > b->cap_values[k] && grow_values(b, k, need) != 0)
            return -ENOMEM;
    }
    size_t r = b->rows;
    b->labels[r] = label;
    memcpy(b->dense + r * b->dense_width, dense, b->dense_width * sizeof *dense);
    for (unsigned k = 0; k < b->nsparse; k++) {
        if (lens[k]) { /* an empty list may meet a never-allocated column */
            memcpy(b->values[k] + b->nvalues[k], ids[k], lens[k] * sizeof(int64_t));
            if (b->weighted[k])
                memcpy(b->weights[k] + b->nvalues[k], weights[k], lens[k] * sizeof(float));
        }
        b->nvalues[k] += lens[k];
        b->lengths[k * b->cap_rows + r] = (int32_t)lens[k];
    }
    b->rows++;
    return 0;
}

static unsigned builder_ncols(const dpp_block_builder_t *b)
{
    unsigned n = 1 + b->ndense + 2 * b->nsparse;
    for (unsigned k = 0; k < b->nsparse; k++)
        n += b->weighted[k];
    return n;
}

size_t dpp_block_builder_size(const dpp_block_builder_t *b)
{
    unsigned ncols = builder_ncols(b);
    size_t size = ALIGN8(DPP_BLOCK_HEADER_SIZE + (size_t)ncols * DPP_BLOCK_COL_ENTRY_SIZE);
    size += ALIGN8(b->rows * sizeof(float));
    for (unsigned i = 0; i < b->ndense; i++)
        size += ALIGN8(b->rows * b->dims[i] * sizeof(float));
    for (unsigned k = 0; k < b->nsparse; k++) {
        size += ALIGN8(b->rows * sizeof(int32_t)) + b->nvalues[k] * sizeof(int64_t);
        if (b->weighted[k])
            size += ALIGN8(b->nvalues[k] * sizeof(float));
    }
    return size;
}

/* Appends one column's entry to the table and reserves its bytes. */
static uint8_t *put_col(uint8_t *buf, unsigned *col, size_t *off, size_t nbytes)
{
    uint8_t *entry = buf + DPP_BLOCK_HEADER_SIZE + (size_t)*col * DPP_BLOCK_COL_ENTRY_SIZE;
    put_u64(entry, *off);
    put_u64(entry + 8, nbytes);
    uint8_t *data = buf + *off;
    *off += ALIGN8(nbytes);
    (*col)++;
    return data;
}

int dpp_block_builder_finish(dpp_block_builder_t *b, uint8_t **out, size_t *len)
{
    size_t total = dpp_block_builder_size(b);
    unsigned ncols = builder_ncols(b);
    size_t off = ALIGN8(DPP_BLOCK_HEADER_SIZE + (size_t)ncols * DPP_BLOCK_COL_ENTRY_SIZE);
    uint8_t *buf = malloc(total);
    if (buf == NULL)
        return -ENOMEM;
    /* Only the header and the alignment padding need zeroing: every column
     * byte is written below. */
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
    size_t n = b->rows * sizeof(float);
    uint8_t *dst = put_col(buf, &col, &off, n);
    if (n) /* an empty builder may never have allocated its columns */
        memcpy(dst, b->labels, n);
    memset(dst + n, 0, ALIGN8(n) - n);
    /* Builder rows interleave all dense features; columns are per feature. */
    unsigned first = 0;
    for (unsigned i = 0; i < b->ndense; i++) {
        unsigned d = b->dims[i];
        n = b->rows * d * sizeof(float);
        float *f = (float *)put_col(buf, &col, &off, n);
        if (d == 1) {
            for (size_t r = 0; r < b->rows; r++)
                f[r] = b->dense[r * b->dense_width + first];
        } else {
            for (size_t r = 0; r < b->rows; r++)
                memcpy(f + r * d, b->dense + r * b->dense_width + first, d * sizeof(float));
        }
        memset((uint8_t *)f + n, 0, ALIGN8(n) - n);
        first += d;
    }
    for (unsigned k = 0; k < b->nsparse; k++) {
        n = b->rows * sizeof(int32_t);
        dst = put_col(buf, &col, &off, n);
        if (n)
            memcpy(dst, b->lengths + k * b->cap_rows, n);
        memset(dst + n, 0, ALIGN8(n) - n);
        n = b->nvalues[k] * sizeof(int64_t);
        dst = put_col(buf, &col, &off, n);
        if (n)
            memcpy(dst, b->values[k], n);
        if (b->weighted[k]) {
            n = b->nvalues[k] * sizeof(float);
            dst = put_col(buf, &col, &off, n);
            if (n)
                memcpy(dst, b->weights[k], n);
            memset(dst + n, 0, ALIGN8(n) - n);
        }
    }
    *out = buf;
    *len = total;
    b->rows = 0;
    for (unsigned k = 0; k < b->nsparse; k++)
        b->nvalues[k] = 0;
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

int dpp_block_parse(const uint8_t *buf, size_t len, const dpp_block_shape_t *shape,
                    dpp_block_info_t *info)
{
    if (len < DPP_BLOCK_HEADER_SIZE || ((uintptr_t)buf & 7u) != 0)
        return DPP_EBLOCK;
    if (get_u32(buf) != DPP_BLOCK_MAGIC || get_u16(buf + 4) != DPP_BLOCK_VERSION)
        return DPP_EBLOCK;
    uint32_t rows = get_u32(buf + 8);
    unsigned ncols = get_u32(buf + 16);
    if (get_u16(buf + 12) != shape->ndense || get_u16(buf + 14) != shape->nsparse ||
        ncols != ncols_of(shape) || get_u64(buf + 24) != len)
        return DPP_EBLOCK;
    size_t data_start = DPP_BLOCK_HEADER_SIZE + (size_t)ncols * DPP_BLOCK_COL_ENTRY_SIZE;
    if (data_start > len)
        return DPP_EBLOCK;
    unsigned col = 0;
    if (check_col(buf, len, data_start, col++, (uint64_t)rows * sizeof(float)))
        return DPP_EBLOCK;
    for (unsigned i = 0; i < shape->ndense; i++)
        if (check_col(buf, len, data_start, col++,
                      (uint64_t)rows * shape->dims[i] * sizeof(float)))
            return DPP_EBLOCK;
    for (unsigned k = 0; k < shape->nsparse; k++) {
        if (check_col(buf, len, data_start, col, (uint64_t)rows * sizeof(int32_t)))
            return DPP_EBLOCK;
        const int32_t *lengths = (const int32_t *)(buf + get_u64(col_entry(buf, col)));
        uint64_t sum = 0;
        for (uint32_t r = 0; r < rows; r++) {
            if (lengths[r] < 0)
                return DPP_EBLOCK;
            sum += (uint64_t)lengths[r];
        }
        col++;
        if (sum > len || check_col(buf, len, data_start, col++, sum * sizeof(int64_t)))
            return DPP_EBLOCK;
        if (is_weighted(shape, k) && check_col(buf, len, data_start, col++, sum * sizeof(float)))
            return DPP_EBLOCK;
    }
    info->rows = rows;
    info->ncols = ncols;
    return 0;
}

static const void *col_data(const uint8_t *buf, unsigned col)
{
    return buf + get_u64(col_entry(buf, col));
}

const float *dpp_block_labels(const uint8_t *buf)
{
    return col_data(buf, 0);
}

const float *dpp_block_dense(const uint8_t *buf, unsigned i)
{
    return col_data(buf, 1 + i);
}

const int32_t *dpp_block_lengths(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k)
{
    return col_data(buf, sparse_col(shape, k));
}

const int64_t *dpp_block_values(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k,
                                size_t *n)
{
    unsigned col = sparse_col(shape, k) + 1;
    *n = get_u64(col_entry(buf, col) + 8) / sizeof(int64_t);
    return col_data(buf, col);
}

const float *dpp_block_weights(const uint8_t *buf, const dpp_block_shape_t *shape, unsigned k)
{
    if (!is_weighted(shape, k))
        return NULL;
    return col_data(buf, sparse_col(shape, k) + 2);
}
