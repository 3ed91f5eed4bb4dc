/* SPDX-License-Identifier: Apache-2.0 */
/* dppctl validate --table for a text session (format "jsonl"): the
 * tokenizer loads and has the special tokens the spec names, and a sample
 * of the table's lines is read as the worker reads them (format/jsonl.c):
 * lines that would be rejected (not JSON, no text field, not a string)
 * and documents the text filters drop are counted; no document at all, or
 * rejects past max_reject_ratio, is an error. Plain files from their start,
 * .zst files decompressed from theirs. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "base/alloc.h"
#include "base/nearest.h"
#include "ctl.h"
#include "format/jsonl.h"
#include "spec/spec.h"
#include "text/bpe.h"

#define SAMPLE_BYTES (16u << 20) /* decompressed bytes read from the start of a file */

typedef struct text_sample {
    const dpp_text_spec_t *t;
    uint64_t lines, documents, filtered, rejected;
    char first_reject[512];
} text_sample_t;

/* Up to SAMPLE_BYTES of the file's text (a .zst file decompressed) into a
 * new buffer; its length, or -1 after a note in *why. */
static long read_head(const char *path, uint8_t **out, char *why, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t *buf = malloc(SAMPLE_BYTES);
    ssize_t got = fd >= 0 && buf ? pread(fd, buf, SAMPLE_BYTES, 0) : -1;
    if (got < 0) {
        snprintf(why, len, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        free(buf);
        return -1;
    }
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".zst") == 0) {
        uint8_t *plain = dpp_xmalloc(SAMPLE_BYTES);
        ZSTD_DCtx *z = ZSTD_createDCtx();
        ZSTD_inBuffer in = {buf, (size_t)got, 0};
        ZSTD_outBuffer o = {plain, SAMPLE_BYTES, 0};
        size_t rc = 0;
        while (z && o.pos < o.size && in.pos < in.size && !ZSTD_isError(rc))
            rc = ZSTD_decompressStream(z, &o, &in);
        ZSTD_freeDCtx(z);
        free(buf);
        buf = plain;
        if (z == NULL || ZSTD_isError(rc)) {
            snprintf(why, len, "not a zstd stream (%s)", z ? ZSTD_getErrorName(rc) : "no memory");
            close(fd);
            free(buf);
            return -1;
        }
        got = (ssize_t)o.pos;
    }
    close(fd);
    *out = buf;
    return (long)got;
}

static void reject(text_sample_t *s, const char *rel, uint64_t off, const char *what)
{
    s->rejected++;
    if (!s->first_reject[0])
        snprintf(s->first_reject, sizeof s->first_reject, "file %.200s, line at offset %" PRIu64 ": %.280s",
                 rel, off, what);
}

/* The lines of one file, as the worker takes them (source_jsonl.c). */
static void sample_lines(text_sample_t *s, const uint8_t *buf, size_t len, int whole,
                         const char *rel, uint64_t want)
{
    const dpp_text_spec_t *t = s->t;
    const char *fields[1 + DPP_TEXT_MAX_WHERE] = {t->field};
    for (unsigned w = 0; w < t->nwhere; w++)
        fields[1 + w] = t->where_keys[w];
    dpp_json_value_t vals[1 + DPP_TEXT_MAX_WHERE];
    uint8_t *text = dpp_xmalloc(len + 1);
    size_t pos = 0;
    const uint8_t *line;
    size_t n;
    for (uint64_t k = 0; k < want; k++) {
        size_t at = pos;
        if (!dpp_jsonl_next_line(buf, len, &pos, &line, &n) || (!whole && pos >= len))
            break; /* the sample's last line may be cut: not judged */
        size_t lead = 0;
        while (lead < n && (line[lead] == ' ' || line[lead] == '\t'))
            lead++;
        if (lead == n)
            continue;
        s->lines++;
        size_t bad = 0;
        const char *why = NULL;
        char what[512];
        if (dpp_jsonl_parse(line, n, fields, 1 + t->nwhere, vals, &bad, &why) != 0) {
            snprintf(what, sizeof what, "%s at byte %zu of the line", why, bad);
            reject(s, rel, at, what);
            continue;
        }
        if (vals[0].kind != DPP_JSON_STRING) {
            char hint[384] = "";
            json_t *obj = json_loadb((const char *)line, n, 0, NULL);
            const char *keys[32];
            size_t nk = 0;
            for (void *it = json_object_iter(obj); it && nk < 32; it = json_object_iter_next(obj, it))
                keys[nk++] = json_object_iter_key(it);
            if (vals[0].kind == DPP_JSON_ABSENT && nk)
                dpp_suggest(hint, sizeof hint, t->field, keys, nk, "the line has", 12);
            json_decref(obj);
            snprintf(what, sizeof what, "%s \"%s\" (text.field)%s",
                     vals[0].kind == DPP_JSON_ABSENT ? "no field" : "not a string: field",
                     t->field, hint);
            reject(s, rel, at, what);
            continue;
        }
        int pass = 1;
        for (unsigned w = 0; pass && w < t->nwhere; w++) {
            size_t l = vals[1 + w].kind == DPP_JSON_STRING
                           ? dpp_jsonl_unescape(line, &vals[1 + w], text)
                           : (size_t)-1;
            pass = l == strlen(t->where_values[w]) && memcmp(text, t->where_values[w], l) == 0;
        }
        size_t l = pass ? dpp_jsonl_unescape(line, &vals[0], text) : 0;
        if (!pass || l < t->min_bytes || l > t->max_bytes)
            s->filtered++;
        else
            s->documents++;
    }
    free(text);
}

/* The tokenizer the spec names, under the data root the table is in, and
 * its special tokens; 0 or the number of errors printed. */
static size_t check_tokenizer(const dpp_spec_t *spec, const char *spec_path, const char *table)
{
    const dpp_text_spec_t *t = spec->text;
    size_t tl = strlen(table), sl = strlen(spec->table);
    if (tl <= sl || strcmp(table + tl - sl, spec->table) != 0 || table[tl - sl - 1] != '/') {
        printf("note: tokenizer %s not checked: --table does not end in the spec's table "
               "\"%s\", so its data root is not known\n",
               t->tokenizer_file, spec->table);
        return 0;
    }
    char path[8192], err[512];
    snprintf(path, sizeof path, "%.*s/%s", (int)(tl - sl - 1), table, t->tokenizer_file);
    dpp_bpe_t *b = NULL;
    int rc = t->tokenizer_hf ? dpp_bpe_load_hf(&b, path, err, sizeof err)
                             : dpp_bpe_load(&b, path, dpp_bpe_pattern(t->pattern), err, sizeof err);
    if (rc) {
        fprintf(stderr, "dppctl: %s: tokenizer.file: %s\n", spec_path, err);
        return 1;
    }
    size_t errors = 0;
    const char *names[2] = {t->eos, t->bos}, *what[2] = {"sequence.eos", "sequence.bos"};
    for (int k = 0; k < 2; k++) {
        if (names[k] == NULL)
            continue;
        int found = t->tokenizer_hf && dpp_bpe_special_id(b, names[k]) >= 0;
        for (unsigned i = 0; !t->tokenizer_hf && i < t->nspecials; i++)
            found |= strcmp(t->special_names[i], names[k]) == 0;
        const char *const *sn;
        const uint32_t *ids;
        size_t n = 0;
        if (!t->tokenizer_hf && t->nspecials == 0 && dpp_bpe_specials(t->pattern, &sn, &ids, &n) == 0)
            for (size_t i = 0; i < n; i++)
                found |= strcmp(sn[i], names[k]) == 0;
        if (!found) {
            fprintf(stderr,
                    "dppctl: %s: %s: the tokenizer %s has no special token \"%s\"; %s, or null "
                    "for none\n",
                    spec_path, what[k], t->tokenizer_file, names[k],
                    t->tokenizer_hf ? "name one of its added_tokens"
                                    : "give its id in tokenizer.specials");
            errors++;
        }
    }
    if (errors == 0)
        printf("%s: tokenizer %s: %zu tokens\n", spec_path, t->tokenizer_file, dpp_bpe_size(b));
    dpp_bpe_free(b);
    return errors;
}

int ctl_sample_text(const dpp_spec_t *spec, const char *spec_path, const char *dir,
                    const char *table, char **files, size_t nfiles, size_t k, unsigned records)
{
    text_sample_t s = {.t = spec->text};
    size_t errors = check_tokenizer(spec, spec_path, table);
    size_t tlen = strlen(table);
    uint64_t quota = (records + k - 1) / k;
    for (size_t i = 0; i < k && s.lines < records; i++) {
        size_t f = k == 1 ? 0 : i * (nfiles - 1) / (k - 1);
        const char *rel = files[f] + (strncmp(files[f], table, tlen) == 0 && files[f][tlen] == '/'
                                          ? tlen + 1
                                          : 0);
        uint8_t *buf = NULL;
        char why[256];
        long len = read_head(files[f], &buf, why, sizeof why);
        if (len < 0) {
            fprintf(stderr, "dppctl: %s: file %s: %s\n", spec_path, rel, why);
            errors++;
            continue;
        }
        sample_lines(&s, buf, (size_t)len, (size_t)len < SAMPLE_BYTES, rel,
                     quota < records - s.lines ? quota : records - s.lines);
        free(buf);
    }
    double ratio = s.lines ? (double)s.rejected / (double)s.lines : 0;
    if (s.documents == 0) {
        fprintf(stderr, "dppctl: %s: table %s: no document in %" PRIu64 " sampled lines of %zu "
                        "files (%" PRIu64 " rejected, %" PRIu64 " filtered)%s%s\n",
                spec_path, dir, s.lines, k, s.rejected, s.filtered,
                s.first_reject[0] ? "; the first rejected: " : "", s.first_reject);
        errors++;
    } else if (s.rejected > 0 && ratio > spec->max_reject_ratio) {
        fprintf(stderr,
                "dppctl: %s: %" PRIu64 " of the %" PRIu64 " sampled lines (%.1f%%) would be "
                "rejected, more than the spec's max_reject_ratio %g: a session would fail; the "
                "first: %s\n",
                spec_path, s.rejected, s.lines, 100.0 * ratio, spec->max_reject_ratio,
                s.first_reject);
        errors++;
    } else if (errors == 0) {
        printf("%s: table %s: %" PRIu64 " lines sampled from %zu of the table's %zu files: %" PRIu64
               " documents",
               spec_path, dir, s.lines, k, nfiles, s.documents);
        if (s.filtered)
            printf(", %" PRIu64 " filtered out by the text filters", s.filtered);
        if (s.rejected)
            printf(", %" PRIu64 " would be rejected (the first: %s)", s.rejected, s.first_reject);
        printf("\n");
    }
    return errors ? CTL_FAILED : CTL_OK;
}
