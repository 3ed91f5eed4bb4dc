/* SPDX-License-Identifier: Apache-2.0 */
/* The session's data checks of epoch 0 (checks.h): features that no record
 * has, the share of rejected records, an epoch that delivers nothing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/reject.h"
#include "checks.h"
#include "spec/schema.h"
#include "master_internal.h"
#include "persist.h"

static int named_in(const char *name, char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

static void fail(dpp_master_t *m, dpp_session_t *s, const char *cause, const char *text)
{
    dpp_master_fail_session(m, s, cause, text);
}

int dpp_master_split_checks(dpp_master_t *m, dpp_session_t *s, const Dpp__SplitDone *msg)
{
    if (s->epoch != 0 || s->checks_done || s->state != SESSION_RUNNING)
        return 0;
    if (msg->n_record_features > 0 && s->record_names == NULL) {
        size_t len = 0;
        for (size_t i = 0; i < msg->n_record_features; i++)
            len += strlen(msg->record_features[i]) + 1;
        s->record_names = dpp_xmalloc(len + 1);
        char *w = s->record_names;
        for (size_t i = 0; i < msg->n_record_features; i++) {
            size_t l = strlen(msg->record_features[i]) + 1;
            memcpy(w, msg->record_features[i], l);
            w += l;
        }
        s->nrecord_names = msg->n_record_features;
    }
    if (msg->first_reject && msg->first_reject[0] && s->first_reject == NULL)
        s->first_reject = dpp_xstrdup(msg->first_reject);
    for (size_t i = 0; i < s->nfchecks && msg->records_examined > 0; i++) {
        dpp_feature_check_t *c = &s->fchecks[i];
        if (named_in(c->n.name, msg->absent_features, msg->n_absent_features))
            c->absent_records += msg->records_examined;
        else
            c->seen = 1;
    }
    /* every split of epoch 0 reported: the whole first pass over the data
     * (a consumed split's report may still be due: the epoch waits for it) */
    int all = s->counts[SPLIT_PENDING] == 0 && s->counts[SPLIT_LEASED] == 0 && s->reports_due == 0;
    uint64_t rejected = dpp_rejects_total(&s->rejects);
    uint64_t total = s->rows_produced + s->rows_filtered + rejected;
    int too_many = rejected > 0 && (all || total >= DPP_CHECK_REJECT_MIN) &&
                   (double)rejected > s->spec.max_reject_ratio * (double)total;
    char text[2048];
    /* a feature no record had: the likely cause of too many rejects too */
    for (size_t i = 0; i < s->nfchecks; i++) {
        const dpp_feature_check_t *c = &s->fchecks[i];
        if (c->seen || c->n.optional || c->absent_records == 0 ||
            (!all && !too_many && c->absent_records < DPP_CHECK_ABSENT_RECORDS))
            continue;
        char records[96];
        snprintf(records, sizeof records, "%s%" PRIu64 " records %s", all ? "" : "first ",
                 c->absent_records, all ? "of epoch 0" : "read");
        enum { MAX_NAMES = 256 };
        const char *names[MAX_NAMES];
        size_t n = 0;
        const char *p = s->record_names;
        for (size_t j = 0; p && j < s->nrecord_names && n < MAX_NAMES; j++, p += strlen(p) + 1)
            names[n++] = p;
        dpp_schema_absent_text(text, sizeof text, &c->n, records, names, n);
        fail(m, s, "cause=schema", text);
        return 1;
    }
    if (too_many) {
        char reasons[512] = "";
        dpp_rejects_describe(&s->rejects, reasons, sizeof reasons);
        snprintf(text, sizeof text,
                 "rejected %" PRIu64 " of %" PRIu64 " records (%.1f%%), more than the spec's "
                 "max_reject_ratio %g (%s); the first: %s",
                 rejected, total, 100.0 * (double)rejected / (double)total,
                 s->spec.max_reject_ratio, reasons, s->first_reject ? s->first_reject : "-");
        fail(m, s, "cause=rejects", text);
        return 1;
    }
    if (all && s->rows_produced == 0 && total > 0) {
        snprintf(text, sizeof text,
                 "epoch 0 delivered no rows: of %" PRIu64 " records read, the spec's filters "
                 "dropped %" PRIu64 " and %" PRIu64 " were rejected",
                 total, s->rows_filtered, rejected);
        fail(m, s, "cause=empty", text);
        return 1;
    }
    if (all)
        s->checks_done = 1;
    return 0;
}

int dpp_master_plan_checks(dpp_master_t *m, dpp_session_t *s)
{
    uint64_t rejected = dpp_rejects_total(&s->rejects);
    if (s->nsplits > 0 || rejected == 0)
        return 0;
    char reasons[512] = "", text[2048];
    dpp_rejects_describe(&s->rejects, reasons, sizeof reasons);
    snprintf(text, sizeof text,
             "the session has nothing to deliver: every one of the %" PRIu64
             " records its files hold was rejected (%s); the first: %s",
             rejected, reasons, s->first_reject ? s->first_reject : "-");
    fail(m, s, "cause=rejects", text);
    return 1;
}
