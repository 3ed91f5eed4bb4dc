/* SPDX-License-Identifier: Apache-2.0 */
/* ListObjectsV2 pages and error responses of S3-compatible stores
 * (s3_list.h). Not a general XML parser: S3's answers are flat elements
 * with text content, so elements are found by name inside their parent,
 * and the text is decoded (the five predefined entities, character
 * references, and %XY when the page says EncodingType url). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errtext.h"
#include "base/utf8.h"
#include "dpp/error.h"
#include "storage/s3_list.h"

/* An element's text: xml[start, end). */
typedef struct span {
    size_t start, end;
} span_t;

/* Finds the first element named tag in xml[from, to): <tag>, <tag attr...>
 * or <tag/>, and its closing </tag>. Returns 1 with *content, 0 when there
 * is none (or it is not closed before to). */
static int find(const char *xml, size_t from, size_t to, const char *tag, span_t *content)
{
    size_t tl = strlen(tag);
    for (size_t i = from; i + tl + 2 <= to; i++) {
        if (xml[i] != '<' || memcmp(xml + i + 1, tag, tl) != 0)
            continue;
        size_t j = i + 1 + tl;
        char c = xml[j];
        if (c != '>' && c != '/' && c != ' ' && c != '\t' && c != '\r' && c != '\n')
            continue; /* a longer name with this prefix */
        const char *gt = memchr(xml + j, '>', to - j);
        if (gt == NULL)
            return 0;
        size_t open_end = (size_t)(gt - xml) + 1;
        if (gt[-1] == '/') { /* <tag/> */
            content->start = content->end = open_end;
            return 1;
        }
        for (size_t k = open_end; k + tl + 3 <= to; k++)
            if (xml[k] == '<' && xml[k + 1] == '/' && memcmp(xml + k + 2, tag, tl) == 0 &&
                xml[k + 2 + tl] == '>') {
                content->start = open_end;
                content->end = k;
                return 1;
            }
        return 0;
    }
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Writes code point cp as UTF-8 to out; returns its length (0: not a
 * character XML allows). */
static size_t put_utf8(uint32_t cp, char *out)
{
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 63));
        out[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | ((cp >> 12) & 63));
    out[2] = (char)(0x80 | ((cp >> 6) & 63)), out[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Decodes the text xml[s) into out (cap bytes, NUL-terminated): entities
 * and character references, then %XY when url. Returns the length, or -1
 * with err (naming the byte offset) for an unknown or unterminated entity,
 * a bad %XY, text longer than cap - 1 or not UTF-8. */
static long decode(const char *xml, span_t s, int url, char *out, size_t cap, char *err,
                   size_t errlen)
{
    static const struct {
        const char *name;
        char c;
    } named[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    size_t n = 0;
    for (size_t i = s.start; i < s.end;) {
        char buf[4];
        size_t w = 1;
        buf[0] = xml[i];
        size_t at = i;
        if (xml[i] == '&') {
            const char *semi = memchr(xml + i, ';', s.end - i < 12 ? s.end - i : 12);
            if (semi == NULL) {
                dpp_errf(DPP_EINVAL, err, errlen, "byte %zu: an '&' without its ';'", at);
                return -1;
            }
            size_t nl = (size_t)(semi - xml) - i - 1;
            const char *name = xml + i + 1;
            w = 0;
            if (nl >= 2 && name[0] == '#') {
                int hex = name[1] == 'x';
                uint32_t cp = 0;
                size_t k = hex ? 2 : 1;
                for (; k < nl; k++) {
                    int v = hex ? hexval(name[k])
                                : (name[k] >= '0' && name[k] <= '9' ? name[k] - '0' : -1);
                    if (v < 0 || cp > 0x10FFFF)
                        break;
                    cp = cp * (hex ? 16 : 10) + (uint32_t)v;
                }
                if (k == nl && k > (size_t)(hex ? 2 : 1))
                    w = put_utf8(cp, buf);
            } else {
                for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
                    if (strlen(named[k].name) == nl && memcmp(named[k].name, name, nl) == 0)
                        buf[0] = named[k].c, w = 1;
            }
            if (w == 0) {
                dpp_errf(DPP_EINVAL, err, errlen, "byte %zu: \"&%.*s;\" is not an XML entity", at,
                         (int)nl, name);
                return -1;
            }
            i += nl + 2;
        } else {
            i++;
        }
        if (w + n + 1 > cap) {
            dpp_errf(DPP_EINVAL, err, errlen, "byte %zu: the text is longer than %zu bytes",
                     s.start, cap - 1);
            return -1;
        }
        memcpy(out + n, buf, w);
        n += w;
    }
    if (url) { /* in place: %XY is never shorter than what it stands for */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (out[i] == '%') {
                if (i + 2 >= n || hexval(out[i + 1]) < 0 || hexval(out[i + 2]) < 0) {
                    dpp_errf(DPP_EINVAL, err, errlen,
                             "byte %zu: a '%%' that is not %%XY in URL-encoded text", s.start);
                    return -1;
                }
                out[m++] = (char)(hexval(out[i + 1]) << 4 | hexval(out[i + 2]));
                i += 2;
            } else {
                out[m++] = out[i] == '+' ? ' ' : out[i];
            }
        }
        n = m;
    }
    out[n] = '\0';
    if (memchr(out, '\0', n) != NULL) { /* a %00: no name holds a NUL */
        dpp_errf(DPP_EINVAL, err, errlen, "byte %zu: the text holds a NUL", s.start);
        return -1;
    }
    for (size_t i = 0; i < n;) {
        size_t bad = 0, k = dpp_utf8_seq((const uint8_t *)out + i, n - i, &bad);
        if (k == 0) {
            dpp_errf(DPP_EINVAL, err, errlen, "byte %zu: the text is not UTF-8", s.start);
            return -1;
        }
        i += k;
    }
    return (long)n;
}

static int parse_size(const char *xml, span_t s, uint64_t *out)
{
    if (s.end == s.start || s.end - s.start > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = s.start; i < s.end; i++) {
        if (xml[i] < '0' || xml[i] > '9')
            return -1;
        unsigned d = (unsigned)(xml[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

void dpp_s3_listing_close(dpp_s3_listing_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->objs[i].key);
    free(l->objs);
    free(l->next_token);
    memset(l, 0, sizeof *l);
}

/* One Contents entry xml[c) into *o (key malloc'd). */
static int parse_entry(const char *xml, span_t c, int url, dpp_s3_object_t *o, char *err,
                       size_t errlen)
{
    span_t k, sz, et;
    char key[DPP_S3_KEY_MAX + 1], msg[160];
    if (!find(xml, c.start, c.end, "Key", &k) || !find(xml, c.start, c.end, "Size", &sz))
        return dpp_errf(DPP_EINVAL, err, errlen, "byte %zu: a Contents entry without %s", c.start,
                        find(xml, c.start, c.end, "Key", &k) ? "Size" : "Key");
    long kl = decode(xml, k, url, key, sizeof key, msg, sizeof msg);
    if (kl <= 0)
        return dpp_errf(DPP_EINVAL, err, errlen, "Key: %s", kl == 0 ? "empty" : msg);
    if (parse_size(xml, sz, &o->size) != 0)
        return dpp_errf(DPP_EINVAL, err, errlen,
                        "byte %zu: the Size of \"%s\" is not a whole number of bytes", sz.start,
                        key);
    o->etag[0] = '\0';
    if (find(xml, c.start, c.end, "ETag", &et)) {
        long el = decode(xml, et, 0, o->etag, sizeof o->etag, msg, sizeof msg);
        if (el < 0)
            return dpp_errf(DPP_EINVAL, err, errlen, "the ETag of \"%s\": %s", key, msg);
        if (el >= 2 && o->etag[0] == '"' && o->etag[el - 1] == '"') {
            memmove(o->etag, o->etag + 1, (size_t)el - 2);
            o->etag[el - 2] = '\0';
        }
    }
    if ((o->key = strdup(key)) == NULL)
        return -ENOMEM;
    return 0;
}

int dpp_s3_list_parse(dpp_s3_listing_t *l, const char *xml, size_t len, char *err, size_t errlen)
{
    span_t root, s;
    if (!find(xml, 0, len, "ListBucketResult", &root))
        return dpp_errf(DPP_EINVAL, err, errlen,
                        "not a ListObjectsV2 response (no <ListBucketResult> element in its %zu "
                        "bytes)",
                        len);
    int url = find(xml, root.start, root.end, "EncodingType", &s) && s.end - s.start == 3 &&
              memcmp(xml + s.start, "url", 3) == 0;
    int truncated = find(xml, root.start, root.end, "IsTruncated", &s) && s.end - s.start == 4 &&
                    memcmp(xml + s.start, "true", 4) == 0;
    char *token = NULL;
    if (truncated) {
        /* tokens are opaque and can be long (S3's are ~100 bytes) */
        char buf[4096], msg[160];
        long tl = -1;
        if (find(xml, root.start, root.end, "NextContinuationToken", &s))
            tl = decode(xml, s, 0, buf, sizeof buf, msg, sizeof msg);
        if (tl <= 0)
            return dpp_errf(DPP_EINVAL, err, errlen,
                            "the page says IsTruncated true without a usable "
                            "NextContinuationToken: the listing cannot go on");
        if ((token = strdup(buf)) == NULL)
            return -ENOMEM;
    }
    size_t n0 = l->n;
    int rc = 0;
    for (size_t at = root.start; rc == 0 && find(xml, at, root.end, "Contents", &s); at = s.end) {
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 64;
            dpp_s3_object_t *o = realloc(l->objs, cap * sizeof *o);
            if (o == NULL) {
                rc = -ENOMEM;
                break;
            }
            l->objs = o, l->cap = cap;
        }
        if ((rc = parse_entry(xml, s, url, &l->objs[l->n], err, errlen)) == 0)
            l->n++;
    }
    if (rc != 0) { /* the page adds nothing */
        while (l->n > n0)
            free(l->objs[--l->n].key);
        free(token);
        return rc;
    }
    free(l->next_token);
    l->next_token = token;
    l->truncated = truncated;
    return 0;
}

void dpp_s3_error_parse(const char *xml, size_t len, char *code, size_t codelen, char *msg,
                        size_t msglen)
{
    span_t e, s;
    char why[64];
    if (codelen)
        code[0] = '\0';
    if (msglen)
        msg[0] = '\0';
    if (!find(xml, 0, len, "Error", &e))
        return;
    if (codelen && find(xml, e.start, e.end, "Code", &s) &&
        decode(xml, s, 0, code, codelen, why, sizeof why) < 0)
        code[0] = '\0';
    if (msglen && find(xml, e.start, e.end, "Message", &s) &&
        decode(xml, s, 0, msg, msglen, why, sizeof why) < 0)
        msg[0] = '\0';
}
