/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON Lines source of text sessions (source.h): a split is a byte
 * range of whole lines; each line is a JSON object whose text field is a
 * document. Documents pass the spec's filters, are tokenized (src/text
 * BPE, the tokenizer loaded once per worker through file_cache.h) and
 * packed into sequences (src/text/pack.h); a row is one sequence, so the
 * split's rows are numbered, shuffled and cut into batches like any
 * other. A line that is not a document (malformed JSON, no text field) is
 * no row: it is counted in the source's rejects.
 *
 * Equal batches per rank need every split's sequence count before the
 * epoch is planned, and only tokenizing tells it: the index task reads the
 * whole file, cuts it every split_rows lines (a split that would make no
 * sequence grows until one does) and packs each split exactly as the split
 * task will, counting its sequences (src/master/planner_jsonl.c reads the
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
#include "format/jsonl.h"
#include "source.h"
#include "spec/table.h"
#include "text/bpe.h"
#include "text/pack.h"

#define READ_CHUNK (1u << 20)
#define MAX_FIELDS (1 + DPP_TEXT_MAX_WHERE)

/* ---- tokenizers, through the worker's file cache ---- */

static int tiktoken_load(const char *real, const char *name, const char *pattern, void **out,
                         char *err, size_t errlen)
{
    (void)name;
    dpp_bpe_t *b = NULL;
    int rc = dpp_bpe_load(&b, real, dpp_bpe_pattern(pattern), err, errlen);
    *out = b;
    return rc;
}

static int hf_load(const char *real, const char *name, const char *arg, void **out, char *err,
                   size_t errlen)
{
    (void)name;
    (void)arg;
    dpp_bpe_t *b = NULL;
    int rc = dpp_bpe_load_hf(&b, real, err, errlen);
    *out = b;
    return rc;
}

static void bpe_unload(void *b)
{
    dpp_bpe_free(b);
}

static const dpp_file_kind_t tiktoken_files = {"tokenizer", tiktoken_load, bpe_unload};
static const dpp_file_kind_t hf_files = {"tokenizer", hf_load, bpe_unload};

/* ---- the projection: what a split's rows are made with ---- */

typedef struct jl_proj {
    const dpp_text_spec_t *text;
    const dpp_bpe_t *bpe; /* the file cache's */
    dpp_pack_config_t pack;
    int on_corrupt_fail;
    uint64_t max_line;
    const char *fields[MAX_FIELDS]; /* the text field, then the where fields */
    size_t nfields;
    int column[DPP_TEXT_NCOLUMNS + 1]; /* slot -> column (DPP_TEXT_NCOLUMNS: the label) */
    size_t nslots;
} jl_proj_t;

static void projection_free(void *proj)
{
    jl_proj_t *p = proj;
    if (p == NULL)
        return;
    dpp_file_cache_put(p->bpe);
    free(p);
}

/* The id of special token `name` (spec path `what` for the message). */
static int special_id(const dpp_text_spec_t *t, const dpp_bpe_t *b, const char *what,
                      const char *name, int64_t *id, char *err, size_t errlen)
{
    if (t->tokenizer_hf) {
        *id = dpp_bpe_special_id(b, name);
        if (*id >= 0)
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
                    name, dpp_bpe_size(b));
}

static int projection_new(void **proj, const char *const *names, size_t n, const dpp_spec_t *spec,
                          const char *root, const dpp_pipeline_config_t *cfg, char *err,
                          size_t errlen)
{
    static const char *const columns[] = DPP_TEXT_COLUMNS;
    *proj = NULL;
    if (spec->text == NULL || n > DPP_TEXT_NCOLUMNS + 1)
        return dpp_errf(DPP_ESPEC, err, errlen, "format \"jsonl\" without a text section");
    jl_proj_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return dpp_errf(-ENOMEM, err, errlen, "out of memory");
    const dpp_text_spec_t *t = spec->text;
    p->text = t;
    p->on_corrupt_fail = spec->on_corrupt_fail;
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
    p->fields[p->nfields++] = t->field;
    for (unsigned w = 0; w < t->nwhere; w++)
        p->fields[p->nfields++] = t->where_keys[w];
    void *bpe = NULL;
    char why[512];
    int rc = dpp_file_cache_get(t->tokenizer_hf ? &hf_files : &tiktoken_files,
                                t->tokenizer_hf ? NULL : t->pattern, root, cfg->roots, cfg->nroots,
                                t->tokenizer_file, &bpe, why, sizeof why);
    p->bpe = bpe;
    if (rc) {
        dpp_errf(rc, err, errlen, "tokenizer.file: %s", why);
        projection_free(p);
        return rc;
    }
    int64_t eos = -1, bos = -1;
    if ((t->eos && (rc = special_id(t, p->bpe, "sequence.eos", t->eos, &eos, err, errlen))) ||
        (t->bos && (rc = special_id(t, p->bpe, "sequence.bos", t->bos, &bos, err, errlen)))) {
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

/* ---- reading a range of lines, making sequences ---- */

typedef struct jl_state {
    const jl_proj_t *proj;
    const char *rel_path;
    int fd;
    uint64_t pos, end; /* file offset of the next read, end of the range */
    uint8_t *buf;      /* file bytes [buf_off, buf_off + len), line starts at `at` */
    size_t cap, len, at;
    uint64_t buf_off;
    int eof;
    /* a .zst file: decompressed as a stream; pos, end and line offsets
     * count decompressed bytes, zpos the compressed ones read */
    ZSTD_DCtx *zctx;
    uint8_t *zin;
    size_t zin_len, zin_at;
    uint64_t zpos;
    size_t zlast; /* ZSTD_decompressStream's last hint: 0 at a frame's end */
    int broken;   /* the stream failed (DPP_ETRUNCATED, DPP_ECORRUPT): nothing after it */
    char why[160];
    uint8_t *text; /* a document unescaped */
    size_t text_cap;
    uint32_t *ids;
    size_t nids, ids_cap;
    dpp_bpe_scratch_t *scratch;
    dpp_packer_t *packer;
    int finished;
    uint8_t *row;
    size_t row_cap;
    uint64_t last_line; /* offset of the line read last, for a sequence's messages */
    uint64_t documents, filtered;
    dpp_rejects_t rejects;
    char reject_detail[512];
    uint64_t bytes_read;
} jl_state_t;

static void state_close(jl_state_t *st)
{
    if (st->fd >= 0)
        close(st->fd);
    ZSTD_freeDCtx(st->zctx);
    free(st->zin);
    free(st->buf);
    free(st->text);
    free(st->ids);
    free(st->row);
    dpp_bpe_scratch_free(st->scratch);
    dpp_packer_free(st->packer);
    memset(st, 0, sizeof *st);
    st->fd = -1;
}

/* Decompresses up to n bytes of a .zst file into out: how many (0 at the
 * end of the file, after a whole frame), or DPP_ETRUNCATED / DPP_ECORRUPT
 * (the stream ends inside a frame, or is not zstd), or -errno. */
static ssize_t unzstd(jl_state_t *st, uint8_t *out, size_t n)
{
    ZSTD_outBuffer o = {out, n, 0};
    while (o.pos == 0) {
        if (st->zin_at == st->zin_len) {
            ssize_t got = pread(st->fd, st->zin, ZSTD_DStreamInSize(), (off_t)st->zpos);
            if (got < 0)
                return -errno;
            if (got == 0 && st->zlast != 0) {
                snprintf(st->why, sizeof st->why,
                         "the zstd stream ends inside a frame after %" PRIu64
                         " compressed bytes: the file is truncated",
                         st->zpos);
                return st->broken = DPP_ETRUNCATED;
            }
            if (got == 0)
                return 0;
            st->zin_len = (size_t)got;
            st->zin_at = 0;
            st->zpos += (uint64_t)got;
            st->bytes_read += (uint64_t)got;
        }
        ZSTD_inBuffer i = {st->zin, st->zin_len, st->zin_at};
        size_t rc = ZSTD_decompressStream(st->zctx, &o, &i);
        st->zin_at = i.pos;
        if (ZSTD_isError(rc)) {
            snprintf(st->why, sizeof st->why, "zstd: %s (near compressed byte %" PRIu64 ")",
                     ZSTD_getErrorName(rc), st->zpos - (st->zin_len - st->zin_at));
            return st->broken = DPP_ECORRUPT;
        }
        st->zlast = rc;
    }
    return (ssize_t)o.pos;
}

static int is_zst(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".zst") == 0;
}

static int state_open(jl_state_t *st, const jl_proj_t *p, const dpp_task_t *t,
                      const dpp_pipeline_config_t *cfg, uint64_t start, uint64_t end, char *err,
                      size_t errlen)
{
    memset(st, 0, sizeof *st);
    st->fd = -1;
    st->proj = p;
    st->rel_path = t->rel_path;
    st->pos = st->buf_off = start;
    st->end = end;
    int rc = dpp_path_check_under(t->path, cfg->roots, cfg->nroots, NULL);
    if (rc)
        return dpp_errf(rc, err, errlen, "file %s: %s", t->rel_path,
                        rc == DPP_EPATH ? "outside the worker's data roots, or a symlink appeared "
                                          "since the master resolved it"
                                        : dpp_strerror(rc));
    if ((st->fd = open(t->path, O_RDONLY | O_CLOEXEC)) < 0)
        return dpp_errf(-errno, err, errlen, "file %s: %s", t->rel_path, strerror(errno));
    rc = dpp_packer_new(&st->packer, &p->pack);
    if (rc == 0 && (st->scratch = dpp_bpe_scratch_new(p->bpe)) == NULL)
        rc = -ENOMEM;
    if (rc == 0 && (st->buf = malloc(READ_CHUNK)) == NULL)
        rc = -ENOMEM;
    if (rc == 0 && is_zst(t->path) &&
        ((st->zctx = ZSTD_createDCtx()) == NULL ||
         (st->zin = malloc(ZSTD_DStreamInSize())) == NULL))
        rc = -ENOMEM;
    if (rc)
        return dpp_errf(rc, err, errlen, "file %s: %s", t->rel_path,
                        rc == DPP_EINVAL ? "the sequence settings are out of range"
                                         : dpp_strerror(rc));
    st->cap = READ_CHUNK;
    /* a compressed stream is decompressed from its start up to the range */
    for (uint64_t skip = st->zctx ? start : 0; skip > 0;) {
        ssize_t got = unzstd(st, st->buf, skip < st->cap ? (size_t)skip : st->cap);
        if (got <= 0)
            return dpp_errf(got < 0 ? (int)got : DPP_EINDEX, err, errlen,
                            "file %s: %s before decompressed offset %" PRIu64
                            " where the split starts (the file changed since it was indexed?)",
                            t->rel_path, got == 0 ? "the stream ends" : st->why, start);
        skip -= (uint64_t)got;
    }
    return 0;
}

/* Reads more of the range into the buffer, keeping the line begun at
 * `at`. Returns 1, 0 at the range's end, or -errno. */
static int fill(jl_state_t *st)
{
    if (st->broken)
        return st->broken;
    if (st->eof || st->pos >= st->end)
        return 0;
    if (st->at > 0) {
        memmove(st->buf, st->buf + st->at, st->len - st->at);
        st->len -= st->at;
        st->buf_off += st->at;
        st->at = 0;
    }
    if (st->len == st->cap) {
        size_t cap = st->cap * 2;
        uint8_t *b = realloc(st->buf, cap);
        if (b == NULL)
            return -ENOMEM;
        st->buf = b;
        st->cap = cap;
    }
    size_t want = st->cap - st->len;
    if (st->end - st->pos < want)
        want = (size_t)(st->end - st->pos);
    ssize_t got = st->zctx ? unzstd(st, st->buf + st->len, want)
                           : pread(st->fd, st->buf + st->len, want, (off_t)st->pos);
    if (got < 0)
        return st->zctx ? (int)got : -errno;
    if (got == 0) {
        st->eof = 1;
        return 0;
    }
    if (st->zctx == NULL)
        st->bytes_read += (uint64_t)got;
    st->len += (size_t)got;
    st->pos += (uint64_t)got;
    return 1;
}

/* The next line of the range: 1 with line[0..*n) (no newline) at file
 * offset *off, 0 at the end, DPP_ETOOBIG for a line longer than max_line
 * (passed over, *off its start), or -errno. */
static int next_line(jl_state_t *st, const uint8_t **line, size_t *n, uint64_t *off)
{
    size_t scanned = 0; /* bytes of the line searched for its newline */
    for (;;) {
        const uint8_t *from = st->buf + st->at + scanned;
        uint8_t *nl = memchr(from, '\n', st->len - st->at - scanned);
        int exhausted = st->eof || st->pos >= st->end;
        if (nl || (exhausted && st->len > st->at)) {
            size_t stop = nl ? (size_t)(nl - st->buf) : st->len;
            *line = st->buf + st->at;
            *n = stop - st->at;
            *off = st->buf_off + st->at;
            if (*n && (*line)[*n - 1] == '\r')
                (*n)--;
            st->at = nl ? stop + 1 : stop;
            return 1;
        }
        if (exhausted)
            return 0;
        scanned = st->len - st->at;
        if (scanned > st->proj->max_line) {
            /* too long: drop what is buffered and read on to its end */
            *off = st->buf_off + st->at;
            for (;;) {
                st->at = st->len;
                int rc = fill(st);
                if (rc <= 0)
                    return rc < 0 ? rc : DPP_ETOOBIG;
                uint8_t *e = memchr(st->buf, '\n', st->len);
                if (e) {
                    st->at = (size_t)(e - st->buf) + 1;
                    return DPP_ETOOBIG;
                }
            }
        }
        int rc = fill(st); /* moves the line to the buffer's start */
        if (rc < 0)
            return rc;
    }
}

/* Counts a line that is no document; under on_corrupt: fail returns the
 * error that ends the split, else 0. */
static int reject_line(jl_state_t *st, int reason, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int reject_line(jl_state_t *st, int reason, uint64_t off, const char *fmt, ...)
{
    dpp_rejects_count(&st->rejects, reason, 1);
    if (st->reject_detail[0] == '\0') {
        int k = snprintf(st->reject_detail, sizeof st->reject_detail,
                         "file %s, line at offset %" PRIu64 ": ", st->rel_path, off);
        va_list ap;
        va_start(ap, fmt);
        if (k > 0 && (size_t)k < sizeof st->reject_detail)
            vsnprintf(st->reject_detail + k, sizeof st->reject_detail - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return st->proj->on_corrupt_fail ? reason : 0;
}

static int grow_text(jl_state_t *st, size_t need)
{
    if (need <= st->text_cap)
        return 0;
    size_t cap = st->text_cap ? st->text_cap : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *b = realloc(st->text, cap);
    if (b == NULL)
        return -ENOMEM;
    st->text = b;
    st->text_cap = cap;
    return 0;
}

/* "; did you mean "text"? (the line has: id, lang, text)" for a text field
 * a line does not have, from the line's top-level keys (a line that
 * dpp_jsonl_parse() accepted; jansson reads it again, once per split). */
static void line_keys_hint(const uint8_t *line, size_t n, const char *field, char *buf,
                           size_t len)
{
    enum { MAX_KEYS = 32 };
    json_t *obj = json_loadb((const char *)line, n, JSON_DECODE_ANY, NULL);
    const char *keys[MAX_KEYS];
    size_t k = 0;
    for (void *it = json_object_iter(obj); it && k < MAX_KEYS; it = json_object_iter_next(obj, it))
        keys[k++] = json_object_iter_key(it);
    if (k > 0)
        dpp_suggest(buf, len, field, keys, k, "the line has", 12);
    json_decref(obj);
}

/* One line: a document given to the packer, a filtered one, or a rejected
 * one. Returns 0, or the error that ends the split. */
static int take_line(jl_state_t *st, const uint8_t *line, size_t n, uint64_t off)
{
    const jl_proj_t *p = st->proj;
    const dpp_text_spec_t *t = p->text;
    dpp_json_value_t vals[MAX_FIELDS];
    size_t at = 0;
    const char *why = NULL;
    st->last_line = off;
    size_t lead = 0;
    while (lead < n && (line[lead] == ' ' || line[lead] == '\t'))
        lead++;
    if (lead == n) /* a blank line is no document, and no error */
        return 0;
    if (dpp_jsonl_parse(line, n, p->fields, p->nfields, vals, &at, &why) != 0)
        return reject_line(st, DPP_ECORRUPT, off, "%s at byte %zu of the line", why, at);
    if (vals[0].kind == DPP_JSON_ABSENT) {
        char hint[512] = "";
        if (st->reject_detail[0] == '\0') /* the first one: worth a "did you mean" */
            line_keys_hint(line, n, t->field, hint, sizeof hint);
        return reject_line(st, DPP_EMISSING, off, "no field \"%s\" (text.field)%s", t->field,
                           hint);
    }
    if (vals[0].kind != DPP_JSON_STRING)
        return reject_line(st, DPP_ETYPE, off, "field \"%s\" is not a string", t->field);
    for (unsigned w = 0; w < t->nwhere; w++) {
        const dpp_json_value_t *v = &vals[1 + w];
        size_t want = strlen(t->where_values[w]);
        int pass = v->kind == DPP_JSON_STRING;
        if (pass && v->escaped) {
            if (grow_text(st, v->len) != 0)
                return -ENOMEM;
            size_t len = dpp_jsonl_unescape(line, v, st->text);
            pass = len == want && memcmp(st->text, t->where_values[w], want) == 0;
        } else if (pass) {
            pass = v->len == want && memcmp(line + v->off, t->where_values[w], want) == 0;
        }
        if (!pass) {
            st->filtered++;
            return 0;
        }
    }
    const uint8_t *text = line + vals[0].off;
    size_t len = vals[0].len;
    if (vals[0].escaped) {
        if (grow_text(st, vals[0].len) != 0)
            return -ENOMEM;
        len = dpp_jsonl_unescape(line, &vals[0], st->text);
        text = st->text;
    }
    if (len < t->min_bytes || len > t->max_bytes) {
        st->filtered++;
        return 0;
    }
    st->nids = 0;
    if (dpp_bpe_encode(p->bpe, st->scratch, text, len, &st->ids, &st->nids, &st->ids_cap) != 0 ||
        dpp_packer_add(st->packer, st->ids, st->nids) != 0)
        return -ENOMEM;
    st->documents++;
    return 0;
}

/* Reads and takes the range's next line. Returns 1, 0 at the range's end,
 * or an error that ends the split (on_corrupt: fail, a read error). */
static int read_one(jl_state_t *st)
{
    const uint8_t *line;
    size_t n;
    uint64_t off = 0;
    int rc = next_line(st, &line, &n, &off);
    if (rc == 1)
        rc = take_line(st, line, n, off);
    else if (rc == DPP_ETOOBIG)
        rc = reject_line(st, DPP_ETOOBIG, off,
                         "longer than the worker's %" PRIu64 " byte limit (--max-record-mb)",
                         st->proj->max_line);
    else
        return rc;
    return rc ? rc : 1;
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
    row->offset = st->last_line;
    return 0;
}

static int jl_open(dpp_source_t *s, dpp_reader_t *reader, const dpp_task_t *t, const void *proj,
                   const dpp_pipeline_config_t *cfg, char *err, size_t errlen)
{
    (void)reader; /* lines are read with pread: a text split's cost is tokenizing */
    s->ops = &dpp_source_jsonl;
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
    if (rc == 1 && (rc = put_row(st, &q, row)) == 0)
        return 1;
    row->offset = st->last_line;
    return rc;
}

static int jl_stuck(const dpp_source_t *s)
{
    /* a bad line is no row and the next line is sound; a broken stream
     * has nothing after the break */
    const jl_state_t *st = s->state;
    return st->broken != 0;
}

static const char *jl_why(const dpp_source_t *s)
{
    const jl_state_t *st = s->state;
    return st->broken ? st->why : NULL;
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

static int jl_decode(const void *proj, const uint8_t *data, size_t len, dpp_feat_ref_t *refs)
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
    dpp_rejects_add(&s->rejects, &st->rejects);
    if (st->reject_detail[0])
        snprintf(s->reject_detail, sizeof s->reject_detail, "%s", st->reject_detail);
    s->filtered += st->filtered;
    s->bytes_read += st->bytes_read;
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
    jl_state_t st = {.fd = -1};
    struct stat sb;
    uint64_t *bounds = NULL;
    size_t nb = 0, cap = 0;
    dpp_source_data_root(t, spec.table, root, sizeof root);
    if ((rc = projection_new(&proj, NULL, 0, &spec, root, cfg, err, sizeof err)) != 0 ||
        (rc = state_open(&st, proj, t, cfg, 0, UINT64_MAX, err, sizeof err)) != 0) {
        dpp_source_fail(res, rc, "%s", err);
        goto out;
    }
    if (fstat(st.fd, &sb) != 0) {
        rc = dpp_source_fail(res, -errno, "index %s: %s", t->rel_path, strerror(errno));
        goto out;
    }
    res->file_size = (uint64_t)sb.st_size;
    res->file_mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    /* the file as it was when looked at (a .zst stream: to its end) */
    st.end = st.zctx ? UINT64_MAX : res->file_size;
    uint64_t sequences = 0, before = 0, split_start = 0, lines = 0;
    dpp_sequence_t q;
    for (;;) {
        rc = read_one(&st);
        if (rc < 0 || rc > 1) {
            dpp_source_fail(res, rc, "index %s: %s", t->rel_path,
                            st.broken              ? st.why
                            : st.reject_detail[0] ? st.reject_detail
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
            split_start = st.buf_off + st.at; /* the next line's start */
            lines = 0;
        }
        if (end)
            break;
    }
    /* the last range runs to the end of the file, with any lines after its
     * last document */
    if (push_pair(&bounds, &nb, &cap, nb ? st.buf_off + st.at : 0, sequences) != 0) {
        rc = dpp_source_fail(res, -ENOMEM, "index %s: out of memory", t->rel_path);
        goto out;
    }
    res->records = sequences;
    res->bounds = bounds;
    res->nbounds = nb;
    bounds = NULL;
    if (sequences == 0 && dpp_rejects_total(&st.rejects) > 0) {
        /* no split will read these lines: they are counted here */
        res->rejects = st.rejects;
        snprintf(res->reject_detail, sizeof res->reject_detail, "%s", st.reject_detail);
    }
    rc = 0;
out:
    free(bounds);
    state_close(&st);
    projection_free(proj);
    dpp_spec_close(&spec);
    return rc ? res->error : 0;
}

const dpp_source_ops_t dpp_source_jsonl = {
    .format = DPP_FORMAT_JSONL,
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
