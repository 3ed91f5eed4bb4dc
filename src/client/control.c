// SPDX-License-Identifier: Apache-2.0
// Session control for programs (include/dpp/client.h): submit a spec, ask a
// session's status as JSON, cancel it, as dppctl does, without a dppctl
// process to run and parse. The status object is written here, by hand: the
// client library carries no JSON library, and dppctl prints this same text
// for `status -o json` and `list -o json`.
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/reject.h"
#include "crypto/token.h"
#include "dpp.pb-c.h"
#include "dpp/client.h"
#include "dpp/error.h"
#include "wire/frame.h"
#include "wire/net.h"
#include "client/control.h"

#define DEFAULT_TIMEOUT_MS 10000

/* Why this thread's last control call failed (dpp_session_error()). */
static _Thread_local char control_error[4096];

static int set_error(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(control_error, sizeof control_error, fmt, ap);
    va_end(ap);
    return rc;
}

const char *dpp_session_error(void)
{
    return control_error;
}

void dpp_free(void *p)
{
    free(p);
}

/* One request and its reply: connected and authenticated as dppctl is (the
 * token given, else the file $DPP_TOKEN_FILE names, else none). An Error
 * reply returns its code with the master's words as the error. */
static int call(const char *master, const char *token, int timeout_ms, uint16_t type,
                const ProtobufCMessage *req, uint16_t want, ProtobufCMessage **reply)
{
    control_error[0] = '\0';
    if (master == NULL)
        return set_error(DPP_EINVAL, "master: required (\"HOST:PORT\")");
    if (timeout_ms <= 0)
        timeout_ms = DEFAULT_TIMEOUT_MS;
    dpp_auth_t auth = {0};
    char why[256];
    int rc;
    if (token) {
        auth.token = (const uint8_t *)token;
        auth.len = strlen(token);
    } else if ((rc = dpp_auth_load(&auth, NULL, why, sizeof why)) != 0) {
        return set_error(rc, "%s", why);
    }
    dpp_sync_conn_t conn;
    rc = dpp_sync_connect(&conn, master, "ctl", timeout_ms, &auth);
    if (rc == 0) {
        uint16_t rtype;
        rc = dpp_sync_call(&conn, type, req, &rtype, reply, timeout_ms);
        if (rc == 0 && rtype == DPP_MSG_ERROR) {
            Dpp__Error *e = (Dpp__Error *)*reply;
            rc = set_error(e->code < 0 ? e->code : DPP_EMSG, "%s", e->message);
            protobuf_c_message_free_unpacked(*reply, NULL);
        } else if (rc == 0 && rtype != want) {
            protobuf_c_message_free_unpacked(*reply, NULL);
            rc = set_error(DPP_EMSGTYPE, "master %s: unexpected reply (%s)", master,
                           dpp_msg_name(rtype));
        } else if (rc) {
            set_error(rc, "master %s: %s", master, dpp_strerror(rc));
        }
    } else {
        char hint[512];
        set_error(rc, "master %s: %s", master,
                  conn.error[0] ? conn.error : dpp_connect_hint(rc, hint, sizeof hint));
    }
    dpp_sync_close(&conn);
    if (!token)
        free((void *)auth.token);
    return rc;
}

int dpp_session_submit(const char *master, const char *token, int timeout_ms,
                       const char *spec_json, char *session_id, size_t len)
{
    if (spec_json == NULL || session_id == NULL || len == 0)
        return set_error(DPP_EINVAL, "spec_json and session_id: required");
    Dpp__SubmitRequest req = DPP__SUBMIT_REQUEST__INIT;
    req.spec_json = (char *)spec_json;
    ProtobufCMessage *reply;
    int rc = call(master, token, timeout_ms, DPP_MSG_SUBMIT, &req.base, DPP_MSG_SUBMIT_REPLY,
                  &reply);
    if (rc)
        return rc;
    const char *id = ((Dpp__SubmitReply *)reply)->session_id;
    if (strlen(id) >= len)
        rc = set_error(DPP_EINVAL, "session id %s: longer than the %zu bytes given", id, len);
    else
        snprintf(session_id, len, "%s", id);
    protobuf_c_message_free_unpacked(reply, NULL);
    return rc;
}

int dpp_session_cancel(const char *master, const char *token, int timeout_ms, const char *session,
                       char *state_before, size_t len)
{
    if (session == NULL || session[0] == '\0')
        return set_error(DPP_EINVAL, "session: required");
    Dpp__CancelRequest req = DPP__CANCEL_REQUEST__INIT;
    req.session_id = (char *)session;
    ProtobufCMessage *reply;
    int rc = call(master, token, timeout_ms, DPP_MSG_CANCEL, &req.base, DPP_MSG_CANCEL_REPLY,
                  &reply);
    if (rc)
        return rc;
    if (state_before && len)
        snprintf(state_before, len, "%s", ((Dpp__CancelReply *)reply)->state);
    protobuf_c_message_free_unpacked(reply, NULL);
    return 0;
}

int dpp_session_status(const char *master, const char *token, int timeout_ms, const char *session,
                       char **json)
{
    if (json == NULL)
        return set_error(DPP_EINVAL, "json: required");
    *json = NULL;
    Dpp__StatusRequest req = DPP__STATUS_REQUEST__INIT;
    req.session_id = (char *)(session ? session : "");
    ProtobufCMessage *reply;
    int rc = call(master, token, timeout_ms, DPP_MSG_STATUS, &req.base, DPP_MSG_STATUS_REPLY,
                  &reply);
    if (rc)
        return rc;
    Dpp__StatusReply *r = (Dpp__StatusReply *)reply;
    dpp_jbuf_t b = {0};
    if (session && session[0]) {
        if (r->n_sessions == 1)
            dpp__session_json(&b, r->sessions[0]);
        else
            rc = set_error(DPP_EMSG, "master %s: %zu sessions in the status of one", master,
                           r->n_sessions);
    } else {
        dpp__jbuf_puts(&b, "[");
        for (size_t i = 0; i < r->n_sessions; i++) {
            if (i)
                dpp__jbuf_puts(&b, ",");
            dpp__session_json(&b, r->sessions[i]);
        }
        dpp__jbuf_puts(&b, "]");
    }
    protobuf_c_message_free_unpacked(reply, NULL);
    if (rc == 0 && b.failed)
        rc = set_error(-ENOMEM, "out of memory");
    if (rc)
        free(b.text);
    else
        *json = b.text;
    return rc;
}

/* ---- the JSON text ----------------------------------------------------- */

void dpp__jbuf_printf(dpp_jbuf_t *b, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !b->failed; pass++) {
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->text ? b->text + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *t = realloc(b->text, cap);
        if (t == NULL) {
            b->failed = 1;
            return;
        }
        b->text = t;
        b->cap = cap;
    }
}

void dpp__jbuf_puts(dpp_jbuf_t *b, const char *s)
{
    dpp__jbuf_printf(b, "%s", s);
}

/* A JSON string: quotes, backslashes and control characters escaped; the
 * master's strings (ids, table paths, error texts) are UTF-8 already. */
static void put_string(dpp_jbuf_t *b, const char *s)
{
    dpp__jbuf_puts(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            dpp__jbuf_printf(b, "\\%c", *c);
        else if (*c < 0x20)
            dpp__jbuf_printf(b, "\\u%04x", *c);
        else
            dpp__jbuf_printf(b, "%c", *c);
    }
    dpp__jbuf_puts(b, "\"");
}

/* ,"key":  (every member but an object's first starts so) */
static void key(dpp_jbuf_t *b, const char *k)
{
    dpp__jbuf_printf(b, ",\"%s\":", k);
}

static void put_u64(dpp_jbuf_t *b, const char *k, uint64_t v)
{
    key(b, k);
    dpp__jbuf_printf(b, "%" PRIu64, v);
}

static void put_real(dpp_jbuf_t *b, const char *k, double v)
{
    key(b, k);
    dpp__jbuf_printf(b, "%.17g", v);
}

/* milliseconds since 1970, or null when not known */
static void put_time(dpp_jbuf_t *b, const char *k, int64_t v)
{
    key(b, k);
    if (v)
        dpp__jbuf_printf(b, "%" PRId64, v);
    else
        dpp__jbuf_puts(b, "null");
}

static double ratio(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

void dpp__session_json(dpp_jbuf_t *b, const Dpp__SessionStatus *s)
{
    dpp__jbuf_puts(b, "{\"session\":");
    put_string(b, s->session_id);
    key(b, "state");
    put_string(b, s->state);
    key(b, "table");
    put_string(b, s->table);
    key(b, "epochs");
    if (s->epochs == DPP_EPOCHS_UNBOUNDED)
        dpp__jbuf_puts(b, "\"unbounded\"");
    else
        dpp__jbuf_printf(b, "%u", s->epochs);
    put_u64(b, "epoch", s->current_epoch);
    /* epochs every rank has read; of a cancelled or failed session, the
     * ones before the epoch it stopped in */
    put_u64(b, "epochs_done", strcmp(s->state, "done") == 0 ? s->epochs : s->current_epoch);
    put_u64(b, "consumers", s->consumers);
    put_u64(b, "files", s->files);
    put_u64(b, "files_indexed", s->files_indexed);
    put_u64(b, "splits_per_epoch", s->splits_per_epoch);
    put_u64(b, "splits_pending", s->splits_pending);
    put_u64(b, "splits_leased", s->splits_leased);
    put_u64(b, "splits_produced", s->splits_produced);
    put_u64(b, "splits_consumed", s->splits_consumed);
    put_u64(b, "rows_produced", s->rows_produced);
    put_u64(b, "rows_filtered", s->rows_filtered);
    put_u64(b, "records_rejected", s->records_rejected);
    put_u64(b, "records_per_epoch", s->records_per_epoch);
    put_u64(b, "workers", s->workers);
    key(b, "error");
    put_string(b, s->error);
    put_time(b, "submitted_unix_ms", s->submitted_unix_ms);
    put_time(b, "planned_unix_ms", s->planned_unix_ms);
    put_time(b, "ended_unix_ms", s->ended_unix_ms);
    put_time(b, "expires_unix_ms", s->expires_unix_ms);
    put_time(b, "abandon_unix_ms", s->abandon_unix_ms);
    if (s->planned_unix_ms && s->submitted_unix_ms)
        put_u64(b, "planning_ms", (uint64_t)(s->planned_unix_ms - s->submitted_unix_ms));
    put_u64(b, "splits_per_second", s->splits_per_second);
    put_u64(b, "takeovers", s->takeovers);
    put_u64(b, "rows_redelivered_max", s->rows_redelivered_max);
    uint64_t cached = s->splits_from_ram + s->splits_from_disk;
    if (cached + s->splits_made > 0) { /* workers with a cache served it */
        dpp__jbuf_puts(b, ",\"cache\":{\"splits_made\":");
        dpp__jbuf_printf(b, "%" PRIu64, s->splits_made);
        put_u64(b, "splits_from_ram", s->splits_from_ram);
        put_u64(b, "splits_from_disk", s->splits_from_disk);
        put_real(b, "hit_ratio", ratio(cached, cached + s->splits_made));
        put_u64(b, "bytes_from_cache", s->bytes_from_cache);
        dpp__jbuf_puts(b, "}");
    }
    if (s->text_tokens || s->text_documents) { /* a text session's work */
        dpp__jbuf_puts(b, ",\"text\":{\"documents\":");
        dpp__jbuf_printf(b, "%" PRIu64, s->text_documents);
        put_u64(b, "tokens", s->text_tokens);
        put_u64(b, "padding", s->text_padding);
        put_real(b, "padding_ratio", ratio(s->text_padding, s->text_tokens + s->text_padding));
        put_u64(b, "tokens_per_second", s->tokens_per_second);
        dpp__jbuf_puts(b, "}");
    }
    if (s->n_sources) { /* a mixture's sources */
        dpp__jbuf_puts(b, ",\"sources\":[");
        for (size_t i = 0; i < s->n_sources; i++) {
            const Dpp__SourceStatus *x = s->sources[i];
            dpp__jbuf_printf(b, "%s{\"table\":", i ? "," : "");
            put_string(b, x->table);
            put_real(b, "weight", x->weight);
            put_u64(b, "window_rows", x->window_rows);
            put_u64(b, "rows", x->rows);
            put_u64(b, "epoch_rows", x->epoch_rows);
            put_u64(b, "records", x->records);
            dpp__jbuf_puts(b, "}");
        }
        dpp__jbuf_puts(b, "]");
    }
    const Dpp__Rejects *rj = s->rejects;
    if (rj) {
        const char *sep = "";
        dpp__jbuf_puts(b, ",\"rejects\":{");
#define TO_JSON(name, code, words)                                                                 \
    dpp__jbuf_printf(b, "%s\"" #name "\":%" PRIu64, sep, (uint64_t)rj->name);                      \
    sep = ",";
        DPP_REJECT_REASONS(TO_JSON)
#undef TO_JSON
        (void)sep;
        dpp__jbuf_puts(b, "}");
    }
    if (s->n_ranks) { /* ranks only in the status of one session */
        dpp__jbuf_puts(b, ",\"ranks\":[");
        for (size_t i = 0; i < s->n_ranks; i++) {
            const Dpp__RankStatus *r = s->ranks[i];
            dpp__jbuf_printf(b,
                             "%s{\"rank\":%u,\"splits\":%u,\"splits_consumed\":%u,\"attached\":%s,"
                             "\"batches\":%" PRIu64,
                             i ? "," : "", r->rank, r->splits, r->splits_consumed,
                             r->attached ? "true" : "false", r->batches);
            put_real(b, "wait_share", ratio(r->wait_ns, r->open_ns));
            dpp__jbuf_puts(b, "}");
        }
        dpp__jbuf_puts(b, "]");
    }
    dpp__jbuf_puts(b, "}");
}
