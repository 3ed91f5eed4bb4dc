/* SPDX-License-Identifier: Apache-2.0 */
/* The source of text sessions (source.h), whatever the table's format: a
 * split is a range of documents of one file (whole lines of JSON Lines or
 * plain text, a file read whole, rows of a Parquet string column; read by
 * src/text/docs.c, which also applies the document filters). Documents are
 * tokenized (src/text/tokenizer.h, loaded once per worker through
 * file_cache.h) and packed into sequences (src/text/pack.h); a row is one
 * sequence, so the split's rows are numbered, shuffled and cut into
 * batches like any other. An input that is no document (malformed JSON, no
 * text) is no row: it is counted in the source's rejects.
 *
 * Equal batches per rank need every split's sequence count before the
 * epoch is planned, and only tokenizing tells it: the index task reads the
 * whole file, cuts it every split_rows inputs (a split that would make no
 * sequence grows until one does) and packs each split exactly as the split
 * task will, counting its sequences (src/master/planner_text.c reads the
 * result). Packing happens within a split and the split's last sequence
 * is padded, so a split's sequences depend on nothing outside it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <zstd.h>

#include "base/errtext.h"
#include "base/nearest.h"
#include "base/reject.h"
#include "dpp/error.h"
#include "file_cache.h"
#include "source.h"
#include "text/docs.h"
#include "spec/table.h"
#include "text/bpe.h"
#include "text/tokenizer.h"
#include "text/pack.h"

#define READ_CHUNK (1u << 20)
#define MAX_FIELDS (1 + DPP_TEXT_MAX_WHERE)

/* ---- tokenizers, through the worker's file cache ---- */

static int tokenizer_load(const char *real, const char *name, const char *arg, void **out,
                          char *err, size_t errlen)
{
    (void)name;
    dpp_tokenizer_t *tk = NULL;
    int rc = dpp_tokenizer_load(&tk, arg, real, err, errlen);
    *out = tk;
    return rc;
}

static int tokenizer_bytes(const uint8_t *buf, size_t len, const char *name, const char *arg,
                           void **out, char *err, size_t errlen)
{
    dpp_tokenizer_t *tk = NULL;
    int rc = dpp_tokenizer_new(&tk, arg, name, buf, len, err, errlen);
    *out = tk;
    return rc;
}

static void tokenizer_unload(void *tk)
{
    dpp_tokenizer_free(tk);
}

static const dpp_file_kind_t tokenizer_files = {"tokenizer", tokenizer_load, tokenizer_unload,
                                                tokenizer_bytes, DPP_BPE_MAX_FILE};

/* ---- the projection: what a split's rows are made with ---- */

typedef struct jl_proj {
    const dpp_spec_t *spec; /* the caller's, which outlives the projection */
    const dpp_tokenizer_t *tok; /* the file cache's */
    dpp_pack_config_t pack;
    uint64_t max_line;
    int column[DPP_TEXT_NCOLUMNS + 1]; /* slot -> column (DPP_TEXT_NCOLUMNS: the label) */
    size_t nslots;
} jl_proj_t;

static void projection_free(void *proj)
{
    jl_proj_t *p = proj;
    if (p == NULL)
        return;
    dpp_file_cache_put(p->tok);
    free(p);
}

static int projection_new(void **proj, const char *const *names, size_t n, const dpp_spec_t *spec,
                          const char *root, const dpp_pipeline_config_t *cfg, char *err,
                          size_t errlen)
{
    static const char *const columns[] = DPP_TEXT_COLUMNS;
    *proj = NULL;
    if (spec->text == NULL || n > DPP_TEXT_NCOLUMNS + 1)
        return dpp_errf(DPP_ESPEC, err, errlen, "a text source without a text section");
    jl_proj_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "out of memory");
    const dpp_text_spec_t *t = spec->text;
    p->spec = spec;
    p->max_line = cfg->reader.max_record ? cfg->reader.max_record : DPP_READER_DEFAULT_MAX_RECORD;
    p->nslots = n;
    for (size_t i = 0; i < n; i++) {
        p->column[i] = -1;
        for (int k = 0; k < DPP_TEXT_NCOLUMNS; k++)
            if (strcmp(names[i], columns[k]) == 0)
                p->column[i] = k;
        if (strcmp(names[i], DPP_TEXT_LABEL) == 0)
            p->column[i] = DPP_TEXT_NCOLUMNS;
    }
    void *tok = NULL;
    char why[700], arg[64];
    int rc = dpp_file_cache_get(&tokenizer_files, dpp_tokenizer_arg(t, arg, sizeof arg), root,
                                cfg->roots, cfg->nroots, t->tokenizer_file,
                                dpp_spec_pin(spec, t->tokenizer_file), &tok, why, sizeof why);
    p->tok = tok;
    if (rc) {
        dpp_errf(rc, err, errlen, "tokenizer.file: %s", why);
        projection_free(p);
        return rc;
    }
    int64_t eos = -1, bos = -1;
    if ((t->eos &&
         (rc = dpp_tokenizer_special(p->tok, t, "sequence.eos", t->eos, &eos, err, errlen))) ||
        (t->bos &&
         (rc = dpp_tokenizer_special(p->tok, t, "sequence.bos", t->bos, &bos, err, errlen)))) {
        projection_free(p);
        return rc;
    }
    p->pack = (dpp_pack_config_t){
        .mode = t->pack == DPP_PACK_KIND_BEST_FIT ? DPP_PACK_BEST_FIT : DPP_PACK_CONCAT,
        .length = t->length,
        .bos = bos,
        .eos = eos,
        .pad = eos >= 0 ? (uint32_t)eos : 0,
        .window = t->window,
    };
    *proj = p;
    return 0;
}

/* ---- reading a range's documents, making sequences ---- */

typedef struct jl_state {
    dpp_s3_rfile_t obj; /* an s3:// file's: what docs reads from */
    const jl_proj_t *proj;
    dpp_text_docs_t *docs;
    uint64_t tokens, padding; /* of the sequences made */
    uint32_t *ids;
    size_t nids, ids_cap;
    dpp_tokenizer_scratch_t *scratch;
    dpp_packer_t *packer;
    int finished;
    uint8_t *row;
    size_t row_cap;
} jl_state_t;

static void state_close(jl_state_t *st)
{
    dpp_text_docs_close(st->docs);
    dpp_s3_rfile_close(&st->obj);
    free(st->ids);
    free(st->row);
    dpp_tokenizer_scratch_free(st->scratch);
    dpp_packer_free(st->packer);
    memset(st, 0, sizeof *st);
}

static int state_open(jl_state_t *st, const jl_proj_t *p, const dpp_task_t *t,
                      const dpp_pipeline_config_t *cfg, uint64_t start, uint64_t end, char *err,
                      size_t errlen)
{
    memset(st, 0, sizeof *st);
    st->proj = p;
    int object = dpp_s3_is_url(t->path);
    int rc = object ? dpp_source_object_open(cfg, t, &st->obj, err, errlen) : 0;
    if (rc == 0)
        rc = dpp_text_docs_open(&st->docs, p->spec, t->path, object ? &st->obj.rf : NULL,
                                t->rel_path, cfg->roots, cfg->nroots, start, end, p->max_line, err,
                                errlen);
    if (rc)
        return rc;
    rc = dpp_packer_new(&st->packer, &p->pack);
    /* a document's normalized text is bounded as its bytes are */
    if (rc == 0 && (st->scratch = dpp_tokenizer_scratch_new(p->tok, p->max_line)) == NULL)
        rc = -ENOMEM;
    if (rc)
        return dpp_errf(rc, err, errlen, "file %s: %s", t->rel_path,
                        rc == DPP_EINVAL ? "the sequence settings are out of range"
                                         : dpp_strerror(rc));
    return 0;
}

/* Reads the range's next input and packs its document, if any. Returns 1,
 * 0 at the range's end, or an error that ends the split (on_corrupt: fail,
 * a read error). A document too big to tokenize within the worker's
 * bounds is rejected, named (file and position) like a line too long. */
static int read_one(jl_state_t *st)
{
    const uint8_t *text;
    size_t len;
    int rc = dpp_text_docs_step(st->docs, &text, &len);
    if (rc != 1 || text == NULL)
        return rc;
    st->nids = 0;
    char why[400];
    rc = dpp_tokenizer_encode(st->proj->tok, st->scratch, text, len, &st->ids, &st->nids,
                              &st->ids_cap, why, sizeof why);
    if (rc == DPP_ETOOBIG)
        return (rc = dpp_text_docs_refuse(st->docs, DPP_ETOOBIG, why)) ? rc : 1;
    if (rc != 0 || dpp_packer_add(st->packer, st->ids, st->nids) != 0)
        return -ENOMEM;
    return 1;
}

/* The next sequence of the range: 1 with *seq, 0 at the end, or an error
 * that ends the split. */
static int next_sequence(jl_state_t *st, dpp_sequence_t *seq)
{
    for (;;) {
        if (dpp_packer_next(st->packer, seq) == 1)
            return 1;
        if (st->finished)
            return 0;
        int rc = read_one(st);
        if (rc == 0) {
            st->finished = 1;
            rc = dpp_packer_finish(st->packer);
        }
        if (rc < 0)
            return rc;
    }
}

/* ---- the source interface ---- */

/* A row: u32 length, u32 segments, f32 padding, u32 0, then int64
 * input_ids[length], labels[length], position_ids[length],
 * cu_seqlens[segments + 1]. */
#define ROW_HEADER 16

static int put_row(jl_state_t *st, const dpp_sequence_t *q, dpp_source_row_t *row)
{
    size_t words = 3 * (size_t)q->length + q->nsegments + 1;
    size_t need = ROW_HEADER + 8 * words;
    if (need > st->row_cap) {
        uint8_t *b = realloc(st->row, need);
        if (b == NULL)
            return -ENOMEM;
        st->row = b;
        st->row_cap = need;
    }
    uint32_t head[4] = {q->length, q->nsegments, 0, 0};
    float padding = (float)q->padding;
    memcpy(&head[2], &padding, 4);
    memcpy(st->row, head, sizeof head);
    int64_t *out = (int64_t *)(void *)(st->row + ROW_HEADER);
    const int32_t *cols[3] = {q->input_ids, q->labels, q->position_ids};
    for (int c = 0; c < 3; c++)
        for (uint32_t i = 0; i < q->length; i++)
            *out++ = cols[c][i];
    for (uint32_t i = 0; i <= q->nsegments; i++)
        *out++ = q->cu_seqlens[i];
    row->data = st->row;
    row->len = need;
    row->offset = dpp_text_docs_last(st->docs);
    return 0;
}

static int jl_open(dpp_source_t *s, dpp_reader_t *reader, const dpp_task_t *t, const void *proj,
                   const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    (void)reader; /* read with pread: a text split's cost is tokenizing */
    s->ops = &dpp_source_text;
    s->task = t;
    jl_state_t *st = malloc(sizeof *st);
    if (st == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "split %s: out of memory", t->rel_path);
    s->state = st;
    return state_open(st, proj, t, cfg, t->byte_start, t->byte_end, err, errlen);
}

static int jl_next(dpp_source_t *s, dpp_source_row_t *row)
{
    jl_state_t *st = s->state;
    dpp_sequence_t q;
    int rc = next_sequence(st, &q);
    if (rc == 1 && (rc = put_row(st, &q, row)) == 0) {
        st->tokens += q.length - q.padding;
        st->padding += q.padding;
        return 1;
    }
    row->offset = st->docs ? dpp_text_docs_last(st->docs) : 0;
    return rc;
}

static int jl_stuck(const dpp_source_t *s)
{
    /* a bad line is no row and the next line is sound; a broken stream
     * has nothing after the break */
    const jl_state_t *st = s->state;
    return st->docs && dpp_text_docs_broken(st->docs) != 0;
}

static const char *jl_why(const dpp_source_t *s)
{
    const jl_state_t *st = s->state;
    return st->docs ? dpp_text_docs_why(st->docs) : NULL;
}

static size_t jl_names(const dpp_source_t *s, const uint8_t *row, size_t len, char *buf,
                       size_t buflen)
{
    (void)s;
    (void)row;
    (void)len;
    static const char *const columns[] = DPP_TEXT_COLUMNS;
    size_t at = 0, k = 0;
    for (; k < DPP_TEXT_NCOLUMNS; k++) {
        size_t l = strlen(columns[k]) + 1;
        if (at + l > buflen)
            break;
        memcpy(buf + at, columns[k], l);
        at += l;
    }
    return k;
}

static int jl_decode(void *proj, const uint8_t *data, size_t len, dpp_feat_ref_t *refs)
{
    const jl_proj_t *p = proj;
    uint32_t head[4];
    if (len < ROW_HEADER)
        return DPP_EEXAMPLE;
    memcpy(head, data, sizeof head);
    size_t counts[DPP_TEXT_NCOLUMNS] = {head[0], head[0], head[0], (size_t)head[1] + 1};
    size_t at = ROW_HEADER, offs[DPP_TEXT_NCOLUMNS];
    for (int k = 0; k < DPP_TEXT_NCOLUMNS; k++) {
        offs[k] = at;
        at += 8 * counts[k];
    }
    if (at != len)
        return DPP_EEXAMPLE;
    for (size_t i = 0; i < p->nslots; i++) {
        int c = p->column[i];
        if (c < 0)
            refs[i] = (dpp_feat_ref_t){.kind = DPP_FEAT_ABSENT};
        else if (c == DPP_TEXT_NCOLUMNS)
            refs[i] = (dpp_feat_ref_t){DPP_FEAT_FLOAT, data + 8, 4, 1};
        else
            refs[i] = (dpp_feat_ref_t){DPP_FEAT_INT64, data + offs[c], 8 * counts[c], 1};
    }
    return 0;
}

static void jl_close(dpp_source_t *s)
{
    jl_state_t *st = s->state;
    if (st == NULL)
        return;
    if (st->docs) {
        const dpp_text_docs_counts_t *c = dpp_text_docs_counts(st->docs);
        dpp_rejects_add(&s->rejects, &c->rejects);
        if (c->reject_detail[0])
            snprintf(s->reject_detail, sizeof s->reject_detail, "%s", c->reject_detail);
        s->filtered += c->filtered;
        s->bytes_read += c->bytes_read;
        s->documents += c->documents;
    }
    s->tokens += st->tokens;
    s->padding += st->padding;
    state_close(st);
    free(st);
    s->state = NULL;
}

static int push_pair(uint64_t **bounds, size_t *nb, size_t *cap, uint64_t off, uint64_t before)
{
    if (*nb + 2 > *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        uint64_t *b = realloc(*bounds, c * sizeof *b);
        if (b == NULL)
            return -ENOMEM;
        *bounds = b;
        *cap = c;
    }
    (*bounds)[(*nb)++] = off;
    (*bounds)[(*nb)++] = before;
    return 0;
}

/* The index task: the whole file read and packed split by split. */
static int jl_index(const dpp_pipeline_config_t *cfg, const dpp_task_t *t, dpp_split_result_t *res)
{
    dpp_spec_t spec;
    char err[768], root[4096];
    int rc = dpp_spec_parse(t->spec_json, strlen(t->spec_json), &spec, err, sizeof err);
    if (rc)
        return dpp_source_fail(res, rc, "index %s: spec: %s", t->rel_path, err);
    void *proj = NULL;
    jl_state_t st = {0};
    uint64_t *bounds = NULL;
    size_t nb = 0, cap = 0;
    dpp_source_data_root(cfg, t, spec.table, root, sizeof root);
    if ((rc = projection_new(&proj, NULL, 0, &spec, root, cfg, err, sizeof err)) != 0 ||
        (rc = state_open(&st, proj, t, cfg, 0, UINT64_MAX, err, sizeof err)) != 0) {
        dpp_source_fail(res, rc, "%s", err);
        goto out;
    }
    dpp_text_docs_stat(st.docs, &res->file_size, &res->file_mtime_ns);
    uint64_t sequences = 0, before = 0, split_start = 0, lines = 0;
    dpp_sequence_t q;
    for (;;) {
        rc = read_one(&st);
        if (rc < 0 || rc > 1) {
            const dpp_text_docs_counts_t *c = dpp_text_docs_counts(st.docs);
            dpp_source_fail(res, rc, "index %s: %s", t->rel_path,
                            dpp_text_docs_broken(st.docs) ? dpp_text_docs_why(st.docs)
                            : c->reject_detail[0]        ? c->reject_detail
                                                         : dpp_strerror(rc));
            goto out;
        }
        int end = rc == 0;
        lines += rc;
        while (dpp_packer_next(st.packer, &q) == 1)
            sequences++;
        if (!end && lines < t->split_rows)
            continue;
        /* a split closes every split_rows lines once it makes a sequence:
         * finishing a packer that holds nothing changes nothing */
        if ((rc = dpp_packer_finish(st.packer)) != 0) {
            dpp_source_fail(res, rc, "index %s: %s", t->rel_path, dpp_strerror(rc));
            goto out;
        }
        while (dpp_packer_next(st.packer, &q) == 1)
            sequences++;
        dpp_packer_reset(st.packer);
        if (sequences > before) {
            if (push_pair(&bounds, &nb, &cap, split_start, before) != 0) {
                rc = dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
                goto out;
            }
            before = sequences;
            split_start = dpp_text_docs_pos(st.docs); /* the next input's */
            lines = 0;
        }
        if (end)
            break;
    }
    /* the last range runs to the end of the file, with any lines after its
     * last document */
    if (push_pair(&bounds, &nb, &cap, nb ? dpp_text_docs_pos(st.docs) : 0, sequences) != 0) {
        rc = dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
        goto out;
    }
    res->records = sequences;
    res->bounds = bounds;
    res->nbounds = nb;
    bounds = NULL;
    const dpp_text_docs_counts_t *c = dpp_text_docs_counts(st.docs);
    if (sequences == 0 && dpp_rejects_total(&c->rejects) > 0) {
        /* no split will read these inputs: they are counted here */
        res->rejects = c->rejects;
        snprintf(res->reject_detail, sizeof res->reject_detail, "%s", c->reject_detail);
    }
    rc = 0;
out:
    free(bounds);
    state_close(&st);
    projection_free(proj);
    dpp_spec_close(&spec);
    return rc ? res->error : 0;
}

const dpp_source_ops_t dpp_source_text = {
    .projection_new = projection_new,
    .projection_free = projection_free,
    .open = jl_open,
    .next = jl_next,
    .stuck = jl_stuck,
    .why = jl_why,
    .names = jl_names,
    .decode = jl_decode,
    .close = jl_close,
    .index = jl_index,
};
