// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: a spec's numbers through validation and the master's
// planning arithmetic (src/spec/spec.c, src/master/session.c and the
// planners), without files: the session is planned over a synthetic table
// of record counts, as the master plans it once every file is indexed.
// Byte 0 gives the files (1 to 8); then per file a byte for its source (of
// a mixture, modulo the sources) and 5 bytes of its record count (40 bits,
// little-endian; cut to 1,024 ranges of split_rows, so that making the
// index stays small); the rest is the spec's JSON. Checked: a refused spec
// names why; an accepted mixture's window shares add up to its window and
// stay within DPP_SPEC_MAX_WINDOW_ROWS; the plan of epochs 0 and 1 is made
// or refused (a mixture's "mixture: ..." sentence) in bounded work and
// memory (DPP_SESSION_MAX_PLAN_SPLITS); every split lies inside its range;
// every rank gets the same records ("drop", mixtures: the same of each
// source) or within one of the others ("keep", "pad"), and no more than
// the table holds (a mixture's "repeat" aside). UBSan catches signed
// overflow and float casts out of range; libFuzzer's -timeout a loop that
// runs away.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "dpp/error.h"
#include "fuzz_util.h"
#include "master/planner.h"
#include "master/session.h"
#include "spec/spec.h"

#define MAX_FILES 8
#define MAX_RANGES 1024 /* per synthetic file */

/* File i's index as its planner's worker source would give it: records
 * cut every split_rows (TFRecord, Parquet) or one sequence range per
 * split_rows records (text), byte positions made up but increasing. */
static uint64_t *make_bounds(const dpp_planner_t *pl, uint64_t records, unsigned split_rows,
                             size_t *n)
{
    uint64_t ranges = records == 0 ? 0 : records / split_rows + (records % split_rows != 0);
    uint64_t *b = dpp_xcalloc(2 * ranges + 2, sizeof *b);
    size_t k = 0;
    if (pl == &dpp_planner_text) {
        for (uint64_t r = 0; r < ranges; r++) {
            b[k++] = 100 * r;
            b[k++] = r * split_rows;
        }
        b[k++] = 100 * ranges;
        b[k++] = records;
    } else if (pl == &dpp_planner_parquet) {
        for (uint64_t r = 0; r < ranges; r++)
            b[k++] = r * split_rows;
        b[k++] = records;
    } else {
        for (uint64_t r = 0; r <= ranges; r++)
            b[k++] = 16 + 100 * r;
    }
    *n = k;
    return b;
}

/* Records of source `src` (UINT32_MAX: all) that rank r's splits take. */
static uint64_t rank_records(const dpp_session_t *s, unsigned r, unsigned src)
{
    uint64_t n = 0;
    for (size_t i = s->rank_first[r]; i < s->rank_first[r] + s->rank_count[r]; i++)
        if (src == UINT32_MAX || s->splits[i].source == src)
            n += dpp_split_rows(&s->splits[i]);
    return n;
}

static void check_plan(const dpp_session_t *s, uint64_t total)
{
    const dpp_spec_t *sp = &s->spec;
    unsigned nr = sp->consumers;
    FUZZ_CHECK(sp->nsources == 0 || s->nsplits <= DPP_SESSION_MAX_PLAN_SPLITS,
               "%zu splits, more than a plan may hold", s->nsplits);
    for (size_t i = 0; i < s->nsplits; i++) {
        const dpp_split_t *x = &s->splits[i];
        FUZZ_CHECK(x->rank < nr && x->file < s->nfiles && x->record_count > 0 &&
                       x->record_skip + x->record_count <= x->range_records,
                   "split %zu: rank %u file %u skip %llu count %llu of %llu", i, x->rank, x->file,
                   (unsigned long long)x->record_skip, (unsigned long long)x->record_count,
                   (unsigned long long)x->range_records);
    }
    uint64_t sum = 0, first = rank_records(s, 0, UINT32_MAX);
    for (unsigned r = 0; r < nr; r++) {
        FUZZ_CHECK(s->rank_first[r] + s->rank_count[r] <= s->nsplits, "rank %u's splits", r);
        uint64_t got = rank_records(s, r, UINT32_MAX);
        sum += got;
        if (sp->nsources > 0) {
            /* whole windows, as many of every source, as many as rank 0 */
            uint64_t windows = rank_records(s, 0, 0) / sp->sources[0].window_rows;
            for (unsigned k = 0; k < sp->nsources; k++)
                FUZZ_CHECK(rank_records(s, r, k) == windows * sp->sources[k].window_rows,
                           "rank %u: source %u's records %llu, not %llu windows of %u", r, k,
                           (unsigned long long)rank_records(s, r, k),
                           (unsigned long long)windows, sp->sources[k].window_rows);
        } else if (sp->remainder == DPP_REMAINDER_DROP) {
            FUZZ_CHECK(got == first && got % sp->batch_size == 0,
                       "drop: rank %u has %llu records, rank 0 %llu", r, (unsigned long long)got,
                       (unsigned long long)first);
        } else {
            FUZZ_CHECK(got <= first && got + 1 >= first, "rank %u has %llu records, rank 0 %llu",
                       r, (unsigned long long)got, (unsigned long long)first);
        }
    }
    FUZZ_CHECK((sp->nsources > 0 && sp->mix_repeat) || sum <= total,
               "%llu records planned of %llu", (unsigned long long)sum,
               (unsigned long long)total);
    if (sp->nsources == 0 && sp->remainder != DPP_REMAINDER_DROP)
        FUZZ_CHECK(sum == total, "%llu records planned of %llu", (unsigned long long)sum,
                   (unsigned long long)total);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t nfiles = 1 + data[0] % MAX_FILES;
    if (size < 1 + 6 * nfiles)
        return 0;
    const uint8_t *json = data + 1 + 6 * nfiles;
    size_t json_len = size - 1 - 6 * nfiles;
    char err[DPP_SPEC_ERRLEN];
    dpp_spec_t spec;
    int rc = dpp_spec_parse((const char *)json, json_len, &spec, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(rc == DPP_ESPEC || rc == -ENOMEM, "rc %d", rc);
        FUZZ_CHECK(err[0] != '\0', "refused without a message");
        return 0;
    }
    if (spec.nsources > 0) {
        uint64_t rows = 0;
        for (unsigned k = 0; k < spec.nsources; k++) {
            FUZZ_CHECK(spec.sources[k].window_rows > 0, "source %u has no row in a window", k);
            rows += spec.sources[k].window_rows;
        }
        FUZZ_CHECK(rows == (uint64_t)spec.mix_window * spec.batch_size &&
                       rows <= DPP_SPEC_MAX_WINDOW_ROWS,
                   "shares add up to %llu, the window is %u x %u", (unsigned long long)rows,
                   spec.mix_window, spec.batch_size);
    }

    /* the files, in source order (as the master lists a mixture's) */
    unsigned nsrc = spec.nsources ? spec.nsources : 1;
    uint32_t *file_source = dpp_xcalloc(nfiles, sizeof *file_source);
    uint64_t *records = dpp_xcalloc(nfiles, sizeof *records);
    char **files = dpp_xcalloc(nfiles, sizeof *files);
    size_t k = 0;
    for (unsigned src = 0; src < nsrc; src++) {
        for (size_t i = 0; i < nfiles; i++) {
            const uint8_t *f = data + 1 + 6 * i;
            if (f[0] % nsrc != src)
                continue;
            uint64_t n = 0;
            for (int b = 4; b >= 0; b--)
                n = n << 8 | f[1 + b];
            const dpp_spec_t *fs = spec.nsources ? &spec.sources[src].spec : &spec;
            if (n / fs->split_rows >= MAX_RANGES)
                n = (uint64_t)MAX_RANGES * fs->split_rows;
            char name[32];
            snprintf(name, sizeof name, "/t%u/part-%zu", src, k);
            files[k] = dpp_xstrdup(name);
            file_source[k] = src;
            records[k++] = n;
        }
    }
    uint64_t total = 0;
    for (size_t i = 0; i < nfiles; i++)
        total += records[i];
    dpp_session_t *s = dpp_session_new("s-fuzz", &spec, dpp_xstrdup("/t0"), files, nfiles);
    if (s->spec.nsources > 0) {
        char **tables = dpp_xcalloc(nsrc, sizeof *tables);
        tables[0] = s->table_path;
        for (unsigned src = 1; src < nsrc; src++) {
            char name[16];
            snprintf(name, sizeof name, "/t%u", src);
            tables[src] = dpp_xstrdup(name);
        }
        dpp_session_set_sources(s, tables, file_source);
    }
    for (size_t i = 0; i < nfiles; i++) {
        const dpp_spec_t *fs = dpp_session_file_spec(s, i);
        const dpp_planner_t *pl = dpp_planner_for(fs->format, fs->text != NULL);
        size_t n;
        uint64_t *bounds = make_bounds(pl, records[i], fs->split_rows, &n);
        char why[256];
        FUZZ_CHECK(pl->check(records[i], bounds, n, fs->split_rows, why, sizeof why),
                   "the harness's index of %llu records is refused: %s",
                   (unsigned long long)records[i], why);
        dpp_session_file_indexed(s, i, records[i], bounds, n);
        free(bounds);
    }
    if (s->state == SESSION_FAILED) {
        FUZZ_CHECK(s->spec.nsources > 0 && s->error && strncmp(s->error, "mixture: ", 9) == 0,
                   "planning failed: %s", s->error ? s->error : "(no message)");
    } else {
        FUZZ_CHECK(s->state == SESSION_RUNNING || (s->state == SESSION_DONE && s->nsplits == 0),
                   "state %s with %zu splits", dpp_session_state_name(s->state), s->nsplits);
        if (s->state == SESSION_RUNNING) {
            check_plan(s, total);
            if (s->spec.epochs > 1) {
                dpp_session_set_epoch(s, 1); /* another order (shuffle), the same shares */
                check_plan(s, total);
            }
        }
    }
    dpp_session_free(s);
    free(file_source);
    free(records);
    return 0;
}
