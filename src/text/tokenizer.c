/* SPDX-License-Identifier: Apache-2.0 */
/* One interface over the byte-level BPE (bpe.h) and SentencePiece (spm.h)
 * tokenizers: tokenizer.h. */
#include "text/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "text/bpe.h"
#include "text/spm.h"

struct dpp_tokenizer {
    dpp_bpe_t *bpe; /* tiktoken or Hugging Face, or */
    dpp_spm_t *spm; /* SentencePiece */
};

struct dpp_tokenizer_scratch {
    dpp_bpe_scratch_t *bpe; /* tiktoken and Hugging Face, or */
    dpp_spm_scratch_t *spm; /* SentencePiece */
};

const char *dpp_tokenizer_arg(const dpp_text_spec_t *t, char *buf, size_t len)
{
    switch (t->tokenizer_kind) {
    case DPP_TOKENIZER_HUGGINGFACE:
        return "huggingface";
    case DPP_TOKENIZER_SENTENCEPIECE:
        return "sentencepiece";
    case DPP_TOKENIZER_TIKTOKEN:
        break;
    }
    snprintf(buf, len, "tiktoken:%s", t->pattern ? t->pattern : "");
    return buf;
}

/* Builds from buf, or from path when buf is NULL. */
static int build(dpp_tokenizer_t **out, const char *arg, const char *name, const uint8_t *buf,
                 size_t len, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    dpp_tokenizer_t *tk = calloc(1, sizeof *tk);
    if (tk == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "out of memory");
    int rc;
    if (strcmp(arg, "sentencepiece") == 0)
        rc = buf ? dpp_spm_new(&tk->spm, name, buf, len, err, errlen)
                 : dpp_spm_load(&tk->spm, path, err, errlen);
    else if (strcmp(arg, "huggingface") == 0)
        rc = buf ? dpp_bpe_new_hf(&tk->bpe, name, buf, len, err, errlen)
                 : dpp_bpe_load_hf(&tk->bpe, path, err, errlen);
    else if (strncmp(arg, "tiktoken:", 9) == 0 && dpp_bpe_pattern(arg + 9) != NULL)
        rc = buf ? dpp_bpe_new(&tk->bpe, name, buf, len, dpp_bpe_pattern(arg + 9), err, errlen)
                 : dpp_bpe_load(&tk->bpe, path, dpp_bpe_pattern(arg + 9), err, errlen);
    else
        rc = dpp_errf(DPP_EINVAL, err, errlen, "no tokenizer kind \"%s\"", arg);
    if (rc) {
        dpp_tokenizer_free(tk);
        return rc;
    }
    *out = tk;
    return 0;
}

int dpp_tokenizer_new(dpp_tokenizer_t **out, const char *arg, const char *name,
                      const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    static const uint8_t none[1];
    return build(out, arg, name, buf ? buf : none, len, NULL, err, errlen);
}

int dpp_tokenizer_load(dpp_tokenizer_t **out, const char *arg, const char *path, char *err,
                       size_t errlen)
{
    return build(out, arg, path, NULL, 0, path, err, errlen);
}

void dpp_tokenizer_free(dpp_tokenizer_t *tk)
{
    if (tk == NULL)
        return;
    dpp_bpe_free(tk->bpe);
    dpp_spm_free(tk->spm);
    free(tk);
}

size_t dpp_tokenizer_size(const dpp_tokenizer_t *tk)
{
    return tk->spm ? dpp_spm_size(tk->spm) : dpp_bpe_size(tk->bpe);
}

int dpp_tokenizer_special(const dpp_tokenizer_t *tk, const dpp_text_spec_t *t, const char *what,
                          const char *name, int64_t *id, char *err, size_t errlen)
{
    if (tk->spm) {
        if ((*id = dpp_spm_special_id(tk->spm, name)) >= 0)
            return 0;
        char controls[256];
        return dpp_errf(DPP_ESPEC, err, errlen,
                        "%s: the SentencePiece model %s has no control or user-defined piece "
                        "\"%s\"; name one of its control pieces (%s), or null for none",
                        what, t->tokenizer_file, name,
                        dpp_spm_controls(tk->spm, controls, sizeof controls));
    }
    if (t->tokenizer_kind == DPP_TOKENIZER_HUGGINGFACE) {
        if ((*id = dpp_bpe_special_id(tk->bpe, name)) >= 0)
            return 0;
        return dpp_errf(DPP_ESPEC, err, errlen,
                        "%s: the tokenizer %s has no added token \"%s\"; name one of the "
                        "\"added_tokens\" of the file, or null for none",
                        what, t->tokenizer_file, name);
    }
    for (unsigned i = 0; i < t->nspecials; i++) {
        if (strcmp(t->special_names[i], name) == 0) {
            *id = t->special_ids[i];
            return 0;
        }
    }
    const char *const *names;
    const uint32_t *ids;
    size_t n = 0;
    if (t->nspecials == 0 && dpp_bpe_specials(t->pattern, &names, &ids, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(names[i], name) == 0) {
                *id = ids[i];
                return 0;
            }
        }
    }
    return dpp_errf(DPP_ESPEC, err, errlen,
                    "%s: no special token \"%s\" %s; give its id in tokenizer.specials (e.g. "
                    "{\"%s\": %zu}), or null for none",
                    what, name,
                    t->nspecials ? "in tokenizer.specials" : "among the encoding's specials",
                    name, dpp_bpe_size(tk->bpe));
}

dpp_tokenizer_scratch_t *dpp_tokenizer_scratch_new(const dpp_tokenizer_t *tk, uint64_t max_bytes)
{
    dpp_tokenizer_scratch_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    if ((tk->bpe && (s->bpe = dpp_bpe_scratch_new(tk->bpe)) == NULL) ||
        (tk->spm && (s->spm = dpp_spm_scratch_new(max_bytes)) == NULL)) {
        dpp_tokenizer_scratch_free(s);
        return NULL;
    }
    return s;
}

void dpp_tokenizer_scratch_free(dpp_tokenizer_scratch_t *s)
{
    if (s == NULL)
        return;
    dpp_bpe_scratch_free(s->bpe);
    dpp_spm_scratch_free(s->spm);
    free(s);
}

int dpp_tokenizer_encode(const dpp_tokenizer_t *tk, dpp_tokenizer_scratch_t *s,
                         const uint8_t *text, size_t len, uint32_t **ids, size_t *n, size_t *cap,
                         char *why, size_t whylen)
{
    if (tk->spm)
        return dpp_spm_encode_scratch(tk->spm, s->spm, text, len, ids, n, cap, why, whylen);
    return dpp_bpe_encode(tk->bpe, s->bpe, text, len, ids, n, cap);
}
