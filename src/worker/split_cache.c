/* SPDX-License-Identifier: Apache-2.0 */
/* A split's cache entry (split_cache.h): its capture while the split is
 * made, its bytes, and reading them back. Layout, little-endian, every
 * section 8-byte aligned:
 *   u32 magic "DPS1", u32 version 1
 *   identity: u64 size, u64 inode, i64 mtime ns, i64 ctime ns, u64 aux
 *   u32 batch_size, u32 blocks
 *   u64 gathered, rows, filtered, examined, documents, tokens, padding
 *   u64 rejects[reasons of base/reject.h]
 *   u32 lengths of reject_detail, absent; u32 nabsent; u32 length of
 *   names; u32 nnames; u32 0; then the three strings, padded
 *   u64 survived[ceil(gathered / 64)]
 *   per block: u64 length, u32 rows, u32 0, the raw block, padded */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "base/errtext.h"
#include "base/util.h"
#include "dpp/error.h"
#include "split_cache.h"

#define ENTRY_MAGIC 0x31535044u /* "DPS1" */
#define ENTRY_VERSION 1u
#define FIXED_BYTES (8 + 40 + 8 + 56 + 8 * DPP_REJECT_NREASONS + 24)

static uint64_t pad8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/* ---- identity ------------------------------------------------------------ */

static void mix_file(XXH64_hash_t *h, const char *root, const char *file)
{
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", root, file);
    uint64_t v[5] = {0};
    if (stat(path, &st) == 0) {
        v[0] = (uint64_t)st.st_size;
        v[1] = (uint64_t)st.st_ino;
        v[2] = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
        v[3] = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
    }
    v[4] = XXH3_64bits(file, strlen(file));
    *h = XXH3_64bits_withSeed(v, sizeof v, *h);
}

int dpp_split_identity(const dpp_task_t *t, const dpp_spec_t *spec, const char *root,
                       dpp_split_identity_t *out)
{
    struct stat st;
    if (stat(t->path, &st) != 0)
        return -errno;
    *out = (dpp_split_identity_t){
        .size = (uint64_t)st.st_size,
        .ino = (uint64_t)st.st_ino,
        .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        .ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec,
    };
    XXH64_hash_t h = 0;
    for (unsigned k = 0; k < spec->nsparse; k++)
        if (spec->sparse[k].nops > 0 && spec->sparse[k].ops[0].file)
            mix_file(&h, root, spec->sparse[k].ops[0].file);
    if (spec->text && spec->text->tokenizer_file)
        mix_file(&h, root, spec->text->tokenizer_file);
    out->aux = h;
    return 0;
}

/* ---- capture ------------------------------------------------------------- */

int dpp_split_capture_block(dpp_split_capture_t *c, uint8_t *data, size_t len, uint32_t rows)
{
    if (c->nblocks == c->cap_blocks) {
        size_t cap = c->cap_blocks ? 2 * c->cap_blocks : 16;
        void *b = realloc(c->blocks, cap * sizeof *c->blocks);
        if (b == NULL) {
            free(data);
            return -ENOMEM;
        }
        c->blocks = b;
        c->cap_blocks = cap;
    }
    c->blocks[c->nblocks++] = (struct captured_block){data, len, rows};
    c->bytes += len;
    return 0;
}

int dpp_split_capture_record(dpp_split_capture_t *c, int survived)
{
    size_t word = (size_t)(c->ngathered / 64);
    if (word == c->cap_words) {
        size_t cap = c->cap_words ? 2 * c->cap_words : 64;
        uint64_t *b = realloc(c->survived, cap * sizeof *b);
        if (b == NULL)
            return -ENOMEM;
        memset(b + c->cap_words, 0, (cap - c->cap_words) * sizeof *b);
        c->survived = b;
        c->cap_words = cap;
    }
    if (survived)
        c->survived[word] |= UINT64_C(1) << (c->ngathered % 64);
    c->ngathered++;
    return 0;
}

void dpp_split_capture_free(dpp_split_capture_t *c)
{
    for (size_t i = 0; i < c->nblocks; i++)
        free(c->blocks[i].data);
    free(c->blocks);
    free(c->survived);
    memset(c, 0, sizeof *c);
}

/* ---- bytes ----------------------------------------------------------------- */

typedef struct writer {
    uint8_t *p;
} writer_t;

static void put(writer_t *w, const void *v, size_t n)
{
    memcpy(w->p, v, n);
    w->p += n;
}

static void put_u32(writer_t *w, uint32_t v)
{
    put(w, &v, 4);
}

static void put_u64(writer_t *w, uint64_t v)
{
    put(w, &v, 8);
}

static void put_pad(writer_t *w, size_t n)
{
    size_t k = (size_t)(pad8(n) - n);
    memset(w->p, 0, k);
    w->p += k;
}

size_t dpp_split_entry_size(const dpp_split_capture_t *c, const dpp_split_summary_t *sum)
{
    size_t strings = strlen(sum->reject_detail) + sum->absent_len + sum->names_len;
    uint64_t total = FIXED_BYTES + pad8(strings) + 8 * ((c->ngathered + 63) / 64);
    for (size_t i = 0; i < c->nblocks; i++)
        total += 16 + pad8(c->blocks[i].len);
    return total > SIZE_MAX / 2 || c->nblocks > UINT32_MAX ? 0 : (size_t)total;
}

void dpp_split_entry_write(const dpp_split_capture_t *c, const dpp_split_identity_t *id,
                           uint32_t batch_size, const dpp_split_summary_t *sum, uint8_t *buf)
{
    size_t detail = strlen(sum->reject_detail);
    size_t strings = detail + sum->absent_len + sum->names_len;
    size_t words = (size_t)((c->ngathered + 63) / 64);
    writer_t w = {buf};
    put_u32(&w, ENTRY_MAGIC);
    put_u32(&w, ENTRY_VERSION);
    put_u64(&w, id->size);
    put_u64(&w, id->ino);
    put_u64(&w, (uint64_t)id->mtime_ns);
    put_u64(&w, (uint64_t)id->ctime_ns);
    put_u64(&w, id->aux);
    put_u32(&w, batch_size);
    put_u32(&w, (uint32_t)c->nblocks);
    const uint64_t counts[7] = {c->ngathered, sum->rows,      sum->filtered, sum->examined,
                                sum->documents, sum->tokens, sum->padding};
    put(&w, counts, sizeof counts);
    uint64_t rej[DPP_REJECT_NREASONS];
    dpp_rejects_values(&sum->rejects, rej);
    put(&w, rej, sizeof rej);
    const uint32_t lens[6] = {(uint32_t)detail,       (uint32_t)sum->absent_len,
                              (uint32_t)sum->nabsent, (uint32_t)sum->names_len,
                              (uint32_t)sum->nnames,  0};
    put(&w, lens, sizeof lens);
    put(&w, sum->reject_detail, detail);
    put(&w, sum->absent, sum->absent_len);
    put(&w, sum->names, sum->names_len);
    put_pad(&w, strings);
    if (words > 0)
        put(&w, c->survived, 8 * words);
    for (size_t i = 0; i < c->nblocks; i++) {
        put_u64(&w, c->blocks[i].len);
        put_u32(&w, c->blocks[i].rows);
        put_u32(&w, 0);
        put(&w, c->blocks[i].data, c->blocks[i].len);
        put_pad(&w, c->blocks[i].len);
    }
}

/* ---- reading back ------------------------------------------------------------ */

typedef struct reader {
    const uint8_t *buf;
    size_t len, at;
} reader_t;

static const uint8_t *take(reader_t *r, uint64_t n)
{
    if (n > r->len - r->at)
        return NULL;
    const uint8_t *p = r->buf + r->at;
    r->at += (size_t)n;
    return p;
}

static int get_u32(reader_t *r, uint32_t *v)
{
    const uint8_t *p = take(r, 4);
    if (p)
        memcpy(v, p, 4);
    return p != NULL;
}

static int get_u64(reader_t *r, uint64_t *v)
{
    const uint8_t *p = take(r, 8);
    if (p)
        memcpy(v, p, 8);
    return p != NULL;
}

/* Whether s[0..len) is n strings each ended by a NUL. */
static int nul_list(const char *s, size_t len, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        count += s[i] == '\0';
    return count == n && (len == 0 || s[len - 1] == '\0');
}

void dpp_split_entry_close(dpp_split_entry_t *e)
{
    free(e->mem);
    memset(e, 0, sizeof *e);
}

int dpp_split_entry_parse(const uint8_t *buf, size_t len, const dpp_block_shape_t *shape,
                          uint32_t batch_size, dpp_split_entry_t *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    reader_t r = {buf, len, 0};
    uint32_t magic = 0, version = 0, nblocks = 0;
    uint64_t v[5], counts[7], rej[DPP_REJECT_NREASONS];
    uint32_t lens[6];
    if (!get_u32(&r, &magic) || !get_u32(&r, &version) || magic != ENTRY_MAGIC ||
        version != ENTRY_VERSION)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "not a split entry of version %u", ENTRY_VERSION);
    for (int i = 0; i < 5; i++)
        if (!get_u64(&r, &v[i]))
            return dpp_errf(DPP_ECORRUPT, err, errlen, "short entry header");
    e->identity = (dpp_split_identity_t){
        .size = v[0], .ino = v[1], .mtime_ns = (int64_t)v[2], .ctime_ns = (int64_t)v[3], .aux = v[4]};
    const uint8_t *p;
    if (!get_u32(&r, &e->batch_size) || !get_u32(&r, &nblocks) || !(p = take(&r, sizeof counts)))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "short entry header");
    memcpy(counts, p, sizeof counts);
    if (!(p = take(&r, sizeof rej)))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "short entry header");
    memcpy(rej, p, sizeof rej);
    if (!(p = take(&r, sizeof lens)))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "short entry header");
    memcpy(lens, p, sizeof lens);
    if (e->batch_size != batch_size)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "entry of batches of %u rows, not %u",
                        e->batch_size, batch_size);
    dpp_split_summary_t *s = &e->summary;
    e->ngathered = counts[0];
    s->rows = counts[1];
    s->filtered = counts[2];
    s->examined = counts[3];
    s->documents = counts[4];
    s->tokens = counts[5];
    s->padding = counts[6];
    size_t k = 0;
#define FROM_WIRE(name, code, words) s->rejects.name = rej[k++];
    DPP_REJECT_REASONS(FROM_WIRE)
#undef FROM_WIRE
    uint64_t strings = (uint64_t)lens[0] + lens[1] + lens[3];
    const char *str = (const char *)take(&r, pad8(strings));
    if (str == NULL || (lens[0] && memchr(str, '\0', lens[0])) ||
        !nul_list(str + lens[0], lens[1], lens[2]) ||
        !nul_list(str + lens[0] + lens[1], lens[3], lens[4]))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "damaged entry strings");
    s->reject_detail = str;  /* not NUL-terminated: the caller copies lens[0] bytes */
    s->absent = str + lens[0];
    s->absent_len = lens[1];
    s->nabsent = lens[2];
    s->names = str + lens[0] + lens[1];
    s->names_len = lens[3];
    s->nnames = lens[4];
    size_t detail_len = lens[0];
    if (e->ngathered > (uint64_t)(len / 8) * 64 || s->rows > e->ngathered)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "entry of %" PRIu64 " records", e->ngathered);
    size_t words = (size_t)((e->ngathered + 63) / 64);
    const uint8_t *bits = take(&r, 8 * (uint64_t)words);
    if (bits == NULL || nblocks > len / 16)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "short entry");
    e->survived = (const uint64_t *)(const void *)bits;
    /* one allocation: block pointers, lengths, rows, the rank words, and
     * the reject detail with its NUL */
    size_t bytes = (size_t)nblocks * (sizeof(uint8_t *) + sizeof(size_t) + sizeof(uint32_t)) +
                   8 * (words + 1) + detail_len + 1;
    uint8_t *mem = malloc(bytes);
    if (mem == NULL)
        return -ENOMEM;
    e->mem = mem;
    const uint8_t **block = (const uint8_t **)(void *)mem;
    size_t *block_len = (size_t *)(void *)(mem + (size_t)nblocks * sizeof(uint8_t *));
    uint64_t *rank = (uint64_t *)(void *)(mem + (size_t)nblocks * (sizeof(uint8_t *) + sizeof(size_t)));
    uint32_t *block_rows = (uint32_t *)(void *)(rank + words + 1);
    char *detail = (char *)(block_rows + nblocks);
    memcpy(detail, s->reject_detail, detail_len);
    detail[detail_len] = '\0';
    s->reject_detail = detail;
    uint64_t rows = 0;
    for (size_t w = 0; w < words; w++) {
        rank[w] = rows;
        uint64_t word = e->survived[w];
        if (w == words - 1 && e->ngathered % 64)
            word &= (UINT64_C(1) << (e->ngathered % 64)) - 1;
        rows += (uint64_t)__builtin_popcountll(word);
    }
    rank[words] = rows;
    e->rank = rank;
    uint64_t in_blocks = 0;
    for (uint32_t b = 0; b < nblocks; b++) {
        uint64_t blen = 0;
        uint32_t brows = 0, zero = 0;
        if (!get_u64(&r, &blen) || !get_u32(&r, &brows) || !get_u32(&r, &zero) ||
            blen > DPP_BLOCK_MAX_BYTES || !(p = take(&r, pad8(blen)))) {
            dpp_split_entry_close(e);
            return dpp_errf(DPP_ECORRUPT, err, errlen, "block %u of the entry is cut short", b);
        }
        dpp_block_info_t info;
        if (dpp_block_parse(p, (size_t)blen, shape, &info) != 0 || info.rows != brows ||
            (brows != batch_size && b + 1 != nblocks) || brows == 0) {
            dpp_split_entry_close(e);
            return dpp_errf(DPP_ECORRUPT, err, errlen, "block %u of the entry is damaged", b);
        }
        block[b] = p;
        block_len[b] = (size_t)blen;
        block_rows[b] = brows;
        in_blocks += brows;
    }
    if (r.at != len || in_blocks != rows || rows != s->rows) {
        dpp_split_entry_close(e);
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "the entry's blocks hold %" PRIu64 " rows, its records %" PRIu64
                        " and its count %" PRIu64,
                        in_blocks, rows, s->rows);
    }
    e->nblocks = nblocks;
    e->block = block;
    e->block_len = block_len;
    e->block_rows = block_rows;
    return 0;
}

int64_t dpp_split_entry_row(const dpp_split_entry_t *e, uint64_t g)
{
    uint64_t word = e->survived[g / 64], bit = UINT64_C(1) << (g % 64);
    if (!(word & bit))
        return -1;
    return (int64_t)(e->rank[g / 64] + (uint64_t)__builtin_popcountll(word & (bit - 1)));
}
