/* SPDX-License-Identifier: Apache-2.0 */
/* Session spec v1: parsing, validation and the normalised form that travels
 * to workers. Reference: docs/spec.md. */
#ifndef DPP_SPEC_SPEC_H
#define DPP_SPEC_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"

#define DPP_SPEC_ERRLEN 512

#define DPP_SPEC_MAX_DIM 65536        /* dense values per row */
#define DPP_SPEC_MAX_BOUNDARIES 65536 /* bucketize */
#define DPP_SPEC_MAX_FILTERS 64
#define DPP_SPEC_MAX_BYTES (1u << 20) /* spec text; a master may allow less */
#define DPP_SPEC_MAX_DEPTH 32         /* JSON nesting (a spec needs 6) */
#define DPP_SPEC_MAX_FEATURES 4096    /* dense + sparse; a master may allow fewer */
#define DPP_SPEC_DEFAULT_SPLIT_ROWS 65536

typedef enum dpp_op_kind {
    DPP_OP_FILL_MISSING, /* dense: absent -> value */
    DPP_OP_CLAMP,        /* dense: min and/or max */
    DPP_OP_LOG1P,        /* dense: log1p(x), computed in double */
    DPP_OP_MODULO,       /* sparse: floor-mod n (result in [0, n)) */
    DPP_OP_TRUNCATE,     /* sparse: keep the first (or last) max_len ids; also "first_x" */
    DPP_OP_STANDARDIZE,  /* dense: (x - mean) / std, computed in double */
    DPP_OP_BUCKETIZE,    /* dense: number of boundaries <= x */
    DPP_OP_CAST,         /* dense: rounded to the precision of cast_to */
    DPP_OP_HASH,         /* sparse: SplitMix64 finalizer of (id, salt), mod n; strings: XXH3 */
    DPP_OP_VOCAB,        /* sparse strings: line number in a vocabulary file, or an OOV id */
} dpp_op_kind_t;

typedef enum dpp_cast_type {
    DPP_CAST_INT,      /* truncate toward zero, saturating at +-2^63 */
    DPP_CAST_BFLOAT16, /* nearest bfloat16, ties to even */
    DPP_CAST_FLOAT16,  /* nearest IEEE half, ties to even */
} dpp_cast_type_t;

/* One op of a chain. Only the fields of `op` are meaningful; the others are
 * zero (clamp's unbounded sides are -inf / +inf). n_recip is derived from n:
 * the parser sets it through dpp_transform_prepare() (transform.h), and a
 * hand-built modulo or hash must be prepared the same way. */
typedef struct dpp_transform {
    dpp_op_kind_t op;
    double value;            /* fill_missing */
    double min, max;         /* clamp; -inf / +inf when not given */
    double mean, std;        /* standardize, std > 0 */
    double *boundaries;      /* bucketize, strictly increasing; owned by the spec */
    uint32_t nboundaries;    /* bucketize, 1 to DPP_SPEC_MAX_BOUNDARIES */
    dpp_cast_type_t cast_to; /* cast */
    int64_t n;               /* modulo and hash, > 0 */
    uint64_t n_recip;        /* modulo and hash: UINT64_MAX / n, for reducing without a divide */
    int64_t salt;            /* hash */
    uint32_t max_len;        /* truncate */
    int keep_last;           /* truncate: 1 keeps the last max_len ids, 0 the first */
    char *file;              /* vocab: the vocabulary, relative to a data root; owned */
    int64_t oov_buckets;     /* vocab: 0: one id for every unknown string, else that many */
    const struct dpp_vocab *vocab; /* vocab: the loaded file (the worker's), NULL before */
} dpp_transform_t;

typedef struct dpp_feature_spec {
    char *name;
    unsigned dim;  /* dense: values per row, 1 to DPP_SPEC_MAX_DIM; sparse: 0 */
    char *weights; /* sparse: the float-list feature holding per-id weights, or NULL */
    dpp_transform_t *ops;
    unsigned nops;
    int optional; /* "optional": true: may be absent from every record (no schema error) */
} dpp_feature_spec_t;

typedef enum dpp_filter_kind {
    DPP_FILTER_REQUIRE, /* drop the row when `feature` is absent */
    DPP_FILTER_SAMPLE,  /* keep a deterministic fraction p of the (label-selected) rows */
} dpp_filter_kind_t;

/* A row filter. threshold and seed_mix are derived from p and seed by
 * dpp_filter_prepare() (transform.h), which the parser calls. */
typedef struct dpp_filter {
    dpp_filter_kind_t kind;
    char *feature;      /* require: a name of the spec (feature, weights or label) */
    double p;           /* sample: keep probability, 0 to 1 */
    int64_t seed;       /* sample */
    int has_label;      /* sample: 1 when only rows with this label are sampled */
    double label;       /* sample, when has_label: compared as float32 */
    uint64_t threshold; /* sample: a subject row is kept iff its draw < threshold (p < 1) */
    uint64_t seed_mix;  /* sample: mix64(seed) */
} dpp_filter_t;

typedef enum dpp_compression {
    DPP_COMPRESSION_AUTO, /* the worker decides per block */
    DPP_COMPRESSION_OFF,
    DPP_COMPRESSION_ZSTD,
} dpp_compression_t;

/* What happens to the records that do not fill a last batch of every rank
 * (docs/spec.md#remainder). */
typedef enum dpp_remainder {
    DPP_REMAINDER_DROP, /* equal full batches per rank, fewer than ranks x batch_size records left
                           out */
    DPP_REMAINDER_KEEP, /* every record; a rank's last batch may be short */
    DPP_REMAINDER_PAD,  /* every record; last batches filled with masked empty rows */
} dpp_remainder_t;

/* `"epochs": "unbounded"`: epochs follow each other until the session is
 * cancelled (the same value as include/dpp/client.h's). */
#define DPP_EPOCHS_UNBOUNDED 0xffffffffu

/* idle_timeout_s left out of a spec: the master decides. */
#define DPP_SPEC_IDLE_DEFAULT (-1)

/* max_reject_ratio left out: a session that rejects more than 1% of its
 * records fails (docs/spec.md#max_reject_ratio). */
#define DPP_SPEC_DEFAULT_REJECT_RATIO 0.01

/* A text session (format "jsonl" or "text", or "parquet" with a text
 * section: a string column): which documents, the tokenizer and how its
 * ids are packed into sequences (docs/spec.md#text-sessions). Its
 * blocks have no features of the spec's own: the parser fills dense,
 * sparse and label with the text columns below (DPP_TEXT_COLUMNS), so
 * every layer above the source moves them like any other sparse feature. */
typedef enum dpp_pack_kind {
    DPP_PACK_KIND_CONCAT = 0,   /* documents joined and cut every length tokens */
    DPP_PACK_KIND_BEST_FIT = 1, /* documents kept whole where they fit, best-fit decreasing */
} dpp_pack_kind_t;

#define DPP_SPEC_MAX_CONSUMERS 16384 /* trainer ranks; each costs the master ~200 bytes per session */
#define DPP_TEXT_MAX_LENGTH 65536 /* tokens per sequence */
#define DPP_TEXT_MAX_WHERE 16
#define DPP_TEXT_MAX_SPECIALS 64
#define DPP_TEXT_DEFAULT_WINDOW 256

/* What tokenizer.file is (src/text/tokenizer.h). */
typedef enum dpp_tokenizer_kind {
    DPP_TOKENIZER_TIKTOKEN = 0,      /* a tiktoken rank file */
    DPP_TOKENIZER_HUGGINGFACE = 1,   /* a Hugging Face tokenizer.json (byte-level BPE) */
    DPP_TOKENIZER_SENTENCEPIECE = 2, /* a SentencePiece .model (Unigram or BPE) */
} dpp_tokenizer_kind_t;

/* What a document of plain text (format "text") is. */
typedef enum dpp_text_unit {
    DPP_TEXT_UNIT_LINE = 0, /* each line (default) */
    DPP_TEXT_UNIT_FILE = 1, /* each file, whole */
} dpp_text_unit_t;

typedef struct dpp_text_spec {
    char *field;                 /* the document's text (JSONL field, Parquet column), "text" */
    dpp_text_unit_t unit;        /* format "text" */
    uint64_t min_bytes;          /* documents shorter (UTF-8 bytes, unescaped) are filtered */
    uint64_t max_bytes;          /* ... and longer; UINT64_MAX: no bound */
    char **where_keys, **where_values; /* field == value (strings), all of them */
    unsigned nwhere;
    char *tokenizer_file;        /* relative to a data root */
    dpp_tokenizer_kind_t tokenizer_kind;
    char *pattern;               /* tiktoken: the encoding whose split pattern applies */
    char **special_names;        /* tiktoken: special tokens by name (default: the encoding's) */
    int64_t *special_ids;
    unsigned nspecials;
    unsigned length;             /* tokens per sequence */
    dpp_pack_kind_t pack;
    unsigned window;             /* best_fit: documents packed together */
    char *eos, *bos;             /* special token names, NULL: none */
} dpp_text_spec_t;

/* The columns of a text session's blocks, in sparse-feature order; the
 * label column holds each sequence's padded positions. */
#define DPP_TEXT_COLUMNS {"input_ids", "labels", "position_ids", "cu_seqlens"}
#define DPP_TEXT_NCOLUMNS 4
#define DPP_TEXT_LABEL "padding"

typedef struct dpp_spec {
    char *table;          /* relative to a data root */
    dpp_format_t format;  /* of the table's files, default tfrecord */
    char **partitions;    /* folder names such as "ds=2026-01-01" */
    unsigned npartitions; /* 0: every partition of the table */
    unsigned batch_size;
    unsigned epochs;               /* default 1; DPP_EPOCHS_UNBOUNDED: until cancelled */
    unsigned consumers;            /* trainer ranks, default 1 */
    unsigned split_rows;           /* target rows per split of an indexed file, default 65536 */
    int on_corrupt_fail;           /* 0: skip corrupted records (default), 1: fail the session */
    dpp_compression_t compression; /* default auto */
    int compression_level;         /* 1 to 19, default 1 */
    dpp_remainder_t remainder;     /* default drop */
    int shuffle;                   /* 0: file order (default); 1: permuted by shuffle_seed */
    int64_t shuffle_seed;
    int order_fastest; /* 0 ("deterministic", default): blocks consumed in plan order */
    int cache_off;     /* 0 ("auto", default): workers may cache and reuse split outputs */
    /* seconds the session may go with no client attached before it ends as
     * failed ("abandoned"); 0: never; DPP_SPEC_IDLE_DEFAULT: the master's
     * --session-idle-timeout */
    int64_t idle_timeout_s;
    /* the share of records rejected (not filtered) past which the session
     * fails; default DPP_SPEC_DEFAULT_REJECT_RATIO */
    double max_reject_ratio;
    /* at least one feature between dense and sparse; either list may be
     * empty (NULL, 0) */
    dpp_feature_spec_t *dense;
    unsigned ndense;
    dpp_feature_spec_t *sparse;
    unsigned nsparse;
    char *label;           /* NULL: the spec has none, and its blocks carry no labels */
    dpp_filter_t *filters; /* applied in order, after decoding, before transforms */
    unsigned nfilters;
    dpp_text_spec_t *text; /* a text session; NULL otherwise */
    /* A mixture (spec "sources", docs/spec.md#mixtures): nsources >= 2
     * sources, each a whole spec of its own; this spec's own table,
     * format, partitions, filters and text are then source 0's. */
    struct dpp_mix_source *sources;
    unsigned nsources;
    /* "pins": the version of each file the spec names beside its table
     * (tokenizer.file, vocab files) that every split must read, set by the
     * master at submit (storage/file_version.h); a mixture's sources each
     * have their own (their files lie under their own data roots) */
    char **pin_files, **pin_versions;
    unsigned npins;
    unsigned mix_window; /* batches of a rank in which the weights hold exactly */
    int mix_repeat;      /* exhausted "repeat": a source that runs out starts again */
} dpp_spec_t;

/* The files spec names beside its table (its tokenizer, its vocabularies),
 * each once, as the spec spells them, into files[0..cap); returns how many
 * there are (more than cap: only cap written). Pointers into spec. */
size_t dpp_spec_side_files(const dpp_spec_t *spec, const char **files, size_t cap);

/* The version spec pins `file` to (its "pins"), or NULL when none. */
const char *dpp_spec_pin(const dpp_spec_t *spec, const char *file);

/* Pins file (one of dpp_spec_side_files) to version, replacing a pin it
 * had. Returns 0 or -ENOMEM. */
int dpp_spec_set_pin(dpp_spec_t *spec, const char *file, const char *version);

#define DPP_SPEC_MAX_SOURCES 64
#define DPP_SPEC_DEFAULT_MIX_WINDOW 16
/* Rows of one rank's mixture window (mixture.window x batch_size): a
 * source's share is 32 bits, and ranks x window rows stays below 2^46. */
#define DPP_SPEC_MAX_WINDOW_ROWS (1u << 31)

/* One source of a mixture. */
typedef struct dpp_mix_source {
    /* the mixture's spec with this source's table, format, partitions,
     * filters and text in place of its own (what a worker reads its splits
     * with) */
    dpp_spec_t spec;
    double weight;        /* as given; the shares are weight / the sum */
    unsigned window_rows; /* its rows in each window of a rank: the
                           * largest-remainder share of mix_window x batch_size */
} dpp_mix_source_t;

/* Parses and validates a spec (JSON text of len bytes). On failure returns
 * DPP_ESPEC and writes the first problem as "<json path>: <problem>" into
 * err (always NUL-terminated), e.g. `features.dense[3].transforms[0].op:
 * unknown op "logp"`; *out is then left zeroed. On success the caller owns
 * *out and releases it with dpp_spec_close(). Returns -ENOMEM on allocation
 * failure. Checks structure only; whether the table exists is the master's
 * job. */
int dpp_spec_parse(const char *json, size_t len, dpp_spec_t *out, char *err, size_t errlen);

/* dpp_spec_parse() that also hands every problem, in the order it meets
 * them, to report(arg, "<json path>: <problem>") (report may be NULL). A
 * problem does not hide the others: the parse goes on with the next
 * top-level key, feature, transform and filter. What cannot be checked
 * without the broken part is left out (the features of a "features" that
 * is not an object; "no features" after a feature list that failed). */
int dpp_spec_parse_report(const char *json, size_t len, dpp_spec_t *out, char *err, size_t errlen,
                          void (*report)(void *arg, const char *problem), void *arg);

/* Frees what a parsed spec owns (names, ops and their boundaries, filters);
 * zeroes *spec. Safe on a zeroed spec. */
void dpp_spec_close(dpp_spec_t *spec);

/* Serialises a spec in normalised form (every default written out, keys in a
 * fixed order) so that parsing the result gives an equal spec. Returns a
 * malloc'd NUL-terminated string the caller frees, or NULL on -ENOMEM. */
char *dpp_spec_to_json(const dpp_spec_t *spec);

/* What an index task's result depends on besides the file: split_rows, and
 * for a text session everything that changes how many sequences a split
 * makes (tokenizer, filters, packing). Equal keys: an index may be reused. */
uint64_t dpp_spec_index_key(const dpp_spec_t *spec);

/* What a split's output depends on besides its file and range: the spec
 * without what only planning or serving uses (ranks, epochs, shuffle,
 * compression...). Two sessions whose fingerprints are equal produce the
 * same blocks from the same split, so a worker's cache serves both. */
uint64_t dpp_spec_cache_fingerprint(const dpp_spec_t *spec);

/* The key of a split's output in a workers' cache, as the master and the
 * workers both compute it: the fingerprint, the file's path and the
 * split's range and window (a lease's fields). key[1] is what the master
 * tracks per worker. */
void dpp_spec_split_key(uint64_t fingerprint, const char *path, uint64_t byte_start,
                        uint64_t byte_end, uint64_t record_start, uint64_t range_records,
                        uint64_t record_skip, uint64_t record_take, uint64_t key[2]);

#endif
