/* SPDX-License-Identifier: Apache-2.0 */
/* Sequence packing for language models: the token ids of a split's
 * documents, in order, become fixed-length training sequences. A worker's
 * count pass and its real run call it on the same documents, so the output
 * is a function of the input alone: the same documents give the same
 * sequences, bit for bit, however add() and next() calls interleave.
 *
 * A document's item = [bos] + tokens + [eos] (bos/eos only when >= 0).
 * Within an item, the label of a position is the item's next token; the
 * label at the item's last token is -100 (no label ever crosses a
 * document). position_ids = index of the token within its item (0 at bos or
 * first token), continuing when an item is cut across sequences. Padding:
 * input_ids = pad, labels = -100, position_ids = 0, and the padding is its
 * own last segment in cu_seqlens (so cu_seqlens always ends at L). Each
 * maximal run of one item's tokens inside a sequence is one segment:
 * cu_seqlens lists segment boundaries.
 *
 * - concat: the items are joined into one stream and cut every L tokens;
 *   every token appears exactly once. A sequence whose last position's
 *   label needs the next item token (an item continuing into the next
 *   sequence) is only ready once that token has been added — the label at
 *   a cut is the next token of the same document, which lies in the next
 *   sequence. finish() pads the last partial sequence (if any tokens are
 *   pending). No empty sequence is ever produced.
 * - best_fit: documents are gathered into windows of `window` documents
 *   (the last window holds the rest at finish()). In a window, an item
 *   longer than L is cut into pieces of exactly L (in order; each becomes a
 *   sequence on its own, output first) and its remainder (if nonzero) is an
 *   item; labels at a cut are the next token of the document as in concat.
 *   Then the items are sorted by length decreasing (ties: arrival order)
 *   and each goes into the open bin with the least room that still fits it
 *   (ties: the earliest opened bin), else a new bin. Bins are emitted in
 *   the order they were opened, items inside a bin in placement order, each
 *   bin padded to L. Best-fit decreasing.
 *
 * A document that adds nothing (0 tokens, no bos/eos) makes no segment, is
 * counted in no sequence's documents and takes no place in a window.
 *
 * Memory: add() copies a document whole, since its ids are the caller's.
 * concat holds the unfinished sequence (< L tokens) and the documents added
 * since next() last returned 0, so about 2 sequences of tokens when
 * documents are no longer than L; best_fit holds the window being gathered
 * (at most `window` documents) and the window whose sequences next() has
 * not yet handed out. Plus 4 arrays of L ids for the sequence handed out,
 * and for best_fit 4 bytes per room value (L + 1) to find the best bin. */
#ifndef DPP_TEXT_PACK_H
#define DPP_TEXT_PACK_H

#include <stddef.h>
#include <stdint.h>

#define DPP_PACK_MAX_LENGTH (1u << 20) /* tokens per sequence */
#define DPP_PACK_NO_LABEL (-100)       /* the label of positions that predict nothing */

typedef enum dpp_pack_mode { DPP_PACK_CONCAT = 0, DPP_PACK_BEST_FIT = 1 } dpp_pack_mode_t;

/* Ids (bos, eos, pad and every token) are 0 .. INT32_MAX: the sequences
 * hold them as int32, as trainers take them. */
typedef struct dpp_pack_config {
    dpp_pack_mode_t mode;
    uint32_t length; /* L, tokens per sequence, 1 .. DPP_PACK_MAX_LENGTH */
    int64_t bos;     /* id put before each document's tokens, or -1: none */
    int64_t eos;     /* id put after each document's tokens, or -1: none */
    uint32_t pad;    /* id of padding positions in input_ids */
    uint32_t window; /* best_fit: documents packed together (>= 1); concat ignores it */
} dpp_pack_config_t;

/* One sequence. Arrays owned by the packer, valid until the next call on it. */
typedef struct dpp_sequence {
    uint32_t length;             /* L */
    const int32_t *input_ids;    /* [L] */
    const int32_t *labels;       /* [L] next token of the same document, or -100 */
    const int32_t *position_ids; /* [L] */
    const int32_t *cu_seqlens;   /* [nsegments + 1], 0 .. L, strictly increasing */
    uint32_t nsegments;
    uint32_t padding;   /* padded positions (at the end of the sequence) */
    uint32_t documents; /* documents whose last token is in this sequence */
} dpp_sequence_t;

typedef struct dpp_packer dpp_packer_t;

/* A packer for cfg (copied). Returns 0 with *out to be freed with
 * dpp_packer_free(), DPP_EINVAL for a bad config (an unknown mode, length 0
 * or above DPP_PACK_MAX_LENGTH, best_fit with window 0, bos or eos neither
 * -1 nor an id, pad no id), or -ENOMEM. */
int dpp_packer_new(dpp_packer_t **out, const dpp_pack_config_t *cfg);
void dpp_packer_free(dpp_packer_t *p);

/* Drops everything added and not yet handed out, and the finish() mark:
 * the packer is ready for the next split, its memory kept. */
void dpp_packer_reset(dpp_packer_t *p);

/* One document's tokens ids[0..n) (without bos/eos: the packer adds them;
 * ids is read during the call only). A document with 0 tokens and no
 * bos/eos adds nothing. Returns 0, -ENOMEM, or DPP_EINVAL for an id above
 * INT32_MAX, an item of more than INT32_MAX tokens, or a call after
 * finish() without reset(); on an error nothing is added. */
int dpp_packer_add(dpp_packer_t *p, const uint32_t *ids, size_t n);

/* The end of the split: everything added becomes sequences (the last one
 * padded). Further calls are no-ops until reset(). Returns 0, or -ENOMEM
 * (best_fit's last window: nothing changed, finish() may be called again). */
int dpp_packer_finish(dpp_packer_t *p);

/* 1 with *seq the next finished sequence, 0 when none is ready (more input,
 * or finish(), is needed). Sequences come out in a fixed order. */
int dpp_packer_next(dpp_packer_t *p, dpp_sequence_t *seq);

#endif
