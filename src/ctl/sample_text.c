/* SPDX-License-Identifier: Apache-2.0 */
/* dppctl validate --table for a text session: the tokenizer loads and has
 * the special tokens the spec names, and a sample of the table's documents
 * is read from the start of a few files by the reader the workers use
 * (src/text/docs.c): inputs that would be rejected (not JSON, no text, a
 * null text) and documents the text filters drop are counted; no document
 * at all, or rejects past max_reject_ratio, is an error. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "spec/spec.h"
#include "text/docs.h"
#include "text/tokenizer.h"

/* What a worker accepts as one line or one file read whole (its default
 * --max-record-mb). */
#define SAMPLE_MAX_DOC (64ull << 20)

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
    char path[8192], err[512], arg[64];
    snprintf(path, sizeof path, "%.*s/%s", (int)(tl - sl - 1), table, t->tokenizer_file);
    dpp_tokenizer_t *tk = NULL;
    int rc = dpp_tokenizer_load(&tk, dpp_tokenizer_arg(t, arg, sizeof arg), path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "dppctl: %s: tokenizer.file: %s\n", spec_path, err);
        return 1;
    }
    size_t errors = 0;
    const char *names[2] = {t->eos, t->bos}, *what[2] = {"sequence.eos", "sequence.bos"};
    for (int k = 0; k < 2; k++) {
        int64_t id;
        if (names[k] && dpp_tokenizer_special(tk, t, what[k], names[k], &id, err, sizeof err)) {
            fprintf(stderr, "dppctl: %s: %s\n", spec_path, err);
            errors++;
        }
    }
    if (errors == 0)
        printf("%s: tokenizer %s: %zu tokens\n", spec_path, t->tokenizer_file,
               dpp_tokenizer_size(tk));
    dpp_tokenizer_free(tk);
    return errors;
}

int ctl_sample_text(const dpp_spec_t *spec, const char *spec_path, const char *dir,
                    const char *table, char **files, size_t nfiles, size_t k, unsigned records)
{
    size_t errors = check_tokenizer(spec, spec_path, table);
    size_t tlen = strlen(table);
    uint64_t quota = (records + k - 1) / k, inputs = 0, documents = 0, filtered = 0, rejected = 0;
    char first_reject[512] = "";
    /* every reject counted, none ending the sample */
    dpp_spec_t counting = *spec;
    counting.on_corrupt_fail = 0;
    for (size_t i = 0; i < k && inputs < records; i++) {
        size_t f = k == 1 ? 0 : i * (nfiles - 1) / (k - 1);
        const char *rel = files[f] + (strncmp(files[f], table, tlen) == 0 && files[f][tlen] == '/'
                                          ? tlen + 1
                                          : 0);
        dpp_text_docs_t *d = NULL;
        char err[1024];
        int rc = dpp_text_docs_open(&d, &counting, files[f], NULL, rel, NULL, 0, 0, UINT64_MAX,
                                    SAMPLE_MAX_DOC, err, sizeof err);
        if (rc) {
            fprintf(stderr, "dppctl: %s: %s\n", spec_path, err);
            dpp_text_docs_close(d);
            errors++;
            continue;
        }
        uint64_t want = quota < records - inputs ? quota : records - inputs;
        const uint8_t *text;
        size_t len;
        for (;;) {
            const dpp_text_docs_counts_t *c = dpp_text_docs_counts(d);
            if (c->documents + c->filtered + dpp_rejects_total(&c->rejects) >= want ||
                (rc = dpp_text_docs_step(d, &text, &len)) != 1)
                break; /* blank inputs are not counted */
        }
        if (rc < 0 && dpp_text_docs_broken(d)) {
            fprintf(stderr, "dppctl: %s: file %s: %s\n", spec_path, rel, dpp_text_docs_why(d));
            errors++;
        }
        const dpp_text_docs_counts_t *c = dpp_text_docs_counts(d);
        uint64_t r = dpp_rejects_total(&c->rejects);
        documents += c->documents;
        filtered += c->filtered;
        rejected += r;
        inputs += c->documents + c->filtered + r;
        if (!first_reject[0] && c->reject_detail[0])
            snprintf(first_reject, sizeof first_reject, "%s", c->reject_detail);
        dpp_text_docs_close(d);
    }
    const char *unit = spec->format == DPP_FORMAT_PARQUET ? "rows"
                       : spec->format == DPP_FORMAT_TEXT && spec->text->unit == DPP_TEXT_UNIT_FILE
                           ? "files"
                           : "lines";
    double ratio = inputs ? (double)rejected / (double)inputs : 0;
    if (documents == 0 && errors == 0) {
        fprintf(stderr, "dppctl: %s: table %s: no document in %" PRIu64 " sampled %s of %zu "
                        "files (%" PRIu64 " rejected, %" PRIu64 " filtered)%s%s\n",
                spec_path, dir, inputs, unit, k, rejected, filtered,
                first_reject[0] ? "; the first rejected: " : "", first_reject);
        errors++;
    } else if (rejected > 0 && ratio > spec->max_reject_ratio) {
        fprintf(stderr,
                "dppctl: %s: %" PRIu64 " of the %" PRIu64 " sampled %s (%.1f%%) would be "
                "rejected, more than the spec's max_reject_ratio %g: a session would fail; the "
                "first: %s\n",
                spec_path, rejected, inputs, unit, 100.0 * ratio, spec->max_reject_ratio,
                first_reject);
        errors++;
    } else if (errors == 0) {
        printf("%s: table %s: %" PRIu64 " %s sampled from %zu of the table's %zu files: %" PRIu64
               " documents",
               spec_path, dir, inputs, unit, k, nfiles, documents);
        if (filtered)
            printf(", %" PRIu64 " filtered out by the text filters", filtered);
        if (rejected)
            printf(", %" PRIu64 " would be rejected (the first: %s)", rejected, first_reject);
        printf("\n");
    }
    return errors ? CTL_FAILED : CTL_OK;
}
