// SPDX-License-Identifier: Apache-2.0
// Per-session file indexes, split planning and split states (see session.h).
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/errtext.h"
#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "crypto/hmac.h"
#include "spec/transform.h"
#include "dpp/error.h"
#include "planner.h"
#include "session.h"

dpp_session_t *dpp_session_new(const char *id, dpp_spec_t *spec, char *table_path, char **files,
                               size_t nfiles)
{
    dpp_session_t *s = dpp_xcalloc(1, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->spec = *spec;
    memset(spec, 0, sizeof *spec);
    s->spec_json = dpp_spec_to_json(&s->spec);
    s->cache_fp = dpp_spec_cache_fingerprint(&s->spec);
    if (s->spec_json == NULL)
        dpp_oom();
    s->table_path = table_path;
    s->files = dpp_xcalloc(nfiles ? nfiles : 1, sizeof *s->files);
    s->nfiles = nfiles;
    size_t root_len = strlen(table_path);
    for (size_t i = 0; i < nfiles; i++) {
        dpp_file_t *f = &s->files[i];
        f->path = files[i];
        const char *rel = f->path;
        if (strncmp(rel, table_path, root_len) == 0 && rel[root_len] == '/')
            rel += root_len + 1;
        f->rel_path = dpp_xstrdup(rel);
    }
    free(files);
    s->state = SESSION_INDEXING;
    s->submitted_ms = s->client_ms = dpp_wall_ms();
    s->rank_seen_ms = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_seen_ms);
    s->rank_prefetch = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_prefetch);
    s->rank_cursor = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_cursor);
    s->rank_pending = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_pending);
    s->rank_leased_end = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_leased_end);
    s->rank_report_lo = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_report_lo);
    s->reports = dpp_xcalloc(s->spec.consumers, sizeof *s->reports);
    dpp_spec_name_t *names = dpp_xcalloc(dpp_spec_names_max(&s->spec), sizeof *names);
    s->nfchecks = dpp_spec_names(&s->spec, names);
    s->fchecks = dpp_xcalloc(s->nfchecks, sizeof *s->fchecks);
    for (size_t i = 0; i < s->nfchecks; i++)
        s->fchecks[i].n = names[i];
    free(names);
    s->holders = dpp_xcalloc(s->spec.consumers, sizeof *s->holders);
    for (unsigned r = 0; r < s->spec.consumers; r++)
        s->rank_prefetch[r] = DPP_SESSION_DEFAULT_PREFETCH;
    int rc = dpp_random_bytes(s->token_key, sizeof s->token_key);
    if (rc) {
        /* a guessable key would make every token forgeable: no session */
        DPP_ERROR("token_key_failed session=%s error=\"%s\" action=aborting", s->id,
                  dpp_strerror(rc));
        abort();
    }
    return s;
}

void dpp_session_set_sources(dpp_session_t *s, char **table_paths, const uint32_t *file_source)
{
    unsigned n = s->spec.nsources;
    s->source_tables = table_paths;
    s->source_json = dpp_xcalloc(n, sizeof *s->source_json);
    s->source_fp = dpp_xcalloc(n, sizeof *s->source_fp);
    s->source_rows = dpp_xcalloc(n, sizeof *s->source_rows);
    s->source_epoch_rows = dpp_xcalloc(n, sizeof *s->source_epoch_rows);
    s->source_records = dpp_xcalloc(n, sizeof *s->source_records);
    for (unsigned i = 0; i < n; i++) {
        if ((s->source_json[i] = dpp_spec_to_json(&s->spec.sources[i].spec)) == NULL)
            dpp_oom();
        s->source_fp[i] = dpp_spec_cache_fingerprint(&s->spec.sources[i].spec);
    }
    for (size_t i = 0; i < s->nfiles; i++) {
        dpp_file_t *f = &s->files[i];
        f->source = file_source[i] < n ? file_source[i] : 0;
        const char *table = table_paths[f->source], *rel = f->path;
        size_t len = strlen(table);
        if (strncmp(rel, table, len) == 0 && rel[len] == '/')
            rel += len + 1;
        free(f->rel_path);
        f->rel_path = dpp_xstrdup(rel);
    }
}

void dpp_session_file_object(dpp_session_t *s, size_t i, const char *etag, uint64_t size)
{
    free(s->files[i].etag);
    s->files[i].etag = dpp_xstrdup(etag);
    s->files[i].size = size;
}

void dpp_session_free(dpp_session_t *s)
{
    if (s == NULL)
        return;
    unsigned nsources = s->spec.nsources;
    dpp_spec_close(&s->spec);
    free(s->spec_json);
    free(s->table_path);
    for (size_t i = 0; i < s->nfiles; i++) {
        free(s->files[i].path);
        free(s->files[i].rel_path);
        free(s->files[i].etag);
        free(s->files[i].bounds);
    }
    free(s->files);
    free(s->splits);
    free(s->error);
    free(s->rank_seen_ms);
    free(s->rank_first);
    free(s->rank_count);
    free(s->rank_prefetch);
    free(s->rank_cursor);
    free(s->rank_leased_end);
    free(s->rank_report_lo);
    free(s->rank_pending);
    free(s->prev_leases);
    free(s->reports);
    free(s->holders);
    free(s->fchecks);
    free(s->record_names);
    free(s->first_reject);
    for (size_t i = 0; i < s->nchain; i++)
        free(s->chain[i].tokens);
    free(s->chain);
    free(s->gen_plain_records);
    free(s->gen_trims);
    for (unsigned i = 0; s->source_tables && i < nsources; i++) {
        if (i > 0) /* [0] is table_path */
            free(s->source_tables[i]);
        free(s->source_json[i]);
    }
    free(s->source_tables);
    free(s->source_json);
    free(s->source_fp);
    free(s->source_rows);
    free(s->source_epoch_rows);
    free(s->source_records);
    explicit_bzero(s->token_key, sizeof s->token_key);
    free(s);
}

/* Records of rank r when `total` records are dealt to n ranks: with
 * remainder "drop" every rank gets the same whole number of batches (fewer
 * than n x batch_size records are left out); with "keep" and "pad" the
 * records are spread as evenly as they go. */
static uint64_t rank_quota(const dpp_session_t *s, uint64_t total, unsigned n, unsigned r)
{
    if (s->spec.remainder != DPP_REMAINDER_DROP)
        return total / n + (r < total % n ? 1 : 0);
    uint64_t bs = s->spec.batch_size;
    return total / n / bs * bs;
}

uint64_t dpp_session_rank_records(const dpp_session_t *s, unsigned rank)
{
    /* a rank's splits are consecutive ids: its own, not every split */
    uint64_t n = 0;
    size_t first = s->rank_first ? s->rank_first[rank] : 0;
    size_t count = s->rank_count ? s->rank_count[rank] : 0;
    for (size_t i = first; i < first + count && i < s->nsplits; i++)
        n += dpp_split_rows(&s->splits[i]);
    return n;
}

static uint64_t total_records(const dpp_session_t *s)
{
    uint64_t total = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        total += s->files[i].records;
    return total;
}

void dpp_session_report(dpp_session_t *s, unsigned r, uint64_t client_id,
                        const dpp_rank_counts_t *c)
{
    dpp_rank_report_t *rep = &s->reports[r];
    if (client_id != rep->client_id) {
        rep->before = rep->sum;
        rep->client_id = client_id;
    }
    rep->sum.batches = rep->before.batches + c->batches;
    rep->sum.wait_ns = rep->before.wait_ns + c->wait_ns;
    rep->sum.open_ns = rep->before.open_ns + c->open_ns;
    for (int b = 0; b < 16; b++)
        rep->sum.hist[b] = rep->before.hist[b] + c->hist[b];
}

uint64_t dpp_session_pad_batches(const dpp_session_t *s)
{
    if (s->spec.remainder != DPP_REMAINDER_PAD || s->state == SESSION_INDEXING)
        return 0;
    /* rank 0 gets the most; a re-planned epoch has its own count
     * (gen_pad_batches) */
    uint64_t most = rank_quota(s, total_records(s), s->spec.consumers, 0);
    return (most + s->spec.batch_size - 1) / s->spec.batch_size;
}

/* A mixture's source as its ranges come, pass after pass: in file order,
 * or (shuffle) permuted by (seed, epoch, source, pass). */
typedef struct mix_stream {
    const dpp_planner_t *planner;
    struct mix_range {
        uint32_t file, b;
    } *of;
    uint32_t *order;
    size_t n, at;  /* ranges, the one being taken */
    uint64_t off;  /* its records taken */
    unsigned pass; /* of the source in this epoch */
} mix_stream_t;

static void stream_pass(const dpp_session_t *s, mix_stream_t *st, unsigned epoch, unsigned source)
{
    if (s->spec.shuffle)
        dpp_permute(st->order, st->n,
                    dpp_shuffle_seed(s->spec.shuffle_seed, epoch,
                                     ((uint64_t)(source + 1) << 32) | st->pass));
    else
        for (size_t r = 0; r < st->n; r++)
            st->order[r] = (uint32_t)r;
    st->at = 0;
    st->off = 0;
}

/* Sums and products of record counts, saturating: a count from an index
 * is a worker's word, and the spec's numbers multiply. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Windows each rank gets in an epoch of a mixture over nr ranks: with
 * exhausted "stop", as many as every source can fill (the first to run
 * out ends the epoch); with "repeat", as many as the source read through
 * the most needs (the others start again). 0 when a source is empty or
 * (stop) smaller than one window of every rank. */
static uint64_t mix_windows(const dpp_session_t *s, unsigned nr)
{
    uint64_t k = s->spec.mix_repeat ? 0 : UINT64_MAX;
    for (unsigned i = 0; i < s->spec.nsources; i++) {
        uint64_t records = 0, per = (uint64_t)nr * s->spec.sources[i].window_rows;
        for (size_t f = 0; f < s->nfiles; f++)
            if (s->files[f].source == i)
                records = sat_add(records, s->files[f].records);
        if (records == 0 || per == 0)
            return 0;
        uint64_t fits = records / per + (s->spec.mix_repeat && records % per != 0);
        k = s->spec.mix_repeat ? (fits > k ? fits : k) : (fits < k ? fits : k);
    }
    return k;
}

/* The most splits an epoch of a mixture over nr ranks can be planned as
 * (saturating at UINT64_MAX): source i's ranges are taken pass after pass,
 * ceil(windows x nr x window_rows / records) passes of a split per range,
 * and each of the windows x nr windows cuts at most one more. *worst is
 * the source with the most, *passes its passes; *windows per rank. */
static uint64_t mix_splits_bound(const dpp_session_t *s, unsigned nr, unsigned *worst,
                                 uint64_t *passes, uint64_t *windows)
{
    uint64_t w = mix_windows(s, nr), total = 0, most = 0;
    *worst = 0;
    *passes = 0;
    *windows = w;
    for (unsigned i = 0; i < s->spec.nsources; i++) {
        const dpp_spec_t *spec = &s->spec.sources[i].spec;
        const dpp_planner_t *planner = dpp_planner_for(spec->format, spec->text != NULL);
        uint64_t records = 0, ranges = 0;
        for (size_t f = 0; f < s->nfiles; f++) {
            if (s->files[f].source != i)
                continue;
            records = sat_add(records, s->files[f].records);
            ranges = sat_add(ranges, planner->nranges(s->files[f].records, s->files[f].bounds,
                                                      s->files[f].nbounds));
        }
        uint64_t taken = sat_mul(sat_mul(w, nr), s->spec.sources[i].window_rows);
        uint64_t p = records == 0 ? 0 : taken / records + (taken % records != 0);
        uint64_t n = sat_add(sat_mul(p, ranges), sat_mul(w, nr));
        if (n > most) {
            most = n;
            *worst = i;
            *passes = p;
        }
        total = sat_add(total, n);
    }
    return total;
}

int dpp_session_plan_check(const dpp_session_t *s, unsigned nr, char *why, size_t whylen)
{
    if (s->spec.nsources == 0)
        return 0;
    unsigned i;
    uint64_t passes, windows, bound = mix_splits_bound(s, nr, &i, &passes, &windows);
    if (bound <= DPP_SESSION_MAX_PLAN_SPLITS)
        return 0;
    uint64_t records = 0;
    for (size_t f = 0; f < s->nfiles; f++)
        if (s->files[f].source == i)
            records = sat_add(records, s->files[f].records);
    return dpp_errf(
        DPP_ESPEC, why, whylen,
        "mixture: an epoch for %u ranks would be planned as up to %" PRIu64 " splits, more than "
        "the %u an epoch's plan may hold: %" PRIu64 " windows per rank, and source %u (table %s, "
        "%" PRIu64 " records, %u of each window) read through %" PRIu64 " times; use fewer, "
        "longer ranges (a larger split_rows), a larger mixture.window, or \"exhausted\": "
        "\"stop\"",
        nr, bound, DPP_SESSION_MAX_PLAN_SPLITS, windows, i, s->spec.sources[i].spec.table, records,
        s->spec.sources[i].window_rows, passes);
}

/* The plan of an epoch of a mixture: each rank gets the same number of
 * windows (mix_windows), each window window_rows records of every source
 * in source order, taken from that source's stream of ranges (cut where a
 * share ends). Pure. */
static dpp_split_t *plan_mixture(const dpp_session_t *s, unsigned epoch, unsigned nr,
                                 size_t *nsplits, size_t *rank_first, size_t *rank_count)
{
    unsigned ns = s->spec.nsources;
    mix_stream_t *st = dpp_xcalloc(ns, sizeof *st);
    for (unsigned i = 0; i < ns; i++) {
        const dpp_spec_t *spec = &s->spec.sources[i].spec;
        st[i].planner = dpp_planner_for(spec->format, spec->text != NULL);
        for (size_t f = 0; f < s->nfiles; f++)
            if (s->files[f].source == i)
                st[i].n += st[i].planner->nranges(s->files[f].records, s->files[f].bounds,
                                                  s->files[f].nbounds);
        st[i].of = dpp_xcalloc(st[i].n + 1, sizeof *st[i].of);
        st[i].order = dpp_xcalloc(st[i].n + 1, sizeof *st[i].order);
        size_t r = 0;
        for (size_t f = 0; f < s->nfiles; f++) {
            if (s->files[f].source != i)
                continue;
            size_t nb = st[i].planner->nranges(s->files[f].records, s->files[f].bounds,
                                               s->files[f].nbounds);
            for (size_t b = 0; b < nb; b++)
                st[i].of[r++] = (struct mix_range){(uint32_t)f, (uint32_t)b};
        }
        stream_pass(s, &st[i], epoch, i);
    }
    uint64_t windows = mix_windows(s, nr);
    size_t k = 0, cap = 64;
    dpp_split_t *splits = dpp_xcalloc(cap, sizeof *splits);
    memset(rank_count, 0, nr * sizeof *rank_count);
    for (unsigned rank = 0; rank < nr; rank++) {
        rank_first[rank] = k;
        for (uint64_t w = 0; w < windows; w++) {
            for (unsigned i = 0; i < ns; i++) {
                uint64_t want = s->spec.sources[i].window_rows;
                mix_stream_t *m = &st[i];
                while (want > 0) {
                    if (m->at == m->n) { /* only "repeat" gets here (mix_windows) */
                        m->pass++;
                        stream_pass(s, m, epoch, i);
                    }
                    const dpp_file_t *f = &s->files[m->of[m->order[m->at]].file];
                    dpp_range_t range;
                    m->planner->range(f->records, f->bounds, f->nbounds, s->spec.split_rows,
                                      m->of[m->order[m->at]].b, &range);
                    uint64_t left = range.record_count - m->off;
                    uint64_t take = left < want ? left : want;
                    if (take > 0) {
                        if (k == cap)
                            splits = dpp_xrealloc(splits, (cap *= 2) * sizeof *splits);
                        splits[k++] = (dpp_split_t){.file = m->of[m->order[m->at]].file,
                                                    .rank = rank,
                                                    .seq = (uint32_t)rank_count[rank]++,
                                                    .record_start = range.record_start,
                                                    .record_skip = m->off,
                                                    .record_count = take,
                                                    .range_records = range.record_count,
                                                    .byte_start = range.byte_start,
                                                    .byte_end = range.byte_end,
                                                    .source = i};
                    }
                    m->off += take;
                    want -= take;
                    if (m->off == range.record_count) {
                        m->at++;
                        m->off = 0;
                    }
                }
            }
        }
    }
    for (unsigned i = 0; i < ns; i++) {
        free(st[i].of);
        free(st[i].order);
    }
    free(st);
    *nsplits = k;
    return splits;
}

/* The plan of `epoch`: deals the files' index ranges to the ranks, in file
 * order or (shuffle) in an order permuted by (seed, epoch): rank 0 takes
 * records until its quota is met, then rank 1, and so on; a range that
 * straddles two quotas becomes two splits (windows of it). Every rank thus
 * gets the same number of batches, whichever files hold how many records,
 * and a rank's splits are consecutive ids in the order it consumes them
 * (rank_first, rank_count: [consumers]). Every split is pending. Pure: the
 * same indexes, spec and epoch give the same plan. */
static dpp_split_t *plan_epoch(const dpp_session_t *s, unsigned epoch, unsigned nr,
                               size_t *nsplits, size_t *rank_first, size_t *rank_count)
{
    if (s->spec.nsources > 0)
        return plan_mixture(s, epoch, nr, nsplits, rank_first, rank_count);
    const dpp_planner_t *planner = dpp_planner_for(s->spec.format, s->spec.text != NULL);
    uint64_t total = total_records(s);
    size_t ranges = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        const dpp_file_t *f = &s->files[i];
        ranges += planner->nranges(f->records, f->bounds, f->nbounds);
    }
    struct range_ref {
        uint32_t file, b;
    } *of = dpp_xcalloc(ranges + 1, sizeof *of);
    size_t r = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        const dpp_file_t *f = &s->files[i];
        size_t nb = planner->nranges(f->records, f->bounds, f->nbounds);
        for (size_t b = 0; b < nb; b++)
            of[r++] = (struct range_ref){(uint32_t)i, (uint32_t)b};
    }
    uint32_t *order = dpp_xcalloc(ranges + 1, sizeof *order);
    if (s->spec.shuffle)
        dpp_permute(order, ranges, dpp_shuffle_seed(s->spec.shuffle_seed, epoch, 0));
    else
        for (r = 0; r < ranges; r++)
            order[r] = (uint32_t)r;

    /* at most one extra split per rank boundary */
    dpp_split_t *splits = dpp_xcalloc(ranges + nr + 1, sizeof *splits);
    memset(rank_first, 0, nr * sizeof *rank_first);
    memset(rank_count, 0, nr * sizeof *rank_count);
    size_t k = 0;
    unsigned rank = 0;
    uint64_t left = rank_quota(s, total, nr, 0);
    for (r = 0; r < ranges && rank < nr; r++) {
        const dpp_file_t *f = &s->files[of[order[r]].file];
        dpp_range_t range;
        planner->range(f->records, f->bounds, f->nbounds, s->spec.split_rows, of[order[r]].b,
                       &range);
        uint64_t count = range.record_count;
        uint64_t skip = 0;
        while (skip < count && rank < nr) {
            if (left == 0) {
                if (++rank == nr)
                    break;
                left = rank_quota(s, total, nr, rank);
                rank_first[rank] = k;
                continue;
            }
            uint64_t take = count - skip < left ? count - skip : left;
            dpp_split_t *sp = &splits[k++];
            sp->file = of[order[r]].file;
            sp->rank = rank;
            sp->seq = (uint32_t)rank_count[rank]++;
            sp->record_start = range.record_start;
            sp->record_skip = skip;
            sp->record_count = take;
            sp->range_records = range.record_count;
            sp->byte_start = range.byte_start;
            sp->byte_end = range.byte_end;
            skip += take;
            left -= take;
        }
    }
    for (unsigned q = rank + 1; q < nr; q++)
        rank_first[q] = k; /* ranks left without records */
    free(order);
    free(of);
    *nsplits = k;
    return splits;
}

/* Where rank r of an old world stands in its epoch's plan: the split
 * position and the output row inside that split (block index x batch_size
 * + row: blocks are batch_size rows but a split's last). */
typedef struct old_pos {
    size_t seq;
    uint64_t at;
} old_pos_t;

/* The rest of an epoch after the old world's positions pos[0..n_old) in
 * its plan (old, ofirst, ocount), dealt to n_new ranks: each old rank's
 * splits from its position on, in rank and split order, a split it stopped
 * inside kept from its position (out_skip), then cut at the new ranks'
 * quotas as plan_epoch cuts (out_skip/out_take: the window is made whole,
 * the client keeps its part). Pure. */
static dpp_split_t *reshape_plan(const dpp_session_t *s, const dpp_split_t *old,
                                 const size_t *ofirst, const size_t *ocount, unsigned n_old,
                                 const old_pos_t *pos, unsigned n_new, size_t *nsplits,
                                 size_t *rank_first, size_t *rank_count)
{
    uint64_t total = 0;
    size_t pieces = 0;
    for (unsigned r = 0; r < n_old; r++) {
        for (size_t j = pos[r].seq; j < ocount[r]; j++) {
            const dpp_split_t *sp = &old[ofirst[r] + j];
            uint64_t lo = sp->out_take ? sp->out_skip : 0, hi = lo + dpp_split_rows(sp);
            if (j == pos[r].seq && pos[r].at > lo)
                lo = pos[r].at;
            total += hi > lo ? hi - lo : 0;
            pieces++;
        }
    }
    dpp_split_t *splits = dpp_xcalloc(pieces + n_new + 1, sizeof *splits);
    memset(rank_first, 0, n_new * sizeof *rank_first);
    memset(rank_count, 0, n_new * sizeof *rank_count);
    size_t k = 0;
    unsigned rank = 0;
    uint64_t left = rank_quota(s, total, n_new, 0);
    for (unsigned r = 0; r < n_old && rank < n_new; r++) {
        for (size_t j = pos[r].seq; j < ocount[r] && rank < n_new; j++) {
            const dpp_split_t *sp = &old[ofirst[r] + j];
            uint64_t lo = sp->out_take ? sp->out_skip : 0, hi = lo + dpp_split_rows(sp);
            if (j == pos[r].seq && pos[r].at > lo)
                lo = pos[r].at;
            while (lo < hi && rank < n_new) {
                if (left == 0) {
                    if (++rank == n_new)
                        break;
                    left = rank_quota(s, total, n_new, rank);
                    rank_first[rank] = k;
                    continue;
                }
                uint64_t take = hi - lo < left ? hi - lo : left;
                dpp_split_t *np = &splits[k++];
                *np = (dpp_split_t){.file = sp->file,
                                    .rank = rank,
                                    .seq = (uint32_t)rank_count[rank]++,
                                    .record_start = sp->record_start,
                                    .record_skip = sp->record_skip,
                                    .record_count = sp->record_count,
                                    .range_records = sp->range_records,
                                    .byte_start = sp->byte_start,
                                    .byte_end = sp->byte_end,
                                    .source = sp->source};
                if (lo != 0 || take != sp->record_count) { /* not the whole window */
                    np->out_skip = lo;
                    np->out_take = take;
                }
                lo += take;
                left -= take;
            }
        }
    }
    for (unsigned q = rank + 1; q < n_new; q++)
        rank_first[q] = k; /* ranks left without rows */
    *nsplits = k;
    return splits;
}

/* The positions the old world's tokens (n_old, rank i's i-th, at `epoch`
 * or at its end, which dpp_session_reshape checked) give in the plan of
 * that epoch (ocount: each rank's splits). */
static void token_positions(const dpp_session_t *s, const uint8_t *tokens, unsigned n_old,
                            unsigned epoch, const size_t *ocount, old_pos_t *pos)
{
    for (unsigned r = 0; r < n_old; r++) {
        dpp_ckpt_token_t t;
        if (dpp_ckpt_token_parse(tokens + (size_t)r * DPP_CKPT_TOKEN_SIZE, DPP_CKPT_TOKEN_SIZE,
                                 &t, NULL, 0) != 0 ||
            t.epoch != epoch) {
            pos[r] = (old_pos_t){ocount[r], 0}; /* at the epoch's end */
            continue;
        }
        pos[r].seq = t.seq < ocount[r] ? t.seq : ocount[r];
        pos[r].at = (uint64_t)t.index * s->spec.batch_size + t.row;
    }
}

/* The plan of `epoch` for the session's spec.consumers ranks: plan_epoch,
 * or for gen_epoch with elastic resumes in it, the plan base_consumers
 * ranks had, cut again by each resume in turn. Pure. */
static dpp_split_t *plan_of(const dpp_session_t *s, unsigned epoch, size_t *nsplits,
                            size_t *rank_first, size_t *rank_count)
{
    if (s->nchain == 0 || epoch != s->gen_epoch)
        return plan_epoch(s, epoch, s->spec.consumers, nsplits, rank_first, rank_count);
    unsigned n = s->base_consumers;
    size_t *first = dpp_xcalloc(n, sizeof *first), *count = dpp_xcalloc(n, sizeof *count);
    dpp_split_t *plan = plan_epoch(s, epoch, n, nsplits, first, count);
    for (size_t c = 0; c < s->nchain; c++) {
        const dpp_reshape_t *rs = &s->chain[c];
        old_pos_t *pos = dpp_xcalloc(rs->n_old, sizeof *pos);
        token_positions(s, rs->tokens, rs->n_old, epoch, count, pos);
        size_t *nfirst = dpp_xcalloc(rs->n_new, sizeof *nfirst);
        size_t *ncount = dpp_xcalloc(rs->n_new, sizeof *ncount);
        dpp_split_t *next =
            reshape_plan(s, plan, first, count, rs->n_old, pos, rs->n_new, nsplits, nfirst, ncount);
        free(pos);
        free(plan);
        free(first);
        free(count);
        plan = next;
        first = nfirst;
        count = ncount;
    }
    memcpy(rank_first, first, s->spec.consumers * sizeof *rank_first);
    memcpy(rank_count, count, s->spec.consumers * sizeof *rank_count);
    free(first);
    free(count);
    return plan;
}

/* What plan_epoch gives each rank of the session's world (out:
 * [consumers]): whole windows of every source, or each rank its quota of
 * the records while they last. */
static void plain_rank_records(const dpp_session_t *s, uint64_t *out)
{
    uint64_t window = 0, left = total_records(s), total = left;
    for (unsigned i = 0; i < s->spec.nsources; i++)
        window += s->spec.sources[i].window_rows;
    uint64_t windows = s->spec.nsources ? mix_windows(s, s->spec.consumers) : 0;
    for (unsigned r = 0; r < s->spec.consumers; r++) {
        if (s->spec.nsources) {
            out[r] = windows * window;
            continue;
        }
        uint64_t quota = rank_quota(s, total, s->spec.consumers, r);
        out[r] = quota < left ? quota : left;
        left -= out[r];
    }
}

uint64_t dpp_session_plain_rank_records(const dpp_session_t *s, unsigned rank)
{
    if (s->nchain > 0 && s->epoch == s->gen_epoch && s->gen_plain_records)
        return s->gen_plain_records[rank];
    return dpp_session_rank_records(s, rank);
}

/* Installs the plan of s->epoch. */
static void plan_splits(dpp_session_t *s)
{
    if (s->rank_first == NULL) {
        s->rank_first = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_first);
        s->rank_count = dpp_xcalloc(s->spec.consumers, sizeof *s->rank_count);
    }
    free(s->splits);
    s->splits = plan_of(s, s->epoch, &s->nsplits, s->rank_first, s->rank_count);
    memset(s->rank_cursor, 0, s->spec.consumers * sizeof *s->rank_cursor);
    memset(s->rank_pending, 0, s->spec.consumers * sizeof *s->rank_pending);
    memset(s->rank_leased_end, 0, s->spec.consumers * sizeof *s->rank_leased_end);
    for (unsigned r = 0; r < s->spec.consumers; r++)
        s->rank_report_lo[r] = SIZE_MAX;
    memset(s->counts, 0, sizeof s->counts);
    s->counts[SPLIT_PENDING] = s->nsplits;
    if (s->source_epoch_rows)
        memset(s->source_epoch_rows, 0, s->spec.nsources * sizeof *s->source_epoch_rows);
    s->reports_due = 0;
    s->epoch_held = 0;
    if (s->nchain > 0 && s->epoch == s->gen_epoch) {
        /* what the clients of the re-planned epoch need, also later */
        uint64_t most = 0;
        for (unsigned r = 0; r < s->spec.consumers; r++) {
            uint64_t n = dpp_session_rank_records(s, r);
            most = n > most ? n : most;
        }
        s->gen_pad_batches = (most + s->spec.batch_size - 1) / s->spec.batch_size;
        free(s->gen_plain_records);
        s->gen_plain_records = dpp_xcalloc(s->spec.consumers, sizeof *s->gen_plain_records);
        plain_rank_records(s, s->gen_plain_records);
        free(s->gen_trims);
        s->gen_trims = dpp_xcalloc(s->nsplits + 1, sizeof *s->gen_trims);
        s->ngen_trims = 0;
        for (size_t i = 0; i < s->nsplits; i++)
            if (s->splits[i].out_take)
                s->gen_trims[s->ngen_trims++] = (struct dpp_trim){
                    s->splits[i].rank, s->splits[i].seq, s->splits[i].out_skip,
                    s->splits[i].out_take};
    }
}

int dpp_session_file_indexed(dpp_session_t *s, size_t i, uint64_t records, const uint64_t *bounds,
                             size_t n)
{
    dpp_file_t *f = &s->files[i];
    if (f->indexed || s->state != SESSION_INDEXING)
        return 0;
    f->indexed = 1;
    f->records = records;
    f->bounds = dpp_xcalloc(n ? n : 1, sizeof *f->bounds);
    memcpy(f->bounds, bounds, n * sizeof *bounds);
    f->nbounds = n;
    f->index_lease.lease_id = f->index_lease.worker_id = 0;
    if (++s->files_indexed < s->nfiles)
        return 0;
    for (unsigned j = 0; j < s->spec.nsources; j++)
        for (size_t k = 0; k < s->nfiles; k++)
            if (s->files[k].source == j)
                s->source_records[j] += s->files[k].records;
    char too_big[768];
    if (dpp_session_plan_check(s, s->spec.consumers, too_big, sizeof too_big) != 0) {
        s->planned_ms = dpp_wall_ms();
        dpp_session_fail(s, too_big);
        return 0;
    }
    plan_splits(s);
    s->planned_ms = dpp_wall_ms();
    s->state = s->nsplits ? SESSION_RUNNING : SESSION_DONE;
    if (s->state == SESSION_DONE)
        s->ended_ms = s->planned_ms;
    if (s->nsplits == 0 && s->spec.nsources > 0) {
        /* a mixture that would deliver nothing says which source is why */
        char why[512] = "";
        for (unsigned j = 0; j < s->spec.nsources && !why[0]; j++) {
            uint64_t per = (uint64_t)s->spec.consumers * s->spec.sources[j].window_rows;
            if (s->source_records[j] == 0 || (!s->spec.mix_repeat && s->source_records[j] < per))
                snprintf(why, sizeof why,
                         "mixture: source %u (table %s) has %" PRIu64 " records, fewer than one "
                         "window of every rank takes (%u ranks x %u rows): the epoch would be "
                         "empty; lower mixture.window, or give the source more rows",
                         j, s->spec.sources[j].spec.table, s->source_records[j],
                         s->spec.consumers, s->spec.sources[j].window_rows);
        }
        dpp_session_fail(s, why[0] ? why : "mixture: the epoch would be empty");
    }
    return s->state == SESSION_RUNNING;
}

void dpp_session_set(dpp_session_t *s, size_t i, split_state_t st)
{
    if (s->splits[i].report_due && st != SPLIT_CONSUMED) {
        s->splits[i].report_due = 0; /* produced again: a new report will come */
        s->reports_due--;
    }
    s->counts[s->splits[i].state]--;
    s->counts[st]++;
    s->splits[i].state = st;
    if (st == SPLIT_LEASED && s->rank_leased_end[s->splits[i].rank] <= s->splits[i].seq)
        s->rank_leased_end[s->splits[i].rank] = s->splits[i].seq + 1;
    if (st == SPLIT_PENDING) {
        dpp_split_t *sp = &s->splits[i];
        sp->lease.lease_id = sp->lease.worker_id = 0;
        if (s->rank_pending[sp->rank] > sp->seq)
            s->rank_pending[sp->rank] = sp->seq; /* a grant looks from here again */
    }
}

size_t dpp_session_rank_pending(dpp_session_t *s, unsigned r)
{
    /* moves only forward over splits that are not pending, and back in
     * dpp_session_set() when one becomes pending again: a grant costs what
     * it hands out, not the splits in flight before them */
    size_t first = s->rank_first[r], n = s->rank_count[r], *p = &s->rank_pending[r];
    size_t cur = dpp_session_rank_cursor(s, r);
    if (*p < cur)
        *p = cur;
    while (*p < n && s->splits[first + *p].state != SPLIT_PENDING) {
        (*p)++;
        s->cursor_steps++;
    }
    return *p;
}

size_t dpp_session_rank_cursor(dpp_session_t *s, unsigned r)
{
    /* moves only forward, and is reset when splits go back (a new plan,
     * a resume) */
    size_t first = s->rank_first[r], n = s->rank_count[r], *cur = &s->rank_cursor[r];
    while (*cur < n && s->splits[first + *cur].state == SPLIT_CONSUMED) {
        (*cur)++;
        s->cursor_steps++;
    }
    return *cur;
}

size_t dpp_session_lease_end(dpp_session_t *s, unsigned r)
{
    size_t n = s->rank_count[r];
    if (s->spec.order_fastest)
        return n;
    size_t end = dpp_session_rank_cursor(s, r) + s->rank_prefetch[r] + 1;
    return end < n ? end : n;
}

/* Every split of the epoch is consumed: starts the next epoch or ends the
 * session. Returns 1 when new splits became pending. */
static int epoch_complete(dpp_session_t *s)
{
    if (s->epoch + 1 >= s->spec.epochs) {
        s->state = SESSION_DONE;
        s->ended_ms = dpp_wall_ms();
        return 0;
    }
    s->prev_leases = dpp_xrealloc(s->prev_leases, (s->nsplits + 1) * sizeof *s->prev_leases);
    s->nprev = s->nsplits;
    for (size_t j = 0; j < s->nsplits; j++)
        s->prev_leases[j] = s->splits[j].lease.lease_id;
    s->epoch++;
    plan_splits(s);
    return 1;
}

int dpp_session_consumed(dpp_session_t *s, size_t i, int live)
{
    dpp_split_t *sp = &s->splits[i];
    if (sp->state == SPLIT_CONSUMED)
        return 0;
    if (live && sp->state == SPLIT_LEASED) {
        sp->report_due = 1;
        s->reports_due++;
        if (s->rank_report_lo[sp->rank] > sp->seq)
            s->rank_report_lo[sp->rank] = sp->seq;
    }
    if (s->spec.nsources > 0) { /* rows per source, for status and /metrics */
        uint64_t n = sp->rows ? sp->rows : dpp_split_rows(sp);
        s->source_rows[sp->source] += n;
        s->source_epoch_rows[sp->source] += n;
    }
    dpp_session_set(s, i, SPLIT_CONSUMED);
    s->consumed_total++;
    if (s->counts[SPLIT_CONSUMED] < s->nsplits)
        return 0;
    if (s->reports_due > 0) {
        s->epoch_held = 1;
        s->held_ms = dpp_now_ms();
        return 0;
    }
    return epoch_complete(s);
}

int dpp_session_rank_reports_due(const dpp_session_t *s, unsigned r)
{
    if (s->reports_due == 0 || s->rank_first == NULL || r >= s->spec.consumers)
        return 0;
    /* a report_due split was leased: none lies outside these bounds */
    for (size_t j = s->rank_report_lo[r]; j < s->rank_leased_end[r]; j++)
        if (s->splits[s->rank_first[r] + j].report_due)
            return 1;
    return 0;
}

void dpp_session_reported(dpp_session_t *s, size_t i)
{
    if (i < s->nsplits && s->splits[i].report_due) {
        s->splits[i].report_due = 0;
        s->reports_due--;
    }
}

int dpp_session_unhold(dpp_session_t *s, int force)
{
    if (!s->epoch_held || (s->reports_due > 0 && !force))
        return -1;
    for (size_t i = 0; i < s->nsplits && s->reports_due > 0; i++)
        dpp_session_reported(s, i);
    s->epoch_held = 0;
    return epoch_complete(s);
}

size_t dpp_session_release_worker(dpp_session_t *s, uint64_t worker_id)
{
    size_t n = 0;
    for (size_t i = 0; s->state == SESSION_INDEXING && i < s->nfiles; i++) {
        dpp_lease_ref_t *l = &s->files[i].index_lease;
        if (!s->files[i].indexed && l->lease_id && l->worker_id == worker_id) {
            l->lease_id = l->worker_id = 0;
            if (i < s->index_next)
                s->index_next = i;
            n++;
        }
    }
    /* What the worker held lies in each rank's stretch from its first
     * unconsumed or report_due split to the last one leased: a loss costs
     * the splits in flight, not the plan (1,000 workers gone at once used
     * to look at every split of every session 1,000 times). */
    for (unsigned r = 0; s->rank_count && r < s->spec.consumers; r++) {
        size_t first = s->rank_first[r], cur = dpp_session_rank_cursor(s, r);
        size_t from = s->rank_report_lo[r] < cur ? s->rank_report_lo[r] : cur;
        size_t report_lo = SIZE_MAX;
        for (size_t j = from; j < s->rank_leased_end[r]; j++) {
            dpp_split_t *sp = &s->splits[first + j];
            s->release_scanned++;
            if (sp->lease.worker_id == worker_id && sp->report_due)
                dpp_session_reported(s, first + j); /* its report is not coming */
            if (sp->lease.worker_id == worker_id &&
                (sp->state == SPLIT_LEASED || sp->state == SPLIT_PRODUCED)) {
                if (sp->state == SPLIT_PRODUCED)
                    s->rows_produced -= sp->rows; /* counted again when re-produced */
                dpp_session_set(s, first + j, SPLIT_PENDING);
                n++;
            }
            if (sp->report_due && report_lo == SIZE_MAX)
                report_lo = j;
        }
        s->rank_report_lo[r] = report_lo;
    }
    return n;
}

size_t dpp_session_release_rank_worker(dpp_session_t *s, unsigned r, uint64_t worker_id)
{
    if (s->state != SESSION_RUNNING || r >= s->spec.consumers || s->rank_count == NULL)
        return 0;
    size_t n = 0, first = s->rank_first[r];
    for (size_t j = 0; j < s->rank_count[r]; j++) {
        dpp_split_t *sp = &s->splits[first + j];
        if (sp->lease.worker_id == worker_id &&
            (sp->state == SPLIT_LEASED || sp->state == SPLIT_PRODUCED)) {
            if (sp->state == SPLIT_PRODUCED)
                s->rows_produced -= sp->rows;
            dpp_session_set(s, first + j, SPLIT_PENDING);
            n++;
        }
    }
    return n;
}

void dpp_session_set_epoch(dpp_session_t *s, unsigned epoch)
{
    s->epoch = epoch;
    plan_splits(s);
}

/* Puts split i back to pending for production again. */
static void reset_split(dpp_session_t *s, size_t i)
{
    dpp_split_t *sp = &s->splits[i];
    if (sp->state == SPLIT_PRODUCED || sp->state == SPLIT_CONSUMED)
        s->rows_produced -= sp->rows; /* counted again when re-produced */
    sp->rows = 0;
    if (sp->state != SPLIT_PENDING)
        dpp_session_set(s, i, SPLIT_PENDING);
}

/* Splits of `rank` in the plan of `epoch`. */
static size_t rank_count_in(const dpp_session_t *s, unsigned rank, unsigned epoch)
{
    if (epoch == s->epoch && s->rank_count)
        return s->rank_count[rank];
    size_t n, *first = dpp_xcalloc(s->spec.consumers, sizeof *first);
    size_t *count = dpp_xcalloc(s->spec.consumers, sizeof *count);
    free(plan_of(s, epoch, &n, first, count));
    n = count[rank];
    free(first);
    free(count);
    return n;
}

int dpp_session_resume(dpp_session_t *s, unsigned rank, unsigned epoch, unsigned seq)
{
    if (rank >= s->spec.consumers || epoch > s->spec.epochs ||
        (epoch == s->spec.epochs && seq != 0))
        return DPP_ETOKEN;
    if (s->state == SESSION_FAILED)
        return 0; /* the client learns of the failure from the reply */
    if (s->state == SESSION_INDEXING)
        return epoch == 0 && seq == 0 ? 0 : DPP_ETOKEN; /* nothing was consumed yet */
    unsigned cur = s->state == SESSION_DONE ? s->spec.epochs : s->epoch;
    /* the end of an epoch is the start of the next: no need to go back */
    while (epoch < cur) {
        size_t n = rank_count_in(s, rank, epoch);
        if (seq > n)
            return DPP_ETOKEN;
        if (seq < n)
            break;
        epoch++;
        seq = 0;
    }
    if (epoch > cur)
        return DPP_ETOKEN; /* epoch e+1 is leased only after e is consumed */
    if (epoch == s->spec.epochs)
        return 0; /* the rank had everything, and so had the others */
    if (epoch == cur && seq > s->rank_count[rank])
        return DPP_ETOKEN;
    if (epoch < cur) {
        /* An earlier epoch: plan it again. Other ranks count as done with
         * it; a rank that resumes too puts its own splits back. */
        s->epoch = epoch;
        s->state = SESSION_RUNNING;
        s->ended_ms = 0; /* a done session resumed: live again */
        plan_splits(s);
        for (size_t i = 0; i < s->nsplits; i++)
            if (s->splits[i].rank != rank)
                dpp_session_set(s, i, SPLIT_CONSUMED);
    }
    size_t first = s->rank_first[rank];
    for (size_t j = seq; j < s->rank_count[rank]; j++)
        reset_split(s, first + j);
    if (s->rank_cursor[rank] > seq)
        s->rank_cursor[rank] = seq;
    /* the splits before the token's position reached the trainer (their
     * acknowledgements may not have): consumed; the last one may end the
     * epoch */
    for (size_t j = 0; j < seq; j++)
        if (s->splits[first + j].state != SPLIT_CONSUMED)
            dpp_session_consumed(s, first + j, 0);
    if (s->state == SESSION_RUNNING && s->counts[SPLIT_CONSUMED] == s->nsplits)
        epoch_complete(s); /* the rank has no splits and the others are done */
    return 0;
}

/* Checks t's position against the plan of its epoch (see
 * dpp_session_check_token()); *plan gets what the plan says there. */
static int check_position(const dpp_session_t *s, const dpp_ckpt_token_t *t, dpp_token_plan_t *plan,
                          char *why, size_t whylen)
{
    unsigned epochs = s->spec.epochs;
    uint64_t bs = s->spec.batch_size;
    if (t->epoch == epochs && epochs != DPP_EPOCHS_UNBOUNDED) {
        /* taken after the last batch: a position of nothing */
        const struct {
            const char *name;
            uint32_t v;
        } zero[] = {{"seq", t->seq}, {"index", t->index}, {"row", t->row}, {"batches", t->batches}};
        for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
            if (zero[i].v != 0)
                return dpp_errf(DPP_ETOKEN, why, whylen,
                                "%s: the token says %u, a token taken after the last epoch (%u) "
                                "says 0",
                                zero[i].name, zero[i].v, epochs);
        if (t->rank_splits != DPP_CKPT_SPLITS_UNKNOWN)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "rank_splits: the token says %u, a token taken after the last epoch "
                            "(%u) names no split count",
                            t->rank_splits, epochs);
        if (s->state != SESSION_DONE)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "epoch: the token says %u (after the last epoch), the session is at "
                            "epoch %u and not done",
                            t->epoch, s->epoch);
        return 0;
    }
    if (t->epoch > epochs)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "epoch: the token says %u, the session has %u epochs", t->epoch, epochs);
    if (s->state == SESSION_INDEXING) {
        /* no plan yet, so nothing was consumed: only the start fits */
        if (t->epoch != 0 || t->seq != 0 || t->index != 0 || t->row != 0 || t->batches != 0)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "%s: the token says %u, the session is still indexing its files "
                            "(nothing was read yet), so the plan says 0",
                            t->epoch   ? "epoch"
                            : t->seq   ? "seq"
                            : t->index ? "index"
                            : t->row   ? "row"
                                       : "batches",
                            t->epoch   ? t->epoch
                            : t->seq   ? t->seq
                            : t->index ? t->index
                            : t->row   ? t->row
                                       : t->batches);
        if (t->rank_splits != DPP_CKPT_SPLITS_UNKNOWN)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "rank_splits: the token says %u, the session is still indexing its "
                            "files: the plan has no split count yet",
                            t->rank_splits);
        return 0;
    }
    unsigned cur = s->state == SESSION_DONE ? epochs : s->epoch;
    if (t->epoch > cur)
        return dpp_errf(
            DPP_ETOKEN, why, whylen,
            "epoch: the token says %u, the session is at epoch %u (an epoch starts only "
            "after every split of the one before is consumed)",
            t->epoch, s->epoch);
    /* the token's epoch's plan: the session's own, or made again (pure) */
    const dpp_split_t *splits = s->splits;
    size_t first = 0, n = 0;
    dpp_split_t *owned = NULL;
    size_t *firsts = NULL, *counts = NULL;
    if (t->epoch == s->epoch) {
        first = s->rank_first[t->rank];
        n = s->rank_count[t->rank];
    } else {
        size_t nsplits;
        firsts = dpp_xcalloc(s->spec.consumers, sizeof *firsts);
        counts = dpp_xcalloc(s->spec.consumers, sizeof *counts);
        splits = owned = plan_of(s, t->epoch, &nsplits, firsts, counts);
        first = firsts[t->rank];
        n = counts[t->rank];
    }
    int rc = 0;
    plan->rank_splits = (uint32_t)n;
    uint64_t before = 0; /* records of the rank's epoch before the position */
    for (size_t j = 0; j < t->seq && j < n; j++)
        before += dpp_split_rows(&splits[first + j]);
    if (t->rank_splits != DPP_CKPT_SPLITS_UNKNOWN && t->rank_splits != n) {
        rc = dpp_errf(
            DPP_ETOKEN, why, whylen,
            "rank_splits: the token says %u, the plan of epoch %u gives rank %u %zu splits",
            t->rank_splits, t->epoch, t->rank, n);
    } else if (t->seq > n) {
        rc = dpp_errf(DPP_ETOKEN, why, whylen,
                      "seq: the token says split position %u, the plan of epoch %u gives rank %u "
                      "%zu splits (positions 0..%zu, %zu: the epoch's end)",
                      t->seq, t->epoch, t->rank, n, n ? n - 1 : 0, n);
    } else if (t->seq == n && (t->index != 0 || t->row != 0)) {
        rc = dpp_errf(DPP_ETOKEN, why, whylen,
                      "%s: the token says %u at split position %u, the end of rank %u's %zu splits "
                      "in epoch %u, where the plan has no blocks (0)",
                      t->index ? "index" : "row", t->index ? t->index : t->row, t->seq, t->rank, n,
                      t->epoch);
    } else if (t->row >= bs) {
        rc = dpp_errf(DPP_ETOKEN, why, whylen,
                      "row: the token says %u, a block holds at most batch_size = %" PRIu64
                      " rows (rows 0..%" PRIu64 ")",
                      t->row, bs, bs - 1);
    } else if (t->seq < n) {
        uint64_t records = splits[first + t->seq].record_count;
        plan->split_records = records;
        /* blocks hold batch_size rows but a split's last, which comes
         * before the end marker; a record gives at most one row */
        uint64_t blocks = (records + bs - 1) / bs;
        uint64_t at = (uint64_t)t->index * bs;
        uint64_t can_hold = at < records ? records - at : 0;
        if (can_hold > bs)
            can_hold = bs;
        if (t->index > blocks)
            rc =
                dpp_errf(DPP_ETOKEN, why, whylen,
                         "index: the token says block %u, split position %u of rank %u in epoch %u "
                         "has %" PRIu64 " records: at most %" PRIu64 " blocks of %" PRIu64
                         " rows and its end marker (indexes 0..%" PRIu64 ")",
                         t->index, t->seq, t->rank, t->epoch, records, blocks, bs, blocks);
        else if (t->row > 0 && t->row >= can_hold)
            rc = dpp_errf(DPP_ETOKEN, why, whylen,
                          "row: the token says %u, block %u of split position %u (rank %u, epoch "
                          "%u, %" PRIu64 " records) holds at most %" PRIu64 " rows",
                          t->row, t->index, t->seq, t->rank, t->epoch, records, can_hold);
        else {
            /* of a cut split (an elastic resume's), the rows it keeps */
            const dpp_split_t *sp = &splits[first + t->seq];
            uint64_t pos = (at < records ? at : records) + t->row;
            uint64_t lo = sp->out_take ? sp->out_skip : 0, in = pos > lo ? pos - lo : 0;
            before += in < dpp_split_rows(sp) ? in : dpp_split_rows(sp);
        }
    }
    if (rc == 0) {
        /* Mid-epoch every batch handed out is batch_size rows; at the end a
         * kept remainder is one short batch and padding fills up to the
         * plan's batch count. */
        uint64_t most = t->seq < n ? before / bs : (before + bs - 1) / bs;
        uint64_t pads = s->nchain > 0 && t->epoch == s->gen_epoch ? s->gen_pad_batches
                                                                  : dpp_session_pad_batches(s);
        if (t->seq == n && s->spec.remainder == DPP_REMAINDER_PAD && pads > most)
            most = pads;
        if (t->batches > most)
            rc =
                dpp_errf(DPP_ETOKEN, why, whylen,
                         "batches: the token says %u before its position, the %" PRIu64
                         " records of rank %u before split position %u block %u row %u of epoch "
                         "%u fill at most %" PRIu64 " batches of %" PRIu64,
                         t->batches, before, t->rank, t->seq, t->index, t->row, t->epoch, most, bs);
    }
    free(owned);
    free(firsts);
    free(counts);
    return rc;
}

/* The refusal of token t of another plan generation than s's. */
static int generation_refused(const dpp_session_t *s, const dpp_ckpt_token_t *t, char *why,
                              size_t whylen)
{
    return dpp_errf(DPP_ETOKEN, why, whylen,
                    "generation: the token says %u, session %s is at generation %u (%u ranks): %s",
                    t->generation, s->id, s->generation, s->spec.consumers,
                    t->generation < s->generation
                        ? "it was resumed at another world size after this token was taken; "
                          "resume from a token taken since"
                        : "no plan of this session had that generation");
}

int dpp_session_check_token(const dpp_session_t *s, const void *token, size_t len, unsigned rank,
                            unsigned req_epoch, unsigned req_seq, dpp_ckpt_token_t *t,
                            dpp_token_plan_t *plan, char *why, size_t whylen)
{
    memset(plan, 0, sizeof *plan);
    int rc = dpp_ckpt_token_parse(token, len, t, why, whylen);
    if (rc)
        return rc;
    /* The fields are checked even when the MAC fails, so that the refusal
     * can name the field a forger changed. */
    int mac_ok = dpp_ckpt_token_verify(token, s->token_key);
    char field[512] = "";
    if (strcmp(t->session, s->id) != 0)
        rc = dpp_errf(DPP_ETOKEN, field, sizeof field,
                      "session: the token says \"%s\", the attach is for %s", t->session, s->id);
    else if (t->rank != rank)
        rc = dpp_errf(DPP_ETOKEN, field, sizeof field,
                      "rank: the token says %u, the attach is for rank %u", t->rank, rank);
    /* a genuine token of an older generation is named so at once; in a
     * changed one, the fields a forger changes are named first */
    else if (mac_ok && t->generation != s->generation)
        rc = generation_refused(s, t, field, sizeof field);
    else if (t->rank >= s->spec.consumers)
        rc = dpp_errf(DPP_ETOKEN, field, sizeof field,
                      "rank: the token says %u, the session has %u consumers", t->rank,
                      s->spec.consumers);
    else if (t->epoch != req_epoch || t->seq != req_seq)
        rc = dpp_errf(DPP_ETOKEN, field, sizeof field,
                      "epoch: the token says epoch %u split position %u, the attach asks for epoch "
                      "%u split position %u",
                      t->epoch, t->seq, req_epoch, req_seq);
    else if (s->state != SESSION_FAILED)
        rc = check_position(s, t, plan, field, sizeof field);
    if (rc == 0 && t->generation != s->generation)
        rc = generation_refused(s, t, field, sizeof field);
    if (rc)
        return dpp_errf(DPP_ETOKEN, why, whylen, "%s%s", field,
                        mac_ok ? ""
                               : "; and its MAC does not verify: the token was changed after it "
                                 "was signed");
    if (!mac_ok)
        return dpp_errf(
            DPP_ETOKEN, why, whylen,
            "mac: the token's HMAC-SHA256 does not verify under session %s's token key: "
            "it was changed after it was signed, or signed for another session",
            s->id);
    return 0;
}

/* The per-rank state sized for n ranks, every rank without a reader. */
static void set_consumers(dpp_session_t *s, unsigned n)
{
    s->spec.consumers = n;
#define RESIZE(field) (free(s->field), s->field = dpp_xcalloc(n, sizeof *s->field))
    RESIZE(rank_seen_ms);
    RESIZE(rank_prefetch);
    RESIZE(rank_cursor);
    RESIZE(rank_pending);
    RESIZE(rank_leased_end);
    RESIZE(rank_report_lo);
    RESIZE(reports);
    RESIZE(holders);
    if (s->rank_first) {
        RESIZE(rank_first);
        RESIZE(rank_count);
    }
#undef RESIZE
    for (unsigned r = 0; r < n; r++)
        s->rank_prefetch[r] = DPP_SESSION_DEFAULT_PREFETCH;
    s->grant_rank = 0;
    free(s->gen_plain_records); /* of the world before; plan_splits makes it anew */
    s->gen_plain_records = NULL;
}

void dpp_session_set_world(dpp_session_t *s, unsigned epoch, unsigned consumers,
                           unsigned generation)
{
    for (size_t i = 0; i < s->nchain; i++)
        free(s->chain[i].tokens);
    s->nchain = 0;
    s->generation = generation;
    set_consumers(s, consumers);
    dpp_session_set_epoch(s, epoch);
}

const dpp_reshape_t *dpp_session_chain_find(const dpp_session_t *s, const uint8_t *tokens,
                                            size_t len)
{
    for (size_t c = 0; c < s->nchain; c++)
        if ((size_t)s->chain[c].n_old * DPP_CKPT_TOKEN_SIZE == len &&
            memcmp(s->chain[c].tokens, tokens, len) == 0)
            return &s->chain[c];
    return NULL;
}

int dpp_session_rank_went_on(const dpp_session_t *s, unsigned r)
{
    if (s->nchain == 0 || r >= s->spec.consumers || s->rank_count == NULL ||
        (s->state != SESSION_RUNNING && s->state != SESSION_DONE))
        return 0;
    unsigned cur = s->state == SESSION_DONE ? s->spec.epochs : s->epoch;
    if (cur > s->gen_epoch)
        return rank_count_in(s, r, s->gen_epoch) > 0;
    for (size_t j = 0; j < s->rank_count[r]; j++)
        if (s->splits[s->rank_first[r] + j].state == SPLIT_CONSUMED)
            return 1;
    return 0;
}

/* The epoch that tokens (n_old, rank i's i-th, of s's current generation)
 * are at, one at its epoch's end counting as at the next's start; checks
 * that they are one checkpoint's (the plan of an epoch before the current
 * one is made again to tell). Returns 0 or DPP_ETOKEN with why. */
static int tokens_epoch(const dpp_session_t *s, const uint8_t *tokens, unsigned n_old,
                        unsigned *epoch, char *why, size_t whylen)
{
    *epoch = UINT32_MAX;
    for (unsigned r = 0; r < n_old; r++) {
        dpp_ckpt_token_t t;
        int rc = dpp_ckpt_token_parse(tokens + (size_t)r * DPP_CKPT_TOKEN_SIZE, DPP_CKPT_TOKEN_SIZE,
                                      &t, why, whylen);
        if (rc)
            return rc;
        if (t.rank != r || t.generation != s->generation)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "token %u: it is rank %u's of generation %u, the session is at "
                            "generation %u: give every rank's token of one checkpoint, in rank "
                            "order",
                            r, t.rank, t.generation, s->generation);
        unsigned e = t.epoch;
        if (e < s->spec.epochs && t.seq >= rank_count_in(s, r, e))
            e++; /* the end of an epoch is the start of the next */
        if (*epoch == UINT32_MAX)
            *epoch = e;
        if (e != *epoch)
            return dpp_errf(DPP_ETOKEN, why, whylen,
                            "token %u: rank %u is at epoch %u, rank 0 at epoch %u: the tokens of "
                            "one checkpoint are at one epoch (take every rank's at the same step)",
                            r, r, e, *epoch);
    }
    unsigned cur = s->state == SESSION_DONE ? s->spec.epochs : s->epoch;
    if (*epoch > cur + 1) /* dpp_session_check_token refuses those */
        return dpp_errf(DPP_ETOKEN, why, whylen, "the tokens are at epoch %u, the session at %u",
                        *epoch, cur);
    return 0;
}

int dpp_session_reshape(dpp_session_t *s, const uint8_t *tokens, unsigned n_old, unsigned n_new,
                        unsigned generation, char *why, size_t whylen)
{
    const dpp_reshape_t *again =
        dpp_session_chain_find(s, tokens, (size_t)n_old * DPP_CKPT_TOKEN_SIZE);
    if ((again == NULL && n_old != s->spec.consumers) || n_new == 0 ||
        n_new > DPP_SPEC_MAX_CONSUMERS)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "%u tokens for session %s's %u ranks, to resume at %u ranks (1 to %u): "
                        "give every rank's token, in rank order",
                        n_old, s->id, s->spec.consumers, n_new, DPP_SPEC_MAX_CONSUMERS);
    if (s->state == SESSION_INDEXING || s->state == SESSION_FAILED)
        return dpp_errf(DPP_ETOKEN, why, whylen, "session %s is %s: nothing to resume", s->id,
                        dpp_session_state_label(s));
    /* tokens of the chain were checked when their entry was made */
    unsigned epoch = s->gen_epoch;
    if (again == NULL) {
        int rc = tokens_epoch(s, tokens, n_old, &epoch, why, whylen);
        if (rc)
            return rc;
    }
    int rc = dpp_session_plan_check(s, n_new, why, whylen);
    if (rc)
        return rc;
    if (generation == 0)
        return 0;
    if (generation <= s->generation)
        return dpp_errf(DPP_ETOKEN, why, whylen,
                        "generation %u for session %s's new plan, it is at generation %u already",
                        generation, s->id, s->generation);
    /* the chain of resumes that epoch `epoch`'s plan is made from: a world
     * made from an entry's tokens before is made anew from them, in place
     * of that entry and the ones after it */
    size_t keep = again ? (size_t)(again - s->chain) : s->nchain;
    if (again == NULL && (s->nchain == 0 || s->gen_epoch != epoch)) {
        keep = 0;
        s->gen_epoch = epoch;
        s->base_consumers = n_old;
        s->base_generation = s->generation;
    }
    for (size_t i = keep; i < s->nchain; i++)
        free(s->chain[i].tokens);
    s->nchain = keep;
    s->chain = dpp_xrealloc(s->chain, (s->nchain + 1) * sizeof *s->chain);
    dpp_reshape_t *rs = &s->chain[s->nchain++];
    rs->tokens = dpp_xcalloc(n_old, DPP_CKPT_TOKEN_SIZE);
    memcpy(rs->tokens, tokens, (size_t)n_old * DPP_CKPT_TOKEN_SIZE);
    rs->n_old = n_old;
    rs->n_new = n_new;
    rs->generation = s->generation = generation;
    /* the new world's plan of that epoch, every split of it pending; what
     * workers still make for the old one is dropped by generation */
    if (s->splits) {
        s->prev_leases = dpp_xrealloc(s->prev_leases, (s->nsplits + 1) * sizeof *s->prev_leases);
        s->nprev = s->nsplits;
        for (size_t j = 0; j < s->nsplits; j++)
            s->prev_leases[j] = s->splits[j].lease.lease_id;
    }
    set_consumers(s, n_new);
    if (epoch >= s->spec.epochs) { /* every rank had everything */
        s->state = SESSION_DONE;
        return 0;
    }
    s->epoch = epoch;
    s->state = SESSION_RUNNING;
    s->ended_ms = 0;
    plan_splits(s);
    if (s->nsplits == 0)
        epoch_complete(s); /* nothing was left of it */
    return 0;
}

void dpp_session_fail(dpp_session_t *s, const char *message)
{
    s->state = SESSION_FAILED;
    s->ended_ms = dpp_wall_ms();
    free(s->error);
    s->error = dpp_xstrdup(message);
}

const char *dpp_session_state_label(const dpp_session_t *s)
{
    return s->state == SESSION_FAILED && s->cancelled ? "cancelled"
                                                      : dpp_session_state_name(s->state);
}

const char *dpp_session_state_name(session_state_t st)
{
    switch (st) {
    case SESSION_INDEXING:
        return "indexing";
    case SESSION_RUNNING:
        return "running";
    case SESSION_DONE:
        return "done";
    case SESSION_FAILED:
        return "failed";
    }
    return "unknown";
}
