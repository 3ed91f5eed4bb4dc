/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet files read row by row (column.h): footers, column chunks streamed
 * page by page, levels assembled into dpp's per-row slots. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "parquet/column.h"

#define WINDOW_MIN (256u << 10) /* bytes read at once: several small pages per pread */
#define HEADER_GUESS 256u       /* a page header's bytes in the common case */

/* Level entries (or dictionary values) of one page. A page is decoded
 * whole, at 4 bytes of levels per entry plus its values, and runs of the
 * RLE hybrid let a few bytes claim billions of entries: without a cap a
 * 200-byte file costs gigabytes. 2^26 is the largest row group old Arrow
 * wrote by default, which an all-null column could put in one page. */
#define MAX_PAGE_ENTRIES (1u << 26)

/* The values of a page or dictionary, widened to what a slot carries. */
typedef enum canon {
    CANON_INT64,
    CANON_FLOAT,
    CANON_BYTES,
} canon_t;

struct dpp_pq_col {
    const dpp_pq_file_t *f;
    const dpp_pq_field_t *field;
    const dpp_pq_column_t *col;
    const dpp_pq_chunk_t *chunk;
    uint32_t rg;
    dpp_pq_dctx_t *dctx;
    canon_t canon;
    uint64_t pos;        /* the next page header */
    uint64_t end;        /* the end of the chunk */
    uint64_t page_off;   /* the current page's header, for messages */
    int64_t values_left; /* level entries of the chunk in pages not loaded yet */
    uint64_t row;        /* rows of the row group consumed */
    uint64_t bytes_read; /* from the file, by this column */
    int failed;          /* an error ended the column: repeated on every call */
    char failmsg[384];
    /* read window: file bytes [win_off, win_off + win_len) */
    uint8_t *win;
    size_t win_len, win_cap;
    uint64_t win_off;
    /* the current data page: levels, then its values (or dictionary indices) */
    uint8_t *body;
    size_t body_cap;
    int16_t *def, *rep;
    size_t lv_cap, nlv, li;
    void *vals;
    size_t vals_cap;
    uint32_t *idx;
    size_t idx_cap;
    void *tmp; /* values of the physical type before widening */
    size_t tmp_cap;
    size_t nv, vi;
    int dict_encoded;
    /* the dictionary, widened; byte arrays point into dict_body */
    uint8_t *dict_body;
    size_t dict_body_cap;
    void *dict;
    size_t ndict, dict_cap;
    int have_dict;
    dpp_pq_scratch_t scratch;
    dpp_pq_page_loc_t *locs; /* offset index, when the chunk has one */
    size_t nlocs;
};

/* ---- files ------------------------------------------------------------------ */

/* What a failed read of f says: the store's words for an object, the
 * system's for a file. */
static const char *read_why(const dpp_pq_file_t *f, int rc)
{
    return rc != DPP_ETRUNCATED && f->in->why[0] ? f->in->why : dpp_strerror(rc);
}

int dpp_pq_file_start(dpp_pq_file_t *f, const char *path, const char *name, char *err,
                      size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->name = name;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return dpp_errf(-errno, err, errlen, "file %s: %s", name, strerror(errno));
    dpp_rfile_local(&f->local, fd, 0, 0);
    f->in = &f->local;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return dpp_errf(-errno, err, errlen, "file %s: %s", name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return dpp_errf(-EINVAL, err, errlen, "file %s: not a regular file", name);
    f->size = f->local.size = (uint64_t)st.st_size;
    f->mtime_ns = f->local.version =
        (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return 0;
}

void dpp_pq_file_attach(dpp_pq_file_t *f, dpp_rfile_t *in, const char *name)
{
    memset(f, 0, sizeof *f);
    f->name = name;
    f->in = in;
    f->size = in->size;
    f->mtime_ns = in->version;
}

int dpp_pq_file_footer(dpp_pq_file_t *f, const uint8_t *tail, size_t tail_len, char *err,
                       size_t errlen)
{
    const char *name = f->name;
    uint8_t last[8];
    uint32_t flen;
    char why[256];
    int rc = 0;
    if (tail && tail_len >= 8 && f->size >= 8)
        memcpy(last, tail + tail_len - 8, 8);
    else if (f->size >= 8)
        rc = dpp_rfile_read_full(f->in, last, 8, f->size - 8);
    if (rc < 0 && rc != DPP_ETRUNCATED)
        return dpp_errf(rc, err, errlen, "file %s: %s", name, read_why(f, rc));
    if (f->size < 8)
        memset(last, 0, sizeof last);
    if ((rc = dpp_pq_footer_locate(last, f->size, &flen, why, sizeof why)) != 0)
        return dpp_errf(rc, err, errlen, "file %s: %s", name, why);
    uint64_t at = f->size - 8 - flen;
    uint8_t *footer = NULL;
    const uint8_t *bytes;
    if (tail && (uint64_t)flen + 8 <= tail_len) {
        bytes = tail + tail_len - 8 - flen; /* read already, with the file's tail */
    } else {
        if ((footer = malloc(flen ? flen : 1)) == NULL)
            return dpp_errf(-ENOMEM, err, errlen, "file %s: out of memory for a %u-byte footer",
                            name, flen);
        if ((rc = dpp_rfile_read_full(f->in, footer, flen, at)) != 0) {
            free(footer);
            return dpp_errf(rc, err, errlen, "file %s: reading the footer: %s", name,
                            read_why(f, rc));
        }
        bytes = footer;
    }
    rc = dpp_pq_meta_parse(bytes, flen, f->size, &f->meta, why, sizeof why);
    if (rc)
        dpp_errf(rc, err, errlen, "file %s: footer at offset %" PRIu64 ": %s", name, at, why);
    free(footer);
    return rc;
}

int dpp_pq_file_open(dpp_pq_file_t *f, const char *path, const char *name, char *err, size_t errlen)
{
    int rc = dpp_pq_file_start(f, path, name, err, errlen);
    return rc ? rc : dpp_pq_file_footer(f, NULL, 0, err, errlen);
}

void dpp_pq_file_close(dpp_pq_file_t *f)
{
    if (f->in == &f->local && f->local.fd >= 0)
        close(f->local.fd);
    f->in = NULL;
    dpp_pq_meta_free(&f->meta);
}

int dpp_pq_field_check(const dpp_pq_file_t *f, const dpp_pq_field_t *field, char *err,
                       size_t errlen)
{
    if (field->shape == DPP_PQ_UNSUPPORTED)
        return dpp_errf(DPP_ETYPE, err, errlen,
                        "file %s: column \"%s\" is %s; dpp reads primitive columns and lists of "
                        "primitives",
                        f->name, field->name, field->why);
    const dpp_pq_column_t *col = &f->meta.columns[field->column];
    if (col->is_decimal)
        return dpp_errf(DPP_ETYPE, err, errlen,
                        "file %s: column \"%s\" is a DECIMAL, which dpp does not convert; write "
                        "it as DOUBLE or BIGINT",
                        f->name, field->name);
    for (uint32_t g = 0; g < f->meta.nrow_groups; g++)
        if (f->meta.row_groups[g].chunks[field->column].encrypted)
            return dpp_errf(DPP_ETYPE, err, errlen,
                            "file %s: column \"%s\" is encrypted, which dpp does not read", f->name,
                            field->name);
    return 0;
}

/* ---- buffers ---------------------------------------------------------------- */

void dpp_pq_buf_free(dpp_pq_buf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static inline int buf_reserve(dpp_pq_buf_t *b, size_t more)
{
    if (more <= b->cap - b->len)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < more)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (d == NULL)
        return -ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

/* Grows *p (of *cap bytes) to at least want bytes; contents not kept. */
static int grow(void **p, size_t *cap, size_t want)
{
    if (want <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < want)
        n *= 2;
    void *q = malloc(n);
    if (q == NULL)
        return -ENOMEM;
    free(*p);
    *p = q;
    *cap = n;
    return 0;
}

static int slot_begin(dpp_pq_buf_t *b, dpp_feat_kind_t kind, size_t *at)
{
    if (buf_reserve(b, 5) != 0)
        return -ENOMEM;
    *at = b->len;
    b->data[b->len] = (uint8_t)kind;
    memset(b->data + b->len + 1, 0, 4);
    b->len += 5;
    return 0;
}

static void slot_end(dpp_pq_buf_t *b, size_t at)
{
    uint32_t n = (uint32_t)(b->len - at - 5);
    memcpy(b->data + at + 1, &n, 4);
}

int dpp_pq_buf_absent(dpp_pq_buf_t *b)
{
    size_t at;
    return slot_begin(b, DPP_FEAT_ABSENT, &at);
}

int dpp_pq_row_decode(const uint8_t *row, size_t len, size_t nslots, dpp_feat_ref_t *refs)
{
    size_t pos = 0;
    for (size_t i = 0; i < nslots; i++) {
        uint32_t n;
        if (len - pos < 5)
            return DPP_EEXAMPLE;
        memcpy(&n, row + pos + 1, 4);
        if (n > len - pos - 5 || row[pos] > DPP_FEAT_INT64)
            return DPP_EEXAMPLE;
        refs[i].kind = (dpp_feat_kind_t)row[pos];
        refs[i].native = 1;
        refs[i].list = row + pos + 5;
        refs[i].list_len = n;
        pos += 5 + (size_t)n;
    }
    return pos == len ? 0 : DPP_EEXAMPLE;
}

/* ---- column chunks ---------------------------------------------------------- */

static canon_t canon_of(dpp_pq_type_t t)
{
    switch (t) {
    case DPP_PQ_FLOAT:
    case DPP_PQ_DOUBLE:
        return CANON_FLOAT;
    case DPP_PQ_BYTE_ARRAY:
    case DPP_PQ_FIXED_LEN_BYTE_ARRAY:
        return CANON_BYTES;
    default:
        return CANON_INT64;
    }
}

static size_t canon_size(canon_t c)
{
    return c == CANON_INT64 ? 8 : c == CANON_FLOAT ? 4 : sizeof(dpp_pq_bytes_t);
}

static dpp_feat_kind_t canon_kind(canon_t c)
{
    return c == CANON_INT64 ? DPP_FEAT_INT64 : c == CANON_FLOAT ? DPP_FEAT_FLOAT : DPP_FEAT_BYTES;
}

/* Records the error that ends the column and returns it. */
static int fail(dpp_pq_col_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(dpp_pq_col_t *c, int rc, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->failmsg, sizeof c->failmsg,
             "file %s: column \"%s\", row group %u, page at offset %" PRIu64 ": %s", c->f->name,
             c->field->name, c->rg, c->page_off, what);
    c->failed = rc;
    return rc;
}

static int failed(const dpp_pq_col_t *c, char *err, size_t errlen)
{
    return dpp_errf(c->failed, err, errlen, "%s", c->failmsg);
}

/* The bytes a span of the caller holds from off on (0: none), at *p. */
static size_t in_spans(const dpp_pq_file_t *f, uint64_t off, const uint8_t **p)
{
    for (size_t i = 0; i < f->nspans; i++) {
        const dpp_pq_span_t *s = &f->spans[i];
        if (off >= s->off && off - s->off < s->len) {
            *p = s->data + (off - s->off);
            return s->len - (size_t)(off - s->off);
        }
    }
    return 0;
}

const uint8_t *dpp_pq_file_bytes(const dpp_pq_file_t *f, uint64_t off, size_t len)
{
    const uint8_t *p = NULL;
    return len > 0 && in_spans(f, off, &p) >= len ? p : NULL;
}

/* Makes file bytes [off, off + len) readable at *p: in a span the caller
 * read, or through the window. */
static int fetch(dpp_pq_col_t *c, uint64_t off, size_t len, const uint8_t **p)
{
    uint64_t limit = c->f->size - 8; /* the footer's length and magic are no page's */
    if (off > limit || len > limit - off)
        return fail(c, DPP_ECORRUPT,
                    "%zu bytes at offset %" PRIu64 " run past the data (%" PRIu64 " bytes)", len,
                    off, limit);
    if (len > 0 && in_spans(c->f, off, p) >= len)
        return 0;
    if (off < c->win_off || off + len > c->win_off + c->win_len) {
        size_t want = len > WINDOW_MIN ? len : WINDOW_MIN;
        if (want > limit - off)
            want = (size_t)(limit - off);
        if (want > c->win_cap) {
            uint8_t *w = realloc(c->win, want);
            if (w == NULL)
                return fail(c, -ENOMEM, "out of memory for %zu bytes", want);
            c->win = w;
            c->win_cap = want;
        }
        int rc = dpp_rfile_read_full(c->f->in, c->win, want, off);
        if (rc == DPP_ETRUNCATED)
            return fail(c, DPP_ECORRUPT, "the file is shorter than its footer says");
        if (rc)
            return fail(c, rc, "read: %s", read_why(c->f, rc));
        c->win_off = off;
        c->win_len = want;
        c->bytes_read += want;
    }
    *p = c->win + (off - c->win_off);
    return 0;
}

/* Reads the page header at c->pos. */
static int read_header(dpp_pq_col_t *c, dpp_pq_page_header_t *h, size_t *hlen)
{
    char why[256];
    uint64_t limit = c->f->size - 8;
    size_t want = HEADER_GUESS;
    c->page_off = c->pos;
    /* Inside a span, first try the bytes it has: the last page of a chunk
     * may end closer than HEADER_GUESS. A header that does not fit asks for
     * more, through the window. */
    const uint8_t *in = NULL;
    size_t avail = in_spans(c->f, c->pos, &in);
    if (avail > 0 && avail < want)
        want = avail;
    for (;;) {
        const uint8_t *p;
        if (c->pos >= limit)
            return fail(c, DPP_ECORRUPT, "the column chunk runs past the data");
        if (want > limit - c->pos)
            want = (size_t)(limit - c->pos);
        int rc = fetch(c, c->pos, want, &p);
        if (rc)
            return rc;
        rc = dpp_pq_page_header_parse(p, want, h, hlen, why, sizeof why);
        if (rc == 0)
            return 0;
        if (rc != -EAGAIN || want == limit - c->pos || want >= DPP_PQ_MAX_FOOTER)
            return fail(c, DPP_ECORRUPT, "page header: %s",
                        rc == -EAGAIN ? "the file ends inside it" : why);
        want *= 2;
    }
}

/* Makes the stored bytes of the page whose header (hlen bytes) is at
 * c->pos readable at *raw and checks them against the header's CRC. */
static int page_body(dpp_pq_col_t *c, const dpp_pq_page_header_t *h, size_t hlen,
                     const uint8_t **raw)
{
    int rc = fetch(c, c->pos + hlen, (size_t)h->compressed_size, raw);
    if (rc)
        return rc;
    if (h->has_crc && h->type != DPP_PQ_INDEX_PAGE &&
        (uint32_t)crc32(0, *raw, (uInt)h->compressed_size) != h->crc)
        return fail(c, DPP_ECORRUPT, "page CRC mismatch");
    return 0;
}

/* The fewest bits a value of the column takes stored PLAIN or
 * BYTE_STREAM_SPLIT; 0 for none (a FIXED_LEN_BYTE_ARRAY of length 0). */
static size_t min_value_bits(const dpp_pq_column_t *col)
{
    switch (col->type) {
    case DPP_PQ_BOOLEAN:
        return 1;
    case DPP_PQ_BYTE_ARRAY:
        return 32; /* the length prefix */
    case DPP_PQ_FIXED_LEN_BYTE_ARRAY:
        return col->type_length > 0 ? 8 * (size_t)col->type_length : 0;
    default:
        return 8 * dpp_pq_value_size(col->type);
    }
}

/* Decodes n values of the column's physical type into *dst (widened). */
static int decode_values(dpp_pq_col_t *c, dpp_pq_encoding_t enc, const uint8_t *p, size_t len,
                         size_t n, void **dst, size_t *dst_cap)
{
    char why[256];
    dpp_pq_type_t t = c->col->type;
    size_t csize = canon_size(c->canon);
    /* These encodings store every value: a count the bytes cannot hold is
     * refused before memory for it is asked for. */
    size_t bits = min_value_bits(c->col);
    if ((enc == DPP_PQ_PLAIN || enc == DPP_PQ_BYTE_STREAM_SPLIT) && bits > 0 && n / 8 > len / bits)
        return fail(c, DPP_ECORRUPT, "%zu %s values in %zu bytes", n, dpp_pq_encoding_name(enc),
                    len);
    if (grow(dst, dst_cap, n * csize + 1) != 0)
        return fail(c, -ENOMEM, "out of memory for %zu values", n);
    int direct = t == DPP_PQ_INT64 || t == DPP_PQ_INT96 || t == DPP_PQ_FLOAT ||
                 t == DPP_PQ_BYTE_ARRAY || t == DPP_PQ_FIXED_LEN_BYTE_ARRAY;
    void *out = *dst;
    if (!direct) {
        if (grow(&c->tmp, &c->tmp_cap, n * dpp_pq_value_size(t) + 1) != 0)
            return fail(c, -ENOMEM, "out of memory for %zu values", n);
        out = c->tmp;
    }
    int rc = dpp_pq_values_decode(enc, t, c->col->type_length, p, len, out, n, &c->scratch, NULL,
                                  why, sizeof why);
    if (rc)
        return fail(c, rc == -ENOMEM ? rc : DPP_ECORRUPT, "%s", why);
    if (direct)
        return 0;
    if (t == DPP_PQ_BOOLEAN) {
        const uint8_t *s = c->tmp;
        int64_t *d = *dst;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else if (t == DPP_PQ_INT32 && c->col->is_unsigned) {
        const uint32_t *s = c->tmp; /* UINT_32 up to 2^32 - 1: zero-extended */
        int64_t *d = *dst;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else if (t == DPP_PQ_INT32) {
        const int32_t *s = c->tmp;
        int64_t *d = *dst;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else { /* DOUBLE */
        const double *s = c->tmp;
        float *d = *dst;
        for (size_t i = 0; i < n; i++)
            d[i] = (float)s[i];
    }
    return 0;
}

/* Decompresses a page's stored bytes into *dst of exactly len bytes. */
static int inflate_into(dpp_pq_col_t *c, const uint8_t *src, size_t srclen, size_t len,
                        uint8_t **dst, size_t *cap)
{
    char why[256];
    /* Checked here too, before the page's memory is asked for. */
    if (c->chunk->codec == DPP_PQ_UNCOMPRESSED && srclen != len)
        return fail(c, DPP_ECORRUPT, "UNCOMPRESSED: page of %zu bytes stored in %zu", len, srclen);
    if (grow((void **)dst, cap, len + 1) != 0)
        return fail(c, -ENOMEM, "out of memory for a %zu-byte page", len);
    int rc = dpp_pq_decompress(c->dctx, c->chunk->codec, src, srclen, *dst, len, why, sizeof why);
    if (rc)
        return fail(c, rc == -ENOMEM ? rc : rc == DPP_EINVAL ? DPP_ETYPE : DPP_ECORRUPT, "%s", why);
    return 0;
}

static int levels(dpp_pq_col_t *c, dpp_pq_encoding_t enc, int max, const uint8_t *p, size_t len,
                  int16_t *out, size_t n)
{
    char why[256];
    int rc = dpp_pq_levels_decode(enc, max, p, len, out, n, why, sizeof why);
    return rc ? fail(c, DPP_ECORRUPT, "%s", why) : 0;
}

/* A v1 page's levels of one kind at *p: with RLE a 4-byte length first,
 * with BIT_PACKED exactly ceil(n * width / 8) bytes. */
static int v1_levels(dpp_pq_col_t *c, dpp_pq_encoding_t enc, int max, const uint8_t **p,
                     const uint8_t *end, int16_t *out, size_t n)
{
    if (max == 0)
        return levels(c, DPP_PQ_RLE, 0, NULL, 0, out, n);
    size_t len;
    if (enc == DPP_PQ_BIT_PACKED) {
        unsigned width = 0;
        while ((1 << width) <= max)
            width++;
        len = (n * width + 7) / 8;
    } else {
        uint32_t l;
        if (end - *p < 4)
            return fail(c, DPP_ECORRUPT, "levels: the page ends before their length");
        memcpy(&l, *p, 4);
        *p += 4;
        len = l;
    }
    if (len > (size_t)(end - *p))
        return fail(c, DPP_ECORRUPT, "levels of %zu bytes in a page of %zu", len,
                    (size_t)(end - *p));
    int rc = levels(c, enc, max, *p, len, out, n);
    *p += len;
    return rc;
}

static int load_dictionary(dpp_pq_col_t *c, const dpp_pq_page_header_t *h, const uint8_t *raw)
{
    if (c->have_dict)
        return fail(c, DPP_ECORRUPT, "a second dictionary page in one column chunk");
    if (h->num_values < 0 || (uint32_t)h->num_values > MAX_PAGE_ENTRIES)
        return fail(c, DPP_ECORRUPT, "a dictionary of %d values (at most %u)", h->num_values,
                    MAX_PAGE_ENTRIES);
    int rc = inflate_into(c, raw, (size_t)h->compressed_size, (size_t)h->uncompressed_size,
                          &c->dict_body, &c->dict_body_cap);
    if (rc)
        return rc;
    dpp_pq_encoding_t enc = h->encoding == DPP_PQ_PLAIN_DICTIONARY ? DPP_PQ_PLAIN : h->encoding;
    /* Byte arrays of the dictionary must outlive the pages that index it:
     * decode them from dict_body, never from the shared scratch. */
    if (enc != DPP_PQ_PLAIN)
        return fail(c, DPP_ECORRUPT, "a dictionary page encoded %s (PLAIN expected)",
                    dpp_pq_encoding_name(enc));
    if ((rc = decode_values(c, enc, c->dict_body, (size_t)h->uncompressed_size,
                            (size_t)h->num_values, &c->dict, &c->dict_cap)) != 0)
        return rc;
    c->ndict = (size_t)h->num_values;
    c->have_dict = 1;
    return 0;
}

/* The data page's values (after its levels) at p[0..len), nv of them. */
static int load_values(dpp_pq_col_t *c, dpp_pq_encoding_t enc, const uint8_t *p, size_t len)
{
    c->dict_encoded = enc == DPP_PQ_PLAIN_DICTIONARY || enc == DPP_PQ_RLE_DICTIONARY;
    if (!c->dict_encoded)
        return decode_values(c, enc, p, len, c->nv, &c->vals, &c->vals_cap);
    if (!c->have_dict)
        return fail(c, DPP_ECORRUPT, "a dictionary-encoded page without a dictionary page");
    char why[256];
    if (grow((void **)&c->idx, &c->idx_cap, c->nv * sizeof *c->idx + 1) != 0)
        return fail(c, -ENOMEM, "out of memory for %zu indices", c->nv);
    int rc = dpp_pq_indices_decode(p, len, c->idx, c->nv, (uint32_t)c->ndict, why, sizeof why);
    return rc ? fail(c, DPP_ECORRUPT, "%s", why) : 0;
}

static int grow_levels(dpp_pq_col_t *c, size_t n)
{
    if (n < c->lv_cap)
        return 0;
    int16_t *def = realloc(c->def, (n + 1) * sizeof *def);
    if (def)
        c->def = def;
    int16_t *rep = def ? realloc(c->rep, (n + 1) * sizeof *rep) : NULL;
    if (rep == NULL)
        return fail(c, -ENOMEM, "out of memory for %zu levels", n);
    c->rep = rep;
    c->lv_cap = n + 1;
    return 0;
}

/* Reads pages until a data page is loaded. skip_rows > 0 lets pages that
 * hold only rows to be skipped pass unread when their row count is known
 * from the header (no repetition, or a v2 page); *skipped gets the rows so
 * passed. Returns 0, 1 at the end of the chunk, or an error. */
static int load_page(dpp_pq_col_t *c, uint64_t skip_rows, uint64_t *skipped)
{
    if (skipped)
        *skipped = 0;
    for (;;) {
        if (c->values_left <= 0 || c->pos >= c->end)
            return 1;
        dpp_pq_page_header_t h;
        size_t hlen;
        int rc = read_header(c, &h, &hlen);
        if (rc)
            return rc;
        const uint8_t *raw;
        if ((rc = page_body(c, &h, hlen, &raw)) != 0)
            return rc;
        c->pos += hlen + (uint64_t)h.compressed_size;
        if (h.type == DPP_PQ_DICTIONARY_PAGE) {
            if ((rc = load_dictionary(c, &h, raw)) != 0)
                return rc;
            continue;
        }
        if (h.type != DPP_PQ_DATA_PAGE && h.type != DPP_PQ_DATA_PAGE_V2)
            continue; /* index pages: nothing dpp needs */
        /* The chunk's num_values counts every level entry of its pages. */
        if (h.num_values < 0 || h.num_values > c->values_left ||
            (uint32_t)h.num_values > MAX_PAGE_ENTRIES)
            return fail(c, DPP_ECORRUPT,
                        "a page of %d values where the chunk has %" PRId64 " left (at most %u "
                        "a page)",
                        h.num_values, c->values_left, MAX_PAGE_ENTRIES);
        size_t n = (size_t)h.num_values;
        c->values_left -= h.num_values;
        int64_t page_rows = c->col->max_rep == 0            ? h.num_values
                            : h.type == DPP_PQ_DATA_PAGE_V2 ? h.num_rows
                                                            : -1;
        if (skip_rows > 0 && page_rows >= 0 && (uint64_t)page_rows <= skip_rows) {
            skip_rows -= (uint64_t)page_rows;
            *skipped += (uint64_t)page_rows;
            continue;
        }
        if ((rc = grow_levels(c, n)) != 0)
            return rc;
        const uint8_t *p, *end;
        dpp_pq_encoding_t enc = h.encoding;
        if (h.type == DPP_PQ_DATA_PAGE) {
            if ((rc = inflate_into(c, raw, (size_t)h.compressed_size, (size_t)h.uncompressed_size,
                                   &c->body, &c->body_cap)) != 0)
                return rc;
            p = c->body;
            end = p + h.uncompressed_size;
            if ((rc = v1_levels(c, h.rep_encoding, c->col->max_rep, &p, end, c->rep, n)) != 0 ||
                (rc = v1_levels(c, h.def_encoding, c->col->max_def, &p, end, c->def, n)) != 0)
                return rc;
        } else {
            size_t rl = (size_t)h.rep_levels_len, dl = (size_t)h.def_levels_len;
            if (rl + dl > (size_t)h.compressed_size || rl + dl > (size_t)h.uncompressed_size)
                return fail(c, DPP_ECORRUPT, "levels of %zu bytes in a page of %d", rl + dl,
                            h.compressed_size);
            if ((rc = levels(c, DPP_PQ_RLE, c->col->max_rep, raw, rl, c->rep, n)) != 0 ||
                (rc = levels(c, DPP_PQ_RLE, c->col->max_def, raw + rl, dl, c->def, n)) != 0)
                return rc;
            size_t stored = (size_t)h.compressed_size - rl - dl;
            size_t plain = (size_t)h.uncompressed_size - rl - dl;
            if (h.is_compressed && c->chunk->codec != DPP_PQ_UNCOMPRESSED) {
                if ((rc = inflate_into(c, raw + rl + dl, stored, plain, &c->body, &c->body_cap)) !=
                    0)
                    return rc;
            } else {
                /* copied: byte arrays must not point into the window, which the
                 * next page's read replaces */
                if (stored != plain)
                    return fail(c, DPP_ECORRUPT,
                                "an uncompressed page of %zu stored bytes says "
                                "%zu",
                                stored, plain);
                if (grow((void **)&c->body, &c->body_cap, plain + 1) != 0)
                    return fail(c, -ENOMEM, "out of memory for a %zu-byte page", plain);
                memcpy(c->body, raw + rl + dl, plain);
            }
            p = c->body;
            end = p + plain;
        }
        size_t nv = n;
        if (c->col->max_def > 0) {
            nv = 0;
            for (size_t i = 0; i < n; i++)
                nv += c->def[i] == c->col->max_def;
        }
        c->nlv = n;
        c->li = 0;
        c->nv = nv;
        c->vi = 0;
        if ((rc = load_values(c, enc, p, (size_t)(end - p))) != 0)
            return rc;
        if (n == 0)
            continue;
        return 0;
    }
}

int dpp_pq_col_open(dpp_pq_col_t **out, const dpp_pq_file_t *f, uint32_t rg,
                    const dpp_pq_field_t *field, dpp_pq_dctx_t *dctx)
{
    dpp_pq_col_t *c = calloc(1, sizeof *c);
    *out = c;
    if (c == NULL)
        return -ENOMEM;
    c->f = f;
    c->field = field;
    c->col = &f->meta.columns[field->column];
    c->chunk = &f->meta.row_groups[rg].chunks[field->column];
    c->rg = rg;
    c->dctx = dctx;
    c->canon = canon_of(c->col->type);
    c->values_left = c->chunk->num_values;
    int64_t start = c->chunk->data_page_offset;
    /* Some writers set dictionary_page_offset 0 for "none". */
    if (c->chunk->dictionary_page_offset > 0 && c->chunk->dictionary_page_offset < start)
        start = c->chunk->dictionary_page_offset;
    c->pos = (uint64_t)start;
    c->end = c->pos + (uint64_t)c->chunk->total_compressed_size;
    c->page_off = c->pos;
    return 0;
}

uint64_t dpp_pq_col_bytes_read(const dpp_pq_col_t *c)
{
    return c->bytes_read;
}

void dpp_pq_col_free(dpp_pq_col_t *c)
{
    if (c == NULL)
        return;
    free(c->win);
    free(c->body);
    free(c->def);
    free(c->rep);
    free(c->vals);
    free(c->idx);
    free(c->tmp);
    free(c->dict_body);
    free(c->dict);
    free(c->locs);
    dpp_pq_scratch_free(&c->scratch);
    free(c);
}

/* Makes c->li a level entry, loading the next page when the current one is
 * used up. Returns 0, 1 at the end of the chunk, or an error. */
static int ensure_entry(dpp_pq_col_t *c)
{
    if (c->li < c->nlv)
        return 0;
    return load_page(c, 0, NULL);
}

/* Appends the next n values (of entries just consumed whose def is
 * max_def) to b, or passes over them (b NULL). */
static int take_values(dpp_pq_col_t *c, dpp_pq_buf_t *b, size_t n)
{
    if (n > c->nv - c->vi)
        return fail(c, DPP_ECORRUPT, "more defined levels than values");
    size_t k0 = c->vi;
    c->vi += n;
    if (b == NULL || n == 0)
        return 0;
    const uint32_t *idx = c->dict_encoded ? c->idx + k0 : NULL;
    if (c->canon == CANON_BYTES) {
        const dpp_pq_bytes_t *base =
            c->dict_encoded ? c->dict : (const dpp_pq_bytes_t *)c->vals + k0;
        for (size_t i = 0; i < n; i++) {
            const dpp_pq_bytes_t *s = base + (idx ? idx[i] : i);
            if (buf_reserve(b, 4 + (size_t)s->len) != 0)
                return fail(c, -ENOMEM, "out of memory for a row");
            memcpy(b->data + b->len, &s->len, 4);
            if (s->len)
                memcpy(b->data + b->len + 4, s->ptr, s->len);
            b->len += 4 + (size_t)s->len;
        }
        return 0;
    }
    size_t w = canon_size(c->canon);
    if (buf_reserve(b, n * w) != 0)
        return fail(c, -ENOMEM, "out of memory for a row");
    uint8_t *dst = b->data + b->len;
    b->len += n * w;
    if (idx == NULL) {
        memcpy(dst, (const uint8_t *)c->vals + k0 * w, n * w);
    } else if (c->canon == CANON_INT64) {
        /* gathered from the dictionary with fixed-size copies (a memcpy of
         * a variable width was a call per value) */
        const int64_t *dict = c->dict;
        for (size_t i = 0; i < n; i++)
            memcpy(dst + 8 * i, &dict[idx[i]], 8);
    } else {
        const float *dict = c->dict;
        for (size_t i = 0; i < n; i++)
            memcpy(dst + 4 * i, &dict[idx[i]], 4);
    }
    return 0;
}

/* One row of the column into b (NULL: skipped). */
static int read_row(dpp_pq_col_t *c, dpp_pq_buf_t *b)
{
    int rc = ensure_entry(c);
    if (rc == 1)
        return fail(c, DPP_ECORRUPT, "the column chunk ends at row %" PRIu64 " of %" PRId64, c->row,
                    c->f->meta.row_groups[c->rg].num_rows);
    if (rc)
        return rc;
    int16_t max_def = c->col->max_def;
    int16_t def = c->def[c->li];
    if (c->rep[c->li] != 0)
        return fail(c, DPP_ECORRUPT, "a row starts with repetition level %d", c->rep[c->li]);
    c->row++;
    size_t at = 0;
    if (c->field->shape == DPP_PQ_SCALAR) {
        c->li++;
        if (def < max_def)
            return b ? dpp_pq_buf_absent(b) : 0;
        if (b && slot_begin(b, canon_kind(c->canon), &at) != 0)
            return fail(c, -ENOMEM, "out of memory for a row");
        if ((rc = take_values(c, b, 1)) != 0)
            return rc;
        if (b)
            slot_end(b, at);
        return 0;
    }
    if (def < c->field->def_list) {
        c->li++;
        return b ? dpp_pq_buf_absent(b) : 0;
    }
    if (b && slot_begin(b, canon_kind(c->canon), &at) != 0)
        return fail(c, -ENOMEM, "out of memory for a row");
    if (def < c->field->def_elem) { /* an empty list */
        c->li++;
    } else {
        /* The row's entries in this page: the first, then every one that
         * repeats; their values are appended at once. A row may go on in the
         * next page (v1 pages need not end at a row). */
        const int16_t def_elem = c->field->def_elem;
        for (;;) {
            size_t j = c->li + 1, nvals = c->def[c->li] == max_def;
            while (j < c->nlv && c->rep[j] != 0) {
                if (c->def[j] < def_elem)
                    return fail(c, DPP_ECORRUPT, "a repeated entry without an element");
                nvals += c->def[j] == max_def;
                j++;
            }
            c->li = j;
            if ((rc = take_values(c, b, nvals)) != 0)
                return rc;
            if (j < c->nlv || (rc = ensure_entry(c)) == 1)
                break;
            if (rc)
                return rc;
            if (c->rep[c->li] == 0)
                break;
            if (c->def[c->li] < def_elem)
                return fail(c, DPP_ECORRUPT, "a repeated entry without an element");
        }
    }
    if (b)
        slot_end(b, at);
    return 0;
}

int dpp_pq_col_read(dpp_pq_col_t *c, dpp_pq_buf_t *b, uint64_t *offset, char *err, size_t errlen)
{
    if (c->failed)
        return failed(c, err, errlen);
    int rc = read_row(c, b);
    if (offset)
        *offset = c->page_off;
    return rc ? failed(c, err, errlen) : 0;
}

/* The offset index of the chunk, when it has one and it reads well; a bad
 * one is ignored (pages are then skipped by their headers). */
static void load_locs(dpp_pq_col_t *c)
{
    const dpp_pq_chunk_t *k = c->chunk;
    if (k->offset_index_offset < 0 || k->offset_index_length <= 0 ||
        (uint64_t)k->offset_index_offset + (uint64_t)k->offset_index_length > c->f->size)
        return;
    size_t len = (size_t)k->offset_index_length;
    const uint8_t *bytes = NULL;
    uint8_t *buf = NULL;
    if (in_spans(c->f, (uint64_t)k->offset_index_offset, &bytes) < len) {
        if ((buf = malloc(len)) == NULL ||
            dpp_rfile_read_full(c->f->in, buf, len, (uint64_t)k->offset_index_offset) != 0) {
            free(buf);
            return;
        }
        c->bytes_read += len;
        bytes = buf;
    }
    char why[256];
    if (dpp_pq_offset_index_parse(bytes, len, &c->locs, &c->nlocs, why, sizeof why) != 0) {
        c->locs = NULL;
        c->nlocs = 0;
    }
    free(buf);
}

int dpp_pq_col_skip(dpp_pq_col_t *c, uint64_t n, char *err, size_t errlen)
{
    if (c->failed)
        return failed(c, err, errlen);
    if (n == 0)
        return 0;
    int rc;
    /* Jump straight to the page holding the target row when the offset
     * index says where it is; the dictionary page (first in the chunk) is
     * read on the way. */
    if (c->row == 0 && c->nlv == 0) {
        load_locs(c);
        size_t best = 0;
        for (size_t i = 0; i < c->nlocs; i++)
            if ((uint64_t)c->locs[i].first_row_index <= n)
                best = i;
        if (best > 0 && c->locs[best].offset >= (int64_t)c->pos) {
            /* A dictionary page comes first in the chunk, before the first
             * data page the index lists (none when that is the chunk's
             * first page: nothing to read there). */
            dpp_pq_page_header_t h;
            size_t hlen;
            const uint8_t *raw = NULL;
            if ((int64_t)c->pos < c->locs[0].offset &&
                ((rc = read_header(c, &h, &hlen)) != 0 ||
                 (h.type == DPP_PQ_DICTIONARY_PAGE && ((rc = page_body(c, &h, hlen, &raw)) != 0 ||
                                                       (rc = load_dictionary(c, &h, raw)) != 0))))
                return failed(c, err, errlen);
            /* values_left counts level entries; the index counts rows, the
             * same thing only without repetition. With it, the chunk's end
             * is where its bytes end. */
            c->values_left = c->col->max_rep == 0
                                 ? c->chunk->num_values - c->locs[best].first_row_index
                                 : INT64_MAX;
            c->pos = (uint64_t)c->locs[best].offset;
            c->row = (uint64_t)c->locs[best].first_row_index;
            n -= c->row;
        }
    }
    while (n > 0) {
        if (c->li >= c->nlv) {
            uint64_t passed;
            rc = load_page(c, n, &passed);
            c->row += passed;
            n -= passed;
            if (rc == 1 && n == 0)
                return 0;
            if (rc == 1)
                rc = fail(c, DPP_ECORRUPT, "the column chunk ends at row %" PRIu64, c->row);
            if (rc)
                return failed(c, err, errlen);
            if (n == 0)
                return 0;
        }
        if ((rc = read_row(c, NULL)) != 0)
            return failed(c, err, errlen);
        n--;
    }
    return 0;
}
