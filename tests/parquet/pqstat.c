/* SPDX-License-Identifier: Apache-2.0 */
/* dpp-pqstat FILE...: what dpp's Parquet reader (src/parquet/column.h)
 * reads from each file, as the statistics tests/parquet/duck_stats.mjs has
 * DuckDB compute, one JSON line per file: rows, and per top-level column
 * its nulls, empty lists, non-null values, their sum (numbers) or the
 * wrapping sum of FNV-1a 64 of each value (strings); integer columns also
 * their exact sum (int_sum, as DuckDB's HUGEINT sum). A column dpp refuses
 * is {"error": "<dpp's message>"}; a file dpp cannot open is
 * {"file": ..., "error": ...}. compare.py holds the two side by side. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parquet/column.h"

typedef struct stats {
    uint64_t nulls, empty, values;
    double sum;
    __int128 int_sum; /* integers: exact, as DuckDB sums them */
    uint64_t hash;
    int strings, integers, list;
} stats_t;

/* v in decimal (printf has no conversion for 128 bits). */
static void print_int128(__int128 v)
{
    char digits[48];
    size_t n = 0;
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (v < 0)
        putchar('-');
    while (n)
        putchar(digits[--n]);
}

static uint64_t fnv1a(const uint8_t *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* Adds one slot (as dpp_pq_col_read appends it) to st. */
static void add_slot(stats_t *st, const uint8_t *slot, size_t len)
{
    dpp_feat_ref_t r;
    if (dpp_pq_row_decode(slot, len, 1, &r) != 0) {
        fprintf(stderr, "pqstat: a slot does not decode\n");
        exit(2);
    }
    if (r.kind == DPP_FEAT_ABSENT) {
        st->nulls++;
        return;
    }
    size_t n = 0;
    if (r.kind == DPP_FEAT_BYTES) {
        const uint8_t *s;
        size_t pos = 0, l;
        while (dpp_feat_bytes_next(&r, &pos, &s, &l) == 1) {
            st->hash += fnv1a(s, l);
            n++;
        }
    } else if (r.kind == DPP_FEAT_FLOAT) {
        n = r.list_len / 4;
        for (size_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, r.list + 4 * i, 4);
            st->sum += v;
        }
    } else {
        n = r.list_len / 8;
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, r.list + 8 * i, 8);
            st->sum += (double)v;
            st->int_sum += v;
        }
    }
    if (st->list && n == 0)
        st->empty++;
    st->values += n;
}

static int stat_field(dpp_pq_file_t *f, const dpp_pq_field_t *field, stats_t *st, char *err,
                      size_t errlen)
{
    int rc = dpp_pq_field_check(f, field, err, errlen);
    if (rc)
        return rc;
    st->list = field->shape == DPP_PQ_LIST;
    dpp_pq_type_t t = f->meta.columns[field->column].type;
    st->strings = t == DPP_PQ_BYTE_ARRAY || t == DPP_PQ_FIXED_LEN_BYTE_ARRAY;
    st->integers = t != DPP_PQ_FLOAT && t != DPP_PQ_DOUBLE && !st->strings;
    dpp_pq_dctx_t dctx = {0};
    dpp_pq_buf_t b = {0};
    for (uint32_t g = 0; g < f->meta.nrow_groups && rc == 0; g++) {
        dpp_pq_col_t *c;
        if ((rc = dpp_pq_col_open(&c, f, g, field, &dctx)) != 0) {
            snprintf(err, errlen, "out of memory");
            break;
        }
        for (int64_t r = 0; r < f->meta.row_groups[g].num_rows && rc == 0; r++) {
            b.len = 0;
            if ((rc = dpp_pq_col_read(c, &b, NULL, err, errlen)) == 0)
                add_slot(st, b.data, b.len);
        }
        dpp_pq_col_free(c);
    }
    dpp_pq_buf_free(&b);
    dpp_pq_dctx_free(&dctx);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dpp-pqstat FILE.parquet...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *base = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        char err[512];
        dpp_pq_file_t f;
        printf("{\"file\":");
        json_string(base);
        if (dpp_pq_file_open(&f, argv[i], base, err, sizeof err) != 0) {
            printf(",\"error\":");
            json_string(err);
            printf("}\n");
            dpp_pq_file_close(&f);
            continue;
        }
        printf(",\"rows\":%" PRId64 ",\"columns\":{", f.meta.num_rows);
        for (uint32_t k = 0; k < f.meta.nfields; k++) {
            const dpp_pq_field_t *field = &f.meta.fields[k];
            stats_t st = {0};
            printf("%s", k ? "," : "");
            json_string(field->name);
            if (stat_field(&f, field, &st, err, sizeof err) != 0) {
                printf(":{\"error\":");
                json_string(err);
                printf("}");
                continue;
            }
            printf(":{\"nulls\":%" PRIu64 ",\"values\":%" PRIu64, st.nulls, st.values);
            if (st.list)
                printf(",\"empty\":%" PRIu64, st.empty);
            if (st.strings)
                printf(",\"hash\":\"%" PRIu64 "\"", st.hash);
            else
                printf(",\"sum\":%.17g", st.sum);
            if (st.integers) {
                printf(",\"int_sum\":\"");
                print_int128(st.int_sum);
                printf("\"");
            }
            printf("}");
        }
        printf("}}\n");
        dpp_pq_file_close(&f);
    }
    return 0;
}
