/* SPDX-License-Identifier: Apache-2.0 */
/* Byte-level BPE (bpe.h). The rank table is one open-addressing hash of
 * token bytes (XXH3) over an arena; single bytes have a direct table. A
 * piece is merged with a linear scan for the lowest pair while it is
 * short, and with a heap over a linked list once it is long, so that a
 * hostile document (100 KB of one letter is one piece) costs n log n, not
 * n squared. Both give the same merges: lowest rank first, the leftmost
 * pair among equal ranks. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcre2.h>
#include <xxhash.h>

#include "base/utf8.h"
#include "dpp/error.h"
#include "text/bpe.h"
#include "text/bpe_internal.h"

#define LINEAR_MAX 128 /* pieces up to this many bytes: the linear merge */

/* Per thread: match data and JIT stack, the merge arrays, a buffer for
 * text with invalid UTF-8 replaced. */
struct dpp_bpe_scratch {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    size_t cap;         /* of the arrays below, in pieces' bytes + 1 */
    uint32_t *start;    /* part starts */
    uint32_t *rank;     /* rank of part i merged with part i+1 */
    uint32_t *result;   /* the id that merge makes */
    uint32_t *id;       /* part i's id */
    uint32_t *next, *prev;
    uint64_t *heap; /* (rank << 32 | start) */
    uint8_t *fixed;
    size_t fixed_cap;
    uint8_t *spaced; /* the text after a prefix space */
    size_t spaced_cap;
};

/* ---- the named encodings (tiktoken's openai_public definitions) ---- */

static const char cl100k_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char o200k_pattern[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const cl100k_specials[] = {"<|endoftext|>", "<|fim_prefix|>",
                                              "<|fim_middle|>", "<|fim_suffix|>",
                                              "<|endofprompt|>"};
static const uint32_t cl100k_special_ids[] = {100257, 100258, 100259, 100260, 100276};
static const char *const o200k_specials[] = {"<|endoftext|>", "<|endofprompt|>"};
static const uint32_t o200k_special_ids[] = {199999, 200018};

const char *dpp_bpe_pattern(const char *encoding)
{
    if (strcmp(encoding, "cl100k_base") == 0)
        return cl100k_pattern;
    if (strcmp(encoding, "o200k_base") == 0)
        return o200k_pattern;
    return NULL;
}

int dpp_bpe_specials(const char *encoding, const char *const **names, const uint32_t **ids,
                     size_t *n)
{
    if (strcmp(encoding, "cl100k_base") == 0) {
        *names = cl100k_specials;
        *ids = cl100k_special_ids;
        *n = sizeof cl100k_special_ids / sizeof cl100k_special_ids[0];
        return 0;
    }
    if (strcmp(encoding, "o200k_base") == 0) {
        *names = o200k_specials;
        *ids = o200k_special_ids;
        *n = sizeof o200k_special_ids / sizeof o200k_special_ids[0];
        return 0;
    }
    return DPP_EINVAL;
}

/* ---- the rank table ---- */

static uint32_t lookup(const dpp_bpe_t *b, const uint8_t *s, size_t len)
{
    if (len == 1)
        return b->byte_rank[s[0]];
    if (len > DPP_BPE_MAX_TOKEN)
        return NO_RANK;
    size_t i = (size_t)XXH3_64bits(s, len) & b->mask;
    for (;;) {
        const slot_t *e = &b->slots[i];
        if (e->len == 0)
            return NO_RANK;
        if (e->len == len && memcmp(b->arena + e->off, s, len) == 0)
            return e->rank;
        i = (i + 1) & b->mask;
    }
}

/* 0, or 1 when the token is there already. */
static int insert(dpp_bpe_t *b, uint32_t off, size_t len, uint32_t rank)
{
    const uint8_t *s = b->arena + off;
    size_t i = (size_t)XXH3_64bits(s, len) & b->mask;
    for (;;) {
        slot_t *e = &b->slots[i];
        if (e->len == 0) {
            *e = (slot_t){.off = off, .rank = rank, .len = (uint16_t)len};
            return 0;
        }
        if (e->len == len && memcmp(b->arena + e->off, s, len) == 0)
            return 1;
        i = (i + 1) & b->mask;
    }
}

static int b64_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Standard base64 with padding; returns the decoded length, or -1. */
static long b64_decode(const uint8_t *s, size_t len, uint8_t *out, size_t cap)
{
    if (len == 0 || len % 4 != 0)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64_value(s[i + k])) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        uint8_t bytes[3] = {(uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w};
        for (int k = 0; k < 3 - pad; k++) {
            if (n == cap)
                return -1;
            out[n++] = bytes[k];
        }
    }
    return (long)n;
}

static int fail(char *err, size_t errlen, const char *name, size_t line, const char *what)
{
    snprintf(err, errlen, "tokenizer file %s, line %zu: %s", name, line, what);
    return DPP_ESPEC;
}

static int parse_ranks(dpp_bpe_t *b, const char *name, const uint8_t *buf, size_t len, char *err,
                       size_t errlen)
{
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    lines += len > 0 && buf[len - 1] != '\n';
    if (lines > DPP_BPE_MAX_RANKS)
        return fail(err, errlen, name, DPP_BPE_MAX_RANKS + 1, "more tokens than dpp takes (16M)");
    /* decoded tokens are shorter than their lines */
    if (dpp__bpe_tables(b, lines, len + 1) != 0)
        return -ENOMEM;
    b->whole_first = 1;
    uint8_t *seen = calloc(lines / 8 + 1, 1); /* ranks given, to refuse one twice */
    if (seen == NULL)
        return -ENOMEM;
    size_t line = 0, pos = 0, max_rank = 0;
    int rc = 0;
    char what[160];
    while (pos < len && rc == 0) {
        line++;
        const uint8_t *l = buf + pos;
        const uint8_t *nl = memchr(l, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - l) : len - pos;
        pos += ll + (nl != NULL);
        if (ll > 0 && l[ll - 1] == '\r')
            ll--;
        if (ll == 0) {
            rc = fail(err, errlen, name, line, "empty line; expected \"BASE64 RANK\"");
            break;
        }
        const uint8_t *sp = memchr(l, ' ', ll);
        if (sp == NULL) {
            rc = fail(err, errlen, name, line,
                      "no rank; expected \"BASE64 RANK\" (a tiktoken rank file)");
            break;
        }
        size_t tl = (size_t)(sp - l);
        uint64_t rank = 0;
        size_t digits = 0;
        for (const uint8_t *d = sp + 1; d < l + ll; d++, digits++) {
            if (*d < '0' || *d > '9' || rank > DPP_BPE_MAX_RANKS) {
                digits = 0;
                break;
            }
            rank = rank * 10 + (uint64_t)(*d - '0');
        }
        if (digits == 0 || rank >= lines) {
            snprintf(what, sizeof what,
                     digits == 0 ? "the rank is not a number; expected \"BASE64 RANK\""
                                 : "rank %llu is past the %zu tokens of the file",
                     (unsigned long long)rank, lines);
            rc = fail(err, errlen, name, line, what);
            break;
        }
        long n = b64_decode(l, tl, b->arena + b->arena_len, DPP_BPE_MAX_TOKEN);
        if (n <= 0) {
            rc = fail(err, errlen, name, line,
                      "the token is not base64 of 1 to 256 bytes (standard alphabet, padded)");
            break;
        }
        if (seen[rank / 8] & (1u << (rank % 8))) {
            snprintf(what, sizeof what, "rank %llu twice", (unsigned long long)rank);
            rc = fail(err, errlen, name, line, what);
            break;
        }
        seen[rank / 8] |= (uint8_t)(1u << (rank % 8));
        uint32_t off = (uint32_t)b->arena_len;
        if (insert(b, off, (size_t)n, (uint32_t)rank)) {
            rc = fail(err, errlen, name, line, "a token that an earlier line has already");
            break;
        }
        if (n == 1)
            b->byte_rank[b->arena[off]] = (uint32_t)rank;
        b->arena_len += (size_t)n;
        if (rank > max_rank)
            max_rank = rank;
        b->ntokens++;
    }
    free(seen);
    if (rc)
        return rc;
    for (int i = 0; i < 256; i++)
        if (b->byte_rank[i] == NO_RANK) {
            snprintf(err, errlen,
                     "tokenizer file %s: no token for the byte 0x%02x: a byte-level BPE needs all "
                     "256 single bytes",
                     name, i);
            return DPP_ESPEC;
        }
    b->ntokens = max_rank + 1;
    return 0;
}

/* Unicode's White_Space, which \s means in Rust's regex (so in tiktoken's
 * patterns); PCRE2's \s under UCP also takes U+180E. */
#define WHITE_SPACE "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

/* The pattern with \s and \S spelt as White_Space classes: in a class, \s
 * becomes its ranges; outside, [ranges] and [^ranges]. A \S inside a class
 * (which ranges cannot negate; no tiktoken pattern has one) stays PCRE2's.
 * NULL: out of memory. */
static char *spell_white_space(const char *pattern)
{
    size_t n = strlen(pattern);
    char *out = malloc(n * (sizeof WHITE_SPACE + 3) + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < n) {
            char e = pattern[++i];
            if (e == 's' || (e == 'S' && !in_class)) {
                if (!in_class) {
                    out[o++] = '[';
                    if (e == 'S')
                        out[o++] = '^';
                }
                memcpy(out + o, WHITE_SPACE, sizeof WHITE_SPACE - 1);
                o += sizeof WHITE_SPACE - 1;
                if (!in_class)
                    out[o++] = ']';
            } else {
                out[o++] = '\\';
                out[o++] = e;
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            out[o++] = c;
            /* a ']' first in a class (or after '^') is a member */
            if (i + 1 < n && pattern[i + 1] == '^')
                out[o++] = pattern[++i];
            if (i + 1 < n && pattern[i + 1] == ']')
                out[o++] = pattern[++i];
            continue;
        }
        if (c == ']' && in_class)
            in_class = 0;
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

int dpp__bpe_tables(dpp_bpe_t *b, size_t ntokens, size_t bytes)
{
    size_t nslots = 16;
    while (nslots < 2 * ntokens + 16)
        nslots *= 2;
    b->slots = calloc(nslots, sizeof *b->slots);
    b->arena = malloc(bytes ? bytes : 1);
    if (b->slots == NULL || b->arena == NULL)
        return -ENOMEM;
    b->mask = nslots - 1;
    for (int i = 0; i < 256; i++)
        b->byte_rank[i] = NO_RANK;
    return 0;
}

int dpp__bpe_add_token(dpp_bpe_t *b, const uint8_t *tok, size_t len, uint32_t id)
{
    uint32_t off = (uint32_t)b->arena_len;
    memcpy(b->arena + off, tok, len);
    if (insert(b, off, len, id))
        return 1;
    b->arena_len += len;
    if (len == 1)
        b->byte_rank[tok[0]] = id;
    if (id >= b->ntokens)
        b->ntokens = (size_t)id + 1;
    return 0;
}

uint32_t dpp__bpe_lookup(const dpp_bpe_t *b, const uint8_t *tok, size_t len)
{
    return lookup(b, tok, len);
}

int dpp__bpe_pairs(dpp_bpe_t *b, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 16)
        cap *= 2;
    b->pair_keys = calloc(cap, sizeof *b->pair_keys);
    b->pair_rank = malloc(cap * sizeof *b->pair_rank);
    b->pair_result = malloc(cap * sizeof *b->pair_result);
    if (!b->pair_keys || !b->pair_rank || !b->pair_result)
        return -ENOMEM;
    b->pair_mask = cap - 1;
    b->by_pairs = 1;
    return 0;
}

int dpp__bpe_add_pair(dpp_bpe_t *b, uint32_t left, uint32_t right, uint32_t rank, uint32_t result)
{
    uint64_t key = ((uint64_t)left << 32 | right) + 1;
    size_t i = (size_t)XXH3_64bits(&key, sizeof key) & b->pair_mask;
    int again = 0;
    while (b->pair_keys[i] != 0 && !again) {
        again = b->pair_keys[i] == key;
        if (!again)
            i = (i + 1) & b->pair_mask;
    }
    b->pair_keys[i] = key;
    b->pair_rank[i] = rank;
    b->pair_result[i] = result;
    return again;
}

int dpp__bpe_compile(dpp_bpe_t *b, const char *pattern, char *err, size_t errlen)
{
    int code;
    PCRE2_SIZE at;
    char *spelt = spell_white_space(pattern);
    if (spelt == NULL)
        return -ENOMEM;
    b->re = pcre2_compile((PCRE2_SPTR)spelt, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code,
                          &at, NULL);
    free(spelt);
    if (b->re == NULL) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        snprintf(err, errlen, "tokenizer pattern: %s at offset %zu", (const char *)msg,
                 (size_t)at);
        return DPP_ESPEC;
    }
    pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE); /* without JIT it still matches */
    return 0;
}

int dpp_bpe_new(dpp_bpe_t **out, const char *name, const uint8_t *buf, size_t len,
                const char *pattern, char *err, size_t errlen)
{
    *out = NULL;
    dpp_bpe_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return -ENOMEM;
    int rc = parse_ranks(b, name, buf, len, err, errlen);
    if (rc == 0)
        rc = dpp__bpe_compile(b, pattern, err, errlen);
    if (rc) {
        dpp_bpe_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

int dpp__bpe_read_file(const char *path, uint8_t **out, size_t *outlen, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        snprintf(err, errlen, "tokenizer file %s: %s", path, strerror(e));
        return -e;
    }
    if ((uint64_t)st.st_size > DPP_BPE_MAX_FILE) {
        close(fd);
        snprintf(err, errlen, "tokenizer file %s: %lld bytes, more than the 64 MiB dpp takes",
                 path, (long long)st.st_size);
        return DPP_ESPEC;
    }
    size_t len = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL) {
        close(fd);
        return -ENOMEM;
    }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            free(buf);
            snprintf(err, errlen, "tokenizer file %s: %s", path, strerror(e));
            return -e;
        }
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *outlen = len;
    return 0;
}

int dpp_bpe_load(dpp_bpe_t **out, const char *path, const char *pattern, char *err, size_t errlen)
{
    *out = NULL;
    uint8_t *buf;
    size_t len;
    int rc = dpp__bpe_read_file(path, &buf, &len, err, errlen);
    if (rc)
        return rc;
    rc = dpp_bpe_new(out, path, buf, len, pattern, err, errlen);
    free(buf);
    return rc;
}

void dpp_bpe_free(dpp_bpe_t *b)
{
    if (b == NULL)
        return;
    pcre2_code_free(b->re);
    free(b->slots);
    free(b->arena);
    free(b->pair_keys);
    free(b->pair_rank);
    free(b->pair_result);
    for (size_t i = 0; i < b->nspecial; i++)
        free(b->special_names[i]);
    free(b->special_names);
    free(b->special_ids);
    free(b);
}

size_t dpp_bpe_size(const dpp_bpe_t *b)
{
    return b->ntokens;
}

dpp_bpe_scratch_t *dpp_bpe_scratch_new(const dpp_bpe_t *b)
{
    dpp_bpe_scratch_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->md = pcre2_match_data_create_from_pattern(b->re, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    /* a long run of spaces backtracks through \s+(?!\S): more than the
     * default 32 KiB of JIT stack */
    s->jit = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (s->md == NULL || s->mctx == NULL || s->jit == NULL) {
        dpp_bpe_scratch_free(s);
        return NULL;
    }
    pcre2_jit_stack_assign(s->mctx, NULL, s->jit);
    return s;
}

void dpp_bpe_scratch_free(dpp_bpe_scratch_t *s)
{
    if (s == NULL)
        return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit);
    free(s->start);
    free(s->rank);
    free(s->result);
    free(s->id);
    free(s->next);
    free(s->prev);
    free(s->heap);
    free(s->fixed);
    free(s->spaced);
    free(s);
}

/* ---- encoding ---- */

static int push(uint32_t **ids, size_t *n, size_t *cap, uint32_t id)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        uint32_t *p = realloc(*ids, c * sizeof *p);
        if (p == NULL)
            return -ENOMEM;
        *ids = p;
        *cap = c;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

static int grow(dpp_bpe_scratch_t *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    size_t c = s->cap ? s->cap : 256;
    while (c < need)
        c *= 2;
    /* a failure leaves the arrays grown so far larger, which is harmless */
    uint32_t **arrays[] = {&s->start, &s->rank, &s->next, &s->prev, &s->result, &s->id};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
        uint32_t *p = realloc(*arrays[k], c * sizeof *p);
        if (p == NULL)
            return -ENOMEM;
        *arrays[k] = p;
    }
    uint64_t *h = realloc(s->heap, 4 * c * sizeof *h); /* a push per part, two per merge */
    if (h == NULL)
        return -ENOMEM;
    s->heap = h;
    s->cap = c;
    return 0;
}

static uint32_t pair_lookup(const dpp_bpe_t *b, uint32_t left, uint32_t right, uint32_t *result)
{
    uint64_t key = ((uint64_t)left << 32 | right) + 1;
    size_t i = (size_t)XXH3_64bits(&key, sizeof key) & b->pair_mask;
    for (;;) {
        if (b->pair_keys[i] == 0)
            return NO_RANK;
        if (b->pair_keys[i] == key) {
            *result = b->pair_result[i];
            return b->pair_rank[i];
        }
        i = (i + 1) & b->pair_mask;
    }
}

/* The rank of merging the part [from, mid) (id left) with [mid, to) (id
 * right), and the id it makes into *result; NO_RANK when they do not
 * merge. */
static inline uint32_t pair_rank(const dpp_bpe_t *b, const uint8_t *p, uint32_t from, uint32_t to,
                                 uint32_t left, uint32_t right, uint32_t *result)
{
    if (b->by_pairs)
        return pair_lookup(b, left, right, result);
    uint32_t r = lookup(b, p + from, to - from);
    *result = r;
    return r;
}

/* Short pieces: parts as an array, the lowest pair found by a scan. */
static int merge_linear(const dpp_bpe_t *b, dpp_bpe_scratch_t *s, const uint8_t *p, size_t len,
                        uint32_t **ids, size_t *n, size_t *cap)
{
    uint32_t *st = s->start, *rk = s->rank, *rs = s->result, *id = s->id;
    size_t np = len + 1; /* parts[0..len) plus the end */
    for (size_t i = 0; i <= len; i++)
        st[i] = (uint32_t)i;
    for (size_t i = 0; i < len; i++)
        id[i] = b->byte_rank[p[i]];
    for (size_t i = 0; i + 1 < len; i++)
        rk[i] = pair_rank(b, p, (uint32_t)i, (uint32_t)i + 2, id[i], id[i + 1], &rs[i]);
    if (len > 0)
        rk[len - 1] = NO_RANK;
    for (;;) {
        uint32_t best = NO_RANK;
        size_t at = 0;
        for (size_t i = 0; i + 2 < np; i++)
            if (rk[i] < best) {
                best = rk[i];
                at = i;
            }
        if (best == NO_RANK)
            break;
        /* part at swallows part at+1 */
        id[at] = rs[at];
        size_t tail = np - at - 2;
        memmove(st + at + 1, st + at + 2, tail * sizeof *st);
        memmove(rk + at + 1, rk + at + 2, tail * sizeof *rk);
        memmove(rs + at + 1, rs + at + 2, tail * sizeof *rs);
        memmove(id + at + 1, id + at + 2, tail * sizeof *id);
        np--;
        rk[at] = at + 2 < np ? pair_rank(b, p, st[at], st[at + 2], id[at], id[at + 1], &rs[at])
                             : NO_RANK;
        if (at > 0)
            rk[at - 1] = pair_rank(b, p, st[at - 1], st[at + 1], id[at - 1], id[at], &rs[at - 1]);
    }
    for (size_t i = 0; i + 1 < np; i++)
        if (push(ids, n, cap, id[i]) != 0)
            return -ENOMEM;
    return 0;
}

static void heap_push(uint64_t *h, size_t *hn, uint64_t v)
{
    size_t i = (*hn)++;
    h[i] = v;
    while (i > 0 && h[(i - 1) / 2] > h[i]) {
        uint64_t t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static uint64_t heap_pop(uint64_t *h, size_t *hn)
{
    uint64_t top = h[0];
    h[0] = h[--(*hn)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *hn && h[l] < h[m])
            m = l;
        if (r < *hn && h[r] < h[m])
            m = r;
        if (m == i)
            break;
        uint64_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

/* Long pieces: parts as a list over byte positions (a part is named by its
 * first byte), candidate pairs in a heap keyed (rank, position); an entry
 * whose part is gone or whose rank changed is passed over. */
static int merge_heap(const dpp_bpe_t *b, dpp_bpe_scratch_t *s, const uint8_t *p, size_t len,
                      uint32_t **ids, size_t *n, size_t *cap)
{
    uint32_t *nx = s->next, *pv = s->prev, *rk = s->rank, *rs = s->result, *id = s->id;
    uint64_t *h = s->heap;
    size_t hn = 0;
    const uint32_t end = (uint32_t)len;
    for (uint32_t i = 0; i < end; i++) {
        nx[i] = i + 1;
        pv[i] = i - 1; /* 0's prev is never read */
        id[i] = b->byte_rank[p[i]];
    }
    for (uint32_t i = 0; i < end; i++) {
        rk[i] = i + 1 < end ? pair_rank(b, p, i, i + 2, id[i], id[i + 1], &rs[i]) : NO_RANK;
        if (rk[i] != NO_RANK)
            heap_push(h, &hn, (uint64_t)rk[i] << 32 | i);
    }
    while (hn > 0) {
        uint64_t top = heap_pop(h, &hn);
        uint32_t i = (uint32_t)top, r = (uint32_t)(top >> 32);
        if (rk[i] != r) /* stale: merged away, or its pair changed */
            continue;
        uint32_t j = nx[i]; /* swallowed */
        uint32_t k = nx[j];
        id[i] = rs[i];
        nx[i] = k;
        if (k < end)
            pv[k] = i;
        rk[j] = NO_RANK;
        uint32_t after = k < end ? nx[k] : end;
        rk[i] = k < end ? pair_rank(b, p, i, after, id[i], id[k], &rs[i]) : NO_RANK;
        if (rk[i] != NO_RANK)
            heap_push(h, &hn, (uint64_t)rk[i] << 32 | i);
        if (i > 0) {
            uint32_t q = pv[i];
            rk[q] = pair_rank(b, p, q, k, id[q], id[i], &rs[q]);
            if (rk[q] != NO_RANK)
                heap_push(h, &hn, (uint64_t)rk[q] << 32 | q);
        }
    }
    for (uint32_t i = 0; i < end; i = nx[i])
        if (push(ids, n, cap, id[i]) != 0)
            return -ENOMEM;
    return 0;
}

static int encode_piece(const dpp_bpe_t *b, dpp_bpe_scratch_t *s, const uint8_t *p, size_t len,
                        uint32_t **ids, size_t *n, size_t *cap)
{
    if (b->whole_first) {
        uint32_t whole = lookup(b, p, len);
        if (whole != NO_RANK)
            return push(ids, n, cap, whole);
    }
    if (len == 1)
        return push(ids, n, cap, b->byte_rank[p[0]]);
    if (grow(s, len + 2) != 0)
        return -ENOMEM;
    return len <= LINEAR_MAX ? merge_linear(b, s, p, len, ids, n, cap)
                             : merge_heap(b, s, p, len, ids, n, cap);
}

/* text with each maximal invalid subpart as U+FFFD, into s->fixed; NULL
 * when the text is valid (use it as it is). */
static const uint8_t *fix_utf8(dpp_bpe_scratch_t *s, const uint8_t *t, size_t len, size_t *out,
                               int *nomem)
{
    size_t i = 0, bad = 0;
    while (i < len) {
        if (t[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = dpp_utf8_seq(t + i, len - i, &bad);
        if (k == 0)
            break;
        i += k;
    }
    if (i == len)
        return NULL;
    size_t need = 3 * len; /* each byte at most one U+FFFD of 3 bytes */
    if (s->fixed_cap < need) {
        uint8_t *f = realloc(s->fixed, need);
        if (f == NULL) {
            *nomem = 1;
            return NULL;
        }
        s->fixed = f;
        s->fixed_cap = need;
    }
    memcpy(s->fixed, t, i);
    size_t o = i;
    while (i < len) {
        size_t k = t[i] < 0x80 ? 1 : dpp_utf8_seq(t + i, len - i, &bad);
        if (k) {
            memcpy(s->fixed + o, t + i, k);
            o += k;
            i += k;
        } else {
            memcpy(s->fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += bad;
        }
    }
    *out = o;
    return s->fixed;
}

int dpp_bpe_encode(const dpp_bpe_t *b, dpp_bpe_scratch_t *s, const uint8_t *text, size_t len,
                   uint32_t **ids, size_t *n, size_t *cap)
{
    int nomem = 0;
    size_t flen = 0;
    const uint8_t *fixed = fix_utf8(s, text, len, &flen, &nomem);
    if (nomem)
        return -ENOMEM;
    if (fixed) {
        text = fixed;
        len = flen;
    }
    if (b->prefix_space && len > 0 && text[0] != ' ') {
        /* Hugging Face's ByteLevel add_prefix_space: the text as if it
         * followed a word */
        if (s->spaced_cap < len + 1) {
            uint8_t *p = realloc(s->spaced, len + 1);
            if (p == NULL)
                return -ENOMEM;
            s->spaced = p;
            s->spaced_cap = len + 1;
        }
        s->spaced[0] = ' ';
        memcpy(s->spaced + 1, text, len);
        text = s->spaced;
        len++;
    }
    size_t n0 = *n, at = 0;
    while (at < len) {
        int m = pcre2_match(b->re, text, len, at, PCRE2_NO_UTF_CHECK, s->md, s->mctx);
        PCRE2_SIZE from, to;
        if (m < 0) {
            /* no piece starts here (or the matcher gave up): the rest as one
             * piece, so that every byte still becomes tokens */
            from = at;
            to = len;
        } else {
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            from = ov[0];
            to = ov[1];
            if (from > at) /* bytes no piece covers: a piece of their own */
                to = from, from = at;
            if (to == from) { /* an empty match: one character on */
                to = from + 1;
                while (to < len && (text[to] & 0xc0) == 0x80)
                    to++;
            }
        }
        if (encode_piece(b, s, text + from, to - from, ids, n, cap) != 0) {
            *n = n0;
            return -ENOMEM;
        }
        at = to;
    }
    return 0;
}
