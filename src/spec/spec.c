// SPDX-License-Identifier: Apache-2.0
// Session spec v1: JSON (jansson) to dpp_spec_t with validation that names the
// JSON path of every problem, and back to a normalised JSON text.
#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dpp/error.h"
#include "format/block.h"
#include "base/nearest.h"
#include "spec/spec.h"
#include "spec/table.h"
#include "spec/transform.h"

#define MAX_BATCH_SIZE 1048576
#define MAX_EPOCHS 1000000
#define MAX_SPLIT_ROWS INT32_MAX
#define MAX_COMPRESSION_LEVEL 19
#define MAX_TRUNCATE_LEN INT32_MAX /* sparse lengths travel as int32 */

/* Where the parser is in the document: a chain of stack frames, formatted
 * only when an error is reported. */
typedef struct jpath {
    const struct jpath *parent; /* NULL at the top level */
    const char *key;            /* member name, or NULL for an array index */
    size_t index;
} jpath_t;

typedef struct parser {
    char *err; /* the first problem */
    size_t errlen;
    unsigned nerrors;
    void (*report)(void *arg, const char *problem); /* every problem, or NULL */
    void *report_arg;
    json_t *names; /* feature names seen so far, used as a set */
    /* a mixture's source (parse_mixture): problems in its own keys are
     * named "sources[i].KEY"; the others (in the mixture's shared keys)
     * with quiet 1 are only counted (source 0 reported them), with 2 named
     * "sources[i]: KEY" (they are this source's: its format's), with 0 as
     * they are */
    const char *prefix;
    int quiet;
} parser_t;

/* The keys a mixture's source sets for itself (docs/spec.md#mixtures). */
static const char *const source_keys[] = {"table", "weight", "format", "partitions", "filters",
                                          "text", "pins", NULL};

/* After a problem in one part of the spec, the parse goes on with the next
 * part (the next top-level key, feature, transform or filter), so that one
 * run names every problem; fail() counts them. Only an error that is not
 * the spec's own (out of memory) ends it. */
static inline int go_on(int rc)
{
    return rc == DPP_ESPEC ? 0 : rc;
}

typedef struct op_info {
    const char *name;
    dpp_op_kind_t op;
    int dense;           /* 1: dense features only, 0: sparse only */
    const char *keys[3]; /* allowed keys besides "op", NULL-terminated */
} op_info_t;

/* The first entry of a kind names it in the normalised form, so "first_x"
 * (an alias) comes after "truncate". */
static const op_info_t op_table[] = {
    {"fill_missing", DPP_OP_FILL_MISSING, 1, {"value", NULL}},
    {"clamp", DPP_OP_CLAMP, 1, {"min", "max", NULL}},
    {"log1p", DPP_OP_LOG1P, 1, {NULL}},
    {"standardize", DPP_OP_STANDARDIZE, 1, {"mean", "std", NULL}},
    {"bucketize", DPP_OP_BUCKETIZE, 1, {"boundaries", NULL}},
    {"cast", DPP_OP_CAST, 1, {"to", NULL}},
    {"modulo", DPP_OP_MODULO, 0, {"n", NULL}},
    {"hash", DPP_OP_HASH, 0, {"n", "salt", NULL}},
    {"vocab", DPP_OP_VOCAB, 0, {"file", "oov_buckets", NULL}},
    {"truncate", DPP_OP_TRUNCATE, 0, {"max_len", "keep", NULL}},
    {"first_x", DPP_OP_TRUNCATE, 0, {"x", NULL}},
};
#define NOPS (sizeof(op_table) / sizeof(op_table[0]))

static const op_info_t *op_by_kind(dpp_op_kind_t op)
{
    for (size_t i = 0; i < NOPS; i++)
        if (op_table[i].op == op)
            return &op_table[i];
    return NULL;
}

/* Names of the string-valued choices, indexed by their enum value. */
static const char *const cast_names[] = {"int", "bfloat16", "float16", NULL};
static const char *const keep_names[] = {"first", "last", NULL};
static const char *const on_corrupt_names[] = {"skip", "fail", NULL};
static const char *const remainder_names[] = {"drop", "keep", "pad", NULL};
static const char *const order_names[] = {"deterministic", "fastest", NULL};
static const char *const compression_names[] = {"auto", "off", "zstd", NULL};
static const char *const cache_names[] = {"auto", "off", NULL};

static jpath_t at_key(const jpath_t *parent, const char *key)
{
    return (jpath_t){.parent = parent, .key = key};
}

static jpath_t at_index(const jpath_t *parent, size_t index)
{
    return (jpath_t){.parent = parent, .index = index};
}

/* Appends path to buf[pos..size) as "a.b[3].c"; returns the new position,
 * which may pass size when the text is cut short. */
static size_t put_path(char *buf, size_t size, size_t pos, const jpath_t *path)
{
    int n;

    if (path->parent)
        pos = put_path(buf, size, pos, path->parent);
    if (pos >= size)
        return pos;
    if (path->key)
        n = snprintf(buf + pos, size - pos, "%s%s", path->parent ? "." : "", path->key);
    else
        n = snprintf(buf + pos, size - pos, "[%zu]", path->index);
    return n < 0 ? pos : pos + (size_t)n;
}

/* Records "<path>: <message>" (the first problem in p->err, every one to
 * p->report) and returns DPP_ESPEC. Control characters from user-supplied
 * keys and strings become '?' so that each problem stays one line. */
static int fail(parser_t *p, const jpath_t *path, const char *fmt, ...)
{
    char msg[DPP_SPEC_ERRLEN];
    size_t pos = 0;
    if (p->prefix) {
        const jpath_t *top = path;
        while (top->parent)
            top = top->parent;
        int own = 0;
        for (const char *const *k = source_keys; top->key && *k; k++)
            own |= strcmp(top->key, *k) == 0;
        if (!own && p->quiet == 1) {
            p->nerrors++;
            return DPP_ESPEC;
        }
        if (own || p->quiet == 2)
            pos = (size_t)snprintf(msg, sizeof msg, own ? "%s." : "%s: ", p->prefix);
    }
    pos = put_path(msg, sizeof msg, pos, path);
    if (pos + 2 < sizeof msg) {
        memcpy(msg + pos, ": ", 3);
        pos += 2;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg + pos, sizeof msg - pos, fmt, ap);
        va_end(ap);
    }
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    if (p->nerrors++ == 0 && p->err && p->errlen)
        snprintf(p->err, p->errlen, "%s", msg);
    if (p->report)
        p->report(p->report_arg, msg);
    return DPP_ESPEC;
}

/* Rejects every key of obj that is neither in allowed (NULL-terminated)
 * nor `also`, in document order (jansson keeps insertion order). */
static int check_keys(parser_t *p, const jpath_t *path, json_t *obj, const char *const *allowed,
                      const char *also)
{
    int rc = 0;
    for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
        const char *key = json_object_iter_key(it);
        int known = also && strcmp(key, also) == 0;
        for (const char *const *a = allowed; !known && *a; a++)
            known = strcmp(key, *a) == 0;
        if (!known) {
            jpath_t kp = at_key(path, key);
            const char *keys[40];
            size_t n = 0;
            for (const char *const *a = allowed; *a && n < 38; a++)
                keys[n++] = *a;
            if (also)
                keys[n++] = also;
            keys[n] = NULL;
            char hint[512];
            rc = fail(p, &kp, "unknown key%s",
                      dpp_suggest(hint, sizeof hint, key, keys, n, "keys here", 12));
        }
    }
    return rc;
}

/* Reads an integer member within [min, max]. *found says whether it was
 * present; *out is untouched when it is absent. */
static int get_int(parser_t *p, const jpath_t *path, json_t *obj, const char *key, int required,
                   int64_t min, int64_t max, int64_t *out, int *found)
{
    jpath_t kp = at_key(path, key);
    json_t *v = json_object_get(obj, key);
    *found = v != NULL;
    if (!v)
        return required ? fail(p, &kp, "required") : 0;
    if (!json_is_integer(v))
        return fail(p, &kp, "expected an integer");
    json_int_t x = json_integer_value(v);
    if (x < min && min == 1)
        return fail(p, &kp, "must be > 0");
    if (x < min)
        return fail(p, &kp, "must be >= %lld", (long long)min);
    if (x > max)
        return fail(p, &kp, "must be <= %lld", (long long)max);
    *out = x;
    return 0;
}

/* Reads a number (JSON integer or real). Values reach the trainer as floats,
 * so anything beyond the float range is rejected rather than turned into an
 * infinity. JSON itself has no NaN or infinity. */
static int get_number(parser_t *p, const jpath_t *path, json_t *obj, const char *key, int required,
                      double *out, int *found)
{
    jpath_t kp = at_key(path, key);
    json_t *v = json_object_get(obj, key);
    *found = v != NULL;
    if (!v)
        return required ? fail(p, &kp, "required") : 0;
    if (!json_is_number(v))
        return fail(p, &kp, "expected a number");
    double x = json_number_value(v);
    if (!isfinite(x) || fabs(x) > FLT_MAX)
        return fail(p, &kp, "out of the float range");
    *out = x;
    return 0;
}

/* Reads an optional string member that must be one of names (NULL-terminated);
 * *out is its index, untouched when the member is absent. `expected` lists
 * the choices for the message, e.g. "\"skip\" or \"fail\"". */
static int get_choice(parser_t *p, const jpath_t *path, json_t *obj, const char *key, int required,
                      const char *const *names, const char *expected, int *out)
{
    jpath_t kp = at_key(path, key);
    json_t *v = json_object_get(obj, key);
    if (!v)
        return required ? fail(p, &kp, "required") : 0;
    if (!json_is_string(v))
        return fail(p, &kp, "expected a string");
    const char *s = json_string_value(v);
    for (int i = 0; names[i]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return fail(p, &kp, "unknown value \"%s\" (expected %s)", s, expected);
}

/* Returns the non-empty string member `key`, or NULL with *rc set after
 * writing the error. */
static const char *get_string(parser_t *p, const jpath_t *path, json_t *obj, const char *key,
                              int *rc)
{
    jpath_t kp = at_key(path, key);
    json_t *v = json_object_get(obj, key);
    *rc = 0;
    if (!v)
        *rc = fail(p, &kp, "required");
    else if (!json_is_string(v))
        *rc = fail(p, &kp, "expected a string");
    else if (json_string_length(v) == 0)
        *rc = fail(p, &kp, "must not be empty");
    return *rc ? NULL : json_string_value(v);
}

/* Registers a feature name; a second use of the same name is an error. */
static int add_name(parser_t *p, const jpath_t *path, const char *name)
{
    if (json_object_get(p->names, name))
        return fail(p, path, "duplicate feature name \"%s\"", name);
    if (json_object_set_new(p->names, name, json_true()) != 0)
        return -ENOMEM;
    return 0;
}

static int parse_clamp(parser_t *p, const jpath_t *path, json_t *obj, dpp_transform_t *t)
{
    int rc, has_min, has_max;

    rc = get_number(p, path, obj, "min", 0, &t->min, &has_min);
    if (rc)
        return rc;
    rc = get_number(p, path, obj, "max", 0, &t->max, &has_max);
    if (rc)
        return rc;
    if (!has_min && !has_max)
        return fail(p, path, "clamp needs \"min\" or \"max\"");
    if (t->min > t->max) {
        jpath_t kp = at_key(path, "min");
        return fail(p, &kp, "must be <= max");
    }
    return 0;
}

static int parse_standardize(parser_t *p, const jpath_t *path, json_t *obj, dpp_transform_t *t)
{
    int found;
    int rc = get_number(p, path, obj, "mean", 1, &t->mean, &found);
    if (rc)
        return rc;
    rc = get_number(p, path, obj, "std", 1, &t->std, &found);
    if (rc)
        return rc;
    if (t->std <= 0) {
        jpath_t kp = at_key(path, "std");
        return fail(p, &kp, "must be > 0");
    }
    return 0;
}

/* boundaries: a non-empty, strictly increasing array of numbers. The array
 * is owned by t as soon as it is allocated, so a failure part-way is freed
 * with the spec. */
static int parse_bucketize(parser_t *p, const jpath_t *path, json_t *obj, dpp_transform_t *t)
{
    jpath_t bp = at_key(path, "boundaries");
    json_t *list = json_object_get(obj, "boundaries");

    if (!list)
        return fail(p, &bp, "required");
    if (!json_is_array(list))
        return fail(p, &bp, "expected an array");
    size_t n = json_array_size(list);
    if (n == 0)
        return fail(p, &bp, "must not be empty");
    if (n > DPP_SPEC_MAX_BOUNDARIES)
        return fail(p, &bp, "must have at most %d entries", DPP_SPEC_MAX_BOUNDARIES);
    t->boundaries = calloc(n, sizeof(*t->boundaries));
    if (!t->boundaries)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        jpath_t ip = at_index(&bp, i);
        json_t *v = json_array_get(list, i);
        if (!json_is_number(v))
            return fail(p, &ip, "expected a number");
        double x = json_number_value(v);
        if (!isfinite(x) || fabs(x) > FLT_MAX)
            return fail(p, &ip, "out of the float range");
        /* -0.0 < 0.0 is false, so [-0.0, 0.0] is refused too */
        if (i > 0 && !(x > t->boundaries[i - 1]))
            return fail(p, &ip, "must be greater than boundaries[%zu]", i - 1);
        t->boundaries[i] = x;
        t->nboundaries = (uint32_t)(i + 1);
    }
    return 0;
}

static int parse_transform(parser_t *p, const jpath_t *path, json_t *obj, size_t index, int dense,
                           dpp_transform_t *t)
{
    jpath_t op_path = at_key(path, "op");
    int64_t x = 0;
    int rc, found;

    if (!json_is_object(obj))
        return fail(p, path, "expected an object");
    const char *name = get_string(p, path, obj, "op", &rc);
    if (!name)
        return rc;
    const op_info_t *info = NULL;
    for (size_t i = 0; i < NOPS && !info; i++)
        if (strcmp(name, op_table[i].name) == 0)
            info = &op_table[i];
    if (!info) {
        /* the ops of this kind of feature, to choose from */
        const char *ops[NOPS + 1];
        size_t n = 0;
        for (size_t i = 0; i < NOPS; i++)
            if (op_table[i].dense == dense)
                ops[n++] = op_table[i].name;
        ops[n] = NULL;
        char hint[512];
        return fail(p, &op_path, "unknown op \"%s\"%s", name,
                    dpp_suggest(hint, sizeof hint, name, ops, n,
                                dense ? "ops of dense features" : "ops of sparse features", 20));
    }
    if (info->dense != dense)
        return fail(p, &op_path, "op \"%s\" applies to %s features, not %s", name,
                    info->dense ? "dense" : "sparse", dense ? "dense" : "sparse");
    if (info->op == DPP_OP_FILL_MISSING && index > 0)
        return fail(p, &op_path, "fill_missing must be the first op");
    if (info->op == DPP_OP_VOCAB && index > 0)
        return fail(p, &op_path, "vocab turns strings into ids, so it must be the first op");
    rc = go_on(check_keys(p, path, obj, info->keys, "op"));
    if (rc)
        return rc;

    memset(t, 0, sizeof(*t));
    t->op = info->op;
    t->min = -INFINITY;
    t->max = INFINITY;
    int choice = 0;
    switch (info->op) {
    case DPP_OP_FILL_MISSING:
        return get_number(p, path, obj, "value", 1, &t->value, &found);
    case DPP_OP_CLAMP:
        return parse_clamp(p, path, obj, t);
    case DPP_OP_LOG1P:
        return 0;
    case DPP_OP_STANDARDIZE:
        return parse_standardize(p, path, obj, t);
    case DPP_OP_BUCKETIZE:
        return parse_bucketize(p, path, obj, t);
    case DPP_OP_CAST:
        rc = get_choice(p, path, obj, "to", 1, cast_names, "\"int\", \"bfloat16\" or \"float16\"",
                        &choice);
        t->cast_to = (dpp_cast_type_t)choice;
        return rc;
    case DPP_OP_MODULO:
        rc = get_int(p, path, obj, "n", 1, 1, INT64_MAX, &x, &found);
        t->n = x;
        dpp_transform_prepare(t);
        return rc;
    case DPP_OP_HASH:
        rc = get_int(p, path, obj, "n", 1, 1, INT64_MAX, &x, &found);
        t->n = x;
        x = 0;
        if (!rc)
            rc = get_int(p, path, obj, "salt", 0, INT64_MIN, INT64_MAX, &x, &found);
        t->salt = x;
        dpp_transform_prepare(t);
        return rc;
    case DPP_OP_VOCAB: {
        jpath_t fp = at_key(path, "file");
        const char *file = get_string(p, path, obj, "file", &rc);
        if (!file)
            return rc;
        if (!dpp_path_is_relative_inside(file))
            return fail(p, &fp, "\"%s\" must be a path relative to a data root, without \"..\"",
                        file);
        if ((t->file = strdup(file)) == NULL)
            return -ENOMEM;
        rc = get_int(p, path, obj, "oov_buckets", 0, 0, INT32_MAX, &x, &found);
        t->oov_buckets = x;
        return rc;
    }
    case DPP_OP_TRUNCATE:
        /* first_x {x} is truncate {max_len: x, keep: "first"} */
        if (strcmp(info->name, "first_x") == 0) {
            rc = get_int(p, path, obj, "x", 1, 1, MAX_TRUNCATE_LEN, &x, &found);
            t->max_len = (uint32_t)x;
            return rc;
        }
        rc = get_int(p, path, obj, "max_len", 1, 1, MAX_TRUNCATE_LEN, &x, &found);
        t->max_len = (uint32_t)x;
        if (!rc)
            rc = get_choice(p, path, obj, "keep", 0, keep_names, "\"first\" or \"last\"", &choice);
        t->keep_last = choice;
        return rc;
    }
    return fail(p, &op_path, "unknown op \"%s\"", name);
}

static int parse_feature(parser_t *p, const jpath_t *path, json_t *obj, int dense,
                         dpp_feature_spec_t *f)
{
    static const char *const dense_keys[] = {"name", "dim", "transforms", "optional", NULL};
    static const char *const sparse_keys[] = {"name", "weights", "transforms", "optional", NULL};
    jpath_t name_path = at_key(path, "name");
    jpath_t ops_path = at_key(path, "transforms");
    int rc, found;

    if (!json_is_object(obj))
        return fail(p, path, "expected an object");
    rc = go_on(check_keys(p, path, obj, dense ? dense_keys : sparse_keys, NULL));
    if (rc)
        return rc;
    const char *name = get_string(p, path, obj, "name", &rc);
    if (!name)
        return rc;
    rc = add_name(p, &name_path, name);
    if (rc)
        return rc;
    f->name = strdup(name);
    if (!f->name)
        return -ENOMEM;
    f->dim = 0;
    json_t *opt = json_object_get(obj, "optional");
    if (opt && !json_is_boolean(opt)) {
        jpath_t op = at_key(path, "optional");
        return fail(p, &op, "expected true or false");
    }
    f->optional = opt && json_is_true(opt);
    if (dense) {
        int64_t dim = 1;
        rc = get_int(p, path, obj, "dim", 0, 1, DPP_SPEC_MAX_DIM, &dim, &found);
        if (rc)
            return rc;
        f->dim = (unsigned)dim;
    } else if (json_object_get(obj, "weights")) {
        /* a tf.Example key like any feature's, so it shares their namespace */
        jpath_t wp = at_key(path, "weights");
        const char *weights = get_string(p, path, obj, "weights", &rc);
        if (!weights)
            return rc;
        rc = add_name(p, &wp, weights);
        if (rc)
            return rc;
        f->weights = strdup(weights);
        if (!f->weights)
            return -ENOMEM;
    }

    json_t *ops = json_object_get(obj, "transforms");
    if (!ops)
        return 0;
    if (!json_is_array(ops))
        return fail(p, &ops_path, "expected an array");
    size_t n = json_array_size(ops);
    if (n == 0)
        return 0;
    f->ops = calloc(n, sizeof(*f->ops));
    if (!f->ops)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        jpath_t op_path = at_index(&ops_path, i);
        /* counted first so that dpp_spec_close frees a half-parsed op's
         * boundaries */
        f->nops = (unsigned)(i + 1);
        rc = go_on(parse_transform(p, &op_path, json_array_get(ops, i), i, dense, &f->ops[i]));
        if (rc)
            return rc;
    }
    return 0;
}

/* Parses features.dense or features.sparse. Absent and empty are the same,
 * no features of that kind; that the two lists hold at least one feature
 * between them is the caller's check. */
static int parse_feature_list(parser_t *p, const jpath_t *features_path, json_t *features,
                              const char *key, int dense, dpp_feature_spec_t **out, unsigned *count)
{
    jpath_t list_path = at_key(features_path, key);
    json_t *list = json_object_get(features, key);

    if (!list)
        return 0;
    if (!json_is_array(list))
        return fail(p, &list_path, "expected an array");
    size_t n = json_array_size(list);
    if (n == 0)
        return 0;
    *out = calloc(n, sizeof(**out));
    if (!*out)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        jpath_t fp = at_index(&list_path, i);
        /* counted first so that dpp_spec_close frees a half-parsed feature */
        *count = (unsigned)(i + 1);
        int rc = go_on(parse_feature(p, &fp, json_array_get(list, i), dense, &(*out)[i]));
        if (rc)
            return rc;
    }
    return 0;
}

static int check_partition(parser_t *p, const jpath_t *path, json_t *v, json_t *seen)
{
    if (!json_is_string(v))
        return fail(p, path, "expected a string");
    const char *name = json_string_value(v);
    if (name[0] == '\0')
        return fail(p, path, "must not be empty");
    if (strchr(name, '/'))
        return fail(p, path, "must be a folder name, without '/'");
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return fail(p, path, "must be a folder name, not \".\" or \"..\"");
    if (json_object_get(seen, name))
        return fail(p, path, "duplicate partition \"%s\"", name);
    return json_object_set_new(seen, name, json_true()) == 0 ? 0 : -ENOMEM;
}

static int parse_partitions(parser_t *p, json_t *list, dpp_spec_t *s)
{
    jpath_t path = at_key(NULL, "partitions");
    int rc = 0;

    if (!json_is_array(list))
        return fail(p, &path, "expected an array");
    size_t n = json_array_size(list);
    if (n == 0)
        return fail(p, &path, "must not be empty (leave it out to select every partition)");
    json_t *seen = json_object();
    s->partitions = calloc(n, sizeof(*s->partitions));
    if (!seen || !s->partitions) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        jpath_t ip = at_index(&path, i);
        json_t *v = json_array_get(list, i);
        rc = check_partition(p, &ip, v, seen);
        if (rc)
            goto out;
        s->partitions[i] = strdup(json_string_value(v));
        if (!s->partitions[i]) {
            rc = -ENOMEM;
            goto out;
        }
        s->npartitions = (unsigned)(i + 1);
    }
out:
    json_decref(seen);
    return rc;
}

/* label is optional: without it s->label stays NULL and the blocks carry
 * no labels (block.h: an empty label column). */
static int parse_label(parser_t *p, json_t *root, dpp_spec_t *s)
{
    static const char *const keys[] = {"name", NULL};
    jpath_t path = at_key(NULL, "label");
    jpath_t name_path = at_key(&path, "name");
    int rc;

    json_t *label = json_object_get(root, "label");
    if (!label)
        return 0;
    if (!json_is_object(label))
        return fail(p, &path, "expected an object");
    rc = go_on(check_keys(p, &path, label, keys, NULL));
    if (rc)
        return rc;
    const char *name = get_string(p, &path, label, "name", &rc);
    if (!name)
        return rc;
    rc = add_name(p, &name_path, name);
    if (rc)
        return rc;
    s->label = strdup(name);
    return s->label ? 0 : -ENOMEM;
}

static int parse_filter(parser_t *p, const jpath_t *path, json_t *obj, const char *label,
                        dpp_filter_t *f)
{
    static const char *const require_keys[] = {"feature", NULL};
    static const char *const sample_keys[] = {"p", "seed", "label", NULL};
    jpath_t op_path = at_key(path, "op");
    int rc, found;

    if (!json_is_object(obj))
        return fail(p, path, "expected an object");
    const char *op = get_string(p, path, obj, "op", &rc);
    if (!op)
        return rc;
    if (strcmp(op, "require") == 0) {
        f->kind = DPP_FILTER_REQUIRE;
        rc = go_on(check_keys(p, path, obj, require_keys, "op"));
        if (rc)
            return rc;
        const char *name = get_string(p, path, obj, "feature", &rc);
        if (!name)
            return rc;
        /* the worker decodes only the spec's names, so only those can be
         * required */
        if (!json_object_get(p->names, name)) {
            jpath_t fp = at_key(path, "feature");
            return fail(p, &fp, "no feature \"%s\" in the spec", name);
        }
        f->feature = strdup(name);
        return f->feature ? 0 : -ENOMEM;
    }
    if (strcmp(op, "sample") == 0) {
        f->kind = DPP_FILTER_SAMPLE;
        rc = go_on(check_keys(p, path, obj, sample_keys, "op"));
        if (rc)
            return rc;
        rc = get_number(p, path, obj, "p", 1, &f->p, &found);
        if (rc)
            return rc;
        if (!(f->p >= 0 && f->p <= 1)) {
            jpath_t pp = at_key(path, "p");
            return fail(p, &pp, "must be between 0 and 1");
        }
        int64_t seed = 0;
        rc = get_int(p, path, obj, "seed", 0, INT64_MIN, INT64_MAX, &seed, &found);
        if (rc)
            return rc;
        f->seed = seed;
        rc = get_number(p, path, obj, "label", 0, &f->label, &f->has_label);
        if (rc)
            return rc;
        if (f->has_label && !label) {
            jpath_t lp = at_key(path, "label");
            return fail(p, &lp,
                        "the spec has no label to compare with: give it one "
                        "(\"label\": {\"name\": ...}) or sample every row (leave "
                        "this key out)");
        }
        dpp_filter_prepare(f);
        return 0;
    }
    return fail(p, &op_path, "unknown filter \"%s\"", op);
}

static int parse_filters(parser_t *p, json_t *list, dpp_spec_t *s)
{
    jpath_t path = at_key(NULL, "filters");

    if (!json_is_array(list))
        return fail(p, &path, "expected an array");
    size_t n = json_array_size(list);
    if (n == 0)
        return 0;
    if (n > DPP_SPEC_MAX_FILTERS)
        return fail(p, &path, "must have at most %d entries", DPP_SPEC_MAX_FILTERS);
    s->filters = calloc(n, sizeof(*s->filters));
    if (!s->filters)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        jpath_t ip = at_index(&path, i);
        s->nfilters = (unsigned)(i + 1); /* so that a half-parsed one is freed */
        int rc = go_on(parse_filter(p, &ip, json_array_get(list, i), s->label, &s->filters[i]));
        if (rc)
            return rc;
    }
    return 0;
}

/* split_rows, on_corrupt, compression and compression_level: how the data
 * is read and shipped, not what it becomes. */
/* shuffle: false (default), true (seed 0) or {"seed": N}. */
static int parse_shuffle(parser_t *p, json_t *root, dpp_spec_t *s)
{
    static const char *const shuffle_keys[] = {"seed", NULL};
    jpath_t kp = at_key(NULL, "shuffle");
    json_t *v = json_object_get(root, "shuffle");
    if (v == NULL || json_is_false(v))
        return 0;
    s->shuffle = 1;
    if (json_is_true(v))
        return 0;
    if (!json_is_object(v))
        return fail(p, &kp, "expected false, true or an object {\"seed\": N}");
    int rc = go_on(check_keys(p, &kp, v, shuffle_keys, NULL));
    if (rc)
        return rc;
    int found;
    return get_int(p, &kp, v, "seed", 1, INT64_MIN, INT64_MAX, &s->shuffle_seed, &found);
}

static int parse_io_keys(parser_t *p, json_t *root, dpp_spec_t *s)
{
    int64_t x = DPP_SPEC_DEFAULT_SPLIT_ROWS;
    int rc, found, choice = 0;

    rc = get_int(p, NULL, root, "split_rows", 0, 1, MAX_SPLIT_ROWS, &x, &found);
    if (rc)
        return rc;
    s->split_rows = (unsigned)x;
    /* a year: long enough for any job, short enough that ms fit everywhere */
    s->idle_timeout_s = DPP_SPEC_IDLE_DEFAULT;
    rc = get_int(p, NULL, root, "idle_timeout_s", 0, 0, 366 * 86400, &s->idle_timeout_s, &found);
    if (rc)
        return rc;
    if (!found)
        s->idle_timeout_s = DPP_SPEC_IDLE_DEFAULT;
    s->max_reject_ratio = DPP_SPEC_DEFAULT_REJECT_RATIO;
    rc = get_number(p, NULL, root, "max_reject_ratio", 0, &s->max_reject_ratio, &found);
    if (rc)
        return rc;
    if (found && !(s->max_reject_ratio >= 0 && s->max_reject_ratio <= 1)) {
        jpath_t rp = at_key(NULL, "max_reject_ratio");
        return fail(p, &rp, "must be from 0 (no record may be rejected) to 1 (any share)");
    }
    rc = get_choice(p, NULL, root, "format", 0, dpp_format_names, dpp_format_list(), &choice);
    if (rc)
        return rc;
    s->format = (dpp_format_t)choice;
    choice = 0;
    rc = get_choice(p, NULL, root, "on_corrupt", 0, on_corrupt_names, "\"skip\" or \"fail\"",
                    &choice);
    if (rc)
        return rc;
    s->on_corrupt_fail = choice;
    choice = 0;
    rc = get_choice(p, NULL, root, "compression", 0, compression_names,
                    "\"auto\", \"off\" or \"zstd\"", &choice);
    if (rc)
        return rc;
    s->compression = (dpp_compression_t)choice;
    x = 1;
    rc = get_int(p, NULL, root, "compression_level", 0, 1, MAX_COMPRESSION_LEVEL, &x, &found);
    if (rc)
        return rc;
    s->compression_level = (int)x;
    choice = 0;
    rc = get_choice(p, NULL, root, "remainder", 0, remainder_names, "\"drop\", \"keep\" or \"pad\"",
                    &choice);
    if (rc)
        return rc;
    s->remainder = (dpp_remainder_t)choice;
    choice = 0;
    rc = get_choice(p, NULL, root, "order", 0, order_names, "\"deterministic\" or \"fastest\"",
                    &choice);
    if (rc)
        return rc;
    s->order_fastest = choice;
    choice = 0;
    rc = get_choice(p, NULL, root, "cache", 0, cache_names, "\"auto\" or \"off\"", &choice);
    if (rc)
        return rc;
    s->cache_off = choice;
    return parse_shuffle(p, root, s);
}

/* Refuses JSON nested deeper than DPP_SPEC_MAX_DEPTH before the parser
 * recurses into it: a spec needs six levels, and a deep document is an
 * attack on the parser's stack, not a spec. */
static int check_depth(parser_t *p, const char *json, size_t len)
{
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > DPP_SPEC_MAX_DEPTH) {
                jpath_t rp = at_key(NULL, "(root)");
                return fail(p, &rp, "nested deeper than %d levels", DPP_SPEC_MAX_DEPTH);
            }
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}

/* ---- text sessions (format "jsonl", "text", or "parquet" with "text") ----- */

static const char *const pack_names[] = {"concat", "best_fit", NULL};
static const char *const unit_names[] = {"line", "file", NULL};
static const char *const tokenizer_kinds[] = {"tiktoken", "huggingface", "sentencepiece", NULL};

/* An optional special-token name: absent leaves *out at dflt, null is none. */
static int get_special(parser_t *p, const jpath_t *path, json_t *obj, const char *key,
                       const char *dflt, char **out)
{
    jpath_t kp = at_key(path, key);
    json_t *v = json_object_get(obj, key);
    const char *name = dflt;
    if (v && json_is_null(v))
        name = NULL;
    else if (v && (!json_is_string(v) || json_string_length(v) == 0))
        return fail(p, &kp, "expected the name of a special token (e.g. \"<|endoftext|>\") or null");
    else if (v)
        name = json_string_value(v);
    if (name && (*out = strdup(name)) == NULL)
        return -ENOMEM;
    return 0;
}

static int parse_text_docs(parser_t *p, json_t *root, dpp_format_t format, dpp_text_spec_t *t)
{
    static const char *const keys[] = {"field", "min_bytes", "max_bytes", "where", NULL};
    static const char *const plain_keys[] = {"unit", "min_bytes", "max_bytes", NULL};
    jpath_t path = at_key(NULL, "text");
    json_t *obj = json_object_get(root, "text");
    int rc, found;
    const char *field = "text";
    t->max_bytes = UINT64_MAX;
    if (obj) {
        if (!json_is_object(obj))
            return fail(p, &path, "expected an object");
        if (format == DPP_FORMAT_TEXT) {
            /* a plain text document has no fields to name or match */
            static const char *const json_only[] = {"field", "where", NULL};
            for (const char *const *k = json_only; *k; k++) {
                if (json_object_get(obj, *k)) {
                    jpath_t kp = at_key(&path, *k);
                    return fail(p, &kp, "format \"text\" reads plain text, a document per "
                                        "line or per file (\"unit\"), which has no fields; "
                                        "\"%s\" applies to \"jsonl\" and \"parquet\"",
                                *k);
                }
            }
        }
        if ((rc = check_keys(p, &path, obj, format == DPP_FORMAT_TEXT ? plain_keys : keys,
                             NULL)) != 0)
            return rc;
        int unit = DPP_TEXT_UNIT_LINE;
        if ((rc = get_choice(p, &path, obj, "unit", 0, unit_names, "\"line\" or \"file\"",
                             &unit)) != 0)
            return rc;
        t->unit = (dpp_text_unit_t)unit;
        if (json_object_get(obj, "field") && !(field = get_string(p, &path, obj, "field", &rc)))
            return rc;
        int64_t x = 0;
        if ((rc = get_int(p, &path, obj, "min_bytes", 0, 0, INT64_MAX, &x, &found)) != 0)
            return rc;
        t->min_bytes = (uint64_t)x;
        if ((rc = get_int(p, &path, obj, "max_bytes", 0, 1, INT64_MAX, &x, &found)) != 0)
            return rc;
        if (found)
            t->max_bytes = (uint64_t)x;
        if (t->max_bytes < t->min_bytes) {
            jpath_t kp = at_key(&path, "max_bytes");
            return fail(p, &kp, "is below min_bytes (%llu): no document could pass",
                        (unsigned long long)t->min_bytes);
        }
        json_t *where = json_object_get(obj, "where");
        if (where) {
            jpath_t wp = at_key(&path, "where");
            if (!json_is_object(where) || json_object_size(where) == 0)
                return fail(p, &wp, "expected an object of field: string value, e.g. "
                                    "{\"lang\": \"en\"}");
            if (json_object_size(where) > DPP_TEXT_MAX_WHERE)
                return fail(p, &wp, "%zu fields, more than %d", json_object_size(where),
                            DPP_TEXT_MAX_WHERE);
            size_t n = json_object_size(where);
            t->where_keys = calloc(n, sizeof *t->where_keys);
            t->where_values = calloc(n, sizeof *t->where_values);
            if (!t->where_keys || !t->where_values)
                return -ENOMEM;
            for (void *it = json_object_iter(where); it; it = json_object_iter_next(where, it)) {
                const char *key = json_object_iter_key(it);
                json_t *v = json_object_iter_value(it);
                jpath_t kp = at_key(&wp, key);
                if (!json_is_string(v))
                    return fail(p, &kp, "expected a string (a document passes when its field "
                                        "\"%s\" is this string)", key);
                if (key[0] == '\0')
                    return fail(p, &kp, "a field name must not be empty");
                unsigned w = t->nwhere++;
                t->where_keys[w] = strdup(key);
                t->where_values[w] = strdup(json_string_value(v));
                if (!t->where_keys[w] || !t->where_values[w])
                    return -ENOMEM;
            }
        }
    }
    t->field = strdup(field);
    return t->field ? 0 : -ENOMEM;
}

static int parse_tokenizer(parser_t *p, json_t *root, dpp_text_spec_t *t)
{
    static const char *const keys[] = {"file", "kind", "pattern", "specials", NULL};
    jpath_t path = at_key(NULL, "tokenizer");
    json_t *obj = json_object_get(root, "tokenizer");
    int rc;
    if (!obj)
        return fail(p, &path, "required for a text session: {\"file\": \"<a tiktoken rank file, "
                              "tokenizer.json or SentencePiece .model under a data root>\", "
                              "...}");
    if (!json_is_object(obj))
        return fail(p, &path, "expected an object");
    if ((rc = check_keys(p, &path, obj, keys, NULL)) != 0)
        return rc;
    const char *file = get_string(p, &path, obj, "file", &rc);
    if (!file)
        return rc;
    jpath_t fp = at_key(&path, "file");
    if (!dpp_path_is_relative_inside(file))
        return fail(p, &fp, "must be a relative path inside a data root");
    size_t fl = strlen(file);
    int kind = fl > 5 && strcmp(file + fl - 5, ".json") == 0    ? DPP_TOKENIZER_HUGGINGFACE
               : fl > 6 && strcmp(file + fl - 6, ".model") == 0 ? DPP_TOKENIZER_SENTENCEPIECE
                                                               : DPP_TOKENIZER_TIKTOKEN;
    if ((rc = get_choice(p, &path, obj, "kind", 0, tokenizer_kinds,
                         "\"tiktoken\", \"huggingface\" or \"sentencepiece\"", &kind)) != 0)
        return rc;
    t->tokenizer_kind = (dpp_tokenizer_kind_t)kind;
    if ((t->tokenizer_file = strdup(file)) == NULL)
        return -ENOMEM;
    json_t *pat = json_object_get(obj, "pattern");
    json_t *specials = json_object_get(obj, "specials");
    jpath_t pp = at_key(&path, "pattern");
    if (t->tokenizer_kind != DPP_TOKENIZER_TIKTOKEN) {
        const char *what = t->tokenizer_kind == DPP_TOKENIZER_HUGGINGFACE
                               ? "a Hugging Face tokenizer.json"
                               : "a SentencePiece model";
        if (pat)
            return fail(p, &pp, "%s has its own pattern; leave it out", what);
        if (specials) {
            jpath_t sp = at_key(&path, "specials");
            return fail(p, &sp, "%s names its special tokens itself (%s); leave it out", what,
                        t->tokenizer_kind == DPP_TOKENIZER_HUGGINGFACE ? "added_tokens"
                                                                       : "control pieces");
        }
        return 0;
    }
    if (!json_is_string(pat) || json_string_length(pat) == 0)
        return fail(p, &pp, "%s: the tiktoken encoding whose split pattern applies, "
                            "\"cl100k_base\" or \"o200k_base\"",
                    !pat ? "required" : json_is_string(pat) ? "must not be empty"
                                                            : "expected a string");
    const char *name = json_string_value(pat);
    /* the encodings src/text/bpe.c has patterns for (spec sits below text) */
    static const char *const known[] = {"cl100k_base", "o200k_base", NULL};
    if (strcmp(name, known[0]) != 0 && strcmp(name, known[1]) != 0) {
        char hint[256];
        return fail(p, &pp, "unknown encoding \"%s\"%s", name,
                    dpp_suggest(hint, sizeof hint, name, known, 2, "encodings", 4));
    }
    if ((t->pattern = strdup(name)) == NULL)
        return -ENOMEM;
    if (specials) {
        jpath_t sp = at_key(&path, "specials");
        if (!json_is_object(specials) || json_object_size(specials) > DPP_TEXT_MAX_SPECIALS)
            return fail(p, &sp, "expected an object of at most %d name: id pairs, e.g. "
                                "{\"<|endoftext|>\": 100257}", DPP_TEXT_MAX_SPECIALS);
        size_t n = json_object_size(specials);
        t->special_names = calloc(n ? n : 1, sizeof *t->special_names);
        t->special_ids = calloc(n ? n : 1, sizeof *t->special_ids);
        if (!t->special_names || !t->special_ids)
            return -ENOMEM;
        for (void *it = json_object_iter(specials); it;
             it = json_object_iter_next(specials, it)) {
            const char *key = json_object_iter_key(it);
            json_t *v = json_object_iter_value(it);
            jpath_t kp = at_key(&sp, key);
            if (key[0] == '\0')
                return fail(p, &kp, "a special token's name must not be empty");
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT32_MAX)
                return fail(p, &kp, "expected the token's id, an integer from 0 to %d",
                            INT32_MAX);
            t->special_ids[t->nspecials] = json_integer_value(v);
            if ((t->special_names[t->nspecials++] = strdup(key)) == NULL)
                return -ENOMEM;
        }
    }
    return 0;
}

static int parse_sequence(parser_t *p, json_t *root, dpp_text_spec_t *t)
{
    static const char *const keys[] = {"length", "pack", "eos", "bos", "window", NULL};
    jpath_t path = at_key(NULL, "sequence");
    json_t *obj = json_object_get(root, "sequence");
    int rc, found, choice = 0;
    if (!obj)
        return fail(p, &path, "required for a text session: {\"length\": <tokens per "
                              "sequence>, \"pack\": \"concat\" or \"best_fit\"}");
    if (!json_is_object(obj))
        return fail(p, &path, "expected an object");
    if ((rc = check_keys(p, &path, obj, keys, NULL)) != 0)
        return rc;
    int64_t x = 0;
    if ((rc = get_int(p, &path, obj, "length", 1, 1, DPP_TEXT_MAX_LENGTH, &x, &found)) != 0)
        return rc;
    t->length = (unsigned)x;
    if ((rc = get_choice(p, &path, obj, "pack", 0, pack_names, "\"concat\" or \"best_fit\"",
                         &choice)) != 0)
        return rc;
    t->pack = (dpp_pack_kind_t)choice;
    x = DPP_TEXT_DEFAULT_WINDOW;
    if ((rc = get_int(p, &path, obj, "window", 0, 1, 1 << 20, &x, &found)) != 0)
        return rc;
    if (found && t->pack != DPP_PACK_KIND_BEST_FIT) {
        jpath_t wp = at_key(&path, "window");
        return fail(p, &wp, "applies to \"pack\": \"best_fit\" only");
    }
    t->window = (unsigned)x;
    /* SentencePiece models end a text with their "</s>" control piece */
    const char *eos = t->tokenizer_kind == DPP_TOKENIZER_SENTENCEPIECE ? "</s>" : "<|endoftext|>";
    if ((rc = get_special(p, &path, obj, "eos", eos, &t->eos)) != 0)
        return rc;
    return get_special(p, &path, obj, "bos", NULL, &t->bos);
}

/* A text session's columns, as the sparse features and label every layer
 * above the source knows how to move. */
static int text_columns(dpp_spec_t *s)
{
    static const char *const names[] = DPP_TEXT_COLUMNS;
    s->sparse = calloc(DPP_TEXT_NCOLUMNS, sizeof *s->sparse);
    if (!s->sparse)
        return -ENOMEM;
    for (unsigned k = 0; k < DPP_TEXT_NCOLUMNS; k++) {
        if ((s->sparse[k].name = strdup(names[k])) == NULL)
            return -ENOMEM;
        s->nsparse = k + 1;
    }
    s->label = strdup(DPP_TEXT_LABEL);
    return s->label ? 0 : -ENOMEM;
}

static int parse_text(parser_t *p, json_t *root, dpp_spec_t *s)
{
    static const char *const row_keys[] = {"features", "label", "filters", NULL};
    for (const char *const *k = row_keys; *k; k++) {
        if (json_object_get(root, *k)) {
            jpath_t kp = at_key(NULL, *k);
            return fail(p, &kp, "a text session (format \"%s\"%s) has no %s: its batches are "
                                "input_ids, labels, position_ids and cu_seqlens; choose "
                                "documents with \"text\" (%s)",
                        dpp_format_names[s->format],
                        s->format == DPP_FORMAT_PARQUET ? " with a \"text\" section" : "", *k,
                        s->format == DPP_FORMAT_TEXT ? "unit, min_bytes, max_bytes"
                                                     : "field, min_bytes, max_bytes, where");
        }
    }
    if ((s->text = calloc(1, sizeof *s->text)) == NULL)
        return -ENOMEM;
    int rc = parse_text_docs(p, root, s->format, s->text);
    if (rc == 0)
        rc = parse_tokenizer(p, root, s->text);
    if (rc == 0)
        rc = parse_sequence(p, root, s->text);
    if (rc)
        return rc;
    /* per row: the label, four lengths, and at most 4 x length + 1 ids */
    uint64_t row_bytes = 4 + 16 + 8 * (4 * (uint64_t)s->text->length + 1);
    if (row_bytes * s->batch_size > DPP_BLOCK_MAX_BYTES) {
        jpath_t bp = at_key(NULL, "batch_size");
        return fail(p, &bp,
                    "%u sequences of %u tokens may take %llu MiB, over the %u MiB a block may "
                    "hold: at most %llu sequences per batch (or shorter sequences)",
                    s->batch_size, s->text->length,
                    (unsigned long long)((row_bytes * s->batch_size) >> 20),
                    DPP_BLOCK_MAX_BYTES >> 20, (unsigned long long)(DPP_BLOCK_MAX_BYTES / row_bytes));
    }
    return text_columns(s);
}

#define MAX_SIDE_FILES 64  /* a tokenizer and the vocabularies of the features */
#define MAX_PIN_VERSION 191 /* storage/file_version.h: DPP_FILE_VERSION_MAX - 1 */

size_t dpp_spec_side_files(const dpp_spec_t *spec, const char **files, size_t cap)
{
    size_t n = 0;
    if (spec->text) {
        if (cap > 0)
            files[0] = spec->text->tokenizer_file;
        n = 1;
    }
    for (int kind = 0; kind < 2; kind++) {
        const dpp_feature_spec_t *f = kind ? spec->sparse : spec->dense;
        unsigned nf = kind ? spec->nsparse : spec->ndense;
        for (unsigned i = 0; i < nf; i++)
            for (unsigned j = 0; j < f[i].nops; j++) {
                const char *file = f[i].ops[j].op == DPP_OP_VOCAB ? f[i].ops[j].file : NULL;
                int seen = file == NULL;
                for (size_t k = 0; !seen && k < n && k < cap; k++)
                    seen = strcmp(files[k], file) == 0;
                if (seen)
                    continue;
                if (n < cap)
                    files[n] = file;
                n++;
            }
    }
    return n;
}

const char *dpp_spec_pin(const dpp_spec_t *spec, const char *file)
{
    for (unsigned i = 0; i < spec->npins; i++)
        if (strcmp(spec->pin_files[i], file) == 0)
            return spec->pin_versions[i];
    return NULL;
}

int dpp_spec_set_pin(dpp_spec_t *spec, const char *file, const char *version)
{
    char *v = strdup(version);
    if (v == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < spec->npins; i++)
        if (strcmp(spec->pin_files[i], file) == 0) {
            free(spec->pin_versions[i]);
            spec->pin_versions[i] = v;
            return 0;
        }
    char *f = strdup(file);
    char **pf = realloc(spec->pin_files, (spec->npins + 1) * sizeof *pf);
    if (pf != NULL)
        spec->pin_files = pf;
    char **pv = pf ? realloc(spec->pin_versions, (spec->npins + 1) * sizeof *pv) : NULL;
    if (pv != NULL)
        spec->pin_versions = pv;
    if (f == NULL || pv == NULL) {
        free(f);
        free(v);
        return -ENOMEM;
    }
    spec->pin_files[spec->npins] = f;
    spec->pin_versions[spec->npins++] = v;
    return 0;
}

/* "pins": {"FILE": "VERSION", ...}, each FILE one the spec names beside its
 * table. The master sets them at submit; a spec that gives one demands
 * that version. */
static int parse_pins(parser_t *p, json_t *root, dpp_spec_t *s)
{
    jpath_t path = at_key(NULL, "pins");
    json_t *obj = json_object_get(root, "pins");
    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return fail(p, &path, "expected an object of file: version (set by the master)");
    const char *files[MAX_SIDE_FILES];
    size_t nfiles = dpp_spec_side_files(s, files, MAX_SIDE_FILES);
    if (nfiles > MAX_SIDE_FILES)
        nfiles = MAX_SIDE_FILES;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        jpath_t kp = at_key(&path, key);
        int known = 0;
        for (size_t i = 0; i < nfiles && !known; i++)
            known = strcmp(files[i], key) == 0;
        if (!known) {
            char hint[700];
            fail(p, &kp, "no file of this spec%s",
                 nfiles ? dpp_suggest(hint, sizeof hint, key, files, nfiles,
                                      "its files beside the table", 16)
                        : " (it names none beside its table)");
            continue;
        }
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            json_string_length(v) > MAX_PIN_VERSION) {
            fail(p, &kp, "expected a version string of 1 to %d bytes, as the master writes it",
                 MAX_PIN_VERSION);
            continue;
        }
        if (dpp_spec_set_pin(s, key, json_string_value(v)) != 0)
            return -ENOMEM;
    }
    return 0;
}

static int parse_root(parser_t *p, json_t *root, dpp_spec_t *s)
{
    static const char *const top_keys[] = {"table",      "partitions",     "batch_size",
                                           "epochs",     "consumers",      "split_rows",
                                           "on_corrupt", "compression",    "compression_level",
                                           "features",   "label",          "filters",
                                           "remainder",  "shuffle",        "order",
                                           "cache",
                                           "format",     "idle_timeout_s", "max_reject_ratio",
                                           "text",       "tokenizer",      "sequence",
                                           "sources",    "mixture",        "pins",
                                           NULL};
    static const char *const feature_keys[] = {"dense", "sparse", NULL};
    jpath_t table_path = at_key(NULL, "table");
    jpath_t features_path = at_key(NULL, "features");
    int rc, found;
    int64_t x = 0;

    if (!json_is_object(root)) {
        jpath_t rp = at_key(NULL, "(root)");
        return fail(p, &rp, "expected an object");
    }
    /* each part below is checked whatever the parts before it hold (go_on) */
    if ((rc = go_on(check_keys(p, NULL, root, top_keys, NULL))) != 0)
        return rc;

    /* (a mixture's sources and their table never reach here: parse_source
     * puts a source's table in their place) */
    if (json_object_get(root, "mixture") || json_object_get(root, "sources")) {
        jpath_t mp = at_key(NULL, json_object_get(root, "mixture") ? "mixture" : "sources");
        fail(p, &mp, "applies to a mixture, whose tables are in \"sources\": [{\"table\": ..., "
                     "\"weight\": ...}, ...] (instead of a top-level \"table\")");
    }
    const char *table = NULL;
    if (json_object_get(root, "table"))
        table = get_string(p, NULL, root, "table", &rc);
    else
        fail(p, &table_path, p->prefix ? "required" : "required (or \"sources\" for a mixture of tables)");
    int s3 = table && strncmp(table, "s3://", 5) == 0;
    if (s3 && (table[5] == '\0' || table[5] == '/' || strstr(table, "//") != table + 3)) {
        fail(p, &table_path, "expected s3://BUCKET/PREFIX (no empty segment)");
    } else if (table && !s3 && !dpp_path_is_relative_inside(table)) {
        fail(p, &table_path,
             "must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL");
    } else if (table) {
        s->table = strdup(table);
        if (!s->table)
            return -ENOMEM;
    }

    json_t *parts = json_object_get(root, "partitions");
    if (parts && (rc = go_on(parse_partitions(p, parts, s))) != 0)
        return rc;

    if (get_int(p, NULL, root, "batch_size", 1, 1, MAX_BATCH_SIZE, &x, &found) == 0)
        s->batch_size = (unsigned)x;
    x = 1;
    json_t *ev = json_object_get(root, "epochs");
    if (json_is_string(ev) && strcmp(json_string_value(ev), "unbounded") == 0) {
        x = DPP_EPOCHS_UNBOUNDED;
    } else if (json_is_string(ev)) {
        jpath_t ep = at_key(NULL, "epochs");
        fail(p, &ep, "expected an integer or \"unbounded\"");
    } else {
        get_int(p, NULL, root, "epochs", 0, 1, MAX_EPOCHS, &x, &found);
    }
    s->epochs = (unsigned)x;
    x = 1;
    get_int(p, NULL, root, "consumers", 0, 1, DPP_SPEC_MAX_CONSUMERS, &x, &found);
    s->consumers = (unsigned)x;
    if ((rc = go_on(parse_io_keys(p, root, s))) != 0)
        return rc;
    /* a text session: JSON Lines, plain text, or a Parquet table's string
     * column (a Parquet spec with any of the text sections) */
    static const char *const text_keys[] = {"text", "tokenizer", "sequence", NULL};
    int text_key = 0;
    for (const char *const *k = text_keys; *k; k++)
        text_key |= json_object_get(root, *k) != NULL;
    if (s->format == DPP_FORMAT_JSONL || s->format == DPP_FORMAT_TEXT ||
        (s->format == DPP_FORMAT_PARQUET && text_key)) {
        rc = go_on(parse_text(p, root, s));
        if (rc == 0)
            rc = go_on(parse_pins(p, root, s));
        return rc ? rc : p->nerrors ? DPP_ESPEC : 0;
    }
    for (const char *const *k = text_keys; *k; k++) {
        if (json_object_get(root, *k)) {
            jpath_t kp = at_key(NULL, *k);
            fail(p, &kp, "applies to text sessions only (\"format\": \"jsonl\", "
                         "\"text\", or \"parquet\" to read a string column)");
        }
    }

    json_t *features = json_object_get(root, "features");
    if (!features) {
        fail(p, &features_path, "required");
    } else if (!json_is_object(features)) {
        fail(p, &features_path, "expected an object");
    } else {
        unsigned before = p->nerrors;
        rc = go_on(check_keys(p, &features_path, features, feature_keys, NULL));
        if (!rc)
            rc = go_on(
                parse_feature_list(p, &features_path, features, "dense", 1, &s->dense, &s->ndense));
        if (!rc)
            rc = go_on(parse_feature_list(p, &features_path, features, "sparse", 0, &s->sparse,
                                          &s->nsparse));
        if (rc)
            return rc;
        if (s->ndense + s->nsparse > DPP_SPEC_MAX_FEATURES)
            fail(p, &features_path, "%u features, more than %d", s->ndense + s->nsparse,
                 DPP_SPEC_MAX_FEATURES);
        else if (s->ndense + s->nsparse == 0 && p->nerrors == before)
            fail(p, &features_path,
                 "no features: expected at least one, in \"dense\" or \"sparse\" (either "
                 "list may be left out or empty, not both)");
    }
    if ((rc = go_on(parse_label(p, root, s))) != 0)
        return rc;
    /* label, dense values and list lengths have a fixed size per row: a
     * batch of them must fit a block */
    uint64_t row_bytes = (s->label ? 4 : 0) + 4 * (uint64_t)s->nsparse;
    for (unsigned i = 0; i < s->ndense; i++)
        row_bytes += 4 * (uint64_t)s->dense[i].dim;
    if (row_bytes * s->batch_size > DPP_BLOCK_MAX_BYTES) {
        jpath_t bp = at_key(NULL, "batch_size");
        fail(p, &bp,
             "%u rows of these features take at least %llu MiB, over the %u MiB a block "
             "may hold: at most %llu rows per batch (or fewer dense values)",
             s->batch_size, (unsigned long long)((row_bytes * s->batch_size) >> 20),
             DPP_BLOCK_MAX_BYTES >> 20, (unsigned long long)(DPP_BLOCK_MAX_BYTES / row_bytes));
    }
    /* last: a require filter names a feature, weights or the label */
    json_t *filters = json_object_get(root, "filters");
    if (filters && (rc = go_on(parse_filters(p, filters, s))) != 0)
        return rc;
    if ((rc = go_on(parse_pins(p, root, s))) != 0)
        return rc;
    return p->nerrors ? DPP_ESPEC : 0;
}

/* ---- mixtures (spec "sources") ------------------------------------------ */

static const char *const exhausted_names[] = {"stop", "repeat", NULL};

/* Source i's whole spec: the mixture's keys with the source's own in place
 * (parsed by parse_root as any spec, its problems named sources[i].KEY). */
static int parse_source(parser_t *p, json_t *root, json_t *src, size_t i, int quiet,
                        dpp_spec_t *out)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "sources[%zu]", i);
    json_t *one = json_deep_copy(root);
    parser_t q = *p;
    q.prefix = prefix;
    q.quiet = quiet;
    q.names = json_object();
    int rc = one && q.names ? 0 : -ENOMEM;
    if (rc == 0) {
        json_object_del(one, "sources");
        json_object_del(one, "mixture");
        /* the source's own keys (its unknown ones parse_mixture named) */
        for (const char *const *k = source_keys; *k; k++)
            if (strcmp(*k, "weight") != 0 && json_object_get(src, *k) &&
                json_object_set(one, *k, json_object_get(src, *k)) != 0)
                rc = -ENOMEM;
    }
    if (rc == 0)
        rc = parse_root(&q, one, out);
    json_decref(one);
    json_decref(q.names);
    p->nerrors = q.nerrors;
    return rc;
}

/* Sources' window_rows: rows (<= DPP_SPEC_MAX_WINDOW_ROWS) dealt by
 * weight (total: their sum), largest remainder first. The floors of the
 * shares add up to rows less fewer than n (give or take a rounding of the
 * doubles), so each fix-up loop below runs at most n times. */
static int mix_shares(dpp_mix_source_t *sources, size_t n, double total, uint64_t rows)
{
    double *frac = calloc(n, sizeof *frac);
    if (frac == NULL)
        return -ENOMEM;
    uint64_t given = 0;
    for (size_t i = 0; i < n; i++) {
        double share = sources[i].weight / total * (double)rows;
        if (!(share >= 0))
            share = 0;
        if (share > (double)rows)
            share = (double)rows;
        sources[i].window_rows = (unsigned)share;
        frac[i] = share - (double)sources[i].window_rows;
        given += sources[i].window_rows;
    }
    for (size_t k = 0; k < n && given < rows; k++, given++) {
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (frac[i] > frac[best])
                best = i;
        sources[best].window_rows++;
        frac[best] = -1;
    }
    for (size_t k = 0; k < n && given > rows; k++, given--) {
        size_t least = n; /* rounding gave one row too many: the smallest remainder returns it */
        for (size_t i = 0; i < n; i++)
            if (sources[i].window_rows > 0 && frac[i] >= 0 && (least == n || frac[i] < frac[least]))
                least = i;
        if (least == n)
            break;
        sources[least].window_rows--;
        frac[least] = 2;
    }
    free(frac);
    return 0;
}

/* A mixture: "sources" (each a table with its own format, partitions,
 * filters and text section, and a weight), the rest shared; "mixture":
 * {"window": batches, "exhausted": "stop" or "repeat"}. */
static int parse_mixture(parser_t *p, json_t *root, dpp_spec_t *s)
{
    static const char *const mix_keys[] = {"window", "exhausted", NULL};
    jpath_t sp = at_key(NULL, "sources");
    json_t *srcs = json_object_get(root, "sources");
    size_t n = json_is_array(srcs) ? json_array_size(srcs) : 0;
    if (!json_is_array(srcs) || n < 2 || n > DPP_SPEC_MAX_SOURCES)
        return fail(p, &sp, "expected an array of 2 to %d sources, each {\"table\": ..., "
                            "\"weight\": ...}",
                    DPP_SPEC_MAX_SOURCES);
    if (json_object_get(root, "table")) {
        jpath_t tp = at_key(NULL, "table");
        fail(p, &tp, "a mixture names each source's table (sources[i].table); leave the "
                     "top-level table out");
    }
    json_t *rem = json_object_get(root, "remainder");
    if (rem && !(json_is_string(rem) && strcmp(json_string_value(rem), "drop") == 0)) {
        jpath_t rp = at_key(NULL, "remainder");
        fail(p, &rp, "a mixture's epoch is whole windows of every rank (equal batches, the "
                     "weights exact in each): its remainder is \"drop\"; leave it out");
    }
    json_t *ord = json_object_get(root, "order");
    if (json_is_string(ord) && strcmp(json_string_value(ord), "fastest") == 0) {
        jpath_t op = at_key(NULL, "order");
        fail(p, &op, "a mixture keeps its weights in plan order: \"fastest\" would not; leave "
                     "it out");
    }
    int64_t window = DPP_SPEC_DEFAULT_MIX_WINDOW;
    int repeat = 0, window_given = 0, rc;
    json_t *mix = json_object_get(root, "mixture");
    jpath_t mp = at_key(NULL, "mixture");
    if (mix && !json_is_object(mix)) {
        fail(p, &mp, "expected an object: {\"window\": <batches>, \"exhausted\": \"stop\" or "
                     "\"repeat\"}");
    } else if (mix) {
        if ((rc = go_on(check_keys(p, &mp, mix, mix_keys, NULL))) != 0)
            return rc;
        get_int(p, &mp, mix, "window", 0, 1, 1 << 20, &window, &window_given);
        get_choice(p, &mp, mix, "exhausted", 0, exhausted_names, "\"stop\" or \"repeat\"",
                   &repeat);
    }
    dpp_mix_source_t *sources = calloc(n, sizeof *sources);
    if (sources == NULL)
        return -ENOMEM;
    s->sources = sources;
    s->nsources = (unsigned)n;
    s->mix_window = (unsigned)window;
    s->mix_repeat = repeat;
    double total = 0;
    int first_failed = 0;
    for (size_t i = 0; i < n; i++) {
        jpath_t ip = at_index(&sp, i);
        json_t *src = json_array_get(srcs, i);
        if (!json_is_object(src)) {
            fail(p, &ip, "expected an object: {\"table\": ..., \"weight\": ...}");
            continue;
        }
        if (json_object_get(src, "features")) {
            jpath_t fp = at_key(&ip, "features");
            fail(p, &fp, "a mixture's features are shared by every source (its batches have "
                         "one layout): give them once, at the top level");
            continue;
        }
        if ((rc = go_on(check_keys(p, &ip, src, source_keys, NULL))) != 0)
            return rc;
        jpath_t wp = at_key(&ip, "weight");
        json_t *w = json_object_get(src, "weight");
        if (!json_is_number(w) || !(json_number_value(w) > 0) || json_number_value(w) > 1e9)
            fail(p, &wp, "%s: a positive number, the source's share of every window relative "
                         "to the others' (e.g. 0.5, 0.3, 0.2)",
                 w ? "expected" : "required");
        else
            sources[i].weight = json_number_value(w);
        total += sources[i].weight;
        int quiet = i == 0 ? 0 : first_failed ? 1 : 2;
        unsigned before = p->nerrors;
        if ((rc = parse_source(p, root, src, i, quiet, &sources[i].spec)) != 0 && rc != DPP_ESPEC)
            return rc;
        if (i == 0)
            first_failed = p->nerrors > before;
    }
    if (p->nerrors)
        return DPP_ESPEC;
    /* this spec's own fields: source 0's (the shared ones are every
     * source's); its problems were reported above */
    parser_t silent = *p;
    silent.err = NULL;
    silent.report = NULL;
    if ((rc = parse_source(&silent, root, json_array_get(srcs, 0), 0, 1, s)) != 0)
        return rc;
    /* each source's rows in a window: the largest-remainder shares, of a
     * window small enough that a share fits its 32 bits and the planner's
     * sums (ranks x window rows) stay far from 2^64 */
    uint64_t rows = (uint64_t)window * s->batch_size;
    if (rows > DPP_SPEC_MAX_WINDOW_ROWS) {
        jpath_t wp = at_key(&mp, "window");
        jpath_t bp = at_key(NULL, "batch_size");
        return fail(p, window_given ? &wp : &bp,
                    "%lld batches of %u rows make %llu rows a window, more than the %u a "
                    "mixture's window may hold: at most %llu batches of %u rows; lower "
                    "mixture.window or batch_size",
                    (long long)window, s->batch_size, (unsigned long long)rows,
                    DPP_SPEC_MAX_WINDOW_ROWS,
                    (unsigned long long)(DPP_SPEC_MAX_WINDOW_ROWS / s->batch_size), s->batch_size);
    }
    if ((rc = mix_shares(sources, n, total, rows)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (sources[i].window_rows == 0) {
            jpath_t ip = at_index(&sp, i);
            jpath_t wp = at_key(&ip, "weight");
            fail(p, &wp, "%g of %g gives no row in a window of %llu rows (%lld batches of %u): "
                         "raise mixture.window or the weight",
                 sources[i].weight, total, (unsigned long long)rows, (long long)window,
                 s->batch_size);
        }
    }
    return p->nerrors ? DPP_ESPEC : 0;
}

int dpp_spec_parse(const char *json, size_t len, dpp_spec_t *out, char *err, size_t errlen)
{
    return dpp_spec_parse_report(json, len, out, err, errlen, NULL, NULL);
}

int dpp_spec_parse_report(const char *json, size_t len, dpp_spec_t *out, char *err, size_t errlen,
                          void (*report)(void *arg, const char *problem), void *arg)
{
    parser_t p = {.err = err, .errlen = errlen, .report = report, .report_arg = arg};
    dpp_spec_t s;
    json_error_t jerr;
    json_t *root = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    memset(&s, 0, sizeof(s));
    if (err && errlen)
        err[0] = '\0';
    if (!json)
        len = 0;
    if (len > DPP_SPEC_MAX_BYTES) {
        jpath_t rp = at_key(NULL, "(root)");
        rc = fail(&p, &rp, "the spec is %zu bytes, more than %u", len, DPP_SPEC_MAX_BYTES);
        goto out;
    }
    if ((rc = check_depth(&p, json, len)) != 0)
        goto out;
    /* Duplicate keys would otherwise silently keep the last value. */
    root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        /* jansson leaves the text empty when its very first allocation
         * (the lexer's buffer) fails */
        if (json_error_code(&jerr) == json_error_out_of_memory || jerr.text[0] == '\0') {
            rc = -ENOMEM;
            goto out;
        }
        char where[64];
        snprintf(where, sizeof(where), "line %d, column %d", jerr.line, jerr.column);
        jpath_t wp = at_key(NULL, where);
        rc = fail(&p, &wp, "%s", jerr.text);
        goto out;
    }
    p.names = json_object();
    if (!p.names) {
        rc = -ENOMEM;
        goto out;
    }
    rc = json_object_get(root, "sources") ? parse_mixture(&p, root, &s) : parse_root(&p, root, &s);
out:
    if (rc == -ENOMEM && err && errlen)
        snprintf(err, errlen, "out of memory");
    if (rc == 0)
        *out = s;
    else
        dpp_spec_close(&s);
    json_decref(p.names);
    json_decref(root);
    return rc;
}

static void features_free(dpp_feature_spec_t *f, unsigned n)
{
    if (!f)
        return;
    for (unsigned i = 0; i < n; i++) {
        free(f[i].name);
        free(f[i].weights);
        if (f[i].ops)
            for (unsigned j = 0; j < f[i].nops; j++) {
                free(f[i].ops[j].boundaries);
                free(f[i].ops[j].file);
            }
        free(f[i].ops);
    }
    free(f);
}

static void strings_free(char **v, unsigned n)
{
    if (v)
        for (unsigned i = 0; i < n; i++)
            free(v[i]);
    free(v);
}

static void text_free(dpp_text_spec_t *t)
{
    if (!t)
        return;
    free(t->field);
    strings_free(t->where_keys, t->nwhere);
    strings_free(t->where_values, t->nwhere);
    free(t->tokenizer_file);
    free(t->pattern);
    strings_free(t->special_names, t->nspecials);
    free(t->special_ids);
    free(t->eos);
    free(t->bos);
    free(t);
}

void dpp_spec_close(dpp_spec_t *spec)
{
    if (!spec)
        return;
    free(spec->table);
    if (spec->partitions)
        for (unsigned i = 0; i < spec->npartitions; i++)
            free(spec->partitions[i]);
    free(spec->partitions);
    features_free(spec->dense, spec->ndense);
    features_free(spec->sparse, spec->nsparse);
    free(spec->label);
    if (spec->filters)
        for (unsigned i = 0; i < spec->nfilters; i++)
            free(spec->filters[i].feature);
    free(spec->filters);
    text_free(spec->text);
    for (unsigned i = 0; i < spec->npins; i++) {
        free(spec->pin_files[i]);
        free(spec->pin_versions[i]);
    }
    free(spec->pin_files);
    free(spec->pin_versions);
    for (unsigned i = 0; spec->sources && i < spec->nsources; i++)
        dpp_spec_close(&spec->sources[i].spec);
    free(spec->sources);
    memset(spec, 0, sizeof(*spec));
}

/* json_object_set_new steals the value even on failure, so a chain of these
 * needs no cleanup besides the parent. */
static int set(json_t *obj, const char *key, json_t *val)
{
    return val ? json_object_set_new(obj, key, val) : -1;
}

static json_t *transform_to_json(const dpp_transform_t *t)
{
    const op_info_t *info = op_by_kind(t->op);
    json_t *obj = json_object();
    if (!obj || !info || set(obj, "op", json_string(info->name)) != 0)
        goto fail;
    int rc = 0;
    switch (t->op) {
    case DPP_OP_FILL_MISSING:
        rc = set(obj, "value", json_real(t->value));
        break;
    case DPP_OP_CLAMP:
        /* an unbounded side is written by leaving the key out */
        if (t->min > -INFINITY)
            rc = set(obj, "min", json_real(t->min));
        if (rc == 0 && t->max < INFINITY)
            rc = set(obj, "max", json_real(t->max));
        break;
    case DPP_OP_LOG1P:
        break;
    case DPP_OP_STANDARDIZE:
        rc = set(obj, "mean", json_real(t->mean));
        if (rc == 0)
            rc = set(obj, "std", json_real(t->std));
        break;
    case DPP_OP_BUCKETIZE: {
        json_t *list = json_array();
        rc = set(obj, "boundaries", list);
        for (uint32_t i = 0; rc == 0 && i < t->nboundaries; i++)
            rc = json_array_append_new(list, json_real(t->boundaries[i]));
        break;
    }
    case DPP_OP_CAST:
        rc = set(obj, "to", json_string(cast_names[t->cast_to]));
        break;
    case DPP_OP_MODULO:
        rc = set(obj, "n", json_integer(t->n));
        break;
    case DPP_OP_HASH:
        rc = set(obj, "n", json_integer(t->n));
        if (rc == 0)
            rc = set(obj, "salt", json_integer(t->salt));
        break;
    case DPP_OP_VOCAB:
        rc = set(obj, "file", json_string(t->file));
        if (rc == 0)
            rc = set(obj, "oov_buckets", json_integer(t->oov_buckets));
        break;
    case DPP_OP_TRUNCATE:
        rc = set(obj, "max_len", json_integer(t->max_len));
        if (rc == 0)
            rc = set(obj, "keep", json_string(keep_names[t->keep_last ? 1 : 0]));
        break;
    }
    if (rc == 0)
        return obj;
fail:
    json_decref(obj);
    return NULL;
}

static json_t *features_to_json(const dpp_feature_spec_t *f, unsigned n)
{
    json_t *list = json_array();
    if (!list)
        return NULL;
    for (unsigned i = 0; i < n; i++) {
        json_t *feat = json_object();
        if (json_array_append_new(list, feat) != 0)
            goto fail;
        json_t *ops = json_array();
        if (set(feat, "name", json_string(f[i].name)) != 0 ||
            (f[i].dim > 0 && set(feat, "dim", json_integer(f[i].dim)) != 0) ||
            (f[i].weights && set(feat, "weights", json_string(f[i].weights)) != 0) ||
            (f[i].optional && set(feat, "optional", json_true()) != 0)) {
            json_decref(ops);
            goto fail;
        }
        if (set(feat, "transforms", ops) != 0)
            goto fail;
        for (unsigned j = 0; j < f[i].nops; j++)
            if (json_array_append_new(ops, transform_to_json(&f[i].ops[j])) != 0)
                goto fail;
    }
    return list;
fail:
    json_decref(list);
    return NULL;
}

static json_t *filter_to_json(const dpp_filter_t *f)
{
    json_t *obj = json_object();
    int rc = -1;
    if (!obj)
        return NULL;
    if (f->kind == DPP_FILTER_REQUIRE) {
        rc = set(obj, "op", json_string("require"));
        if (rc == 0)
            rc = set(obj, "feature", json_string(f->feature));
    } else if (f->kind == DPP_FILTER_SAMPLE) {
        rc = set(obj, "op", json_string("sample"));
        if (rc == 0)
            rc = set(obj, "p", json_real(f->p));
        if (rc == 0)
            rc = set(obj, "seed", json_integer(f->seed));
        if (rc == 0 && f->has_label)
            rc = set(obj, "label", json_real(f->label));
    }
    if (rc == 0)
        return obj;
    json_decref(obj);
    return NULL;
}

/* A text session's own sections, {"text", "tokenizer", "sequence"}, every
 * default written out. Each of their fields changes which sequences a split
 * makes, so they are also what the index key hashes. */
static json_t *text_to_json(const dpp_text_spec_t *t, dpp_format_t format)
{
    json_t *root = json_object(), *docs = json_object(), *tok = json_object(),
           *seq = json_object();
    if (set(root, "text", docs) != 0 || set(root, "tokenizer", tok) != 0 ||
        set(root, "sequence", seq) != 0)
        goto fail;
    if ((format == DPP_FORMAT_TEXT ? set(docs, "unit", json_string(unit_names[t->unit]))
                                   : set(docs, "field", json_string(t->field))) != 0 ||
        set(docs, "min_bytes", json_integer((json_int_t)t->min_bytes)) != 0 ||
        (t->max_bytes != UINT64_MAX &&
         set(docs, "max_bytes", json_integer((json_int_t)t->max_bytes)) != 0))
        goto fail;
    if (t->nwhere) {
        json_t *where = json_object();
        if (set(docs, "where", where) != 0)
            goto fail;
        for (unsigned i = 0; i < t->nwhere; i++)
            if (set(where, t->where_keys[i], json_string(t->where_values[i])) != 0)
                goto fail;
    }
    if (set(tok, "file", json_string(t->tokenizer_file)) != 0 ||
        set(tok, "kind", json_string(tokenizer_kinds[t->tokenizer_kind])) != 0 ||
        (t->pattern && set(tok, "pattern", json_string(t->pattern)) != 0))
        goto fail;
    if (t->nspecials) {
        json_t *sp = json_object();
        if (set(tok, "specials", sp) != 0)
            goto fail;
        for (unsigned i = 0; i < t->nspecials; i++)
            if (set(sp, t->special_names[i], json_integer(t->special_ids[i])) != 0)
                goto fail;
    }
    if (set(seq, "length", json_integer(t->length)) != 0 ||
        set(seq, "pack", json_string(pack_names[t->pack])) != 0 ||
        (t->pack == DPP_PACK_KIND_BEST_FIT && set(seq, "window", json_integer(t->window)) != 0) ||
        set(seq, "eos", t->eos ? json_string(t->eos) : json_null()) != 0 ||
        set(seq, "bos", t->bos ? json_string(t->bos) : json_null()) != 0)
        goto fail;
    return root;
fail:
    json_decref(root);
    return NULL;
}

uint64_t dpp_spec_index_key(const dpp_spec_t *spec)
{
    if (spec->text == NULL)
        return spec->split_rows;
    /* FNV-1a of the text sections, then split_rows mixed in */
    json_t *t = text_to_json(spec->text, spec->format);
    char *js = t ? json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(t);
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const char *c = js ? js : ""; *c; c++)
        h = (h ^ (unsigned char)*c) * UINT64_C(0x100000001b3);
    free(js);
    /* the sequences a file makes are counted with the tokenizer's pinned
     * version: a tokenizer replaced in place is another index */
    const char *pin = dpp_spec_pin(spec, spec->text->tokenizer_file);
    for (const char *c = pin ? pin : ""; *c; c++)
        h = (h ^ (unsigned char)*c) * UINT64_C(0x100000001b3);
    h ^= (uint64_t)spec->split_rows * UINT64_C(0x9E3779B97F4A7C15);
    /* never a plain split_rows value, so a text index is never taken for
     * a row format's */
    return h | (UINT64_C(1) << 63);
}

uint64_t dpp_spec_cache_fingerprint(const dpp_spec_t *spec)
{
    /* The normalised spec without what a worker applies when it serves a
     * split's blocks (the per-epoch row shuffle, compression), what the
     * master plans with (ranks, epochs, the remainder, partitions; the
     * split key has the file and its range) and what changes no output. */
    static const char *const serve_keys[] = {
        "table",     "partitions", "epochs",         "consumers",        "split_rows",
        "remainder", "order",      "idle_timeout_s", "max_reject_ratio", "shuffle",
        "cache",     "compression", "compression_level", NULL};
    char *js = dpp_spec_to_json(spec);
    json_t *root = js ? json_loads(js, 0, NULL) : NULL;
    free(js);
    for (const char *const *k = serve_keys; root && *k; k++)
        json_object_del(root, *k);
    js = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))
              : NULL;
    json_decref(root);
    /* out of memory: a fingerprint no spec has, which only costs misses */
    uint64_t h = js ? XXH3_64bits(js, strlen(js)) : UINT64_MAX;
    free(js);
    return h;
}

void dpp_spec_split_key(uint64_t fingerprint, const char *path, uint64_t byte_start,
                        uint64_t byte_end, uint64_t record_start, uint64_t range_records,
                        uint64_t record_skip, uint64_t record_take, uint64_t key[2])
{
    uint64_t nums[7] = {fingerprint,   byte_start,  byte_end,   record_start,
                        range_records, record_skip, record_take};
    XXH128_hash_t h = XXH3_128bits_withSeed(path, strlen(path), XXH3_64bits(nums, sizeof nums));
    key[0] = h.high64;
    key[1] = h.low64;
}

/* The normalised spec as a JSON object (NULL when out of memory). */
static json_t *spec_object(const dpp_spec_t *spec)
{
    json_t *root = json_object();
    json_t *features = json_object();
    json_t *done = NULL;

    if (!root || !features)
        goto out;
    if (set(root, "table", json_string(spec->table)) != 0)
        goto out;
    /* "every partition" is spelt by leaving the key out */
    if (spec->npartitions > 0) {
        json_t *parts = json_array();
        if (set(root, "partitions", parts) != 0)
            goto out;
        for (unsigned i = 0; i < spec->npartitions; i++)
            if (json_array_append_new(parts, json_string(spec->partitions[i])) != 0)
                goto out;
    }
    const char *on_corrupt = on_corrupt_names[spec->on_corrupt_fail ? 1 : 0];
    if (set(root, "format", json_string(dpp_format_names[spec->format])) != 0 ||
        set(root, "batch_size", json_integer(spec->batch_size)) != 0 ||
        set(root, "epochs",
            spec->epochs == DPP_EPOCHS_UNBOUNDED ? json_string("unbounded")
                                                 : json_integer(spec->epochs)) != 0 ||
        set(root, "consumers", json_integer(spec->consumers)) != 0 ||
        set(root, "split_rows", json_integer(spec->split_rows)) != 0 ||
        set(root, "on_corrupt", json_string(on_corrupt)) != 0 ||
        set(root, "compression", json_string(compression_names[spec->compression])) != 0 ||
        set(root, "compression_level", json_integer(spec->compression_level)) != 0 ||
        set(root, "remainder", json_string(remainder_names[spec->remainder])) != 0 ||
        set(root, "order", json_string(order_names[spec->order_fastest ? 1 : 0])) != 0 ||
        (spec->cache_off && set(root, "cache", json_string(cache_names[1])) != 0) ||
        (spec->idle_timeout_s != DPP_SPEC_IDLE_DEFAULT &&
         set(root, "idle_timeout_s", json_integer(spec->idle_timeout_s)) != 0) ||
        (spec->max_reject_ratio != DPP_SPEC_DEFAULT_REJECT_RATIO &&
         set(root, "max_reject_ratio", json_real(spec->max_reject_ratio)) != 0))
        goto out;
    json_t *shuffle = spec->shuffle ? json_object() : json_false();
    if (set(root, "shuffle", shuffle) != 0 ||
        (spec->shuffle && set(shuffle, "seed", json_integer(spec->shuffle_seed)) != 0))
        goto out;
    if (spec->npins > 0) {
        json_t *pins = json_object();
        if (set(root, "pins", pins) != 0)
            goto out;
        for (unsigned i = 0; i < spec->npins; i++)
            if (set(pins, spec->pin_files[i], json_string(spec->pin_versions[i])) != 0)
                goto out;
    }
    if (spec->text) {
        json_t *t = text_to_json(spec->text, spec->format);
        if (t == NULL)
            goto out;
        for (void *it = json_object_iter(t); it; it = json_object_iter_next(t, it))
            if (set(root, json_object_iter_key(it), json_incref(json_object_iter_value(it))) != 0) {
                json_decref(t);
                goto out;
            }
        json_decref(t);
        done = root;
        root = NULL;
        goto out;
    }
    json_t *f = features;
    features = NULL;
    if (set(root, "features", f) != 0)
        goto out;
    if (spec->ndense > 0 && set(f, "dense", features_to_json(spec->dense, spec->ndense)) != 0)
        goto out;
    if (spec->nsparse > 0 && set(f, "sparse", features_to_json(spec->sparse, spec->nsparse)) != 0)
        goto out;
    if (spec->label) {
        json_t *label = json_object();
        if (set(root, "label", label) != 0 || set(label, "name", json_string(spec->label)) != 0)
            goto out;
    }
    json_t *filters = json_array();
    if (set(root, "filters", filters) != 0)
        goto out;
    for (unsigned i = 0; i < spec->nfilters; i++)
        if (json_array_append_new(filters, filter_to_json(&spec->filters[i])) != 0)
            goto out;
    done = root;
    root = NULL;
out:
    json_decref(features);
    json_decref(root);
    return done;
}

char *dpp_spec_to_json(const dpp_spec_t *spec)
{
    json_t *root = spec_object(spec);
    char *text = NULL;
    if (root == NULL)
        return NULL;
    if (spec->nsources > 0) {
        /* the shared keys once; each source's own in "sources" */
        for (const char *const *k = source_keys; *k; k++)
            json_object_del(root, *k);
        json_t *srcs = json_array(), *mix = json_object();
        if (set(root, "sources", srcs) != 0 || set(root, "mixture", mix) != 0 ||
            set(mix, "window", json_integer(spec->mix_window)) != 0 ||
            set(mix, "exhausted", json_string(exhausted_names[spec->mix_repeat ? 1 : 0])) != 0)
            goto out;
        for (unsigned i = 0; i < spec->nsources; i++) {
            json_t *one = spec_object(&spec->sources[i].spec), *src = json_object();
            if (json_array_append_new(srcs, src) != 0 || one == NULL) {
                json_decref(one);
                goto out;
            }
            for (const char *const *k = source_keys; *k; k++) {
                json_t *v = strcmp(*k, "weight") == 0 ? json_real(spec->sources[i].weight)
                                                      : json_incref(json_object_get(one, *k));
                if (v && set(src, *k, v) != 0) {
                    json_decref(one);
                    goto out;
                }
            }
            json_decref(one);
        }
    }
    text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
out:
    json_decref(root);
    return text;
}
