/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet metadata (meta.h): FileMetaData, PageHeader and OffsetIndex read
 * with the compact-protocol reader, checked against the file they describe,
 * and the schema tree reduced to the top-level fields dpp reads. Field ids
 * are parquet-format's src/main/thrift/parquet.thrift. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errtext.h"
#include "base/util.h"
#include "dpp/error.h"
#include "parquet/meta.h"
#include "parquet/thrift.h"

/* Schema elements: a leaf column and the groups above it (a 3-level list
 * spends three on one column; structs share theirs among leaves). */
#define MAX_SCHEMA_ELEMENTS (4 * DPP_PQ_MAX_COLUMNS)

/* Bytes the dotted column paths may take. Every leaf repeats its ancestors'
 * names, so a small schema of long names nested deep could ask for a lot;
 * a file with row groups spells each path out in path_in_schema anyway. */
#define PATH_BUDGET(footer_len) (4 * (uint64_t)(footer_len) + (64u << 10))

/* The first byte a page can start at: after the leading "PAR1". */
#define FIRST_PAGE 4

enum { REQUIRED = 0, OPTIONAL = 1, REPEATED = 2 }; /* FieldRepetitionType */
enum { CONV_MAP = 1, CONV_MAP_KEY_VALUE = 2, CONV_LIST = 3, CONV_DECIMAL = 5 };
enum { CONV_UINT_8 = 11, CONV_UINT_64 = 14 }; /* UINT_8, UINT_16, UINT_32, UINT_64 */
enum { LOGICAL_MAP = 2, LOGICAL_LIST = 3, LOGICAL_DECIMAL = 5, LOGICAL_INTEGER = 10 };

static const char *const TYPE_NAMES[] = {
    "BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY",
};

/* A SchemaElement as read; -1 marks what is unset. The name points into
 * the footer. */
typedef struct schema_elem {
    const uint8_t *name;
    uint32_t name_len;
    int32_t type, type_length, repetition, num_children, converted, logical;
    int is_unsigned;  /* INTEGER(isSigned = false) as logical type */
    size_t at;        /* footer offset, for errors */
    int16_t def, rep; /* levels of the node, root excluded */
} schema_elem_t;

typedef struct parser {
    dpp_pq_thrift_t r;
    dpp_pq_meta_t *m;
    uint64_t file_size;
    uint64_t data_end; /* where the footer starts: pages lie in [FIRST_PAGE, data_end) */
    schema_elem_t *schema;
    uint32_t nschema;
    uint32_t *field_elem; /* schema index of each top-level field */
} parser_t;

/* The required fields of a struct, by id (all below 32): X(id, name). */
#define FILE_META_REQUIRED(X) X(2, "schema") X(3, "num_rows") X(4, "row_groups")
#define SCHEMA_ELEM_REQUIRED(X) X(4, "name")
#define ROW_GROUP_REQUIRED(X) X(1, "columns") X(3, "num_rows")
#define CHUNK_REQUIRED(X) X(3, "meta_data")
#define COLUMN_META_REQUIRED(X) X(1, "type") X(4, "codec") X(5, "num_values") X(7, "total_compressed_size") X(9, "data_page_offset")
#define PAGE_HEADER_REQUIRED(X) X(1, "type") X(2, "uncompressed_page_size") X(3, "compressed_page_size")
#define DATA_PAGE_REQUIRED(X) X(1, "num_values") X(2, "encoding") X(3, "definition_level_encoding") X(4, "repetition_level_encoding")
#define DICT_PAGE_REQUIRED(X) X(1, "num_values") X(2, "encoding")
#define DATA_PAGE_V2_REQUIRED(X) X(1, "num_values") X(2, "num_nulls") X(3, "num_rows") X(4, "encoding") X(5, "definition_levels_byte_length") X(6, "repetition_levels_byte_length")
#define PAGE_LOCATION_REQUIRED(X) X(1, "offset") X(2, "compressed_page_size") X(3, "first_row_index")
#define OFFSET_INDEX_REQUIRED(X) X(1, "page_locations")

/* Each list as names by id (for the error) and as a mask of ids (the check). */
#define REQUIRED_NAME(id, name) [id] = name,
#define REQUIRED_BIT(id, name) | (1u << (id))
#define REQUIRED_TABLES(list)                                                                     \
    static const char *const list##_NAMES[] = {list##_REQUIRED(REQUIRED_NAME)};                     \
    __attribute__((unused)) static const uint32_t list##_MASK = 0 list##_REQUIRED(REQUIRED_BIT);
REQUIRED_TABLES(FILE_META)
REQUIRED_TABLES(SCHEMA_ELEM)
REQUIRED_TABLES(ROW_GROUP)
REQUIRED_TABLES(CHUNK)
REQUIRED_TABLES(COLUMN_META)
REQUIRED_TABLES(PAGE_HEADER)
REQUIRED_TABLES(DATA_PAGE)
REQUIRED_TABLES(DICT_PAGE)
REQUIRED_TABLES(DATA_PAGE_V2)
REQUIRED_TABLES(PAGE_LOCATION)
REQUIRED_TABLES(OFFSET_INDEX)

static int check_required(dpp_pq_thrift_t *r, size_t at, const char *what, uint32_t seen,
                          const char *const *names, size_t nnames)
{
    for (size_t id = 0; id < nnames; id++)
        if (names[id] && !(seen >> id & 1))
            return dpp_pq_thrift_fail(r, at, "%s lacks its %s (field %zu)", what, names[id], id);
    return 0;
}
#define NELEMS(a) (sizeof(a) / sizeof(*(a)))
/* 0 when every required field of `list` was seen; else the error naming one. */
#define REQUIRE(r, at, what, seen, list)                                                          \
    (((seen) & list##_MASK) == list##_MASK                                                        \
         ? 0                                                                                      \
         : check_required(r, at, what, seen, list##_NAMES, NELEMS(list##_NAMES)))

/* The next field of a struct; `seen` collects the ids below 32, and one
 * appearing twice is refused (it would overwrite, or leak, the first). */
static inline int next_field(dpp_pq_thrift_t *r, dpp_pq_tfield_t *f, uint32_t *seen)
{
    int rc = dpp_pq_thrift_field(r, f);
    if (rc || f->type == DPP_PQ_T_STOP || f->id < 0 || f->id >= 32)
        return rc;
    if (*seen >> f->id & 1)
        return dpp_pq_thrift_fail(r, f->at, "field %d appears twice", f->id);
    *seen |= 1u << f->id;
    return 0;
}

/* ---- memory ----------------------------------------------------------------
 * Everything a dpp_pq_meta_t points to comes from blocks chained at its
 * `mem` and is freed at once: a footer of 42 columns made some 100 small
 * allocations and frees, a third of a small file's footer parse in a
 * worker's pipeline threads (glibc's thread arenas trim and regrow). */

struct dpp_pq_mem {
    struct dpp_pq_mem *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define MEM_FIRST_BLOCK (16u << 10)

/* count x size zeroed bytes that live as long as m; NULL when out of memory
 * or when the product overflows. */
static void *meta_calloc(dpp_pq_meta_t *m, size_t count, size_t size)
{
    if (size && count > (SIZE_MAX - 64) / size)
        return NULL;
    size_t n = (count * size + 15) & ~(size_t)15;
    struct dpp_pq_mem *b = m->mem;
    if (b == NULL || b->cap - b->used < n) {
        size_t cap = b ? 2 * b->cap : MEM_FIRST_BLOCK;
        if (cap < n)
            cap = n;
        struct dpp_pq_mem *nb = malloc(sizeof *nb + cap);
        if (nb == NULL)
            return NULL;
        *nb = (struct dpp_pq_mem){.next = b, .cap = cap};
        m->mem = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return memset(p, 0, n);
}

static char *dup_bytes(dpp_pq_meta_t *m, const uint8_t *p, size_t n)
{
    char *s = meta_calloc(m, n + 1, 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

static const char *type_name(int32_t type)
{
    return type >= 0 && type <= DPP_PQ_FIXED_LEN_BYTE_ARRAY ? TYPE_NAMES[type] : "an unknown type";
}

/* IntType (parquet.thrift): bitWidth = 1, isSigned = 2. */
static int parse_int_type(dpp_pq_thrift_t *r, int *is_unsigned)
{
    dpp_pq_tfield_t f = {0};
    int rc;
    while ((rc = dpp_pq_thrift_field(r, &f)) == 0 && f.type != DPP_PQ_T_STOP) {
        int is_signed;
        if (f.id == 2 && (rc = dpp_pq_thrift_bool(r, &f, &is_signed)) == 0)
            *is_unsigned = !is_signed;
        else if (f.id != 2)
            rc = dpp_pq_thrift_skip(r, &f);
        if (rc)
            return rc;
    }
    return rc;
}

/* The member of a LogicalType union that is set (and of an INTEGER, its
 * signedness). */
static int parse_logical_type(dpp_pq_thrift_t *r, schema_elem_t *e)
{
    dpp_pq_tfield_t f = {0};
    int rc;
    while ((rc = dpp_pq_thrift_field(r, &f)) == 0 && f.type != DPP_PQ_T_STOP) {
        if (e->logical < 0)
            e->logical = f.id;
        if (f.id == LOGICAL_INTEGER && f.type == DPP_PQ_T_STRUCT) {
            if ((rc = dpp_pq_thrift_enter(r, &f)) == 0)
                rc = parse_int_type(r, &e->is_unsigned);
        } else {
            rc = dpp_pq_thrift_skip(r, &f);
        }
        if (rc)
            return rc;
    }
    return rc;
}

static int parse_schema_elem(dpp_pq_thrift_t *r, schema_elem_t *e)
{
    dpp_pq_tfield_t f = {0};
    uint32_t seen = 0;
    int rc;
    *e = (schema_elem_t){.type = -1,
                         .type_length = -1,
                         .repetition = -1,
                         .num_children = -1,
                         .converted = -1,
                         .logical = -1,
                         .at = r->pos};
    while ((rc = next_field(r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        switch (f.id) {
        case 1:
            rc = dpp_pq_thrift_i32(r, &f, &e->type);
            break;
        case 2:
            rc = dpp_pq_thrift_i32(r, &f, &e->type_length);
            break;
        case 3:
            rc = dpp_pq_thrift_i32(r, &f, &e->repetition);
            break;
        case 4:
            rc = dpp_pq_thrift_binary(r, &f, &e->name, &e->name_len);
            break;
        case 5:
            rc = dpp_pq_thrift_i32(r, &f, &e->num_children);
            break;
        case 6:
            rc = dpp_pq_thrift_i32(r, &f, &e->converted);
            break;
        case 10:
            if ((rc = dpp_pq_thrift_enter(r, &f)) == 0)
                rc = parse_logical_type(r, e);
            break;
        default:
            rc = dpp_pq_thrift_skip(r, &f);
        }
        if (rc)
            return rc;
    }
    return rc ? rc : REQUIRE(r, e->at, "SchemaElement", seen, SCHEMA_ELEM);
}

static int parse_schema(parser_t *p, const dpp_pq_tfield_t *f)
{
    uint32_t n;
    int rc = dpp_pq_thrift_list(&p->r, f, DPP_PQ_T_STRUCT, &n);
    if (rc)
        return rc;
    if (n == 0)
        return dpp_pq_thrift_fail(&p->r, f->at, "the schema is empty");
    if (n > MAX_SCHEMA_ELEMENTS)
        return dpp_pq_thrift_fail(&p->r, f->at, "the schema has %u elements, more than %u", n,
                                  MAX_SCHEMA_ELEMENTS);
    p->schema = malloc((size_t)n * sizeof *p->schema);
    if (p->schema == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        if ((rc = dpp_pq_thrift_enter(&p->r, NULL)) != 0 ||
            (rc = parse_schema_elem(&p->r, &p->schema[i])) != 0)
            return rc;
        p->nschema++;
    }
    return 0;
}

/* A primitive: has a type and no children (a group has num_children). */
static int is_leaf(const schema_elem_t *e)
{
    return e->type >= 0 && e->num_children <= 0;
}

static int is_list(const schema_elem_t *e)
{
    return e->converted == CONV_LIST || e->logical == LOGICAL_LIST;
}

static int is_map(const schema_elem_t *e)
{
    return e->converted == CONV_MAP || e->converted == CONV_MAP_KEY_VALUE ||
           e->logical == LOGICAL_MAP;
}

static int is_single(const schema_elem_t *e)
{
    return e->repetition == REQUIRED || e->repetition == OPTIONAL;
}

/* Adds leaf e, whose ancestors below the root are stack[1..depth). */
static int add_column(parser_t *p, const schema_elem_t *e, const uint32_t *stack, int depth,
                      uint64_t *path_bytes)
{
    dpp_pq_meta_t *m = p->m;
    size_t len = e->name_len + 1;
    for (int i = 1; i < depth; i++)
        len += p->schema[stack[i]].name_len + 1;
    *path_bytes += len;
    if (*path_bytes > PATH_BUDGET(p->r.len))
        return dpp_pq_thrift_fail(
            &p->r, e->at,
            "the column paths take more than %llu bytes, too many for a footer of %zu",
            (unsigned long long)PATH_BUDGET(p->r.len), p->r.len);
    char *path = meta_calloc(m, len, 1), *w = path;
    if (path == NULL)
        return -ENOMEM;
    for (int i = 1; i < depth; i++) {
        const schema_elem_t *g = &p->schema[stack[i]];
        memcpy(w, g->name, g->name_len);
        w += g->name_len;
        *w++ = '.';
    }
    memcpy(w, e->name, e->name_len);
    w[e->name_len] = '\0';
    m->columns[m->ncolumns++] = (dpp_pq_column_t){
        .path = path,
        .type = (dpp_pq_type_t)e->type,
        .type_length = e->type_length < 0 ? 0 : e->type_length,
        .max_def = e->def,
        .max_rep = e->rep,
        .converted_type = e->converted,
        .logical_type = e->logical,
        .is_decimal = e->converted == CONV_DECIMAL || e->logical == LOGICAL_DECIMAL,
        .is_unsigned =
            (e->converted >= CONV_UINT_8 && e->converted <= CONV_UINT_64) || e->is_unsigned,
    };
    return 0;
}

/* Walks the depth-first schema list into leaf columns with their levels and
 * records the top-level fields; checks that children counts add up. */
static int flatten(parser_t *p)
{
    dpp_pq_thrift_t *r = &p->r;
    dpp_pq_meta_t *m = p->m;
    schema_elem_t *s = p->schema;
    uint32_t n = p->nschema, nleaves = 0;
    uint32_t stack[DPP_PQ_MAX_DEPTH]; /* groups from the root down */
    int32_t left[DPP_PQ_MAX_DEPTH];   /* children each has yet to see */
    int depth = 1;
    uint64_t path_bytes = 0;

    if (s[0].num_children < 0 || s[0].num_children > (int64_t)n - 1)
        return dpp_pq_thrift_fail(r, s[0].at,
                                  "the schema root has num_children %d in a schema of %u elements",
                                  s[0].num_children, n);
    for (uint32_t i = 1; i < n; i++)
        nleaves += is_leaf(&s[i]);
    if (nleaves > DPP_PQ_MAX_COLUMNS)
        return dpp_pq_thrift_fail(r, s[0].at, "the schema has %u columns, more than %d", nleaves,
                                  DPP_PQ_MAX_COLUMNS);
    if (nleaves && (m->columns = meta_calloc(m, nleaves, sizeof *m->columns)) == NULL)
        return -ENOMEM;
    if (s[0].num_children &&
        ((m->fields = meta_calloc(m, (size_t)s[0].num_children, sizeof *m->fields)) == NULL ||
         (p->field_elem = calloc((size_t)s[0].num_children, sizeof *p->field_elem)) == NULL))
        return -ENOMEM;

    s[0].def = s[0].rep = 0;
    stack[0] = 0;
    left[0] = s[0].num_children;
    for (uint32_t i = 1; i < n; i++) {
        schema_elem_t *e = &s[i];
        while (depth > 0 && left[depth - 1] == 0)
            depth--;
        if (depth == 0)
            return dpp_pq_thrift_fail(
                r, e->at, "schema element %u (\"%.*s\") lies outside the root's %d children", i,
                (int)e->name_len, (const char *)e->name, s[0].num_children);
        const schema_elem_t *parent = &s[stack[depth - 1]];
        left[depth - 1]--;
        if (e->repetition < 0)
            return dpp_pq_thrift_fail(r, e->at, "schema element \"%.*s\" has no repetition_type",
                                      (int)e->name_len, (const char *)e->name);
        /* Levels count the optional and repeated nodes on the path; an
         * unknown repetition (VECTOR, ...) makes its field unsupported. */
        e->def = (int16_t)(parent->def + (e->repetition == OPTIONAL || e->repetition == REPEATED));
        e->rep = (int16_t)(parent->rep + (e->repetition == REPEATED));
        if (depth == 1) {
            dpp_pq_field_t *fd = &m->fields[m->nfields];
            if ((fd->name = dup_bytes(m, e->name, e->name_len)) == NULL)
                return -ENOMEM;
            fd->column = m->ncolumns;
            p->field_elem[m->nfields++] = i;
        }
        if (is_leaf(e)) {
            if (e->type > DPP_PQ_FIXED_LEN_BYTE_ARRAY)
                return dpp_pq_thrift_fail(r, e->at, "column \"%.*s\" has unknown type %d",
                                          (int)e->name_len, (const char *)e->name, e->type);
            if (e->type == DPP_PQ_FIXED_LEN_BYTE_ARRAY && e->type_length < 0)
                return dpp_pq_thrift_fail(r, e->at,
                                          "FIXED_LEN_BYTE_ARRAY column \"%.*s\" has no type_length",
                                          (int)e->name_len, (const char *)e->name);
            int rc = add_column(p, e, stack, depth, &path_bytes);
            if (rc)
                return rc;
            continue;
        }
        if (e->num_children < 0)
            return dpp_pq_thrift_fail(r, e->at,
                                      "schema element \"%.*s\" has neither a type nor num_children",
                                      (int)e->name_len, (const char *)e->name);
        if (e->num_children > (int64_t)(n - 1 - i))
            return dpp_pq_thrift_fail(
                r, e->at, "group \"%.*s\" claims %d children, the schema has %u elements after it",
                (int)e->name_len, (const char *)e->name, e->num_children, n - 1 - i);
        if (depth == DPP_PQ_MAX_DEPTH)
            return dpp_pq_thrift_fail(r, e->at, "the schema nests deeper than %d levels",
                                      DPP_PQ_MAX_DEPTH);
        stack[depth] = i;
        left[depth++] = e->num_children;
    }
    while (depth > 0 && left[depth - 1] == 0)
        depth--;
    if (depth > 0)
        return dpp_pq_thrift_fail(r, s[stack[depth - 1]].at,
                                  "group \"%.*s\" lacks %d of its children",
                                  (int)s[stack[depth - 1]].name_len,
                                  (const char *)s[stack[depth - 1]].name, left[depth - 1]);
    return 0;
}

/* The shape of the top-level field at schema index i (LogicalTypes.md
 * "Lists", with its backward-compatibility rules). flatten() has checked
 * that every group's children follow it. */
static void classify(const schema_elem_t *s, uint32_t i, dpp_pq_field_t *fd)
{
    const schema_elem_t *f = &s[i], *list = &s[i + 1], *elem = NULL;
    const char *why = NULL;

    fd->shape = DPP_PQ_UNSUPPORTED;
    if (is_leaf(f)) {
        if (is_single(f)) {
            fd->shape = DPP_PQ_SCALAR;
            return;
        }
        if (f->repetition == REPEATED) {
            /* An unannotated repeated field: a required list of required elements. */
            fd->shape = DPP_PQ_LIST;
            fd->def_list = 0;
            fd->def_elem = 1;
            return;
        }
        snprintf(fd->why, sizeof fd->why, "a field of repetition_type %d", f->repetition);
        return;
    }
    if (is_map(f))
        why = "a MAP";
    else if (!is_list(f))
        why = f->repetition == REPEATED ? "a repeated group" : "a struct (group without LIST)";
    else if (!is_single(f))
        why = "a LIST group that is not optional or required";
    else if (f->num_children != 1)
        why = "a LIST group without exactly one child";
    else if (list->repetition != REPEATED)
        why = "a LIST group whose child is not repeated";
    else if (is_leaf(list))
        elem = list; /* 2-level: the repeated primitive is the element */
    else if (list->num_children != 1 ||
             (list->name_len == 5 && memcmp(list->name, "array", 5) == 0) ||
             (list->name_len == f->name_len + 6 && memcmp(list->name, f->name, f->name_len) == 0 &&
              memcmp(list->name + f->name_len, "_tuple", 6) == 0))
        why = "a list of structs"; /* the repeated group itself is the element */
    else if (is_leaf(&s[i + 2]) && is_single(&s[i + 2]))
        elem = &s[i + 2];
    else if (is_leaf(&s[i + 2]) || is_list(&s[i + 2]) || s[i + 2].repetition == REPEATED)
        why = "a list of lists";
    else
        why = is_map(&s[i + 2]) ? "a list of MAPs" : "a list of structs";

    if (elem) {
        fd->shape = DPP_PQ_LIST;
        fd->def_list = f->def;
        fd->def_elem = list->def;
    } else {
        snprintf(fd->why, sizeof fd->why, "%s", why);
    }
}

/* Fails with "row group R column C ("path"): ...". */
static int chunk_fail(parser_t *p, size_t at, uint32_t rg, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int chunk_fail(parser_t *p, size_t at, uint32_t rg, uint32_t col, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return dpp_pq_thrift_fail(&p->r, at, "row group %u column %u (\"%s\"): %s", rg, col,
                              p->m->columns[col].path, what);
}

/* Whether a page offset named `what` lies in the file's column data. */
static int check_offset(parser_t *p, size_t at, uint32_t rg, uint32_t col, const char *what,
                        int64_t off)
{
    if (off < FIRST_PAGE)
        return chunk_fail(p, at, rg, col, "%s %lld lies before the first page (byte %d)", what,
                          (long long)off, FIRST_PAGE);
    if ((uint64_t)off >= p->file_size)
        return chunk_fail(p, at, rg, col, "%s %lld is past the end of the file (%llu bytes)", what,
                          (long long)off, (unsigned long long)p->file_size);
    if ((uint64_t)off >= p->data_end)
        return chunk_fail(p, at, rg, col, "%s %lld lies in the footer, which starts at byte %llu",
                          what, (long long)off, (unsigned long long)p->data_end);
    return 0;
}

static int parse_column_meta(dpp_pq_thrift_t *r, dpp_pq_chunk_t *c)
{
    dpp_pq_tfield_t f = {0};
    uint32_t seen = 0;
    size_t at = r->pos;
    int32_t v;
    int rc;
    while ((rc = next_field(r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        switch (f.id) {
        case 1:
            if ((rc = dpp_pq_thrift_i32(r, &f, &v)) == 0)
                c->type = (dpp_pq_type_t)v;
            break;
        case 4:
            if ((rc = dpp_pq_thrift_i32(r, &f, &v)) == 0)
                c->codec = (dpp_pq_codec_t)v;
            break;
        case 5:
            rc = dpp_pq_thrift_i64(r, &f, &c->num_values);
            break;
        case 7:
            rc = dpp_pq_thrift_i64(r, &f, &c->total_compressed_size);
            break;
        case 9:
            rc = dpp_pq_thrift_i64(r, &f, &c->data_page_offset);
            break;
        case 11:
            rc = dpp_pq_thrift_i64(r, &f, &c->dictionary_page_offset);
            break;
        default:
            rc = dpp_pq_thrift_skip(r, &f);
        }
        if (rc)
            return rc;
    }
    /* Some writers store 0 for "no dictionary"; byte 0 is the magic. */
    if (c->dictionary_page_offset == 0)
        c->dictionary_page_offset = -1;
    return rc ? rc : REQUIRE(r, at, "ColumnMetaData", seen, COLUMN_META);
}

/* Reads and checks column chunk `col` of row group `rg`. */
static int parse_chunk(parser_t *p, uint32_t rg, uint32_t col, dpp_pq_chunk_t *c)
{
    dpp_pq_thrift_t *r = &p->r;
    const dpp_pq_column_t *column = &p->m->columns[col];
    dpp_pq_tfield_t f = {0};
    uint32_t seen = 0;
    size_t at = r->pos;
    int rc;

    *c = (dpp_pq_chunk_t){
        .dictionary_page_offset = -1, .offset_index_offset = -1, .offset_index_length = -1};
    while ((rc = next_field(r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        switch (f.id) {
        case 1:
            return chunk_fail(p, at, rg, col,
                              "its data lies in another file (file_path), which is not supported");
        case 3:
            if ((rc = dpp_pq_thrift_enter(r, &f)) == 0)
                rc = parse_column_meta(r, c);
            break;
        case 4:
            rc = dpp_pq_thrift_i64(r, &f, &c->offset_index_offset);
            break;
        case 5:
            rc = dpp_pq_thrift_i32(r, &f, &c->offset_index_length);
            break;
        case 8: /* crypto_metadata */
        case 9: /* encrypted_column_metadata */
            c->encrypted = 1;
            rc = dpp_pq_thrift_skip(r, &f);
            break;
        default:
            rc = dpp_pq_thrift_skip(r, &f);
        }
        if (rc)
            return rc;
    }
    if (rc || (rc = REQUIRE(r, at, "ColumnChunk", seen, CHUNK)) != 0)
        return rc;

    if (c->type != column->type)
        return chunk_fail(p, at, rg, col, "has type %s, the schema says %s", type_name(c->type),
                          type_name(column->type));
    if (c->num_values < 0 || c->total_compressed_size < 0)
        return chunk_fail(p, at, rg, col,
                          "negative num_values (%lld) or total_compressed_size (%lld)",
                          (long long)c->num_values, (long long)c->total_compressed_size);
    int64_t start = c->data_page_offset;
    if ((rc = check_offset(p, at, rg, col, "data_page_offset", start)) != 0)
        return rc;
    if (c->dictionary_page_offset != -1) {
        if ((rc = check_offset(p, at, rg, col, "dictionary_page_offset",
                               c->dictionary_page_offset)) != 0)
            return rc;
        if (c->dictionary_page_offset < start)
            start = c->dictionary_page_offset;
    }
    if ((uint64_t)c->total_compressed_size > p->data_end - (uint64_t)start)
        return chunk_fail(
            p, at, rg, col, "%lld bytes from byte %lld run into the footer at byte %llu",
            (long long)c->total_compressed_size, (long long)start, (unsigned long long)p->data_end);
    if (c->offset_index_offset != -1) {
        if ((rc = check_offset(p, at, rg, col, "offset_index_offset", c->offset_index_offset)))
            return rc;
        if (c->offset_index_length < 0 ||
            (uint64_t)c->offset_index_length > p->data_end - (uint64_t)c->offset_index_offset)
            return chunk_fail(
                p, at, rg, col,
                "offset index of %d bytes at byte %lld does not end before the footer at byte %llu",
                c->offset_index_length, (long long)c->offset_index_offset,
                (unsigned long long)p->data_end);
    }
    return 0;
}

static int parse_chunks(parser_t *p, const dpp_pq_tfield_t *f, uint32_t rg, dpp_pq_row_group_t *g)
{
    uint32_t n, ncolumns = p->m->ncolumns;
    int rc = dpp_pq_thrift_list(&p->r, f, DPP_PQ_T_STRUCT, &n);
    if (rc)
        return rc;
    if (n != ncolumns)
        return dpp_pq_thrift_fail(&p->r, f->at, "row group %u has %u column chunks for %u columns",
                                  rg, n, ncolumns);
    if (n && (g->chunks = meta_calloc(p->m, n, sizeof *g->chunks)) == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        if ((rc = dpp_pq_thrift_enter(&p->r, NULL)) != 0 ||
            (rc = parse_chunk(p, rg, i, &g->chunks[i])) != 0)
            return rc;
    return 0;
}

static int parse_row_group(parser_t *p, uint32_t rg, dpp_pq_row_group_t *g)
{
    dpp_pq_thrift_t *r = &p->r;
    dpp_pq_tfield_t f = {0};
    uint32_t seen = 0;
    size_t at = r->pos;
    int rc;
    while ((rc = next_field(r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        switch (f.id) {
        case 1:
            rc = parse_chunks(p, &f, rg, g);
            break;
        case 3:
            if ((rc = dpp_pq_thrift_i64(r, &f, &g->num_rows)) == 0 && g->num_rows < 0)
                rc = dpp_pq_thrift_fail(r, f.at, "row group %u: num_rows %lld is negative", rg,
                                        (long long)g->num_rows);
            break;
        default:
            rc = dpp_pq_thrift_skip(r, &f);
        }
        if (rc)
            return rc;
    }
    return rc ? rc : REQUIRE(r, at, "RowGroup", seen, ROW_GROUP);
}

/* The row groups' sum of rows; checked against num_rows by the caller,
 * which may not have read it yet. */
static int parse_row_groups(parser_t *p, const dpp_pq_tfield_t *f, int64_t *rows)
{
    dpp_pq_meta_t *m = p->m;
    uint32_t n;
    int rc = dpp_pq_thrift_list(&p->r, f, DPP_PQ_T_STRUCT, &n);
    if (rc)
        return rc;
    if (n > DPP_PQ_MAX_ROW_GROUPS)
        return dpp_pq_thrift_fail(&p->r, f->at, "%u row groups, more than %d", n,
                                  DPP_PQ_MAX_ROW_GROUPS);
    if (n && (m->row_groups = meta_calloc(m, n, sizeof *m->row_groups)) == NULL)
        return -ENOMEM;
    m->nrow_groups = n;
    *rows = 0;
    for (uint32_t i = 0; i < n; i++) {
        dpp_pq_row_group_t *g = &m->row_groups[i];
        if ((rc = dpp_pq_thrift_enter(&p->r, NULL)) != 0 || (rc = parse_row_group(p, i, g)) != 0)
            return rc;
        if (g->num_rows > INT64_MAX - *rows)
            return dpp_pq_thrift_fail(&p->r, f->at, "the row groups hold more than 2^63 rows");
        g->first_row = *rows;
        *rows += g->num_rows;
    }
    return 0;
}

/* The schema's columns and top-level fields, once its elements are read. */
static int schema_done(parser_t *p)
{
    int rc = flatten(p);
    for (uint32_t i = 0; rc == 0 && i < p->m->nfields; i++)
        classify(p->schema, p->field_elem[i], &p->m->fields[i]);
    return rc;
}

static int parse_file_meta(parser_t *p)
{
    dpp_pq_thrift_t *r = &p->r;
    dpp_pq_meta_t *m = p->m;
    dpp_pq_tfield_t f = {0}, row_groups = {0};
    size_t row_groups_pos = 0, row_groups_at = 0;
    uint32_t seen = 0;
    int64_t rows = 0;
    const uint8_t *s;
    uint32_t n;
    int rc = dpp_pq_thrift_enter(r, NULL);

    while (rc == 0 && (rc = next_field(r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        switch (f.id) {
        case 1:
            rc = dpp_pq_thrift_i32(r, &f, &m->version);
            break;
        case 2:
            if ((rc = parse_schema(p, &f)) == 0)
                rc = schema_done(p);
            break;
        case 3:
            if ((rc = dpp_pq_thrift_i64(r, &f, &m->num_rows)) == 0 && m->num_rows < 0)
                rc = dpp_pq_thrift_fail(r, f.at, "num_rows %lld is negative",
                                        (long long)m->num_rows);
            break;
        case 4:
            row_groups_at = f.at;
            if (seen >> 2 & 1) { /* the schema, which checking chunks needs, came first */
                rc = parse_row_groups(p, &f, &rows);
                break;
            }
            /* Read after the rest: the struct's field order does not
             * promise to put the schema first (writers do). */
            row_groups = f;
            row_groups_pos = r->pos;
            rc = dpp_pq_thrift_skip(r, &f);
            break;
        case 6:
            if ((rc = dpp_pq_thrift_binary(r, &f, &s, &n)) == 0 &&
                (m->created_by = dup_bytes(m, s, n)) == NULL)
                rc = -ENOMEM;
            break;
        default:
            rc = dpp_pq_thrift_skip(r, &f);
        }
    }
    /* Bytes after the struct are left alone: a plaintext footer of an
     * encrypted file ends with a signature there. */
    if (rc || (rc = REQUIRE(r, 0, "FileMetaData", seen, FILE_META)) != 0)
        return rc;
    if (row_groups_pos) {
        r->pos = row_groups_pos;
        r->depth = 1;
        if ((rc = parse_row_groups(p, &row_groups, &rows)) != 0)
            return rc;
    }
    if (rows != m->num_rows)
        return dpp_pq_thrift_fail(r, row_groups_at,
                                  "the row groups hold %lld rows, num_rows says %lld",
                                  (long long)rows, (long long)m->num_rows);
    return 0;
}

int dpp_pq_meta_parse(const uint8_t *buf, size_t len, uint64_t file_size, dpp_pq_meta_t *m,
                      char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (file_size < 12 || len > file_size - 12)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "a footer of %zu bytes does not fit a file of %llu bytes", len,
                        (unsigned long long)file_size);
    parser_t p = {.m = m, .file_size = file_size, .data_end = file_size - 8 - len};
    dpp_pq_thrift_init(&p.r, buf, len, len, "footer", err, errlen);
    int rc = parse_file_meta(&p);
    free(p.schema);
    free(p.field_elem);
    if (rc)
        dpp_pq_meta_free(m);
    return rc;
}

void dpp_pq_meta_free(dpp_pq_meta_t *m)
{
    if (m == NULL)
        return;
    for (struct dpp_pq_mem *b = m->mem, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    memset(m, 0, sizeof *m);
}

const dpp_pq_field_t *dpp_pq_meta_field(const dpp_pq_meta_t *m, const char *name)
{
    for (uint32_t i = 0; i < m->nfields; i++)
        if (strcmp(m->fields[i].name, name) == 0)
            return &m->fields[i];
    return NULL;
}

int dpp_pq_footer_locate(const uint8_t tail[8], uint64_t file_size, uint32_t *footer_len, char *err,
                         size_t errlen)
{
    if (file_size < 12)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "%llu bytes are too few for a Parquet file (at least 12)",
                        (unsigned long long)file_size);
    if (memcmp(tail + 4, "PARE", 4) == 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "the footer is encrypted (magic PARE), which is not supported");
    if (memcmp(tail + 4, "PAR1", 4) != 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "not a Parquet file: it ends in %02x %02x %02x %02x, not \"PAR1\"", tail[4],
                        tail[5], tail[6], tail[7]);
    uint32_t len = dpp_load_le32(tail);
    if (len > file_size - 12)
        return dpp_errf(DPP_ECORRUPT, err, errlen,
                        "the footer length %u does not fit a file of %llu bytes", len,
                        (unsigned long long)file_size);
    if (len > DPP_PQ_MAX_FOOTER)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "the footer length %u exceeds the limit of %u",
                        len, DPP_PQ_MAX_FOOTER);
    *footer_len = len;
    return 0;
}

/* The header of a page type (DataPageHeader, DictionaryPageHeader,
 * DataPageHeaderV2): the fields read are the required ones, all i32
 * (encodings are i32 enums on the wire), into v[id]; and v2's optional
 * is_compressed. */
static int parse_subheader(dpp_pq_thrift_t *r, const char *what, const char *const *required,
                           size_t nrequired, int32_t *v, int *is_compressed)
{
    dpp_pq_tfield_t f = {0};
    uint32_t seen = 0;
    size_t at = r->pos;
    int rc;
    while ((rc = next_field(r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        if (f.id > 0 && (size_t)f.id < nrequired && required[f.id])
            rc = dpp_pq_thrift_i32(r, &f, &v[f.id]);
        else if (f.id == 7 && is_compressed)
            rc = dpp_pq_thrift_bool(r, &f, is_compressed);
        else
            rc = dpp_pq_thrift_skip(r, &f);
        if (rc)
            return rc;
    }
    return rc ? rc : check_required(r, at, what, seen, required, nrequired);
}

static int check_page_header(dpp_pq_thrift_t *r, const dpp_pq_page_header_t *h)
{
    const int32_t sizes[] = {h->uncompressed_size, h->compressed_size};
    for (int i = 0; i < 2; i++)
        if (sizes[i] < 0 || (uint32_t)sizes[i] > DPP_PQ_MAX_PAGE)
            return dpp_pq_thrift_fail(r, 0, "%s %d is outside 0..%u",
                                      i ? "compressed_page_size" : "uncompressed_page_size",
                                      sizes[i], DPP_PQ_MAX_PAGE);
    if (h->num_values < 0)
        return dpp_pq_thrift_fail(r, 0, "num_values %d is negative", h->num_values);
    if (h->type != DPP_PQ_DATA_PAGE_V2)
        return 0;
    if (h->num_nulls < 0 || h->num_nulls > h->num_values || h->num_rows < 0)
        return dpp_pq_thrift_fail(r, 0, "num_nulls %d or num_rows %d out of range for %d values",
                                  h->num_nulls, h->num_rows, h->num_values);
    int64_t levels = (int64_t)h->def_levels_len + h->rep_levels_len;
    if (h->def_levels_len < 0 || h->rep_levels_len < 0 || levels > h->compressed_size ||
        levels > h->uncompressed_size)
        return dpp_pq_thrift_fail(
            r, 0, "level lengths %d + %d do not fit a page of %d bytes (%d uncompressed)",
            h->def_levels_len, h->rep_levels_len, h->compressed_size, h->uncompressed_size);
    return 0;
}

int dpp_pq_page_header_parse(const uint8_t *buf, size_t len, dpp_pq_page_header_t *h,
                             size_t *consumed, char *err, size_t errlen)
{
    /* PageHeader fields 1-4 into top[id]; the type's own header, whichever
     * order the fields come in, into sub[type][id]. */
    static const int16_t SUBHEADER_FIELD[] = {[DPP_PQ_DATA_PAGE] = 5,
                                              [DPP_PQ_INDEX_PAGE] = 0,
                                              [DPP_PQ_DICTIONARY_PAGE] = 7,
                                              [DPP_PQ_DATA_PAGE_V2] = 8};
    dpp_pq_thrift_t r;
    dpp_pq_tfield_t f = {0};
    int32_t top[5] = {0}, sub[4][7] = {{0}};
    int is_compressed = 1;
    uint32_t seen = 0;
    int rc;

    dpp_pq_thrift_init(&r, buf, len, DPP_PQ_MAX_FOOTER, "page header", err, errlen);
    rc = dpp_pq_thrift_enter(&r, NULL);
    while (rc == 0 && (rc = next_field(&r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        switch (f.id) {
        case 1:
        case 2:
        case 3:
        case 4:
            rc = dpp_pq_thrift_i32(&r, &f, &top[f.id]);
            break;
        case 5:
            if ((rc = dpp_pq_thrift_enter(&r, &f)) == 0)
                rc = parse_subheader(&r, "DataPageHeader", DATA_PAGE_NAMES,
                                     NELEMS(DATA_PAGE_NAMES), sub[DPP_PQ_DATA_PAGE], NULL);
            break;
        case 7:
            if ((rc = dpp_pq_thrift_enter(&r, &f)) == 0)
                rc = parse_subheader(&r, "DictionaryPageHeader", DICT_PAGE_NAMES,
                                     NELEMS(DICT_PAGE_NAMES), sub[DPP_PQ_DICTIONARY_PAGE], NULL);
            break;
        case 8:
            if ((rc = dpp_pq_thrift_enter(&r, &f)) == 0)
                rc = parse_subheader(&r, "DataPageHeaderV2", DATA_PAGE_V2_NAMES,
                                     NELEMS(DATA_PAGE_V2_NAMES), sub[DPP_PQ_DATA_PAGE_V2],
                                     &is_compressed);
            break;
        default:
            rc = dpp_pq_thrift_skip(&r, &f);
        }
    }
    if (rc || (rc = REQUIRE(&r, 0, "PageHeader", seen, PAGE_HEADER)) != 0)
        return rc;
    int32_t type = top[1];
    if (type < 0 || type > DPP_PQ_DATA_PAGE_V2)
        return dpp_pq_thrift_fail(&r, 0, "unknown page type %d", type);
    if (SUBHEADER_FIELD[type] && !(seen >> SUBHEADER_FIELD[type] & 1))
        return dpp_pq_thrift_fail(&r, 0, "a page of type %d lacks its header (field %d)", type,
                                  SUBHEADER_FIELD[type]);
    const int32_t *v = sub[type];
    *h = (dpp_pq_page_header_t){
        .type = (dpp_pq_page_type_t)type,
        .uncompressed_size = top[2],
        .compressed_size = top[3],
        .has_crc = seen >> 4 & 1,
        .crc = (uint32_t)top[4],
        .num_values = v[1],
        .is_compressed = type == DPP_PQ_DATA_PAGE_V2 ? is_compressed : 1,
    };
    if (type == DPP_PQ_DATA_PAGE_V2) {
        h->num_nulls = v[2];
        h->num_rows = v[3];
        h->encoding = (dpp_pq_encoding_t)v[4];
        h->def_levels_len = v[5];
        h->rep_levels_len = v[6];
    } else {
        h->encoding = (dpp_pq_encoding_t)v[2];
        h->def_encoding = (dpp_pq_encoding_t)v[3];
        h->rep_encoding = (dpp_pq_encoding_t)v[4];
    }
    if ((rc = check_page_header(&r, h)) != 0)
        return rc;
    *consumed = r.pos;
    return 0;
}

static int parse_page_location(dpp_pq_thrift_t *r, dpp_pq_page_loc_t *loc)
{
    dpp_pq_tfield_t f = {0};
    uint32_t seen = 0;
    size_t at = r->pos;
    int rc;
    while ((rc = next_field(r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        if (f.id == 1)
            rc = dpp_pq_thrift_i64(r, &f, &loc->offset);
        else if (f.id == 2)
            rc = dpp_pq_thrift_i32(r, &f, &loc->compressed_page_size);
        else if (f.id == 3)
            rc = dpp_pq_thrift_i64(r, &f, &loc->first_row_index);
        else
            rc = dpp_pq_thrift_skip(r, &f);
        if (rc)
            return rc;
    }
    return rc ? rc : REQUIRE(r, at, "PageLocation", seen, PAGE_LOCATION);
}

/* Pages in file order, each after the one before and starting a later row;
 * the first starts the row group. */
static int check_page_location(dpp_pq_thrift_t *r, size_t at, size_t i,
                               const dpp_pq_page_loc_t *loc)
{
    const dpp_pq_page_loc_t *prev = i ? loc - 1 : NULL;
    if (loc->offset < 0 || loc->compressed_page_size <= 0 || loc->first_row_index < 0)
        return dpp_pq_thrift_fail(r, at, "page %zu: offset %lld, size %d, first row %lld", i,
                                  (long long)loc->offset, loc->compressed_page_size,
                                  (long long)loc->first_row_index);
    if (prev == NULL && loc->first_row_index != 0)
        return dpp_pq_thrift_fail(r, at, "the first page starts at row %lld, not 0",
                                  (long long)loc->first_row_index);
    if (prev && (loc->offset - prev->offset < prev->compressed_page_size ||
                 loc->first_row_index <= prev->first_row_index))
        return dpp_pq_thrift_fail(
            r, at,
            "page %zu (byte %lld, row %lld) does not follow page %zu (byte %lld + %d, row %lld)", i,
            (long long)loc->offset, (long long)loc->first_row_index, i - 1, (long long)prev->offset,
            prev->compressed_page_size, (long long)prev->first_row_index);
    return 0;
}

/* The fewest bytes a PageLocation takes: three one-byte field headers with
 * one-byte varints, and its stop. */
#define MIN_PAGE_LOCATION 7

int dpp_pq_offset_index_parse(const uint8_t *buf, size_t len, dpp_pq_page_loc_t **locs, size_t *n,
                              char *err, size_t errlen)
{
    dpp_pq_thrift_t r;
    dpp_pq_tfield_t f = {0};
    uint32_t seen = 0, count = 0;
    dpp_pq_page_loc_t *out = NULL;
    int rc;

    *locs = NULL;
    *n = 0;
    dpp_pq_thrift_init(&r, buf, len, len, "offset index", err, errlen);
    rc = dpp_pq_thrift_enter(&r, NULL);
    while (rc == 0 && (rc = next_field(&r, &f, &seen)) == 0 && f.type != DPP_PQ_T_STOP) {
        if (f.id != 1) {
            rc = dpp_pq_thrift_skip(&r, &f);
            continue;
        }
        if ((rc = dpp_pq_thrift_list(&r, &f, DPP_PQ_T_STRUCT, &count)) != 0)
            break;
        if (count > (len - r.pos) / MIN_PAGE_LOCATION) {
            rc = dpp_pq_thrift_fail(&r, f.at, "%u page locations cannot fit in %zu bytes", count,
                                    len - r.pos);
            break;
        }
        if (count && (out = calloc(count, sizeof *out)) == NULL) {
            rc = -ENOMEM;
            break;
        }
        for (uint32_t i = 0; i < count && rc == 0; i++) {
            size_t at = r.pos;
            if ((rc = dpp_pq_thrift_enter(&r, NULL)) == 0 &&
                (rc = parse_page_location(&r, &out[i])) == 0)
                rc = check_page_location(&r, at, i, &out[i]);
        }
    }
    if (rc == 0)
        rc = REQUIRE(&r, 0, "OffsetIndex", seen, OFFSET_INDEX);
    if (rc) {
        free(out);
        return rc;
    }
    *locs = out;
    *n = count;
    return 0;
}
