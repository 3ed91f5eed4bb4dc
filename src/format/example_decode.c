/* SPDX-License-Identifier: Apache-2.0 */
/* Hand-written zero-copy tf.train.Example decoder: walks Example, Features
 * and the map entries, finds each key in the projection's hash table and
 * records where the projected lists are; the accessors decode lists on demand. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "format/example_decode.h"
#include "format/varint.h"

enum wire_type {
    WT_VARINT = 0,
    WT_I64 = 1,
    WT_LEN = 2,
    WT_SGROUP = 3,
    WT_EGROUP = 4,
    WT_I32 = 5,
};

#define TAG(field, wt) ((uint64_t)(field) << 3 | (wt))
#define SLOT_EMPTY UINT32_MAX

/* A slot holds what a lookup compares, so that finding a name is one load
 * of its slot: names[] is read only for names over 8 bytes. */
struct proj_slot {
    uint64_t key; /* name_key() of the name */
    uint32_t len;
    uint32_t idx; /* into names[], or SLOT_EMPTY */
};

struct proj_name {
    const char *s; /* in pool */
    size_t len;
};

struct dpp_projection {
    size_t n;
    uint32_t mask; /* slots - 1; slots is a power of two at most a quarter full */
    struct proj_slot *slots;
    struct proj_name *names;
    /* guess[j]: the key entry j of the last record had and its answer
     * (idx SLOT_EMPTY: a name outside the projection; len UINT32_MAX: no
     * key yet); j < norder. Writers put a file's keys in one order, so the
     * guess is checked with one compare instead of a hash and a probe
     * (proj_lookup), also for the names the projection skips. By position,
     * not by the name before: a guess that waits on the previous entry's
     * answer chains every entry's loads. */
    struct proj_slot *guess;
    size_t norder;
    /* The guesses follow the order of one record (learned from it), and a
     * record that lacks a feature (an absent value) or has one more is that
     * order with a gap or an insertion: skew, added to j, keeps the entries
     * after it on their guesses. Writers whose map order varies from record
     * to record (Python's protobuf serialises a Features map in an order that
     * can differ per record) make nearly every guess wrong, and a wrong guess
     * costs the compare and the lookup: when the record right after learning
     * misses most of them, the next UNORDERED_RECORDS records go straight to
     * the hash table, then the next one is learned again. */
    long skew;          /* guess of entry j: guess[j + skew] */
    uint32_t misses;    /* guesses missed in the current record */
    uint32_t unordered; /* records left that skip the guesses */
    int learning;       /* this record's order becomes the guesses */
    int fresh;          /* this record comes right after the learned one */
    char *pool;
};

#define UNORDERED_RECORDS 64

/* Names are a few bytes long ("i1", "c26"). A name's key is its first 8
 * bytes as a little-endian number, zero above a shorter name's end: with
 * its length it says exactly which name of up to 8 bytes it is, and neither
 * the key nor the comparison loops per byte (those loops' exits, at lengths
 * that vary from entry to entry, were the decoder's most mispredicted
 * branches). A longer name's rest is compared in full. Read without a byte
 * past the name: two overlapping loads, whose common bytes are the same. */
static inline uint64_t name_key(const uint8_t *s, size_t len)
{
    if (len >= 8)
        return dpp_pb_load64(s);
    if (len >= 4)
        return dpp_pb_load32(s) | (uint64_t)dpp_pb_load32(s + len - 4) << (8 * (len - 4));
    if (len >= 2)
        return dpp_pb_load16(s) | (uint64_t)dpp_pb_load16(s + len - 2) << (8 * (len - 2));
    return len ? s[0] : 0;
}

/* name_key() when 8 bytes are readable from s: one load and a mask. */
static inline uint64_t name_key8(const uint8_t *s, size_t len)
{
    uint64_t x = dpp_pb_load64(s);
    return len >= 8 ? x : x & (((uint64_t)1 << (8 * len)) - 1);
}

static inline uint32_t name_hash(uint64_t key, size_t len)
{
    uint64_t h = (key ^ (uint64_t)len << 59) * 0x9E3779B97F4A7C15u;
    return (uint32_t)(h >> 32);
}

/* Index of the name equal to key[0..len) (its name_key() k), or -1. */
static inline __attribute__((always_inline)) long
proj_find_key(const dpp_projection_t *p, uint64_t k, const uint8_t *key, size_t len)
{
    for (uint32_t i = name_hash(k, len) & p->mask;; i = (i + 1) & p->mask) {
        const struct proj_slot *s = &p->slots[i];
        if (s->idx == SLOT_EMPTY)
            return -1;
        if (s->key == k && s->len == len &&
            (len <= 8 || memcmp(p->names[s->idx].s + 8, key + 8, len - 8) == 0))
            return (long)s->idx;
    }
}

static inline long proj_find(const dpp_projection_t *p, const uint8_t *key, size_t len)
{
    return proj_find_key(p, name_key(key, len), key, len);
}

/* The guess g is the key (its name_key() k). A skipped name over 8 bytes
 * cannot be told from another with its first 8 and is looked up again. */
static inline int guess_is(const dpp_projection_t *p, const struct proj_slot *g, uint64_t k,
                           const uint8_t *key, size_t len)
{
    return g->key == k && g->len == len &&
           (len <= 8 ||
            (g->idx != SLOT_EMPTY && memcmp(p->names[g->idx].s + 8, key + 8, len - 8) == 0));
}

static inline long guess_idx(const struct proj_slot *g)
{
    return g->idx == SLOT_EMPTY ? -1 : (long)g->idx;
}

/* The guess at pos was not the key: the hash table's answer. While
 * learning, or where no record had an entry yet, it becomes the guess;
 * otherwise the key one place on means this record lacks the guessed one,
 * and any other key is one the guesses lack (or out of order). */
static long proj_miss(dpp_projection_t *p, uint64_t k, const uint8_t *key, size_t len, size_t pos)
{
    int open = pos < p->norder && p->guess[pos].len == UINT32_MAX;
    if (!p->learning && !open) {
        if (pos + 1 < p->norder && guess_is(p, &p->guess[pos + 1], k, key, len)) {
            p->skew++;
            return guess_idx(&p->guess[pos + 1]);
        }
        p->skew--;
        p->misses++;
        return proj_find_key(p, k, key, len);
    }
    long idx = proj_find_key(p, k, key, len);
    if (pos < p->norder && len < UINT32_MAX) {
        p->guess[pos].key = k;
        p->guess[pos].len = (uint32_t)len;
        p->guess[pos].idx = idx < 0 ? SLOT_EMPTY : (uint32_t)idx;
    }
    return idx;
}

/* proj_find() for the key of entry j of a record (its name_key() k),
 * trying first the guess for entry j. */
static inline __attribute__((always_inline)) long
proj_lookup_key(dpp_projection_t *p, uint64_t k, const uint8_t *key, size_t len, size_t j)
{
    if (p->unordered)
        return proj_find_key(p, k, key, len);
    size_t pos = j + (size_t)p->skew; /* a negative skew wraps: j + skew */
    if (pos < p->norder && guess_is(p, &p->guess[pos], k, key, len))
        return guess_idx(&p->guess[pos]);
    return proj_miss(p, k, key, len, pos);
}

/* After a record of n entries: what the next one does with the guesses. */
static void proj_record_end(dpp_projection_t *p, size_t n)
{
    int failed = 2 * (size_t)p->misses > n;
    if (p->unordered) {
        if (--p->unordered == 0)
            p->learning = 1;
    } else if (p->learning) {
        p->learning = 0;
        p->fresh = 1;
    } else {
        if (failed && p->fresh)
            p->unordered = UNORDERED_RECORDS; /* the order changes per record */
        else if (failed)
            p->learning = 1; /* the order changed, e.g. another writer's file */
        p->fresh = 0;
    }
}

static inline __attribute__((always_inline)) long
proj_lookup(dpp_projection_t *p, const uint8_t *key, size_t len, size_t j)
{
    return proj_lookup_key(p, name_key(key, len), key, len, j);
}

int dpp_projection_new(dpp_projection_t **out, const char *const *names, size_t n)
{
    dpp_projection_t *p = NULL;
    size_t nslots = 8, pool_len = 0;
    char *at;
    int err = -ENOMEM;

    *out = NULL;
    if (n >= SLOT_EMPTY / 8) /* 4n slots must fit the 32-bit mask */
        return DPP_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL || names[i][0] == '\0')
            return DPP_EINVAL;
        pool_len += strlen(names[i]) + 1;
    }
    while (nslots < 4 * n) /* a quarter full: few probes past the first slot */
        nslots *= 2;

    p = calloc(1, sizeof(*p));
    if (!p)
        goto fail;
    p->n = n;
    p->mask = (uint32_t)(nslots - 1);
    p->slots = malloc(nslots * sizeof(*p->slots));
    p->names = calloc(n ? n : 1, sizeof(*p->names));
    p->norder = 2 * n + 8; /* room for keys outside the projection too */
    p->guess = malloc(p->norder * sizeof(*p->guess));
    p->pool = malloc(pool_len ? pool_len : 1);
    if (!p->slots || !p->names || !p->guess || !p->pool)
        goto fail;
    for (size_t i = 0; i < p->norder; i++)
        p->guess[i] = (struct proj_slot){0, UINT32_MAX, SLOT_EMPTY};
    p->learning = 1; /* the first record gives the guesses */
    for (size_t i = 0; i < nslots; i++)
        p->slots[i].idx = SLOT_EMPTY;

    at = p->pool;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        uint64_t k = name_key((const uint8_t *)names[i], len);

        if (proj_find(p, (const uint8_t *)names[i], len) >= 0) {
            err = DPP_EINVAL;
            goto fail;
        }
        memcpy(at, names[i], len + 1);
        p->names[i].s = at;
        p->names[i].len = len;
        at += len + 1;

        uint32_t j = name_hash(k, len) & p->mask;
        while (p->slots[j].idx != SLOT_EMPTY)
            j = (j + 1) & p->mask;
        p->slots[j].key = k;
        p->slots[j].len = (uint32_t)len;
        p->slots[j].idx = (uint32_t)i;
    }
    *out = p;
    return 0;

fail:
    dpp_projection_free(p);
    return err;
}

void dpp_projection_free(dpp_projection_t *p)
{
    if (!p)
        return;
    free(p->slots);
    free(p->names);
    free(p->guess);
    free(p->pool);
    free(p);
}

size_t dpp_projection_size(const dpp_projection_t *p)
{
    return p->n;
}

/* A tag: field numbers are 1..2^29-1, so the varint must fit 32 bits. */
static inline int read_tag(const uint8_t **pp, const uint8_t *end, uint64_t *tag)
{
    if (dpp_pb_read_varint(pp, end, tag) != 0 || *tag > UINT32_MAX || (*tag >> 3) == 0)
        return DPP_EEXAMPLE;
    return 0;
}

static inline int read_len(const uint8_t **pp, const uint8_t *end, const uint8_t **data,
                           size_t *len)
{
    uint64_t v;
    if (dpp_pb_read_varint(pp, end, &v) != 0 || v > (uint64_t)(end - *pp))
        return DPP_EEXAMPLE;
    *data = *pp;
    *len = (size_t)v;
    *pp += v;
    return 0;
}

static int skip_field(const uint8_t **pp, const uint8_t *end, unsigned wt)
{
    uint64_t v;
    const uint8_t *data;
    size_t len;

    switch (wt) {
    case WT_VARINT:
        return dpp_pb_read_varint(pp, end, &v);
    case WT_I64:
        if (end - *pp < 8)
            return DPP_EEXAMPLE;
        *pp += 8;
        return 0;
    case WT_LEN:
        return read_len(pp, end, &data, &len);
    case WT_I32:
        if (end - *pp < 4)
            return DPP_EEXAMPLE;
        *pp += 4;
        return 0;
    default: /* groups (3, 4) are not part of proto3; 6 and 7 do not exist */
        return DPP_EEXAMPLE;
    }
}

/* Parses one serialized Feature into *ref. Several `value` fields of one map
 * entry are merged by protobuf, which is the same as parsing them one after
 * the other into the same state: has_list carries over between calls. */
static int decode_feature(const uint8_t *p, const uint8_t *end, dpp_feat_ref_t *ref, int *has_list)
{
    /* Fast path: the Feature is exactly one list that ends it. */
    if (!*has_list && end - p >= 2 &&
        (p[0] == TAG(1, WT_LEN) || p[0] == TAG(2, WT_LEN) || p[0] == TAG(3, WT_LEN))) {
        const uint8_t *q = p + 1;
        uint64_t len;
        if (dpp_pb_read_varint(&q, end, &len) == 0 && len == (uint64_t)(end - q)) {
            ref->kind = (dpp_feat_kind_t)(p[0] >> 3);
            ref->list = q;
            ref->list_len = (size_t)len;
            *has_list = 1;
            return 0;
        }
    }
    while (p < end) {
        uint64_t tag;
        const uint8_t *list;
        size_t len;

        if (read_tag(&p, end, &tag) != 0)
            return DPP_EEXAMPLE;
        if (tag == TAG(1, WT_LEN) || tag == TAG(2, WT_LEN) || tag == TAG(3, WT_LEN)) {
            if (read_len(&p, end, &list, &len) != 0)
                return DPP_EEXAMPLE;
            /* The same list twice must be concatenated by merge rules, which a
             * zero-copy reference cannot express. No TFRecord writer emits it. */
            if (*has_list && ref->kind == (dpp_feat_kind_t)(tag >> 3))
                return DPP_EEXAMPLE;
            ref->kind = (dpp_feat_kind_t)(tag >> 3);
            ref->list = list;
            ref->list_len = len;
            *has_list = 1;
        } else if (skip_field(&p, end, (unsigned)(tag & 7)) != 0) {
            return DPP_EEXAMPLE;
        }
    }
    return 0;
}

static int decode_entry(dpp_projection_t *proj, const uint8_t *start, const uint8_t *end,
                        dpp_feat_ref_t *out, size_t j)
{
    const uint8_t *p = start, *key = NULL, *val = NULL;
    size_t key_len = 0, val_len = 0;
    unsigned nval = 0;
    long idx;

    /* Fast path for what every writer emits: key (field 1, length < 128),
     * then one value (field 2) that ends the entry. Anything else takes the
     * general walk below, which accepts every valid encoding. */
    if (end - p >= 4 && p[0] == TAG(1, WT_LEN) && p[1] < 0x80 && end - p - 2 > p[1]) {
        const uint8_t *q = p + 2 + p[1];
        uint64_t vlen;
        if (*q == TAG(2, WT_LEN) && (q++, dpp_pb_read_varint(&q, end, &vlen) == 0) &&
            vlen == (uint64_t)(end - q) && p[1] > 0) {
            idx = proj_lookup(proj, p + 2, p[1], j);
            if (idx < 0)
                return 0;
            /* Decoded straight into its slot: a struct built on the stack and
             * copied here cost a store-forwarding stall per feature. */
            dpp_feat_ref_t *ref = &out[idx];
            ref->kind = DPP_FEAT_BYTES;
            ref->list = start;
            ref->list_len = 0;
            int has_list = 0;
            return decode_feature(q, q + vlen, ref, &has_list);
        }
    }
    while (p < end) {
        uint64_t tag;

        if (read_tag(&p, end, &tag) != 0)
            return DPP_EEXAMPLE;
        if (tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &key, &key_len) != 0)
                return DPP_EEXAMPLE;
        } else if (tag == TAG(2, WT_LEN)) {
            if (read_len(&p, end, &val, &val_len) != 0)
                return DPP_EEXAMPLE;
            nval++;
        } else if (skip_field(&p, end, (unsigned)(tag & 7)) != 0) {
            return DPP_EEXAMPLE;
        }
    }
    if (key_len == 0)
        return 0; /* "" is never projected */
    idx = proj_lookup(proj, key, key_len, j);
    if (idx < 0)
        return 0;

    /* No value, or a value with no kind set, is a present, empty feature. */
    dpp_feat_ref_t ref = {DPP_FEAT_BYTES, start, 0, 0};
    int has_list = 0;
    if (nval == 1) {
        if (decode_feature(val, val + val_len, &ref, &has_list) != 0)
            return DPP_EEXAMPLE;
    } else if (nval > 1) {
        /* Rare: walk the entry again, merging the values in order. The first
         * walk validated the framing. */
        p = start;
        while (p < end) {
            uint64_t tag = 0;
            read_tag(&p, end, &tag);
            if (tag == TAG(2, WT_LEN)) {
                read_len(&p, end, &val, &val_len);
                if (decode_feature(val, val + val_len, &ref, &has_list) != 0)
                    return DPP_EEXAMPLE;
            } else {
                skip_field(&p, end, (unsigned)(tag & 7));
            }
        }
    }
    out[idx] = ref;
    return 0;
}

static int decode_features(dpp_projection_t *proj, const uint8_t *p, const uint8_t *end,
                           dpp_feat_ref_t *out)
{
    size_t j = 0; /* the entry's place in the record */
    proj->skew = 0;
    proj->misses = 0;
    while (p < end) {
        uint64_t tag;
        const uint8_t *entry;
        size_t len;

        /* an entry under 128 bytes, as nearly all are: two byte compares */
        if (p[0] == TAG(1, WT_LEN) && end - p >= 2 && p[1] < 0x80 && p[1] <= end - p - 2) {
            entry = p + 2;
            len = p[1];
            p = entry + len;
            /* What writers emit, every length one byte: key (field 1, kl
             * bytes), then the value (field 2, vl bytes) ending the entry,
             * a Feature of one list (field 1, 2 or 3) ending the value. The
             * lengths must add up exactly, which also bounds them under 128
             * (one byte each) and keeps every read inside the entry. */
            size_t kl = len >= 6 ? entry[1] : len, vl = len - kl - 4;
            if (kl + 6 <= len && entry[0] == TAG(1, WT_LEN) && entry[2 + kl] == TAG(2, WT_LEN) &&
                entry[3 + kl] == vl) {
                const uint8_t *f = entry + 4 + kl;
                if (f[1] == vl - 2 &&
                    (f[0] == TAG(1, WT_LEN) || f[0] == TAG(2, WT_LEN) || f[0] == TAG(3, WT_LEN))) {
                    const uint8_t *key = entry + 2;
                    uint64_t k = end - key >= 8 ? name_key8(key, kl) : name_key(key, kl);
                    long idx = proj_lookup_key(proj, k, key, kl, j++);
                    if (idx >= 0) {
                        out[idx].kind = (dpp_feat_kind_t)(f[0] >> 3);
                        out[idx].list = f + 2;
                        out[idx].list_len = vl - 2;
                    }
                    continue;
                }
            }
        } else {
            if (read_tag(&p, end, &tag) != 0)
                return DPP_EEXAMPLE;
            if (tag != TAG(1, WT_LEN)) {
                if (skip_field(&p, end, (unsigned)(tag & 7)) != 0)
                    return DPP_EEXAMPLE;
                continue;
            }
            if (read_len(&p, end, &entry, &len) != 0)
                return DPP_EEXAMPLE;
        }
        /* one call site, so that it is inlined */
        if (decode_entry(proj, entry, entry + len, out, j++) != 0)
            return DPP_EEXAMPLE;
    }
    proj_record_end(proj, j);
    return 0;
}

int dpp_example_decode(dpp_projection_t *proj, const uint8_t *rec, size_t len, dpp_feat_ref_t *out)
{
    const uint8_t *p = rec, *end;

    /* DPP_FEAT_ABSENT is 0 and NULL is all-zero bits on every platform dpp
     * builds for: one memset instead of a loop of struct stores. */
    memset(out, 0, proj->n * sizeof *out);
    if (len == 0)
        return 0;
    /* Example.features may repeat; protobuf merges the occurrences, which for
     * a map means their entries in order, later keys winning. */
    end = rec + len;
    while (p < end) {
        uint64_t tag;
        const uint8_t *features;
        size_t flen;

        if (read_tag(&p, end, &tag) != 0)
            return DPP_EEXAMPLE;
        if (tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &features, &flen) != 0 ||
                decode_features(proj, features, features + flen, out) != 0)
                return DPP_EEXAMPLE;
        } else if (skip_field(&p, end, (unsigned)(tag & 7)) != 0) {
            return DPP_EEXAMPLE;
        }
    }
    return 0;
}

/* The keys of one Features message, appended to buf (NUL after each). */
static void features_keys(const uint8_t *p, const uint8_t *end, char *buf, size_t buflen,
                          size_t *at, size_t *n)
{
    while (p < end) {
        uint64_t tag;
        const uint8_t *entry, *key = NULL;
        size_t elen, klen = 0;
        if (read_tag(&p, end, &tag) != 0)
            return;
        if (tag != TAG(1, WT_LEN)) {
            if (skip_field(&p, end, (unsigned)(tag & 7)) != 0)
                return;
            continue;
        }
        if (read_len(&p, end, &entry, &elen) != 0)
            return;
        for (const uint8_t *q = entry, *qend = entry + elen; q < qend;) {
            if (read_tag(&q, qend, &tag) != 0)
                break;
            if (tag == TAG(1, WT_LEN)) {
                if (read_len(&q, qend, &key, &klen) != 0)
                    break;
            } else if (skip_field(&q, qend, (unsigned)(tag & 7)) != 0) {
                break;
            }
        }
        if (key == NULL || *at + klen + 1 > buflen)
            continue;
        memcpy(buf + *at, key, klen);
        buf[*at + klen] = '\0';
        *at += klen + 1;
        (*n)++;
    }
}

size_t dpp_example_keys(const uint8_t *rec, size_t len, char *buf, size_t buflen)
{
    const uint8_t *p = rec, *end = rec + len;
    size_t at = 0, n = 0;
    while (p < end) {
        uint64_t tag;
        const uint8_t *features;
        size_t flen;
        if (read_tag(&p, end, &tag) != 0)
            break;
        if (tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &features, &flen) != 0)
                break;
            features_keys(features, features + flen, buf, buflen, &at, &n);
        } else if (skip_field(&p, end, (unsigned)(tag & 7)) != 0) {
            break;
        }
    }
    return n;
}

static int check_kind(const dpp_feat_ref_t *f, dpp_feat_kind_t kind)
{
    if (kind != DPP_FEAT_BYTES && kind != DPP_FEAT_FLOAT && kind != DPP_FEAT_INT64)
        return DPP_EINVAL;
    return f->kind == kind ? 0 : DPP_ETYPE;
}

/* Values in a packed varint block: one per byte without the continuation
 * bit. The block must end a varint and hold none longer than 10 bytes. */
static int count_packed_varints(const uint8_t *p, size_t len, size_t *n)
{
    size_t count = 0;
    unsigned run = 0;

    for (size_t i = 0; i < len; i++) {
        if (p[i] & 0x80) {
            if (++run == 10)
                return DPP_EEXAMPLE;
        } else {
            count++;
            run = 0;
        }
    }
    if (run != 0)
        return DPP_EEXAMPLE;
    *n = count;
    return 0;
}

static inline float load_float_le(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* A native list (dpp_feat_ref_t): fixed-width values, or length-prefixed
 * strings. */
static int native_count(const dpp_feat_ref_t *f, dpp_feat_kind_t kind, size_t *n)
{
    if (kind == DPP_FEAT_FLOAT || kind == DPP_FEAT_INT64) {
        size_t w = kind == DPP_FEAT_FLOAT ? 4 : 8;
        if (f->list_len % w != 0)
            return DPP_EEXAMPLE;
        *n = f->list_len / w;
        return 0;
    }
    size_t count = 0, pos = 0;
    while (pos < f->list_len) {
        uint32_t len;
        if (f->list_len - pos < 4)
            return DPP_EEXAMPLE;
        memcpy(&len, f->list + pos, 4);
        if (len > f->list_len - pos - 4)
            return DPP_EEXAMPLE;
        pos += 4 + (size_t)len;
        count++;
    }
    *n = count;
    return 0;
}

int dpp_feat_count(const dpp_feat_ref_t *f, dpp_feat_kind_t kind, size_t *n)
{
    const uint8_t *p, *end;
    size_t count = 0;
    int err;

    *n = 0;
    if ((err = check_kind(f, kind)) != 0)
        return err;
    if (f->list_len == 0)
        return 0;
    if (f->native)
        return native_count(f, kind, n);
    p = f->list;
    end = p + f->list_len;
    while (p < end) {
        uint64_t tag, v;
        const uint8_t *data;
        size_t len, k;

        if (read_tag(&p, end, &tag) != 0)
            return DPP_EEXAMPLE;
        if (kind == DPP_FEAT_FLOAT && tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &data, &len) != 0 || len % 4 != 0)
                return DPP_EEXAMPLE;
            count += len / 4;
        } else if (kind == DPP_FEAT_FLOAT && tag == TAG(1, WT_I32)) {
            if (end - p < 4)
                return DPP_EEXAMPLE;
            p += 4;
            count++;
        } else if (kind == DPP_FEAT_INT64 && tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &data, &len) != 0 || count_packed_varints(data, len, &k) != 0)
                return DPP_EEXAMPLE;
            count += k;
        } else if (kind == DPP_FEAT_INT64 && tag == TAG(1, WT_VARINT)) {
            if (dpp_pb_read_varint(&p, end, &v) != 0)
                return DPP_EEXAMPLE;
            count++;
        } else if (kind == DPP_FEAT_BYTES && tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &data, &len) != 0)
                return DPP_EEXAMPLE;
            count++;
        } else if (skip_field(&p, end, (unsigned)(tag & 7)) != 0) {
            return DPP_EEXAMPLE;
        }
    }
    *n = count;
    return 0;
}

int dpp_feat_floats(const dpp_feat_ref_t *f, float *out, size_t cap, size_t *n)
{
    const uint8_t *p, *end;
    size_t w = 0, total = 0;
    int err;

    *n = 0;
    if ((err = check_kind(f, DPP_FEAT_FLOAT)) != 0)
        return err;
    if (f->list_len == 0)
        return 0;
    if (f->native) {
        if ((err = native_count(f, DPP_FEAT_FLOAT, &total)) != 0)
            return err;
        memcpy(out, f->list, (total < cap ? total : cap) * 4);
        *n = total;
        return 0;
    }
    p = f->list;
    end = p + f->list_len;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Fast path: one packed run filling the list, as writers emit it. */
    if (p[0] == TAG(1, WT_LEN) && f->list_len >= 2 && p[1] < 0x80 &&
        (size_t)p[1] == f->list_len - 2 && p[1] % 4 == 0) {
        total = p[1] / 4;
        memcpy(out, p + 2, (total < cap ? total : cap) * 4);
        *n = total;
        return 0;
    }
#endif
    while (p < end) {
        uint64_t tag;
        const uint8_t *data;
        size_t len;

        if (read_tag(&p, end, &tag) != 0)
            return DPP_EEXAMPLE;
        if (tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &data, &len) != 0 || len % 4 != 0)
                return DPP_EEXAMPLE;
            size_t k = len / 4;
            total += k;
            if (k > cap - w)
                k = cap - w;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            if (k > 0)
                memcpy(out + w, data, k * 4);
#else
            for (size_t i = 0; i < k; i++)
                out[w + i] = load_float_le(data + 4 * i);
#endif
            w += k;
        } else if (tag == TAG(1, WT_I32)) {
            if (end - p < 4)
                return DPP_EEXAMPLE;
            if (w < cap)
                out[w++] = load_float_le(p);
            total++;
            p += 4;
        } else if (skip_field(&p, end, (unsigned)(tag & 7)) != 0) {
            return DPP_EEXAMPLE;
        }
    }
    *n = total;
    return 0;
}

int dpp_feat_int64s(const dpp_feat_ref_t *f, int64_t *out, size_t cap, size_t *n)
{
    const uint8_t *p, *end;
    size_t w = 0, total = 0;
    int err;

    *n = 0;
    if ((err = check_kind(f, DPP_FEAT_INT64)) != 0)
        return err;
    if (f->list_len == 0)
        return 0;
    if (f->native) {
        if ((err = native_count(f, DPP_FEAT_INT64, &total)) != 0)
            return err;
        memcpy(out, f->list, (total < cap ? total : cap) * 8);
        *n = total;
        return 0;
    }
    p = f->list;
    end = p + f->list_len;
    /* Fast path: one packed run filling the list, as writers emit it. */
    if (p[0] == TAG(1, WT_LEN) && f->list_len >= 2 && p[1] < 0x80 &&
        (size_t)p[1] == f->list_len - 2) {
        if (dpp_pb_unpack_varints(p + 2, end, out, cap, &w, &total) != 0)
            return DPP_EEXAMPLE;
        *n = total;
        return 0;
    }
    while (p < end) {
        uint64_t tag, v;
        const uint8_t *data;
        size_t len;

        if (read_tag(&p, end, &tag) != 0)
            return DPP_EEXAMPLE;
        if (tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &data, &len) != 0 ||
                dpp_pb_unpack_varints(data, data + len, out, cap, &w, &total) != 0)
                return DPP_EEXAMPLE;
        } else if (tag == TAG(1, WT_VARINT)) {
            if (dpp_pb_read_varint(&p, end, &v) != 0)
                return DPP_EEXAMPLE;
            if (w < cap)
                out[w++] = (int64_t)v;
            total++;
        } else if (skip_field(&p, end, (unsigned)(tag & 7)) != 0) {
            return DPP_EEXAMPLE;
        }
    }
    *n = total;
    return 0;
}

int dpp_feat_bytes_next(const dpp_feat_ref_t *f, size_t *pos, const uint8_t **s, size_t *len)
{
    int err;
    if ((err = check_kind(f, DPP_FEAT_BYTES)) != 0)
        return err;
    if (f->native) {
        uint32_t n;
        if (*pos >= f->list_len)
            return 0;
        if (f->list_len - *pos < 4)
            return DPP_EEXAMPLE;
        memcpy(&n, f->list + *pos, 4);
        if (n > f->list_len - *pos - 4)
            return DPP_EEXAMPLE;
        *s = f->list + *pos + 4;
        *len = n;
        *pos += 4 + (size_t)n;
        return 1;
    }
    const uint8_t *p = f->list + *pos, *end = f->list + f->list_len;
    while (p < end) {
        uint64_t tag;
        const uint8_t *data;
        size_t n;
        if (read_tag(&p, end, &tag) != 0)
            return DPP_EEXAMPLE;
        if (tag == TAG(1, WT_LEN)) {
            if (read_len(&p, end, &data, &n) != 0)
                return DPP_EEXAMPLE;
            *s = data;
            *len = n;
            *pos = (size_t)(p - f->list);
            return 1;
        }
        if (skip_field(&p, end, (unsigned)(tag & 7)) != 0)
            return DPP_EEXAMPLE;
    }
    *pos = f->list_len;
    return 0;
}
