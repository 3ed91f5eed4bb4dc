/* SPDX-License-Identifier: Apache-2.0 */
/* JSON Lines (jsonl.h): a validating one-pass reader of an object's
 * top-level fields. Recursive descent with a depth bound; strings checked
 * for escapes, control characters and UTF-8 (base/utf8.h). */
#include <string.h>

#include "base/utf8.h"
#include "dpp/error.h"
#include "format/jsonl.h"

typedef struct cur {
    const uint8_t *p;
    size_t len, i;
    const char *why;
} cur_t;

static int bad(cur_t *c, const char *why)
{
    c->why = why;
    return DPP_ECORRUPT;
}

static void ws(cur_t *c)
{
    while (c->i < c->len &&
           (c->p[c->i] == ' ' || c->p[c->i] == '\t' || c->p[c->i] == '\n' || c->p[c->i] == '\r'))
        c->i++;
}

static int hex(uint8_t x)
{
    return (x >= '0' && x <= '9') || (x >= 'a' && x <= 'f') || (x >= 'A' && x <= 'F');
}

/* At '"': to after the closing quote; *escaped when it has escapes. */
static int string(cur_t *c, int *escaped)
{
    c->i++;
    *escaped = 0;
    while (c->i < c->len) {
        uint8_t b = c->p[c->i];
        if (b == '"') {
            c->i++;
            return 0;
        }
        if (b == '\\') {
            *escaped = 1;
            if (c->i + 1 >= c->len)
                return bad(c, "a string ends inside an escape");
            uint8_t e = c->p[c->i + 1];
            if (e == 'u') {
                if (c->i + 6 > c->len || !hex(c->p[c->i + 2]) || !hex(c->p[c->i + 3]) ||
                    !hex(c->p[c->i + 4]) || !hex(c->p[c->i + 5]))
                    return bad(c, "expected four hex digits after \\u");
                c->i += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == '\0')
                return bad(c, "an unknown escape in a string (JSON has \\\" \\\\ \\/ \\b \\f \\n "
                              "\\r \\t \\uXXXX)");
            c->i += 2;
            continue;
        }
        if (b < 0x20)
            return bad(c, "a control character in a string (it must be escaped)");
        if (b < 0x80) {
            c->i++;
            continue;
        }
        size_t bad_len, k = dpp_utf8_seq(c->p + c->i, c->len - c->i, &bad_len);
        if (k == 0)
            return bad(c, "invalid UTF-8 in a string");
        c->i += k;
    }
    return bad(c, "a string without its closing quote");
}

static int digits(cur_t *c)
{
    size_t s = c->i;
    while (c->i < c->len && c->p[c->i] >= '0' && c->p[c->i] <= '9')
        c->i++;
    return c->i > s;
}

static int number(cur_t *c)
{
    if (c->p[c->i] == '-')
        c->i++;
    if (c->i < c->len && c->p[c->i] == '0')
        c->i++;
    else if (!digits(c))
        return bad(c, "expected a digit");
    if (c->i < c->len && c->p[c->i] == '.') {
        c->i++;
        if (!digits(c))
            return bad(c, "expected a digit after '.'");
    }
    if (c->i < c->len && (c->p[c->i] == 'e' || c->p[c->i] == 'E')) {
        c->i++;
        if (c->i < c->len && (c->p[c->i] == '+' || c->p[c->i] == '-'))
            c->i++;
        if (!digits(c))
            return bad(c, "expected a digit in the exponent");
    }
    return 0;
}

static int word(cur_t *c, const char *w)
{
    size_t n = strlen(w);
    if (c->len - c->i < n || memcmp(c->p + c->i, w, n) != 0)
        return bad(c, "expected a value (a string, number, object, array, true, false or null)");
    c->i += n;
    return 0;
}

typedef struct want {
    const char *const *names;
    size_t n;
    dpp_json_value_t *vals;
} want_t;

static int value(cur_t *c, unsigned depth, dpp_json_value_t *v);

/* Does key line[from, to) (escaped or not) equal name? */
static int key_is(const cur_t *c, size_t from, size_t to, int escaped, const char *name)
{
    size_t n = strlen(name);
    if (!escaped)
        return to - from == n && memcmp(c->p + from, name, n) == 0;
    if (to - from > 1024)
        return 0;
    uint8_t buf[1024];
    dpp_json_value_t k = {.kind = DPP_JSON_STRING, .off = (uint32_t)from,
                          .len = (uint32_t)(to - from), .escaped = 1};
    size_t l = dpp_jsonl_unescape(c->p, &k, buf);
    return l == n && memcmp(buf, name, n) == 0;
}

static int object(cur_t *c, unsigned depth, const want_t *w)
{
    if (depth > DPP_JSONL_MAX_DEPTH)
        return bad(c, "nesting deeper than 64 arrays and objects");
    c->i++; /* '{' */
    ws(c);
    if (c->i < c->len && c->p[c->i] == '}') {
        c->i++;
        return 0;
    }
    for (;;) {
        if (c->i >= c->len || c->p[c->i] != '"')
            return bad(c, "expected a key (a string in double quotes)");
        size_t kfrom = c->i + 1;
        int kesc, rc;
        if ((rc = string(c, &kesc)) != 0)
            return rc;
        size_t kto = c->i - 1;
        ws(c);
        if (c->i >= c->len || c->p[c->i] != ':')
            return bad(c, "expected ':' after a key");
        c->i++;
        ws(c);
        dpp_json_value_t v;
        if ((rc = value(c, depth, &v)) != 0)
            return rc;
        for (size_t k = 0; w && k < w->n; k++)
            if (key_is(c, kfrom, kto, kesc, w->names[k]))
                w->vals[k] = v;
        ws(c);
        if (c->i < c->len && c->p[c->i] == ',') {
            c->i++;
            ws(c);
            continue;
        }
        if (c->i < c->len && c->p[c->i] == '}') {
            c->i++;
            return 0;
        }
        return bad(c, "expected ',' or '}' after a value");
    }
}

static int array(cur_t *c, unsigned depth)
{
    if (depth > DPP_JSONL_MAX_DEPTH)
        return bad(c, "nesting deeper than 64 arrays and objects");
    c->i++; /* '[' */
    ws(c);
    if (c->i < c->len && c->p[c->i] == ']') {
        c->i++;
        return 0;
    }
    for (;;) {
        dpp_json_value_t v;
        int rc = value(c, depth, &v);
        if (rc)
            return rc;
        ws(c);
        if (c->i < c->len && c->p[c->i] == ',') {
            c->i++;
            ws(c);
            continue;
        }
        if (c->i < c->len && c->p[c->i] == ']') {
            c->i++;
            return 0;
        }
        return bad(c, "expected ',' or ']' after a value");
    }
}

static int value(cur_t *c, unsigned depth, dpp_json_value_t *v)
{
    if (c->i >= c->len)
        return bad(c, "expected a value, found the end of the line");
    size_t from = c->i;
    int rc, esc = 0;
    uint8_t b = c->p[c->i];
    if (b == '{') {
        v->kind = DPP_JSON_OBJECT;
        rc = object(c, depth + 1, NULL);
    } else if (b == '[') {
        v->kind = DPP_JSON_ARRAY;
        rc = array(c, depth + 1);
    } else if (b == '"') {
        v->kind = DPP_JSON_STRING;
        rc = string(c, &esc);
    } else if (b == '-' || (b >= '0' && b <= '9')) {
        v->kind = DPP_JSON_NUMBER;
        rc = number(c);
    } else if (b == 't' || b == 'f') {
        v->kind = DPP_JSON_BOOL;
        rc = word(c, b == 't' ? "true" : "false");
    } else if (b == 'n') {
        v->kind = DPP_JSON_NULL;
        rc = word(c, "null");
    } else {
        return bad(c, "expected a value (a string, number, object, array, true, false or null)");
    }
    if (rc)
        return rc;
    v->escaped = esc;
    if (v->kind == DPP_JSON_STRING) {
        v->off = (uint32_t)(from + 1);
        v->len = (uint32_t)(c->i - from - 2);
    } else {
        v->off = (uint32_t)from;
        v->len = (uint32_t)(c->i - from);
    }
    return 0;
}

int dpp_jsonl_parse(const uint8_t *line, size_t len, const char *const *names, size_t n,
                    dpp_json_value_t *vals, size_t *at, const char **why)
{
    for (size_t k = 0; k < n; k++)
        vals[k] = (dpp_json_value_t){0};
    cur_t c = {.p = line, .len = len};
    want_t w = {.names = names, .n = n, .vals = vals};
    int rc = 0;
    ws(&c);
    if (c.i >= c.len || c.p[c.i] != '{')
        rc = bad(&c, c.i >= c.len ? "an empty line (expected a JSON object)"
                                  : "not an object (a line must hold one JSON object)");
    else if ((rc = object(&c, 1, &w)) == 0) {
        ws(&c);
        if (c.i < c.len)
            rc = bad(&c, "text after the object (one object per line)");
    }
    if (rc) {
        for (size_t k = 0; k < n; k++)
            vals[k] = (dpp_json_value_t){0};
        *at = c.i;
        *why = c.why;
    }
    return rc;
}

static int hexval(uint8_t x)
{
    return x <= '9' ? x - '0' : (x | 0x20) - 'a' + 10;
}

static unsigned u4(const uint8_t *p)
{
    return (unsigned)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

static size_t put_utf8(uint8_t *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

size_t dpp_jsonl_unescape(const uint8_t *line, const dpp_json_value_t *v, uint8_t *out)
{
    const uint8_t *p = line + v->off, *end = p + v->len;
    if (!v->escaped) {
        memcpy(out, p, v->len);
        return v->len;
    }
    size_t o = 0;
    while (p < end) {
        if (*p != '\\') {
            out[o++] = *p++;
            continue;
        }
        uint8_t e = p[1];
        p += 2;
        switch (e) {
        case 'b':
            out[o++] = '\b';
            break;
        case 'f':
            out[o++] = '\f';
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        case 'u': {
            unsigned cp = u4(p);
            p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                unsigned lo = u4(p + 2);
                if (lo >= 0xdc00 && lo <= 0xdfff) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                }
            }
            if (cp >= 0xd800 && cp <= 0xdfff)
                cp = 0xfffd; /* a lone surrogate */
            /* 6 escaped bytes give at most 3, 12 give 4: always fits */
            o += put_utf8(out + o, cp);
            break;
        }
        default: /* " \ / */
            out[o++] = e;
        }
    }
    return o;
}

int dpp_jsonl_next_line(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **line,
                        size_t *line_len)
{
    if (*pos >= len)
        return 0;
    const uint8_t *s = buf + *pos;
    const uint8_t *nl = memchr(s, '\n', len - *pos);
    size_t l = nl ? (size_t)(nl - s) : len - *pos;
    *pos += l + (nl != NULL);
    if (l > 0 && s[l - 1] == '\r')
        l--;
    *line = s;
    *line_len = l;
    return 1;
}
