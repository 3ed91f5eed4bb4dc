/* SPDX-License-Identifier: Apache-2.0 */
/* dpp-refsum: the independent reference the integration tests check dppctl
 * against. It shares no reader, decoder, spec or transform code with dpp:
 * its own spec parsing, directory listing, TFRecord walk, bitwise CRC32C and
 * transform math; only protobuf-c's generic unpack of tf.Example. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "example.pb-c.h"

#define MAX_RECORD (64u << 20) /* refuse absurd lengths before allocating */

enum op_kind { OP_FILL_MISSING, OP_CLAMP, OP_LOG1P, OP_MODULO, OP_TRUNCATE };

typedef struct op {
    enum op_kind kind;
    double value;    /* fill_missing */
    double min, max; /* clamp; -inf / +inf when not given */
    int64_t n;       /* modulo */
    int64_t max_len; /* truncate */
} op_t;

typedef struct feature {
    const char *name; /* points into the spec's JSON, which lives until exit */
    op_t *ops;
    size_t nops;
} feature_t;

typedef struct ref_spec {
    const char *table;
    const char **partitions;
    size_t npartitions; /* 0: every key=value folder */
    int64_t batch_size, epochs, consumers;
    feature_t *dense, *sparse;
    size_t ndense, nsparse;
    const char *label;
} ref_spec_t;

/* Expected numbers of one epoch of one rank; every epoch is the same. */
typedef struct totals {
    int64_t rows, batches;
    double label_sum, dense_sum;
    int64_t sparse_lengths_sum;
    uint64_t sparse_ids_sum, sparse_ids_wsum; /* int64 wrapping, as dpp sums them */
    int64_t skipped;                          /* records lacking a dense feature or the label */
} totals_t;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("refsum: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        die("out of memory");
    return p;
}

/* CRC32C, bitwise (reflected Castagnoli polynomial 0x82F63B78) */

static uint32_t crc32c_bitwise(const uint8_t *p, size_t len)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return crc ^ 0xffffffffu;
}

/* TFRecord's mask (tensorflow/core/lib/io/record_writer.h). */
static uint32_t crc_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double num_field(json_t *obj, const char *key, const char *path, int required, double dflt)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            die("spec: %s.%s: missing", path, key);
        return dflt;
    }
    if (!json_is_number(v))
        die("spec: %s.%s: not a number", path, key);
    return json_number_value(v);
}

static int64_t int_field(json_t *obj, const char *key, const char *path, int required, int64_t dflt)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            die("spec: %s.%s: missing", path, key);
        return dflt;
    }
    if (!json_is_integer(v))
        die("spec: %s.%s: not an integer", path, key);
    return (int64_t)json_integer_value(v);
}

static void parse_features(json_t *arr, const char *kind, feature_t **out, size_t *n)
{
    char path[128];
    if (!arr) {
        *out = NULL;
        *n = 0;
        return;
    }
    if (!json_is_array(arr))
        die("spec: features.%s: not an array", kind);
    *n = json_array_size(arr);
    *out = xcalloc(*n, sizeof(feature_t));
    for (size_t i = 0; i < *n; i++) {
        json_t *f = json_array_get(arr, i);
        feature_t *feat = &(*out)[i];
        json_t *name = json_object_get(f, "name");
        if (!json_is_string(name))
            die("spec: features.%s[%zu].name: missing or not a string", kind, i);
        feat->name = json_string_value(name);
        json_t *ops = json_object_get(f, "transforms");
        if (!ops)
            continue;
        if (!json_is_array(ops))
            die("spec: features.%s[%zu].transforms: not an array", kind, i);
        feat->nops = json_array_size(ops);
        feat->ops = xcalloc(feat->nops, sizeof(op_t));
        for (size_t j = 0; j < feat->nops; j++) {
            json_t *o = json_array_get(ops, j);
            op_t *op = &feat->ops[j];
            snprintf(path, sizeof(path), "features.%s[%zu].transforms[%zu]", kind, i, j);
            const char *opname = json_string_value(json_object_get(o, "op"));
            if (!opname)
                die("spec: %s.op: missing", path);
            int dense = strcmp(kind, "dense") == 0;
            if (dense && strcmp(opname, "fill_missing") == 0) {
                op->kind = OP_FILL_MISSING;
                op->value = num_field(o, "value", path, 1, 0);
            } else if (dense && strcmp(opname, "clamp") == 0) {
                op->kind = OP_CLAMP;
                op->min = num_field(o, "min", path, 0, -INFINITY);
                op->max = num_field(o, "max", path, 0, INFINITY);
            } else if (dense && strcmp(opname, "log1p") == 0) {
                op->kind = OP_LOG1P;
            } else if (!dense && strcmp(opname, "modulo") == 0) {
                op->kind = OP_MODULO;
                op->n = int_field(o, "n", path, 1, 0);
                if (op->n <= 0)
                    die("spec: %s.n: must be > 0", path);
            } else if (!dense && strcmp(opname, "truncate") == 0) {
                op->kind = OP_TRUNCATE;
                op->max_len = int_field(o, "max_len", path, 1, 0);
                if (op->max_len < 0)
                    die("spec: %s.max_len: must be >= 0", path);
            } else {
                die("spec: %s.op: unknown op \"%s\"", path, opname);
            }
        }
    }
}

/* The returned spec points into *root, which the caller keeps alive. */
static void load_spec(const char *file, ref_spec_t *s, json_t **root)
{
    json_error_t jerr;
    json_t *j = json_load_file(file, 0, &jerr);
    if (!j)
        die("%s:%d: %s", file, jerr.line, jerr.text);
    if (!json_is_object(j))
        die("%s: not a JSON object", file);
    memset(s, 0, sizeof(*s));
    s->table = json_string_value(json_object_get(j, "table"));
    if (!s->table)
        die("spec: table: missing or not a string");
    json_t *parts = json_object_get(j, "partitions");
    if (parts) {
        if (!json_is_array(parts))
            die("spec: partitions: not an array");
        s->npartitions = json_array_size(parts);
        s->partitions = xcalloc(s->npartitions, sizeof(char *));
        for (size_t i = 0; i < s->npartitions; i++) {
            s->partitions[i] = json_string_value(json_array_get(parts, i));
            if (!s->partitions[i])
                die("spec: partitions[%zu]: not a string", i);
        }
    }
    s->batch_size = int_field(j, "batch_size", "spec", 1, 0);
    s->epochs = int_field(j, "epochs", "spec", 0, 1);
    s->consumers = int_field(j, "consumers", "spec", 0, 1);
    if (s->batch_size <= 0 || s->epochs <= 0 || s->consumers <= 0)
        die("spec: batch_size, epochs and consumers must be > 0");
    json_t *feats = json_object_get(j, "features");
    parse_features(json_object_get(feats, "dense"), "dense", &s->dense, &s->ndense);
    parse_features(json_object_get(feats, "sparse"), "sparse", &s->sparse, &s->nsparse);
    s->label = json_string_value(json_object_get(json_object_get(j, "label"), "name"));
    if (!s->label)
        die("spec: label.name: missing or not a string");
    *root = j;
}

typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec_t;

static void strvec_push(strvec_t *sv, const char *s)
{
    if (sv->n == sv->cap) {
        sv->cap = sv->cap ? 2 * sv->cap : 64;
        sv->v = realloc(sv->v, sv->cap * sizeof(char *));
        if (!sv->v)
            die("out of memory");
    }
    sv->v[sv->n] = strdup(s);
    if (!sv->v[sv->n])
        die("out of memory");
    sv->n++;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = xcalloc(len, 1);
    snprintf(p, len, "%s/%s", dir, name);
    return p;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void list_data_files(const char *dir, strvec_t *files)
{
    DIR *d = opendir(dir);
    if (!d)
        die("%s: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || de->d_name[0] == '_' || ends_with(de->d_name, ".idx"))
            continue;
        char *path = join(dir, de->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            strvec_push(files, path);
        free(path);
    }
    closedir(d);
}

static void list_table(const char *table_dir, const ref_spec_t *s, strvec_t *files)
{
    strvec_t parts = {0};
    if (s->npartitions) {
        for (size_t i = 0; i < s->npartitions; i++) {
            char *p = join(table_dir, s->partitions[i]);
            if (!is_dir(p))
                die("partitions[%zu]: no partition \"%s\" in %s", i, s->partitions[i], table_dir);
            strvec_push(&parts, p);
            free(p);
        }
    } else {
        DIR *d = opendir(table_dir);
        if (!d)
            die("%s: %s", table_dir, strerror(errno));
        struct dirent *de;
        while ((de = readdir(d))) {
            const char *eq = strchr(de->d_name, '=');
            if (de->d_name[0] == '.' || de->d_name[0] == '_' || !eq || eq == de->d_name)
                continue;
            char *p = join(table_dir, de->d_name);
            if (is_dir(p))
                strvec_push(&parts, p);
            free(p);
        }
        closedir(d);
        if (parts.n == 0) /* an unpartitioned table: its files are the data */
            strvec_push(&parts, table_dir);
    }
    for (size_t i = 0; i < parts.n; i++) {
        list_data_files(parts.v[i], files);
        free(parts.v[i]);
    }
    free(parts.v);
    qsort(files->v, files->n, sizeof(char *), cmp_str);
}

/* The last entry named `name` wins, as in a protobuf map. An entry without a
 * value is a Feature with no kind set. */
static const Tfex__Feature *find_feature(const Tfex__Example *ex, const char *name)
{
    static const Tfex__Feature kindless = TFEX__FEATURE__INIT;
    const Tfex__Feature *found = NULL;
    if (!ex->features)
        return NULL;
    for (size_t i = 0; i < ex->features->n_feature; i++) {
        const Tfex__FeatureEntry *e = ex->features->feature[i];
        if (e->key && strcmp(e->key, name) == 0)
            found = e->value ? e->value : &kindless;
    }
    return found;
}

static float apply_dense(const feature_t *f, float x)
{
    for (size_t i = 0; i < f->nops; i++) {
        const op_t *op = &f->ops[i];
        switch (op->kind) {
        case OP_FILL_MISSING:
            break; /* only matters for an absent value, handled by the caller */
        case OP_CLAMP:
            /* NaN compares false both ways and so passes unchanged. */
            if ((double)x < op->min)
                x = (float)op->min;
            else if ((double)x > op->max)
                x = (float)op->max;
            break;
        case OP_LOG1P:
            x = (float)log1p((double)x);
            break;
        default:
            die("internal: sparse op on a dense feature");
        }
    }
    return x;
}

/* Returns the new length; ids are rewritten in place. */
static size_t apply_sparse(const feature_t *f, int64_t *ids, size_t len)
{
    for (size_t i = 0; i < f->nops; i++) {
        const op_t *op = &f->ops[i];
        switch (op->kind) {
        case OP_MODULO:
            for (size_t k = 0; k < len; k++) {
                int64_t r = ids[k] % op->n;
                if (r < 0)
                    r += op->n;
                ids[k] = r;
            }
            break;
        case OP_TRUNCATE:
            if ((int64_t)len > op->max_len)
                len = (size_t)op->max_len;
            break;
        default:
            die("internal: dense op on a sparse feature");
        }
    }
    return len;
}

/* Dense value of one record after its chain; returns 0 when the record is to
 * be skipped (absent with no fill_missing). fill_missing supplies the value
 * of an absent feature; later ops then run on it. */
static int dense_value(const feature_t *f, const Tfex__Feature *feat, const char *where, float *out)
{
    float x;
    size_t first = 0;
    if (!feat) {
        size_t k;
        for (k = 0; k < f->nops && f->ops[k].kind != OP_FILL_MISSING; k++)
            ;
        if (k == f->nops)
            return 0;
        x = (float)f->ops[k].value;
        first = k + 1;
    } else {
        if (feat->kind_case != TFEX__FEATURE__KIND_FLOAT_LIST)
            die("%s: dense feature \"%s\" is not a float list", where, f->name);
        if (feat->float_list->n_value != 1)
            die("%s: dense feature \"%s\" has %zu values, expected 1", where, f->name,
                feat->float_list->n_value);
        x = feat->float_list->value[0];
    }
    feature_t rest = {f->name, f->ops + first, f->nops - first};
    *out = apply_dense(&rest, x);
    return 1;
}

static int label_value(const Tfex__Feature *feat, const char *name, const char *where, float *out)
{
    if (!feat)
        return 0;
    switch (feat->kind_case) {
    case TFEX__FEATURE__KIND_INT64_LIST:
        if (feat->int64_list->n_value == 0)
            return 0;
        if (feat->int64_list->n_value != 1)
            die("%s: label \"%s\" has %zu values", where, name, feat->int64_list->n_value);
        *out = (float)feat->int64_list->value[0];
        return 1;
    case TFEX__FEATURE__KIND_FLOAT_LIST:
        if (feat->float_list->n_value == 0)
            return 0;
        if (feat->float_list->n_value != 1)
            die("%s: label \"%s\" has %zu values", where, name, feat->float_list->n_value);
        *out = feat->float_list->value[0];
        return 1;
    default:
        die("%s: label \"%s\" is neither int64 nor float", where, name);
    }
    return 0;
}

/* Adds one record's delivered values to t, or counts it as skipped. */
static void add_record(const ref_spec_t *s, const Tfex__Example *ex, const char *where, totals_t *t,
                       float *dense_buf, int64_t **id_buf, size_t *id_cap)
{
    float label;
    if (!label_value(find_feature(ex, s->label), s->label, where, &label)) {
        t->skipped++;
        return;
    }
    for (size_t i = 0; i < s->ndense; i++) {
        if (!dense_value(&s->dense[i], find_feature(ex, s->dense[i].name), where, &dense_buf[i])) {
            t->skipped++;
            return;
        }
    }
    /* The record is delivered: only now may it touch the totals. */
    t->rows++;
    t->label_sum += (double)label;
    for (size_t i = 0; i < s->ndense; i++)
        t->dense_sum += (double)dense_buf[i];
    for (size_t i = 0; i < s->nsparse; i++) {
        const Tfex__Feature *feat = find_feature(ex, s->sparse[i].name);
        size_t len = 0;
        if (feat) { /* absent: an empty list */
            if (feat->kind_case != TFEX__FEATURE__KIND_INT64_LIST)
                die("%s: sparse feature \"%s\" is not an int64 list", where, s->sparse[i].name);
            len = feat->int64_list->n_value;
            if (len > *id_cap) {
                *id_cap = len * 2;
                free(*id_buf);
                *id_buf = xcalloc(*id_cap, sizeof(int64_t));
            }
            memcpy(*id_buf, feat->int64_list->value, len * sizeof(int64_t));
        }
        len = apply_sparse(&s->sparse[i], *id_buf, len);
        uint64_t sum = 0;
        for (size_t k = 0; k < len; k++)
            sum += (uint64_t)(*id_buf)[k];
        t->sparse_lengths_sum += (int64_t)len;
        t->sparse_ids_sum += sum;
        t->sparse_ids_wsum += (uint64_t)(i + 1) * sum;
    }
}

/* Walks one file's framing, verifying both CRCs; returns the rows it
 * delivers. skip_corrupt: a payload CRC mismatch skips the record instead of
 * failing. */
static int64_t scan_file(const char *path, const ref_spec_t *s, totals_t *t, int skip_corrupt)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("%s: %s", path, strerror(errno));
    int64_t rows_before = t->rows;
    uint8_t hdr[12], crcbuf[4];
    uint8_t *payload = NULL;
    size_t cap = 0;
    float *dense_buf = xcalloc(s->ndense, sizeof(float));
    int64_t *id_buf = NULL;
    size_t id_cap = 0;
    char where[4200];
    uint64_t off = 0;
    for (;;) {
        size_t got = fread(hdr, 1, sizeof(hdr), f);
        if (got == 0 && feof(f))
            break;
        snprintf(where, sizeof(where), "%s: record at offset %" PRIu64, path, off);
        if (got != sizeof(hdr))
            die("%s: truncated record", where);
        if (crc_mask(crc32c_bitwise(hdr, 8)) != le32(hdr + 8))
            die("%s: corrupted record (length CRC)", where);
        uint64_t len = le64(hdr);
        if (len > MAX_RECORD)
            die("%s: length %" PRIu64 " over the %u limit", where, len, MAX_RECORD);
        if (len > cap) {
            free(payload);
            cap = (size_t)len;
            payload = xcalloc(cap, 1);
        }
        if (fread(payload, 1, (size_t)len, f) != len || fread(crcbuf, 1, 4, f) != 4)
            die("%s: truncated record", where);
        off += 16 + len;
        if (crc_mask(crc32c_bitwise(payload, (size_t)len)) != le32(crcbuf)) {
            if (!skip_corrupt)
                die("%s: corrupted record (payload CRC)", where);
            fprintf(stderr, "refsum: %s: corrupted record skipped\n", where);
            continue;
        }
        Tfex__Example *ex = tfex__example__unpack(NULL, (size_t)len, payload);
        if (!ex)
            die("%s: not a tf.Example", where);
        add_record(s, ex, where, t, dense_buf, &id_buf, &id_cap);
        tfex__example__free_unpacked(ex, NULL);
    }
    if (ferror(f))
        die("%s: read error", path);
    fclose(f);
    free(payload);
    free(dense_buf);
    free(id_buf);
    return t->rows - rows_before;
}

static void print_num(FILE *out, double x)
{
    if (isfinite(x))
        fprintf(out, "%.17g", x);
    else
        fputs("null", out); /* JSON has no NaN or infinity */
}

static void print_expected(FILE *out, int64_t epoch, const totals_t *t)
{
    fprintf(out,
            "{\"epoch\":%" PRId64 ",\"rows\":%" PRId64 ",\"batches\":%" PRId64 ",\"label_sum\":",
            epoch, t->rows, t->batches);
    print_num(out, t->label_sum);
    fputs(",\"dense_sum\":", out);
    print_num(out, t->dense_sum);
    fprintf(out,
            ",\"sparse_lengths_sum\":%" PRId64 ",\"sparse_ids_sum\":%" PRId64
            ",\"sparse_ids_wsum\":%" PRId64 "}\n",
            t->sparse_lengths_sum, (int64_t)t->sparse_ids_sum, (int64_t)t->sparse_ids_wsum);
}

static int get_int(json_t *o, const char *key, int64_t *v)
{
    json_t *x = json_object_get(o, key);
    if (!json_is_integer(x))
        return -1;
    *v = (int64_t)json_integer_value(x);
    return 0;
}

static int get_real(json_t *o, const char *key, double *v)
{
    json_t *x = json_object_get(o, key);
    if (json_is_null(x)) {
        *v = NAN;
        return 0;
    }
    if (!json_is_number(x))
        return -1;
    *v = json_number_value(x);
    return 0;
}

static int close_enough(double actual, double expected, double rel)
{
    if (isnan(actual) || isnan(expected))
        return isnan(actual) && isnan(expected);
    if (actual == expected)
        return 1;
    double scale = fmax(fabs(actual), fabs(expected));
    return fabs(actual - expected) <= rel * scale;
}

/* Compares one epoch line of dppctl with the expectation; returns mismatches. */
static int check_epoch(const char *file, int line, json_t *o, int64_t epoch, const totals_t *t)
{
    int bad = 0;
    struct {
        const char *key;
        int64_t want;
    } ints[] = {
        {"rows", t->rows},
        {"batches", t->batches},
        {"sparse_lengths_sum", t->sparse_lengths_sum},
        {"sparse_ids_sum", (int64_t)t->sparse_ids_sum},
        {"sparse_ids_wsum", (int64_t)t->sparse_ids_wsum},
    };
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        int64_t got;
        if (get_int(o, ints[i].key, &got) < 0) {
            printf("MISMATCH %s:%d epoch %" PRId64 ": %s missing or not an integer\n", file, line,
                   epoch, ints[i].key);
            bad++;
        } else if (got != ints[i].want) {
            printf("MISMATCH %s:%d epoch %" PRId64 ": %s = %" PRId64 ", expected %" PRId64
                   " (diff %" PRId64 ")\n",
                   file, line, epoch, ints[i].key, got, ints[i].want,
                   (int64_t)((uint64_t)got - (uint64_t)ints[i].want));
            bad++;
        }
    }
    struct {
        const char *key;
        double want, rel;
    } reals[] = {
        {"label_sum", t->label_sum, 0.0}, /* sums of 0/1 floats: exact in double */
        {"dense_sum", t->dense_sum, 1e-9},
    };
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
        double got;
        if (get_real(o, reals[i].key, &got) < 0) {
            printf("MISMATCH %s:%d epoch %" PRId64 ": %s missing or not a number\n", file, line,
                   epoch, reals[i].key);
            bad++;
        } else if (!close_enough(got, reals[i].want, reals[i].rel)) {
            printf("MISMATCH %s:%d epoch %" PRId64 ": %s = %.17g, expected %.17g (rel. diff "
                   "%.3g, tolerance %g)\n",
                   file, line, epoch, reals[i].key, got, reals[i].want,
                   fabs(got - reals[i].want) / fmax(fabs(reals[i].want), 1e-300), reals[i].rel);
            bad++;
        }
    }
    return bad;
}

/* Reads dppctl's JSON lines (lines not starting with '{' are ignored). */
static int check_file(const char *file, int64_t epochs, const totals_t *t)
{
    FILE *f = fopen(file, "r");
    if (!f)
        die("%s: %s", file, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    int line = 0, bad = 0;
    int64_t seen = 0;
    unsigned char *have = xcalloc((size_t)epochs, 1);
    while ((n = getline(&buf, &cap, f)) >= 0) {
        line++;
        const char *p = buf;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != '{') {
            if (*p != '\n' && *p != '\0')
                fprintf(stderr, "refsum: %s:%d: not a JSON object, ignored: %s", file, line, buf);
            continue;
        }
        json_error_t jerr;
        json_t *o = json_loads(p, 0, &jerr);
        if (!o) {
            printf("MISMATCH %s:%d: invalid JSON (%s): %s", file, line, jerr.text, buf);
            bad++;
            continue;
        }
        int64_t epoch;
        if (get_int(o, "epoch", &epoch) < 0) {
            printf("MISMATCH %s:%d: no integer \"epoch\"\n", file, line);
            bad++;
        } else if (epoch < 0 || epoch >= epochs) {
            printf("MISMATCH %s:%d: epoch %" PRId64 " out of range (spec has %" PRId64 ")\n", file,
                   line, epoch, epochs);
            bad++;
        } else if (have[epoch]) {
            printf("MISMATCH %s:%d: epoch %" PRId64 " reported twice\n", file, line, epoch);
            bad++;
        } else {
            have[epoch] = 1;
            seen++;
            bad += check_epoch(file, line, o, epoch, t);
        }
        json_decref(o);
    }
    fclose(f);
    free(buf);
    if (seen != epochs) {
        printf("MISMATCH %s: %" PRId64 " epoch lines, expected %" PRId64 "\n", file, seen, epochs);
        for (int64_t e = 0; e < epochs; e++)
            if (!have[e])
                printf("MISMATCH %s: epoch %" PRId64 " missing\n", file, e);
        bad++;
    }
    free(have);
    if (bad) {
        printf("refsum: %d mismatch%s; expected per epoch: ", bad, bad == 1 ? "" : "es");
        print_expected(stdout, 0, t);
        return 1;
    }
    printf("refsum: %" PRId64 " epochs match\n", epochs);
    return 0;
}

static void usage(FILE *out)
{
    fputs("usage: dpp-refsum --spec SPEC.json --table DIR [--rank R] [--check ACTUAL.jsonl]\n"
          "                  [--skip-corrupt]\n"
          "Computes the per-epoch totals dppctl read --output json should report for one\n"
          "rank, from the table's files alone. With --check, compares them with a file of\n"
          "dppctl's output lines: exit 0 when they match, 1 on a mismatch, 2 on an error.\n",
          out);
}

int main(int argc, char **argv)
{
    const char *spec_file = NULL, *table_dir = NULL, *check = NULL;
    long rank = 0;
    int skip_corrupt = 0;
    static const struct option longopts[] = {
        {"spec", required_argument, NULL, 's'},
        {"table", required_argument, NULL, 't'},
        {"rank", required_argument, NULL, 'r'},
        {"check", required_argument, NULL, 'c'},
        {"skip-corrupt", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 's':
            spec_file = optarg;
            break;
        case 't':
            table_dir = optarg;
            break;
        case 'r':
            errno = 0;
            rank = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || rank < 0)
                die("--rank: not a rank: %s", optarg);
            break;
        case 'c':
            check = optarg;
            break;
        case 'k':
            skip_corrupt = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!spec_file || !table_dir || optind != argc) {
        usage(stderr);
        return 2;
    }

    ref_spec_t spec;
    json_t *root = NULL;
    load_spec(spec_file, &spec, &root);
    if (rank >= spec.consumers)
        die("--rank %ld: the spec has %" PRId64 " consumer(s)", rank, spec.consumers);

    strvec_t files = {0};
    list_table(table_dir, &spec, &files);
    totals_t t = {0};
    for (size_t i = 0; i < files.n; i++) {
        if ((int64_t)(i % (size_t)spec.consumers) == rank) {
            int64_t rows = scan_file(files.v[i], &spec, &t, skip_corrupt);
            t.batches += (rows + spec.batch_size - 1) / spec.batch_size;
        }
        free(files.v[i]);
    }
    free(files.v);
    if (t.skipped)
        fprintf(stderr, "refsum: %" PRId64 " records skipped (dense feature or label absent)\n",
                t.skipped);

    int rc = 0;
    if (check) {
        rc = check_file(check, spec.epochs, &t);
    } else {
        for (int64_t e = 0; e < spec.epochs; e++)
            print_expected(stdout, e, &t);
    }
    for (size_t i = 0; i < spec.ndense; i++)
        free(spec.dense[i].ops);
    for (size_t i = 0; i < spec.nsparse; i++)
        free(spec.sparse[i].ops);
    free(spec.dense);
    free(spec.sparse);
    free(spec.partitions);
    json_decref(root);
    return rc;
}
