/* SPDX-License-Identifier: Apache-2.0 */
/* SentencePiece models: the ModelProto read field by field from the
 * protobuf wire format (only what encoding needs; every length checked),
 * the normalizer, and the Unigram and BPE encoders. spm.h says what is
 * read and what is refused. Field numbers are those of sentencepiece's
 * sentencepiece_model.proto. */
#include "text/spm.h"

#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/utf8.h"
#include "dpp/error.h"
#include "text/bpe_internal.h"

enum { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3, PIECE_USER = 4, PIECE_UNUSED = 5,
       PIECE_BYTE = 6 };
enum { MODEL_UNIGRAM = 1, MODEL_BPE = 2, MODEL_WORD = 3, MODEL_CHAR = 4 };

/* "▁" (U+2581), which stands for a space in pieces. */
static const uint8_t SPACE_SYMBOL[3] = {0xE2, 0x96, 0x81};
static const uint8_t REPLACEMENT[3] = {0xEF, 0xBF, 0xBD};

typedef struct piece {
    uint32_t off, len; /* in the model's copy of the piece strings */
    float score;
    uint8_t type;
} piece_t;

struct dpp_spm {
    char name[256];
    uint8_t *strings;
    piece_t *pieces;
    uint32_t npieces;
    uint32_t *slots; /* open addressing: id + 1, 0 empty */
    size_t mask;
    int model_type;
    int byte_fallback;
    int64_t unk_id;
    uint32_t byte_ids[256];
    float min_score, max_score; /* over NORMAL pieces, as libsentencepiece's Unigram */
    uint32_t max_user_len;     /* bytes of the longest user-defined symbol (0: none) */
    uint32_t max_piece_len;    /* bytes of the longest normal or user-defined piece */
    uint8_t user_first[32];    /* bit set of the bytes user-defined symbols start with */
    /* A byte trie of the pieces, for the Unigram's walk from a position
     * and the cuts of a long text (both models):
     * edge (node << 8 | byte) -> child in an open-addressed table; a
     * node's piece id + 1 (0: no piece ends there). Node 0 is the root. */
    uint64_t *edge_keys; /* key + 1, 0 empty */
    uint32_t *edge_child;
    size_t edge_mask;
    uint32_t *node_piece;
    uint32_t nnodes;
    /* normalizer */
    int add_dummy_prefix, remove_extra_ws, escape_ws;
    uint32_t *trie; /* Darts double array of the charsmap, NULL for none */
    size_t trie_units;
    const char *norm; /* its replacement strings, NUL-terminated each */
    size_t norm_len;
    uint8_t *charsmap; /* owns trie and norm */
};

static int fail(char *err, size_t errlen, const char *name, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", name, what);
    return DPP_ESPEC;
}

/* Bytes of the well-formed UTF-8 character at s, 0 for an invalid one. */
static size_t utf8_char(const uint8_t *s, size_t len)
{
    size_t bad;
    return dpp_utf8_seq(s, len, &bad);
}

static int utf8_valid(const uint8_t *s, size_t len)
{
    for (size_t i = 0, l; i < len; i += l)
        if ((l = utf8_char(s + i, len - i)) == 0)
            return 0;
    return 1;
}

/* ---- protobuf wire format ------------------------------------------- */

typedef struct rd {
    const uint8_t *p, *end;
} rd_t;

static int varint(rd_t *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p == r->end)
            return -1;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

typedef struct field {
    uint32_t num, wire;
    uint64_t v;               /* varint and fixed values */
    const uint8_t *data;      /* length-delimited */
    size_t len;
} field_t;

/* The next field of r: 1, 0 at the end, -1 for a malformed one. */
static int next_field(rd_t *r, field_t *f)
{
    if (r->p == r->end)
        return 0;
    uint64_t key;
    if (varint(r, &key) != 0 || key >> 32 != 0 || (key >> 3) == 0)
        return -1;
    f->num = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    switch (f->wire) {
    case 0:
        return varint(r, &f->v) == 0 ? 1 : -1;
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            return -1;
        f->v = 0;
        for (size_t i = 0; i < n; i++)
            f->v |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        return 1;
    }
    case 2: {
        uint64_t n;
        if (varint(r, &n) != 0 || n > (uint64_t)(r->end - r->p))
            return -1;
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return 1;
    }
    default: /* groups: not in a ModelProto */
        return -1;
    }
}

/* ---- pieces by string ------------------------------------------------ */

static uint64_t hash_of(const uint8_t *s, size_t len)
{
    return XXH3_64bits(s, len);
}

static int64_t find(const dpp_spm_t *sp, const uint8_t *s, size_t len)
{
    for (size_t i = hash_of(s, len) & sp->mask;; i = (i + 1) & sp->mask) {
        uint32_t slot = sp->slots[i];
        if (slot == 0)
            return -1;
        const piece_t *p = &sp->pieces[slot - 1];
        if (p->len == len && memcmp(sp->strings + p->off, s, len) == 0)
            return slot - 1;
    }
}

/* ---- the model ------------------------------------------------------- */

static int read_piece(dpp_spm_t *sp, const field_t *f, size_t *strings_len, char *err,
                      size_t errlen)
{
    rd_t r = {f->data, f->data + f->len};
    field_t g;
    piece_t *p = &sp->pieces[sp->npieces];
    *p = (piece_t){.type = PIECE_NORMAL};
    const uint8_t *text = NULL;
    size_t tlen = 0;
    int rc;
    while ((rc = next_field(&r, &g)) == 1) {
        if (g.num == 1 && g.wire == 2) {
            text = g.data;
            tlen = g.len;
        } else if (g.num == 2 && g.wire == 5) {
            uint32_t bits = (uint32_t)g.v;
            memcpy(&p->score, &bits, sizeof bits);
        } else if (g.num == 3 && g.wire == 0) {
            if (g.v < PIECE_NORMAL || g.v > PIECE_BYTE)
                return fail(err, errlen, sp->name, "piece %u: type %llu, expected 1-6", sp->npieces,
                            (unsigned long long)g.v);
            p->type = (uint8_t)g.v;
        }
    }
    if (rc < 0)
        return fail(err, errlen, sp->name, "piece %u: a field is cut short", sp->npieces);
    if (text == NULL || tlen == 0)
        return fail(err, errlen, sp->name, "piece %u: no text", sp->npieces);
    if (!utf8_valid(text, tlen))
        return fail(err, errlen, sp->name, "piece %u: not valid UTF-8", sp->npieces);
    p->off = (uint32_t)*strings_len;
    p->len = (uint32_t)tlen;
    memcpy(sp->strings + *strings_len, text, tlen);
    *strings_len += tlen;
    sp->npieces++;
    return 0;
}

static int read_trainer(dpp_spm_t *sp, const field_t *f, char *err, size_t errlen)
{
    rd_t r = {f->data, f->data + f->len};
    field_t g;
    int rc;
    while ((rc = next_field(&r, &g)) == 1) {
        if (g.wire != 0)
            continue;
        if (g.num == 3)
            sp->model_type = (int)g.v;
        else if (g.num == 35)
            sp->byte_fallback = g.v != 0;
        else if (g.num == 24 && g.v != 0)
            return fail(err, errlen, sp->name,
                        "treat_whitespace_as_suffix is set: dpp reads models that put the "
                        "space before a word only");
    }
    return rc < 0 ? fail(err, errlen, sp->name, "trainer_spec: a field is cut short") : 0;
}

static int read_charsmap(dpp_spm_t *sp, const uint8_t *b, size_t len, char *err, size_t errlen)
{
    if (len < 4)
        return fail(err, errlen, sp->name, "precompiled_charsmap: %zu bytes, expected a 4-byte "
                                          "trie size first", len);
    uint32_t tsize = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24;
    if (tsize > len - 4 || tsize % 4 != 0 || tsize == 0)
        return fail(err, errlen, sp->name,
                    "precompiled_charsmap: its trie says %u bytes, of the %zu there", tsize,
                    len - 4);
    if ((sp->charsmap = malloc(len)) == NULL)
        return -ENOMEM;
    memcpy(sp->charsmap, b, len);
    sp->trie_units = tsize / 4;
    if ((sp->trie = malloc(tsize)) == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < sp->trie_units; i++) {
        const uint8_t *u = b + 4 + 4 * i;
        sp->trie[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                      (uint32_t)u[3] << 24;
    }
    sp->norm = (const char *)sp->charsmap + 4 + tsize;
    sp->norm_len = len - 4 - tsize;
    return 0;
}

static int read_normalizer(dpp_spm_t *sp, const field_t *f, char *err, size_t errlen)
{
    rd_t r = {f->data, f->data + f->len};
    field_t g;
    char name[64] = "";
    const uint8_t *map = NULL;
    size_t maplen = 0;
    int rc;
    while ((rc = next_field(&r, &g)) == 1) {
        if (g.num == 1 && g.wire == 2)
            snprintf(name, sizeof name, "%.*s", (int)(g.len < 60 ? g.len : 60), g.data);
        else if (g.num == 2 && g.wire == 2) {
            map = g.data;
            maplen = g.len;
        } else if (g.num == 3 && g.wire == 0)
            sp->add_dummy_prefix = g.v != 0;
        else if (g.num == 4 && g.wire == 0)
            sp->remove_extra_ws = g.v != 0;
        else if (g.num == 5 && g.wire == 0)
            sp->escape_ws = g.v != 0;
    }
    if (rc < 0)
        return fail(err, errlen, sp->name, "normalizer_spec: a field is cut short");
    if (maplen > 0)
        return read_charsmap(sp, map, maplen, err, errlen);
    if (name[0] != '\0' && strcmp(name, "identity") != 0)
        return fail(err, errlen, sp->name,
                    "normalizer \"%s\" comes without its precompiled_charsmap: dpp applies "
                    "the compiled rules a model carries (or \"identity\")",
                    name);
    return 0;
}

static size_t edge_slot(const dpp_spm_t *sp, uint64_t key)
{
    uint64_t h = (key + 1) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & sp->edge_mask;
}

/* The child of node by byte b, or 0 for none (the root is no child). */
static uint32_t trie_child(const dpp_spm_t *sp, uint32_t node, uint8_t b)
{
    uint64_t key = (uint64_t)node << 8 | b;
    for (size_t i = edge_slot(sp, key);; i = (i + 1) & sp->edge_mask) {
        if (sp->edge_keys[i] == 0)
            return 0;
        if (sp->edge_keys[i] == key + 1)
            return sp->edge_child[i];
    }
}

static int build_trie(dpp_spm_t *sp)
{
    size_t bytes = 1;
    for (uint32_t i = 0; i < sp->npieces; i++)
        bytes += sp->pieces[i].len;
    size_t cap = 16;
    while (cap < 2 * bytes)
        cap <<= 1;
    sp->edge_mask = cap - 1;
    if ((sp->edge_keys = calloc(cap, sizeof *sp->edge_keys)) == NULL ||
        (sp->edge_child = malloc(cap * sizeof *sp->edge_child)) == NULL ||
        (sp->node_piece = calloc(bytes, sizeof *sp->node_piece)) == NULL)
        return -ENOMEM;
    sp->nnodes = 1;
    for (uint32_t id = 0; id < sp->npieces; id++) {
        const piece_t *p = &sp->pieces[id];
        uint32_t node = 0;
        for (uint32_t k = 0; k < p->len; k++) {
            uint8_t b = sp->strings[p->off + k];
            uint32_t child = trie_child(sp, node, b);
            if (child == 0) {
                uint64_t key = (uint64_t)node << 8 | b;
                size_t i = edge_slot(sp, key);
                while (sp->edge_keys[i] != 0)
                    i = (i + 1) & sp->edge_mask;
                child = sp->nnodes++;
                sp->edge_keys[i] = key + 1;
                sp->edge_child[i] = child;
            }
            node = child;
        }
        sp->node_piece[node] = id + 1; /* pieces are unique: one per node */
    }
    return 0;
}

static int build_index(dpp_spm_t *sp, char *err, size_t errlen)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)sp->npieces)
        cap <<= 1;
    if ((sp->slots = calloc(cap, sizeof *sp->slots)) == NULL)
        return -ENOMEM;
    sp->mask = cap - 1;
    sp->unk_id = -1;
    sp->min_score = FLT_MAX;
    sp->max_score = FLT_MIN; /* libsentencepiece's start: the smallest positive float */
    for (uint32_t id = 0; id < sp->npieces; id++) {
        const piece_t *p = &sp->pieces[id];
        const uint8_t *s = sp->strings + p->off;
        size_t i = hash_of(s, p->len) & sp->mask;
        for (; sp->slots[i] != 0; i = (i + 1) & sp->mask) {
            const piece_t *q = &sp->pieces[sp->slots[i] - 1];
            if (q->len == p->len && memcmp(sp->strings + q->off, s, p->len) == 0)
                return fail(err, errlen, sp->name, "piece \"%.*s\" twice (ids %u and %u)",
                            (int)(p->len < 64 ? p->len : 64), s, sp->slots[i] - 1, id);
        }
        sp->slots[i] = id + 1;
        if ((p->type == PIECE_NORMAL || p->type == PIECE_USER) && p->len > sp->max_piece_len)
            sp->max_piece_len = p->len;
        if (p->type == PIECE_UNKNOWN) {
            if (sp->unk_id >= 0)
                return fail(err, errlen, sp->name, "two unknown pieces (ids %lld and %u)",
                            (long long)sp->unk_id, id);
            sp->unk_id = id;
        } else if (p->type == PIECE_NORMAL) {
            if (p->score < sp->min_score)
                sp->min_score = p->score;
            if (p->score > sp->max_score)
                sp->max_score = p->score;
        } else if (p->type == PIECE_USER) {
            if (p->len > sp->max_user_len)
                sp->max_user_len = p->len;
            uint8_t c = s[0];
            sp->user_first[c >> 3] |= (uint8_t)(1u << (c & 7));
        } else if (p->type == PIECE_UNUSED && sp->model_type == MODEL_BPE) {
            return fail(err, errlen, sp->name,
                        "piece %u is of type UNUSED in a BPE model: dpp does not re-split "
                        "merges into unused pieces",
                        id);
        }
    }
    if (sp->unk_id < 0)
        return fail(err, errlen, sp->name, "no piece of type UNKNOWN");
    if (build_trie(sp) != 0)
        return -ENOMEM;
    if (sp->byte_fallback) {
        for (unsigned b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            int64_t id = find(sp, (const uint8_t *)name, 6);
            if (id < 0 || sp->pieces[id].type != PIECE_BYTE)
                return fail(err, errlen, sp->name,
                            "byte_fallback is set but there is no byte piece %s", name);
            sp->byte_ids[b] = (uint32_t)id;
        }
    }
    return 0;
}

int dpp_spm_new(dpp_spm_t **out, const char *name, const uint8_t *buf, size_t len, char *err,
                size_t errlen)
{
    *out = NULL;
    dpp_spm_t *sp = calloc(1, sizeof *sp);
    if (sp == NULL)
        return -ENOMEM;
    snprintf(sp->name, sizeof sp->name, "%s", name);
    sp->model_type = MODEL_UNIGRAM;
    sp->add_dummy_prefix = sp->remove_extra_ws = sp->escape_ws = 1; /* the proto's defaults */
    /* First pass: how many pieces (bounds the arrays). */
    rd_t r = {buf, buf + len};
    field_t f;
    size_t npieces = 0;
    int rc;
    while ((rc = next_field(&r, &f)) == 1)
        npieces += f.num == 1 && f.wire == 2;
    if (rc < 0) {
        /* A text file is the likely mistake: the .vocab beside the .model,
         * a tiktoken or tokenizer.json file. */
        size_t probe = len < 4096 ? len : 4096;
        while (probe < len && probe > 0 && (buf[probe] & 0xC0) == 0x80)
            probe--; /* cut at a character's start */
        int text = probe > 0 && utf8_valid(buf, probe);
        for (size_t i = 0; text && i < probe; i++)
            text = buf[i] >= 0x20 || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r';
        rc = fail(err, errlen, name,
                  "not a SentencePiece model (a ModelProto): a field is cut short near byte "
                  "%zu%s",
                  (size_t)(r.p - buf),
                  text ? "; the file reads as text: give the binary .model file (a .vocab "
                        "file only lists the pieces)"
                      : "");
        goto out;
    }
    if (npieces == 0 || npieces > UINT32_MAX / 2) {
        rc = fail(err, errlen, name, "no pieces: not a SentencePiece model?");
        goto out;
    }
    rc = -ENOMEM;
    if ((sp->pieces = calloc(npieces, sizeof *sp->pieces)) == NULL ||
        (sp->strings = malloc(len)) == NULL)
        goto out;
    size_t strings_len = 0;
    r = (rd_t){buf, buf + len};
    rc = 0;
    while (rc == 0 && next_field(&r, &f) == 1) {
        if (f.wire != 2)
            continue;
        if (f.num == 1)
            rc = read_piece(sp, &f, &strings_len, err, errlen);
        else if (f.num == 2)
            rc = read_trainer(sp, &f, err, errlen);
        else if (f.num == 3)
            rc = read_normalizer(sp, &f, err, errlen);
    }
    if (rc != 0)
        goto out;
    if (sp->model_type != MODEL_UNIGRAM && sp->model_type != MODEL_BPE) {
        rc = fail(err, errlen, name, "model_type %d (%s): dpp encodes UNIGRAM (1) and BPE (2)",
                  sp->model_type,
                  sp->model_type == MODEL_WORD   ? "WORD"
                  : sp->model_type == MODEL_CHAR ? "CHAR"
                                                 : "unknown");
        goto out;
    }
    rc = build_index(sp, err, errlen);
out:
    if (rc != 0) {
        dpp_spm_free(sp);
        return rc;
    }
    *out = sp;
    return 0;
}

int dpp_spm_load(dpp_spm_t **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    uint8_t *buf;
    size_t len;
    int rc = dpp__bpe_read_file(path, &buf, &len, err, errlen); /* any tokenizer file */
    if (rc)
        return rc;
    rc = dpp_spm_new(out, path, buf, len, err, errlen);
    free(buf);
    return rc;
}

void dpp_spm_free(dpp_spm_t *sp)
{
    if (sp == NULL)
        return;
    free(sp->strings);
    free(sp->pieces);
    free(sp->slots);
    free(sp->edge_keys);
    free(sp->edge_child);
    free(sp->node_piece);
    free(sp->trie);
    free(sp->charsmap);
    free(sp);
}

size_t dpp_spm_size(const dpp_spm_t *sp)
{
    return sp->npieces;
}

int64_t dpp_spm_special_id(const dpp_spm_t *sp, const char *name)
{
    int64_t id = find(sp, (const uint8_t *)name, strlen(name));
    if (id < 0 || (sp->pieces[id].type != PIECE_CONTROL && sp->pieces[id].type != PIECE_USER))
        return -1;
    return id;
}

const char *dpp_spm_controls(const dpp_spm_t *sp, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < sp->npieces && at < len; i++) {
        const piece_t *p = &sp->pieces[i];
        if (p->type != PIECE_CONTROL)
            continue;
        int w = snprintf(buf + at, len - at, "%s%.*s (%u)", at ? ", " : "", (int)p->len,
                         (const char *)sp->strings + p->off, i);
        at += w > 0 ? (size_t)w : 0;
    }
    if (at == 0)
        snprintf(buf, len, "none");
    return buf;
}

/* ---- scratch ---------------------------------------------------------- */

/* A long text's stretches run to the first cut past this many bytes: the
 * encoder's state of one stays in cache (see "encoding" below). */
#define DPP_SPM_STRETCH (16u << 10)

/* A text's normalized bytes, bounded: put() past max is DPP_ETOOBIG. */
typedef struct buf {
    uint8_t *p;
    size_t n, cap, max;
} buf_t;

static int put(buf_t *b, const uint8_t *s, size_t n)
{
    if (b->n + n > b->cap) { /* the capacity never passes max: checked only here */
        if (n > b->max - b->n)
            return DPP_ETOOBIG;
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap = cap > b->max / 2 ? b->max : 2 * cap;
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* A piece of the segmentation: bytes [start, start + len) of its stretch. */
typedef struct seg {
    uint32_t start, len;
    uint32_t id;
} seg_t;

/* Viterbi's best way to a position of a stretch: its score, where its
 * last piece starts plus one (0: not reached yet, so that zeroed memory is
 * a fresh node) and which piece it is. */
typedef struct node {
    float score;
    uint32_t start1, id;
} node_t;

/* BPE: symbols are characters (a user-defined symbol is one, frozen);
 * pairs are candidate merges. */
typedef struct sym {
    uint32_t start, len;
    int64_t prev, next;
    int frozen;
} sym_t;

typedef struct pair {
    float score;
    uint32_t left, right, len;
} pair_t;

typedef struct heap {
    pair_t *a;
    size_t n, cap;
} heap_t;

struct dpp_spm_scratch {
    buf_t norm;         /* at most twice the bound given */
    size_t max_tokens;  /* a text's ids, at most (the bound given) */
    size_t stretch;     /* a stretch runs to the first cut this many bytes on */
    size_t max_stretch; /* normalized bytes encoded at once, at most */
    node_t *nodes;
    size_t nodes_cap;
    seg_t *segs;
    size_t nsegs, segs_cap;
    sym_t *syms;
    size_t syms_cap;
    heap_t heap;
};

dpp_spm_scratch_t *dpp_spm_scratch_new(uint64_t max_bytes)
{
    dpp_spm_scratch_t *x = calloc(1, sizeof *x);
    if (x == NULL)
        return NULL;
    /* a normalization may grow a text (NFKC a little), up to twice the
     * bound; no more ids than the bound */
    x->norm.max = max_bytes == 0 || max_bytes > SIZE_MAX / 2 ? SIZE_MAX : 2 * (size_t)max_bytes;
    x->max_tokens = max_bytes == 0 || max_bytes > SIZE_MAX ? SIZE_MAX : (size_t)max_bytes;
    uint64_t stretch = max_bytes == 0 ? DPP_SPM_MAX_STRETCH : max_bytes / 8;
    if (stretch < DPP_SPM_MIN_MAX_STRETCH)
        stretch = DPP_SPM_MIN_MAX_STRETCH;
    x->max_stretch = stretch < DPP_SPM_MAX_STRETCH ? (size_t)stretch : DPP_SPM_MAX_STRETCH;
    x->stretch = DPP_SPM_STRETCH;
    return x;
}

void dpp_spm_scratch_set_stretch(dpp_spm_scratch_t *x, size_t bytes)
{
    x->stretch = bytes;
}

void dpp_spm_scratch_free(dpp_spm_scratch_t *x)
{
    if (x == NULL)
        return;
    free(x->norm.p);
    free(x->nodes);
    free(x->segs);
    free(x->syms);
    free(x->heap.a);
    free(x);
}

/* *a with room for n elements of size bytes (capacity *cap, doubled). */
static int reserve(void **a, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < n)
        c *= 2;
    void *q = realloc(*a, c * size);
    if (q == NULL)
        return -ENOMEM;
    *a = q;
    *cap = c;
    return 0;
}

/* ---- normalizing ------------------------------------------------------ */

/* The longest key of the charsmap's double array that s starts with: its
 * length and value, or 0 for none. Every index is checked against the
 * array, so a damaged map matches nothing rather than reading past it. */
static size_t trie_longest(const dpp_spm_t *sp, const uint8_t *s, size_t len, uint32_t *value)
{
    const uint32_t *a = sp->trie;
    size_t best = 0, pos = 0;
#define OFFSET(u) (((u) >> 10) << (((u) & (1u << 9)) >> 6))
    uint32_t unit = a[0];
    pos ^= OFFSET(unit);
    for (size_t i = 0; i < len; i++) {
        pos ^= s[i];
        if (pos >= sp->trie_units)
            break;
        unit = a[pos];
        if ((unit & ((1u << 31) | 0xFF)) != s[i]) /* its label */
            break;
        pos ^= OFFSET(unit);
        if (pos >= sp->trie_units)
            break;
        if ((unit >> 8) & 1) { /* has a leaf: a key ends here */
            best = i + 1;
            *value = a[pos] & ((1u << 31) - 1);
        }
    }
#undef OFFSET
    return best;
}

/* Bytes of the longest user-defined symbol s starts with (len >= 1), 0 for none. */
static size_t user_match(const dpp_spm_t *sp, const uint8_t *s, size_t len)
{
    if (!(sp->user_first[s[0] >> 3] & (1u << (s[0] & 7))))
        return 0;
    for (size_t l = sp->max_user_len < len ? sp->max_user_len : len; l > 0; l--) {
        int64_t id = find(sp, s, l);
        if (id >= 0 && sp->pieces[id].type == PIECE_USER)
            return l;
    }
    return 0;
}

/* One step of the normalizer at s: sets *out and *outlen to what it becomes
 * and returns how many bytes of s it took (>= 1). */
static size_t norm_prefix(const dpp_spm_t *sp, const uint8_t *s, size_t len, const uint8_t **out,
                          size_t *outlen)
{
    /* user-defined symbols: the longest, kept as written */
    size_t u = user_match(sp, s, len);
    if (u > 0) {
        *out = s;
        *outlen = u;
        return u;
    }
    if (sp->trie != NULL) {
        uint32_t v = 0;
        size_t l = trie_longest(sp, s, len, &v);
        if (l > 0 && v < sp->norm_len) {
            const char *rep = sp->norm + v;
            const char *nul = memchr(rep, '\0', sp->norm_len - v);
            if (nul != NULL) {
                *out = (const uint8_t *)rep;
                *outlen = (size_t)(nul - rep);
                return l;
            }
        }
    }
    size_t l = utf8_char(s, len);
    if (l == 0) { /* an invalid byte: U+FFFD */
        *out = REPLACEMENT;
        *outlen = sizeof REPLACEMENT;
        return 1;
    }
    *out = s;
    *outlen = l;
    return l;
}

static int normalize(const dpp_spm_t *sp, const uint8_t *s, size_t len, buf_t *b)
{
    const uint8_t *p;
    size_t pl, i = 0;
    int rc;
    if (sp->remove_extra_ws) { /* leading whitespace, after normalizing */
        while (i < len) {
            size_t c = norm_prefix(sp, s + i, len - i, &p, &pl);
            if (pl != 1 || p[0] != ' ')
                break;
            i += c;
        }
    }
    if (i == len)
        return 0;
    const uint8_t *ws = sp->escape_ws ? SPACE_SYMBOL : (const uint8_t *)" ";
    size_t wsl = sp->escape_ws ? sizeof SPACE_SYMBOL : 1;
    if (sp->add_dummy_prefix && (rc = put(b, ws, wsl)) != 0)
        return rc;
    int prev_space = sp->remove_extra_ws;
    while (i < len) {
        i += norm_prefix(sp, s + i, len - i, &p, &pl);
        while (prev_space && pl > 0 && p[0] == ' ') {
            p++;
            pl--;
        }
        if (pl > 0) {
            for (size_t k = 0; k < pl; k++) {
                rc = p[k] == ' ' ? put(b, ws, wsl) : put(b, p + k, 1);
                if (rc != 0)
                    return rc;
            }
            prev_space = p[pl - 1] == ' ';
        }
        if (!sp->remove_extra_ws)
            prev_space = 0;
    }
    if (sp->remove_extra_ws)
        while (b->n >= wsl && memcmp(b->p + b->n - wsl, ws, wsl) == 0)
            b->n -= wsl;
    return 0;
}

/* ---- encoding --------------------------------------------------------- */

/* A long normalized text is encoded a stretch at a time, cut only where
 * the result is the whole text's: at a character boundary that no match
 * of a normal or user-defined piece crosses (nor a character, which an
 * unknown stretch or a BPE symbol starts as). Every segmentation of the
 * text then has a boundary there, for Viterbi and for BPE alike: BPE
 * merges only into pieces, so no symbol ever spans the cut, and the two
 * sides' merges do not touch each other (each side's go in the order they
 * would in the whole text); Viterbi's best path passes through the cut, and
 * the next stretch starts from its score there, so every sum is the one
 * the whole text's pass computes. Stretches run to the first cut past
 * x->stretch bytes (DPP_SPM_STRETCH); a text with no cut for max_stretch
 * bytes is refused (DPP_ETOOBIG). */
static size_t char_len(const uint8_t *s, size_t len)
{
    size_t l = utf8_char(s, len);
    return l ? l : 1;
}

static int piece_usable(const dpp_spm_t *sp, uint32_t node)
{
    uint32_t id1 = sp->node_piece[node];
    return id1 != 0 && (sp->pieces[id1 - 1].type == PIECE_NORMAL ||
                        sp->pieces[id1 - 1].type == PIECE_USER);
}

static int stretch_too_long(const dpp_spm_scratch_t *x, size_t from, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "its normalized text has no place to cut for more than %zu bytes from byte %zu (a "
             "cut must fall where no piece of the model does): longer than the tokenizer "
             "encodes at once (an eighth of the worker's --max-record-mb, at least %u)",
             x->max_stretch, from, DPP_SPM_MIN_MAX_STRETCH);
    return DPP_ETOOBIG;
}

/* Viterbi over the pieces, from the cut `from` (where the path's score is
 * *base) of the normalized text s[0..len) to the first cut at least
 * x->stretch bytes on, or len: the segmentation of the highest total
 * score, libsentencepiece's arithmetic (float scores, double candidates)
 * and tie rule (the first candidate met keeps a tie). x->segs gets the
 * stretch's pieces in order (positions from `from`); *end is the stretch's
 * end and *base the score there. */
static int unigram(const dpp_spm_t *sp, dpp_spm_scratch_t *x, const uint8_t *s, size_t len,
                   size_t from, float *base, size_t *end, char *err, size_t errlen)
{
    const float unk_score = sp->min_score - 10.0f;
    /* positions from `from` on: t[0..n), nodes best[0..ready) set */
    const uint8_t *t = s + from;
    size_t n = len - from, cut_from = x->stretch ? x->stretch : 1;
    size_t reach = 0, ready = 1, grow_at = 0, at = 0; /* reach: the furthest end of an edge */
    if (reserve((void **)&x->nodes, &x->nodes_cap, 1, sizeof *x->nodes) != 0)
        return -ENOMEM;
    node_t *best = x->nodes;
    best[0] = (node_t){*base, 0, 0};
    while (at < n) {
        if (at >= reach && at >= cut_from)
            break; /* a cut */
        if (at >= grow_at) { /* the nodes an edge from here may end at, 4 KiB ahead */
            if (at > x->max_stretch)
                return stretch_too_long(x, from, err, errlen);
            size_t need = at + sp->max_piece_len + 5 + 4096;
            if (need > n + 1)
                need = n + 1;
            if (reserve((void **)&x->nodes, &x->nodes_cap, need, sizeof *x->nodes) != 0)
                return -ENOMEM;
            best = x->nodes;
            memset(best + ready, 0, (need - ready) * sizeof *best);
            ready = need;
            grow_at = ready == n + 1 ? SIZE_MAX : ready - sp->max_piece_len - 5;
        }
        float here = best[at].score;
        size_t mb = char_len(t + at, n - at);
        size_t longest = mb; /* of the edges from here: a character at least */
        int single = 0;
        uint32_t node = 0;
        for (size_t l = 1; at + l <= n; l++) {
            if ((node = trie_child(sp, node, t[at + l - 1])) == 0)
                break; /* no piece starts with t[at, at + l) */
            if (!piece_usable(sp, node))
                continue;
            longest = l > longest ? l : longest;
            uint32_t id = sp->node_piece[node] - 1;
            const piece_t *p = &sp->pieces[id];
            double score = p->type == PIECE_USER ? (double)((float)l * sp->max_score) - 0.1
                                                 : (double)p->score;
            double cand = score + here;
            node_t *b = &best[at + l];
            if (b->start1 == 0 || cand > b->score) {
                b->score = (float)cand;
                b->start1 = (uint32_t)at + 1;
                b->id = id;
            }
            if (l == mb)
                single = 1;
        }
        if (!single) {
            float cand = unk_score + here;
            node_t *b = &best[at + mb];
            if (b->start1 == 0 || cand > b->score) {
                b->score = cand;
                b->start1 = (uint32_t)at + 1;
                b->id = (uint32_t)sp->unk_id;
            }
        }
        if (at + longest > reach)
            reach = at + longest;
        at += mb;
    }
    size_t k = 0;
    for (size_t e = at; e > 0; e = best[e].start1 - 1)
        k++;
    if (reserve((void **)&x->segs, &x->segs_cap, k, sizeof *x->segs) != 0)
        return -ENOMEM;
    x->nsegs = k;
    for (size_t e = at; e > 0; e = best[e].start1 - 1)
        x->segs[--k] = (seg_t){best[e].start1 - 1, (uint32_t)(e - best[e].start1 + 1), best[e].id};
    *base = at > 0 ? best[at].score : *base;
    *end = from + at;
    return 0;
}

/* The end of the stretch from the cut `from` of s[0..len): the first cut
 * at least x->stretch bytes on, or len (the BPE encoder's; Viterbi
 * finds its cuts as it goes). */
static int next_cut(const dpp_spm_t *sp, const dpp_spm_scratch_t *x, const uint8_t *s, size_t len,
                    size_t from, size_t *end, char *err, size_t errlen)
{
    if (len - from <= x->stretch && len - from <= x->max_stretch) {
        *end = len;
        return 0;
    }
    size_t reach = from;
    for (size_t at = from; at < len;) {
        if (at >= reach && at - from >= x->stretch && at > from) {
            *end = at;
            return 0;
        }
        if (at - from > x->max_stretch)
            return stretch_too_long(x, from, err, errlen);
        size_t mb = char_len(s + at, len - at);
        uint32_t node = 0;
        if (at + mb > reach)
            reach = at + mb;
        for (size_t l = 1; at + l <= len; l++) {
            if ((node = trie_child(sp, node, s[at + l - 1])) == 0)
                break;
            if (at + l > reach && piece_usable(sp, node))
                reach = at + l;
        }
        at += mb;
    }
    *end = len;
    return 0;
}

/* BPE over a stretch s[0..len): the adjacent pair whose concatenation is
 * the piece of the highest score merges first, the leftmost among equals,
 * until no pair is a piece. x->segs gets the pieces. */
static int pair_before(const pair_t *x, const pair_t *y)
{
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

static int heap_push(heap_t *h, pair_t p)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        pair_t *a = realloc(h->a, cap * sizeof *a);
        if (a == NULL)
            return -ENOMEM;
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && pair_before(&p, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = p;
    return 0;
}

static pair_t heap_pop(heap_t *h)
{
    pair_t top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && pair_before(&h->a[c + 1], &h->a[c]))
            c++;
        if (!pair_before(&h->a[c], &last))
            break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0)
        h->a[i] = last;
    return top;
}

static int maybe_pair(const dpp_spm_t *sp, const uint8_t *s, const sym_t *y, int64_t l, int64_t r,
                      heap_t *h)
{
    if (l < 0 || r < 0 || y[l].frozen || y[r].frozen)
        return 0;
    uint32_t len = y[l].len + y[r].len;
    int64_t id = find(sp, s + y[l].start, len);
    if (id < 0)
        return 0;
    uint8_t t = sp->pieces[id].type;
    if (t != PIECE_NORMAL && t != PIECE_USER)
        return 0;
    return heap_push(h, (pair_t){sp->pieces[id].score, (uint32_t)l, (uint32_t)r, len});
}

static int bpe(const dpp_spm_t *sp, dpp_spm_scratch_t *x, const uint8_t *s, size_t len)
{
    if (reserve((void **)&x->syms, &x->syms_cap, len ? len : 1, sizeof *x->syms) != 0)
        return -ENOMEM;
    sym_t *y = x->syms;
    heap_t *h = &x->heap;
    h->n = 0;
    size_t n = 0;
    for (size_t at = 0; at < len; n++) {
        size_t u = user_match(sp, s + at, len - at);
        size_t l = u ? u : char_len(s + at, len - at);
        y[n] = (sym_t){(uint32_t)at, (uint32_t)l, (int64_t)n - 1, at + l < len ? (int64_t)n + 1 : -1,
                       u > 0};
        at += l;
    }
    for (size_t i = 1; i < n; i++)
        if (maybe_pair(sp, s, y, (int64_t)i - 1, (int64_t)i, h) != 0)
            return -ENOMEM;
    while (h->n > 0) {
        pair_t top = heap_pop(h);
        sym_t *l = &y[top.left], *r = &y[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.len)
            continue; /* a pair one of whose symbols has merged since */
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0)
            y[r->next].prev = top.left;
        r->len = 0;
        if (maybe_pair(sp, s, y, l->prev, top.left, h) != 0 ||
            maybe_pair(sp, s, y, top.left, l->next, h) != 0)
            return -ENOMEM;
    }
    if (reserve((void **)&x->segs, &x->segs_cap, n ? n : 1, sizeof *x->segs) != 0)
        return -ENOMEM;
    size_t k = 0;
    for (int64_t i = n ? 0 : -1; i >= 0; i = y[i].next) {
        int64_t id = find(sp, s + y[i].start, y[i].len);
        x->segs[k++] = (seg_t){y[i].start, y[i].len, (uint32_t)(id >= 0 ? id : sp->unk_id)};
    }
    x->nsegs = k;
    return 0;
}

static int push_id(uint32_t **ids, size_t *n, size_t *cap, uint32_t id)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        uint32_t *p = realloc(*ids, c * sizeof *p);
        if (p == NULL)
            return -ENOMEM;
        *ids = p;
        *cap = c;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

int dpp_spm_encode_scratch(const dpp_spm_t *sp, dpp_spm_scratch_t *x, const uint8_t *text,
                           size_t len, uint32_t **ids, size_t *n, size_t *cap, char *err,
                           size_t errlen)
{
    size_t n0 = *n;
    buf_t *b = &x->norm;
    b->n = 0;
    int rc = normalize(sp, text, len, b);
    if (rc == DPP_ETOOBIG)
        snprintf(err, errlen,
                 "its %zu bytes of text normalize to more than %zu bytes (the model's "
                 "normalization grows it past what the tokenizer takes: twice the worker's "
                 "--max-record-mb)",
                 len, b->max);
    int prev_unk = 0;
    float base = 0;
    for (size_t from = 0, end = 0; rc == 0 && from < b->n; from = end) {
        rc = sp->model_type == MODEL_BPE
                 ? next_cut(sp, x, b->p, b->n, from, &end, err, errlen)
                 : unigram(sp, x, b->p, b->n, from, &base, &end, err, errlen);
        if (rc == 0 && sp->model_type == MODEL_BPE)
            rc = bpe(sp, x, b->p + from, end - from);
        for (size_t i = 0; rc == 0 && i < x->nsegs; i++) {
            const seg_t *g = &x->segs[i];
            int unk = g->id == (uint32_t)sp->unk_id;
            if (unk && sp->byte_fallback) {
                for (uint32_t k = 0; rc == 0 && k < g->len; k++)
                    rc = push_id(ids, n, cap, sp->byte_ids[b->p[from + g->start + k]]);
            } else if (!(unk && prev_unk)) { /* a run of unknowns is one unknown */
                rc = push_id(ids, n, cap, g->id);
            }
            prev_unk = unk;
        }
        if (rc == 0 && *n - n0 > x->max_tokens) {
            snprintf(err, errlen,
                     "its %zu bytes of text make more than %zu tokens (the most the tokenizer "
                     "holds for a document: the worker's --max-record-mb, a token a byte)",
                     len, x->max_tokens);
            rc = DPP_ETOOBIG;
        }
    }
    if (rc != 0)
        *n = n0;
    return rc;
}

int dpp_spm_encode(const dpp_spm_t *sp, const uint8_t *text, size_t len, uint32_t **ids,
                   size_t *n, size_t *cap)
{
    dpp_spm_scratch_t *x = dpp_spm_scratch_new(0);
    char err[8];
    int rc = x ? dpp_spm_encode_scratch(sp, x, text, len, ids, n, cap, err, sizeof err) : -ENOMEM;
    dpp_spm_scratch_free(x);
    return rc;
}
