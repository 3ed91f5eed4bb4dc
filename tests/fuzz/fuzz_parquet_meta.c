// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: Parquet metadata (src/parquet/meta.c, thrift.c), bytes
// of a file nobody vouches for. The input is read three ways: as a footer
// (FileMetaData of a file large enough for any offset, and, located by its
// last 8 bytes, as a whole file), as a page header and as an offset index.
// Whatever is accepted must hold what meta.h promises; whatever is refused
// says so at a byte offset and leaves nothing allocated.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "fuzz_util.h"
#include "parquet/meta.h"

#define BIG_FILE ((uint64_t)1 << 40)

static void check_meta(const dpp_pq_meta_t *m, size_t footer_len, uint64_t file_size)
{
    uint64_t data_end = file_size - 8 - footer_len;
    for (uint32_t i = 0; i < m->ncolumns; i++) {
        const dpp_pq_column_t *c = &m->columns[i];
        FUZZ_CHECK(c->path != NULL && c->type <= DPP_PQ_FIXED_LEN_BYTE_ARRAY, "column %u", i);
        FUZZ_CHECK(c->max_rep >= 0 && c->max_def >= c->max_rep && c->max_def <= DPP_PQ_MAX_DEPTH,
                   "column %u: levels %d %d", i, c->max_def, c->max_rep);
        fuzz_touch(c->path, strlen(c->path));
    }
    for (uint32_t i = 0; i < m->nfields; i++) {
        const dpp_pq_field_t *f = &m->fields[i];
        FUZZ_CHECK(f->name != NULL && memchr(f->why, '\0', sizeof f->why), "field %u", i);
        FUZZ_CHECK(dpp_pq_meta_field(m, f->name) != NULL, "field %s not found", f->name);
        if (f->shape == DPP_PQ_UNSUPPORTED) {
            FUZZ_CHECK(f->why[0] != '\0', "field %s: unsupported without why", f->name);
            continue;
        }
        FUZZ_CHECK(f->shape <= DPP_PQ_LIST && f->column < m->ncolumns, "field %s", f->name);
        const dpp_pq_column_t *c = &m->columns[f->column];
        if (f->shape == DPP_PQ_SCALAR)
            FUZZ_CHECK(c->max_rep == 0 && c->max_def <= 1, "scalar %s: %d %d", f->name, c->max_def,
                       c->max_rep);
        else
            FUZZ_CHECK(c->max_rep == 1 && f->def_list >= 0 && f->def_elem == f->def_list + 1 &&
                           c->max_def >= f->def_elem && c->max_def <= f->def_elem + 1,
                       "list %s: def_list %d def_elem %d max_def %d max_rep %d", f->name,
                       f->def_list, f->def_elem, c->max_def, c->max_rep);
    }
    int64_t rows = 0;
    for (uint32_t g = 0; g < m->nrow_groups; g++) {
        const dpp_pq_row_group_t *rg = &m->row_groups[g];
        FUZZ_CHECK(rg->num_rows >= 0 && rg->first_row == rows, "row group %u", g);
        rows += rg->num_rows;
        for (uint32_t i = 0; i < m->ncolumns; i++) {
            const dpp_pq_chunk_t *k = &rg->chunks[i];
            int64_t start = k->data_page_offset;
            if (k->dictionary_page_offset != -1 && k->dictionary_page_offset < start)
                start = k->dictionary_page_offset;
            FUZZ_CHECK(k->type == m->columns[i].type && start >= 4 &&
                           k->total_compressed_size >= 0 &&
                           (uint64_t)start + (uint64_t)k->total_compressed_size <= data_end,
                       "row group %u chunk %u: [%lld, +%lld) in [4, %llu)", g, i, (long long)start,
                       (long long)k->total_compressed_size, (unsigned long long)data_end);
        }
    }
    FUZZ_CHECK(rows == m->num_rows, "rows %lld, num_rows %lld", (long long)rows,
               (long long)m->num_rows);
}

static void fuzz_footer(const uint8_t *buf, size_t len, uint64_t file_size)
{
    dpp_pq_meta_t m;
    char err[256];
    int rc = dpp_pq_meta_parse(buf, len, file_size, &m, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(rc == DPP_ECORRUPT || rc == -ENOMEM, "rc %d", rc);
        FUZZ_CHECK(rc != DPP_ECORRUPT || strncmp(err, "footer byte ", 12) == 0, "message: %s", err);
        FUZZ_CHECK(m.ncolumns == 0 && m.columns == NULL && m.row_groups == NULL, "not empty");
        return;
    }
    check_meta(&m, len, file_size);
    dpp_pq_meta_free(&m);
    /* The outcome does not depend on the error buffer. */
    FUZZ_CHECK(dpp_pq_meta_parse(buf, len, file_size, &m, NULL, 0) == 0, "refused without err");
    dpp_pq_meta_free(&m);
}

static void fuzz_page_header(const uint8_t *data, size_t size)
{
    dpp_pq_page_header_t h;
    size_t used = 0;
    char err[256];
    int rc = dpp_pq_page_header_parse(data, size, &h, &used, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(rc == DPP_ECORRUPT || rc == -EAGAIN, "rc %d", rc);
        FUZZ_CHECK(strncmp(err, "page header byte ", 17) == 0, "message: %s", err);
        return;
    }
    FUZZ_CHECK(used > 0 && used <= size, "consumed %zu of %zu", used, size);
    FUZZ_CHECK(h.type <= DPP_PQ_DATA_PAGE_V2 && h.compressed_size >= 0 &&
                   h.uncompressed_size >= 0 && (uint32_t)h.compressed_size <= DPP_PQ_MAX_PAGE &&
                   (uint32_t)h.uncompressed_size <= DPP_PQ_MAX_PAGE && h.num_values >= 0,
               "page type %d sizes %d %d", h.type, h.compressed_size, h.uncompressed_size);
    if (h.type == DPP_PQ_DATA_PAGE_V2)
        FUZZ_CHECK(h.def_levels_len >= 0 && h.rep_levels_len >= 0 &&
                       (int64_t)h.def_levels_len + h.rep_levels_len <= h.compressed_size,
                   "levels %d + %d in %d", h.def_levels_len, h.rep_levels_len, h.compressed_size);
    size_t again;
    FUZZ_CHECK(dpp_pq_page_header_parse(data, used, &h, &again, NULL, 0) == 0 && again == used,
               "header of %zu bytes refused alone", used);
    FUZZ_CHECK(dpp_pq_page_header_parse(data, used - 1, &h, &again, NULL, 0) == -EAGAIN,
               "header cut by one byte");
}

static void fuzz_offset_index(const uint8_t *data, size_t size)
{
    dpp_pq_page_loc_t *locs;
    size_t n;
    char err[256];
    int rc = dpp_pq_offset_index_parse(data, size, &locs, &n, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(rc == DPP_ECORRUPT || rc == -ENOMEM, "rc %d", rc);
        FUZZ_CHECK(locs == NULL && n == 0, "refused, not empty");
        FUZZ_CHECK(rc != DPP_ECORRUPT || strncmp(err, "offset index byte ", 18) == 0, "message: %s",
                   err);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(locs[i].offset >= 0 && locs[i].compressed_page_size > 0, "page %zu", i);
        FUZZ_CHECK(i > 0
                       ? locs[i].offset - locs[i - 1].offset >= locs[i - 1].compressed_page_size &&
                             locs[i].first_row_index > locs[i - 1].first_row_index
                       : locs[i].first_row_index == 0,
                   "page %zu out of order", i);
    }
    free(locs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t len;
    char err[256];
    fuzz_footer(data, size, BIG_FILE + size);
    if (size >= 8 && dpp_pq_footer_locate(data + size - 8, size, &len, err, sizeof err) == 0) {
        FUZZ_CHECK((uint64_t)len + 12 <= size, "footer of %u bytes in %zu", len, size);
        fuzz_footer(data + size - 8 - len, len, size);
    }
    fuzz_page_header(data, size);
    fuzz_offset_index(data, size);
    return 0;
}
