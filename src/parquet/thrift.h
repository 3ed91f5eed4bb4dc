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
int dpp_pq_thrift_field(dpp_pq_thrift_t *r, dpp_pq_tfield_t *f);

/* The value of field f, which must have the named type (enums are i32). */
int dpp_pq_thrift_bool(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int *v);
int dpp_pq_thrift_i32(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int32_t *v);
int dpp_pq_thrift_i64(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int64_t *v);
/* *p points into the buffer. */
int dpp_pq_thrift_binary(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, const uint8_t **p,
                         uint32_t *n);
/* A list or set header of elements of type elem (any type when it is empty);
 * *n is at most the bytes left, since every element takes one. */
int dpp_pq_thrift_list(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, uint8_t elem, uint32_t *n);

/* Skips the value of field f, whatever its type. */
int dpp_pq_thrift_skip(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f);

#endif
