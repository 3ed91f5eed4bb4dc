/* SPDX-License-Identifier: Apache-2.0 */
/* bench_decode: rows/s of the hand-written tf.Example decoder (every feature
 * projected, every value read out) against protobuf-c's generic unpack and
 * free, on Criteo-like records built in memory. Prints figures; checks
 * nothing except that both paths see the same values. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "format/example_decode.h"
#include "spec/transform.h"
#include "example.pb-c.h"

#define NDENSE 13
#define NSPARSE 26
#define NFEAT (2 + NDENSE + NSPARSE)
#define MAX_IDS 8
#define DEFAULT_ROWS 200000
#define DEFAULT_ROUNDS 5

typedef struct corpus {
    uint8_t *data;
    size_t *off; /* record i is data[off[i] .. off[i + 1]) */
    size_t n;
} corpus_t;

static char feat_name[NFEAT][8];
static const char *feat_names[NFEAT];

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench_decode: out of memory\n");
        exit(1);
    }
    return p;
}

/* Same feature set and shapes as dpp-gen (row_id, label, i1..i13 with one
 * heavy-tailed float, c1..c26 with 1-8 skewed ids); not byte-identical. */
static void build_corpus(corpus_t *c, size_t rows)
{
    Tfex__Example ex = TFEX__EXAMPLE__INIT;
    Tfex__Features fs = TFEX__FEATURES__INIT;
    Tfex__FeatureEntry ent[NFEAT], *entp[NFEAT];
    Tfex__Feature feat[NFEAT];
    Tfex__FloatList fl[NDENSE];
    Tfex__Int64List il[2 + NSPARSE];
    float dense[NDENSE];
    int64_t ids[2 + NSPARSE][MAX_IDS];
    size_t cap = rows * 512, used = 0;

    ex.features = &fs;
    fs.n_feature = NFEAT;
    fs.feature = entp;
    for (unsigned i = 0; i < NFEAT; i++) {
        ent[i] = (Tfex__FeatureEntry)TFEX__FEATURE_ENTRY__INIT;
        feat[i] = (Tfex__Feature)TFEX__FEATURE__INIT;
        ent[i].key = feat_name[i];
        ent[i].value = &feat[i];
        entp[i] = &ent[i];
        if (i >= 2 && i < 2 + NDENSE) {
            fl[i - 2] = (Tfex__FloatList)TFEX__FLOAT_LIST__INIT;
            fl[i - 2].n_value = 1;
            fl[i - 2].value = &dense[i - 2];
            feat[i].kind_case = TFEX__FEATURE__KIND_FLOAT_LIST;
            feat[i].float_list = &fl[i - 2];
        } else {
            unsigned k = i < 2 ? i : i - NDENSE;
            il[k] = (Tfex__Int64List)TFEX__INT64_LIST__INIT;
            il[k].n_value = 1;
            il[k].value = ids[k];
            feat[i].kind_case = TFEX__FEATURE__KIND_INT64_LIST;
            feat[i].int64_list = &il[k];
        }
    }

    c->data = xmalloc(cap);
    c->off = xmalloc((rows + 1) * sizeof(size_t));
    c->n = rows;
    for (size_t r = 0; r < rows; r++) {
        uint64_t key = dpp_mix64(r + 0x1234567);
        ids[0][0] = (int64_t)r;
        ids[1][0] = (dpp_mix64(key + 1) & 3) == 0;
        for (unsigned j = 0; j < NDENSE; j++) {
            uint64_t u = dpp_mix64(key + 100 + j);
            unsigned m = (unsigned)__builtin_clzll(u | 1) * (2 + j % 5) / 4;
            if (m > 20)
                m = 20;
            if (u % 10000 == 0)
                dense[j] = 1e9f;
            else if (u % 100 < 5)
                dense[j] = -(float)(1 + u % 3);
            else
                dense[j] = (float)(((1ull << m) - 1) + ((u >> 8) & ((1ull << m) - 1)));
        }
        for (unsigned j = 0; j < NSPARSE; j++) {
            uint64_t u = dpp_mix64(key + 200 + j);
            size_t len = 1 + (size_t)__builtin_clzll(u | 1) * (j % 4) / 2;
            if (len > MAX_IDS)
                len = MAX_IDS;
            for (size_t k = 0; k < len; k++) {
                uint64_t v = dpp_mix64(u + k);
                unsigned e = (unsigned)(v % (4 + j));
                uint64_t rank = ((1ull << e) - 1) + ((v >> 32) & ((1ull << e) - 1));
                ids[2 + j][k] = (int64_t)(dpp_mix64(rank * 31 + j) >> 24);
            }
            il[2 + j].n_value = len;
        }
        size_t len = tfex__example__get_packed_size(&ex);
        if (used + len > cap) {
            cap = 2 * (used + len);
            c->data = realloc(c->data, cap);
            if (!c->data) {
                fprintf(stderr, "bench_decode: out of memory\n");
                exit(1);
            }
        }
        c->off[r] = used;
        used += tfex__example__pack(&ex, c->data + used);
    }
    c->off[rows] = used;
}

/* Decodes every record with the hand-written decoder and reads every value;
 * returns a checksum of the values. */
static uint64_t run_hand(const corpus_t *c, dpp_projection_t *proj)
{
    dpp_feat_ref_t out[NFEAT];
    uint64_t sum = 0;

    for (size_t r = 0; r < c->n; r++) {
        const uint8_t *rec = c->data + c->off[r];
        size_t len = c->off[r + 1] - c->off[r], n;

        if (dpp_example_decode(proj, rec, len, out) != 0) {
            fprintf(stderr, "bench_decode: record %zu does not decode\n", r);
            exit(1);
        }
        for (unsigned i = 0; i < NFEAT; i++) {
            if (out[i].kind == DPP_FEAT_FLOAT) {
                float v[MAX_IDS];
                dpp_feat_floats(&out[i], v, MAX_IDS, &n);
                for (size_t k = 0; k < n; k++) {
                    uint32_t bits;
                    memcpy(&bits, &v[k], 4);
                    sum += bits;
                }
            } else {
                int64_t v[MAX_IDS];
                dpp_feat_int64s(&out[i], v, MAX_IDS, &n);
                for (size_t k = 0; k < n; k++)
                    sum += (uint64_t)v[k];
            }
        }
    }
    return sum;
}

static uint64_t run_protobuf_c(const corpus_t *c)
{
    uint64_t sum = 0;

    for (size_t r = 0; r < c->n; r++) {
        Tfex__Example *ex =
            tfex__example__unpack(NULL, c->off[r + 1] - c->off[r], c->data + c->off[r]);
        if (!ex || !ex->features) {
            fprintf(stderr, "bench_decode: record %zu does not unpack\n", r);
            exit(1);
        }
        for (size_t i = 0; i < ex->features->n_feature; i++) {
            const Tfex__Feature *f = ex->features->feature[i]->value;
            if (f->kind_case == TFEX__FEATURE__KIND_FLOAT_LIST) {
                for (size_t k = 0; k < f->float_list->n_value; k++) {
                    uint32_t bits;
                    memcpy(&bits, &f->float_list->value[k], 4);
                    sum += bits;
                }
            } else if (f->kind_case == TFEX__FEATURE__KIND_INT64_LIST) {
                for (size_t k = 0; k < f->int64_list->n_value; k++)
                    sum += (uint64_t)f->int64_list->value[k];
            }
        }
        tfex__example__free_unpacked(ex, NULL);
    }
    return sum;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    size_t rows = argc > 1 ? strtoul(argv[1], NULL, 10) : DEFAULT_ROWS;
    size_t rounds = argc > 2 ? strtoul(argv[2], NULL, 10) : DEFAULT_ROUNDS;
    double hand[64], pbc[64];
    dpp_projection_t *proj;
    corpus_t c;

    if (rows == 0 || rounds == 0 || rounds > 64) {
        fprintf(stderr, "usage: bench_decode [rows (default %d)] [rounds 1..64 (default %d)]\n",
                DEFAULT_ROWS, DEFAULT_ROUNDS);
        return 2;
    }
    for (unsigned i = 0; i < NFEAT; i++) {
        if (i == 0)
            snprintf(feat_name[i], sizeof(feat_name[i]), "row_id");
        else if (i == 1)
            snprintf(feat_name[i], sizeof(feat_name[i]), "label");
        else if (i < 2 + NDENSE)
            snprintf(feat_name[i], sizeof(feat_name[i]), "i%u", i - 1);
        else
            snprintf(feat_name[i], sizeof(feat_name[i]), "c%u", i - 1 - NDENSE);
        feat_names[i] = feat_name[i];
    }
    build_corpus(&c, rows);
    if (dpp_projection_new(&proj, feat_names, NFEAT) != 0) {
        fprintf(stderr, "bench_decode: projection\n");
        return 1;
    }
    printf("bench_decode: %zu records, %.1f MB, %d features each, %zu rounds\n", c.n,
           (double)c.off[c.n] / 1e6, NFEAT, rounds);

    uint64_t want = run_protobuf_c(&c); /* warm-up, and the reference checksum */
    for (size_t k = 0; k < rounds; k++) {
        double t0 = bench_now();
        uint64_t s1 = run_hand(&c, proj);
        double t1 = bench_now();
        uint64_t s2 = run_protobuf_c(&c);
        double t2 = bench_now();
        if (s1 != want || s2 != want) {
            fprintf(stderr,
                    "bench_decode: checksums differ (%" PRIx64 " %" PRIx64 " %" PRIx64 ")\n", s1,
                    s2, want);
            return 1;
        }
        hand[k] = (double)c.n / (t1 - t0);
        pbc[k] = (double)c.n / (t2 - t1);
    }
    double h = median(hand, rounds), p = median(pbc, rounds);
    printf("hand-written decoder (all %d projected, values read): %12.0f rows/s  %7.1f MB/s\n",
           NFEAT, h, h * (double)c.off[c.n] / (double)c.n / 1e6);
    printf("protobuf-c unpack + free:                            %12.0f rows/s  %7.1f MB/s\n", p,
           p * (double)c.off[c.n] / (double)c.n / 1e6);
    printf("ratio: %.2fx\n", h / p);
    dpp_projection_free(proj);
    free(c.data);
    free(c.off);
    return 0;
}
