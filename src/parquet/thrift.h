/* SPDX-License-Identifier: Apache-2.0 */
/* A bounded reader of the Thrift compact protocol (thrift's
 * doc/specs/thrift-compact-protocol.md), the encoding of Parquet's footer,
 * page headers and page indexes. The caller walks the structs it knows field
 * by field and skips the rest; every length and count is checked against the
 * bytes left before use, and nesting stops at DPP_PQ_MAX_DEPTH. Errors read
 * "<where> byte <offset>: <what>". */
#ifndef DPP_PARQUET_THRIFT_H
#define DPP_PARQUET_THRIFT_H

#include <stddef.h>
#include <stdint.h>

/* Wire types of a field header's low nibble (and of list elements). */
enum {
    DPP_PQ_T_STOP = 0,
    DPP_PQ_T_TRUE = 1, /* a bool field carries its value in its type */
    DPP_PQ_T_FALSE = 2,
    DPP_PQ_T_I8 = 3,
    DPP_PQ_T_I16 = 4,
    DPP_PQ_T_I32 = 5,
    DPP_PQ_T_I64 = 6,
    DPP_PQ_T_DOUBLE = 7,
    DPP_PQ_T_BINARY = 8,
    DPP_PQ_T_LIST = 9,
    DPP_PQ_T_SET = 10,
    DPP_PQ_T_MAP = 11,
    DPP_PQ_T_STRUCT = 12,
    DPP_PQ_T_UUID = 13,
};

typedef struct dpp_pq_thrift {
    const uint8_t *buf;
    size_t len; /* bytes at buf */
    size_t cap; /* where the message must end at the latest (>= len) */
    size_t pos;
    int depth;         /* structs entered with dpp_pq_thrift_enter */
    const char *where; /* names the message in errors: "footer", "page header" */
    char *err;
    size_t errlen;
} dpp_pq_thrift_t;

/* A field header: wire type and id. Zero it before the first field of a
 * struct; dpp_pq_thrift_field needs the previous id for the short form. */
typedef struct dpp_pq_tfield {
    uint8_t type;
    int16_t id;
    size_t at; /* offset of the header */
} dpp_pq_tfield_t;

/* Reads a message in buf[0..len). cap is the most bytes it may span: when
 * the message needs bytes past len but not past cap the reader returns
 * -EAGAIN (the caller may read more and start again); past cap it is
 * DPP_ECORRUPT. cap == len: everything is there. err (errlen bytes) gets the
 * sentence of a failure and must outlive r. */
void dpp_pq_thrift_init(dpp_pq_thrift_t *r, const uint8_t *buf, size_t len, size_t cap,
                        const char *where, char *err, size_t errlen);

/* Every function below returns 0, -EAGAIN (see init) or DPP_ECORRUPT with
 * the sentence in r->err. */

/* Formats "<where> byte <at>: <fmt...>" into r->err and returns
 * DPP_ECORRUPT. */
int dpp_pq_thrift_fail(dpp_pq_thrift_t *r, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Starts reading a struct's fields: the outermost one, a struct field's value
 * (f, checked to be a struct) or a list element (f NULL). Fails past
 * DPP_PQ_MAX_DEPTH. The STOP that dpp_pq_thrift_field returns ends it. */
int dpp_pq_thrift_enter(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f);

/* The next field header of the current struct into *f (type DPP_PQ_T_STOP at
 * its end). */
static inline int dpp_pq_thrift_field(dpp_pq_thrift_t *r, dpp_pq_tfield_t *f);

/* The value of field f, which must have the named type (enums are i32). */
int dpp_pq_thrift_bool(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int *v);
static inline int dpp_pq_thrift_i32(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int32_t *v);
static inline int dpp_pq_thrift_i64(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int64_t *v);
/* *p points into the buffer. */
static inline int dpp_pq_thrift_binary(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f,
                                       const uint8_t **p, uint32_t *n);
/* A list or set header of elements of type elem (any type when it is empty);
 * *n is at most the bytes left, since every element takes one. */
int dpp_pq_thrift_list(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, uint8_t elem, uint32_t *n);

/* Skips the value of field f, whatever its type. */
static inline int dpp_pq_thrift_skip(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f);

/* ---- fast paths ------------------------------------------------------------
 * A footer is mostly field headers in the short form and varints of a few
 * bytes, one after the other: a footer of 42 columns holds some 1,500 of
 * them, and a call with its checks per value made its parse 26 us. The
 * inline versions below decode the common case where the bytes are there;
 * anything else, and every error, goes to the dpp_pq__thrift_* function of
 * the same name, which decides exactly as before. */

int dpp_pq__thrift_field(dpp_pq_thrift_t *r, dpp_pq_tfield_t *f);
int dpp_pq__thrift_i32(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int32_t *v);
int dpp_pq__thrift_i64(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int64_t *v);
int dpp_pq__thrift_skip(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f);
int dpp_pq__thrift_binary(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, const uint8_t **p,
                          uint32_t *n);

static inline int dpp_pq_thrift_field(dpp_pq_thrift_t *r, dpp_pq_tfield_t *f)
{
    if (r->pos < r->len) {
        uint8_t b = r->buf[r->pos], type = b & 0x0f;
        if (b == 0) {
            f->at = r->pos++;
            f->type = DPP_PQ_T_STOP;
            r->depth--;
            return 0;
        }
        /* the short form: the id's delta in the high nibble */
        if ((b >> 4) && type <= DPP_PQ_T_UUID && type != DPP_PQ_T_STOP &&
            f->id <= INT16_MAX - 15) {
            f->at = r->pos++;
            f->type = type;
            f->id = (int16_t)(f->id + (b >> 4));
            return 0;
        }
    }
    return dpp_pq__thrift_field(r, f);
}

/* A varint of at most 9 bytes at r->pos when 10 are there: its length
 * (0: not that case) and value. */
static inline unsigned dpp_pq__varint_short(const dpp_pq_thrift_t *r, uint64_t *v)
{
    if (r->len - r->pos < 10)
        return 0;
    const uint8_t *p = r->buf + r->pos;
    uint64_t x = 0;
    for (unsigned i = 0; i < 9; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

static inline int dpp_pq_thrift_i32(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int32_t *v)
{
    uint64_t u;
    unsigned n;
    if (f->type == DPP_PQ_T_I32 && (n = dpp_pq__varint_short(r, &u)) != 0 && !(u >> 32)) {
        r->pos += n;
        *v = (int32_t)((int64_t)(u >> 1) ^ -(int64_t)(u & 1));
        return 0;
    }
    return dpp_pq__thrift_i32(r, f, v);
}

static inline int dpp_pq_thrift_i64(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int64_t *v)
{
    uint64_t u;
    unsigned n;
    if (f->type == DPP_PQ_T_I64 && (n = dpp_pq__varint_short(r, &u)) != 0) {
        r->pos += n;
        *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
        return 0;
    }
    return dpp_pq__thrift_i64(r, f, v);
}

/* A binary whose length is one byte (names, paths, small statistics). */
/* A binary whose length is one byte (names, paths, small statistics). */
static inline int dpp_pq_thrift_binary(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f,
                                       const uint8_t **p, uint32_t *n)
{
    if (f->type == DPP_PQ_T_BINARY && r->pos < r->len && !(r->buf[r->pos] & 0x80) &&
        r->buf[r->pos] < r->len - r->pos) {
        *n = r->buf[r->pos];
        *p = r->buf + r->pos + 1;
        r->pos += 1 + (size_t)*n;
        return 0;
    }
    return dpp_pq__thrift_binary(r, f, p, n);
}

static inline int dpp_pq_thrift_skip(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f)
{
    uint64_t u;
    unsigned n;
    if (f->type == DPP_PQ_T_TRUE || f->type == DPP_PQ_T_FALSE)
        return 0;
    if ((f->type == DPP_PQ_T_I32 || f->type == DPP_PQ_T_I64 || f->type == DPP_PQ_T_I16) &&
        (n = dpp_pq__varint_short(r, &u)) != 0) {
        r->pos += n;
        return 0;
    }
    return dpp_pq__thrift_skip(r, f);
}

#endif
