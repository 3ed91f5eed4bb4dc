// SPDX-License-Identifier: Apache-2.0
// dppctl status, list, workers and cancel: what the master says about its
// sessions and workers, once or (status on a terminal, or --watch) live.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "wire/frame.h"
#include "base/reject.h"
#include "spec/spec.h"
#include "base/util.h"
#include "ctl.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "client/control.h"

static int fetch(const ctl_t *ctl, const char *session, Dpp__StatusReply **out)
{
    Dpp__StatusRequest req = DPP__STATUS_REQUEST__INIT;
    req.session_id = (char *)(session ? session : "");
    return ctl_call_master(ctl, DPP_MSG_STATUS, &req.base, DPP_MSG_STATUS_REPLY,
                           (ProtobufCMessage **)out);
}

static int unbounded(const Dpp__SessionStatus *s)
{
    return s->epochs == DPP_EPOCHS_UNBOUNDED;
}

static double ratio(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

/* The session as a JSON object: the text libdppclient's
 * dpp_session_status() gives programs (src/client/control.c), so that
 * both say the same. */
static json_t *session_json(const Dpp__SessionStatus *s)
{
    dpp_jbuf_t b = {0};
    dpp__session_json(&b, s);
    json_t *o = b.failed ? NULL : json_loadb(b.text, b.len, 0, NULL);
    free(b.text);
    return o;
}

static void print_json(json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT);
    if (text)
        puts(text);
    free(text);
    fflush(stdout);
}

/* "3h12m", "45s": how far ahead t (ms since 1970) is; "now" when past. */
static void in_text(char *out, size_t len, int64_t t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t secs = (t - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000)) / 1000;
    if (secs <= 0)
        snprintf(out, len, "now");
    else if (secs < 120)
        snprintf(out, len, "%" PRId64 "s", secs);
    else if (secs < 7200)
        snprintf(out, len, "%" PRId64 "m", secs / 60);
    else if (secs < 2 * 86400)
        snprintf(out, len, "%" PRId64 "h%02" PRId64 "m", secs / 3600, secs / 60 % 60);
    else
        snprintf(out, len, "%" PRId64 "d", secs / 86400);
}

/* When the master forgets a finished session, or ends a live one nobody
 * reads: "  expires in 23h59m", "  abandoned in 59m without a client". */
static void lifetime_text(const Dpp__SessionStatus *s, char *out, size_t len)
{
    char in[32];
    out[0] = '\0';
    if (s->expires_unix_ms) {
        in_text(in, sizeof in, s->expires_unix_ms);
        snprintf(out, len, "  expires in %s", in);
    } else if (s->abandon_unix_ms) {
        in_text(in, sizeof in, s->abandon_unix_ms);
        snprintf(out, len, "  abandoned in %s without a client", in);
    }
}

/* Epochs count from 0 everywhere (read, JSON, the Python binding, tokens):
 * "2/6" is epoch 2 of 6, two epochs done; a done session shows "6/6", an
 * unbounded one "100/unbounded". */
static void epoch_text(const Dpp__SessionStatus *s, char *buf, size_t len)
{
    int done = strcmp(s->state, "done") == 0;
    if (unbounded(s))
        snprintf(buf, len, "%u/unbounded", s->current_epoch);
    else
        snprintf(buf, len, "%u/%u", done ? s->epochs : s->current_epoch, s->epochs);
}

/* A quantile the master read off a histogram: the bucket's upper bound. */
static void bound_text(uint32_t us, char *out, size_t len)
{
    if (us == UINT32_MAX)
        snprintf(out, len, "> 10 s");
    else if (us >= 1000000)
        snprintf(out, len, "<= %g s", us / 1e6);
    else
        snprintf(out, len, "<= %g ms", us / 1e3);
}

static uint64_t bucket_sum(const uint64_t *b, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += b[i];
    return sum;
}

/* The control plane under the listing: what an operator watches when a
 * master serves many workers (docs/operations.md). The counts since start
 * come first: a short minute (a fast job, a slow machine) can hold none of
 * the replies that came. A lease request waits at the master while there
 * is nothing to lease, so with no session running the waits say nothing of
 * the master and are left out. */
static void master_line(const Dpp__MasterStatus *ms, int running)
{
    char l50[32], l99[32], c50[32], c99[32];
    bound_text(ms->lease_p50_us, l50, sizeof l50);
    bound_text(ms->lease_p99_us, l99, sizeof l99);
    bound_text(ms->commit_p50_us, c50, sizeof c50);
    bound_text(ms->commit_p99_us, c99, sizeof c99);
    int idle = !running && ms->splits_per_second == 0;
    if (idle)
        printf("master: idle (no session running); ");
    else
        printf("master: %.0f splits/s; ", ms->splits_per_second);
    printf("since start: %" PRIu64 " lease replies, %" PRIu64 " journal commits%s",
           bucket_sum(ms->lease_buckets, ms->n_lease_buckets),
           bucket_sum(ms->commit_buckets, ms->n_commit_buckets), idle ? "\n" : "; ");
    if (idle)
        return;
    printf("last %u s: ", ms->window_s);
    /* a request waits while there is nothing to lease (the workers are
     * ahead of the readers): a long wait then is the workers idling, not
     * a slow master */
    if (ms->lease_replies && ms->lease_p50_us >= 1000000)
        printf("%" PRIu64 " lease replies, most after waiting for work (p50 %s): the workers are "
               "ahead of the readers; ",
               ms->lease_replies, l50);
    else if (ms->lease_replies)
        printf("%" PRIu64 " lease replies, wait p50 %s, p99 %s; ", ms->lease_replies, l50, l99);
    else
        printf("no lease replies; ");
    if (ms->commits)
        printf("%" PRIu64 " journal commits, fdatasync p50 %s, p99 %s\n", ms->commits, c50, c99);
    else
        printf("no journal commits\n");
}

int ctl_list(const ctl_t *ctl)
{
    Dpp__StatusReply *r;
    int rc = fetch(ctl, NULL, &r);
    if (rc)
        return rc;
    json_t *arr = json_array();
    if (!ctl->json)
        printf("%-18s %-8s %-7s %-17s %-12s %s\n", "SESSION", "STATE", "EPOCH", "SPLITS DONE",
               "ROWS", "WORKERS");
    for (size_t i = 0; i < r->n_sessions; i++) {
        const Dpp__SessionStatus *s = r->sessions[i];
        if (ctl->json) {
            json_array_append_new(arr, session_json(s));
            continue;
        }
        char epoch[32], splits[48], rejected[48] = "", life[64];
        epoch_text(s, epoch, sizeof epoch);
        lifetime_text(s, life, sizeof life);
        if (strcmp(s->state, "indexing") == 0)
            snprintf(splits, sizeof splits, "(files %u/%u)", s->files_indexed, s->files);
        else if (unbounded(s))
            snprintf(splits, sizeof splits, "%u", s->splits_consumed);
        else
            snprintf(splits, sizeof splits, "%u/%u", s->splits_consumed,
                     s->splits_per_epoch * s->epochs);
        if (s->records_rejected)
            snprintf(rejected, sizeof rejected, "  rejected %" PRIu64, s->records_rejected);
        printf("%-18s %-8s %-7s %-17s %-12" PRIu64 " %u%s%s%s%s\n", s->session_id, s->state, epoch,
               splits, s->rows_produced, s->workers, rejected, life, s->error[0] ? "  error: " : "",
               s->error);
    }
    if (ctl->json)
        print_json(arr);
    else if (r->sessions_omitted)
        printf("(%u older sessions not listed)\n", r->sessions_omitted);
    if (!ctl->json && r->master) {
        int running = 0;
        for (size_t i = 0; i < r->n_sessions; i++)
            running |= strcmp(r->sessions[i]->state, "running") == 0 ||
                       strcmp(r->sessions[i]->state, "indexing") == 0;
        master_line(r->master, running);
    }
    json_decref(arr);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_OK;
}

int ctl_workers(const ctl_t *ctl)
{
    Dpp__StatusReply *r;
    int rc = fetch(ctl, NULL, &r);
    if (rc)
        return rc;
    json_t *arr = json_array();
    if (!ctl->json)
        printf("%-8s %-22s %-8s %-14s %s\n", "WORKER", "DATA ADDRESS", "THREADS", "SPLITS LEASED",
               "LAST HEARD");
    for (size_t i = 0; i < r->n_workers; i++) {
        const Dpp__WorkerStatus *w = r->workers[i];
        if (ctl->json) {
            json_array_append_new(
                arr, json_pack("{s:I, s:s, s:i, s:i, s:i}", "worker", (json_int_t)w->worker_id,
                               "data_addr", w->data_addr, "threads", w->threads, "splits_leased",
                               w->splits_leased, "silent_ms", w->silent_ms));
            continue;
        }
        printf("%-8" PRIu64 " %-22s %-8u %-14u %.1f s ago\n", w->worker_id, w->data_addr,
               w->threads, w->splits_leased, w->silent_ms / 1000.0);
    }
    if (ctl->json)
        print_json(arr);
    else if (r->n_workers == 0)
        printf("(no worker registered)\n");
    json_decref(arr);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_OK;
}

int ctl_cancel(const ctl_t *ctl, const char *session)
{
    Dpp__CancelRequest req = DPP__CANCEL_REQUEST__INIT;
    req.session_id = (char *)session;
    ProtobufCMessage *reply;
    int rc = ctl_call_master(ctl, DPP_MSG_CANCEL, &req.base, DPP_MSG_CANCEL_REPLY, &reply);
    if (rc)
        return rc;
    const char *was = ((Dpp__CancelReply *)reply)->state;
    if (strcmp(was, "running") == 0 || strcmp(was, "indexing") == 0)
        printf("session %s cancelled\n", session);
    else
        printf("session %s was already %s: nothing to cancel\n", session, was);
    protobuf_c_message_free_unpacked(reply, NULL);
    return CTL_OK;
}

/* ---- one session, once or live ------------------------------------------ */

/* The previous sample, for rates. */
typedef struct sample {
    int have;
    uint64_t ns;
    uint64_t rows, splits;
    uint64_t *batches; /* [consumers] */
    uint32_t *consumed;
    uint32_t epoch;
} sample_t;

static void bar(char *out, size_t width, uint32_t done, uint32_t total)
{
    size_t fill = total ? (size_t)((uint64_t)done * width / total) : 0;
    for (size_t i = 0; i < width; i++)
        out[i] = i < fill ? '#' : '-';
    out[width] = '\0';
}

static void duration(char *out, size_t len, double secs)
{
    if (secs < 0 || secs > 360000)
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%d:%02d:%02d", (int)secs / 3600, (int)secs / 60 % 60, (int)secs % 60);
}

static double rate_of(uint64_t now, uint64_t before, double secs)
{
    return secs > 0 && now >= before ? (double)(now - before) / secs : 0.0;
}

/* Renders the session; returns the number of lines written. On a terminal
 * each line ends by clearing what a longer line of the last frame left. */
static int render(const Dpp__SessionStatus *s, const sample_t *prev, uint64_t now_ns, int tty)
{
    const char *eol = tty ? "\033[K\n" : "\n";
    int lines = 0;
    char epoch[32];
    epoch_text(s, epoch, sizeof epoch);
    double secs = prev->have ? (double)(now_ns - prev->ns) / 1e9 : 0;
    char rate[48] = "";
    if (prev->have)
        snprintf(rate, sizeof rate, " (%.0f rows/s)", rate_of(s->rows_produced, prev->rows, secs));
    printf("session %s  %s  table %s  epoch %s  workers %u  rows %" PRIu64 "%s%s", s->session_id,
           s->state, s->table, epoch, s->workers, s->rows_produced, rate, eol);
    lines++;
    if (strcmp(s->state, "indexing") == 0) {
        printf("  indexing files: %u/%u%s", s->files_indexed, s->files, eol);
        lines++;
    }
    char life[64];
    lifetime_text(s, life, sizeof life);
    int finished = strcmp(s->state, "done") == 0 || strcmp(s->state, "failed") == 0 ||
                   strcmp(s->state, "cancelled") == 0;
    int attached = 0;
    for (size_t i = 0; i < s->n_ranks; i++)
        attached |= s->ranks[i]->attached;
    if (s->planned_unix_ms || life[0]) {
        char plan[64] = "", pace[96] = "";
        if (s->planned_unix_ms && s->submitted_unix_ms)
            snprintf(plan, sizeof plan, "planned in %.3f s",
                     (double)(s->planned_unix_ms - s->submitted_unix_ms) / 1e3);
        /* a rate only where one is going on: a finished session says how
         * long it ran, one nobody reads yet that it waits for a reader */
        if (finished && s->ended_unix_ms && s->planned_unix_ms)
            snprintf(pace, sizeof pace, "%sran %.3f s", plan[0] ? "  " : "",
                     (double)(s->ended_unix_ms - s->planned_unix_ms) / 1e3);
        else if (!finished && s->splits_per_second == 0 && !attached)
            snprintf(pace, sizeof pace, "%swaiting for a reader (dppctl read, dpp.Client)",
                     plan[0] ? "  " : "");
        else if (!finished)
            snprintf(pace, sizeof pace, "%s%" PRIu64 " splits/s", plan[0] ? "  " : "",
                     s->splits_per_second);
        printf("  %s%s%s%s", plan, pace, life, eol);
        lines++;
    }
    for (size_t i = 0; i < s->n_ranks && strcmp(s->state, "indexing") != 0; i++) {
        const Dpp__RankStatus *r = s->ranks[i];
        char b[41], eta[32] = "-", bps[32] = "-";
        bar(b, 30, r->splits_consumed, r->splits);
        int same_epoch = prev->have && prev->epoch == s->current_epoch;
        if (same_epoch) {
            double sps = rate_of(r->splits_consumed, prev->consumed[i], secs);
            if (r->splits_consumed >= r->splits)
                snprintf(eta, sizeof eta, "done");
            else if (sps > 0)
                duration(eta, sizeof eta, (r->splits - r->splits_consumed) / sps);
        }
        if (finished) {
            /* no rates, ETA or wait share after the end: a reader that
             * does nothing but read (dppctl read) waits most of its time,
             * which says nothing once the data is delivered */
            printf("  rank %-3u [%s] %4u/%-4u splits  %" PRIu64 " batches%s", r->rank, b,
                   r->splits_consumed, r->splits, r->batches, eol);
            lines++;
            continue;
        }
        if (prev->have)
            snprintf(bps, sizeof bps, "%.1f", rate_of(r->batches, prev->batches[i], secs));
        char wait[16] = "    -"; /* no client has read the rank yet */
        if (r->open_ns)
            snprintf(wait, sizeof wait, "%5.1f%%", 100.0 * ratio(r->wait_ns, r->open_ns));
        printf("  rank %-3u [%s] %4u/%-4u splits  %6s batches/s  wait %s  ETA %s%s%s", r->rank, b,
               r->splits_consumed, r->splits, bps, wait, eta, r->attached ? "" : "  (no client)",
               eol);
        lines++;
    }
    if (s->takeovers) {
        printf("  taken over %u time%s from a reader that was gone: at most %" PRIu64
               " rows came a second time (of the split it stopped in)%s",
               s->takeovers, s->takeovers == 1 ? "" : "s", s->rows_redelivered_max, eol);
        lines++;
    }
    uint64_t cached = s->splits_from_ram + s->splits_from_disk;
    if (cached + s->splits_made > 0) {
        printf("  cache: %.1f%% of splits served from it (%" PRIu64 " RAM, %" PRIu64
               " disk, %" PRIu64 " made), %.1f MiB served%s",
               100.0 * (double)cached / (double)(cached + s->splits_made), s->splits_from_ram,
               s->splits_from_disk, s->splits_made, (double)s->bytes_from_cache / 1048576.0, eol);
        lines++;
    }
    if (s->text_tokens || s->text_documents) {
        uint64_t all = s->text_tokens + s->text_padding;
        printf("  text: %" PRIu64 " documents, %" PRIu64 " tokens (%" PRIu64
               "/s), padding %.1f%%%s",
               s->text_documents, s->text_tokens, s->tokens_per_second,
               all ? 100.0 * (double)s->text_padding / (double)all : 0.0, eol);
        lines++;
    }
    for (size_t i = 0; i < s->n_sources; i++) {
        const Dpp__SourceStatus *x = s->sources[i];
        printf("  source %zu %s: weight %g (%u rows a window), %" PRIu64 " rows delivered, %" PRIu64
               " this epoch (%.2f passes of its %" PRIu64 " records)%s",
               i, x->table, x->weight, x->window_rows, x->rows, x->epoch_rows,
               x->records ? (double)x->epoch_rows / (double)x->records : 0.0, x->records, eol);
        lines++;
    }
    if (s->records_rejected || s->rows_filtered) {
        printf("  filtered %" PRIu64 "  rejected %" PRIu64 "%s", s->rows_filtered,
               s->records_rejected, eol);
        lines++;
    }
    if (s->error[0]) {
        printf("  error: %s%s", s->error, eol);
        lines++;
    }
    fflush(stdout);
    return lines;
}

static void remember(sample_t *p, const Dpp__SessionStatus *s, uint64_t now_ns)
{
    if (p->batches == NULL) {
        p->batches = calloc(s->n_ranks + 1, sizeof *p->batches);
        p->consumed = calloc(s->n_ranks + 1, sizeof *p->consumed);
        if (p->batches == NULL || p->consumed == NULL)
            return; /* no rates then */
    }
    p->have = 1;
    p->ns = now_ns;
    p->rows = s->rows_produced;
    p->splits = s->splits_consumed;
    p->epoch = s->current_epoch;
    for (size_t i = 0; i < s->n_ranks; i++) {
        p->batches[i] = s->ranks[i]->batches;
        p->consumed[i] = s->ranks[i]->splits_consumed;
    }
}

int ctl_status(const ctl_t *ctl, const char *session)
{
    if (session == NULL)
        return ctl_list(ctl);
    /* On a terminal the view updates in place until the session ends. */
    int live = ctl->watch || (!ctl->json && isatty(STDOUT_FILENO));
    int redraw = !ctl->json && isatty(STDOUT_FILENO);
    sample_t prev = {0};
    int lines = 0, rc;
    for (;;) {
        Dpp__StatusReply *r;
        if ((rc = fetch(ctl, session, &r)) != 0)
            break;
        if (r->n_sessions != 1) {
            protobuf_c_message_free_unpacked(&r->base, NULL);
            rc = ctl_fail("status %s: %s", session, "the master sent no such session");
            break;
        }
        const Dpp__SessionStatus *s = r->sessions[0];
        uint64_t now = dpp_now_ns();
        if (ctl->json) {
            json_t *o = session_json(s);
            if (o && prev.have)
                json_object_set_new(
                    o, "rows_per_s",
                    json_real(rate_of(s->rows_produced, prev.rows, (double)(now - prev.ns) / 1e9)));
            print_json(o);
            json_decref(o);
        } else {
            if (redraw && lines)
                printf("\033[%dA", lines); /* back to the top of the last frame */
            else if (lines)
                printf("\n");
            lines = render(s, &prev, now, redraw);
        }
        remember(&prev, s, now);
        int failed = strcmp(s->state, "failed") == 0 || strcmp(s->state, "cancelled") == 0;
        int over = strcmp(s->state, "done") == 0 || failed;
        rc = failed ? CTL_SESSION_FAILED : CTL_OK;
        protobuf_c_message_free_unpacked(&r->base, NULL);
        if (!live || over)
            break;
        struct timespec ts = {ctl->interval_ms / 1000, (long)(ctl->interval_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    free(prev.batches);
    free(prev.consumed);
    return rc;
}
