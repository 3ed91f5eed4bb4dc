// SPDX-License-Identifier: Apache-2.0
// dppctl: validate and submit session specs, show status, read a session.
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "wire/net.h"
#include "spec/spec.h"
#include "spec/table.h"
#include "format/tfindex.h"
#include "base/util.h"
#include "dpp.pb-c.h"
#include "base/nearest.h"
#include "ctl.h"
#include "dpp/client.h"

#define MAX_SPEC_BYTES (1u << 20)

static const char usage[] =
    "usage: dppctl [--master HOST:PORT] COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  validate SPEC.json [--table DIR]...\n"
    "                            check a session spec offline; with --table, also\n"
    "                            against a sample of the table's records\n"
    "  submit SPEC.json [--table DIR]...\n"
    "                            submit a spec (checked against a sample of the\n"
    "                            table in DIR first, with --table); prints the\n"
    "                            session id on the last line of stdout\n"
    "  status SESSION            the session's state, progress per rank (splits\n"
    "                            done, batches/s, trainer wait share, ETA); on a\n"
    "                            terminal it updates in place until the session ends\n"
    "  list                      one line per session (also: status without SESSION)\n"
    "  workers                   the registered workers and their leases\n"
    "  cancel SESSION            stop a session (an \"unbounded\" one ends only so);\n"
    "                            its clients fail with \"cancelled\"\n"
    "  read SESSION [--rank R] [--epochs N]\n"
    "                            consume the session's batches through\n"
    "                            libdppclient; prints per-epoch sums\n"
    "  index TABLE_DIR           write a .idx sidecar (DALI format: one \"offset size\"\n"
    "                            line per record) next to every data file of a\n"
    "                            table on this machine; no master needed\n"
    "\n"
    "  help [COMMAND]            this text, or one command's (also: COMMAND --help)\n"
    "  version                   the version, commit and build type (also: --version)\n"
    "\n"
    "Options:\n"
    "  --master HOST:PORT   the master (default: $DPP_MASTER, else 127.0.0.1:7070)\n"
    "  -o, --output text|json  output format of status, list, workers and read\n"
    "                       (default text)\n"
    "  --watch              status: refresh every --interval-s until the session\n"
    "                       ends, also when not on a terminal (json: one line each)\n"
    "  --interval-s N       status --watch: seconds between refreshes (default 1)\n"
    "  --rank R             read: the consumer rank to read as (default 0)\n"
    "  --epochs N           read: stop after N epochs (default: every epoch)\n"
    "  --table DIR          validate, submit: the spec's table folder on this\n"
    "                       machine, whose records are sampled and checked; for a\n"
    "                       mixture, once per source in the order of \"sources\"\n"
    "                       (sources left out: under the data root of the first)\n"
    "  --sample N           validate --table: records to read (default 1000)\n"
    "  --timeout-s N        give up after N seconds without progress (default 60)\n"
    "  --token-file PATH    the cluster token, when the master has one (default:\n"
    "                       the file $DPP_TOKEN_FILE names)\n"
    "  -h, --help           show this help\n"
    "\n"
    "Exit status: 0 success; 1 the command failed (the reason is on stderr, one\n"
    "line); 2 usage error; 3 status or read: the session failed or was cancelled.\n";

/* One command: what `dppctl help CMD` and `dppctl CMD --help` print. */
typedef struct command_help {
    const char *name, *text;
} command_help_t;

static const command_help_t commands[] = {
    {"validate", "usage: dppctl validate SPEC.json [--table DIR]... [--sample N]\n"
                 "\n"
                 "Checks a session spec offline, as the master would, and prints every\n"
                 "problem, one line each with its JSON path (features.dense[3].transforms[0]\n"
                 ".op: unknown op ...) and, for a misspelt key or op, the nearest name.\n"
                 "\n"
                 "With --table DIR (the spec's table folder on this machine), also reads N\n"
                 "records (default 1000, spread over up to 8 of the partitions' files) and\n"
                 "checks every feature the spec names: in some record (else: the feature,\n"
                 "how many records were read and the nearest name they hold), with values\n"
                 "its transforms take (else: what was found and the first file and record),\n"
                 "and the records a session would reject within max_reject_ratio.\n"
                 "\n"
                 "A mixture's tables are each sampled: give --table once per source, in the\n"
                 "order of \"sources\" (--table DIR0 --table DIR1 ...). Sources without a\n"
                 "--table of their own are looked for under the data root the first DIR is\n"
                 "in (DIR0 less source 0's table: --table /data/web finds source 1's table\n"
                 "\"code\" in /data/code). Problems name the source: SPEC: sources[1] ...\n"
                 "\n"
                 "The line \"SPEC: valid (...)\" comes last, and only when every check passed.\n"
                 "Exit 0 valid, 1 not.\n"},
    {"submit", "usage: dppctl submit SPEC.json [--table DIR]...\n"
               "\n"
               "Submits a spec to the master, which lists the table's files, plans the\n"
               "session and journals it; prints the session id on the last line of\n"
               "stdout. A spec the master refuses is reported with the file's name and\n"
               "the reason (tables and partitions that do not exist get the nearest name\n"
               "and, when there are few, the list). With --table DIR, the spec is first\n"
               "checked against a sample of the table's records as validate --table does\n"
               "(a mixture: --table once per source), and not submitted when that fails.\n"
               "Exit 0, or 1 with the reason.\n"},
    {"status", "usage: dppctl status [SESSION] [-o text|json] [--watch] [--interval-s N]\n"
               "\n"
               "The session's state, epoch (counting from 0: \"2/6\" is epoch 2 of 6), rows,\n"
               "planning time, splits per second while it runs (how long it ran once it\n"
               "ended), when it expires or would be abandoned, and per rank: splits done,\n"
               "batches/s, the trainer's wait share, ETA (a finished session's ranks: splits\n"
               "and batches). On a terminal it updates in place until the session ends.\n"
               "Without SESSION: the list. Exit 0, or 3 when the session failed or was\n"
               "cancelled.\n"},
    {"list", "usage: dppctl list [-o text|json]\n"
             "\n"
             "One line per session, newest first: state, epoch, splits done, rows, workers,\n"
             "rejected records, errors, and when the session expires (finished) or is\n"
             "abandoned (no client attached). Text output ends with the master's own line:\n"
             "splits/s; lease replies and journal commits since it started; and over its\n"
             "last minute the lease replies and their wait (p50, p99: a request's wait for\n"
             "work; under load, how fast the master answers) and the journal's group\n"
             "commits and their fdatasync (p50, p99), or \"idle\" when no session runs.\n"},
    {"workers", "usage: dppctl workers [-o text|json]\n"
                "\n"
                "The registered workers: address, threads, splits leased, time since heard.\n"},
    {"cancel", "usage: dppctl cancel SESSION\n"
               "\n"
               "Stops a session (an \"unbounded\" one ends only so): its state becomes\n"
               "\"cancelled\" and its clients fail with that reason.\n"},
    {"read", "usage: dppctl read SESSION [--rank R] [--epochs N] [-o text|json] [--timeout-s N]\n"
             "\n"
             "Reads the session's batches as rank R (default 0) through libdppclient and\n"
             "prints the sums of each epoch (of a text session: sequences, tokens,\n"
             "padding, document segments, positions with a label, the sum of the token\n"
             "ids). Ctrl-C (or SIGTERM) stops it cleanly: the\n"
             "rank is released and another read goes on where it stopped (the split it\n"
             "was in comes again; exit 130 or 143). A finished session ends at once.\n"
             "Exit 0, 1 on an error, 3 when the session failed or was cancelled.\n"},
    {"index", "usage: dppctl index TABLE_DIR\n"
              "\n"
              "Writes a .idx sidecar (DALI format: one \"offset size\" line per record) next\n"
              "to every TFRecord file of a table on this machine; no master needed.\n"},
    {"help", "usage: dppctl help [COMMAND]\n"},
    {"version", "usage: dppctl version (or dppctl --version)\n"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const command_help_t *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* "unknown command ...; did you mean ...? (commands: ...)", exit 2. */
static int unknown_command(const char *cmd)
{
    const char *names[NCOMMANDS + 1];
    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    names[NCOMMANDS] = NULL;
    char hint[512];
    fprintf(stderr, "dppctl: unknown command \"%s\"%s; dppctl help tells more\n", cmd,
            dpp_suggest(hint, sizeof hint, cmd, names, NCOMMANDS, "commands", 20));
    return 2;
}

int ctl_fail(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "dppctl: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return CTL_FAILED;
}

static char *read_spec(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        ctl_fail("%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(MAX_SPEC_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_SPEC_BYTES + 1, f) : 0;
    int err = buf == NULL || ferror(f);
    if (f != stdin)
        fclose(f);
    if (err || n > MAX_SPEC_BYTES) {
        ctl_fail("%s: %s", path, err ? "cannot read" : "larger than 1 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

typedef struct spec_problems {
    const char *path;
    unsigned n;
} spec_problems_t;

/* Prints one problem of a spec as ctl_fail() prints an error. */
static void print_problem(void *arg, const char *problem)
{
    spec_problems_t *ps = arg;
    ps->n++;
    fprintf(stderr, "dppctl: %s: %s\n", ps->path, problem);
}

/* Parses a spec; an invalid one gets every problem printed, one line each,
 * then how many there were when more than one, and CTL_FAILED. */
static int parse_spec(const char *path, const char *json, size_t len, dpp_spec_t *spec)
{
    spec_problems_t ps = {.path = path, .n = 0};
    char err[DPP_SPEC_ERRLEN];
    int rc = dpp_spec_parse_report(json, len, spec, err, sizeof err, print_problem, &ps);
    if (rc == 0)
        return CTL_OK;
    if (ps.n == 0) /* not a problem of the spec: out of memory */
        return ctl_fail("%s: %s", path, err);
    if (ps.n > 1)
        fprintf(stderr, "dppctl: %s: %u problems\n", path, ps.n);
    return CTL_FAILED;
}

/* "SPEC: valid (...)": what the spec asks for, in a line. */
static void print_valid(const char *path, const dpp_spec_t *spec)
{
    char epochs[32], mixture[48] = "";
    if (spec->nsources > 0)
        snprintf(mixture, sizeof mixture, "a mixture of %u sources; ", spec->nsources);
    if (spec->epochs == DPP_EPOCHS_UNBOUNDED)
        snprintf(epochs, sizeof epochs, "unbounded epochs");
    else
        snprintf(epochs, sizeof epochs, "%u epoch%s", spec->epochs, spec->epochs == 1 ? "" : "s");
    if (spec->text)
        printf("%s: valid (%sa text session: sequences of %u tokens, %s, batch_size %u, %s, "
               "%u consumer%s)\n",
               path, mixture, spec->text->length,
               spec->text->pack == DPP_PACK_KIND_BEST_FIT ? "best_fit" : "concat",
               spec->batch_size, epochs, spec->consumers, spec->consumers == 1 ? "" : "s");
    else
        printf("%s: valid (%s%u dense, %u sparse features, %s%s%s, batch_size %u, %s, %u "
               "consumer%s)\n",
               path, mixture, spec->ndense, spec->nsparse, spec->label ? "label \"" : "no label",
               spec->label ? spec->label : "", spec->label ? "\"" : "", spec->batch_size, epochs,
               spec->consumers, spec->consumers == 1 ? "" : "s");
}

static int cmd_validate(const ctl_t *ctl, const char *path)
{
    size_t len;
    char *json = read_spec(path, &len);
    if (json == NULL)
        return 1;
    dpp_spec_t spec;
    int rc = parse_spec(path, json, len, &spec);
    free(json);
    if (rc)
        return rc;
    /* the verdict comes last: a spec whose table sample fails is not valid */
    rc = ctl->ntables ? ctl_sample_tables(&spec, path, ctl->tables, ctl->ntables, ctl->sample)
                      : CTL_OK;
    if (rc == CTL_OK)
        print_valid(path, &spec);
    dpp_spec_close(&spec);
    return rc;
}

/* One request/reply with the master; an Error reply is printed (after
 * `what: ` when what is not NULL) and fails. */
static int call_master(const ctl_t *ctl, const char *what, uint16_t type,
                       const ProtobufCMessage *req, uint16_t want, ProtobufCMessage **reply);

int ctl_call_master(const ctl_t *ctl, uint16_t type, const ProtobufCMessage *req, uint16_t want,
                    ProtobufCMessage **reply)
{
    return call_master(ctl, NULL, type, req, want, reply);
}

static int call_master(const ctl_t *ctl, const char *what, uint16_t type,
                       const ProtobufCMessage *req, uint16_t want, ProtobufCMessage **reply)
{
    dpp_sync_conn_t conn;
    int rc = dpp_sync_connect(&conn, ctl->master, "ctl", ctl->timeout_ms, &ctl->auth);
    char hint[512];
    if (rc)
        return ctl_fail("master %s: %s", ctl->master,
                        conn.error[0] ? conn.error : dpp_connect_hint(rc, hint, sizeof hint));
    uint16_t rtype;
    rc = dpp_sync_call(&conn, type, req, &rtype, reply, ctl->timeout_ms);
    dpp_sync_close(&conn);
    if (rc)
        return ctl_fail("master %s: %s", ctl->master, dpp_strerror(rc));
    if (rtype == DPP_MSG_ERROR) {
        /* one line each: a refused spec's reply lists every problem */
        const char *msg = ((Dpp__Error *)*reply)->message;
        for (const char *line = msg; line;) {
            const char *nl = strchr(line, '\n');
            int n = nl ? (int)(nl - line) : (int)strlen(line);
            fprintf(stderr, "dppctl: %s%s%.*s\n", what ? what : "", what ? ": " : "", n, line);
            line = nl ? nl + 1 : NULL;
        }
        protobuf_c_message_free_unpacked(*reply, NULL);
        return 1;
    }
    if (rtype != want) {
        protobuf_c_message_free_unpacked(*reply, NULL);
        return ctl_fail("master %s: %s", ctl->master, "unexpected reply");
    }
    return 0;
}

static int cmd_submit(const ctl_t *ctl, const char *path)
{
    size_t len;
    char *json = read_spec(path, &len);
    if (json == NULL)
        return 1;
    if (ctl->ntables) {
        /* the master parses the spec again; here it only drives the sample */
        dpp_spec_t spec;
        int rc = parse_spec(path, json, len, &spec);
        if (rc) {
            free(json);
            return rc;
        }
        /* stdout's last line stays the session id: the sample's words go to stderr */
        fflush(stdout);
        int saved = dup(STDOUT_FILENO);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        rc = ctl_sample_tables(&spec, path, ctl->tables, ctl->ntables, ctl->sample);
        fflush(stdout);
        dup2(saved, STDOUT_FILENO);
        close(saved);
        dpp_spec_close(&spec);
        if (rc) {
            free(json);
            return ctl_fail("%s: not submitted: its table sample (--table %s) failed the checks "
                            "above",
                            path, ctl->tables[0]);
        }
    }
    Dpp__SubmitRequest req = DPP__SUBMIT_REQUEST__INIT;
    req.spec_json = json;
    ProtobufCMessage *reply;
    /* the master's answer to a bad spec names the spec's file first */
    int rc = call_master(ctl, path, DPP_MSG_SUBMIT, &req.base, DPP_MSG_SUBMIT_REPLY, &reply);
    free(json);
    if (rc)
        return rc;
    printf("%s\n", ((Dpp__SubmitReply *)reply)->session_id);
    protobuf_c_message_free_unpacked(reply, NULL);
    return 0;
}

typedef struct epoch_sums {
    uint64_t rows, batches, lengths_sum;
    uint64_t padded; /* remainder "pad": masked empty rows, not in rows */
    double label_sum, dense_sum;
    uint64_t ids_sum, ids_wsum; /* wrapping; printed as int64 */
    double weights_sum;
    /* the session's shape, kept from epoch to epoch: the sums of each
     * feature (ids_sums wrapping, as ids_sum) */
    int weighted, labelled;
    unsigned ndense, nsparse;
    double *dense_sums;
    uint64_t *lengths_sums, *ids_sums;
    /* text sessions: token positions with data, padded ones, document
     * pieces, positions with a label, the sum of the ids with data */
    int text;
    uint64_t tokens, padding, segments, targets, token_ids_sum;
    uint64_t start_ns;
} epoch_sums_t;

/* Zeroes the sums for the next epoch, keeping the session's shape. */
static void epoch_reset(epoch_sums_t *e)
{
    memset(e->dense_sums, 0, e->ndense * sizeof *e->dense_sums);
    memset(e->lengths_sums, 0, e->nsparse * sizeof *e->lengths_sums);
    memset(e->ids_sums, 0, e->nsparse * sizeof *e->ids_sums);
    *e = (epoch_sums_t){.start_ns = dpp_now_ns(),
                        .weighted = e->weighted,
                        .labelled = e->labelled,
                        .ndense = e->ndense,
                        .nsparse = e->nsparse,
                        .dense_sums = e->dense_sums,
                        .lengths_sums = e->lengths_sums,
                        .ids_sums = e->ids_sums};
}

static void add_text(const dpp_text_batch_t *t, epoch_sums_t *e)
{
    e->text = 1;
    for (size_t r = 0; r < t->rows; r++) {
        uint32_t pad = (uint32_t)t->padding[r], data = t->length - pad;
        const int64_t *ids = t->input_ids + r * t->length, *labels = t->labels + r * t->length;
        for (uint32_t j = 0; j < data; j++) {
            e->token_ids_sum += (uint64_t)ids[j];
            e->targets += labels[j] != -100;
        }
        e->tokens += data;
        e->padding += pad;
        e->segments += (uint64_t)t->cu_lengths[r] - 1 - (pad > 0);
    }
}

static void add_batch(dpp_client_t *c, dpp_batch_t *b, epoch_sums_t *e)
{
    /* padding rows are zeros: they add nothing to the sums below */
    size_t rows = dpp_batch_rows(b);
    e->rows += dpp_batch_valid_rows(b);
    e->padded += rows - dpp_batch_valid_rows(b);
    e->batches++;
    dpp_text_batch_t text;
    if (dpp_batch_text(b, &text) == 0)
        add_text(&text, e);
    const float *labels;
    if (dpp_batch_labels(b, &labels) == 0)
        for (size_t r = 0; r < rows; r++)
            e->label_sum += labels[r];
    for (unsigned i = 0; i < e->ndense; i++) {
        const float *v;
        unsigned dim;
        dpp_batch_dense_at(b, i, &v, &dim);
        for (size_t j = 0; j < rows * dim; j++) {
            e->dense_sum += v[j];
            e->dense_sums[i] += v[j];
        }
    }
    for (unsigned k = 0; k < e->nsparse; k++) {
        const int64_t *ids;
        const int32_t *lengths;
        size_t n;
        dpp_batch_sparse_at(b, k, &ids, &lengths, &n);
        uint64_t sum = 0;
        for (size_t j = 0; j < n; j++)
            sum += (uint64_t)ids[j];
        e->lengths_sum += n;
        e->ids_sum += sum;
        e->ids_wsum += (uint64_t)(k + 1) * sum;
        e->lengths_sums[k] += n;
        e->ids_sums[k] += sum;
        const float *w;
        if (dpp_client_sparse_weighted(c, k) &&
            dpp_batch_sparse_weights(b, dpp_client_sparse_name(c, k), &w) == 0) {
            for (size_t j = 0; j < n; j++)
                e->weights_sum += w[j];
        }
    }
}

/* A double as a JSON value: JSON has no inf or NaN, so those become the
 * strings "inf", "-inf" and "nan". */
static const char *json_double(double v, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "\"nan\"");
    else if (isinf(v))
        snprintf(buf, len, v > 0 ? "\"inf\"" : "\"-inf\"");
    else
        snprintf(buf, len, "%.17g", v);
    return buf;
}

/* A feature name as a JSON string (names come from the spec's JSON, so
 * they are UTF-8). */
static void put_json_name(const char *name)
{
    json_t *v = json_string(name);
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    fputs(text ? text : "\"?\"", stdout);
    free(text);
    json_decref(v);
}

/* ,"dense_sums":{NAME:SUM,...},"sparse_sums":{NAME:{"lengths_sum":N,
 * "ids_sum":S},...}: each feature's part of the totals, in spec order. */
static void put_feature_sums(const dpp_client_t *c, const epoch_sums_t *e)
{
    char num[32];
    fputs(",\"dense_sums\":{", stdout);
    for (unsigned i = 0; i < e->ndense; i++) {
        fputs(i ? "," : "", stdout);
        put_json_name(dpp_client_dense_name(c, i));
        printf(":%s", json_double(e->dense_sums[i], num, sizeof num));
    }
    fputs("},\"sparse_sums\":{", stdout);
    for (unsigned k = 0; k < e->nsparse; k++) {
        fputs(k ? "," : "", stdout);
        put_json_name(dpp_client_sparse_name(c, k));
        printf(":{\"lengths_sum\":%" PRIu64 ",\"ids_sum\":%" PRId64 "}", e->lengths_sums[k],
               (int64_t)e->ids_sums[k]);
    }
    fputs("}", stdout);
}

static void print_epoch(const ctl_t *ctl, const dpp_client_t *c, unsigned epoch,
                        const epoch_sums_t *e)
{
    double secs = (double)(dpp_now_ns() - e->start_ns) / 1e9;
    double rate = secs > 0 ? (double)e->rows / secs : 0;
    if (ctl->json) {
        char weights[80] = "", label[64] = "", lsum[32], dsum[32], wsum[32], padded[48] = "";
        if (e->weighted)
            snprintf(weights, sizeof weights, ",\"sparse_weights_sum\":%s",
                     json_double(e->weights_sum, wsum, sizeof wsum));
        if (e->padded)
            snprintf(padded, sizeof padded, ",\"rows_padded\":%" PRIu64, e->padded);
        if (e->text)
            printf("{\"epoch\":%u,\"sequences\":%" PRIu64 ",\"batches\":%" PRIu64
                   ",\"tokens\":%" PRIu64 ",\"padding\":%" PRIu64 ",\"segments\":%" PRIu64
                   ",\"targets\":%" PRIu64 ",\"token_ids_sum\":%" PRIu64 "%s,\"sequences_per_s\":%.1f}\n",
                   epoch, e->rows, e->batches, e->tokens, e->padding, e->segments, e->targets,
                   e->token_ids_sum, padded, rate);
        if (e->text) {
            fflush(stdout);
            return;
        }
        /* a session without a label has no label_sum, rather than a 0 */
        if (e->labelled)
            snprintf(label, sizeof label, ",\"label_sum\":%s",
                     json_double(e->label_sum, lsum, sizeof lsum));
        printf("{\"epoch\":%u,\"rows\":%" PRIu64 ",\"batches\":%" PRIu64
               "%s,\"dense_sum\":%s,\"sparse_lengths_sum\":%" PRIu64 ",\"sparse_ids_sum\":%" PRId64
               ",\"sparse_ids_wsum\":%" PRId64 "%s%s",
               epoch, e->rows, e->batches, label, json_double(e->dense_sum, dsum, sizeof dsum),
               e->lengths_sum, (int64_t)e->ids_sum, (int64_t)e->ids_wsum, weights, padded);
        put_feature_sums(c, e);
        printf(",\"rows_per_s\":%.1f}\n", rate);
    } else if (e->text) {
        printf("epoch %u: %" PRIu64 " sequences in %" PRIu64 " batches, %.0f sequences/s; tokens %" PRIu64
               " padding %" PRIu64 " segments %" PRIu64 " targets %" PRIu64 " token_ids_sum %" PRIu64
               "\n",
               epoch, e->rows, e->batches, rate, e->tokens, e->padding, e->segments, e->targets,
               e->token_ids_sum);
    } else {
        char label[48] = "";
        if (e->labelled)
            snprintf(label, sizeof label, "label_sum %.17g ", e->label_sum);
        printf("epoch %u: %" PRIu64 " rows in %" PRIu64 " batches, %.0f rows/s; %s"
               "dense_sum %.17g ids %" PRIu64 " ids_sum %" PRId64 " ids_wsum %" PRId64 "\n",
               epoch, e->rows, e->batches, rate, label, e->dense_sum, e->lengths_sum,
               (int64_t)e->ids_sum, (int64_t)e->ids_wsum);
    }
    fflush(stdout);
}

/* SIGINT or SIGTERM during read: the number of the signal. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

/* How long next() waits at a time in read: a signal is seen this fast. */
#define READ_SLICE_MS 200

static int cmd_read(const ctl_t *ctl, const char *session)
{
    dpp_client_t *c;
    dpp_client_options_t o;
    dpp_client_options_init(&o);
    o.master = ctl->master;
    o.session = session;
    o.rank = ctl->rank;
    o.connect_timeout_ms = ctl->timeout_ms;
    o.token = (const char *)ctl->auth.token; /* NUL-terminated by dpp_auth_load() */
    int rc = dpp_client_open_opts(&c, &o);
    if (rc) {
        const char *why = dpp_client_open_error();
        return ctl_fail("read %s: %s", session, why[0] ? why : dpp_strerror(rc));
    }
    epoch_sums_t e = {.start_ns = dpp_now_ns(),
                      .labelled = dpp_client_label_name(c) != NULL,
                      .ndense = dpp_client_num_dense(c),
                      .nsparse = dpp_client_num_sparse(c)};
    /* print sparse_weights_sum only for sessions with weights */
    for (unsigned k = 0; k < e.nsparse; k++)
        e.weighted |= dpp_client_sparse_weighted(c, k);
    e.dense_sums = calloc(e.ndense + 1, sizeof *e.dense_sums);
    e.lengths_sums = calloc(e.nsparse + 1, sizeof *e.lengths_sums);
    e.ids_sums = calloc(e.nsparse + 1, sizeof *e.ids_sums);
    if (!e.dense_sums || !e.lengths_sums || !e.ids_sums) {
        rc = ctl_fail("read %s: %s", session, dpp_strerror(-ENOMEM));
        goto out;
    }
    /* Ctrl-C (or a SIGTERM) leaves cleanly: the client detaches, so that
     * another read of the rank goes on where this one stopped. */
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    uint64_t batches = 0, epochs_read = 0;
    int64_t waited_ms = 0;
    for (;;) {
        dpp_batch_t *b;
        unsigned epoch = dpp_client_epoch(c);
        if (stop_signal) {
            fprintf(stderr,
                    "dppctl: read %s: stopped by %s after %" PRIu64 " batches of epoch %u; rank "
                    "%u was released: another read of it goes on where this one stopped "
                    "(the split it was in comes again)\n",
                    session, stop_signal == SIGINT ? "SIGINT" : "SIGTERM", e.batches, epoch,
                    ctl->rank);
            rc = 128 + stop_signal;
            break;
        }
        rc = dpp_client_next(c, &b, READ_SLICE_MS);
        if (rc == DPP_ETIMEDOUT) {
            if ((waited_ms += READ_SLICE_MS) < ctl->timeout_ms)
                continue;
        } else {
            waited_ms = 0;
        }
        if (rc == DPP_BATCH) {
            add_batch(c, b, &e);
            dpp_batch_release(b);
            batches++;
        } else if (rc == DPP_EPOCH_END) {
            print_epoch(ctl, c, epoch, &e);
            epochs_read++;
            if (ctl->epochs && epoch + 1 >= ctl->epochs) {
                rc = 0;
                break;
            }
            epoch_reset(&e);
        } else if (rc == DPP_SESSION_END) {
            if (epochs_read == 0 && batches == 0) {
                fprintf(stderr,
                        "dppctl: read %s: the session is done: nothing is left to read "
                        "for rank %u\n",
                        session, ctl->rank);
                /* JSON output says so too: a script gets a line to parse
                 * (no "epoch" key: no epoch was read) */
                if (ctl->json) {
                    fputs("{\"session\":", stdout);
                    put_json_name(session);
                    printf(",\"rank\":%u,\"state\":\"done\",\"epochs_read\":0,\"rows\":0}\n",
                           ctl->rank);
                }
            }
            rc = 0;
            break;
        } else {
            const char *why = dpp_client_error(c);
            fprintf(stderr, "dppctl: read %s: %s%s%s\n", session, dpp_strerror(rc),
                    why[0] ? ": " : "", why);
            rc = rc == DPP_EFAILED ? CTL_SESSION_FAILED : CTL_FAILED;
            break;
        }
    }
out:
    free(e.dense_sums);
    free(e.lengths_sums);
    free(e.ids_sums);
    dpp_client_close(c);
    return rc;
}

/* Writes FILE.idx for every data file of the table at dir. A file whose
 * framing is broken gets no sidecar and makes the command fail. */
static int cmd_index(const char *dir)
{
    char *table = realpath(dir, NULL);
    if (table == NULL)
        return ctl_fail("index %s: %s", dir, strerror(errno));
    dpp_spec_t all = {0}; /* no partitions named: every partition */
    char **files = NULL;
    size_t nfiles = 0;
    char err[DPP_SPEC_ERRLEN];
    int rc = dpp_table_list_files(table, &all, &files, &nfiles, err, sizeof err);
    if (rc) {
        free(table);
        return ctl_fail("index %s: %s", dir, err);
    }
    int failed = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < nfiles; i++) {
        dpp_tfindex_t idx;
        dpp_tfindex_scan_result_t tail;
        rc = dpp_tfindex_scan(files[i], 0, &idx, &tail, err, sizeof err);
        if (rc == 0 && tail.error) {
            fprintf(stderr, "dppctl: index %s: %s; no sidecar written\n", files[i], err);
            dpp_tfindex_close(&idx);
            failed = 1;
            continue;
        }
        if (rc == 0 && tail.gaps) {
            /* a sidecar lists contiguous records: one with a gap would be
             * taken for a stale one */
            fprintf(stderr,
                    "dppctl: index %s: the framing breaks at offset %" PRIu64
                    " and records resume at %" PRIu64 " (%" PRIu64 " gap%s, %" PRIu64
                    " bytes that are no record); no sidecar written: sessions read the file "
                    "without one and count each gap as a corrupted record\n",
                    files[i], tail.gap_offset, tail.gap_resume, tail.gaps,
                    tail.gaps == 1 ? "" : "s", tail.gap_bytes);
            dpp_tfindex_close(&idx);
            failed = 1;
            continue;
        }
        if (rc) {
            fprintf(stderr, "dppctl: index %s: %s\n", files[i], err);
            failed = 1;
            continue;
        }
        char path[8192];
        snprintf(path, sizeof path, "%s.idx", files[i]);
        rc = dpp_tfindex_write(&idx, path);
        if (rc) {
            fprintf(stderr, "dppctl: index %s: %s\n", path, dpp_strerror(rc));
            failed = 1;
        } else {
            printf("%s: %zu records\n", path, idx.n);
            total += idx.n;
        }
        dpp_tfindex_close(&idx);
    }
    printf("%zu files, %" PRIu64 " records indexed under %s\n", nfiles, total, table);
    dpp_table_files_free(files, nfiles);
    free(table);
    return failed;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"master", required_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"version", no_argument, NULL, 'V'},
        {"rank", required_argument, NULL, 'r'},
        {"timeout-s", required_argument, NULL, 't'},
        {"token-file", required_argument, NULL, 'T'},
        {"epochs", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {"watch", no_argument, NULL, 'w'},
        {"interval-s", required_argument, NULL, 'i'},
        {"table", required_argument, NULL, 'D'},
        {"sample", required_argument, NULL, 'S'},
        {0, 0, 0, 0},
    };
    const char *env = getenv("DPP_MASTER");
    const char *token_file = NULL;
    static ctl_t ctl; /* static: its token stays reachable until exit */
    ctl = (ctl_t){
        .master = env && *env ? env : "127.0.0.1:7070", .timeout_ms = 60000, .interval_ms = 1000, .sample = 1000};
    char *end;
    int c;
    /* GNU getopt permutes: options may come before or after the command. */
    int want_help = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            ctl.master = optarg;
            break;
        case 'o':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                return ctl_fail("--output: expected text or json, got \"%s\"%s", optarg, "") + 1;
            ctl.json = strcmp(optarg, "json") == 0;
            break;
        case 'r':
            ctl.rank = (unsigned)strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0')
                return ctl_fail("--rank: not a number: \"%s\"%s", optarg, "") + 1;
            break;
        case 'w':
            ctl.watch = 1;
            break;
        case 'i': {
            double v = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(v >= 0.05 && v <= 3600))
                return ctl_fail("--interval-s: expected seconds from 0.05 to 3600, got \"%s\"%s",
                                optarg, "") +
                       1;
            ctl.interval_ms = (int)(v * 1000);
            break;
        }
        case 'e':
            ctl.epochs = (unsigned)strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || ctl.epochs == 0)
                return ctl_fail("--epochs: not a positive number: \"%s\"%s", optarg, "") + 1;
            break;
        case 'T':
            token_file = optarg;
            break;
        case 'D':
            if (ctl.ntables == CTL_MAX_TABLES) {
                char most[16];
                snprintf(most, sizeof most, "%d", CTL_MAX_TABLES);
                return ctl_fail("--table: given more than %s times (a mixture has at most that "
                                "many sources)%s",
                                most, "") +
                       1;
            }
            ctl.tables[ctl.ntables++] = optarg;
            break;
        case 'S':
            ctl.sample = (unsigned)strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || ctl.sample == 0 || ctl.sample > 10000000)
                return ctl_fail("--sample: expected records from 1 to 10000000, got \"%s\"%s",
                                optarg, "") +
                       1;
            break;
        case 't':
            ctl.timeout_ms = (int)strtol(optarg, &end, 10) * 1000;
            if (*optarg == '\0' || *end != '\0' || ctl.timeout_ms <= 0)
                return ctl_fail("--timeout-s: not a positive number: \"%s\"%s", optarg, "") + 1;
            break;
        case 'h':
            want_help = 1; /* the command's own help, once the command is known */
            break;
        case 'V':
            printf("%s\n", DPP_VERSION_LINE("dppctl"));
            return 0;
        default:
            fputs("dppctl help tells the commands and options\n", stderr);
            return 2;
        }
    }
    char why[512];
    /* the token is the process's until it exits */
    if (dpp_auth_load(&ctl.auth, token_file, why, sizeof why) != 0)
        return ctl_fail("cluster token: %s%s", why, "");
    const char *const *pos = (const char *const *)argv + optind;
    int npos = argc - optind;
    if (npos == 0 || (want_help && npos >= 1 && find_command(pos[0]) == NULL)) {
        fputs(usage, want_help ? stdout : stderr);
        return want_help ? 0 : 2;
    }
    const char *cmd = pos[0];
    const command_help_t *known = find_command(cmd);
    if (known == NULL)
        return unknown_command(cmd);
    if (want_help) {
        fputs(known->text, stdout);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        const command_help_t *h = npos >= 2 ? find_command(pos[1]) : NULL;
        if (npos >= 2 && h == NULL)
            return unknown_command(pos[1]);
        fputs(h ? h->text : usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0) {
        printf("%s\n", DPP_VERSION_LINE("dppctl"));
        return 0;
    }
    if (strcmp(cmd, "validate") == 0 && npos == 2)
        return cmd_validate(&ctl, pos[1]);
    if (strcmp(cmd, "submit") == 0 && npos == 2)
        return cmd_submit(&ctl, pos[1]);
    if (strcmp(cmd, "status") == 0 && npos <= 2)
        return ctl_status(&ctl, npos == 2 ? pos[1] : NULL);
    if (strcmp(cmd, "list") == 0 && npos == 1)
        return ctl_list(&ctl);
    if (strcmp(cmd, "workers") == 0 && npos == 1)
        return ctl_workers(&ctl);
    if (strcmp(cmd, "cancel") == 0 && npos == 2)
        return ctl_cancel(&ctl, pos[1]);
    if (strcmp(cmd, "read") == 0 && npos == 2)
        return cmd_read(&ctl, pos[1]);
    if (strcmp(cmd, "index") == 0 && npos == 2)
        return cmd_index(pos[1]);
    fprintf(stderr, "dppctl: %s: wrong arguments\n%s", cmd, known->text);
    return 2;
}
