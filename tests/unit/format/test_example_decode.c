/* SPDX-License-Identifier: Apache-2.0 */
/* The hand-written tf.Example decoder against protobuf-c's generic unpack:
 * random Examples, hand-made wire bytes for the corners of the format,
 * malformed input, and randomly mutated records. */
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/example_decode.h"
#include "dpp/error.h"
#include "example.pb-c.h"

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rng_below(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

/* Hand-made wire bytes. */

typedef struct wire {
    uint8_t b[4096];
    size_t n;
} wire_t;

static void w_raw(wire_t *w, const void *p, size_t len)
{
    assert_true(w->n + len <= sizeof(w->b));
    if (len)
        memcpy(w->b + w->n, p, len);
    w->n += len;
}

static void w_byte(wire_t *w, uint8_t b)
{
    w_raw(w, &b, 1);
}

static void w_varint(wire_t *w, uint64_t v)
{
    while (v >= 0x80) {
        w_byte(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    w_byte(w, (uint8_t)v);
}

static void w_tag(wire_t *w, unsigned field, unsigned wt)
{
    w_varint(w, (uint64_t)field << 3 | wt);
}

static void w_lenfield(wire_t *w, unsigned field, const void *p, size_t len)
{
    w_tag(w, field, 2);
    w_varint(w, len);
    w_raw(w, p, len);
}

static void w_sub(wire_t *w, unsigned field, const wire_t *sub)
{
    w_lenfield(w, field, sub->b, sub->n);
}

static void w_str(wire_t *w, unsigned field, const char *s)
{
    w_lenfield(w, field, s, strlen(s));
}

static void w_fixed32(wire_t *w, unsigned field, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_tag(w, field, 5);
    w_raw(w, b, 4);
}

static void w_float(wire_t *w, unsigned field, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    w_fixed32(w, field, u);
}

static void w_fixed64(wire_t *w, unsigned field, uint64_t v)
{
    w_tag(w, field, 1);
    for (int i = 0; i < 8; i++)
        w_byte(w, (uint8_t)(v >> (8 * i)));
}

static void w_packed_floats(wire_t *w, const float *v, size_t n)
{
    w_tag(w, 1, 2);
    w_varint(w, 4 * n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        w_raw(w, b, 4);
    }
}

static void w_packed_int64s(wire_t *w, const int64_t *v, size_t n)
{
    wire_t body = {0};
    for (size_t i = 0; i < n; i++)
        w_varint(&body, (uint64_t)v[i]);
    w_sub(w, 1, &body);
}

/* features += entry{key, value = feature} */
static void w_entry(wire_t *features, const char *key, const wire_t *feature)
{
    wire_t e = {0};
    w_str(&e, 1, key);
    if (feature)
        w_sub(&e, 2, feature);
    w_sub(features, 1, &e);
}

/* A Feature holding one list of the given kind (1 bytes, 2 float, 3 int64). */
static void w_feature(wire_t *feature, unsigned kind, const wire_t *list)
{
    w_sub(feature, kind, list);
}

static void w_example(wire_t *ex, const wire_t *features)
{
    w_sub(ex, 1, features);
}

enum { CMP_OK = 0, CMP_MISMATCH = 1, CMP_REJECTED = 2 };

static const Tfex__FeatureEntry *ref_entry(const Tfex__Example *ex, const char *name)
{
    const Tfex__FeatureEntry *hit = NULL;
    if (!ex->features)
        return NULL;
    for (size_t i = 0; i < ex->features->n_feature; i++) {
        const Tfex__FeatureEntry *e = ex->features->feature[i];
        if (e->key && strcmp(e->key, name) == 0)
            hit = e; /* a later duplicate key wins */
    }
    return hit;
}

/* Compares one decoded feature with protobuf-c's view of it. CMP_REJECTED:
 * an accessor refused list bytes that protobuf-c took. */
static int compare_feature(const dpp_feat_ref_t *got, const Tfex__Example *ex, const char *name)
{
    const Tfex__FeatureEntry *e = ref_entry(ex, name);
    size_t n = 0, w = 0;
    int rc;

    if (!e)
        return got->kind == DPP_FEAT_ABSENT ? CMP_OK : CMP_MISMATCH;
    const Tfex__Feature *f = e->value;
    Tfex__Feature__KindCase kc = f ? f->kind_case : TFEX__FEATURE__KIND__NOT_SET;
    switch (kc) {
    case TFEX__FEATURE__KIND__NOT_SET:
        if (got->kind != DPP_FEAT_BYTES || got->list_len != 0)
            return CMP_MISMATCH;
        rc = dpp_feat_count(got, DPP_FEAT_BYTES, &n);
        return rc == 0 && n == 0 ? CMP_OK : CMP_MISMATCH;
    case TFEX__FEATURE__KIND_BYTES_LIST: {
        if (got->kind != DPP_FEAT_BYTES)
            return CMP_MISMATCH;
        if (dpp_feat_count(got, DPP_FEAT_BYTES, &n) != 0)
            return CMP_REJECTED;
        if (n != f->bytes_list->n_value)
            return CMP_MISMATCH;
        /* The span the decoder found must hold the same strings. */
        Tfex__BytesList *bl = tfex__bytes_list__unpack(NULL, got->list_len, got->list);
        if (!bl)
            return CMP_REJECTED;
        int res = bl->n_value == n ? CMP_OK : CMP_MISMATCH;
        for (size_t i = 0; res == CMP_OK && i < n; i++) {
            const ProtobufCBinaryData *a = &bl->value[i], *b = &f->bytes_list->value[i];
            if (a->len != b->len || (a->len && memcmp(a->data, b->data, a->len) != 0))
                res = CMP_MISMATCH;
        }
        tfex__bytes_list__free_unpacked(bl, NULL);
        return res;
    }
    case TFEX__FEATURE__KIND_FLOAT_LIST: {
        const Tfex__FloatList *fl = f->float_list;
        if (got->kind != DPP_FEAT_FLOAT)
            return CMP_MISMATCH;
        if (dpp_feat_count(got, DPP_FEAT_FLOAT, &n) != 0)
            return CMP_REJECTED;
        if (n != fl->n_value)
            return CMP_MISMATCH;
        float *v = malloc((n + 1) * sizeof(float));
        assert_non_null(v);
        rc = dpp_feat_floats(got, v, n + 1, &w);
        /* Bitwise, so NaN payloads and -0.0 count too. */
        int res = rc == 0 && w == n && (n == 0 || memcmp(v, fl->value, n * 4) == 0) ? CMP_OK
                                                                                    : CMP_MISMATCH;
        if (res == CMP_OK && n > 1) {
            /* a short buffer gets the first values and the full count */
            rc = dpp_feat_floats(got, v, n / 2, &w);
            res = rc == 0 && w == n && memcmp(v, fl->value, n / 2 * 4) == 0 ? CMP_OK : CMP_MISMATCH;
        }
        free(v);
        return res;
    }
    case TFEX__FEATURE__KIND_INT64_LIST: {
        const Tfex__Int64List *il = f->int64_list;
        if (got->kind != DPP_FEAT_INT64)
            return CMP_MISMATCH;
        if (dpp_feat_count(got, DPP_FEAT_INT64, &n) != 0)
            return CMP_REJECTED;
        if (n != il->n_value)
            return CMP_MISMATCH;
        int64_t *v = malloc((n + 1) * sizeof(int64_t));
        assert_non_null(v);
        rc = dpp_feat_int64s(got, v, n + 1, &w);
        int res = rc == 0 && w == n && (n == 0 || memcmp(v, il->value, n * 8) == 0) ? CMP_OK
                                                                                    : CMP_MISMATCH;
        if (res == CMP_OK && n > 1) {
            rc = dpp_feat_int64s(got, v, n / 2, &w);
            res = rc == 0 && w == n && memcmp(v, il->value, n / 2 * 8) == 0 ? CMP_OK : CMP_MISMATCH;
        }
        free(v);
        return res;
    }
    default:
        return CMP_MISMATCH;
    }
}

/* Decodes from an exact-size heap copy so that ASan sees any over-read. */
static int decode_exact(dpp_projection_t *p, const uint8_t *rec, size_t len,
                        dpp_feat_ref_t *out, uint8_t **copy)
{
    *copy = malloc(len ? len : 1);
    assert_non_null(*copy);
    if (len)
        memcpy(*copy, rec, len);
    return dpp_example_decode(p, *copy, len, out);
}

/* Decodes wire bytes and checks every projected name against protobuf-c,
 * which must accept them too. */
static void check_wire_against_ref(dpp_projection_t *proj, const char *const *names, size_t n,
                                   const wire_t *w)
{
    dpp_feat_ref_t out[64];
    uint8_t *copy;

    assert_true(n <= 64);
    assert_int_equal(decode_exact(proj, w->b, w->n, out, &copy), 0);
    Tfex__Example *ex = tfex__example__unpack(NULL, w->n, w->b);
    assert_non_null(ex);
    for (size_t i = 0; i < n; i++) {
        int r = compare_feature(&out[i], ex, names[i]);
        if (r != CMP_OK)
            fail_msg("feature \"%s\": %s", names[i], r == CMP_MISMATCH ? "mismatch" : "rejected");
    }
    tfex__example__free_unpacked(ex, NULL);
    free(copy);
}

/* Random Examples built with protobuf-c. */

#define MAXE 24
#define MAXV 20

typedef struct rand_example {
    Tfex__Example ex;
    Tfex__Features fs;
    Tfex__FeatureEntry ent[MAXE];
    Tfex__FeatureEntry *entp[MAXE];
    Tfex__Feature feat[MAXE];
    Tfex__FloatList fl[MAXE];
    Tfex__Int64List il[MAXE];
    Tfex__BytesList bl[MAXE];
    float fv[MAXE][MAXV];
    int64_t iv[MAXE][MAXV];
    ProtobufCBinaryData bv[MAXE][MAXV];
    uint8_t bb[MAXE][MAXV][12];
    char key[MAXE][24];
} rand_example_t;

static float rand_float(void)
{
    static const float special[] = {0.0f,   -0.0f,         1.0f,           -1.0f,
                                    1e-45f, 3.4028235e38f, -3.4028235e38f, 1e9f};
    uint64_t r = rng() % 10;
    if (r < 3) {
        uint32_t u = (uint32_t)rng(); /* any bit pattern: NaNs, denormals, infinities */
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (r == 3) {
        switch (rng() % 4) {
        case 0:
            return NAN;
        case 1:
            return -NAN;
        case 2:
            return INFINITY;
        default:
            return -INFINITY;
        }
    }
    if (r == 4)
        return special[rng_below(sizeof(special) / sizeof(special[0]))];
    return (float)((int64_t)(rng() % 2000001) - 1000000) / 1000.0f;
}

static int64_t rand_int64(void)
{
    static const int64_t special[] = {0,    1,         -1,        127,           128,
                                      -128, INT64_MIN, INT64_MAX, INT64_MIN + 1, (int64_t)1 << 40};
    if (rng() % 8 == 0)
        return special[rng_below(sizeof(special) / sizeof(special[0]))];
    unsigned shift = (unsigned)(rng() % 64); /* separate statements: a fixed draw order */
    uint64_t v = rng() >> shift;
    return rng() & 1 ? -(int64_t)(v >> 1) : (int64_t)v;
}

static void rand_key(char *key, size_t cap)
{
    if (rng() % 10 < 7) {
        snprintf(key, cap, "f%u", (unsigned)(rng() % 40)); /* f30..f39 not projected */
        return;
    }
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789_/.-";
    size_t len = 1 + rng_below(cap - 2);
    for (size_t i = 0; i < len; i++)
        key[i] = alphabet[rng_below(sizeof(alphabet) - 1)];
    key[len] = '\0';
}

static void rand_example_fill(rand_example_t *r)
{
    size_t ne = rng_below(MAXE + 1);

    memset(r, 0, sizeof(*r));
    r->ex = (Tfex__Example)TFEX__EXAMPLE__INIT;
    r->fs = (Tfex__Features)TFEX__FEATURES__INIT;
    if (rng() % 30 == 0)
        return; /* no features at all */
    r->ex.features = &r->fs;
    r->fs.n_feature = ne;
    r->fs.feature = r->entp;
    for (size_t i = 0; i < ne; i++) {
        Tfex__FeatureEntry *e = &r->ent[i];
        Tfex__Feature *f = &r->feat[i];
        size_t nv = rng() % 5 == 0 ? 0 : 1 + rng_below(MAXV);

        *e = (Tfex__FeatureEntry)TFEX__FEATURE_ENTRY__INIT;
        *f = (Tfex__Feature)TFEX__FEATURE__INIT;
        r->entp[i] = e;
        rand_key(r->key[i], sizeof(r->key[i]));
        e->key = r->key[i];
        uint64_t kind = rng() % 20;
        if (kind == 0)
            continue; /* entry without a value */
        e->value = f;
        if (kind == 1)
            continue; /* value with no kind */
        if (kind < 6) {
            r->bl[i] = (Tfex__BytesList)TFEX__BYTES_LIST__INIT;
            for (size_t j = 0; j < nv; j++) {
                size_t len = rng_below(sizeof(r->bb[i][j]) + 1);
                for (size_t k = 0; k < len; k++)
                    r->bb[i][j][k] = (uint8_t)rng();
                r->bv[i][j].data = r->bb[i][j];
                r->bv[i][j].len = len;
            }
            r->bl[i].n_value = nv;
            r->bl[i].value = r->bv[i];
            f->kind_case = TFEX__FEATURE__KIND_BYTES_LIST;
            f->bytes_list = &r->bl[i];
        } else if (kind < 13) {
            r->fl[i] = (Tfex__FloatList)TFEX__FLOAT_LIST__INIT;
            for (size_t j = 0; j < nv; j++)
                r->fv[i][j] = rand_float();
            r->fl[i].n_value = nv;
            r->fl[i].value = r->fv[i];
            f->kind_case = TFEX__FEATURE__KIND_FLOAT_LIST;
            f->float_list = &r->fl[i];
        } else {
            r->il[i] = (Tfex__Int64List)TFEX__INT64_LIST__INIT;
            for (size_t j = 0; j < nv; j++)
                r->iv[i][j] = rand_int64();
            r->il[i].n_value = nv;
            r->il[i].value = r->iv[i];
            f->kind_case = TFEX__FEATURE__KIND_INT64_LIST;
            f->int64_list = &r->il[i];
        }
    }
}

static uint8_t *pack_example(const Tfex__Example *ex, size_t *len)
{
    *len = tfex__example__get_packed_size(ex);
    uint8_t *buf = malloc(*len ? *len : 1);
    assert_non_null(buf);
    assert_int_equal(tfex__example__pack(ex, buf), *len);
    return buf;
}

/* 30 projected names f0..f29 (f30..f39 appear in records but are not
 * projected) and some that never appear. */
#define NPROJ 33
static char proj_name_buf[NPROJ][16];
static const char *proj_names[NPROJ];

static dpp_projection_t *make_test_projection(void)
{
    dpp_projection_t *p;
    for (int i = 0; i < 30; i++) {
        snprintf(proj_name_buf[i], sizeof(proj_name_buf[i]), "f%d", i);
        proj_names[i] = proj_name_buf[i];
    }
    proj_names[30] = "missing";
    proj_names[31] = "f";
    proj_names[32] = "f300";
    assert_int_equal(dpp_projection_new(&p, proj_names, NPROJ), 0);
    assert_int_equal(dpp_projection_size(p), NPROJ);
    return p;
}

static void test_random_examples(void **state)
{
    dpp_projection_t *proj = make_test_projection();
    rand_example_t *r = malloc(sizeof(*r));
    dpp_feat_ref_t out[NPROJ];
    size_t present = 0, kinds[4] = {0};

    (void)state;
    assert_non_null(r);
    rng_state = 42;
    for (int iter = 0; iter < 4000; iter++) {
        size_t len;
        uint8_t *copy;

        rand_example_fill(r);
        uint8_t *buf = pack_example(&r->ex, &len);
        assert_int_equal(decode_exact(proj, buf, len, out, &copy), 0);
        Tfex__Example *ex = tfex__example__unpack(NULL, len, buf);
        assert_non_null(ex);
        for (size_t i = 0; i < NPROJ; i++) {
            int res = compare_feature(&out[i], ex, proj_names[i]);
            if (res != CMP_OK)
                fail_msg("iteration %d, feature %s: %s", iter, proj_names[i],
                         res == CMP_MISMATCH ? "mismatch" : "rejected");
            if (out[i].kind != DPP_FEAT_ABSENT)
                present++;
            kinds[out[i].kind]++;
        }
        tfex__example__free_unpacked(ex, NULL);
        free(copy);
        free(buf);
    }
    print_message("random examples: %zu projected features present (bytes %zu, float %zu, "
                  "int64 %zu)\n",
                  present, kinds[1], kinds[2], kinds[3]);
    assert_true(kinds[1] > 1000 && kinds[2] > 1000 && kinds[3] > 1000);
    free(r);
    dpp_projection_free(proj);
}

/* The Criteo-like layout dpp-gen writes: 40 names, all projected. */
static void test_criteo_projection(void **state)
{
    const char *names[40];
    char buf[40][8];
    Tfex__FeatureEntry ent[40], *entp[40];
    Tfex__Feature feat[40];
    Tfex__FloatList fl[40];
    Tfex__Int64List il[40];
    float fv[40];
    int64_t iv[40][8];
    dpp_projection_t *proj;
    dpp_feat_ref_t out[40];

    (void)state;
    rng_state = 7;
    for (int i = 0; i < 40; i++) {
        if (i == 0)
            snprintf(buf[i], sizeof(buf[i]), "row_id");
        else if (i == 1)
            snprintf(buf[i], sizeof(buf[i]), "label");
        else if (i < 15)
            snprintf(buf[i], sizeof(buf[i]), "i%d", i - 1);
        else
            snprintf(buf[i], sizeof(buf[i]), "c%d", i - 14);
        names[i] = buf[i];
    }
    assert_string_equal(names[14], "i13");
    assert_string_equal(names[39], "c25");
    for (int i = 0; i < 40; i++) {
        ent[i] = (Tfex__FeatureEntry)TFEX__FEATURE_ENTRY__INIT;
        feat[i] = (Tfex__Feature)TFEX__FEATURE__INIT;
        ent[i].key = buf[i];
        ent[i].value = &feat[i];
        entp[i] = &ent[i];
        if (i >= 2 && i < 15) {
            fl[i] = (Tfex__FloatList)TFEX__FLOAT_LIST__INIT;
            fv[i] = rand_float();
            fl[i].n_value = 1;
            fl[i].value = &fv[i];
            feat[i].kind_case = TFEX__FEATURE__KIND_FLOAT_LIST;
            feat[i].float_list = &fl[i];
        } else {
            il[i] = (Tfex__Int64List)TFEX__INT64_LIST__INIT;
            il[i].n_value = 1 + rng_below(8);
            for (size_t j = 0; j < il[i].n_value; j++)
                iv[i][j] = (int64_t)(rng() >> 24);
            il[i].value = iv[i];
            feat[i].kind_case = TFEX__FEATURE__KIND_INT64_LIST;
            feat[i].int64_list = &il[i];
        }
    }
    Tfex__Features fs = TFEX__FEATURES__INIT;
    Tfex__Example ex = TFEX__EXAMPLE__INIT;
    fs.n_feature = 40;
    fs.feature = entp;
    ex.features = &fs;

    /* Projected in reverse, so index i of the result is names[39 - i]. */
    const char *rev[40];
    for (int i = 0; i < 40; i++)
        rev[i] = names[39 - i];
    assert_int_equal(dpp_projection_new(&proj, rev, 40), 0);
    size_t len;
    uint8_t *rec = pack_example(&ex, &len);
    uint8_t *copy;
    assert_int_equal(decode_exact(proj, rec, len, out, &copy), 0);
    for (int i = 0; i < 40; i++) {
        int src = 39 - i;
        size_t n;
        if (src >= 2 && src < 15) {
            float f;
            assert_int_equal(out[i].kind, DPP_FEAT_FLOAT);
            assert_int_equal(dpp_feat_floats(&out[i], &f, 1, &n), 0);
            assert_int_equal(n, 1);
            assert_memory_equal(&f, &fv[src], 4);
        } else {
            int64_t v[8];
            assert_int_equal(out[i].kind, DPP_FEAT_INT64);
            assert_int_equal(dpp_feat_int64s(&out[i], v, 8, &n), 0);
            assert_int_equal(n, il[src].n_value);
            assert_memory_equal(v, iv[src], n * 8);
        }
    }
    free(copy);
    free(rec);
    dpp_projection_free(proj);
}

static const char *const corner_names[] = {"a", "b", "c", "d", "ab", "abc"};
#define NCORNER (sizeof(corner_names) / sizeof(corner_names[0]))

static dpp_projection_t *corner_projection(void)
{
    dpp_projection_t *p;
    assert_int_equal(dpp_projection_new(&p, corner_names, NCORNER), 0);
    return p;
}

static void test_unpacked_lists(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t fl = {0}, il = {0}, f1 = {0}, f2 = {0}, fs = {0}, ex = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    float fv[4];
    int64_t iv[4];
    size_t n;

    (void)state;
    w_float(&fl, 1, 1.5f);
    w_float(&fl, 1, -2.25f);
    w_float(&fl, 1, INFINITY);
    w_varint(&il, 0x08);
    w_varint(&il, 5);
    w_tag(&il, 1, 0);
    w_varint(&il, (uint64_t)-1); /* 10 bytes */
    w_tag(&il, 1, 0);
    w_varint(&il, (uint64_t)INT64_MIN);
    w_feature(&f1, 2, &fl);
    w_feature(&f2, 3, &il);
    w_entry(&fs, "a", &f1);
    w_entry(&fs, "b", &f2);
    w_example(&ex, &fs);

    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(out[0].kind, DPP_FEAT_FLOAT);
    assert_int_equal(dpp_feat_count(&out[0], DPP_FEAT_FLOAT, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(dpp_feat_floats(&out[0], fv, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_true(fv[0] == 1.5f && fv[1] == -2.25f && isinf(fv[2]) && fv[2] > 0);
    assert_int_equal(out[1].kind, DPP_FEAT_INT64);
    assert_int_equal(dpp_feat_int64s(&out[1], iv, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_true(iv[0] == 5 && iv[1] == -1 && iv[2] == INT64_MIN);
    assert_int_equal(out[2].kind, DPP_FEAT_ABSENT);
    free(copy);
    check_wire_against_ref(proj, corner_names, NCORNER, &ex);
    dpp_projection_free(proj);
}

static void test_mixed_packed_unpacked(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t fl = {0}, il = {0}, f1 = {0}, f2 = {0}, fs = {0}, ex = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    const float pf1[] = {1, 2}, pf2[] = {4};
    const int64_t pi1[] = {10, -20}, pi2[] = {INT64_MAX, 0};
    float fv[8];
    int64_t iv[8];
    size_t n;

    (void)state;
    w_packed_floats(&fl, pf1, 2);
    w_float(&fl, 1, 3);
    w_packed_floats(&fl, pf2, 1);
    w_packed_floats(&fl, NULL, 0); /* an empty packed run */
    w_float(&fl, 1, 5);
    w_packed_int64s(&il, pi1, 2);
    w_tag(&il, 1, 0);
    w_varint(&il, 30);
    w_packed_int64s(&il, pi2, 2);
    w_feature(&f1, 2, &fl);
    w_feature(&f2, 3, &il);
    w_entry(&fs, "a", &f1);
    w_entry(&fs, "b", &f2);
    w_example(&ex, &fs);

    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(dpp_feat_floats(&out[0], fv, 8, &n), 0);
    assert_int_equal(n, 5);
    for (int i = 0; i < 5; i++)
        assert_true(fv[i] == (float)(i + 1));
    /* cap cuts a packed run in the middle: the count is still the whole list's */
    fv[1] = -1;
    assert_int_equal(dpp_feat_floats(&out[0], fv, 1, &n), 0);
    assert_int_equal(n, 5);
    assert_true(fv[0] == 1.0f && fv[1] == -1.0f);
    assert_int_equal(dpp_feat_floats(&out[0], fv, 0, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(dpp_feat_int64s(&out[1], iv, 8, &n), 0);
    assert_int_equal(n, 5);
    assert_true(iv[0] == 10 && iv[1] == -20 && iv[2] == 30 && iv[3] == INT64_MAX && iv[4] == 0);
    assert_int_equal(dpp_feat_count(&out[1], DPP_FEAT_INT64, &n), 0);
    assert_int_equal(n, 5);
    free(copy);
    check_wire_against_ref(proj, corner_names, NCORNER, &ex);
    dpp_projection_free(proj);
}

static void test_duplicate_key_later_wins(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t l1 = {0}, l2 = {0}, l3 = {0}, f1 = {0}, f2 = {0}, f3 = {0}, fs = {0}, ex = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    const int64_t iv[] = {1, 2};
    const float fv[] = {3.5f};
    float got;
    size_t n;

    (void)state;
    w_packed_int64s(&l1, iv, 2);
    w_packed_floats(&l2, fv, 1);
    w_str(&l3, 1, "xyz");
    w_feature(&f1, 3, &l1);
    w_feature(&f2, 2, &l2);
    w_feature(&f3, 1, &l3);
    w_entry(&fs, "a", &f1);
    w_entry(&fs, "b", &f3);
    w_entry(&fs, "a", &f2);
    w_entry(&fs, "b", &f1);
    w_entry(&fs, "c", &f1);
    w_entry(&fs, "c", &f3);
    w_example(&ex, &fs);

    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(out[0].kind, DPP_FEAT_FLOAT);
    assert_int_equal(dpp_feat_floats(&out[0], &got, 1, &n), 0);
    assert_true(n == 1 && got == 3.5f);
    assert_int_equal(out[1].kind, DPP_FEAT_INT64);
    assert_int_equal(out[2].kind, DPP_FEAT_BYTES);
    assert_int_equal(dpp_feat_count(&out[2], DPP_FEAT_BYTES, &n), 0);
    assert_int_equal(n, 1);
    free(copy);
    check_wire_against_ref(proj, corner_names, NCORNER, &ex);
    dpp_projection_free(proj);
}

static void test_value_before_key(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t l = {0}, f = {0}, e = {0}, fs = {0}, ex = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    const int64_t iv[] = {42};
    int64_t got;
    size_t n;

    (void)state;
    w_packed_int64s(&l, iv, 1);
    w_feature(&f, 3, &l);
    w_sub(&e, 2, &f);
    w_str(&e, 1, "ab");
    w_sub(&fs, 1, &e);
    /* A key given twice in one entry: the last one counts. */
    e.n = 0;
    w_str(&e, 1, "abc");
    w_sub(&e, 2, &f);
    w_str(&e, 1, "d");
    w_sub(&fs, 1, &e);
    w_example(&ex, &fs);

    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(out[4].kind, DPP_FEAT_INT64); /* "ab" */
    assert_int_equal(dpp_feat_int64s(&out[4], &got, 1, &n), 0);
    assert_true(n == 1 && got == 42);
    assert_int_equal(out[5].kind, DPP_FEAT_ABSENT); /* "abc" renamed to "d" */
    assert_int_equal(out[3].kind, DPP_FEAT_INT64);
    free(copy);
    check_wire_against_ref(proj, corner_names, NCORNER, &ex);
    dpp_projection_free(proj);
}

static void test_unknown_fields_everywhere(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t fl = {0}, il = {0}, bl = {0}, f1 = {0}, f2 = {0}, f3 = {0}, e = {0}, fs = {0}, ex = {0},
           junk = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    float fv[4];
    int64_t iv[4];
    size_t n;

    (void)state;
    w_str(&junk, 1, "nested junk");
    /* FloatList: unknown fields of every wire type around the values. */
    w_tag(&fl, 2, 0);
    w_varint(&fl, 99);
    w_float(&fl, 1, 1.0f);
    w_fixed64(&fl, 3, 0x1122334455667788ull);
    w_sub(&fl, 4, &junk);
    w_fixed32(&fl, 5, 7);
    w_float(&fl, 1, 2.0f);
    /* Int64List, with a varint field number > 15 (two-byte tag). */
    w_fixed32(&il, 2, 1);
    w_tag(&il, 1, 0);
    w_varint(&il, 7);
    w_sub(&il, 1000, &junk);
    w_tag(&il, 536870911, 0); /* the largest field number */
    w_varint(&il, 1);
    /* BytesList */
    w_tag(&bl, 9, 0);
    w_varint(&bl, 1);
    w_str(&bl, 1, "v");
    /* Feature: unknown before and after the list. */
    w_tag(&f1, 7, 0);
    w_varint(&f1, 300);
    w_feature(&f1, 2, &fl);
    w_sub(&f1, 4, &junk);
    w_feature(&f2, 3, &il);
    w_fixed64(&f2, 12, 5);
    w_fixed32(&f3, 6, 5);
    w_feature(&f3, 1, &bl);
    /* Entry: unknown fields between key and value. */
    w_str(&e, 1, "a");
    w_tag(&e, 3, 0);
    w_varint(&e, 1);
    w_sub(&e, 4, &junk);
    w_sub(&e, 2, &f1);
    w_fixed32(&e, 5, 0);
    /* Features and Example */
    w_tag(&fs, 2, 0);
    w_varint(&fs, 3);
    w_sub(&fs, 1, &e);
    w_fixed64(&fs, 3, 0);
    w_entry(&fs, "b", &f2);
    w_sub(&fs, 100, &junk);
    w_entry(&fs, "c", &f3);
    w_tag(&ex, 2, 0);
    w_varint(&ex, 1);
    w_fixed32(&ex, 3, 0);
    w_example(&ex, &fs);
    w_sub(&ex, 15, &junk);
    w_fixed64(&ex, 4, 0);

    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(dpp_feat_floats(&out[0], fv, 4, &n), 0);
    assert_true(n == 2 && fv[0] == 1.0f && fv[1] == 2.0f);
    assert_int_equal(dpp_feat_int64s(&out[1], iv, 4, &n), 0);
    assert_true(n == 1 && iv[0] == 7);
    assert_int_equal(dpp_feat_count(&out[2], DPP_FEAT_BYTES, &n), 0);
    assert_int_equal(n, 1);
    free(copy);
    check_wire_against_ref(proj, corner_names, NCORNER, &ex);
    dpp_projection_free(proj);
}

static void test_empty_vs_absent(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t empty = {0}, ff = {0}, fi = {0}, fnone = {0}, fs = {0}, ex = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    float fv[1];
    size_t n = 99;

    (void)state;
    w_feature(&ff, 2, &empty); /* float_list {} */
    w_feature(&fi, 3, &empty); /* int64_list {} */
    w_entry(&fs, "a", &ff);
    w_entry(&fs, "b", &fi);
    w_entry(&fs, "c", &fnone); /* value with no kind */
    w_entry(&fs, "ab", NULL);  /* no value at all */
    w_example(&ex, &fs);

    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(out[0].kind, DPP_FEAT_FLOAT);
    assert_int_equal(dpp_feat_count(&out[0], DPP_FEAT_FLOAT, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(dpp_feat_floats(&out[0], fv, 1, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(out[1].kind, DPP_FEAT_INT64);
    assert_int_equal(dpp_feat_count(&out[1], DPP_FEAT_INT64, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(out[2].kind, DPP_FEAT_BYTES);
    assert_int_equal(out[2].list_len, 0);
    assert_int_equal(out[4].kind, DPP_FEAT_BYTES);
    assert_int_equal(out[4].list_len, 0);
    assert_int_equal(out[3].kind, DPP_FEAT_ABSENT);
    /* Asking for the wrong kind, or for an absent feature. */
    assert_int_equal(dpp_feat_count(&out[3], DPP_FEAT_FLOAT, &n), DPP_ETYPE);
    assert_int_equal(dpp_feat_count(&out[2], DPP_FEAT_FLOAT, &n), DPP_ETYPE);
    assert_int_equal(dpp_feat_floats(&out[1], fv, 1, &n), DPP_ETYPE);
    assert_int_equal(n, 0);
    assert_int_equal(dpp_feat_int64s(&out[0], NULL, 0, &n), DPP_ETYPE);
    assert_int_equal(dpp_feat_count(&out[0], DPP_FEAT_ABSENT, &n), DPP_EINVAL);
    free(copy);
    check_wire_against_ref(proj, corner_names, NCORNER, &ex);

    /* Empty records and an Example without features. */
    assert_int_equal(dpp_example_decode(proj, NULL, 0, out), 0);
    for (size_t i = 0; i < NCORNER; i++)
        assert_int_equal(out[i].kind, DPP_FEAT_ABSENT);
    ex.n = 0;
    fs.n = 0;
    w_example(&ex, &fs);
    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    for (size_t i = 0; i < NCORNER; i++)
        assert_int_equal(out[i].kind, DPP_FEAT_ABSENT);
    free(copy);
    dpp_projection_free(proj);
}

/* Repeated message fields merge: Example.features twice is one map; one
 * entry's value twice merges the Features (a different kind replaces). */
static void test_merged_occurrences(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t li = {0}, lf = {0}, fi = {0}, ff = {0}, fs1 = {0}, fs2 = {0}, e = {0}, ex = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    const int64_t iv[] = {1, 2, 3};
    const float fv[] = {9};

    (void)state;
    w_packed_int64s(&li, iv, 3);
    w_packed_floats(&lf, fv, 1);
    w_feature(&fi, 3, &li);
    w_feature(&ff, 2, &lf);
    w_entry(&fs1, "a", &fi);
    w_entry(&fs1, "b", &fi);
    w_entry(&fs2, "b", &ff);
    /* c: value {int64} then value {float} then an empty value */
    w_str(&e, 1, "c");
    w_sub(&e, 2, &fi);
    w_sub(&e, 2, &ff);
    w_lenfield(&e, 2, NULL, 0);
    w_sub(&fs2, 1, &e);
    w_example(&ex, &fs1);
    w_example(&ex, &fs2);

    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(out[0].kind, DPP_FEAT_INT64);
    assert_int_equal(out[1].kind, DPP_FEAT_FLOAT);
    assert_int_equal(out[2].kind, DPP_FEAT_FLOAT);
    free(copy);
    check_wire_against_ref(proj, corner_names, NCORNER, &ex);

    /* The same list twice in one Feature would need concatenation. */
    wire_t f2 = {0}, fs = {0};
    w_feature(&f2, 3, &li);
    w_feature(&f2, 3, &li);
    w_entry(&fs, "a", &f2);
    ex.n = 0;
    w_example(&ex, &fs);
    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), DPP_EEXAMPLE);
    free(copy);
    /* ... but not when the key is not projected. */
    fs.n = 0;
    w_entry(&fs, "zzz", &f2);
    ex.n = 0;
    w_example(&ex, &fs);
    assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
    free(copy);
    dpp_projection_free(proj);
}

static void expect_bad_record(dpp_projection_t *proj, const wire_t *w, const char *what)
{
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    int rc = decode_exact(proj, w->b, w->n, out, &copy);
    free(copy);
    if (rc != DPP_EEXAMPLE)
        fail_msg("%s: got %d, want DPP_EEXAMPLE", what, rc);
}

/* Wraps a Feature body into entry "a" → Features → Example. */
static void wrap_feature(wire_t *ex, const wire_t *feature)
{
    wire_t fs = {0};
    ex->n = 0;
    w_entry(&fs, "a", feature);
    w_example(ex, &fs);
}

static void test_malformed_records(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t ex = {0}, f = {0}, fs = {0}, e = {0};

    (void)state;
    /* Truncated tag and truncated varint at the top level. */
    ex.n = 0;
    w_byte(&ex, 0x80);
    expect_bad_record(proj, &ex, "truncated tag");
    ex.n = 0;
    w_tag(&ex, 2, 0);
    w_byte(&ex, 0xff);
    expect_bad_record(proj, &ex, "truncated varint");
    /* An 11-byte varint. */
    ex.n = 0;
    w_tag(&ex, 2, 0);
    for (int i = 0; i < 10; i++)
        w_byte(&ex, 0x81);
    w_byte(&ex, 0x01);
    expect_bad_record(proj, &ex, "11-byte varint");
    /* Length past the end, and a huge length. */
    ex.n = 0;
    w_tag(&ex, 1, 2);
    w_varint(&ex, 5);
    w_raw(&ex, "abcd", 4);
    expect_bad_record(proj, &ex, "length past end");
    ex.n = 0;
    w_tag(&ex, 9, 2);
    w_varint(&ex, 1ull << 63);
    expect_bad_record(proj, &ex, "huge length");
    /* Short fixed-width fields. */
    ex.n = 0;
    w_tag(&ex, 9, 5);
    w_raw(&ex, "abc", 3);
    expect_bad_record(proj, &ex, "short fixed32");
    ex.n = 0;
    w_tag(&ex, 9, 1);
    w_raw(&ex, "abcdefg", 7);
    expect_bad_record(proj, &ex, "short fixed64");
    /* Field number 0, and a tag past 32 bits. */
    ex.n = 0;
    w_tag(&ex, 0, 0);
    w_varint(&ex, 1);
    expect_bad_record(proj, &ex, "field 0");
    ex.n = 0;
    w_varint(&ex, (1ull << 35) | 0);
    w_varint(&ex, 1);
    expect_bad_record(proj, &ex, "tag over 32 bits");
    /* Group and undefined wire types at every message level. */
    for (unsigned wt = 3; wt <= 7; wt++) {
        if (wt == 5)
            continue;
        char what[64];
        ex.n = 0;
        w_tag(&ex, 5, wt);
        w_varint(&ex, 0);
        snprintf(what, sizeof(what), "wire type %u in Example", wt);
        expect_bad_record(proj, &ex, what);

        fs.n = 0;
        w_tag(&fs, 5, wt);
        ex.n = 0;
        w_example(&ex, &fs);
        snprintf(what, sizeof(what), "wire type %u in Features", wt);
        expect_bad_record(proj, &ex, what);

        e.n = 0;
        w_str(&e, 1, "zzz"); /* even in an entry that is not projected */
        w_tag(&e, 5, wt);
        fs.n = 0;
        w_sub(&fs, 1, &e);
        ex.n = 0;
        w_example(&ex, &fs);
        snprintf(what, sizeof(what), "wire type %u in an entry", wt);
        expect_bad_record(proj, &ex, what);

        f.n = 0;
        w_tag(&f, 5, wt);
        wrap_feature(&ex, &f);
        snprintf(what, sizeof(what), "wire type %u in a Feature", wt);
        expect_bad_record(proj, &ex, what);
    }
    /* Errors inside a projected Feature. */
    f.n = 0;
    w_tag(&f, 2, 2);
    w_varint(&f, 10);
    w_raw(&f, "abc", 3);
    wrap_feature(&ex, &f);
    expect_bad_record(proj, &ex, "list length past the Feature");
    /* Entry whose key runs past its end. */
    e.n = 0;
    w_tag(&e, 1, 2);
    w_varint(&e, 9);
    w_raw(&e, "ab", 2);
    fs.n = 0;
    w_sub(&fs, 1, &e);
    ex.n = 0;
    w_example(&ex, &fs);
    expect_bad_record(proj, &ex, "key past the entry");
    dpp_projection_free(proj);
}

/* List contents are checked by the accessors, not by the decoder. */
static void test_malformed_lists(void **state)
{
    dpp_projection_t *proj = corner_projection();
    wire_t ex = {0}, f = {0};
    dpp_feat_ref_t out[NCORNER];
    uint8_t *copy;
    float fv[8];
    int64_t iv[8];
    size_t n = 99;

    (void)state;
    struct {
        const char *what;
        unsigned kind;
        uint8_t bytes[16];
        size_t len;
    } cases[] = {
        {"packed floats, 5 bytes", 2, {0x0a, 5, 0, 0, 0x80, 0x3f, 0}, 7},
        {"packed floats, 3 bytes", 2, {0x0a, 3, 1, 2, 3}, 5},
        {"unpacked float cut short", 2, {0x0d, 0, 0, 0x80}, 4},
        {"packed int64, varint cut", 3, {0x0a, 2, 0x05, 0x85}, 4},
        {"packed int64, 11-byte varint",
         3,
         {0x0a, 11, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x01},
         13},
        {"unpacked int64 cut", 3, {0x08, 0xff, 0xff}, 3},
        {"packed length past list", 3, {0x0a, 9, 1, 2}, 4},
        {"group in a FloatList", 2, {0x13, 0x14}, 2},
        {"wire type 7 in an Int64List", 3, {0x0f, 0}, 2},
        {"field 0 in an Int64List", 3, {0x00, 0}, 2},
        {"truncated tag in a FloatList", 2, {0x8d}, 1},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        f.n = 0;
        w_lenfield(&f, cases[i].kind, cases[i].bytes, cases[i].len);
        wrap_feature(&ex, &f);
        assert_int_equal(decode_exact(proj, ex.b, ex.n, out, &copy), 0);
        assert_int_equal(out[0].kind, cases[i].kind);
        int rc = dpp_feat_count(&out[0], (dpp_feat_kind_t)cases[i].kind, &n);
        if (rc != DPP_EEXAMPLE)
            fail_msg("%s: count gave %d", cases[i].what, rc);
        assert_int_equal(n, 0);
        if (cases[i].kind == 2)
            rc = dpp_feat_floats(&out[0], fv, 8, &n);
        else
            rc = dpp_feat_int64s(&out[0], iv, 8, &n);
        if (rc != DPP_EEXAMPLE)
            fail_msg("%s: read gave %d", cases[i].what, rc);
        /* ... even when cap stops the copy before the bad part. */
        if (cases[i].kind == 2)
            rc = dpp_feat_floats(&out[0], fv, 0, &n);
        else
            rc = dpp_feat_int64s(&out[0], iv, 0, &n);
        assert_int_equal(rc, DPP_EEXAMPLE);
        free(copy);
    }
    dpp_projection_free(proj);
}

static void test_projection_contract(void **state)
{
    dpp_projection_t *p = (dpp_projection_t *)&p;
    const char *dup[] = {"a", "b", "a"};
    const char *empty[] = {"a", ""};
    const char *null_name[] = {"a", NULL};
    const char *prefixes[] = {"a", "ab", "abc", "abcd", "b", "ba"};
    dpp_feat_ref_t out[6];
    wire_t ex = {0}, fs = {0}, f = {0}, l = {0};
    uint8_t *copy;

    (void)state;
    assert_int_equal(dpp_projection_new(&p, dup, 3), DPP_EINVAL);
    assert_null(p);
    assert_int_equal(dpp_projection_new(&p, empty, 2), DPP_EINVAL);
    assert_null(p);
    assert_int_equal(dpp_projection_new(&p, null_name, 2), DPP_EINVAL);
    assert_null(p);
    dpp_projection_free(NULL);

    /* No names: the record is still walked and checked. */
    assert_int_equal(dpp_projection_new(&p, NULL, 0), 0);
    assert_int_equal(dpp_projection_size(p), 0);
    w_str(&l, 1, "x");
    w_feature(&f, 1, &l);
    w_entry(&fs, "ab", &f);
    w_example(&ex, &fs);
    assert_int_equal(decode_exact(p, ex.b, ex.n, out, &copy), 0);
    free(copy);
    dpp_projection_free(p);

    /* Names that prefix one another stay apart; the names are copied. */
    char buf[6][8];
    const char *names[6];
    for (int i = 0; i < 6; i++) {
        snprintf(buf[i], sizeof(buf[i]), "%s", prefixes[i]);
        names[i] = buf[i];
    }
    assert_int_equal(dpp_projection_new(&p, names, 6), 0);
    memset(buf, 'z', sizeof(buf));
    fs.n = 0;
    ex.n = 0;
    w_entry(&fs, "abc", &f);
    w_entry(&fs, "b", NULL);
    w_entry(&fs, "abcde", &f);
    w_example(&ex, &fs);
    assert_int_equal(decode_exact(p, ex.b, ex.n, out, &copy), 0);
    assert_int_equal(out[0].kind, DPP_FEAT_ABSENT);
    assert_int_equal(out[1].kind, DPP_FEAT_ABSENT);
    assert_int_equal(out[2].kind, DPP_FEAT_BYTES);
    assert_int_equal(out[2].list_len, l.n);
    assert_int_equal(out[3].kind, DPP_FEAT_ABSENT);
    assert_int_equal(out[4].kind, DPP_FEAT_BYTES);
    assert_int_equal(out[4].list_len, 0);
    assert_int_equal(out[5].kind, DPP_FEAT_ABSENT);
    free(copy);
    dpp_projection_free(p);

    /* Many names: every one is found. */
    enum { MANY = 500 };
    static char many_buf[MANY][12];
    static const char *many[MANY];
    for (int i = 0; i < MANY; i++) {
        snprintf(many_buf[i], sizeof(many_buf[i]), "n%d", i * 7919);
        many[i] = many_buf[i];
    }
    assert_int_equal(dpp_projection_new(&p, many, MANY), 0);
    static dpp_feat_ref_t many_out[MANY];
    static wire_t big;
    wire_t tiny = {0}, fsb;
    w_feature(&tiny, 3, &(wire_t){0});
    for (int chunk = 0; chunk < MANY; chunk += 100) {
        memset(&fsb, 0, sizeof(fsb));
        big.n = 0;
        for (int i = chunk; i < chunk + 100; i++)
            w_entry(&fsb, many[i], &tiny);
        w_example(&big, &fsb);
        assert_int_equal(decode_exact(p, big.b, big.n, many_out, &copy), 0);
        for (int i = 0; i < MANY; i++)
            assert_int_equal(many_out[i].kind,
                             i >= chunk && i < chunk + 100 ? DPP_FEAT_INT64 : DPP_FEAT_ABSENT);
        free(copy);
    }
    dpp_projection_free(p);
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a,
                                          0x0d, 0x12, 0x1a, 0x0b, 0x0c, 0x0f, 0x22};
    int nmut = 1 + (int)rng_below(3);

    for (int m = 0; m < nmut; m++) {
        size_t pos = rng_below(len);
        switch (rng() % 7) {
        case 0:
            if (len)
                buf[pos] ^= (uint8_t)(1u << (rng() % 8));
            break;
        case 1:
            if (len)
                buf[pos] = (uint8_t)rng();
            break;
        case 2:
            len = rng_below(len + 1);
            break;
        case 3:
            if (len < cap) {
                memmove(buf + pos + 1, buf + pos, len - pos);
                buf[pos] = (uint8_t)rng();
                len++;
            }
            break;
        case 4:
            if (len) {
                memmove(buf + pos, buf + pos + 1, len - pos - 1);
                len--;
            }
            break;
        case 5:
            if (len)
                buf[pos] = interesting[rng_below(sizeof(interesting))];
            break;
        default: {
            /* Copy a chunk elsewhere: makes repeated and merged fields. */
            size_t from = rng_below(len), n = rng_below(len - from + 1);
            if (n > 0 && len + n <= cap) {
                memmove(buf + pos + n, buf + pos, len - pos);
                memmove(buf + pos, buf + (from >= pos ? from + n : from), n);
                len += n;
            }
            break;
        }
        }
    }
    return len;
}

/* A name followed by NUL in the record: protobuf-c's C strings end keys
 * there, so "ab\0x" is "ab" to it and not to a length-aware parser. */
static int has_nul_after(const uint8_t *rec, size_t len, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i + nl < len; i++)
        if (rec[i + nl] == 0 && memcmp(rec + i, name, nl) == 0)
            return 1;
    return 0;
}

static void test_mutated_records(void **state)
{
    dpp_projection_t *proj = make_test_projection();
    rand_example_t *r = malloc(sizeof(*r));
    dpp_feat_ref_t out[NPROJ];
    size_t both_ok = 0, dec_only = 0, ref_only = 0, both_bad = 0, compared = 0, rejected = 0,
           nul_skips = 0;
    enum { ITER = 30000, CAP = 16384 };

    (void)state;
    assert_non_null(r);
    rng_state = 1234;
    for (int iter = 0; iter < ITER; iter++) {
        size_t len;
        rand_example_fill(r);
        uint8_t *orig = pack_example(&r->ex, &len);
        if (len > CAP / 2)
            len = CAP / 2;
        uint8_t *buf = malloc(CAP);
        assert_non_null(buf);
        memcpy(buf, orig, len);
        len = mutate(buf, len, CAP);

        uint8_t *copy;
        int rc = decode_exact(proj, buf, len, out, &copy);
        assert_true(rc == 0 || rc == DPP_EEXAMPLE);
        Tfex__Example *ex = tfex__example__unpack(NULL, len, buf);
        if (rc == 0) {
            /* The accessors must cope with whatever the decoder let through. */
            for (size_t i = 0; i < NPROJ; i++) {
                size_t n;
                float fv[64];
                int64_t iv[64];
                int c = dpp_feat_count(&out[i], DPP_FEAT_BYTES, &n);
                assert_true(c == 0 || c == DPP_ETYPE || c == DPP_EEXAMPLE);
                c = dpp_feat_floats(&out[i], fv, 64, &n);
                assert_true(c == 0 || c == DPP_ETYPE || c == DPP_EEXAMPLE);
                c = dpp_feat_int64s(&out[i], iv, 64, &n);
                assert_true(c == 0 || c == DPP_ETYPE || c == DPP_EEXAMPLE);
            }
        }
        if (rc == 0 && ex) {
            both_ok++;
            for (size_t i = 0; i < NPROJ; i++) {
                int res = compare_feature(&out[i], ex, proj_names[i]);
                if (res == CMP_REJECTED) {
                    rejected++;
                } else if (res == CMP_MISMATCH) {
                    if (!has_nul_after(buf, len, proj_names[i]))
                        fail_msg("iteration %d: feature %s disagrees with protobuf-c", iter,
                                 proj_names[i]);
                    nul_skips++;
                } else {
                    compared++;
                }
            }
        } else if (rc == 0) {
            dec_only++;
        } else if (ex) {
            ref_only++;
        } else {
            both_bad++;
        }
        tfex__example__free_unpacked(ex, NULL);
        free(copy);
        free(buf);
        free(orig);
    }
    print_message("mutated records: %d; both parse %zu, decoder only %zu, protobuf-c only %zu, "
                  "neither %zu; features agreeing %zu, list refused by accessor %zu, "
                  "NUL-in-key skips %zu\n",
                  ITER, both_ok, dec_only, ref_only, both_bad, compared, rejected, nul_skips);
    assert_true(both_ok > ITER / 10);
    free(r);
    dpp_projection_free(proj);
}

/* Lists handed over as they are by a source that is not tf.Example
 * (native = 1), and the string walk over both forms. */
static void test_native_lists(void **state)
{
    (void)state;
    float fv[3] = {1.5f, -2.0f, 3.25f}, fo[3];
    int64_t iv[2] = {-7, INT64_MAX}, io[2];
    size_t n;
    dpp_feat_ref_t f = {DPP_FEAT_FLOAT, (const uint8_t *)fv, sizeof fv, 1};
    assert_int_equal(dpp_feat_floats(&f, fo, 3, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(fo, fv, sizeof fv);
    assert_int_equal(dpp_feat_floats(&f, fo, 1, &n), 0); /* the count past cap */
    assert_int_equal(n, 3);
    assert_int_equal(dpp_feat_int64s(&f, io, 2, &n), DPP_ETYPE);
    dpp_feat_ref_t i = {DPP_FEAT_INT64, (const uint8_t *)iv, sizeof iv, 1};
    assert_int_equal(dpp_feat_int64s(&i, io, 2, &n), 0);
    assert_int_equal(n, 2);
    assert_true(io[0] == -7 && io[1] == INT64_MAX);
    assert_int_equal(dpp_feat_count(&i, DPP_FEAT_INT64, &n), 0);
    assert_int_equal(n, 2);
    i.list_len = 12; /* not whole values */
    assert_int_equal(dpp_feat_int64s(&i, io, 2, &n), DPP_EEXAMPLE);

    /* strings: host-order u32 length, bytes */
    uint8_t sv[4 + 3 + 4 + 0 + 4 + 2];
    uint32_t l3 = 3, l0 = 0, l2 = 2;
    memcpy(sv, &l3, 4);
    memcpy(sv + 4, "abc", 3);
    memcpy(sv + 7, &l0, 4);
    memcpy(sv + 11, &l2, 4);
    memcpy(sv + 15, "xy", 2);
    dpp_feat_ref_t b = {DPP_FEAT_BYTES, sv, sizeof sv, 1};
    assert_int_equal(dpp_feat_count(&b, DPP_FEAT_BYTES, &n), 0);
    assert_int_equal(n, 3);
    const char *want[] = {"abc", "", "xy"};
    size_t pos = 0, len, k = 0;
    const uint8_t *str;
    int rc;
    while ((rc = dpp_feat_bytes_next(&b, &pos, &str, &len)) == 1) {
        assert_true(k < 3);
        assert_int_equal(len, strlen(want[k]));
        assert_memory_equal(str, want[k], len);
        k++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(k, 3);
    b.list_len = sizeof sv - 1; /* the last string cut short */
    pos = 0;
    assert_int_equal(dpp_feat_bytes_next(&b, &pos, &str, &len), 1);
    assert_int_equal(dpp_feat_bytes_next(&b, &pos, &str, &len), 1);
    assert_int_equal(dpp_feat_bytes_next(&b, &pos, &str, &len), DPP_EEXAMPLE);
    assert_int_equal(dpp_feat_count(&b, DPP_FEAT_BYTES, &n), DPP_EEXAMPLE);

    /* a BytesList message: field 1 twice, an unknown field between */
    static const uint8_t msg[] = {0x0a, 0x02, 'h', 'i', 0x10, 0x05, 0x0a, 0x00};
    dpp_feat_ref_t m = {DPP_FEAT_BYTES, msg, sizeof msg, 0};
    pos = 0;
    assert_int_equal(dpp_feat_bytes_next(&m, &pos, &str, &len), 1);
    assert_true(len == 2 && memcmp(str, "hi", 2) == 0);
    assert_int_equal(dpp_feat_bytes_next(&m, &pos, &str, &len), 1);
    assert_int_equal(len, 0);
    assert_int_equal(dpp_feat_bytes_next(&m, &pos, &str, &len), 0);
    assert_int_equal(dpp_feat_bytes_next(&f, &pos, &str, &len), DPP_ETYPE);
}

/* Names longer than the 8 bytes a lookup compares at once, sharing those 8
 * (and lengths around 8): each is found, and a key that shares the first 8
 * bytes of a name but not the rest is not projected. */
static void test_long_names(void **state)
{
    const char *names[] = {"category_feature_1", "category_feature_2", "category_feature_10",
                           "abcdefgh",           "abcdefghi",          "abcdefg"};
    enum { NLONG = sizeof(names) / sizeof(names[0]) };
    const char *keys[] = {"category_feature_3", "category_feature_10", "abcdefgi",
                          "abcdefghi",          "category_feature_",   "abcdefg"};
    const int want[NLONG] = {-1, 2, -1, 4, -1, 5};
    dpp_projection_t *p;
    dpp_feat_ref_t out[NLONG];
    wire_t ex = {0}, fs = {0}, f = {0}, l = {0};
    uint8_t *copy;

    (void)state;
    assert_int_equal(dpp_projection_new(&p, names, NLONG), 0);
    w_str(&l, 1, "x");
    w_feature(&f, 1, &l);
    for (size_t i = 0; i < NLONG; i++)
        w_entry(&fs, keys[i], &f);
    w_example(&ex, &fs);
    assert_int_equal(decode_exact(p, ex.b, ex.n, out, &copy), 0);
    int found[NLONG] = {0};
    for (size_t i = 0; i < NLONG; i++)
        if (want[i] >= 0)
            found[want[i]] = 1;
    for (size_t i = 0; i < NLONG; i++)
        if ((out[i].kind != DPP_FEAT_ABSENT) != found[i])
            fail_msg("name %s: kind %d, expected %s", names[i], out[i].kind,
                     found[i] ? "present" : "absent");
    free(copy);
    dpp_projection_free(p);
}

/* Decodes one record of the keys keys[0..nk), each value a string naming
 * its key, with p (of names[0..nn)), and checks every name: present with
 * its own value, or absent. */
static void check_named_keys(dpp_projection_t *p, const char *const *keys, size_t nk,
                             const char *const *names, size_t nn, int round)
{
    static wire_t ex, fs;
    ex.n = fs.n = 0;
    wire_t *f = calloc(nk + 1, sizeof *f), *l = calloc(nk + 1, sizeof *l);
    dpp_feat_ref_t *out = calloc(nn, sizeof *out);
    assert_true(f && l && out);
    for (size_t k = 0; k < nk; k++) {
        w_str(&l[k], 1, keys[k]); /* each value names its key */
        w_feature(&f[k], 1, &l[k]);
        w_entry(&fs, keys[k], &f[k]);
    }
    w_example(&ex, &fs);
    uint8_t *copy;
    assert_int_equal(decode_exact(p, ex.b, ex.n, out, &copy), 0);
    for (size_t i = 0; i < nn; i++) {
        int present = 0;
        for (size_t k = 0; k < nk; k++)
            present |= strcmp(keys[k], names[i]) == 0;
        if (!present) {
            if (out[i].kind != DPP_FEAT_ABSENT)
                fail_msg("record %d: %s is absent but decoded", round, names[i]);
            continue;
        }
        size_t pos = 0, len = 0;
        const uint8_t *str = NULL;
        if (dpp_feat_bytes_next(&out[i], &pos, &str, &len) != 1)
            fail_msg("record %d: %s is present but not decoded", round, names[i]);
        if (len != strlen(names[i]) || memcmp(str, names[i], len) != 0)
            fail_msg("record %d: %s holds %.*s", round, names[i], (int)len, (const char *)str);
    }
    free(copy);
    free(f);
    free(l);
    free(out);
}

/* The decoder guesses each entry's name from the record before (the same
 * place held it there): records whose keys come in changing orders, with
 * names outside the projection between, decode as if each were the first. */
static void test_changing_key_order(void **state)
{
    const char *names[] = {"a", "bb", "ccc", "dddd", "long_name_one", "long_name_two"};
    enum { NN = sizeof(names) / sizeof(names[0]) };
    const char *orders[4][8] = {
        {"a", "bb", "ccc", "dddd", "long_name_one", "long_name_two", NULL},
        {"long_name_two", "x", "dddd", "a", "long_name_one", "bb", "ccc", NULL},
        {"ccc", "bb", "a", NULL},
        {"zz", "long_name_one", "a", "bb", "long_name_on", "ccc", "dddd", NULL},
    };
    dpp_projection_t *p;
    (void)state;
    assert_int_equal(dpp_projection_new(&p, names, NN), 0);
    for (int round = 0; round < 12; round++) {
        const char *const *keys = orders[(round * 7) % 4];
        size_t nk = 0;
        while (keys[nk])
            nk++;
        check_named_keys(p, keys, nk, names, NN, round);
    }
    dpp_projection_free(p);
}

/* What writers do to a file's key order, in phases that the guesses must
 * follow (learn, skew over gaps and extra keys, give up on orders that
 * change per record, learn again): one order with features absent and
 * names outside the projection slipped in at random, then an order made
 * afresh for every record (as Python's protobuf writes a dict), then
 * another fixed order, then every record a fresh order again but with runs
 * of records in one order. Each record decodes as if it were the first. */
static void test_key_order_phases(void **state)
{
    enum { NN = 24, NX = 4 };
    char name_buf[NN + NX][12];
    const char *names[NN], *extra[NX];
    for (int i = 0; i < NN + NX; i++) {
        snprintf(name_buf[i], sizeof name_buf[i], i < NN ? (i % 3 ? "f%d" : "feature_%d") : "x%d",
                 i);
        if (i < NN)
            names[i] = name_buf[i];
        else
            extra[i - NN] = name_buf[i];
    }
    const char *order[NN], *keys[NN + NX];
    dpp_projection_t *p;
    (void)state;
    assert_int_equal(dpp_projection_new(&p, names, NN), 0);
    rng_state = 7;
    for (int i = 0; i < NN; i++)
        order[i] = names[i];
    for (int rec = 0; rec < 4000; rec++) {
        int phase = rec / 1000;
        int fresh = phase == 1 || (phase == 3 && rng() % 8 == 0);
        if (rec == 2000 || fresh)
            for (int i = NN - 1; i > 0; i--) { /* a new order */
                int k = (int)(rng() % (uint64_t)(i + 1));
                const char *t = order[i];
                order[i] = order[k];
                order[k] = t;
            }
        size_t nk = 0;
        for (int i = 0; i < NN; i++) {
            if (rng() % 16 == 0)
                continue; /* absent */
            if (rng() % 32 == 0)
                keys[nk++] = extra[rng() % NX];
            keys[nk++] = order[i];
        }
        check_named_keys(p, keys, nk, names, NN, rec);
    }
    dpp_projection_free(p);
}

/* Packed int64 runs whose varints have every length (1-10 bytes) at every
 * distance from the run's end, each run alone in a buffer of its exact size
 * (the sanitizer build sees any read past it): the decoder reads varints 8
 * bytes at a time and must neither look past the run nor accept a varint it
 * cuts. Each run is also cut at every byte: a cut inside a varint is
 * DPP_EEXAMPLE, a cut between varints gives the values before it. */
static void test_varint_runs(void **state)
{
    (void)state;
    rng_state = 7;
    for (int iter = 0; iter < 3000; iter++) {
        uint64_t want[12];
        size_t ends[12]; /* payload offset after each varint */
        uint8_t pay[12 * 10];
        size_t m = 1 + rng_below(12), plen = 0;
        for (size_t i = 0; i < m; i++) {
            unsigned nb = 1 + (unsigned)rng_below(10);
            /* a value of exactly nb bytes: its top payload bit set */
            uint64_t v = nb == 10 ? (uint64_t)1 << 63 | rng() : (uint64_t)1 << (7 * nb - 1);
            if (nb > 1 && nb < 10)
                v |= rng() & (((uint64_t)1 << (7 * nb - 1)) - 1);
            if (nb == 1)
                v = rng_below(128);
            want[i] = v;
            do {
                pay[plen++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
                v >>= 7;
            } while (v);
            ends[i] = plen;
        }
        for (size_t cut = plen; cut >= 1; cut--) {
            uint8_t *list = malloc(cut + 2);
            assert_non_null(list);
            list[0] = 0x0a;
            list[1] = (uint8_t)cut; /* at most 120: one byte */
            memcpy(list + 2, pay, cut);
            dpp_feat_ref_t f = {DPP_FEAT_INT64, list, cut + 2, 0};
            int64_t got[12];
            size_t n = 99, whole = 0;
            while (whole < m && ends[whole] <= cut)
                whole++;
            int rc = dpp_feat_int64s(&f, got, 12, &n);
            /* the run alone (the pipeline's call for this form) the same */
            int64_t run_got[12];
            size_t run_n = 99;
            int run_rc = dpp_feat_unpack_int64s(list + 2, cut, run_got, 12, &run_n);
            assert_int_equal(run_rc, rc);
            assert_int_equal(run_n, n);
            if (rc == 0)
                assert_memory_equal(run_got, got, n * sizeof *got);
            if (whole == 0 || ends[whole - 1] != cut) {
                if (rc != DPP_EEXAMPLE)
                    fail_msg("iteration %d: run cut at %zu of %zu inside a varint gave %d", iter,
                             cut, plen, rc);
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(n, whole);
                for (size_t i = 0; i < whole; i++)
                    if ((uint64_t)got[i] != want[i])
                        fail_msg("iteration %d: value %zu of %zu (cut %zu of %zu): %" PRIx64
                                 " for %" PRIx64,
                                 iter, i, whole, cut, plen, (uint64_t)got[i], want[i]);
                /* a smaller cap writes fewer and still counts them all */
                rc = dpp_feat_int64s(&f, got, whole / 2, &n);
                assert_int_equal(rc, 0);
                assert_int_equal(n, whole);
                rc = dpp_feat_unpack_int64s(list + 2, cut, run_got, whole / 2, &run_n);
                assert_int_equal(rc, 0);
                assert_int_equal(run_n, whole);
            }
            free(list);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_examples),
        cmocka_unit_test(test_criteo_projection),
        cmocka_unit_test(test_unpacked_lists),
        cmocka_unit_test(test_mixed_packed_unpacked),
        cmocka_unit_test(test_duplicate_key_later_wins),
        cmocka_unit_test(test_value_before_key),
        cmocka_unit_test(test_unknown_fields_everywhere),
        cmocka_unit_test(test_empty_vs_absent),
        cmocka_unit_test(test_merged_occurrences),
        cmocka_unit_test(test_malformed_records),
        cmocka_unit_test(test_malformed_lists),
        cmocka_unit_test(test_projection_contract),
        cmocka_unit_test(test_mutated_records),
        cmocka_unit_test(test_native_lists),
        cmocka_unit_test(test_varint_runs),
        cmocka_unit_test(test_long_names),
        cmocka_unit_test(test_changing_key_order),
        cmocka_unit_test(test_key_order_phases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
