/* SPDX-License-Identifier: Apache-2.0 */
/* Thrift compact protocol reader: varints, field headers, typed values and
 * skipping of whatever a struct holds that the caller does not know. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "parquet/meta.h"
#include "parquet/thrift.h"

static const char *const TYPE_NAMES[] = {
    "stop",   "bool",   "bool", "i8",  "i16", "i32",    "i64",
    "double", "binary", "list", "set", "map", "struct", "uuid",
};

static const char *type_name(uint8_t type)
{
    return type < sizeof TYPE_NAMES / sizeof *TYPE_NAMES ? TYPE_NAMES[type] : "unknown type";
}

void dpp_pq_thrift_init(dpp_pq_thrift_t *r, const uint8_t *buf, size_t len, size_t cap,
                        const char *where, char *err, size_t errlen)
{
    *r = (dpp_pq_thrift_t){
        .buf = buf,
        .len = len < cap ? len : cap,
        .cap = cap,
        .where = where,
        .err = err,
        .errlen = errlen,
    };
}

int dpp_pq_thrift_fail(dpp_pq_thrift_t *r, size_t at, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return dpp_errf(DPP_ECORRUPT, r->err, r->errlen, "%s byte %zu: %s", r->where, at, what);
}

/* Whether n more bytes are there at r->pos: -EAGAIN when they would still
 * end within cap; what (starting at byte at) names the thing in the error. */
static int need(dpp_pq_thrift_t *r, size_t at, uint64_t n, const char *what)
{
    if (n <= r->len - r->pos)
        return 0;
    int rc = dpp_pq_thrift_fail(r, at, "%s runs past the end: %llu bytes needed, %zu left", what,
                                (unsigned long long)n, r->len - r->pos);
    return n <= r->cap - r->pos ? -EAGAIN : rc;
}

static int varint(dpp_pq_thrift_t *r, uint64_t *v)
{
    /* Most varints of a footer are a byte or two, with bytes to spare
     * after them: no bound checks per byte there (a footer of 42 columns
     * holds ~2,000 of them; this is half of a file's planning cost). */
    if (r->len - r->pos >= 10) {
        const uint8_t *p = r->buf + r->pos;
        uint64_t x = p[0] & 0x7f;
        if (!(p[0] & 0x80)) {
            r->pos++;
            *v = x;
            return 0;
        }
        for (int i = 1; i < 10; i++) {
            x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
            if (!(p[i] & 0x80)) {
                if (i == 9 && p[i] > 1)
                    break; /* longer than 64 bits: the slow path says so */
                r->pos += (size_t)i + 1;
                *v = x;
                return 0;
            }
        }
    }
    size_t at = r->pos;
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
        int rc = need(r, at, 1, "a varint");
        if (rc)
            return rc;
        uint8_t b = r->buf[r->pos++];
        if (shift == 63 && b > 1)
            return dpp_pq_thrift_fail(r, at, "varint longer than 64 bits");
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    *v = x;
    return 0;
}

/* A zigzag varint that must fit `bits` bits signed. */
static int zigzag(dpp_pq_thrift_t *r, int bits, int64_t *v)
{
    size_t at = r->pos;
    uint64_t u;
    int rc = varint(r, &u);
    if (rc)
        return rc;
    if (bits < 64 && u >> bits)
        return dpp_pq_thrift_fail(r, at, "varint %llu does not fit an i%d", (unsigned long long)u,
                                  bits);
    *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

static int expect(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, uint8_t type)
{
    if (f->type == type)
        return 0;
    return dpp_pq_thrift_fail(r, f->at, "field %d has type %s, expected %s", f->id,
                              type_name(f->type), type_name(type));
}

int dpp_pq_thrift_enter(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f)
{
    if (f && f->type != DPP_PQ_T_STRUCT)
        return expect(r, f, DPP_PQ_T_STRUCT);
    if (r->depth >= DPP_PQ_MAX_DEPTH)
        return dpp_pq_thrift_fail(r, r->pos, "structs nest deeper than %d", DPP_PQ_MAX_DEPTH);
    r->depth++;
    return 0;
}

int dpp_pq__thrift_field(dpp_pq_thrift_t *r, dpp_pq_tfield_t *f)
{
    size_t at = r->pos;
    int rc = need(r, at, 1, "a field header");
    if (rc)
        return rc;
    uint8_t b = r->buf[r->pos++];
    f->at = at;
    f->type = b & 0x0f;
    if (b == 0) {
        r->depth--;
        return 0;
    }
    if (f->type == DPP_PQ_T_STOP || f->type > DPP_PQ_T_UUID)
        return dpp_pq_thrift_fail(r, at, "field header 0x%02x has no valid type", b);
    if (b >> 4) {
        int id = f->id + (b >> 4);
        if (id > INT16_MAX)
            return dpp_pq_thrift_fail(r, at, "field id %d out of range", id);
        f->id = (int16_t)id;
        return 0;
    }
    int64_t id = 0; /* set by zigzag() when it returns 0 (gcc -O3 cannot tell) */
    rc = zigzag(r, 16, &id);
    f->id = (int16_t)id;
    return rc;
}

int dpp_pq_thrift_bool(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int *v)
{
    if (f->type != DPP_PQ_T_TRUE && f->type != DPP_PQ_T_FALSE)
        return expect(r, f, DPP_PQ_T_TRUE);
    *v = f->type == DPP_PQ_T_TRUE;
    return 0;
}

int dpp_pq__thrift_i32(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int32_t *v)
{
    int64_t x = 0;
    int rc = expect(r, f, DPP_PQ_T_I32);
    if (rc == 0 && (rc = zigzag(r, 32, &x)) == 0)
        *v = (int32_t)x;
    return rc;
}

int dpp_pq__thrift_i64(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, int64_t *v)
{
    int rc = expect(r, f, DPP_PQ_T_I64);
    return rc ? rc : zigzag(r, 64, v);
}

static int binary(dpp_pq_thrift_t *r, const uint8_t **p, uint32_t *n)
{
    size_t at = r->pos;
    uint64_t len;
    int rc = varint(r, &len);
    if (rc == 0 && len > UINT32_MAX)
        rc = dpp_pq_thrift_fail(r, at, "binary length %llu exceeds 32 bits",
                                (unsigned long long)len);
    if (rc == 0)
        rc = need(r, at, len, "a binary");
    if (rc)
        return rc;
    *p = r->buf + r->pos;
    *n = (uint32_t)len;
    r->pos += len;
    return 0;
}

int dpp_pq__thrift_binary(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, const uint8_t **p,
                          uint32_t *n)
{
    int rc = expect(r, f, DPP_PQ_T_BINARY);
    return rc ? rc : binary(r, p, n);
}

/* A list or set header: the element type and a count that the bytes left
 * can hold (every element takes at least one byte). */
static int list_header(dpp_pq_thrift_t *r, uint8_t *elem, uint32_t *n)
{
    size_t at = r->pos;
    int rc = need(r, at, 1, "a list header");
    if (rc)
        return rc;
    uint8_t b = r->buf[r->pos++];
    uint64_t count = b >> 4;
    if (count == 15) {
        if ((rc = varint(r, &count)) != 0)
            return rc;
        if (count > INT32_MAX)
            return dpp_pq_thrift_fail(r, at, "list of %llu elements", (unsigned long long)count);
    }
    *elem = b & 0x0f;
    *n = (uint32_t)count;
    return need(r, at, count, "a list (a byte an element)");
}

int dpp_pq_thrift_list(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f, uint8_t elem, uint32_t *n)
{
    if (f->type != DPP_PQ_T_LIST && f->type != DPP_PQ_T_SET)
        return expect(r, f, DPP_PQ_T_LIST);
    size_t at = r->pos;
    uint8_t type = 0;
    int rc = list_header(r, &type, n);
    if (rc == 0 && *n > 0 && type != elem)
        rc = dpp_pq_thrift_fail(r, at, "field %d is a list of %s, expected %s", f->id,
                                type_name(type), type_name(elem));
    return rc;
}

/* Skips a value of the given type; a bool here is a list element or map
 * entry, one byte (a bool field has no value bytes). Recursion stops at
 * DPP_PQ_MAX_DEPTH. */
static int skip_value(dpp_pq_thrift_t *r, uint8_t type)
{
    static const uint8_t fixed[] = {
        [DPP_PQ_T_TRUE] = 1,   [DPP_PQ_T_FALSE] = 1, [DPP_PQ_T_I8] = 1,
        [DPP_PQ_T_DOUBLE] = 8, [DPP_PQ_T_UUID] = 16,
    };
    size_t at = r->pos;
    uint64_t u;
    const uint8_t *p;
    uint32_t n = 0;
    uint8_t elem = 0, key = 0;
    int rc;
    if (type == DPP_PQ_T_STOP || type > DPP_PQ_T_UUID)
        return dpp_pq_thrift_fail(r, at, "value of invalid type %u", type);
    if (fixed[type]) {
        if ((rc = need(r, at, fixed[type], "a value")) == 0)
            r->pos += fixed[type];
        return rc;
    }
    if (type == DPP_PQ_T_I16 || type == DPP_PQ_T_I32 || type == DPP_PQ_T_I64)
        return varint(r, &u);
    if (type == DPP_PQ_T_BINARY)
        return binary(r, &p, &n);
    if (type == DPP_PQ_T_STRUCT) {
        dpp_pq_tfield_t f = {0};
        if ((rc = dpp_pq_thrift_enter(r, NULL)) != 0)
            return rc;
        while ((rc = dpp_pq_thrift_field(r, &f)) == 0 && f.type != DPP_PQ_T_STOP)
            if ((rc = dpp_pq_thrift_skip(r, &f)) != 0)
                return rc;
        return rc;
    }
    if (r->depth >= DPP_PQ_MAX_DEPTH)
        return dpp_pq_thrift_fail(r, at, "values nest deeper than %d", DPP_PQ_MAX_DEPTH);
    if (type == DPP_PQ_T_MAP) {
        /* Size, then key and value types when not empty; an entry takes two bytes. */
        if ((rc = varint(r, &u)) != 0)
            return rc;
        if (u > INT32_MAX)
            return dpp_pq_thrift_fail(r, at, "map of %llu entries", (unsigned long long)u);
        if (u > 0 && (rc = need(r, at, 1 + 2 * u, "a map (two bytes an entry)")) != 0)
            return rc;
        key = u ? r->buf[r->pos] >> 4 : 0;
        elem = u ? r->buf[r->pos++] & 0x0f : 0;
        n = (uint32_t)u;
    } else if ((rc = list_header(r, &elem, &n)) != 0) {
        return rc;
    }
    r->depth++;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        if (type == DPP_PQ_T_MAP)
            rc = skip_value(r, key);
        if (rc == 0)
            rc = skip_value(r, elem);
    }
    r->depth--;
    return rc;
}

/* ---- the fast skip --------------------------------------------------------
 * Skipping is most of reading a footer: the fields dpp does not use
 * (statistics, encoding stats, key-value metadata) are walked a value at a
 * time. The walk below accepts exactly what skip_value() accepts, without
 * its bookkeeping per byte; on anything else it gives up (NULL) and
 * skip_value() walks the value again from its start to say what is wrong. */

static const uint8_t *fast_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 10 && p < end; i++) {
        uint8_t b = *p++;
        if (i == 9 && b > 1)
            return NULL; /* longer than 64 bits */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return p;
        }
    }
    return NULL;
}

static const uint8_t *fast_skip(const uint8_t *p, const uint8_t *end, uint8_t type, int depth)
{
    uint64_t v;
    switch (type) {
    case DPP_PQ_T_TRUE:
    case DPP_PQ_T_FALSE:
    case DPP_PQ_T_I8: /* a bool here is a list element or map entry: one byte */
        return p < end ? p + 1 : NULL;
    case DPP_PQ_T_I16:
    case DPP_PQ_T_I32:
    case DPP_PQ_T_I64:
        return fast_varint(p, end, &v);
    case DPP_PQ_T_DOUBLE:
        return end - p >= 8 ? p + 8 : NULL;
    case DPP_PQ_T_UUID:
        return end - p >= 16 ? p + 16 : NULL;
    case DPP_PQ_T_BINARY:
        if ((p = fast_varint(p, end, &v)) == NULL || v > (uint64_t)(end - p))
            return NULL;
        return p + v;
    case DPP_PQ_T_STRUCT: {
        if (depth >= DPP_PQ_MAX_DEPTH)
            return NULL;
        int id = 0;
        for (;;) {
            if (p >= end)
                return NULL;
            uint8_t b = *p++, t = b & 0x0f;
            if (b == 0)
                return p;
            if (t == DPP_PQ_T_STOP || t > DPP_PQ_T_UUID)
                return NULL;
            if (b >> 4) {
                if ((id += b >> 4) > INT16_MAX)
                    return NULL;
            } else {
                if ((p = fast_varint(p, end, &v)) == NULL || v >> 16)
                    return NULL;
                id = (int)((int64_t)(v >> 1) ^ -(int64_t)(v & 1));
            }
            if (t != DPP_PQ_T_TRUE && t != DPP_PQ_T_FALSE &&
                (p = fast_skip(p, end, t, depth + 1)) == NULL)
                return NULL;
        }
    }
    case DPP_PQ_T_LIST:
    case DPP_PQ_T_SET: {
        if (depth >= DPP_PQ_MAX_DEPTH || p >= end)
            return NULL;
        uint8_t b = *p++, elem = b & 0x0f;
        uint64_t n = b >> 4;
        if (n == 15 && ((p = fast_varint(p, end, &n)) == NULL || n > INT32_MAX))
            return NULL;
        if (n > (uint64_t)(end - p))
            return NULL; /* every element takes a byte */
        if (n > 0 && (elem == DPP_PQ_T_STOP || elem > DPP_PQ_T_UUID))
            return NULL;
        for (uint64_t i = 0; i < n && p; i++)
            p = fast_skip(p, end, elem, depth + 1);
        return p;
    }
    case DPP_PQ_T_MAP: {
        if (depth >= DPP_PQ_MAX_DEPTH || (p = fast_varint(p, end, &v)) == NULL || v > INT32_MAX)
            return NULL;
        if (v == 0)
            return p;
        if (1 + 2 * v > (uint64_t)(end - p))
            return NULL;
        uint8_t key = *p >> 4, val = *p & 0x0f;
        p++;
        if (key == DPP_PQ_T_STOP || key > DPP_PQ_T_UUID || val == DPP_PQ_T_STOP ||
            val > DPP_PQ_T_UUID)
            return NULL;
        for (uint64_t i = 0; i < v && p; i++)
            if ((p = fast_skip(p, end, key, depth + 1)) != NULL)
                p = fast_skip(p, end, val, depth + 1);
        return p;
    }
    default:
        return NULL;
    }
}

int dpp_pq__thrift_skip(dpp_pq_thrift_t *r, const dpp_pq_tfield_t *f)
{
    if (f->type == DPP_PQ_T_TRUE || f->type == DPP_PQ_T_FALSE)
        return 0;
    const uint8_t *p = fast_skip(r->buf + r->pos, r->buf + r->len, f->type, r->depth);
    if (p) {
        r->pos = (size_t)(p - r->buf);
        return 0;
    }
    return skip_value(r, f->type); /* says what is wrong, or that more bytes are needed */
}
