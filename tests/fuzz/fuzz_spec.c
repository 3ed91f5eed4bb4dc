// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the session spec parser (src/spec/spec.c), fed the JSON
// text dppctl submits. An accepted spec has a table, a batch size and at
// least one feature; a label is optional. It must survive the normalised round
// trip: dpp_spec_to_json() and parsing that again succeeds and serialises to
// the same text (an equal spec, as spec.h promises).
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"
#include "dpp/error.h"
#include "fuzz_util.h"

static void check_zeroed(const dpp_spec_t *s)
{
    FUZZ_CHECK(s->table == NULL && s->partitions == NULL && s->dense == NULL && s->sparse == NULL &&
                   s->label == NULL && s->filters == NULL && s->ndense == 0 && s->nsparse == 0 &&
                   s->nfilters == 0,
               "a refused spec left fields set");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[DPP_SPEC_ERRLEN];
    dpp_spec_t s, again;
    int rc = dpp_spec_parse((const char *)data, size, &s, err, sizeof err);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "err not NUL-terminated");
    if (rc != 0) {
        FUZZ_CHECK(rc == DPP_ESPEC || rc == -ENOMEM, "rc %d", rc);
        FUZZ_CHECK(err[0] != '\0', "refused without a message");
        check_zeroed(&s);
        return 0;
    }
    /* the label is optional, and either kind of feature (an empty list is
     * none, NULL) */
    FUZZ_CHECK(s.batch_size > 0 && s.ndense + s.nsparse > 0 && s.table &&
                   (s.ndense > 0) == (s.dense != NULL) && (s.nsparse > 0) == (s.sparse != NULL),
               "accepted spec lacks required parts");
    for (unsigned i = 0; i < s.nfilters; i++)
        FUZZ_CHECK(s.label || !s.filters[i].has_label, "a sample by label without a label");

    char *json = dpp_spec_to_json(&s);
    FUZZ_CHECK(json != NULL, "dpp_spec_to_json failed");
    rc = dpp_spec_parse(json, strlen(json), &again, err, sizeof err);
    FUZZ_CHECK(rc == 0, "normalised spec refused (rc %d: %s): %s", rc, err, json);
    char *json2 = dpp_spec_to_json(&again);
    FUZZ_CHECK(json2 != NULL, "dpp_spec_to_json failed");
    FUZZ_CHECK(strcmp(json, json2) == 0, "round trip changed the spec:\n  %s\n  %s", json, json2);
    free(json2);
    free(json);
    dpp_spec_close(&again);
    dpp_spec_close(&s);
    return 0;
}
