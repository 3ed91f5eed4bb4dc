// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: a whole Parquet file through the reader a worker uses
// (src/parquet/column.c over meta.c, encoding.c, codec.c). The input is
// written to a file (in a directory made once, under $TMPDIR, else
// /dev/shm, else /tmp) and opened with dpp_pq_file_open; every field that
// dpp_pq_field_check passes is read row by row with dpp_pq_col_read in
// every row group (at most MAX_ROWS rows in all), and one field is also
// read after dpp_pq_col_skip. Errors must be codes column.h documents with
// a sentence naming the file (a page's also the column and an offset), and
// must stick; every row read must decode as one slot.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpp/error.h"
#include "fuzz_util.h"
#include "parquet/column.h"

#define NAME "fuzz.parquet"
#define MAX_ROWS 100000

static char path[PATH_MAX], dir[PATH_MAX];

/* At exit (libFuzzer exits after -max_total_time and -runs). */
static void remove_dir(void)
{
    unlink(path);
    rmdir(dir);
}

/* Makes the directory the inputs are written into, once per process. */
static void make_dir(void)
{
    static const char *const bases[] = {"/dev/shm", "/tmp"};
    const char *env = getenv("TMPDIR");
    for (int i = -1; i < 2; i++) {
        const char *base = i < 0 ? env : bases[i];
        if (base == NULL)
            continue;
        snprintf(dir, sizeof dir, "%s/dpp-fuzz-parquet-XXXXXX", base);
        if (mkdtemp(dir) != NULL) {
            snprintf(path, sizeof path, "%s/" NAME, dir);
            atexit(remove_dir);
            return;
        }
    }
    FUZZ_CHECK(0, "no directory for the input file");
}

static void write_input(const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        FUZZ_CHECK(n > 0, "write %s: %s", path, strerror(errno));
        data += n;
        size -= (size_t)n;
    }
    FUZZ_CHECK(close(fd) == 0, "close %s", path);
}

static void check_error(int rc, const char *err, const char *column)
{
    FUZZ_CHECK(rc == DPP_ECORRUPT || rc == DPP_ETYPE || rc == -ENOMEM, "rc %d: %s", rc, err);
    FUZZ_CHECK(strncmp(err, "file " NAME ": ", sizeof "file " NAME ": " - 1) == 0,
               "the error does not name the file: %s", err);
    if (column) {
        char want[256];
        snprintf(want, sizeof want, "column \"%s\"", column);
        FUZZ_CHECK(strstr(err, want) != NULL && strstr(err, "offset") != NULL,
                   "the error does not name column %s and an offset: %s", column, err);
    }
}

/* After an error the column is done: reads and skips repeat it. */
static void check_sticks(dpp_pq_col_t *c, int rc, const char *err)
{
    char again[512];
    dpp_pq_buf_t b = {0};
    FUZZ_CHECK(dpp_pq_col_read(c, &b, NULL, again, sizeof again) == rc && b.len == 0,
               "a read after the error");
    FUZZ_CHECK(strcmp(again, err) == 0, "another message: %s, then %s", err, again);
    FUZZ_CHECK(dpp_pq_col_skip(c, 1, again, sizeof again) == rc && strcmp(again, err) == 0,
               "a skip after the error");
    dpp_pq_buf_free(&b);
}

/* Reads the rows of row group g of field through c, each checked to be
 * one slot; returns the first error (checked). *budget: rows left to read
 * for this input. */
static int read_rows(dpp_pq_file_t *f, const dpp_pq_field_t *field, uint32_t g, dpp_pq_col_t *c,
                     size_t *budget)
{
    dpp_pq_buf_t b = {0};
    char err[512];
    int rc = 0;
    uint64_t r = 0, rows = (uint64_t)f->meta.row_groups[g].num_rows;
    for (; r<rows && * budget> 0 && rc == 0; r++, (*budget)--) {
        b.len = 0;
        rc = dpp_pq_col_read(c, &b, NULL, err, sizeof err);
        if (rc == 0) {
            dpp_feat_ref_t ref;
            FUZZ_CHECK(dpp_pq_row_decode(b.data, b.len, 1, &ref) == 0, "row %llu: a bad slot",
                       (unsigned long long)r);
            fuzz_touch(ref.list, ref.list_len);
        }
    }
    if (rc) {
        check_error(rc, err, field->name);
        check_sticks(c, rc, err);
    }
    dpp_pq_buf_free(&b);
    return rc;
}

/* Skipping n rows then reading gives the rows reading gives. Only for a
 * chunk without repetition and without an offset index: there the skip
 * passes pages by the same counts the read decodes (with repetition or an
 * index a lying page or index may legitimately send the two apart). */
static void check_skip(dpp_pq_file_t *f, const dpp_pq_field_t *field, dpp_pq_dctx_t *dctx,
                       uint64_t n)
{
    const dpp_pq_row_group_t *rg = &f->meta.row_groups[0];
    uint64_t rows = (uint64_t)rg->num_rows;
    if (rows > 4096)
        rows = 4096;
    if (n > rows)
        n = rows;
    int exact = f->meta.columns[field->column].max_rep == 0 &&
                rg->chunks[field->column].offset_index_offset < 0;
    dpp_pq_col_t *a = NULL, *s = NULL;
    dpp_pq_buf_t ba = {0}, bs = {0};
    char err[512];
    if (dpp_pq_col_open(&a, f, 0, field, dctx) != 0 || dpp_pq_col_open(&s, f, 0, field, dctx))
        goto done;
    int rc = dpp_pq_col_skip(s, n, err, sizeof err);
    if (rc) {
        check_error(rc, err, field->name);
        check_sticks(s, rc, err);
        goto done;
    }
    for (uint64_t r = 0; r < n; r++)
        if (dpp_pq_col_read(a, &ba, NULL, err, sizeof err) != 0)
            goto done;
    for (uint64_t r = n; r < rows; r++) {
        ba.len = bs.len = 0;
        int ra = dpp_pq_col_read(a, &ba, NULL, err, sizeof err);
        int rs = dpp_pq_col_read(s, &bs, NULL, err, sizeof err);
        if (rs)
            check_error(rs, err, field->name);
        if (ra || rs)
            break;
        FUZZ_CHECK(!exact || (ba.len == bs.len && memcmp(ba.data, bs.data, ba.len) == 0),
                   "field %s: row %llu after skipping %llu differs from the row read", field->name,
                   (unsigned long long)r, (unsigned long long)n);
    }
done:
    dpp_pq_col_free(a);
    dpp_pq_col_free(s);
    dpp_pq_buf_free(&ba);
    dpp_pq_buf_free(&bs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (path[0] == '\0')
        make_dir();
    write_input(data, size);

    dpp_pq_file_t f;
    char err[512];
    int rc = dpp_pq_file_open(&f, path, NAME, err, sizeof err);
    if (rc) {
        FUZZ_CHECK(rc == DPP_ECORRUPT || rc == -ENOMEM, "open: rc %d: %s", rc, err);
        check_error(rc, err, NULL);
        dpp_pq_file_close(&f);
        return 0;
    }
    dpp_pq_dctx_t dctx = {0};
    size_t budget = MAX_ROWS;
    const dpp_pq_field_t *skip_field = NULL;
    for (uint32_t i = 0; i < f.meta.nfields && budget > 0; i++) {
        const dpp_pq_field_t *field = &f.meta.fields[i];
        rc = dpp_pq_field_check(&f, field, err, sizeof err);
        if (rc) {
            FUZZ_CHECK(rc == DPP_ETYPE, "field check: rc %d: %s", rc, err);
            check_error(rc, err, NULL);
            continue;
        }
        if (skip_field == NULL)
            skip_field = field;
        for (uint32_t g = 0; g < f.meta.nrow_groups && budget > 0; g++) {
            dpp_pq_col_t *c;
            if (dpp_pq_col_open(&c, &f, g, field, &dctx) != 0)
                break;
            rc = read_rows(&f, field, g, c, &budget);
            dpp_pq_col_free(c);
            if (rc)
                break;
        }
    }
    // The skip count from the input's size (its bytes are the file's:
    // the last ones are the magic), through the offset index when there is
    // one.
    if (skip_field && f.meta.nrow_groups > 0)
        check_skip(&f, skip_field, &dctx, size % 251);
    dpp_pq_dctx_free(&dctx);
    dpp_pq_file_close(&f);
    return 0;
}
