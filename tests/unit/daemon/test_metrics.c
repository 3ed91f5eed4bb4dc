// SPDX-License-Identifier: Apache-2.0
// Prometheus text format writer, checked by a small independent parser of the
// 0.0.4 format and by exact text for a small case; taking back part of a
// render (mark/rewind).
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/metrics.h"
#include "dpp/error.h"

/* ---- an independent parser: what a scraper needs to hold true ---- */

#define MAX_FAMILIES 64
#define MAX_SAMPLES 4096
#define MAX_LABELS 8

typedef struct family {
    char name[160];
    char type[16]; /* "" until TYPE */
    char help[512];
    int has_help;
    int nsamples;
} family_t;

typedef struct sample {
    char name[192];
    int nlabels;
    char lname[MAX_LABELS][64];
    char lvalue[MAX_LABELS][256];
    char raw[64]; /* the value as written */
    double value;
    int family;
} sample_t;

typedef struct parsed {
    family_t fam[MAX_FAMILIES];
    int nfam;
    sample_t s[MAX_SAMPLES];
    int ns;
} parsed_t;

static int name_char(char ch, int first, int colon)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (colon && ch == ':') || (!first && ch >= '0' && ch <= '9');
}

/* Reads a name at *p into out; returns its length (0 if none). */
static size_t read_name(const char **p, char *out, size_t cap, int colon)
{
    size_t n = 0;
    while (name_char((*p)[n], n == 0, colon)) {
        assert_true(n + 1 < cap);
        out[n] = (*p)[n];
        n++;
    }
    out[n] = '\0';
    *p += n;
    return n;
}

static int find_family(parsed_t *ps, const char *name)
{
    for (int i = 0; i < ps->nfam; i++)
        if (strcmp(ps->fam[i].name, name) == 0)
            return i;
    return -1;
}

/* HELP/TYPE for name: the current family, or a new one never seen before
 * (families are contiguous). */
static family_t *meta_family(parsed_t *ps, const char *name)
{
    int i = find_family(ps, name);
    if (i >= 0) {
        assert_int_equal(i, ps->nfam - 1);
        assert_int_equal(ps->fam[i].nsamples, 0); /* metadata before samples */
        return &ps->fam[i];
    }
    assert_true(ps->nfam < MAX_FAMILIES);
    family_t *f = &ps->fam[ps->nfam++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

static double parse_value(const char *s)
{
    if (strcmp(s, "+Inf") == 0)
        return INFINITY;
    if (strcmp(s, "-Inf") == 0)
        return -INFINITY;
    if (strcmp(s, "NaN") == 0)
        return NAN;
    char *end;
    double v = strtod(s, &end);
    assert_true(*s != '\0' && *end == '\0');
    assert_true(strchr(s, 'n') == NULL && strchr(s, 'N') == NULL); /* no inf/nan spellings */
    return v;
}

static void parse_sample(parsed_t *ps, const char *line)
{
    assert_true(ps->ns < MAX_SAMPLES);
    sample_t *s = &ps->s[ps->ns++];
    memset(s, 0, sizeof *s);
    const char *p = line;
    assert_true(read_name(&p, s->name, sizeof s->name, 1) > 0);
    if (*p == '{') {
        p++;
        while (*p != '}') {
            assert_true(s->nlabels < MAX_LABELS);
            char *ln = s->lname[s->nlabels], *lv = s->lvalue[s->nlabels];
            assert_true(read_name(&p, ln, 64, 0) > 0);
            for (int j = 0; j < s->nlabels; j++)
                assert_string_not_equal(s->lname[j], ln);
            assert_int_equal(*p++, '=');
            assert_int_equal(*p++, '"');
            size_t n = 0;
            for (; *p != '"'; p++) {
                assert_true(*p != '\0' && *p != '\n' && n + 1 < 256);
                if (*p == '\\') {
                    p++;
                    assert_true(*p == '\\' || *p == '"' || *p == 'n');
                    lv[n++] = *p == 'n' ? '\n' : *p;
                } else {
                    lv[n++] = *p;
                }
            }
            lv[n] = '\0';
            p++;
            s->nlabels++;
            if (*p == ',')
                p++;
            else
                assert_int_equal(*p, '}');
        }
        p++;
    }
    assert_int_equal(*p++, ' ');
    assert_true(strlen(p) < sizeof s->raw);
    assert_null(strchr(p, ' ')); /* we never write timestamps */
    snprintf(s->raw, sizeof s->raw, "%s", p);
    s->value = parse_value(p);

    /* The sample belongs to the current family, which has a TYPE. */
    assert_true(ps->nfam > 0);
    family_t *f = &ps->fam[ps->nfam - 1];
    assert_string_not_equal(f->type, "");
    s->family = ps->nfam - 1;
    f->nsamples++;
    if (strcmp(f->type, "histogram") == 0) {
        size_t fl = strlen(f->name);
        assert_memory_equal(s->name, f->name, fl);
        const char *suffix = s->name + fl;
        assert_true(strcmp(suffix, "_bucket") == 0 || strcmp(suffix, "_sum") == 0 ||
                    strcmp(suffix, "_count") == 0);
    } else {
        assert_string_equal(s->name, f->name);
    }
}

/* Parses the whole exposition, failing the test on any format violation. */
static void parse_text(const char *text, size_t len, parsed_t *ps)
{
    memset(ps, 0, sizeof *ps);
    assert_int_equal(strlen(text), len);
    if (len > 0)
        assert_int_equal(text[len - 1], '\n');
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        char line[4096];
        assert_true((size_t)(nl - p) < sizeof line);
        memcpy(line, p, (size_t)(nl - p));
        line[nl - p] = '\0';
        p = nl + 1;
        if (strncmp(line, "# HELP ", 7) == 0) {
            const char *q = line + 7;
            char name[160];
            assert_true(read_name(&q, name, sizeof name, 1) > 0);
            assert_int_equal(*q++, ' ');
            family_t *f = meta_family(ps, name);
            assert_false(f->has_help);
            f->has_help = 1;
            size_t n = 0;
            for (; *q; q++) {
                assert_true(n + 1 < sizeof f->help);
                if (*q == '\\') {
                    q++;
                    assert_true(*q == '\\' || *q == 'n');
                    f->help[n++] = *q == 'n' ? '\n' : '\\';
                } else {
                    f->help[n++] = *q;
                }
            }
            f->help[n] = '\0';
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            const char *q = line + 7;
            char name[160];
            assert_true(read_name(&q, name, sizeof name, 1) > 0);
            assert_int_equal(*q++, ' ');
            family_t *f = meta_family(ps, name);
            assert_string_equal(f->type, "");
            assert_true(strcmp(q, "counter") == 0 || strcmp(q, "gauge") == 0 ||
                        strcmp(q, "histogram") == 0);
            snprintf(f->type, sizeof f->type, "%s", q);
        } else {
            assert_true(line[0] != '#' && line[0] != '\0');
            parse_sample(ps, line);
        }
    }
    for (int i = 0; i < ps->nfam; i++)
        assert_string_not_equal(ps->fam[i].type, "");
}

/* Labels of s except le as "a=x,b=y" (the series a histogram line belongs to). */
static void series_key(const sample_t *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < s->nlabels; i++) {
        if (strcmp(s->lname[i], "le") == 0)
            continue;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s=%s,", s->lname[i], s->lvalue[i]);
    }
}

static const char *label(const sample_t *s, const char *name)
{
    for (int i = 0; i < s->nlabels; i++)
        if (strcmp(s->lname[i], name) == 0)
            return s->lvalue[i];
    return NULL;
}

/* Every histogram series: buckets increasing in le and cumulative, ending in
 * +Inf equal to _count, with a _sum. Returns the number of series. */
static int check_histograms(const parsed_t *ps)
{
    int series = 0;
    for (int fi = 0; fi < ps->nfam; fi++) {
        const family_t *f = &ps->fam[fi];
        if (strcmp(f->type, "histogram") != 0)
            continue;
        size_t fl = strlen(f->name);
        for (int i = 0; i < ps->ns; i++) {
            const sample_t *first = &ps->s[i];
            if (first->family != fi || strcmp(first->name + fl, "_bucket") != 0)
                continue;
            char key[1024], k2[1024];
            series_key(first, key, sizeof key);
            /* only start at the first bucket of each series */
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) {
                series_key(&ps->s[j], k2, sizeof k2);
                seen = ps->s[j].family == fi && strcmp(k2, key) == 0;
            }
            if (seen)
                continue;
            series++;
            double prev_le = -INFINITY, prev_count = 0, inf_count = -1, count = -1;
            int has_sum = 0;
            for (int j = i; j < ps->ns; j++) {
                const sample_t *s = &ps->s[j];
                series_key(s, k2, sizeof k2);
                if (s->family != fi || strcmp(k2, key) != 0)
                    continue;
                const char *suffix = s->name + fl;
                if (strcmp(suffix, "_bucket") == 0) {
                    assert_true(inf_count < 0); /* nothing after +Inf */
                    const char *le = label(s, "le");
                    assert_non_null(le);
                    double b = parse_value(le);
                    assert_true(b > prev_le);
                    assert_true(s->value >= prev_count);
                    prev_le = b;
                    prev_count = s->value;
                    if (strcmp(le, "+Inf") == 0)
                        inf_count = s->value;
                } else if (strcmp(suffix, "_count") == 0) {
                    assert_null(label(s, "le"));
                    count = s->value;
                } else {
                    assert_null(label(s, "le"));
                    has_sum = 1;
                }
            }
            assert_true(inf_count >= 0);
            assert_true(count == inf_count);
            assert_true(has_sum);
        }
    }
    return series;
}

/* The sample named name whose labels (in order) are the n pairs in kv. */
static const sample_t *find_sample(const parsed_t *ps, const char *name, int n, ...)
{
    for (int i = 0; i < ps->ns; i++) {
        const sample_t *s = &ps->s[i];
        if (strcmp(s->name, name) != 0 || s->nlabels != n)
            continue;
        va_list ap;
        va_start(ap, n);
        int match = 1;
        for (int k = 0; k < n; k++) {
            const char *ln = va_arg(ap, const char *), *lv = va_arg(ap, const char *);
            match = match && strcmp(s->lname[k], ln) == 0 && strcmp(s->lvalue[k], lv) == 0;
        }
        va_end(ap);
        if (match)
            return s;
    }
    fail_msg("no sample %s with %d labels", name, n);
    return NULL;
}

/* ---- tests ---- */

static void test_exact_small(void **state)
{
    (void)state;
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    dpp_metrics_label_t l200[] = {{"code", "200"}}, l404[] = {{"code", "404"}};
    dpp_metrics_label_t tricky[] = {{"path", "a\"b\\c\nd"}};
    double bounds[] = {0.005, 0.1};
    uint64_t counts[] = {1, 3};
    assert_int_equal(
        dpp_metrics_family(&m, "dpp_requests_total", DPP_METRIC_COUNTER, "Requests served."), 0);
    assert_int_equal(dpp_metrics_sample_u64(&m, "dpp_requests_total", l200, 1, 3), 0);
    assert_int_equal(dpp_metrics_sample(&m, "dpp_requests_total", l404, 1, 1.0), 0);
    assert_int_equal(dpp_metrics_family(&m, "dpp_temp", DPP_METRIC_GAUGE, "Has \\ and\nnewline."),
                     0);
    assert_int_equal(dpp_metrics_sample(&m, "dpp_temp", tricky, 1, 0.5), 0);
    assert_int_equal(dpp_metrics_family(&m, "dpp_latency_seconds", DPP_METRIC_HISTOGRAM, NULL), 0);
    assert_int_equal(
        dpp_metrics_histogram(&m, "dpp_latency_seconds", NULL, 0, bounds, counts, 2, 1.25, 4), 0);
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    const char *want = "# HELP dpp_requests_total Requests served.\n"
                       "# TYPE dpp_requests_total counter\n"
                       "dpp_requests_total{code=\"200\"} 3\n"
                       "dpp_requests_total{code=\"404\"} 1\n"
                       "# HELP dpp_temp Has \\\\ and\\nnewline.\n"
                       "# TYPE dpp_temp gauge\n"
                       "dpp_temp{path=\"a\\\"b\\\\c\\nd\"} 0.5\n"
                       "# TYPE dpp_latency_seconds histogram\n"
                       "dpp_latency_seconds_bucket{le=\"0.005\"} 1\n"
                       "dpp_latency_seconds_bucket{le=\"0.1\"} 3\n"
                       "dpp_latency_seconds_bucket{le=\"+Inf\"} 4\n"
                       "dpp_latency_seconds_sum 1.25\n"
                       "dpp_latency_seconds_count 4\n";
    assert_non_null(text);
    assert_string_equal(text, want);
    assert_int_equal(len, strlen(want));

    /* reset renders the next scrape from scratch: the same family again */
    dpp_metrics_reset(&m);
    assert_int_equal(dpp_metrics_family(&m, "dpp_up", DPP_METRIC_GAUGE, NULL), 0);
    assert_int_equal(dpp_metrics_sample(&m, "dpp_up", NULL, 0, 1), 0);
    assert_string_equal(dpp_metrics_text(&m, &len), "# TYPE dpp_up gauge\ndpp_up 1\n");
    dpp_metrics_close(&m);

    /* nothing rendered is an empty, valid exposition */
    dpp_metrics_init(&m);
    assert_string_equal(dpp_metrics_text(&m, &len), "");
    assert_int_equal(len, 0);
    dpp_metrics_close(&m);
}

static void test_registry_parses(void **state)
{
    (void)state;
    parsed_t *ps = malloc(sizeof *ps);
    assert_non_null(ps);
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    const char *nasty[] = {"plain",       "quote\"d", "back\\slash",        "new\nline",
                           "\\n literal", "{}=,\"\\", "utf-8 \xe2\x9c\x93", "",
                           "trailing\\"};
    const size_t nnasty = sizeof nasty / sizeof nasty[0];

    dpp_metrics_family(&m, "dpp_build_info", DPP_METRIC_GAUGE, "Build metadata.");
    dpp_metrics_label_t build[] = {{"version", "0.1.0"}, {"role", "worker"}};
    dpp_metrics_sample(&m, "dpp_build_info", build, 2, 1);
    dpp_metrics_family(&m, "dpp_bytes_read_total", DPP_METRIC_COUNTER, "Bytes \\ read\n(all).");
    dpp_metrics_sample_u64(&m, "dpp_bytes_read_total", NULL, 0, UINT64_MAX);
    dpp_metrics_family(&m, "dpp_queue_depth", DPP_METRIC_GAUGE, "Escapes in label values.");
    for (size_t i = 0; i < nnasty; i++) {
        dpp_metrics_label_t l[] = {{"stage", "decode"}, {"what", nasty[i]}};
        dpp_metrics_sample(&m, "dpp_queue_depth", l, 2, (double)i - 2.5);
    }
    dpp_metrics_family(&m, "dpp_special", DPP_METRIC_GAUGE, "Special values.");
    dpp_metrics_label_t pinf[] = {{"v", "pinf"}}, ninf[] = {{"v", "ninf"}}, nan_[] = {{"v", "nan"}};
    dpp_metrics_sample(&m, "dpp_special", pinf, 1, INFINITY);
    dpp_metrics_sample(&m, "dpp_special", ninf, 1, -INFINITY);
    dpp_metrics_sample(&m, "dpp_special", nan_, 1, NAN);
    dpp_metrics_family(&m, "dpp_batch_seconds", DPP_METRIC_HISTOGRAM, "Batch latency.");
    double bounds[] = {0.001, 0.01, 0.1, 1, 10};
    uint64_t c1[] = {0, 2, 2, 7, 9}, c2[] = {5, 5, 5, 5, 5};
    dpp_metrics_label_t w1[] = {{"worker", "1"}}, w2[] = {{"worker", "a\"b"}};
    dpp_metrics_histogram(&m, "dpp_batch_seconds", w1, 1, bounds, c1, 5, 12.5, 10);
    dpp_metrics_histogram(&m, "dpp_batch_seconds", w2, 1, bounds, c2, 5, 0.1 + 0.2, 5);
    dpp_metrics_family(&m, "dpp_empty_seconds", DPP_METRIC_HISTOGRAM, NULL);
    dpp_metrics_histogram(&m, "dpp_empty_seconds", NULL, 0, NULL, NULL, 0, 0, 0);
    dpp_metrics_family(&m, "dpp_no_samples_total", DPP_METRIC_COUNTER, "Declared, unobserved.");

    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    parse_text(text, len, ps);

    assert_int_equal(ps->nfam, 7);
    assert_string_equal(ps->fam[1].help, "Bytes \\ read\n(all).");
    assert_string_equal(ps->fam[1].type, "counter");
    assert_string_equal(ps->fam[4].type, "histogram");
    assert_false(ps->fam[5].has_help);
    assert_int_equal(ps->fam[6].nsamples, 0);
    assert_string_equal(find_sample(ps, "dpp_bytes_read_total", 0)->raw, "18446744073709551615");
    for (size_t i = 0; i < nnasty; i++) {
        const sample_t *s =
            find_sample(ps, "dpp_queue_depth", 2, "stage", "decode", "what", nasty[i]);
        assert_true(s->value == (double)i - 2.5);
    }
    assert_string_equal(find_sample(ps, "dpp_special", 1, "v", "pinf")->raw, "+Inf");
    assert_string_equal(find_sample(ps, "dpp_special", 1, "v", "ninf")->raw, "-Inf");
    assert_string_equal(find_sample(ps, "dpp_special", 1, "v", "nan")->raw, "NaN");
    assert_int_equal(check_histograms(ps), 3);
    const sample_t *b = find_sample(ps, "dpp_batch_seconds_bucket", 2, "worker", "a\"b", "le", "1");
    assert_true(b->value == 5);
    assert_true(find_sample(ps, "dpp_batch_seconds_sum", 1, "worker", "a\"b")->value == 0.1 + 0.2);
    assert_true(find_sample(ps, "dpp_batch_seconds_count", 1, "worker", "1")->value == 10);
    assert_true(find_sample(ps, "dpp_empty_seconds_bucket", 1, "le", "+Inf")->value == 0);
    dpp_metrics_close(&m);
    free(ps);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_values_round_trip(void **state)
{
    (void)state;
    parsed_t *ps = malloc(sizeof *ps);
    assert_non_null(ps);
    double edge[] = {0.0,
                     -0.0,
                     1,
                     -1,
                     0.1,
                     0.005,
                     1.0 / 3,
                     0.1 + 0.2,
                     1e17,
                     -1e17,
                     9007199254740993.0,
                     1e300,
                     DBL_MAX,
                     -DBL_MAX,
                     DBL_MIN,
                     4.9406564584124654e-324,
                     123456.789e-300,
                     9.3e18,
                     1e19,
                     2.5e-7};
    const size_t nedge = sizeof edge / sizeof edge[0], n = 3000;
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    dpp_metrics_family(&m, "dpp_v", DPP_METRIC_GAUGE, NULL);
    double *vals = malloc(n * sizeof *vals);
    assert_non_null(vals);
    for (size_t i = 0; i < n; i++) {
        if (i < nedge) {
            vals[i] = edge[i];
        } else {
            uint64_t bits = rng();
            memcpy(&vals[i], &bits, sizeof bits);
            if (isnan(vals[i]) || isinf(vals[i]))
                vals[i] = (double)(int64_t)bits; /* a large integer instead */
        }
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        dpp_metrics_label_t l[] = {{"i", idx}};
        dpp_metrics_sample(&m, "dpp_v", l, 1, vals[i]);
    }
    size_t len;
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    parse_text(text, len, ps);
    assert_int_equal(ps->ns, (int)n);
    for (size_t i = 0; i < n; i++) {
        const sample_t *s = &ps->s[i];
        assert_int_equal(strtoul(label(s, "i"), NULL, 10), i);
        if (memcmp(&s->value, &vals[i], sizeof(double)) != 0)
            fail_msg("value %.17g written as %s", vals[i], s->raw);
        /* integral values below 2^63 are written as integers */
        if (vals[i] == floor(vals[i]) && fabs(vals[i]) < 9.2e18)
            assert_null(strpbrk(s->raw, ".eE"));
    }
    /* shortest form, as other clients write it: le labels are compared as text */
    assert_string_equal(ps->s[4].raw, "0.1");
    assert_string_equal(ps->s[5].raw, "0.005");
    assert_string_equal(ps->s[6].raw, "0.3333333333333333"); /* 16 digits suffice */
    assert_string_equal(ps->s[7].raw, "0.30000000000000004");
    assert_string_equal(ps->s[8].raw, "100000000000000000");
    assert_string_equal(ps->s[1].raw, "-0");
    dpp_metrics_close(&m);
    free(vals);
    free(ps);
}

/* Each misuse fails with DPP_EINVAL, the failure sticks, text() says so. */
static void expect_einval(dpp_metrics_t *m, int rc)
{
    size_t len = 99;
    assert_int_equal(rc, DPP_EINVAL);
    assert_int_equal(dpp_metrics_error(m), DPP_EINVAL);
    assert_null(dpp_metrics_text(m, &len));
    assert_int_equal(len, 0);
    dpp_metrics_reset(m);
    assert_int_equal(dpp_metrics_error(m), 0);
}

static void test_misuse(void **state)
{
    (void)state;
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    double b2[] = {1, 2}, bdown[] = {2, 1}, binf[] = {1, INFINITY}, bnan[] = {NAN};
    uint64_t c2[] = {1, 2}, cdown[] = {2, 1};
    dpp_metrics_label_t le[] = {{"le", "1"}}, dup[] = {{"a", "1"}, {"a", "2"}};
    dpp_metrics_label_t badname[] = {{"1a", "x"}}, reserved[] = {{"__name__", "x"}};
    dpp_metrics_label_t nullval[] = {{"a", NULL}};

    expect_einval(&m, dpp_metrics_sample(&m, "dpp_x", NULL, 0, 1)); /* no family */
    expect_einval(&m, dpp_metrics_family(&m, "9lives", DPP_METRIC_GAUGE, NULL));
    expect_einval(&m, dpp_metrics_family(&m, "dpp-x", DPP_METRIC_GAUGE, NULL));
    expect_einval(&m, dpp_metrics_family(&m, "", DPP_METRIC_GAUGE, NULL));
    expect_einval(&m, dpp_metrics_family(&m, "dpp_x", (dpp_metric_type_t)7, NULL));
    char longname[DPP_METRICS_MAX_NAME + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    expect_einval(&m, dpp_metrics_family(&m, longname, DPP_METRIC_GAUGE, NULL));

    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_sample(&m, "dpp_y", NULL, 0, 1)); /* other family */

    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    dpp_metrics_family(&m, "dpp_y", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL)); /* twice */

    dpp_metrics_family(&m, "dpp_y", DPP_METRIC_GAUGE, NULL);
    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_family(&m, "dpp_y", DPP_METRIC_GAUGE, NULL)); /* first line */

    /* a name that extends a declared one is a different family */
    assert_int_equal(dpp_metrics_family(&m, "dpp_x_total", DPP_METRIC_COUNTER, NULL), 0);
    assert_int_equal(dpp_metrics_family(&m, "dpp_x", DPP_METRIC_COUNTER, NULL), 0);
    assert_int_equal(dpp_metrics_family(&m, "dpp_x_", DPP_METRIC_COUNTER, NULL), 0);
    assert_int_equal(dpp_metrics_family(&m, "dpp:x", DPP_METRIC_COUNTER, NULL), 0);
    dpp_metrics_reset(&m);

    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_sample(&m, "dpp_x", dup, 2, 1));
    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_sample(&m, "dpp_x", badname, 1, 1));
    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_sample(&m, "dpp_x", reserved, 1, 1));
    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_sample(&m, "dpp_x", nullval, 1, 1));
    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_sample(&m, "dpp_x", NULL, 1, 1));
    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_x", NULL, 0, b2, c2, 2, 3, 2));

    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_sample(&m, "dpp_h", NULL, 0, 1)); /* histogram: helper only */
    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_h", le, 1, b2, c2, 2, 3, 2));
    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_h", NULL, 0, bdown, c2, 2, 3, 2));
    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_h", NULL, 0, b2, cdown, 2, 3, 2));
    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_h", NULL, 0, binf, c2, 2, 3, 2));
    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_h", NULL, 0, bnan, c2, 1, 3, 2));
    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_h", NULL, 0, b2, c2, 2, 3, 1)); /* count */
    dpp_metrics_family(&m, "dpp_h", DPP_METRIC_HISTOGRAM, NULL);
    expect_einval(&m, dpp_metrics_histogram(&m, "dpp_h", NULL, 0, NULL, NULL, 2, 3, 2));

    /* after a failure every call is a no-op that reports it */
    dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL);
    assert_int_equal(dpp_metrics_sample(&m, "dpp_nope", NULL, 0, 1), DPP_EINVAL);
    size_t before = m.len;
    assert_int_equal(dpp_metrics_family(&m, "dpp_z", DPP_METRIC_GAUGE, "x"), DPP_EINVAL);
    assert_int_equal(dpp_metrics_sample(&m, "dpp_x", NULL, 0, 1), DPP_EINVAL);
    assert_int_equal(m.len, before);
    dpp_metrics_close(&m);
}

/* The byte limit is the same failure path as out-of-memory: recorded, sticky,
 * reported by text(), cleared by reset. */
static void test_size_limit(void **state)
{
    (void)state;
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    m.max_bytes = 64;
    assert_int_equal(dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL), 0);
    int rc = 0;
    for (int i = 0; i < 10 && rc == 0; i++)
        rc = dpp_metrics_sample(&m, "dpp_x", NULL, 0, i);
    assert_int_equal(rc, -ENOBUFS);
    assert_true(m.len <= 64);
    size_t len;
    assert_null(dpp_metrics_text(&m, &len));
    assert_int_equal(dpp_metrics_error(&m), -ENOBUFS);
    dpp_metrics_reset(&m);
    assert_int_equal(dpp_metrics_family(&m, "dpp_x", DPP_METRIC_GAUGE, NULL), 0);
    assert_int_equal(dpp_metrics_sample(&m, "dpp_x", NULL, 0, 1), 0);
    assert_string_equal(dpp_metrics_text(&m, &len), "# TYPE dpp_x gauge\ndpp_x 1\n");
    dpp_metrics_close(&m);

    /* growth well past the first allocation keeps every byte */
    dpp_metrics_init(&m);
    dpp_metrics_family(&m, "dpp_g", DPP_METRIC_GAUGE, NULL);
    for (int i = 0; i < 20000; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        dpp_metrics_label_t l[] = {{"i", v}};
        dpp_metrics_sample(&m, "dpp_g", l, 1, i);
    }
    const char *text = dpp_metrics_text(&m, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "\ndpp_g{i=\"19999\"} 19999\n"));
    assert_int_equal(text[len - 1], '\n');
    dpp_metrics_close(&m);
}

/* A part of the page that fails is taken back whole with mark/rewind, and
 * the render goes on as if it had never been tried. */
static void test_rewind(void **state)
{
    (void)state;
    dpp_metrics_t m;
    dpp_metrics_init(&m);
    dpp_metrics_gauge(&m, "dpp_a", NULL, 1);
    size_t len;
    const char *before = "# TYPE dpp_a gauge\ndpp_a 1\n";
    m.max_bytes = 200;
    dpp_metrics_mark_t mark;
    dpp_metrics_mark(&m, &mark);
    dpp_metrics_family(&m, "dpp_b", DPP_METRIC_GAUGE, "Too many to fit.");
    for (int i = 0; i < 100; i++)
        dpp_metrics_sample(&m, "dpp_b", NULL, 0, i);
    assert_int_equal(dpp_metrics_error(&m), -ENOBUFS);
    dpp_metrics_rewind(&m, &mark);
    assert_int_equal(dpp_metrics_error(&m), 0);
    assert_string_equal(dpp_metrics_text(&m, &len), before);
    assert_int_equal(len, strlen(before));
    /* the current family is dpp_a again, and dpp_b may be declared anew */
    assert_int_equal(dpp_metrics_sample(&m, "dpp_a", NULL, 0, 2), 0);
    assert_int_equal(dpp_metrics_gauge(&m, "dpp_b", NULL, 3), 0);
    assert_string_equal(dpp_metrics_text(&m, &len),
                        "# TYPE dpp_a gauge\ndpp_a 1\ndpp_a 2\n# TYPE dpp_b gauge\ndpp_b 3\n");
    /* a mark taken after a failure keeps it */
    m.max_bytes = m.len;
    assert_int_equal(dpp_metrics_gauge(&m, "dpp_c", NULL, 1), -ENOBUFS);
    dpp_metrics_mark(&m, &mark);
    dpp_metrics_rewind(&m, &mark);
    assert_int_equal(dpp_metrics_error(&m), -ENOBUFS);
    assert_null(dpp_metrics_text(&m, &len));
    dpp_metrics_close(&m);

    /* at the very start, before any allocation */
    dpp_metrics_init(&m);
    dpp_metrics_mark(&m, &mark);
    dpp_metrics_gauge(&m, "dpp_d", NULL, 1);
    dpp_metrics_rewind(&m, &mark);
    assert_string_equal(dpp_metrics_text(&m, &len), "");
    assert_int_equal(len, 0);
    dpp_metrics_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_small),       cmocka_unit_test(test_registry_parses),
        cmocka_unit_test(test_values_round_trip), cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_size_limit),        cmocka_unit_test(test_rewind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
