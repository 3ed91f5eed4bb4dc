/* SPDX-License-Identifier: Apache-2.0 */
/* dppctl validate --table: the spec checked against a sample of the table's
 * records on this machine, before any session runs. Each name the spec
 * reads (spec/schema.h) must be in some sampled record, with values its
 * transforms take; the records a session would reject are counted against
 * the spec's max_reject_ratio. The rules are the pipeline's (schema.c);
 * this file only reads records: TFRecord through format/, Parquet through
 * parquet/, plainly (pread), since a sample is small; a text session's
 * lines are sample_text.c's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/util.h"
#include "ctl.h"
#include "dpp/error.h"
#include "format/example_decode.h"
#include "format/tfrecord.h"
#include "parquet/column.h"
#include "spec/schema.h"
#include "spec/table.h"

#define SAMPLE_FILES 8               /* spread over the table's files */
#define SAMPLE_TFRECORD_BYTES (16u << 20) /* read from the start of a TFRecord file */
#define SAMPLE_MAX_NAMES 1024        /* names the records hold, for "did you mean" */

typedef struct entry {
    dpp_spec_name_t n;
    size_t slot, ids_slot; /* weights: ids_slot is their sparse feature's */
    uint64_t present, absent, bad;
    char first_absent[256]; /* where */
    char first_bad[512];    /* what, then where */
    char refused[512];      /* the file cannot give it (a Parquet map ...) */
} entry_t;

typedef struct sampler {
    const dpp_spec_t *spec;
    entry_t *e;
    size_t ne;
    const char **slots; /* distinct names, projection order */
    size_t nslots;
    char *names[SAMPLE_MAX_NAMES];
    size_t nnames;
    uint64_t records, rejected, filtered;
    char notes[4][512]; /* reading problems, the first few */
    size_t nnotes;
} sampler_t;

static size_t slot_of(sampler_t *s, const char *name)
{
    for (size_t i = 0; i < s->nslots; i++)
        if (strcmp(s->slots[i], name) == 0)
            return i;
    s->slots[s->nslots] = name;
    return s->nslots++;
}

static void sampler_init(sampler_t *s, const dpp_spec_t *spec)
{
    *s = (sampler_t){.spec = spec};
    size_t max = dpp_spec_names_max(spec);
    dpp_spec_name_t *names = dpp_xcalloc(max, sizeof *names);
    s->ne = dpp_spec_names(spec, names);
    s->e = dpp_xcalloc(s->ne, sizeof *s->e);
    s->slots = dpp_xcalloc(s->ne, sizeof *s->slots);
    for (size_t i = 0; i < s->ne; i++) {
        s->e[i].n = names[i];
        s->e[i].slot = slot_of(s, names[i].name);
        if (names[i].role == DPP_ROLE_WEIGHTS)
            s->e[i].ids_slot = slot_of(s, names[i].feature->name);
    }
    free(names);
}

static void sampler_free(sampler_t *s)
{
    for (size_t i = 0; i < s->nnames; i++)
        free(s->names[i]);
    free(s->e);
    free(s->slots);
}

/* Names a record holds (NUL after each), for "did you mean". */
static void add_names(sampler_t *s, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++, buf += strlen(buf) + 1) {
        size_t j = 0;
        while (j < s->nnames && strcmp(s->names[j], buf) != 0)
            j++;
        if (j == s->nnames && s->nnames < SAMPLE_MAX_NAMES)
            s->names[s->nnames++] = dpp_xstrdup(buf);
    }
}

/* text into dst[0..cap), cut to fit */
static void copy_cut(char *dst, size_t cap, const char *text)
{
    size_t l = strlen(text);
    if (l >= cap)
        l = cap - 1;
    memcpy(dst, text, l);
    dst[l] = '\0';
}

static void note(sampler_t *s, const char *text)
{
    if (s->nnotes < sizeof s->notes / sizeof s->notes[0])
        copy_cut(s->notes[s->nnotes++], sizeof s->notes[0], text);
}

/* One record: refs in slot order; where names it ("file F, record at
 * offset O"). Counted as the pipeline would: rejected when the label or a
 * dense feature without fill_missing is missing or a value is not what
 * its transforms take; filtered when a require filter's name is absent. */
static void add_record(sampler_t *s, const dpp_feat_ref_t *refs, const char *where)
{
    s->records++;
    int filtered = 0, rejected = 0;
    for (size_t i = 0; i < s->ne; i++)
        if (s->e[i].n.role == DPP_ROLE_REQUIRE && refs[s->e[i].slot].kind == DPP_FEAT_ABSENT)
            filtered = 1;
    for (size_t i = 0; i < s->ne; i++) {
        entry_t *e = &s->e[i];
        const dpp_feat_ref_t *ref = &refs[e->slot];
        if (ref->kind == DPP_FEAT_ABSENT) {
            e->absent++;
            if (!e->first_absent[0])
                copy_cut(e->first_absent, sizeof e->first_absent, where);
        } else {
            e->present++;
        }
        /* a filtered record is dropped before anything but its label is read */
        if (filtered && e->n.role != DPP_ROLE_LABEL)
            continue;
        if (ref->kind == DPP_FEAT_ABSENT && dpp_schema_absent_rejects(&e->n))
            rejected = 1;
        char what[256];
        size_t nids = e->n.role == DPP_ROLE_WEIGHTS ? dpp_schema_ids(&refs[e->ids_slot]) : 0;
        const char *problem = dpp_schema_value_problem(&e->n, ref, nids, what, sizeof what);
        if (problem == NULL)
            continue;
        rejected = 1;
        if (e->bad++ == 0)
            snprintf(e->first_bad, sizeof e->first_bad, "the first (%s) %s", where, problem);
    }
    if (rejected)
        s->rejected++;
    else if (filtered)
        s->filtered++;
}

static int read_all(int fd, uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        got += (size_t)r;
    }
    return 0;
}

static void sample_tfrecord(sampler_t *s, const char *path, const char *rel, uint64_t want)
{
    char text[768];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(text, sizeof text, "file %s: cannot be read: %s", rel, strerror(errno));
        note(s, text);
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t len = (uint64_t)st.st_size < SAMPLE_TFRECORD_BYTES ? (size_t)st.st_size
                                                               : SAMPLE_TFRECORD_BYTES;
    uint8_t *buf = dpp_xmalloc(len ? len : 1);
    int rc = read_all(fd, buf, len);
    close(fd);
    if (rc) {
        snprintf(text, sizeof text, "file %s: cannot be read: %s", rel, strerror(-rc));
        note(s, text);
        free(buf);
        return;
    }
    dpp_projection_t *proj;
    if (dpp_projection_new(&proj, s->slots, s->nslots) != 0)
        dpp_oom();
    dpp_feat_ref_t *refs = dpp_xcalloc(s->nslots, sizeof *refs);
    dpp_tfrecord_iter_t it;
    dpp_tfrecord_iter_init(&it, buf, len, 0, len);
    const uint8_t *rec;
    size_t rlen;
    uint64_t off, at = 0, got = 0;
    while (got < want) {
        at = it.off;
        rc = dpp_tfrecord_next(&it, &rec, &rlen, &off);
        if (rc == 0)
            break;
        if (rc < 0) {
            /* the end of what was read, inside a record: the sample ends there */
            if (rc == DPP_ETRUNCATED && len < (uint64_t)st.st_size && got > 0)
                break;
            snprintf(text, sizeof text, "file %s, record at offset %" PRIu64 ": %s%s", rel, off,
                     dpp_strerror(rc),
                     rc == DPP_ETRUNCATED && len < (uint64_t)st.st_size
                         ? " (a record longer than the 16 MiB a sample reads)"
                         : "");
            note(s, text);
            if (rc != DPP_ECORRUPT || it.stuck)
                break;
            continue;
        }
        if (got++ == 0) {
            char keys[8192];
            add_names(s, keys, dpp_example_keys(rec, rlen, keys, sizeof keys));
        }
        char where[256];
        snprintf(where, sizeof where, "file %s, record at offset %" PRIu64, rel, at);
        if (dpp_example_decode(proj, rec, rlen, refs) != 0) {
            snprintf(text, sizeof text, "%s: not a tf.Example", where);
            note(s, text);
            continue;
        }
        add_record(s, refs, where);
    }
    free(refs);
    dpp_projection_free(proj);
    free(buf);
}

static void sample_parquet(sampler_t *s, const char *path, const char *rel, uint64_t want)
{
    char err[512];
    dpp_pq_file_t f;
    if (dpp_pq_file_open(&f, path, rel, err, sizeof err) != 0) {
        note(s, err);
        dpp_pq_file_close(&f);
        return;
    }
    const dpp_pq_meta_t *m = &f.meta;
    for (uint32_t i = 0; i < m->nfields; i++)
        add_names(s, m->fields[i].name, 1);
    const dpp_pq_field_t **fields = dpp_xcalloc(s->nslots, sizeof *fields);
    for (size_t i = 0; i < s->nslots; i++) {
        fields[i] = dpp_pq_meta_field(m, s->slots[i]);
        if (fields[i] && dpp_pq_field_check(&f, fields[i], err, sizeof err) != 0) {
            for (size_t j = 0; j < s->ne; j++)
                if (s->e[j].slot == i && !s->e[j].refused[0])
                    copy_cut(s->e[j].refused, sizeof s->e[j].refused, err);
            fields[i] = NULL;
        }
    }
    dpp_pq_col_t **cols = dpp_xcalloc(s->nslots, sizeof *cols);
    dpp_feat_ref_t *refs = dpp_xcalloc(s->nslots, sizeof *refs);
    dpp_pq_dctx_t dctx = {0};
    dpp_pq_buf_t row = {0};
    uint64_t got = 0;
    int stop = 0;
    for (uint32_t g = 0; g < m->nrow_groups && got < want && !stop; g++) {
        for (size_t i = 0; i < s->nslots; i++)
            if (fields[i] && dpp_pq_col_open(&cols[i], &f, g, fields[i], &dctx) != 0)
                dpp_oom();
        for (int64_t r = 0; r < m->row_groups[g].num_rows && got < want && !stop; r++) {
            row.len = 0;
            for (size_t i = 0; i < s->nslots && !stop; i++) {
                int rc = cols[i] ? dpp_pq_col_read(cols[i], &row, NULL, err, sizeof err)
                                 : dpp_pq_buf_absent(&row);
                if (rc == -ENOMEM)
                    dpp_oom();
                if (rc) {
                    note(s, err);
                    stop = 1;
                }
            }
            if (stop || dpp_pq_row_decode(row.data, row.len, s->nslots, refs) != 0)
                break;
            char where[256];
            snprintf(where, sizeof where, "file %s, row %" PRId64, rel,
                     m->row_groups[g].first_row + r);
            add_record(s, refs, where);
            got++;
        }
        for (size_t i = 0; i < s->nslots; i++) {
            dpp_pq_col_free(cols[i]);
            cols[i] = NULL;
        }
    }
    dpp_pq_buf_free(&row);
    dpp_pq_dctx_free(&dctx);
    free(refs);
    free(cols);
    free(fields);
    dpp_pq_file_close(&f);
}

/* The findings: errors to stderr (after "dppctl: SPEC: "), notes to
 * stdout. Returns the number of errors. */
static size_t report(const sampler_t *s, const char *spec_path, const char *sampled)
{
    size_t errors = 0;
    double ratio = s->records ? (double)s->rejected / (double)s->records : 0;
    int fails = s->rejected > 0 && ratio > s->spec->max_reject_ratio;
    char text[2048];
    for (size_t i = 0; i < s->ne; i++) {
        const entry_t *e = &s->e[i];
        int again = 0; /* the same name said already (a require filter on the label) */
        for (size_t j = 0; j < i; j++)
            again |= s->e[j].slot == e->slot && s->e[j].present == 0;
        if (e->refused[0]) {
            fprintf(stderr, "dppctl: %s: feature \"%s\" (%s): %s\n", spec_path, e->n.name,
                    dpp_role_words(e->n.role), e->refused);
            errors++;
            continue;
        }
        if (e->present == 0 && !again && !e->n.optional) {
            dpp_schema_absent_text(text, sizeof text, &e->n, sampled,
                                   (const char *const *)s->names, s->nnames);
            fprintf(stderr, "dppctl: %s: %s\n", spec_path, text);
            errors++;
            continue;
        }
        if (e->bad > 0) {
            snprintf(text, sizeof text,
                     "feature \"%s\" (%s): %" PRIu64 " of %" PRIu64
                     " sampled records would be rejected; %s",
                     e->n.name, dpp_role_words(e->n.role), e->bad, s->records, e->first_bad);
            if (fails)
                fprintf(stderr, "dppctl: %s: %s\n", spec_path, text), errors++;
            else
                printf("note: %s\n", text);
        }
        if (e->absent > 0 && e->present > 0 && dpp_schema_absent_rejects(&e->n)) {
            snprintf(text, sizeof text,
                     "feature \"%s\" (%s) is missing from %" PRIu64 " of %" PRIu64
                     " sampled records (%.1f%%), which are rejected%s; the first: %s",
                     e->n.name, dpp_role_words(e->n.role), e->absent, s->records,
                     100.0 * (double)e->absent / (double)s->records,
                     e->n.role == DPP_ROLE_DENSE
                         ? " (give it a fill_missing transform, or drop them with a require filter)"
                         : "",
                     e->first_absent);
            if (fails)
                fprintf(stderr, "dppctl: %s: %s\n", spec_path, text), errors++;
            else
                printf("note: %s\n", text);
        }
    }
    if (fails) {
        fprintf(stderr,
                "dppctl: %s: %" PRIu64 " of the %" PRIu64 " sampled records (%.1f%%) would be "
                "rejected, more than the spec's max_reject_ratio %g: a session would fail\n",
                spec_path, s->rejected, s->records, 100.0 * ratio, s->spec->max_reject_ratio);
        errors++;
    }
    return errors;
}

int ctl_sample_check(const dpp_spec_t *spec, const char *spec_path, const char *dir,
                     unsigned records)
{
    char *table = realpath(dir, NULL);
    if (table == NULL)
        return ctl_fail("--table %s: %s (expected the folder of the spec's table on this "
                        "machine, such as DATA_ROOT/TABLE)",
                        dir, strerror(errno));
    char **files = NULL;
    size_t nfiles = 0;
    char err[DPP_SPEC_ERRLEN];
    int rc = dpp_table_list_files(table, spec, &files, &nfiles, err, sizeof err);
    if (rc) {
        free(table);
        return ctl_fail("--table %s: %s", dir, err);
    }
    if (nfiles == 0) {
        dpp_table_files_free(files, nfiles);
        free(table);
        return ctl_fail("--table %s: no data files in the spec's partitions: a session would "
                        "deliver nothing%s",
                        dir, "");
    }
    size_t k = nfiles < SAMPLE_FILES ? nfiles : SAMPLE_FILES;
    if (spec->text) {
        rc = ctl_sample_text(spec, spec_path, dir, table, files, nfiles, k, records);
        dpp_table_files_free(files, nfiles);
        free(table);
        return rc;
    }
    sampler_t s;
    sampler_init(&s, spec);
    uint64_t quota = (records + k - 1) / k;
    size_t tlen = strlen(table);
    for (size_t i = 0; i < k && s.records < records; i++) {
        uint64_t want = quota < records - s.records ? quota : records - s.records;
        /* the first file, the last, and evenly between */
        size_t f = k == 1 ? 0 : i * (nfiles - 1) / (k - 1);
        const char *rel = files[f] + (strncmp(files[f], table, tlen) == 0 && files[f][tlen] == '/'
                                          ? tlen + 1
                                          : 0);
        if (spec->format == DPP_FORMAT_PARQUET)
            sample_parquet(&s, files[f], rel, want);
        else
            sample_tfrecord(&s, files[f], rel, want);
    }
    for (size_t i = 0; i < s.nnotes; i++)
        printf("note: %s\n", s.notes[i]);
    char sampled[160];
    snprintf(sampled, sizeof sampled, "%" PRIu64 " records sampled from %zu of the table's %zu files",
             s.records, k, nfiles);
    size_t errors = s.records ? report(&s, spec_path, sampled) : 0;
    if (s.records == 0) {
        /* the likeliest cause: the files are of the other format */
        char hint[160] = "";
        for (size_t f = 0; dpp_format_names[f]; f++) {
            size_t fl = strlen(files[0]), el = strlen(dpp_format_names[f]);
            if ((dpp_format_t)f != spec->format && fl > el && files[0][fl - el - 1] == '.' &&
                strcmp(files[0] + fl - el, dpp_format_names[f]) == 0)
                snprintf(hint, sizeof hint,
                         "; its files end in .%s: should the spec say \"format\": \"%s\"?",
                         dpp_format_names[f], dpp_format_names[f]);
        }
        fprintf(stderr, "dppctl: %s: table %s: no record could be read from %zu of its files%s%s\n",
                spec_path, dir, k, s.nnotes ? " (see the notes above)" : "", hint);
        errors++;
    } else if (errors == 0) {
        printf("%s: table %s: %s; every feature found, with values its transforms take", spec_path,
               dir, sampled);
        if (s.rejected > 0)
            printf("; %" PRIu64 " (%.2f%%) would be rejected", s.rejected,
                   100.0 * (double)s.rejected / (double)s.records);
        if (s.filtered > 0)
            printf("; %" PRIu64 " filtered out", s.filtered);
        printf("\n");
    }
    sampler_free(&s);
    dpp_table_files_free(files, nfiles);
    free(table);
    return errors ? CTL_FAILED : CTL_OK;
}

/* The data root dir is in, when dir ends in "/TABLE" (given as written,
 * or resolved): malloc'd, or NULL. */
static char *data_root_of(const char *dir, const char *table)
{
    char *resolved = realpath(dir, NULL);
    const char *tries[2] = {dir, resolved};
    char *root = NULL;
    size_t tl = strlen(table);
    for (int k = 0; k < 2 && root == NULL && tries[k]; k++) {
        size_t dl = strlen(tries[k]);
        while (dl > 1 && tries[k][dl - 1] == '/')
            dl--;
        if (dl > tl + 1 && tries[k][dl - tl - 1] == '/' &&
            memcmp(tries[k] + dl - tl, table, tl) == 0)
            root = strndup(tries[k], dl - tl - 1);
    }
    free(resolved);
    return root;
}

int ctl_sample_tables(const dpp_spec_t *spec, const char *spec_path, const char *const *dirs,
                      unsigned ndirs, unsigned records)
{
    if (spec->nsources == 0) {
        char times[16];
        snprintf(times, sizeof times, "%u", ndirs);
        if (ndirs > 1)
            return ctl_fail("--table: given %s times; a spec of one table takes one folder (a "
                            "mixture: one per source, in the order of \"sources\")%s",
                            times, "");
        return ctl_sample_check(spec, spec_path, dirs[0], records);
    }
    if (ndirs > spec->nsources) {
        char counts[64];
        snprintf(counts, sizeof counts, "%u times, the mixture has %u sources", ndirs,
                 spec->nsources);
        return ctl_fail("--table: given %s: give one folder per source, in the order of "
                        "\"sources\"%s",
                        counts, "");
    }
    const char *table0 = spec->sources[0].spec.table;
    char *root = ndirs < spec->nsources ? data_root_of(dirs[0], table0) : NULL;
    if (ndirs < spec->nsources && root == NULL) {
        fprintf(stderr,
                "dppctl: %s: sources[%u] (table \"%s\") has no folder to sample: give --table "
                "once per source, in the order of \"sources\" (--table %s is source 0's and does "
                "not end in its table \"%s\", so the data root of the others is not known)\n",
                spec_path, ndirs, spec->sources[ndirs].spec.table, dirs[0], table0);
        return CTL_FAILED;
    }
    size_t failed = 0;
    for (unsigned i = 0; i < spec->nsources; i++) {
        const dpp_spec_t *src = &spec->sources[i].spec;
        char label[1024], *dir = NULL;
        snprintf(label, sizeof label, "%s: sources[%u] (table %s)", spec_path, i, src->table);
        if (i >= ndirs && strncmp(src->table, "s3://", 5) == 0) {
            printf("note: %s: not sampled: an object store's table has no folder here (give "
                   "--table for it, in the order of \"sources\")\n",
                   label);
            continue;
        }
        if (i >= ndirs && asprintf(&dir, "%s/%s", root, src->table) < 0)
            dpp_oom();
        failed += ctl_sample_check(src, label, i < ndirs ? dirs[i] : dir, records) != CTL_OK;
        fflush(stdout); /* each source's verdict before the next one's errors */
        free(dir);
    }
    free(root);
    return failed ? CTL_FAILED : CTL_OK;
}
