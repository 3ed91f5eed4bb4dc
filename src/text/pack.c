/* SPDX-License-Identifier: Apache-2.0 */
/* Sequence packing (pack.h). Items are copied into one arena; a plan of
 * sequences, each a linked list of pieces (runs of one item's tokens in the
 * arena), is made as input arrives, and next() writes a sequence's arrays
 * from its pieces. best_fit finds a window's best bin in O(log L) with a
 * bitmap of the rooms that some open bin has and, per room, a heap of its
 * bins by opening order. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "text/pack.h"

#define NONE SIZE_MAX
#define NO_BIN UINT32_MAX
/* Levels of the room bitmap: 64^4 bits exceed DPP_PACK_MAX_LENGTH + 1. */
#define ROOM_LEVELS 4

/* Tokens arena[off, off + len) of one item, the first at position pos. */
typedef struct piece {
    size_t off;
    size_t next; /* the next piece of its sequence, or NONE */
    uint32_t len;
    int32_t pos;
    int last; /* holds its item's last token: label -100 there, a document ends */
} piece_t;

typedef struct seq {
    size_t first, last;   /* its pieces, in order; NONE when it has none */
    uint32_t room;        /* positions not yet taken */
    uint32_t left, right; /* best_fit: children in its room's heap (window bin numbers) */
} seq_t;

/* A document of best_fit's window being gathered: its item in the arena. */
typedef struct doc {
    size_t off;
    uint32_t len;
} doc_t;

struct dpp_packer {
    dpp_pack_config_t cfg;
    int finished;

    int32_t *arena; /* items as added, bos and eos in place */
    size_t arena_n, arena_cap;
    piece_t *pieces;
    size_t npieces, pieces_cap;
    /* seqs[0, nseqs) are finished and seqs[cursor] is the next handed out;
     * concat's unfinished sequence is seqs[nseqs] when open is set */
    seq_t *seqs;
    size_t nseqs, seqs_cap, cursor;
    int open;

    doc_t *docs; /* best_fit: the window being gathered */
    size_t ndocs, docs_cap;
    size_t window_pieces; /* pieces its documents cut into, at most */
    uint64_t *order;      /* best_fit: (L - len) << 32 | item, to sort items */
    size_t order_cap;
    uint32_t *room_heap; /* [L + 1]: the first bin of a heap by room, or NO_BIN */
    uint64_t *room_bits[ROOM_LEVELS];
    size_t room_words[ROOM_LEVELS];

    int32_t *input_ids, *labels, *position_ids, *cu_seqlens;
};

/* a with room for need elements of size bytes (capacity *cap), doubled as
 * it grows; NULL when out of memory (a is unchanged then). */
static void *grow(void *a, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap && *cap)
        return a;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : 2 * c;
    if (c > SIZE_MAX / size)
        return NULL;
    void *q = realloc(a, c * size);
    if (q)
        *cap = c;
    return q;
}

static int reserve(dpp_packer_t *p, size_t tokens, size_t pieces, size_t seqs)
{
    int32_t *arena = grow(p->arena, &p->arena_cap, p->arena_n + tokens, sizeof *arena);
    if (arena == NULL)
        return -ENOMEM;
    p->arena = arena;
    piece_t *pc = grow(p->pieces, &p->pieces_cap, p->npieces + pieces, sizeof *pc);
    if (pc == NULL)
        return -ENOMEM;
    p->pieces = pc;
    seq_t *s = grow(p->seqs, &p->seqs_cap, p->nseqs + seqs, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    p->seqs = s;
    return 0;
}

int dpp_packer_new(dpp_packer_t **out, const dpp_pack_config_t *cfg)
{
    *out = NULL;
    if ((cfg->mode != DPP_PACK_CONCAT && cfg->mode != DPP_PACK_BEST_FIT) || cfg->length == 0 ||
        cfg->length > DPP_PACK_MAX_LENGTH || (cfg->mode == DPP_PACK_BEST_FIT && cfg->window == 0) ||
        cfg->bos < -1 || cfg->bos > INT32_MAX || cfg->eos < -1 || cfg->eos > INT32_MAX ||
        cfg->pad > INT32_MAX)
        return DPP_EINVAL;
    dpp_packer_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->cfg = *cfg;
    size_t L = cfg->length;
    p->input_ids = malloc(L * sizeof *p->input_ids);
    p->labels = malloc(L * sizeof *p->labels);
    p->position_ids = malloc(L * sizeof *p->position_ids);
    p->cu_seqlens = malloc((L + 1) * sizeof *p->cu_seqlens);
    if (!p->input_ids || !p->labels || !p->position_ids || !p->cu_seqlens)
        goto nomem;
    if (cfg->mode == DPP_PACK_BEST_FIT) {
        p->room_heap = malloc((L + 1) * sizeof *p->room_heap);
        if (p->room_heap == NULL)
            goto nomem;
        for (size_t r = 0; r <= L; r++)
            p->room_heap[r] = NO_BIN;
        size_t bits = L + 1;
        for (int k = 0; k < ROOM_LEVELS; k++) {
            p->room_words[k] = (bits + 63) / 64;
            p->room_bits[k] = calloc(p->room_words[k], sizeof *p->room_bits[k]);
            if (p->room_bits[k] == NULL)
                goto nomem;
            bits = p->room_words[k];
        }
    }
    *out = p;
    return 0;
nomem:
    dpp_packer_free(p);
    return -ENOMEM;
}

void dpp_packer_free(dpp_packer_t *p)
{
    if (p == NULL)
        return;
    free(p->arena);
    free(p->pieces);
    free(p->seqs);
    free(p->docs);
    free(p->order);
    free(p->room_heap);
    for (int k = 0; k < ROOM_LEVELS; k++)
        free(p->room_bits[k]);
    free(p->input_ids);
    free(p->labels);
    free(p->position_ids);
    free(p->cu_seqlens);
    free(p);
}

void dpp_packer_reset(dpp_packer_t *p)
{
    /* the room heaps and bitmap are emptied at the end of every window */
    p->finished = 0;
    p->arena_n = p->npieces = p->nseqs = p->cursor = 0;
    p->open = 0;
    p->ndocs = p->window_pieces = 0;
}

/* Once every finished sequence is handed out, what they alone used is
 * dropped: the arena keeps the open sequence's items (concat) or the window
 * being gathered (best_fit), and the plan only the open sequence. Between
 * the two the plan is not touched, so its indices stay valid. */
static void reclaim(dpp_packer_t *p)
{
    if (p->cursor < p->nseqs)
        return;
    size_t base = p->npieces, keep = p->arena_n;
    if (p->open) {
        base = p->seqs[p->nseqs].first;
        keep = p->pieces[base].off;
    } else if (p->ndocs) {
        keep = p->docs[0].off;
    }
    if (base == 0 && keep == 0)
        return;
    p->npieces -= base;
    memmove(p->pieces, p->pieces + base, p->npieces * sizeof *p->pieces);
    for (size_t k = 0; k < p->npieces; k++) {
        piece_t *pc = &p->pieces[k];
        pc->off -= keep;
        if (pc->next != NONE)
            pc->next -= base;
    }
    if (p->open) {
        seq_t s = p->seqs[p->nseqs];
        s.first -= base;
        s.last -= base;
        p->seqs[0] = s;
    }
    for (size_t d = 0; d < p->ndocs; d++)
        p->docs[d].off -= keep;
    p->arena_n -= keep;
    memmove(p->arena, p->arena + keep, p->arena_n * sizeof *p->arena);
    p->nseqs = p->cursor = 0;
}

static void seq_append(dpp_packer_t *p, seq_t *s, size_t off, uint32_t len, int32_t pos, int last)
{
    size_t k = p->npieces++;
    p->pieces[k] = (piece_t){.off = off, .next = NONE, .len = len, .pos = pos, .last = last};
    if (s->first == NONE)
        s->first = k;
    else
        p->pieces[s->last].next = k;
    s->last = k;
    s->room -= len;
}

static seq_t *seq_open(dpp_packer_t *p)
{
    seq_t *s = &p->seqs[p->nseqs];
    *s = (seq_t){
        .first = NONE, .last = NONE, .room = p->cfg.length, .left = NO_BIN, .right = NO_BIN};
    return s;
}

/* concat: the item arena[off, off + len) joins the stream. */
static void concat_item(dpp_packer_t *p, size_t off, uint32_t len)
{
    uint32_t done = 0;
    while (done < len) {
        if (!p->open) {
            seq_open(p);
            p->open = 1;
        }
        seq_t *s = &p->seqs[p->nseqs];
        uint32_t m = len - done < s->room ? len - done : s->room;
        seq_append(p, s, off + done, m, (int32_t)done, done + m == len);
        done += m;
        /* Full is finished: the item is in the arena whole, so the label at
         * a cut (the next token) is known already. */
        if (s->room == 0) {
            p->nseqs++;
            p->open = 0;
        }
    }
}

/* ---- best_fit's bins: the rooms in use, and per room a heap of bins ---- */

static void room_set(dpp_packer_t *p, size_t r)
{
    for (int k = 0; k < ROOM_LEVELS; k++, r >>= 6)
        p->room_bits[k][r >> 6] |= (uint64_t)1 << (r & 63);
}

static void room_clear(dpp_packer_t *p, size_t r)
{
    for (int k = 0; k < ROOM_LEVELS; k++, r >>= 6) {
        p->room_bits[k][r >> 6] &= ~((uint64_t)1 << (r & 63));
        if (p->room_bits[k][r >> 6])
            break;
    }
}

/* The least room >= r that some open bin has, or NONE. */
static size_t room_succ(const dpp_packer_t *p, int k, size_t r)
{
    if (k == ROOM_LEVELS)
        return NONE;
    size_t w = r >> 6;
    if (w >= p->room_words[k])
        return NONE;
    uint64_t m = p->room_bits[k][w] & (~(uint64_t)0 << (r & 63));
    if (m == 0) {
        w = room_succ(p, k + 1, w + 1);
        if (w == NONE)
            return NONE;
        m = p->room_bits[k][w];
    }
    return w << 6 | (size_t)__builtin_ctzll(m);
}

/* Skew heap merge of bins a and b (numbers in bins[], the lower first out,
 * which is the earlier opened); iterative, so a degenerate heap does not
 * recurse deeply. */
static uint32_t heap_merge(seq_t *bins, uint32_t a, uint32_t b)
{
    uint32_t root = NO_BIN, *link = &root;
    while (a != NO_BIN && b != NO_BIN) {
        if (b < a) {
            uint32_t t = a;
            a = b;
            b = t;
        }
        *link = a;
        uint32_t right = bins[a].right;
        bins[a].right = bins[a].left;
        link = &bins[a].left;
        a = right;
    }
    *link = a != NO_BIN ? a : b;
    return root;
}

static void bin_push(dpp_packer_t *p, seq_t *bins, uint32_t b)
{
    uint32_t r = bins[b].room;
    bins[b].left = bins[b].right = NO_BIN;
    if (p->room_heap[r] == NO_BIN)
        room_set(p, r);
    p->room_heap[r] = heap_merge(bins, p->room_heap[r], b);
}

static uint32_t bin_pop(dpp_packer_t *p, seq_t *bins, uint32_t r)
{
    uint32_t b = p->room_heap[r];
    p->room_heap[r] = heap_merge(bins, bins[b].left, bins[b].right);
    if (p->room_heap[r] == NO_BIN)
        room_clear(p, r);
    return b;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* best_fit: room in the plan and the sort for a window of ndocs documents
 * that cut into at most pieces pieces. */
static int window_reserve(dpp_packer_t *p, size_t ndocs, size_t pieces)
{
    if (reserve(p, 0, pieces, pieces))
        return -ENOMEM;
    uint64_t *o = grow(p->order, &p->order_cap, ndocs, sizeof *o);
    if (o == NULL)
        return -ENOMEM;
    p->order = o;
    return 0;
}

/* best_fit: the window gathered becomes sequences; window_reserve() made
 * room, so it cannot fail. */
static void window_pack(dpp_packer_t *p)
{
    uint32_t L = p->cfg.length;
    for (size_t d = 0; d < p->ndocs; d++) {
        const doc_t *doc = &p->docs[d];
        if (doc->len <= L)
            continue;
        for (uint32_t done = 0; doc->len - done >= L; done += L) {
            seq_t *s = seq_open(p);
            seq_append(p, s, doc->off + done, L, (int32_t)done, doc->len - done == L);
            p->nseqs++;
        }
    }
    size_t nitems = 0;
    for (size_t d = 0; d < p->ndocs; d++) {
        const doc_t *doc = &p->docs[d];
        uint32_t len = doc->len <= L ? doc->len : doc->len % L;
        if (len) {
            p->order[nitems] = (uint64_t)(L - len) << 32 | nitems;
            nitems++;
        }
    }
    /* the keys are distinct: length decreasing, then arrival */
    qsort(p->order, nitems, sizeof *p->order, cmp_u64);

    /* the items' pieces, made in arrival order, placed in sorted order */
    size_t item0 = p->npieces;
    for (size_t d = 0; d < p->ndocs; d++) {
        const doc_t *doc = &p->docs[d];
        uint32_t len = doc->len <= L ? doc->len : doc->len % L;
        if (len)
            p->pieces[p->npieces++] = (piece_t){.off = doc->off + doc->len - len,
                                                .next = NONE,
                                                .len = len,
                                                .pos = (int32_t)(doc->len - len),
                                                .last = 1};
    }
    seq_t *bins = p->seqs + p->nseqs;
    uint32_t nbins = 0;
    for (size_t i = 0; i < nitems; i++) {
        size_t k = item0 + (uint32_t)p->order[i];
        uint32_t len = p->pieces[k].len;
        size_t r = room_succ(p, 0, len);
        uint32_t b;
        if (r != NONE) {
            b = bin_pop(p, bins, (uint32_t)r);
        } else {
            b = nbins++;
            bins[b] = (seq_t){.first = NONE, .last = NONE, .room = L};
        }
        seq_t *s = &bins[b];
        if (s->first == NONE)
            s->first = k;
        else
            p->pieces[s->last].next = k;
        s->last = k;
        s->room -= len;
        if (s->room)
            bin_push(p, bins, b);
    }
    for (uint32_t b = 0; b < nbins; b++) {
        if (bins[b].room && p->room_heap[bins[b].room] != NO_BIN) {
            p->room_heap[bins[b].room] = NO_BIN;
            room_clear(p, bins[b].room);
        }
    }
    p->nseqs += nbins;
    p->ndocs = p->window_pieces = 0;
}

int dpp_packer_add(dpp_packer_t *p, const uint32_t *ids, size_t n)
{
    const dpp_pack_config_t *c = &p->cfg;
    if (p->finished)
        return DPP_EINVAL;
    size_t len = n + (c->bos >= 0) + (c->eos >= 0);
    if (n > INT32_MAX || len > INT32_MAX)
        return DPP_EINVAL;
    if (len == 0)
        return 0;
    reclaim(p);
    uint32_t L = c->length;
    /* pieces of the item, at most: concat's may begin in a sequence's last
     * position and end in another's first */
    size_t cuts = len / L + 2;
    int best_fit = c->mode == DPP_PACK_BEST_FIT;
    if (best_fit) {
        doc_t *d = grow(p->docs, &p->docs_cap, p->ndocs + 1, sizeof *d);
        if (d == NULL)
            return -ENOMEM;
        p->docs = d;
        if (reserve(p, len, 0, 0))
            return -ENOMEM;
    } else if (reserve(p, len, cuts, cuts + 1)) {
        return -ENOMEM;
    }

    /* the item goes in above arena_n and counts only once whole and valid */
    int32_t *t = p->arena + p->arena_n;
    if (c->bos >= 0)
        *t++ = (int32_t)c->bos;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] > INT32_MAX)
            return DPP_EINVAL;
        t[i] = (int32_t)ids[i];
    }
    if (c->eos >= 0)
        t[n] = (int32_t)c->eos;

    if (!best_fit) {
        size_t off = p->arena_n;
        p->arena_n += len;
        concat_item(p, off, (uint32_t)len);
        return 0;
    }
    if (p->ndocs + 1 == c->window && window_reserve(p, p->ndocs + 1, p->window_pieces + cuts))
        return -ENOMEM;
    p->docs[p->ndocs++] = (doc_t){.off = p->arena_n, .len = (uint32_t)len};
    p->window_pieces += cuts;
    p->arena_n += len;
    if (p->ndocs == c->window)
        window_pack(p);
    return 0;
}

int dpp_packer_finish(dpp_packer_t *p)
{
    if (p->finished)
        return 0;
    if (p->cfg.mode == DPP_PACK_BEST_FIT && p->ndocs) {
        if (window_reserve(p, p->ndocs, p->window_pieces))
            return -ENOMEM;
        window_pack(p);
    }
    if (p->open) {
        p->nseqs++;
        p->open = 0;
    }
    p->finished = 1;
    return 0;
}

int dpp_packer_next(dpp_packer_t *p, dpp_sequence_t *seq)
{
    if (p->cursor == p->nseqs)
        return 0;
    const seq_t *s = &p->seqs[p->cursor++];
    uint32_t L = p->cfg.length, j = 0, nseg = 0, docs = 0;
    p->cu_seqlens[0] = 0;
    for (size_t k = s->first; k != NONE; k = p->pieces[k].next) {
        const piece_t *pc = &p->pieces[k];
        const int32_t *a = p->arena + pc->off;
        memcpy(p->input_ids + j, a, pc->len * sizeof *a);
        memcpy(p->labels + j, a + 1, (pc->len - 1) * sizeof *a);
        p->labels[j + pc->len - 1] = pc->last ? DPP_PACK_NO_LABEL : a[pc->len];
        for (uint32_t i = 0; i < pc->len; i++)
            p->position_ids[j + i] = pc->pos + (int32_t)i;
        j += pc->len;
        p->cu_seqlens[++nseg] = (int32_t)j;
        docs += pc->last;
    }
    uint32_t padding = L - j;
    if (padding) {
        for (uint32_t i = j; i < L; i++) {
            p->input_ids[i] = (int32_t)p->cfg.pad;
            p->labels[i] = DPP_PACK_NO_LABEL;
            p->position_ids[i] = 0;
        }
        p->cu_seqlens[++nseg] = (int32_t)L;
    }
    *seq = (dpp_sequence_t){.length = L,
                            .input_ids = p->input_ids,
                            .labels = p->labels,
                            .position_ids = p->position_ids,
                            .cu_seqlens = p->cu_seqlens,
                            .nsegments = nseg,
                            .padding = padding,
                            .documents = docs};
    return 1;
}
