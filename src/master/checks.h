/* SPDX-License-Identifier: Apache-2.0 */
/* What a split's report says about its session's data, in epoch 0: a
 * feature the spec names that no record has (a misspelt name) and a share
 * of rejected records past the spec's max_reject_ratio fail the session
 * with a sentence that names the feature or the reason; so does an epoch
 * that delivers no row. docs/spec.md#features-that-are-not-there. */
#ifndef DPP_MASTER_CHECKS_H
#define DPP_MASTER_CHECKS_H

#include "dpp.pb-c.h"
#include "master.h"
#include "session.h"

/* Records a feature may be absent from, in splits none of whose records had
 * it, before the session fails (earlier: at the end of epoch 0's splits).
 * Large enough that a feature of one record in 20,000 shows up first. */
#define DPP_CHECK_ABSENT_RECORDS 100000

/* Records read before the reject ratio is judged (earlier: at the end of
 * epoch 0's splits). */
#define DPP_CHECK_REJECT_MIN 1000

/* Takes split report msg of session s (its counters already added) and
 * fails the session when the data says the spec cannot be right. Returns 1
 * when it failed it. */
int dpp_master_split_checks(dpp_master_t *m, dpp_session_t *s, const Dpp__SplitDone *msg);

/* A session planned with no records to read while its index tasks turned
 * some away (a text session whose every line was rejected: no split is
 * left to report them) fails, naming the first. Returns 1 when it failed
 * it. */
int dpp_master_plan_checks(dpp_master_t *m, dpp_session_t *s);

#endif
