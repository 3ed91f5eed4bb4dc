/* SPDX-License-Identifier: Apache-2.0 */
/* Hugging Face tokenizer.json files of byte-level BPE models (bpe.h,
 * dpp_bpe_new_hf): GPT-2, Llama 3, Qwen and their kind. What is read:
 *  - model: type "BPE"; vocab (token -> id, tokens in the byte-level
 *    alphabet: each byte one printable character, GPT-2's bytes_to_unicode);
 *    merges ("a b" or ["a", "b"]; line r merges a and b into the token a+b
 *    at rank r); ignore_merges (a piece that is a token is that token).
 *  - pre_tokenizer: ByteLevel (its add_prefix_space; with use_regex, GPT-2's
 *    split pattern), or a Split (behavior Isolated, a Regex or a String)
 *    followed by a ByteLevel without its regex, alone or in a Sequence.
 *  - added_tokens: their names and ids, for special tokens by name (they
 *    are not looked for in the text: dpp encodes documents as text).
 * Refused by name: other model types, byte_fallback, dropout, subword
 * prefixes and suffixes, normalizers, other pre-tokenizers and behaviors.
 * The merge rule is Hugging Face's, not tiktoken's: the adjacent pair whose
 * merge line is lowest, leftmost on ties. */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dpp/error.h"
#include "text/bpe.h"
#include "text/bpe_internal.h"

/* GPT-2's split pattern (ByteLevel with use_regex). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* bytes_to_unicode: the printable bytes stand for themselves, the other 68
 * for U+0100 onwards in byte order. unicode_byte[cp] is the byte of code
 * point cp (< 324), -1 for none. */
static void byte_alphabet(int unicode_byte[324])
{
    for (int i = 0; i < 324; i++)
        unicode_byte[i] = -1;
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        unicode_byte[printable ? b : next++] = b;
    }
}

/* A vocab string in the byte-level alphabet into out (at most cap bytes);
 * the length, or -1 when a character is outside the alphabet. */
static long to_bytes(const int unicode_byte[324], const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    const uint8_t *p = (const uint8_t *)s;
    while (*p) {
        uint32_t cp;
        if (p[0] < 0x80) {
            cp = p[0];
            p += 1;
        } else if ((p[0] & 0xe0) == 0xc0 && (p[1] & 0xc0) == 0x80) {
            cp = (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
            p += 2;
        } else {
            return -1; /* beyond U+07FF: not the alphabet */
        }
        if (cp >= 324 || unicode_byte[cp] < 0 || n == cap)
            return -1;
        out[n++] = (uint8_t)unicode_byte[cp];
    }
    return (long)n;
}

static int refuse(char *err, size_t errlen, const char *name, const char *fmt, const char *a,
                  const char *b)
{
    char what[2048]; /* the callers' pieces are bounded; room for all of them */
    snprintf(what, sizeof what, fmt, a, b);
    snprintf(err, errlen, "tokenizer file %s: %s", name, what);
    return DPP_ESPEC;
}

static const char *str_or(json_t *o, const char *key, const char *dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

/* pre_tokenizer -> *pattern (owned by the JSON or static) and the space. */
static int read_pre(json_t *pt, const char *name, const char **pattern, int *prefix, char *err,
                    size_t errlen)
{
    json_t *steps[2];
    size_t n = 0;
    const char *type = str_or(pt, "type", NULL);
    if (type == NULL)
        return refuse(err, errlen, name,
                      "no pre_tokenizer: dpp reads byte-level BPE models (a ByteLevel "
                      "pre-tokenizer)%s%s",
                      "", "");
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(pt, "pretokenizers");
        if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > 2)
            return refuse(err, errlen, name,
                          "pre_tokenizer Sequence: dpp reads one or two steps (a Split, then a "
                          "ByteLevel)%s%s",
                          "", "");
        for (size_t i = 0; i < json_array_size(list); i++)
            steps[n++] = json_array_get(list, i);
    } else {
        steps[n++] = pt;
    }
    const char *split = NULL;
    int byte_level = 0, regex = 0;
    *prefix = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = str_or(steps[i], "type", "?");
        if (strcmp(t, "ByteLevel") == 0 && !byte_level) {
            byte_level = 1;
            *prefix = json_is_true(json_object_get(steps[i], "add_prefix_space"));
            json_t *ur = json_object_get(steps[i], "use_regex");
            regex = ur == NULL || json_is_true(ur);
        } else if (strcmp(t, "Split") == 0 && !byte_level && split == NULL) {
            const char *behavior = str_or(steps[i], "behavior", "?");
            if (strcmp(behavior, "Isolated") != 0)
                return refuse(err, errlen, name,
                              "pre_tokenizer Split with behavior %s: dpp reads Isolated%s",
                              behavior, "");
            if (json_is_true(json_object_get(steps[i], "invert")))
                return refuse(err, errlen, name, "pre_tokenizer Split with invert%s%s", "", "");
            json_t *pat = json_object_get(steps[i], "pattern");
            split = str_or(pat, "Regex", NULL);
            if (split == NULL && str_or(pat, "String", NULL))
                return refuse(err, errlen, name,
                              "pre_tokenizer Split on a String: dpp reads a Regex%s%s", "", "");
            if (split == NULL)
                return refuse(err, errlen, name, "pre_tokenizer Split without a pattern%s%s",
                              "", "");
        } else {
            return refuse(err, errlen, name,
                          "pre_tokenizer %s here: dpp reads ByteLevel, or a Split (Isolated) "
                          "then ByteLevel",
                          t, "");
        }
    }
    if (!byte_level)
        return refuse(err, errlen, name,
                      "no ByteLevel pre-tokenizer: dpp reads byte-level BPE models%s%s", "", "");
    if (split && regex)
        return refuse(err, errlen, name,
                      "a Split and then ByteLevel's own regex: two splitting steps, which dpp "
                      "does not do%s%s",
                      "", "");
    if (split && *prefix)
        return refuse(err, errlen, name,
                      "a Split and then ByteLevel with add_prefix_space (a space before every "
                      "piece), which dpp does not do%s%s",
                      "", "");
    *pattern = split ? split : regex ? gpt2_pattern : NULL;
    if (*pattern == NULL)
        return refuse(err, errlen, name,
                      "ByteLevel without its regex and no Split: the whole text would be one "
                      "piece%s%s",
                      "", "");
    return 0;
}

static int read_model(dpp_bpe_t *b, json_t *model, const char *name, char *err, size_t errlen)
{
    const char *type = str_or(model, "type", "?");
    if (strcmp(type, "BPE") != 0)
        return refuse(err, errlen, name, "model type %s: dpp reads BPE models%s", type, "");
    if (json_is_true(json_object_get(model, "byte_fallback")))
        return refuse(err, errlen, name,
                      "byte_fallback (a SentencePiece-style model): dpp reads byte-level BPE%s%s",
                      "", "");
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout))
        return refuse(err, errlen, name,
                      "BPE dropout: a tokenizer that draws at random cannot be exact%s%s", "", "");
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = str_or(model, keys[i], "");
        if (v[0])
            return refuse(err, errlen, name, "%s \"%s\": dpp reads byte-level BPE without one",
                          keys[i], v);
    }
    json_t *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges))
        return refuse(err, errlen, name, "model: expected a vocab object and a merges list%s%s",
                      "", "");
    size_t ntok = json_object_size(vocab), bytes = 0;
    if (ntok > DPP_BPE_MAX_RANKS)
        return refuse(err, errlen, name, "more tokens than dpp takes (16M)%s%s", "", "");
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) bytes += strlen(key);
    int rc = dpp__bpe_tables(b, ntok, bytes + 1);
    if (rc)
        return rc;
    int alphabet[324];
    byte_alphabet(alphabet);
    uint8_t tok[DPP_BPE_MAX_TOKEN];
    json_object_foreach(vocab, key, v)
    {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= (json_int_t)DPP_BPE_MAX_RANKS)
            return refuse(err, errlen, name, "vocab \"%s\": expected an id from 0 to 16M%s", key,
                          "");
        long n = to_bytes(alphabet, key, tok, sizeof tok);
        if (n <= 0)
            continue; /* an added token written as itself: not for merging */
        if (dpp__bpe_add_token(b, tok, (size_t)n, (uint32_t)id))
            return refuse(err, errlen, name, "vocab \"%s\": the same bytes as another token%s",
                          key, "");
    }
    for (int i = 0; i < 256; i++)
        if (b->byte_rank[i] == NO_RANK) {
            char hex[8];
            snprintf(hex, sizeof hex, "0x%02x", i);
            return refuse(err, errlen, name,
                          "no token for the byte %s: a byte-level BPE needs all 256%s", hex, "");
        }
    size_t nm = json_array_size(merges);
    if ((rc = dpp__bpe_pairs(b, nm)) != 0)
        return rc;
    for (size_t r = 0; r < nm; r++) {
        json_t *m = json_array_get(merges, r);
        char left[4 * DPP_BPE_MAX_TOKEN], right[4 * DPP_BPE_MAX_TOKEN], where[32];
        snprintf(where, sizeof where, "merges[%zu]", r);
        const char *l = NULL, *rt = NULL;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            const char *sp = strchr(s, ' ');
            if (sp && !strchr(sp + 1, ' ') && (size_t)(sp - s) < sizeof left &&
                strlen(sp + 1) < sizeof right) {
                memcpy(left, s, (size_t)(sp - s));
                left[sp - s] = '\0';
                snprintf(right, sizeof right, "%s", sp + 1);
                l = left;
                rt = right;
            }
        } else if (json_is_array(m) && json_array_size(m) == 2) {
            l = json_string_value(json_array_get(m, 0));
            rt = json_string_value(json_array_get(m, 1));
        }
        if (l == NULL || rt == NULL)
            return refuse(err, errlen, name, "%s: expected \"A B\" or [\"A\", \"B\"]%s", where, "");
        uint8_t lb[DPP_BPE_MAX_TOKEN], rb[DPP_BPE_MAX_TOKEN], both[2 * DPP_BPE_MAX_TOKEN];
        long ln = to_bytes(alphabet, l, lb, sizeof lb), rn = to_bytes(alphabet, rt, rb, sizeof rb);
        uint32_t li = ln > 0 ? dpp__bpe_lookup(b, lb, (size_t)ln) : NO_RANK;
        uint32_t ri = rn > 0 ? dpp__bpe_lookup(b, rb, (size_t)rn) : NO_RANK;
        if (li == NO_RANK || ri == NO_RANK)
            return refuse(err, errlen, name, "%s: \"%s\" is not a token of the vocab", where,
                          li == NO_RANK ? l : rt);
        memcpy(both, lb, (size_t)ln);
        memcpy(both + ln, rb, (size_t)rn);
        uint32_t res = dpp__bpe_lookup(b, both, (size_t)(ln + rn));
        if (res == NO_RANK)
            return refuse(err, errlen, name, "%s: \"%s\" and its right part make no token of the vocab",
                          where, l);
        /* a pair again: the later line counts, as in Hugging Face's (a map
         * built in order) */
        dpp__bpe_add_pair(b, li, ri, (uint32_t)r, res);
    }
    b->whole_first = json_is_true(json_object_get(model, "ignore_merges"));
    return 0;
}

static int read_added(dpp_bpe_t *b, json_t *added)
{
    size_t n = json_is_array(added) ? json_array_size(added) : 0;
    if (n == 0)
        return 0;
    b->special_names = calloc(n, sizeof *b->special_names);
    b->special_ids = calloc(n, sizeof *b->special_ids);
    if (b->special_names == NULL || b->special_ids == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(added, i);
        const char *content = str_or(t, "content", NULL);
        json_t *id = json_object_get(t, "id");
        if (content == NULL || !json_is_integer(id) || json_integer_value(id) < 0)
            continue;
        if ((b->special_names[b->nspecial] = strdup(content)) == NULL)
            return -ENOMEM;
        b->special_ids[b->nspecial++] = (uint32_t)json_integer_value(id);
        if ((size_t)json_integer_value(id) >= b->ntokens)
            b->ntokens = (size_t)json_integer_value(id) + 1;
    }
    return 0;
}

int dpp_bpe_new_hf(dpp_bpe_t **out, const char *name, const uint8_t *buf, size_t len, char *err,
                   size_t errlen)
{
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "tokenizer file %s: not JSON at line %d, column %d: %s", name,
                 jerr.line, jerr.column, jerr.text);
        return DPP_ESPEC;
    }
    dpp_bpe_t *b = calloc(1, sizeof *b);
    int rc = b ? 0 : -ENOMEM;
    json_t *norm = json_object_get(root, "normalizer");
    if (rc == 0 && !json_is_object(root))
        rc = refuse(err, errlen, name, "expected a JSON object (a tokenizer.json)%s%s", "", "");
    if (rc == 0 && norm && !json_is_null(norm))
        rc = refuse(err, errlen, name,
                    "normalizer %s: dpp does not normalize text (byte-level BPE models have "
                    "none)%s",
                    str_or(norm, "type", "?"), "");
    const char *pattern = NULL;
    if (rc == 0)
        rc = read_pre(json_object_get(root, "pre_tokenizer"), name, &pattern, &b->prefix_space,
                      err, errlen);
    if (rc == 0)
        rc = read_model(b, json_object_get(root, "model"), name, err, errlen);
    if (rc == 0)
        rc = read_added(b, json_object_get(root, "added_tokens"));
    if (rc == 0 && (rc = dpp__bpe_compile(b, pattern, err, errlen)) == DPP_ESPEC) {
        char why[400];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "tokenizer file %s: the pre_tokenizer's %s", name, why);
    }
    json_decref(root);
    if (rc) {
        dpp_bpe_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

int dpp_bpe_load_hf(dpp_bpe_t **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    uint8_t *buf;
    size_t len;
    int rc = dpp__bpe_read_file(path, &buf, &len, err, errlen);
    if (rc)
        return rc;
    rc = dpp_bpe_new_hf(out, path, buf, len, err, errlen);
    free(buf);
    return rc;
}

int64_t dpp_bpe_special_id(const dpp_bpe_t *b, const char *name)
{
    for (size_t i = 0; i < b->nspecial; i++)
        if (strcmp(b->special_names[i], name) == 0)
            return b->special_ids[i];
    return -1;
}
