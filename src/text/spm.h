/* SPDX-License-Identifier: Apache-2.0 */
/* SentencePiece models (the `.model` files Llama 2, T5, Gemma and many
 * others ship: a serialized ModelProto), encoded to the ids
 * libsentencepiece gives:
 *
 *  - normalization by the model's precompiled charsmap (NFKC and its
 *    variants, or a user's rules: all arrive compiled into the model),
 *    none for "identity"; user-defined symbols are matched before
 *    normalizing and kept as written; whitespace as the model says
 *    (add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces);
 *  - Unigram (Viterbi over the pieces' scores) and BPE (merges of the
 *    adjacent pair of the highest score) models;
 *  - an unknown stretch is one unknown id, or with byte_fallback its bytes
 *    as <0xXX> pieces.
 *
 * Refused, each by name: WORD and CHAR models, treat_whitespace_as_suffix,
 * a normalizer other than "identity" without a charsmap. Text that is not
 * valid UTF-8 has each invalid byte read as U+FFFD, as libsentencepiece
 * does. Thread-safety: a built dpp_spm_t is read-only. */
#ifndef DPP_TEXT_SPM_H
#define DPP_TEXT_SPM_H

#include <stddef.h>
#include <stdint.h>

typedef struct dpp_spm dpp_spm_t;

/* Builds a tokenizer from the ModelProto bytes buf[0..len) (name is for
 * messages). Returns 0, DPP_ESPEC with a sentence naming the file and what
 * is wrong (a field cut short, a piece twice, an unsupported model type or
 * option), or -ENOMEM. */
int dpp_spm_new(dpp_spm_t **out, const char *name, const uint8_t *buf, size_t len, char *err,
                size_t errlen);
/* dpp_spm_new() from a file (at most DPP_BPE_MAX_FILE bytes, as every
 * tokenizer file); -errno with err naming it when unreadable. */
int dpp_spm_load(dpp_spm_t **out, const char *path, char *err, size_t errlen);
void dpp_spm_free(dpp_spm_t *sp);

/* Pieces in the model (ids are [0, size)). */
size_t dpp_spm_size(const dpp_spm_t *sp);

/* The id of the control or user-defined piece `name` ("</s>", "<s>"), or
 * -1 (a normal piece is text, not a special token). */
int64_t dpp_spm_special_id(const dpp_spm_t *sp, const char *name);

/* The model's control pieces as "<s> (1), </s> (2)" into buf (truncated
 * to len), for a message naming what there is; buf. */
const char *dpp_spm_controls(const dpp_spm_t *sp, char *buf, size_t len);

/* What encoding holds between calls, and its bounds: one thread's. Given
 * max_bytes (0: no bound), a text is normalized whole (its normalized bytes
 * at most 2 x max_bytes), gives at most max_bytes ids, and is encoded a
 * stretch at a time (spm.c: cut only where the ids are the whole text's;
 * a stretch of at most max_bytes / 8 bytes, at least
 * DPP_SPM_MIN_MAX_STRETCH): the state is about 12 bytes (Unigram) or 40
 * bytes (BPE) per byte of a stretch, kept for the next text. NULL when out
 * of memory. */
typedef struct dpp_spm_scratch dpp_spm_scratch_t;
#define DPP_SPM_MIN_MAX_STRETCH (256u << 10)
#define DPP_SPM_MAX_STRETCH ((size_t)1 << 31)
dpp_spm_scratch_t *dpp_spm_scratch_new(uint64_t max_bytes);
void dpp_spm_scratch_free(dpp_spm_scratch_t *x);

/* Where x's stretches end: at the first cut this many bytes on (default
 * 16 KiB; 1: at every cut; SIZE_MAX: the whole text at once). The ids are
 * the same whatever it is: tests compare them. */
void dpp_spm_scratch_set_stretch(dpp_spm_scratch_t *x, size_t bytes);

/* Appends the ids of text[0..len) to *ids (grown with realloc; *n ids,
 * room for *cap) with x's buffers and bounds. Returns 0, -ENOMEM, or
 * DPP_ETOOBIG with a phrase in err saying which bound the text passed
 * ("its 400 bytes of text normalize to more than ..."; for the caller to
 * put after the text's name); *ids then holds what it held. */
int dpp_spm_encode_scratch(const dpp_spm_t *sp, dpp_spm_scratch_t *x, const uint8_t *text,
                           size_t len, uint32_t **ids, size_t *n, size_t *cap, char *err,
                           size_t errlen);

/* dpp_spm_encode_scratch() with a scratch of its own, unbounded: for tests
 * and tools. Returns 0 or -ENOMEM. */
int dpp_spm_encode(const dpp_spm_t *sp, const uint8_t *text, size_t len, uint32_t **ids,
                   size_t *n, size_t *cap);

#endif
