/* SPDX-License-Identifier: Apache-2.0 */
/* The tokenizer a text session's spec names (tokenizer.kind): a tiktoken
 * rank file or a Hugging Face tokenizer.json (byte-level BPE, bpe.h), or a
 * SentencePiece .model (spm.h), behind one interface, so the worker's text
 * source and dppctl validate load, look up special tokens and encode the
 * same way whatever the kind. Thread-safety: a built dpp_tokenizer_t is
 * read-only; each thread encodes with its own scratch. */
#ifndef DPP_TEXT_TOKENIZER_H
#define DPP_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "spec/spec.h"

typedef struct dpp_tokenizer dpp_tokenizer_t;
typedef struct dpp_tokenizer_scratch dpp_tokenizer_scratch_t;

/* A string naming what t's tokenizer settings load ("tiktoken:cl100k_base",
 * "huggingface", "sentencepiece"): two specs with equal strings load equal
 * tokenizers from one file, so it keys a cache. */
const char *dpp_tokenizer_arg(const dpp_text_spec_t *t, char *buf, size_t len);

/* Builds the tokenizer `arg` (dpp_tokenizer_arg) names from the file's
 * bytes buf[0..len) (name for messages), or from the file at path.
 * Returns 0, DPP_ESPEC with a sentence naming the file and what is wrong,
 * -errno for an unreadable file, or -ENOMEM. */
int dpp_tokenizer_new(dpp_tokenizer_t **out, const char *arg, const char *name,
                      const uint8_t *buf, size_t len, char *err, size_t errlen);
int dpp_tokenizer_load(dpp_tokenizer_t **out, const char *arg, const char *path, char *err,
                       size_t errlen);
void dpp_tokenizer_free(dpp_tokenizer_t *tk);

/* Ids are [0, size). */
size_t dpp_tokenizer_size(const dpp_tokenizer_t *tk);

/* The id of the special token `name` that t's spec path `what`
 * ("sequence.eos") names: a Hugging Face added token, a SentencePiece
 * control or user-defined piece ("</s>"), or for tiktoken one of
 * tokenizer.specials (default: the encoding's). 0 with *id, or DPP_ESPEC
 * with a sentence saying what to name instead. */
int dpp_tokenizer_special(const dpp_tokenizer_t *tk, const dpp_text_spec_t *t, const char *what,
                          const char *name, int64_t *id, char *err, size_t errlen);

/* One thread's encoding buffers, kept from document to document, and the
 * bound of what encoding one document may hold (max_bytes, the worker's
 * document limit: a SentencePiece model's normalized text of at most twice
 * it, at most that many ids, stretches of an eighth of it; spm.h; 0:
 * none). A byte-level BPE document's ids and state follow its own bytes,
 * which the reader bounds. NULL when out of memory. */
dpp_tokenizer_scratch_t *dpp_tokenizer_scratch_new(const dpp_tokenizer_t *tk, uint64_t max_bytes);
void dpp_tokenizer_scratch_free(dpp_tokenizer_scratch_t *s);

/* Appends the ids of text[0..len) to *ids (grown with realloc; *n ids, room
 * for *cap). Returns 0, -ENOMEM, or DPP_ETOOBIG with a phrase in why
 * saying what the text passed (to follow the document's name); *ids then
 * holds what it held. */
int dpp_tokenizer_encode(const dpp_tokenizer_t *tk, dpp_tokenizer_scratch_t *s,
                         const uint8_t *text, size_t len, uint32_t **ids, size_t *n, size_t *cap,
                         char *why, size_t whylen);

#endif
