/* SPDX-License-Identifier: Apache-2.0 */
/* dpp-gen: writes a synthetic Criteo-like table, as TFRecord files of
 * tf.train.Example records or as Parquet files, in Hive-style day partitions.
 * Every value is a pure function of (seed, row id, feature), so equal
 * arguments give byte-identical files and both formats hold the same rows. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/tfrecord.h"
#include "base/util.h"
#include "gen/parquet_writer.h"
#include "example.pb-c.h"

#define NDENSE DPP_GEN_NDENSE
#define NSPARSE DPP_GEN_NSPARSE
#define NFEAT (2 + NDENSE + NSPARSE) /* row_id, label, i1..i13, c1..c26 */
#define F_S1 NFEAT                   /* feature index of s1, after c26 */
#define MAX_IDS DPP_GEN_MAX_IDS
#define S1_VOCAB 1000
#define MISSING_ONE_IN 128            /* default: P(a feature is absent) = 1/128 */
#define NULL_ONE_IN 32                /* --nulls: P(a feature is null) = 1/32 */
#define MAX_ROW_GROUP_ROWS (1u << 22) /* bounds a chunk's dictionary to 256 MiB */
#define MAX_SHARDS 100000             /* part-NNNNN */
#define MAX_PARTITIONS 100000
#define WRITE_BUF (1u << 20)

/* Per dense feature: the standard deviation of log2|x| in half binades
 * (2: values mostly within a factor of 2 of the median; 8: within 2^4), and
 * whether it holds integer counts (as Criteo's I-columns) or reals (as
 * normalised or averaged features do). */
static const unsigned dense_spread[NDENSE] = {2, 6, 3, 4, 8, 5, 2, 3, 7, 2, 4, 3, 5};
static const unsigned char dense_count[NDENSE] = {1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1};

/* Per sparse feature: log2 of its vocabulary (roughly Criteo's C-column
 * cardinalities) and how long its lists run (0: always one id). */
static const unsigned sparse_vocab_bits[NSPARSE] = {
    10, 9, 24, 21, 8, 5, 14, 9, 2, 17, 13, 22, 12, 4, 13, 20, 4, 12, 11, 3, 21, 6, 18, 15, 7, 16};
static const unsigned sparse_len_scale[NSPARSE] = {0, 1, 2, 0, 1, 0, 3, 1, 0, 2, 1, 0, 1,
                                                   4, 0, 1, 2, 0, 1, 0, 2, 1, 0, 3, 1, 0};

typedef enum gen_format { GEN_TFRECORD, GEN_PARQUET, GEN_JSONL } gen_format_t;

typedef struct gen_args {
    uint64_t rows;
    uint64_t shards;
    uint64_t partitions;
    uint64_t seed;
    const char *out;
    struct tm start; /* UTC midnight of the first partition */
    int index;       /* also write part-NNNNN.tfrecord.idx sidecars */
    gen_format_t format;
    dpp_gen_codec_t codec;   /* Parquet only */
    int page_version;        /* Parquet only: 1 or 2 */
    uint64_t row_group_rows; /* Parquet only */
    unsigned missing_one_in; /* a feature is absent 1 in this many (0: never) */
    int nulls;               /* --nulls: also empty lists, and s1 nulls */
    int strings;             /* TFRecord: also write s1 (Parquet always has it) */
} gen_args_t;

/* The reusable protobuf-c message tree of one row: filled in place per row,
 * so writing allocates nothing per record. The lists point into row. */
typedef struct row_msg {
    Tfex__Example ex;
    Tfex__Features features;
    Tfex__FeatureEntry entry[NFEAT + 1];
    Tfex__FeatureEntry *entry_ptr[NFEAT + 1];
    Tfex__Feature feature[NFEAT + 1];
    Tfex__FloatList floats[NDENSE];
    Tfex__Int64List ints[2 + NSPARSE];
    Tfex__BytesList s1_list;
    ProtobufCBinaryData s1_value;
    dpp_gen_row_t row;
    char name[NFEAT + 1][8];
} row_msg_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: dpp-gen --rows N --shards S --partitions P --seed X --out DIR\n"
               "               [--start-date YYYY-MM-DD] [--format tfrecord|parquet|jsonl]\n"
               "               [--index] [--nulls | --complete] [--strings]\n"
               "               [--compression zstd|snappy|none] [--row-group-rows N]\n"
               "               [--page-version 1|2] [--version] [--help]\n"
               "\n"
               "Writes a synthetic Criteo-like table: DIR/ds=YYYY-MM-DD/part-NNNNN.tfrecord\n"
               "(or .parquet), P partitions on consecutive days from --start-date (default\n"
               "2026-01-01), S shards in each, N rows spread evenly, numbered 0..N-1 in file\n"
               "order. A row has row_id (int64), label (int64 0/1), i1..i13 (one float each),\n"
               "c1..c26 (1-8 int64 ids each) and s1 (\"v\" and the decimal of a uniform\n"
               "draw in 0..999).\n"
               "The values look like real click logs, not like a generator's: i-values\n"
               "spread over many orders of magnitude (log2|x| about normal, a wider spread\n"
               "per feature), 2%% negative, 0.3%% 2^10..2^23 times larger; i1, i2, i4, i6,\n"
               "i7, i9, i11 and i13 are integer counts (many zeros), the others reals with\n"
               "full mantissas. Ids are Zipf-distributed over each feature's vocabulary\n"
               "(2^2..2^24 ids), hashed into 0..2^40, lists of varying length. Each i-value,\n"
               "list and s1 is absent with probability 1/128 (specs need fill_missing).\n"
               "Every value is a function of (seed, row_id, feature) alone, so the same\n"
               "arguments always give byte-identical files, and the two formats hold the\n"
               "same values row for row.\n"
               "\n"
               "--format tfrecord (default): records are tf.train.Example, s1 left out\n"
               "unless --strings adds it (a one-string BytesList).\n"
               "--index also writes DIR/ds=.../part-NNNNN.tfrecord.idx beside each file: a\n"
               "DALI-style record index, one \"offset size\" line per record (size = the\n"
               "whole framed record, 16 + payload bytes), so readers can split files\n"
               "without scanning them.\n"
               "\n"
               "--format parquet: schema\n"
               "  required int64 row_id; required int64 label;\n"
               "  optional float i1..i13;\n"
               "  optional group c1..c26 (LIST) { repeated group list {\n"
               "      required int64 element; } }\n"
               "  optional binary s1 (STRING);\n"
               "Data pages of at most 8192 rows and 16384 values, cut at row boundaries\n"
               "(so list columns' pages end earlier than the others'); c1..c26 and s1\n"
               "dictionary-encoded (a PLAIN dictionary page and RLE_DICTIONARY data pages),\n"
               "the rest PLAIN; levels in the RLE/bit-packed hybrid; every page with its\n"
               "CRC-32 in the page header. Each column chunk has\n"
               "an OffsetIndex (page offsets, sizes, first rows), written after the row\n"
               "groups. --compression zstd (default, level 3), snappy or none compresses\n"
               "every page. --row-group-rows N (default 65536, at most 4194304) rows per\n"
               "row group. --page-version 1 (default) writes DATA_PAGE headers, 2 writes\n"
               "DATA_PAGE_V2 (levels uncompressed before the compressed values; with\n"
               "--compression none, is_compressed false). --index is refused: a Parquet\n"
               "file's footer and offset index are its index. --strings changes nothing\n"
               "(s1 is always written).\n"
               "\n"
               "Absent values (both formats): a null is an absent feature in TFRecord and a\n"
               "null in Parquet, by a draw of its own per (seed, row_id, feature), so the\n"
               "values that stay are the same whatever the rate. --nulls raises the rate\n"
               "to 1/32 and also makes lists empty (present, no ids) with probability\n"
               "1/32. --complete writes every value: every list then holds 1-8 ids.\n"
               "\n"
               "--format jsonl: a corpus for text sessions instead, part-NNNNN.jsonl, one\n"
               "document per line: {\"id\": N, \"lang\": \"en\" (or \"de\", 1 in 10),\n"
               "\"text\": \"...\"}. A text is sentences of words drawn from a seeded word\n"
               "model (frequent words often, a long tail rarely, a few with accents, CJK\n"
               "or emoji, and quoted words whose quotes JSON escapes), a paragraph break\n"
               "now and then; lengths vary from a few words to a few thousand (most\n"
               "short). N counts documents from 0 in file order; each text is a function\n"
               "of (seed, N) alone. DIR/_tokenizer.tiktoken is a tiktoken rank file for\n"
               "these texts, the same for every seed: the 256 bytes (byte b has rank b),\n"
               "then every prefix of every word of the model, as written and capitalised,\n"
               "with and without a leading space (use pattern cl100k_base). It has T\n"
               "tokens, ranks 0..T-1 (T is printed), leaving id T for a special token:\n"
               "\"specials\": {\"<|endoftext|>\": T}. Its name starts with '_', so a\n"
               "table's listing skips it. --index, --nulls, --strings and the Parquet\n"
               "options are refused.\n");
}

static int parse_u64(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    if (s[0] < '0' || s[0] > '9') {
        fprintf(stderr, "dpp-gen: %s: expected a non-negative integer, got \"%s\"\n", opt, s);
        return -1;
    }
    v = strtoull(s, &end, 10);
    if (*end != '\0' || errno == ERANGE || v > max) {
        fprintf(stderr, "dpp-gen: %s: \"%s\" is not an integer in 0..%" PRIu64 "\n", opt, s, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_date(const char *s, struct tm *out)
{
    int y, m, d;
    struct tm tm = {0};

    if (strlen(s) != 10)
        goto bad;
    for (int i = 0; i < 10; i++)
        if ((i == 4 || i == 7) ? s[i] != '-' : (s[i] < '0' || s[i] > '9'))
            goto bad;
    y = atoi(s);
    m = atoi(s + 5);
    d = atoi(s + 8);
    tm.tm_year = y - 1900;
    tm.tm_mon = m - 1;
    tm.tm_mday = d;
    /* timegm normalises 2026-02-30 into March: a changed date was invalid. */
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || tm.tm_year != y - 1900 || tm.tm_mon != m - 1 || tm.tm_mday != d)
        goto bad;
    *out = tm;
    return 0;
bad:
    fprintf(stderr, "dpp-gen: --start-date: \"%s\" is not a date YYYY-MM-DD\n", s);
    return -1;
}

/* Returns 0, 1 after --help, or -1 after printing what is wrong. */
static int parse_args(int argc, char **argv, gen_args_t *a)
{
    static const struct option opts[] = {
        {"rows", required_argument, NULL, 'r'},
        {"shards", required_argument, NULL, 's'},
        {"partitions", required_argument, NULL, 'p'},
        {"seed", required_argument, NULL, 'x'},
        {"out", required_argument, NULL, 'o'},
        {"start-date", required_argument, NULL, 'd'},
        {"index", no_argument, NULL, 'i'},
        {"format", required_argument, NULL, 'f'},
        {"compression", required_argument, NULL, 'c'},
        {"page-version", required_argument, NULL, 'P'},
        {"version", no_argument, NULL, 'V'},
        {"row-group-rows", required_argument, NULL, 'g'},
        {"nulls", no_argument, NULL, 'n'},
        {"complete", no_argument, NULL, 'C'},
        {"strings", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int have_rows = 0, have_shards = 0, have_parts = 0, have_seed = 0, complete = 0, c;
    const char *parquet_only = NULL;

    memset(a, 0, sizeof(*a));
    a->codec = DPP_GEN_CODEC_ZSTD;
    a->row_group_rows = 65536;
    a->missing_one_in = MISSING_ONE_IN;
    if (parse_date("2026-01-01", &a->start) != 0)
        return -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (parse_u64("--rows", optarg, INT64_MAX, &a->rows) != 0)
                return -1;
            have_rows = 1;
            break;
        case 's':
            if (parse_u64("--shards", optarg, MAX_SHARDS, &a->shards) != 0)
                return -1;
            have_shards = 1;
            break;
        case 'p':
            if (parse_u64("--partitions", optarg, MAX_PARTITIONS, &a->partitions) != 0)
                return -1;
            have_parts = 1;
            break;
        case 'x':
            if (parse_u64("--seed", optarg, UINT64_MAX, &a->seed) != 0)
                return -1;
            have_seed = 1;
            break;
        case 'o':
            a->out = optarg;
            break;
        case 'd':
            if (parse_date(optarg, &a->start) != 0)
                return -1;
            break;
        case 'i':
            a->index = 1;
            break;
        case 'f':
            if (strcmp(optarg, "tfrecord") == 0) {
                a->format = GEN_TFRECORD;
            } else if (strcmp(optarg, "parquet") == 0) {
                a->format = GEN_PARQUET;
            } else if (strcmp(optarg, "jsonl") == 0) {
                a->format = GEN_JSONL;
            } else {
                fprintf(stderr,
                        "dpp-gen: --format: expected tfrecord, parquet or jsonl, got \"%s\"\n",
                        optarg);
                return -1;
            }
            break;
        case 'c':
            if (strcmp(optarg, "zstd") == 0) {
                a->codec = DPP_GEN_CODEC_ZSTD;
            } else if (strcmp(optarg, "snappy") == 0) {
                a->codec = DPP_GEN_CODEC_SNAPPY;
            } else if (strcmp(optarg, "none") == 0) {
                a->codec = DPP_GEN_CODEC_NONE;
            } else {
                fprintf(stderr,
                        "dpp-gen: --compression: expected zstd, snappy or none, got \"%s\"\n",
                        optarg);
                return -1;
            }
            parquet_only = "--compression";
            break;
        case 'P':
            if (strcmp(optarg, "1") != 0 && strcmp(optarg, "2") != 0) {
                fprintf(stderr, "dpp-gen: --page-version: expected 1 or 2, got \"%s\"\n", optarg);
                return -1;
            }
            a->page_version = optarg[0] - '0';
            parquet_only = "--page-version";
            break;
        case 'g':
            if (parse_u64("--row-group-rows", optarg, MAX_ROW_GROUP_ROWS, &a->row_group_rows) != 0)
                return -1;
            if (a->row_group_rows == 0) {
                fprintf(stderr, "dpp-gen: --row-group-rows must be at least 1\n");
                return -1;
            }
            parquet_only = "--row-group-rows";
            break;
        case 'n':
            a->nulls = 1;
            a->missing_one_in = NULL_ONE_IN;
            break;
        case 'C':
            complete = 1;
            break;
        case 'S':
            a->strings = 1;
            break;
        case 'V':
            printf("%s\n", DPP_VERSION_LINE("dpp-gen"));
            return 1;
        case 'h':
            usage(stdout);
            return 1;
        case ':':
            fprintf(stderr, "dpp-gen: %s needs a value\n", argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "dpp-gen: unknown option \"%s\"\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dpp-gen: unexpected argument \"%s\"\n", argv[optind]);
        return -1;
    }
    if (!have_rows || !have_shards || !have_parts || !have_seed || !a->out || !a->out[0]) {
        fprintf(stderr, "dpp-gen: missing %s\n",
                !have_rows     ? "--rows"
                : !have_shards ? "--shards"
                : !have_parts  ? "--partitions"
                : !have_seed   ? "--seed"
                               : "--out");
        return -1;
    }
    if (a->shards == 0 || a->partitions == 0) {
        fprintf(stderr, "dpp-gen: --%s must be at least 1\n",
                a->shards == 0 ? "shards" : "partitions");
        return -1;
    }
    if (a->nulls && complete) {
        fprintf(stderr, "dpp-gen: --nulls and --complete contradict each other: give one\n");
        return -1;
    }
    if (complete)
        a->missing_one_in = 0;
    if (a->format == GEN_JSONL &&
        (parquet_only || a->index || a->nulls || complete || a->strings)) {
        fprintf(stderr, "dpp-gen: %s does not apply to --format jsonl\n",
                parquet_only ? parquet_only
                : a->index   ? "--index"
                : a->nulls   ? "--nulls"
                : complete   ? "--complete"
                             : "--strings");
        return -1;
    }
    if (a->format == GEN_TFRECORD && parquet_only) {
        fprintf(stderr, "dpp-gen: %s applies to --format parquet only\n", parquet_only);
        return -1;
    }
    if (a->format == GEN_PARQUET && a->index) {
        fprintf(stderr, "dpp-gen: --index is for --format tfrecord; a Parquet file's footer and "
                        "offset index are its index\n");
        return -1;
    }
    return 0;
}

/* splitmix64's finaliser: a bijection that scrambles every input bit. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counter-based draws: draw k of feature f in the row keyed by row_key. */
static inline uint64_t row_key(uint64_t seed, uint64_t row_id)
{
    return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ mix64(row_id + 0x632be59bd9b4e019ull));
}

static inline uint64_t draw(uint64_t key, unsigned f, unsigned k)
{
    return mix64(key + ((uint64_t)f << 16 | k) * 0xd1b54a32d192ed03ull);
}

static inline unsigned clz64(uint64_t v)
{
    return (unsigned)__builtin_clzll(v | 1);
}

/* A dense value as other writers' Criteo-like tables hold them: log2|x|
 * about normal (an Irwin-Hall sum of four uniforms) around 2 with the
 * feature's spread, so values range over many binades with full mantissas;
 * 2% negative; 0.3% 2^10..2^23 times larger (the outliers real logs have);
 * count features rounded down to integers (most small, many zeros). The
 * float is assembled from its bits with integer math only, so the value
 * does not depend on the libm or FPU of the machine. Draw 3 is left to
 * row_fill. */
static float dense_value(uint64_t key, unsigned j)
{
    unsigned f = 2 + j;
    uint64_t kind = draw(key, f, 0) % 10000;
    uint64_t r = draw(key, f, 1), m = draw(key, f, 2);
    /* four 16-bit uniforms: mean 2^17, standard deviation 2^16 / sqrt(3) */
    int64_t g = (int64_t)((r & 0xffff) + (r >> 16 & 0xffff) + (r >> 32 & 0xffff) + (r >> 48)) -
                (1 << 17);
    /* log2|x| in 16.16 fixed point: 2 + g * (spread / 2) / (2^16 / sqrt(3)) */
    int64_t e = (2 << 16) + g * (int64_t)dense_spread[j] * 113512 / 131072;
    int exp2 = (int)(e >> 16); /* floor: e >> 16 of a negative rounds down */

    if (kind < 30)
        exp2 += 10 + (int)(m >> 60) % 14;
    /* 2^exp2 * (1 + frac): the fraction of the binade from e, refined below
     * 2^-16 by random bits, so mantissas are full */
    uint32_t mant = (uint32_t)(e & 0xffff) << 7 | (uint32_t)(m & 0x7f);
    if (dense_count[j]) {
        if (exp2 < 0)
            return kind >= 9800 ? -1.0f : 0.0f;
        if (exp2 < 23)
            mant &= ~((1u << (23 - exp2)) - 1); /* floor to an integer */
    }
    uint32_t bits = (uint32_t)(exp2 + 127) << 23 | mant;
    if (kind >= 9800)
        bits |= 1u << 31;
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* Ids of one sparse feature: log-uniform ranks (P(rank) ~ 1/rank, Zipf with
 * s = 1) over the feature's vocabulary, hashed with the feature index into a
 * 2^40 id space so that every feature has its own ids. */
static size_t sparse_ids(uint64_t key, unsigned j, int64_t *ids)
{
    unsigned f = 2 + NDENSE + j;
    unsigned bits = sparse_vocab_bits[j];
    size_t len = 1 + clz64(draw(key, f, 0)) * sparse_len_scale[j] / 2;

    if (len > MAX_IDS)
        len = MAX_IDS;
    for (size_t k = 0; k < len; k++) {
        unsigned e = (unsigned)(draw(key, f, 1 + 2 * (unsigned)k) % (bits + 1));
        uint64_t span = (1ull << e) - 1;
        uint64_t rank = span + (draw(key, f, 2 + 2 * (unsigned)k) & span);
        uint64_t h = mix64(rank * 0x9e3779b97f4a7c15ull + (j + 1) * 0xff51afd7ed558ccdull);
        ids[k] = (int64_t)(h >> 24);
    }
    return len;
}

/* The row keyed by (seed, row_id): everything both formats write. */
static void row_fill(dpp_gen_row_t *r, const gen_args_t *a, uint64_t row_id)
{
    uint64_t key = row_key(a->seed, row_id);

    r->row_id = (int64_t)row_id;
    r->label = draw(key, 1, 0) < (UINT64_MAX / 4) + 1 ? 1 : 0;
    r->dense_null = 0;
    for (unsigned j = 0; j < NDENSE; j++) {
        r->dense[j] = dense_value(key, j);
        /* Draw 3 is one dense_value does not use, so --nulls and --complete
         * leave the present values as they are by default. */
        if (a->missing_one_in && draw(key, 2 + j, 3) % a->missing_one_in == 0)
            r->dense_null |= 1u << j;
    }
    r->sparse_null = 0;
    for (unsigned j = 0; j < NSPARSE; j++) {
        r->n_ids[j] = (uint8_t)sparse_ids(key, j, r->ids[j]);
        /* draw 63 is one sparse_ids never uses (it takes 0..2 * MAX_IDS) */
        uint64_t d = a->missing_one_in ? draw(key, 2 + NDENSE + j, 63) % a->missing_one_in : 2;
        if (d == 0)
            r->sparse_null |= 1u << j;
        if (d == 0 || (d == 1 && a->nulls))
            r->n_ids[j] = 0; /* null, or (--nulls) present and empty */
    }
    r->s1_len =
        (uint8_t)snprintf(r->s1, sizeof(r->s1), "v%u", (unsigned)(draw(key, F_S1, 0) % S1_VOCAB));
    r->s1_null = a->missing_one_in && draw(key, F_S1, 3) % a->missing_one_in == 0;
}

static void row_msg_init(row_msg_t *m)
{
    memset(m, 0, sizeof(*m));
    m->ex = (Tfex__Example)TFEX__EXAMPLE__INIT;
    m->features = (Tfex__Features)TFEX__FEATURES__INIT;
    m->ex.features = &m->features;
    m->features.n_feature = NFEAT;
    m->features.feature = m->entry_ptr;
    for (unsigned i = 0; i <= NFEAT; i++) {
        Tfex__FeatureEntry *e = &m->entry[i];
        Tfex__Feature *f = &m->feature[i];

        if (i == F_S1)
            snprintf(m->name[i], sizeof(m->name[i]), "s1");
        else if (i == 0)
            snprintf(m->name[i], sizeof(m->name[i]), "row_id");
        else if (i == 1)
            snprintf(m->name[i], sizeof(m->name[i]), "label");
        else if (i < 2 + NDENSE)
            snprintf(m->name[i], sizeof(m->name[i]), "i%u", i - 1);
        else
            snprintf(m->name[i], sizeof(m->name[i]), "c%u", i - 1 - NDENSE);
        *e = (Tfex__FeatureEntry)TFEX__FEATURE_ENTRY__INIT;
        *f = (Tfex__Feature)TFEX__FEATURE__INIT;
        e->key = m->name[i];
        e->value = f;
        m->entry_ptr[i] = e;
        if (i == F_S1) {
            Tfex__BytesList *bl = &m->s1_list;
            *bl = (Tfex__BytesList)TFEX__BYTES_LIST__INIT;
            bl->n_value = 1;
            bl->value = &m->s1_value;
            m->s1_value.data = (uint8_t *)m->row.s1;
            f->kind_case = TFEX__FEATURE__KIND_BYTES_LIST;
            f->bytes_list = bl;
        } else if (i >= 2 && i < 2 + NDENSE) {
            Tfex__FloatList *fl = &m->floats[i - 2];
            *fl = (Tfex__FloatList)TFEX__FLOAT_LIST__INIT;
            fl->n_value = 1;
            fl->value = &m->row.dense[i - 2];
            f->kind_case = TFEX__FEATURE__KIND_FLOAT_LIST;
            f->float_list = fl;
        } else {
            unsigned k = i < 2 ? i : i - NDENSE;
            Tfex__Int64List *il = &m->ints[k];
            *il = (Tfex__Int64List)TFEX__INT64_LIST__INIT;
            il->n_value = 1;
            il->value = i == 0 ? &m->row.row_id : i == 1 ? &m->row.label : m->row.ids[k - 2];
            f->kind_case = TFEX__FEATURE__KIND_INT64_LIST;
            f->int64_list = il;
        }
    }
}

/* Points the message at m->row, filled by row_fill. A null i-value, list
 * or s1 is an absent feature; s1 is the last feature, with --strings only. */
static void row_msg_fill(row_msg_t *m, const gen_args_t *a)
{
    size_t n = 0;

    for (unsigned j = 0; j < NSPARSE; j++)
        m->ints[2 + j].n_value = m->row.n_ids[j];
    m->s1_value.len = m->row.s1_len;
    for (unsigned i = 0; i < NFEAT; i++)
        if (!(i >= 2 && i < 2 + NDENSE && (m->row.dense_null >> (i - 2) & 1)) &&
            !(i >= 2 + NDENSE && (m->row.sparse_null >> (i - 2 - NDENSE) & 1)))
            m->entry_ptr[n++] = &m->entry[i];
    if (a->strings && !m->row.s1_null)
        m->entry_ptr[n++] = &m->entry[F_S1];
    m->features.n_feature = n;
}

/* ---- --format jsonl: documents from a seeded word model ---- */

static const char *const common_words[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
    "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have",
    "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has",
    "there", "been", "if", "more", "when", "will", "would", "who", "so", "no", "data", "model",
    "training", "batch", "worker", "table", "split", "token", "sequence", "epoch", "rank"};
static const char *const rare_words[] = {
    "café", "naïve", "Zürich", "straße", "日本語", "中文", "Привет", "😀", "👍🏽", "2026",
    "3.14159", "e.g.,", "—", "\"quoted\"", "back\\slash", "tab\there"};
#define NCOMMON (sizeof common_words / sizeof common_words[0])
#define NRARE (sizeof rare_words / sizeof rare_words[0])
#define DOC_MAX (64 * 1024) /* bytes of one line, escapes included */

/* Appends s to the line as JSON string content (", \\ and control
 * characters escaped). Returns 0, or -1 when the line would be too long. */
static int json_put(char *line, size_t *n, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        size_t l = 0;
        if (c == '"' || c == '\\')
            esc[l++] = '\\', esc[l++] = (char)c;
        else if (c == '\n')
            esc[l++] = '\\', esc[l++] = 'n';
        else if (c == '\t')
            esc[l++] = '\\', esc[l++] = 't';
        else if (c < 0x20)
            l = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            esc[l++] = (char)c;
        if (*n + l + 8 > DOC_MAX)
            return -1;
        memcpy(line + *n, esc, l);
        *n += l;
    }
    return 0;
}

/* word as it begins a sentence: a first letter a-z upper-cased (a copy in
 * cap, valid while cap is), any other word as it is. */
static const char *sentence_form(const char *word, char cap[32])
{
    if (word[0] < 'a' || word[0] > 'z')
        return word;
    snprintf(cap, 32, "%s", word);
    cap[0] = (char)(cap[0] - 'a' + 'A');
    return cap;
}

/* Document `id` as one JSON line (with its '\n') into line; its length. */
static size_t doc_line(const gen_args_t *a, uint64_t id, char *line)
{
    uint64_t key = row_key(a->seed, id);
    size_t n = (size_t)snprintf(line, DOC_MAX, "{\"id\": %" PRIu64 ", \"lang\": \"%s\", \"text\": \"",
                                id, draw(key, 0, 0) % 10 == 0 ? "de" : "en");
    /* most documents short, a few long: a geometric number of doublings */
    unsigned scale = clz64(draw(key, 1, 0) | 1);
    uint64_t words = 3 + draw(key, 1, 1) % (16u << (scale < 9 ? scale : 9));
    int sentence_start = 1;
    for (uint64_t w = 0; w < words; w++) {
        uint64_t d = draw(key, 2, (unsigned)w);
        const char *word;
        char cap[32];
        if (d % 50 == 0) {
            word = rare_words[(d >> 8) % NRARE];
        } else {
            /* Zipf-like: rank (2^e - 1) + uniform below 2^e, e uniform */
            unsigned e = (unsigned)((d >> 8) % 7);
            uint64_t rank = ((1u << e) - 1) + ((d >> 16) & ((1u << e) - 1));
            word = common_words[rank % NCOMMON];
        }
        if (sentence_start)
            word = sentence_form(word, cap);
        const char *sep = w + 1 == words ? "." : (d >> 40) % 12 == 0 ? ". " : (d >> 40) % 17 == 0 ? ", " : " ";
        if (json_put(line, &n, word) != 0 || json_put(line, &n, sep) != 0)
            break;
        sentence_start = sep[0] == '.';
        if (sentence_start && (d >> 48) % 9 == 0 && w + 1 < words && json_put(line, &n, "\n\n") != 0)
            break;
    }
    memcpy(line + n, "\"}\n", 3);
    return n + 3;
}

/* ---- --format jsonl: a tokenizer for the corpus ---- */

#define TOKENIZER_NAME "_tokenizer.tiktoken"
#define TOK_MAX 2048 /* tokens of the rank file: the word model makes 1,035 */
#define TOK_LEN 48   /* bytes of a token: a space and the longest word form */

typedef struct tok_list {
    char tok[TOK_MAX][TOK_LEN];
    uint8_t len[TOK_MAX];
    size_t n;
} tok_list_t;

/* Appends the token unless the list has it (a linear search: about a
 * thousand tokens, once per run). Returns 0, or -1 when it does not fit. */
static int tok_add(tok_list_t *t, const char *b, size_t len)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->len[i] == len && memcmp(t->tok[i], b, len) == 0)
            return 0;
    if (len == 0 || len > TOK_LEN || t->n == TOK_MAX)
        return -1;
    memcpy(t->tok[t->n], b, len);
    t->len[t->n++] = (uint8_t)len;
    return 0;
}

/* Every prefix of 2 bytes or more of word (after a space when space): each
 * one is the merge of the prefix before it and one byte, both of lower
 * rank. Whatever BPE merges first, its first part is then always a prefix
 * that merges with the next part, so it ends at the whole word. */
static int tok_prefixes(tok_list_t *t, const char *word, int space)
{
    char b[TOK_LEN + 1];
    size_t n = (size_t)snprintf(b, sizeof b, "%s%s", space ? " " : "", word);

    if (n > TOK_LEN)
        return -1;
    for (size_t k = 2; k <= n; k++)
        if (tok_add(t, b, k) != 0)
            return -1;
    return 0;
}

static void base64(const uint8_t *in, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        *out++ = a[v >> 18];
        *out++ = a[(v >> 12) & 63];
        *out++ = i + 1 < n ? a[(v >> 6) & 63] : '=';
        *out++ = i + 2 < n ? a[v & 63] : '=';
    }
    *out = '\0';
}

/* The ranks: the 256 bytes (byte b has rank b), then the prefixes of every
 * word doc_line can write (each word and its sentence_form, without and
 * then with a leading space, the cl100k_base pattern's pieces), in a fixed
 * order. Returns 0, or -1 when the word model outgrows TOK_MAX/TOK_LEN. */
static int tok_build(tok_list_t *t)
{
    t->n = 0;
    for (unsigned b = 0; b < 256; b++) {
        t->tok[t->n][0] = (char)b;
        t->len[t->n++] = 1;
    }
    for (int space = 0; space < 2; space++)
        for (int capital = 0; capital < 2; capital++)
            for (size_t i = 0; i < NCOMMON + NRARE; i++) {
                const char *w = i < NCOMMON ? common_words[i] : rare_words[i - NCOMMON];
                char cap[32];
                if (tok_prefixes(t, capital ? sentence_form(w, cap) : w, space) != 0)
                    return -1;
            }
    return 0;
}

/* Writes DIR/_tokenizer.tiktoken, "BASE64 RANK" lines in rank order, through
 * a hidden temporary file renamed into place (as write_shard does). Its
 * name starts with '_', so a table's listing skips it. Sets *ntokens to the
 * token count; returns 0, or -1 after saying what failed. */
static int write_tokenizer(const char *dir, size_t *ntokens)
{
    char path[PATH_MAX], tmp[PATH_MAX], b64[(TOK_LEN + 2) / 3 * 4 + 1];
    tok_list_t *t = calloc(1, sizeof *t);
    FILE *f = NULL;
    int rc = -1;

    if (!t) {
        fprintf(stderr, "dpp-gen: out of memory\n");
        goto out;
    }
    if (tok_build(t) != 0) {
        fprintf(stderr, "dpp-gen: the word model needs more than %d tokens of at most %d bytes\n",
                TOK_MAX, TOK_LEN);
        goto out;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, TOKENIZER_NAME) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, TOKENIZER_NAME) >= sizeof tmp) {
        fprintf(stderr, "dpp-gen: %s/%s: path too long\n", dir, TOKENIZER_NAME);
        goto out;
    }
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "dpp-gen: cannot create %s: %s\n", tmp, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < t->n; i++) {
        base64((const uint8_t *)t->tok[i], t->len[i], b64);
        fprintf(f, "%s %zu\n", b64, i);
    }
    int bad = fflush(f) != 0 || ferror(f);
    bad |= fclose(f) != 0;
    f = NULL;
    if (bad) {
        fprintf(stderr, "dpp-gen: write %s: %s\n", tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "dpp-gen: rename %s to %s: %s\n", tmp, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    *ntokens = t->n;
    rc = 0;
out:
    free(t);
    return rc;
}

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t len = strlen(path);

    if (len >= sizeof(buf)) {
        fprintf(stderr, "dpp-gen: %s: path too long\n", path);
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "dpp-gen: cannot create directory %s: %s\n", buf, strerror(errno));
            return -1;
        }
        buf[i] = saved;
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "dpp-gen: %s: not a directory\n", path);
        return -1;
    }
    return 0;
}

/* Output state shared by every file of the run. */
typedef struct writer {
    row_msg_t msg;
    dpp_gen_pq_t *pq; /* --format parquet */
    uint8_t *rec;     /* framed record buffer */
    size_t rec_cap;
    char *file_buf; /* stdio buffer */
    char *idx_buf;  /* stdio buffer of the --index sidecar */
    char *line;     /* --format jsonl: one document's line */
    uint64_t bytes;
} writer_t;

/* The rows [first, first + n) as one Parquet file on f, which the caller
 * flushes and closes. Returns 0, or -1 after saying what failed. */
static int write_parquet_rows(writer_t *w, const gen_args_t *a, FILE *f, const char *tmp,
                              uint64_t first, uint64_t n)
{
    uint64_t bytes = 0;
    int rc = dpp_gen_pq_begin(w->pq, f);

    for (uint64_t row = first; rc == 0 && row < first + n; row++) {
        row_fill(&w->msg.row, a, row);
        rc = dpp_gen_pq_add(w->pq, &w->msg.row);
    }
    if (rc == 0)
        rc = dpp_gen_pq_end(w->pq, &bytes);
    if (rc != 0) {
        fprintf(stderr, "dpp-gen: write %s: %s\n", tmp, strerror(-rc));
        return -1;
    }
    w->bytes += bytes;
    return 0;
}

/* Writes rows [first, first + n) to path, through a hidden temporary file
 * renamed into place at the end, so that a reader never sees half a file.
 * With --index the sidecar is written alongside (offsets counted while
 * writing, no re-scan) and renamed in after the data file; an old sidecar is
 * removed first, so it is never paired with new data. */
static int write_shard(writer_t *w, const gen_args_t *a, const char *dir, const char *name,
                       uint64_t first, uint64_t n)
{
    char path[PATH_MAX], tmp[PATH_MAX], idx_path[PATH_MAX], idx_tmp[PATH_MAX];
    FILE *f, *fi = NULL;
    uint64_t off = 0;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
        (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name) >= sizeof(tmp) ||
        (size_t)snprintf(idx_path, sizeof(idx_path), "%s/%s.idx", dir, name) >= sizeof(idx_path) ||
        (size_t)snprintf(idx_tmp, sizeof(idx_tmp), "%s/.%s.idx.tmp", dir, name) >=
            sizeof(idx_tmp)) {
        fprintf(stderr, "dpp-gen: %s/%s: path too long\n", dir, name);
        return -1;
    }
    f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "dpp-gen: cannot create %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    setvbuf(f, w->file_buf, _IOFBF, WRITE_BUF);
    if (a->index) {
        fi = fopen(idx_tmp, "wb");
        if (!fi) {
            fprintf(stderr, "dpp-gen: cannot create %s: %s\n", idx_tmp, strerror(errno));
            goto fail;
        }
        setvbuf(fi, w->idx_buf, _IOFBF, WRITE_BUF);
    }
    if (a->format == GEN_PARQUET) {
        if (write_parquet_rows(w, a, f, tmp, first, n) != 0)
            goto fail;
    } else if (a->format == GEN_JSONL) {
        for (uint64_t doc = first; doc < first + n; doc++) {
            size_t len = doc_line(a, doc, w->line);
            if (fwrite(w->line, 1, len, f) != len) {
                fprintf(stderr, "dpp-gen: write %s: %s\n", tmp, strerror(errno));
                goto fail;
            }
            w->bytes += len;
        }
    } else {
        for (uint64_t row = first; row < first + n; row++) {
            row_fill(&w->msg.row, a, row);
            row_msg_fill(&w->msg, a);
            size_t len = tfex__example__get_packed_size(&w->msg.ex);
            if (len + DPP_TFRECORD_OVERHEAD > w->rec_cap) {
                size_t cap = 2 * (len + DPP_TFRECORD_OVERHEAD);
                uint8_t *p = realloc(w->rec, cap);
                if (!p) {
                    fprintf(stderr, "dpp-gen: out of memory\n");
                    goto fail;
                }
                w->rec = p;
                w->rec_cap = cap;
            }
            /* Serialised in place after the 12-byte header, then framed. */
            tfex__example__pack(&w->msg.ex, w->rec + 12);
            size_t framed = dpp_tfrecord_frame(w->rec, w->rec + 12, len);
            if (fwrite(w->rec, 1, framed, f) != framed) {
                fprintf(stderr, "dpp-gen: write %s: %s\n", tmp, strerror(errno));
                goto fail;
            }
            if (fi && fprintf(fi, "%" PRIu64 " %zu\n", off, framed) < 0) {
                fprintf(stderr, "dpp-gen: write %s: %s\n", idx_tmp, strerror(errno));
                goto fail;
            }
            off += framed;
            w->bytes += framed;
        }
    }
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "dpp-gen: write %s: %s\n", tmp, strerror(errno));
        goto fail;
    }
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "dpp-gen: close %s: %s\n", tmp, strerror(errno));
        goto fail;
    }
    f = NULL;
    if (fi) {
        int bad = fflush(fi) != 0 || ferror(fi);
        bad |= fclose(fi) != 0;
        fi = NULL;
        if (bad) {
            fprintf(stderr, "dpp-gen: write %s: %s\n", idx_tmp, strerror(errno));
            goto fail;
        }
    }
    if (unlink(idx_path) != 0 && errno != ENOENT) {
        fprintf(stderr, "dpp-gen: remove the old %s: %s\n", idx_path, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "dpp-gen: rename %s to %s: %s\n", tmp, path, strerror(errno));
        goto fail;
    }
    if (a->index && rename(idx_tmp, idx_path) != 0) {
        fprintf(stderr, "dpp-gen: rename %s to %s: %s\n", idx_tmp, idx_path, strerror(errno));
        unlink(idx_tmp);
        return -1;
    }
    return 0;

fail:
    if (f)
        fclose(f);
    if (fi)
        fclose(fi);
    unlink(tmp);
    if (a->index)
        unlink(idx_tmp);
    return -1;
}

static int generate(const gen_args_t *a)
{
    writer_t *w = calloc(1, sizeof(*w));
    char dir[PATH_MAX], name[48];
    uint64_t row = 0, files = 0;
    int rc = -1;

    if (!w || !(w->file_buf = malloc(WRITE_BUF)) ||
        (a->index && !(w->idx_buf = malloc(WRITE_BUF))) ||
        (a->format == GEN_JSONL && !(w->line = malloc(DOC_MAX)))) {
        fprintf(stderr, "dpp-gen: out of memory\n");
        goto out;
    }
    row_msg_init(&w->msg);
    if (a->format == GEN_PARQUET) {
        dpp_gen_pq_opts_t o = {
            .codec = a->codec,
            .row_group_rows = a->row_group_rows,
            .page_version = a->page_version,
            .created_by = "dpp-gen " DPP_VERSION,
        };
        w->pq = dpp_gen_pq_new(&o);
    }
    if (mkdir_p(a->out) != 0)
        goto out;
    for (uint64_t p = 0; p < a->partitions; p++) {
        /* The first rows % partitions partitions (and within a partition the
         * first shards) take one extra row. */
        uint64_t part_rows = a->rows / a->partitions + (p < a->rows % a->partitions);
        struct tm day = a->start;
        day.tm_mday += (int)p;
        time_t t = timegm(&day);
        struct tm norm;
        if (t == (time_t)-1 || !gmtime_r(&t, &norm)) {
            fprintf(stderr, "dpp-gen: date out of range\n");
            goto out;
        }
        int n = snprintf(dir, sizeof(dir), "%s/ds=%04d-%02d-%02d", a->out, norm.tm_year + 1900,
                         norm.tm_mon + 1, norm.tm_mday);
        if (n < 0 || (size_t)n >= sizeof(dir)) {
            fprintf(stderr, "dpp-gen: %s: path too long\n", a->out);
            goto out;
        }
        if (mkdir_p(dir) != 0)
            goto out;
        for (uint64_t s = 0; s < a->shards; s++) {
            uint64_t shard_rows = part_rows / a->shards + (s < part_rows % a->shards);
            snprintf(name, sizeof(name), "part-%05" PRIu64 ".%s", s,
                     a->format == GEN_PARQUET ? "parquet"
                     : a->format == GEN_JSONL ? "jsonl"
                                              : "tfrecord");
            if (write_shard(w, a, dir, name, row, shard_rows) != 0)
                goto out;
            row += shard_rows;
            files++;
        }
    }
    printf("dpp-gen: wrote %" PRIu64 " %s in %" PRIu64 " files, %" PRIu64 " bytes, under %s\n",
           row, a->format == GEN_JSONL ? "documents" : "rows", files, w->bytes, a->out);
    if (a->format == GEN_JSONL) {
        size_t ntok = 0;
        if (write_tokenizer(a->out, &ntok) != 0)
            goto out;
        printf("dpp-gen: wrote %s/%s, %zu tokens (pattern cl100k_base; name "
               "<|endoftext|> id %zu in the spec's tokenizer.specials)\n",
               a->out, TOKENIZER_NAME, ntok, ntok);
    }
    rc = 0;
out:
    if (w) {
        free(w->rec);
        free(w->file_buf);
        free(w->idx_buf);
        free(w->line);
        dpp_gen_pq_free(w->pq);
        free(w);
    }
    return rc;
}

int main(int argc, char **argv)
{
    gen_args_t args;
    int rc = parse_args(argc, argv, &args);

    if (rc > 0)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "Try 'dpp-gen --help'.\n");
        return 2;
    }
    return generate(&args) == 0 ? 0 : 1;
}
