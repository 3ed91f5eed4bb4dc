/* SPDX-License-Identifier: Apache-2.0 */
/* dpp-refsum: the independent reference the integration tests check dppctl
 * against. It shares no reader, decoder, spec or transform code with dpp:
 * its own spec parsing, directory listing, TFRecord walk, bitwise CRC32C,
 * transform and filter math (written again from docs/spec.md, in a different
 * form where dpp's is clever: counting instead of binary search, % instead of
 * a reciprocal, frexp/rint instead of bit tricks); only protobuf-c's generic
 * unpack of tf.Example. */
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
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
#include <libgen.h>
#include <xxhash.h>

#include "example.pb-c.h"

#define MAX_RECORD (64u << 20) /* refuse absurd lengths before allocating */

enum op_kind {
    OP_FILL_MISSING,
    OP_CLAMP,
    OP_LOG1P,
    OP_STANDARDIZE,
    OP_BUCKETIZE,
    OP_CAST,
    OP_MODULO,
    OP_HASH,
    OP_TRUNCATE,
    OP_VOCAB,
};

enum cast_to { CAST_INT, CAST_BFLOAT16, CAST_FLOAT16 };

typedef struct op {
    enum op_kind kind;
    double value;       /* fill_missing */
    double min, max;    /* clamp; -inf / +inf when not given */
    double mean, std;   /* standardize */
    double *boundaries; /* bucketize */
    size_t nboundaries;
    enum cast_to to;  /* cast */
    int64_t n;        /* modulo, hash */
    int64_t salt;     /* hash */
    int64_t max_len;  /* truncate, first_x */
    int keep_last;    /* truncate */
    const char *file; /* vocab, relative to the data root */
    int64_t oov_buckets;
    char *text;               /* vocab: the file, which lines point into */
    struct vocab_line *lines; /* vocab: sorted by bytes, loaded at first use */
    size_t nlines;
} op_t;

/* A vocabulary line and its id, for a binary search over sorted lines (dpp
 * uses a hash table). */
typedef struct vocab_line {
    const char *s;
    size_t len;
    int64_t id;
} vocab_line_t;

static const char *vocab_root = "."; /* --table's parent folder */

typedef struct feature {
    const char *name;    /* points into the spec's JSON, which lives until exit */
    const char *weights; /* sparse: the per-id weights feature, or NULL */
    int64_t dim;         /* dense: values per record */
    op_t *ops;
    size_t nops;
} feature_t;

enum filter_kind { FILTER_REQUIRE, FILTER_SAMPLE };

typedef struct filter {
    enum filter_kind kind;
    const char *feature; /* require */
    double p;            /* sample */
    int64_t seed;
    int has_label;
    double label;
} filter_t;

typedef struct ref_spec {
    const char *table;
    const char **partitions;
    size_t npartitions; /* 0: every key=value folder */
    int64_t batch_size, epochs, consumers, split_rows;
    int on_corrupt; /* -1 not given (--skip-corrupt decides), 0 fail, 1 skip */
    feature_t *dense, *sparse;
    size_t ndense, nsparse;
    size_t dense_width; /* sum of the dense dims */
    int weighted;       /* some sparse feature has weights */
    const char *label;
    filter_t *filters;
    size_t nfilters;
} ref_spec_t;

/* Expected numbers of one epoch of one rank; every epoch is the same. */
typedef struct totals {
    int64_t rows, batches;
    double label_sum, dense_sum;
    int64_t sparse_lengths_sum;
    uint64_t sparse_ids_sum, sparse_ids_wsum; /* int64 wrapping, as dpp sums them */
    double sparse_weights_sum;                /* every delivered weight, after the chains */
    int64_t skipped;                          /* records with a per-record error */
    int64_t tails;                            /* files whose broken tail was dropped */
    int64_t gaps;                             /* breaks in the framing records resume after */
    int64_t filtered;                         /* rows dropped by a filter */
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

static const char *str_field(json_t *obj, const char *key, const char *path, int required)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            die("spec: %s.%s: missing", path, key);
        return NULL;
    }
    if (!json_is_string(v))
        die("spec: %s.%s: not a string", path, key);
    return json_string_value(v);
}

static void parse_op(json_t *o, const char *path, int dense, op_t *op)
{
    const char *opname = json_string_value(json_object_get(o, "op"));
    if (!opname)
        die("spec: %s.op: missing", path);
    op->min = -INFINITY;
    op->max = INFINITY;
    if (dense && strcmp(opname, "fill_missing") == 0) {
        op->kind = OP_FILL_MISSING;
        op->value = num_field(o, "value", path, 1, 0);
    } else if (dense && strcmp(opname, "clamp") == 0) {
        op->kind = OP_CLAMP;
        op->min = num_field(o, "min", path, 0, -INFINITY);
        op->max = num_field(o, "max", path, 0, INFINITY);
    } else if (dense && strcmp(opname, "log1p") == 0) {
        op->kind = OP_LOG1P;
    } else if (dense && strcmp(opname, "standardize") == 0) {
        op->kind = OP_STANDARDIZE;
        op->mean = num_field(o, "mean", path, 1, 0);
        op->std = num_field(o, "std", path, 1, 0);
        if (!(op->std > 0))
            die("spec: %s.std: must be > 0", path);
    } else if (dense && strcmp(opname, "bucketize") == 0) {
        op->kind = OP_BUCKETIZE;
        json_t *b = json_object_get(o, "boundaries");
        if (!json_is_array(b) || json_array_size(b) == 0)
            die("spec: %s.boundaries: missing, empty or not an array", path);
        op->nboundaries = json_array_size(b);
        op->boundaries = xcalloc(op->nboundaries, sizeof(double));
        for (size_t k = 0; k < op->nboundaries; k++) {
            json_t *v = json_array_get(b, k);
            if (!json_is_number(v))
                die("spec: %s.boundaries[%zu]: not a number", path, k);
            op->boundaries[k] = json_number_value(v);
            if (k > 0 && !(op->boundaries[k] > op->boundaries[k - 1]))
                die("spec: %s.boundaries: not strictly increasing", path);
        }
    } else if (dense && strcmp(opname, "cast") == 0) {
        op->kind = OP_CAST;
        const char *to = str_field(o, "to", path, 1);
        if (strcmp(to, "int") == 0)
            op->to = CAST_INT;
        else if (strcmp(to, "bfloat16") == 0)
            op->to = CAST_BFLOAT16;
        else if (strcmp(to, "float16") == 0)
            op->to = CAST_FLOAT16;
        else
            die("spec: %s.to: unknown type \"%s\"", path, to);
    } else if (!dense && strcmp(opname, "modulo") == 0) {
        op->kind = OP_MODULO;
        op->n = int_field(o, "n", path, 1, 0);
        if (op->n <= 0)
            die("spec: %s.n: must be > 0", path);
    } else if (!dense && strcmp(opname, "hash") == 0) {
        op->kind = OP_HASH;
        op->n = int_field(o, "n", path, 1, 0);
        op->salt = int_field(o, "salt", path, 0, 0);
        if (op->n <= 0)
            die("spec: %s.n: must be > 0", path);
    } else if (!dense && strcmp(opname, "vocab") == 0) {
        op->kind = OP_VOCAB;
        op->file = str_field(o, "file", path, 1);
        op->oov_buckets = int_field(o, "oov_buckets", path, 0, 0);
    } else if (!dense && strcmp(opname, "truncate") == 0) {
        op->kind = OP_TRUNCATE;
        op->max_len = int_field(o, "max_len", path, 1, 0);
        if (op->max_len < 0)
            die("spec: %s.max_len: must be >= 0", path);
        const char *keep = str_field(o, "keep", path, 0);
        if (keep && strcmp(keep, "last") == 0)
            op->keep_last = 1;
        else if (keep && strcmp(keep, "first") != 0)
            die("spec: %s.keep: unknown value \"%s\"", path, keep);
    } else if (!dense && strcmp(opname, "first_x") == 0) {
        op->kind = OP_TRUNCATE;
        op->max_len = int_field(o, "x", path, 1, 0);
        if (op->max_len < 0)
            die("spec: %s.x: must be >= 0", path);
    } else {
        die("spec: %s.op: unknown op \"%s\"", path, opname);
    }
}

static void parse_features(json_t *arr, const char *kind, feature_t **out, size_t *n)
{
    char path[128];
    int dense = strcmp(kind, "dense") == 0;
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
        snprintf(path, sizeof(path), "features.%s[%zu]", kind, i);
        json_t *name = json_object_get(f, "name");
        if (!json_is_string(name))
            die("spec: %s.name: missing or not a string", path);
        feat->name = json_string_value(name);
        if (dense) {
            feat->dim = int_field(f, "dim", path, 0, 1);
            if (feat->dim < 1 || feat->dim > 65536)
                die("spec: %s.dim: out of range", path);
        } else {
            feat->weights = str_field(f, "weights", path, 0);
        }
        json_t *ops = json_object_get(f, "transforms");
        if (!ops)
            continue;
        if (!json_is_array(ops))
            die("spec: %s.transforms: not an array", path);
        feat->nops = json_array_size(ops);
        feat->ops = xcalloc(feat->nops, sizeof(op_t));
        for (size_t j = 0; j < feat->nops; j++) {
            char op_path[192];
            snprintf(op_path, sizeof(op_path), "%s.transforms[%zu]", path, j);
            parse_op(json_array_get(ops, j), op_path, dense, &feat->ops[j]);
        }
    }
}

static void parse_filters(json_t *arr, ref_spec_t *s)
{
    char path[64];
    if (!arr)
        return;
    if (!json_is_array(arr))
        die("spec: filters: not an array");
    s->nfilters = json_array_size(arr);
    s->filters = xcalloc(s->nfilters, sizeof(filter_t));
    for (size_t i = 0; i < s->nfilters; i++) {
        json_t *o = json_array_get(arr, i);
        filter_t *f = &s->filters[i];
        snprintf(path, sizeof(path), "filters[%zu]", i);
        const char *op = str_field(o, "op", path, 1);
        if (strcmp(op, "require") == 0) {
            f->kind = FILTER_REQUIRE;
            f->feature = str_field(o, "feature", path, 1);
        } else if (strcmp(op, "sample") == 0) {
            f->kind = FILTER_SAMPLE;
            f->p = num_field(o, "p", path, 1, 0);
            if (!(f->p >= 0 && f->p <= 1))
                die("spec: %s.p: not between 0 and 1", path);
            f->seed = int_field(o, "seed", path, 0, 0);
            f->has_label = json_object_get(o, "label") != NULL;
            f->label = num_field(o, "label", path, 0, 0);
        } else {
            die("spec: %s.op: unknown filter \"%s\"", path, op);
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
    s->split_rows = int_field(j, "split_rows", "spec", 0, 65536);
    if (s->batch_size <= 0 || s->epochs <= 0 || s->consumers <= 0 || s->split_rows <= 0)
        die("spec: batch_size, epochs, consumers and split_rows must be > 0");
    /* With remainder "drop" the rows an epoch drops depend on arrival order:
     * only "keep" can be checked row for row. */
    const char *remainder = str_field(j, "remainder", "spec", 0);
    if (remainder == NULL || strcmp(remainder, "keep") != 0)
        die("spec: refsum checks every row, so the spec must say \"remainder\": \"keep\"");
    s->on_corrupt = -1;
    const char *on_corrupt = str_field(j, "on_corrupt", "spec", 0);
    if (on_corrupt && strcmp(on_corrupt, "skip") == 0)
        s->on_corrupt = 1;
    else if (on_corrupt && strcmp(on_corrupt, "fail") == 0)
        s->on_corrupt = 0;
    else if (on_corrupt)
        die("spec: on_corrupt: unknown value \"%s\"", on_corrupt);
    json_t *feats = json_object_get(j, "features");
    parse_features(json_object_get(feats, "dense"), "dense", &s->dense, &s->ndense);
    parse_features(json_object_get(feats, "sparse"), "sparse", &s->sparse, &s->nsparse);
    for (size_t i = 0; i < s->ndense; i++)
        s->dense_width += (size_t)s->dense[i].dim;
    for (size_t i = 0; i < s->nsparse; i++)
        s->weighted |= s->sparse[i].weights != NULL;
    s->label = json_string_value(json_object_get(json_object_get(j, "label"), "name"));
    if (!s->label)
        die("spec: label.name: missing or not a string");
    parse_filters(json_object_get(j, "filters"), s);
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

/* x rounded to a binary format with `bits` significant bits, normal
 * exponents down to emin (below it, multiples of 2^(emin - bits + 1)) and
 * largest finite value max_finite; ties to even. Written from the definition
 * of rounding (scale to an integer multiple, rint in the default
 * round-to-nearest-even mode), not from bit patterns. */
static float round_to_format(float x, int bits, int emin, double max_finite)
{
    if (isnan(x))
        return copysignf(NAN, x);
    if (isinf(x) || x == 0)
        return x;
    double a = fabs((double)x);
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): a's exponent is e - 1 */
    int exp = e - 1 < emin ? emin : e - 1;
    double quantum = ldexp(1.0, exp - (bits - 1));
    double r = rint(a / quantum) * quantum;
    if (r > max_finite)
        r = INFINITY;
    return (float)copysign(r, (double)x);
}

static float apply_dense_op(const op_t *op, float x)
{
    switch (op->kind) {
    case OP_FILL_MISSING:
        return x; /* only matters for an absent value, handled by the caller */
    case OP_CLAMP:
        /* NaN compares false both ways and so passes unchanged. */
        if ((double)x < op->min)
            return (float)op->min;
        if ((double)x > op->max)
            return (float)op->max;
        return x;
    case OP_LOG1P:
        return (float)log1p((double)x);
    case OP_STANDARDIZE:
        return (float)(((double)x - op->mean) / op->std);
    case OP_BUCKETIZE: {
        if (isnan(x))
            return x;
        size_t count = 0;
        for (size_t k = 0; k < op->nboundaries; k++)
            if (op->boundaries[k] <= (double)x)
                count++;
        return (float)count;
    }
    case OP_CAST:
        switch (op->to) {
        case CAST_INT:
            if (isnan(x))
                return 0.0f;
            if (fabsf(x) >= 9223372036854775808.0f)
                return copysignf(9223372036854775808.0f, x);
            return truncf(x) + 0.0f; /* -0.0 + 0.0 = +0.0: an integer has no -0 */
        case CAST_BFLOAT16:
            return round_to_format(x, 8, -126, ldexp(255.0, 120));
        case CAST_FLOAT16:
            return round_to_format(x, 11, -14, 65504.0);
        }
        break;
    default:
        break;
    }
    die("internal: sparse op on a dense feature");
    return x;
}

static uint64_t splitmix_finalize(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int line_cmp(const void *a, const void *b)
{
    const vocab_line_t *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void vocab_load(op_t *op)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", vocab_root, op->file);
    FILE *f = fopen(path, "rb");
    if (!f)
        die("vocab %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap && !(text = realloc(text, cap = cap ? 2 * cap : 65536)))
            die("out of memory");
        size_t r = fread(text + len, 1, cap - len, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    op->text = text;
    size_t n = 0;
    for (size_t i = 0, start = 0; i <= len; i++) {
        if (i < len && text[i] != '\n')
            continue;
        if (i == len && i == start)
            break; /* no last line after a final newline */
        if (!(op->lines = realloc(op->lines, (n + 1) * sizeof *op->lines)))
            die("out of memory");
        op->lines[n] = (vocab_line_t){text + start, i - start, (int64_t)n};
        n++;
        start = i + 1;
    }
    op->nlines = n;
    qsort(op->lines, n, sizeof *op->lines, line_cmp);
}

/* A string's id by a hash or vocab op, as docs/spec.md defines them. */
static int64_t string_id(op_t *op, const uint8_t *s, size_t len)
{
    if (op->kind == OP_HASH)
        return (int64_t)(XXH3_64bits_withSeed(s, len, (uint64_t)op->salt) % (uint64_t)op->n);
    if (!op->lines)
        vocab_load(op);
    vocab_line_t key = {(const char *)s, len, 0};
    const vocab_line_t *hit = bsearch(&key, op->lines, op->nlines, sizeof key, line_cmp);
    if (hit)
        return hit->id;
    int64_t v = (int64_t)op->nlines;
    return op->oov_buckets ? v + (int64_t)(XXH3_64bits(s, len) % (uint64_t)op->oov_buckets) : v;
}

/* Returns the new length; ids (and weights, when not NULL) are rewritten in
 * place. */
static size_t apply_sparse(const feature_t *f, size_t first, int64_t *ids, float *weights,
                           size_t len)
{
    for (size_t i = first; i < f->nops; i++) {
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
        case OP_HASH:
            for (size_t k = 0; k < len; k++) {
                uint64_t z = (uint64_t)ids[k] ^ ((uint64_t)op->salt * UINT64_C(0x9E3779B97F4A7C15));
                ids[k] = (int64_t)(splitmix_finalize(z) % (uint64_t)op->n);
            }
            break;
        case OP_VOCAB:
            break; /* strings only: done by string_id() */
        case OP_TRUNCATE:
            if ((int64_t)len > op->max_len) {
                size_t keep = (size_t)op->max_len, first = op->keep_last ? len - keep : 0;
                for (size_t k = 0; k < keep; k++) {
                    ids[k] = ids[first + k];
                    if (weights)
                        weights[k] = weights[first + k];
                }
                len = keep;
            }
            break;
        default:
            die("internal: dense op on a sparse feature");
        }
    }
    return len;
}

/* Dense values of one record after its chain, into out[0..dim); returns 0
 * when the record is to be skipped (absent with no fill_missing, or the
 * wrong number of values). fill_missing supplies the values of an absent
 * feature; later ops then run on them. */
static int dense_value(const feature_t *f, const Tfex__Feature *feat, const char *where, float *out)
{
    size_t first = 0, dim = (size_t)f->dim;
    if (!feat) {
        size_t k;
        for (k = 0; k < f->nops && f->ops[k].kind != OP_FILL_MISSING; k++)
            ;
        if (k == f->nops)
            return 0;
        for (size_t d = 0; d < dim; d++)
            out[d] = (float)f->ops[k].value;
        first = k + 1;
    } else if (feat->kind_case == TFEX__FEATURE__KIND_FLOAT_LIST) {
        if (feat->float_list->n_value != dim)
            return 0;
        for (size_t d = 0; d < dim; d++)
            out[d] = feat->float_list->value[d];
    } else if (feat->kind_case == TFEX__FEATURE__KIND_INT64_LIST) {
        if (feat->int64_list->n_value != dim)
            return 0;
        for (size_t d = 0; d < dim; d++)
            out[d] = (float)feat->int64_list->value[d];
    } else {
        die("%s: dense feature \"%s\" is neither a float nor an int64 list", where, f->name);
    }
    for (size_t k = first; k < f->nops; k++)
        for (size_t d = 0; d < dim; d++)
            out[d] = apply_dense_op(&f->ops[k], out[d]);
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

/* 64-bit FNV-1a over the path's bytes. */
static uint64_t fnv1a64(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* The sample filter's rule of docs/spec.md: kept iff
 * draw < p * 2^64 as real numbers. p * 2^53 is exact in double (a power-of-two
 * scaling); with draw = hi * 2^11 + lo (hi < 2^53, lo < 2^11) the test is
 * hi + lo / 2^11 < p * 2^53, decided on the integer parts first and on the
 * exact fractions when they are equal. */
static int sample_keeps(const filter_t *f, uint64_t path_hash, uint64_t record_index, float label)
{
    if (f->has_label && label != (float)f->label)
        return 1;
    if (f->p >= 1)
        return 1;
    uint64_t row_key = splitmix_finalize(path_hash + record_index);
    uint64_t draw = splitmix_finalize(row_key ^ splitmix_finalize((uint64_t)f->seed));
    double scaled = f->p * 0x1p53, whole = floor(scaled);
    uint64_t hi = draw >> 11, whole_int = (uint64_t)whole;
    if (hi != whole_int)
        return hi < whole_int;
    return (double)(draw & 2047) / 2048.0 < scaled - whole;
}

/* The per-record scratch: the dense row, and one id list (and weight list)
 * per sparse feature, kept until the record is known to be delivered. */
typedef struct scratch {
    float *dense;
    int64_t **ids;
    float **weights;
    size_t *lens, *caps;
} scratch_t;

static void scratch_init(scratch_t *x, const ref_spec_t *s)
{
    x->dense = xcalloc(s->dense_width, sizeof(float));
    x->ids = xcalloc(s->nsparse, sizeof(int64_t *));
    x->weights = xcalloc(s->nsparse, sizeof(float *));
    x->lens = xcalloc(s->nsparse, sizeof(size_t));
    x->caps = xcalloc(s->nsparse, sizeof(size_t));
}

static void scratch_free(scratch_t *x, const ref_spec_t *s)
{
    for (size_t i = 0; i < s->nsparse; i++) {
        free(x->ids[i]);
        free(x->weights[i]);
    }
    free(x->dense);
    free(x->ids);
    free(x->weights);
    free(x->lens);
    free(x->caps);
}

static void scratch_reserve(scratch_t *x, size_t i, size_t n)
{
    if (n <= x->caps[i])
        return;
    x->caps[i] = n * 2;
    free(x->ids[i]);
    free(x->weights[i]);
    x->ids[i] = xcalloc(x->caps[i], sizeof(int64_t));
    x->weights[i] = xcalloc(x->caps[i], sizeof(float));
}

/* Adds one record's delivered values to t, or counts it as skipped or
 * filtered. Returns 1 when the record is delivered. The order is dpp's: the
 * label (a row without one is an error whatever the filters say), then the
 * filters, then the dense and sparse chains. */
static int add_record(const ref_spec_t *s, const Tfex__Example *ex, const char *where,
                      const char *rel_path, uint64_t record_index, totals_t *t, scratch_t *x)
{
    float label;
    if (!label_value(find_feature(ex, s->label), s->label, where, &label)) {
        t->skipped++;
        return 0;
    }
    uint64_t path_hash = fnv1a64(rel_path);
    for (size_t i = 0; i < s->nfilters; i++) {
        const filter_t *f = &s->filters[i];
        int keep = f->kind == FILTER_REQUIRE ? find_feature(ex, f->feature) != NULL
                                             : sample_keeps(f, path_hash, record_index, label);
        if (!keep) {
            t->filtered++;
            return 0;
        }
    }
    float *dense = x->dense;
    for (size_t i = 0; i < s->ndense; i++) {
        if (!dense_value(&s->dense[i], find_feature(ex, s->dense[i].name), where, dense)) {
            t->skipped++;
            return 0;
        }
        dense += s->dense[i].dim;
    }
    for (size_t i = 0; i < s->nsparse; i++) {
        const feature_t *sf = &s->sparse[i];
        const Tfex__Feature *feat = find_feature(ex, sf->name);
        size_t len = 0;
        size_t first_op = 0;
        if (feat && feat->kind_case == TFEX__FEATURE__KIND_BYTES_LIST) {
            /* strings: the chain's first op makes the ids */
            if (sf->nops == 0 || (sf->ops[0].kind != OP_HASH && sf->ops[0].kind != OP_VOCAB))
                die("%s: string feature \"%s\" without hash or vocab first", where, sf->name);
            len = feat->bytes_list->n_value;
            scratch_reserve(x, i, len);
            for (size_t k = 0; k < len; k++)
                x->ids[i][k] = string_id(&sf->ops[0], feat->bytes_list->value[k].data,
                                         feat->bytes_list->value[k].len);
            first_op = 1;
        } else if (feat) { /* absent: an empty list */
            if (feat->kind_case != TFEX__FEATURE__KIND_INT64_LIST)
                die("%s: sparse feature \"%s\" is not an int64 list", where, sf->name);
            len = feat->int64_list->n_value;
            scratch_reserve(x, i, len);
            if (len) /* an empty list may have no array at all */
                memcpy(x->ids[i], feat->int64_list->value, len * sizeof(int64_t));
        }
        float *w = NULL;
        if (sf->weights) {
            const Tfex__Feature *wf = find_feature(ex, sf->weights);
            size_t wlen = 0;
            if (wf) {
                if (wf->kind_case != TFEX__FEATURE__KIND_FLOAT_LIST)
                    die("%s: weights \"%s\" are not a float list", where, sf->weights);
                wlen = wf->float_list->n_value;
            }
            if (wlen != len) { /* weights pair with ids one to one */
                t->skipped++;
                return 0;
            }
            w = x->weights[i];
            if (len)
                memcpy(w, wf->float_list->value, len * sizeof(float));
        }
        x->lens[i] = apply_sparse(sf, first_op, x->ids[i], w, len);
    }

    /* The record is delivered: only now may it touch the totals. */
    t->rows++;
    t->label_sum += (double)label;
    for (size_t k = 0; k < s->dense_width; k++)
        t->dense_sum += (double)x->dense[k];
    for (size_t i = 0; i < s->nsparse; i++) {
        uint64_t sum = 0;
        for (size_t k = 0; k < x->lens[i]; k++)
            sum += (uint64_t)x->ids[i][k];
        t->sparse_lengths_sum += (int64_t)x->lens[i];
        t->sparse_ids_sum += sum;
        t->sparse_ids_wsum += (uint64_t)(i + 1) * sum;
        if (s->sparse[i].weights)
            for (size_t k = 0; k < x->lens[i]; k++)
                t->sparse_weights_sum += (double)x->weights[i][k];
    }
    return 1;
}

/* Which records belong to the rank, as the master deals them: the records
 * of all files in order (index order: every framed record up to a broken
 * frame counts, corrupt payloads included) are cut into one contiguous run
 * per rank, rank r getting total / consumers records plus one for the first
 * total % consumers ranks (remainder "keep", the only one refsum checks). */
typedef struct split_walk {
    uint64_t lo, hi; /* the rank's global record indexes [lo, hi) */
    uint64_t base;   /* global index of the current file's first record */
} split_walk_t;

/* Where records resume after the framing broke at `from` (a length CRC
 * mismatch): the first later offset whose length CRC matches, whose length
 * is within the limit and fits the file, and whose payload CRC matches; -1
 * when none does. The rest of the file is read whole: test files are small. */
static int64_t resync_at(FILE *f, uint64_t from)
{
    if (fseeko(f, 0, SEEK_END) != 0)
        die("seek: %s", strerror(errno));
    uint64_t size = (uint64_t)ftello(f);
    if (size <= from + 1)
        return -1;
    uint64_t n = size - from;
    uint8_t *b = xcalloc((size_t)n, 1);
    if (fseeko(f, (off_t)from, SEEK_SET) != 0 || fread(b, 1, (size_t)n, f) != n)
        die("read: %s", strerror(errno));
    int64_t found = -1;
    for (uint64_t p = 1; p + 16 <= n && found < 0; p++) {
        uint64_t len = le64(b + p);
        if (crc_mask(crc32c_bitwise(b + p, 8)) != le32(b + p + 8) || len > MAX_RECORD ||
            len > n - p - 16)
            continue;
        if (crc_mask(crc32c_bitwise(b + p + 12, (size_t)len)) == le32(b + p + 12 + len))
            found = (int64_t)(from + p);
    }
    free(b);
    return found;
}

/* Walks one file's framing, verifying both CRCs, and adds the records of the
 * splits of this rank. A file of N records has ceil(N / split_rows) splits;
 * split b holds records [b * split_rows, (b + 1) * split_rows).
 * skip_corrupt: a payload CRC mismatch skips the record instead of failing;
 * it still counts as a record of its file. A length CRC mismatch is a gap
 * records resume after (resync_at), counted as one rejected record of every
 * epoch (t->gaps). A broken frame no record follows (the file ends inside a
 * record, an absurd length, a gap to the end) ends the file there: the
 * file's records are the whole ones before it (the index docs/protocol.md
 * describes), and the tail counts as one rejected record (t->tails). */
static void scan_file(const char *path, const char *rel_path, const ref_spec_t *s, totals_t *t,
                      int skip_corrupt, split_walk_t *w, scratch_t *x)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("%s: %s", path, strerror(errno));
    uint8_t hdr[12], crcbuf[4];
    uint8_t *payload = NULL;
    size_t cap = 0;
    char where[4200];
    uint64_t off = 0, record_index = 0;
    for (;; record_index++) {
        size_t got = fread(hdr, 1, sizeof(hdr), f);
        if (got == 0 && feof(f))
            break;
        snprintf(where, sizeof(where), "%s: record at offset %" PRIu64, path, off);
        const char *broken = NULL;
        uint64_t len = 0;
        if (got != sizeof(hdr)) {
            broken = "truncated record";
        } else if (crc_mask(crc32c_bitwise(hdr, 8)) != le32(hdr + 8)) {
            broken = "corrupted record (length CRC)";
        } else if ((len = le64(hdr)) > MAX_RECORD) {
            broken = "length over the limit";
        } else {
            if (len > cap) {
                free(payload);
                cap = (size_t)len;
                payload = xcalloc(cap, 1);
            }
            if (fread(payload, 1, (size_t)len, f) != len || fread(crcbuf, 1, 4, f) != 4)
                broken = "truncated record";
        }
        int64_t resume;
        if (broken && got == sizeof(hdr) && skip_corrupt &&
            crc_mask(crc32c_bitwise(hdr, 8)) != le32(hdr + 8) && (resume = resync_at(f, off)) > 0) {
            fprintf(stderr, "refsum: %s: %s; records resume at offset %" PRId64 "\n", where, broken,
                    resume);
            t->gaps++;
            off = (uint64_t)resume;
            if (fseeko(f, (off_t)off, SEEK_SET) != 0)
                die("seek: %s", strerror(errno));
            record_index--; /* a gap is no record */
            continue;
        }
        if (broken) {
            if (!skip_corrupt)
                die("%s: %s", where, broken);
            fprintf(stderr, "refsum: %s: %s; the rest of the file is dropped\n", where, broken);
            t->tails++;
            break;
        }
        off += 16 + len;
        uint64_t g = w->base + record_index;
        if (g < w->lo || g >= w->hi)
            continue; /* another rank's record: only counted */
        if (crc_mask(crc32c_bitwise(payload, (size_t)len)) != le32(crcbuf)) {
            if (!skip_corrupt)
                die("%s: corrupted record (payload CRC)", where);
            fprintf(stderr, "refsum: %s: corrupted record skipped\n", where);
            t->skipped++;
            continue;
        }
        Tfex__Example *ex = tfex__example__unpack(NULL, (size_t)len, payload);
        if (!ex)
            die("%s: not a tf.Example", where);
        add_record(s, ex, where, rel_path, record_index, t, x);
        tfex__example__free_unpacked(ex, NULL);
    }
    if (ferror(f))
        die("%s: read error", path);
    fclose(f);
    free(payload);
    w->base += record_index;
}

/* Records a file's index would list: whole frames up to a broken one. */
static uint64_t count_records(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("%s: %s", path, strerror(errno));
    uint8_t hdr[12];
    uint64_t n = 0;
    for (;;) {
        if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr)
            break;
        uint64_t len = le64(hdr);
        if (crc_mask(crc32c_bitwise(hdr, 8)) != le32(hdr + 8)) {
            int64_t resume = resync_at(f, (uint64_t)ftello(f) - sizeof hdr);
            if (resume < 0 || fseeko(f, (off_t)resume, SEEK_SET) != 0)
                break;
            continue;
        }
        if (len > MAX_RECORD || fseeko(f, (off_t)len, SEEK_CUR) != 0)
            break;
        /* a payload cut short shows as a missing CRC: fseeko past EOF succeeds */
        uint8_t crc[4];
        if (fread(crc, 1, 4, f) != 4)
            break;
        n++;
    }
    fclose(f);
    return n;
}

static void print_num(FILE *out, double x)
{
    if (isfinite(x))
        fprintf(out, "%.17g", x);
    else
        fputs("null", out); /* JSON has no NaN or infinity */
}

/* weighted: the spec has a sparse feature with weights, and so the line has
 * sparse_weights_sum (the sum of every delivered weight, after the chains). */
static void print_expected(FILE *out, int64_t epoch, const totals_t *t, int weighted)
{
    fprintf(out,
            "{\"epoch\":%" PRId64 ",\"rows\":%" PRId64 ",\"batches\":%" PRId64 ",\"label_sum\":",
            epoch, t->rows, t->batches);
    print_num(out, t->label_sum);
    fputs(",\"dense_sum\":", out);
    print_num(out, t->dense_sum);
    fprintf(out,
            ",\"sparse_lengths_sum\":%" PRId64 ",\"sparse_ids_sum\":%" PRId64
            ",\"sparse_ids_wsum\":%" PRId64,
            t->sparse_lengths_sum, (int64_t)t->sparse_ids_sum, (int64_t)t->sparse_ids_wsum);
    if (weighted) {
        fputs(",\"sparse_weights_sum\":", out);
        print_num(out, t->sparse_weights_sum);
    }
    fputs("}\n", out);
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
static int check_epoch(const char *file, int line, json_t *o, int64_t epoch, const totals_t *t,
                       int weighted)
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
        {"sparse_weights_sum", t->sparse_weights_sum, 1e-9}, /* only when weighted */
    };
    size_t nreals = sizeof(reals) / sizeof(reals[0]) - (weighted ? 0 : 1);
    for (size_t i = 0; i < nreals; i++) {
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
static int check_file(const char *file, int64_t epochs, const totals_t *t, int weighted)
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
            bad += check_epoch(file, line, o, epoch, t, weighted);
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
        print_expected(stdout, 0, t, weighted);
        return 1;
    }
    printf("refsum: %" PRId64 " epochs match\n", epochs);
    return 0;
}

/* ---- --write-table: a small table with what dpp-gen does not write ------- */

/* Deterministic values: a SplitMix64 stream per (record, slot). */
static uint64_t gen_value(uint64_t record, unsigned slot)
{
    return splitmix_finalize(record * 64 + slot + UINT64_C(0x5DEECE66D));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Appends one framed record: length, masked CRC of the length, payload,
 * masked CRC of the payload. */
static void write_frame(FILE *f, const char *path, const uint8_t *payload, size_t len)
{
    uint8_t hdr[12], foot[4];
    put_le64(hdr, (uint64_t)len);
    put_le32(hdr + 8, crc_mask(crc32c_bitwise(hdr, 8)));
    put_le32(foot, crc_mask(crc32c_bitwise(payload, len)));
    if (fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr || fwrite(payload, 1, len, f) != len ||
        fwrite(foot, 1, sizeof foot, f) != sizeof foot)
        die("%s: write error", path);
}

enum { W_LABEL, W_ROW_ID, W_EMB, W_PRICE, W_IDS, W_IDS_W, W_HIST, W_NFEAT };

static const char *const w_names[W_NFEAT] = {"label", "row_id", "emb", "price",
                                             "ids",   "ids_w",  "hist"};

/* One record's message tree, filled entry by entry. */
typedef struct wmsg {
    Tfex__Int64List il[W_NFEAT];
    Tfex__FloatList fl[W_NFEAT];
    Tfex__Feature feat[W_NFEAT];
    Tfex__FeatureEntry ent[W_NFEAT];
    Tfex__FeatureEntry *entp[W_NFEAT];
    size_t n;
} wmsg_t;

static Tfex__Feature *add_entry(wmsg_t *m, int k)
{
    size_t n = m->n++;
    tfex__feature_entry__init(&m->ent[n]);
    tfex__feature__init(&m->feat[n]);
    m->ent[n].key = (char *)w_names[k];
    m->ent[n].value = &m->feat[n];
    m->entp[n] = &m->ent[n];
    return &m->feat[n];
}

static void add_ints(wmsg_t *m, int k, int64_t *v, size_t count)
{
    Tfex__Int64List *l = &m->il[m->n];
    Tfex__Feature *f = add_entry(m, k);
    tfex__int64_list__init(l);
    l->n_value = count;
    l->value = v;
    f->kind_case = TFEX__FEATURE__KIND_INT64_LIST;
    f->int64_list = l;
}

static void add_floats(wmsg_t *m, int k, float *v, size_t count)
{
    Tfex__FloatList *l = &m->fl[m->n];
    Tfex__Feature *f = add_entry(m, k);
    tfex__float_list__init(l);
    l->n_value = count;
    l->value = v;
    f->kind_case = TFEX__FEATURE__KIND_FLOAT_LIST;
    f->float_list = l;
}

/* Writes DIR/part-NNNNN.tfrecord, `files` files of `rows` records each, of
 * tf.Examples with:
 *   label  int64 0/1;  row_id  int64
 *   emb    float list of 4 (dim 4): absent in about 1/7 of the records, 3
 *          values (a per-record error) in about 1/40
 *   price  one float in [0, 1000)
 *   ids    int64 list of 0-6 ids over the whole int64 range; absent in about
 *          1/5 of the records
 *   ids_w  float list, one weight per id; absent when ids is absent, absent
 *          or empty when ids is empty, one too many (a per-record error) in
 *          about 1/13
 *   hist   int64 list of 0-10 ids in [-50000, 50000); absent in about 1/9. */
static void write_table(const char *dir, uint64_t rows, uint64_t files)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        die("%s: %s", dir, strerror(errno));
    int64_t label, row_id, ids[8], hist[16];
    float emb[4], price, weights[8];
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (uint64_t fi = 0; fi < files; fi++) {
        char name[48];
        snprintf(name, sizeof name, "part-%05" PRIu64 ".tfrecord", fi);
        char *path = join(dir, name);
        FILE *f = fopen(path, "wb");
        if (!f)
            die("%s: %s", path, strerror(errno));
        for (uint64_t r = 0; r < rows; r++) {
            uint64_t g = fi * rows + r;
            wmsg_t m;
            m.n = 0;
            label = (int64_t)(gen_value(g, 0) & 1);
            add_ints(&m, W_LABEL, &label, 1);
            row_id = (int64_t)g;
            add_ints(&m, W_ROW_ID, &row_id, 1);
            if (gen_value(g, 1) % 7 != 0) {
                for (int d = 0; d < 4; d++)
                    emb[d] = (float)((int64_t)(gen_value(g, 2 + d) % 200001) - 100000) / 1000.0f;
                add_floats(&m, W_EMB, emb, gen_value(g, 1) % 40 == 1 ? 3 : 4);
            }
            price = (float)(gen_value(g, 6) % 100000) / 100.0f;
            add_floats(&m, W_PRICE, &price, 1);
            size_t nids = (size_t)(gen_value(g, 7) % 7);
            if (gen_value(g, 8) % 5 != 0) {
                for (size_t k = 0; k < nids; k++)
                    ids[k] = (int64_t)gen_value(g, 9 + (unsigned)k);
                add_ints(&m, W_IDS, ids, nids);
                size_t nw = gen_value(g, 20) % 13 == 0 ? nids + 1 : nids;
                for (size_t k = 0; k < nw; k++)
                    weights[k] = (float)(gen_value(g, 21 + (unsigned)k) % 1000) / 250.0f;
                if (nw > 0 || gen_value(g, 28) % 2 == 0)
                    add_floats(&m, W_IDS_W, weights, nw);
            }
            if (gen_value(g, 29) % 9 != 0) {
                size_t nh = (size_t)(gen_value(g, 30) % 11);
                for (size_t k = 0; k < nh; k++)
                    hist[k] = (int64_t)(gen_value(g, 31 + (unsigned)k) % 100000) - 50000;
                add_ints(&m, W_HIST, hist, nh);
            }
            Tfex__Features fs = TFEX__FEATURES__INIT;
            fs.n_feature = m.n;
            fs.feature = m.entp;
            Tfex__Example ex = TFEX__EXAMPLE__INIT;
            ex.features = &fs;
            size_t len = tfex__example__get_packed_size(&ex);
            if (len > cap) {
                free(buf);
                cap = 2 * len;
                buf = xcalloc(cap, 1);
            }
            tfex__example__pack(&ex, buf);
            write_frame(f, path, buf, len);
        }
        if (fclose(f) != 0)
            die("%s: write error", path);
        free(path);
    }
    free(buf);
}

static void usage(FILE *out)
{
    fputs("usage: dpp-refsum --spec SPEC.json --table DIR [--rank R] [--check ACTUAL.jsonl]\n"
          "                  [--skip-corrupt]\n"
          "       dpp-refsum --spec SPEC.json --table DIR --rejected [--skip-corrupt]\n"
          "       dpp-refsum --write-table DIR --rows N --files F\n"
          "Computes the per-epoch totals dppctl read --output json should report for one\n"
          "rank, from the table's files alone. With --check, compares them with a file of\n"
          "dppctl's output lines: exit 0 when they match, 1 on a mismatch, 2 on an error.\n"
          "--skip-corrupt skips records whose payload CRC fails instead of stopping, and\n"
          "drops a file's broken tail (the file ends inside a record, or a length CRC\n"
          "fails): the file's records are the whole ones before it. A spec that sets\n"
          "\"on_corrupt\" decides this itself. When a sparse feature has weights, the\n"
          "lines also carry sparse_weights_sum.\n"
          "--rejected prints the number of records the whole session rejects, every rank\n"
          "and every epoch: records with a per-record error or a bad payload CRC (each\n"
          "epoch), plus one per broken file tail (found once, when the file is indexed).\n"
          "--write-table writes F files DIR/part-NNNNN.tfrecord of N records each with\n"
          "features dpp-gen does not write: a 4-float \"emb\" (sometimes absent or short),\n"
          "weighted \"ids\" with \"ids_w\", \"hist\", \"price\", \"label\" and \"row_id\".\n",
          out);
}

typedef struct table_files {
    strvec_t paths;
    char **rel; /* relative to the table's real path, as the master makes them */
} table_files_t;

/* One epoch of one rank over every file. */
static void walk_rank(const ref_spec_t *spec, const table_files_t *tf, long rank, int skip_corrupt,
                      totals_t *t)
{
    memset(t, 0, sizeof(*t));
    scratch_t scratch;
    scratch_init(&scratch, spec);
    uint64_t total = 0;
    for (size_t i = 0; i < tf->paths.n; i++)
        total += count_records(tf->paths.v[i]);
    uint64_t n = (uint64_t)spec->consumers, r = (uint64_t)rank;
    uint64_t lo = r * (total / n) + (r < total % n ? r : total % n);
    split_walk_t walk = {.lo = lo, .hi = lo + total / n + (r < total % n ? 1 : 0)};
    for (size_t i = 0; i < tf->paths.n; i++)
        scan_file(tf->paths.v[i], tf->rel[i], spec, t, skip_corrupt, &walk, &scratch);
    scratch_free(&scratch, spec);
}

static uint64_t parse_count(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s || s[0] == '-' || v == 0)
        die("%s: not a positive number: %s", opt, s);
    return (uint64_t)v;
}

int main(int argc, char **argv)
{
    const char *spec_file = NULL, *table_dir = NULL, *check = NULL, *write_dir = NULL;
    long rank = 0;
    int skip_corrupt = 0, rejected = 0;
    uint64_t write_rows = 0, write_files = 1;
    static const struct option longopts[] = {
        {"spec", required_argument, NULL, 's'},
        {"table", required_argument, NULL, 't'},
        {"rank", required_argument, NULL, 'r'},
        {"check", required_argument, NULL, 'c'},
        {"skip-corrupt", no_argument, NULL, 'k'},
        {"rejected", no_argument, NULL, 'j'},
        {"write-table", required_argument, NULL, 'w'},
        {"rows", required_argument, NULL, 'n'},
        {"files", required_argument, NULL, 'f'},
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
        case 't': {
            table_dir = optarg;
            /* vocabularies are relative to the data root: the table's parent */
            char *copy = strdup(optarg);
            if (!copy)
                die("out of memory");
            vocab_root = dirname(copy);
            break;
        }
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
        case 'j':
            rejected = 1;
            break;
        case 'w':
            write_dir = optarg;
            break;
        case 'n':
            write_rows = parse_count("--rows", optarg);
            break;
        case 'f':
            write_files = parse_count("--files", optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (write_dir) {
        if (spec_file || table_dir || check || rejected || !write_rows || optind != argc) {
            usage(stderr);
            return 2;
        }
        write_table(write_dir, write_rows, write_files);
        return 0;
    }
    if (!spec_file || !table_dir || optind != argc || (rejected && check)) {
        usage(stderr);
        return 2;
    }

    ref_spec_t spec;
    json_t *root = NULL;
    load_spec(spec_file, &spec, &root);
    if (rank >= spec.consumers)
        die("--rank %ld: the spec has %" PRId64 " consumer(s)", rank, spec.consumers);

    table_files_t tf = {0};
    list_table(table_dir, &spec, &tf.paths);
    /* relative paths as the master makes them: real paths below the table's */
    char *table_real = realpath(table_dir, NULL);
    if (!table_real)
        die("%s: %s", table_dir, strerror(errno));
    size_t table_len = strlen(table_real);
    tf.rel = xcalloc(tf.paths.n, sizeof(char *));
    for (size_t i = 0; i < tf.paths.n; i++) {
        char *real = realpath(tf.paths.v[i], NULL);
        if (!real)
            die("%s: %s", tf.paths.v[i], strerror(errno));
        if (strncmp(real, table_real, table_len) != 0 || real[table_len] != '/')
            die("%s: outside the table %s", real, table_real);
        tf.rel[i] = strdup(real + table_len + 1);
        if (!tf.rel[i])
            die("out of memory");
        free(real);
    }
    free(table_real);
    if (spec.on_corrupt >= 0)
        skip_corrupt = spec.on_corrupt;

    int rc = 0;
    totals_t t;
    if (rejected) {
        int64_t per_epoch = 0, tails = 0, gaps = 0;
        for (long r = 0; r < (long)spec.consumers; r++) {
            walk_rank(&spec, &tf, r, skip_corrupt, &t);
            per_epoch += t.skipped;
            tails = t.tails; /* the same for every rank */
            gaps = t.gaps;
        }
        printf("%" PRId64 "\n", (per_epoch + gaps) * spec.epochs + tails);
    } else {
        walk_rank(&spec, &tf, rank, skip_corrupt, &t);
        /* The client hands out batches of exactly batch_size rows, cut
         * across split boundaries; with remainder "keep" the last one of an
         * epoch is smaller. */
        t.batches = (t.rows + spec.batch_size - 1) / spec.batch_size;
        if (t.skipped)
            fprintf(stderr, "refsum: %" PRId64 " records skipped (per-record errors)\n", t.skipped);
        if (t.tails)
            fprintf(stderr, "refsum: %" PRId64 " broken file tails dropped\n", t.tails);
        if (t.gaps)
            fprintf(stderr, "refsum: %" PRId64 " gaps in the framing passed over\n", t.gaps);
        if (t.filtered)
            fprintf(stderr, "refsum: %" PRId64 " rows filtered out\n", t.filtered);
        if (check) {
            rc = check_file(check, spec.epochs, &t, spec.weighted);
        } else {
            for (int64_t e = 0; e < spec.epochs; e++)
                print_expected(stdout, e, &t, spec.weighted);
        }
    }
    for (size_t i = 0; i < tf.paths.n; i++) {
        free(tf.paths.v[i]);
        free(tf.rel[i]);
    }
    free(tf.paths.v);
    free(tf.rel);
    for (size_t i = 0; i < spec.ndense; i++) {
        for (size_t k = 0; k < spec.dense[i].nops; k++)
            free(spec.dense[i].ops[k].boundaries);
        free(spec.dense[i].ops);
    }
    for (size_t i = 0; i < spec.nsparse; i++) {
        for (size_t k = 0; k < spec.sparse[i].nops; k++) {
            free(spec.sparse[i].ops[k].text);
            free(spec.sparse[i].ops[k].lines);
        }
        free(spec.sparse[i].ops);
    }
    free(spec.dense);
    free(spec.sparse);
    free(spec.filters);
    free(spec.partitions);
    json_decref(root);
    return rc;
}
