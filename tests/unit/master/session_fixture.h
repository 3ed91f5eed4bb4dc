/* SPDX-License-Identifier: Apache-2.0 */
/* A session built in memory for the master's unit suites (include after
 * cmocka.h). */
#ifndef DPP_TEST_SESSION_FIXTURE_H
#define DPP_TEST_SESSION_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "master/session.h"
#include "spec/spec.h"

/* Session `id` over nfiles files /t/ds=1/part-NNNNN (not indexed yet), a
 * spec with batch_size 4 and one sparse feature; extra: more top-level keys
 * of the spec, each followed by a comma. The caller frees it with
 * dpp_session_free(). */
static inline dpp_session_t *fixture_session(const char *id, size_t nfiles, unsigned epochs,
                                             unsigned consumers, unsigned split_rows,
                                             const char *remainder, const char *extra)
{
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN];
    char json[512];
    snprintf(json, sizeof json,
             "{\"table\":\"t\",\"batch_size\":4,\"epochs\":%u,\"consumers\":%u,"
             "\"split_rows\":%u,\"remainder\":\"%s\",%s"
             "\"features\":{\"sparse\":[{\"name\":\"c1\"}]},\"label\":{\"name\":\"label\"}}",
             epochs, consumers, split_rows, remainder, extra);
    assert_int_equal(dpp_spec_parse(json, strlen(json), &spec, err, sizeof err), 0);
    char **files = dpp_xcalloc(nfiles ? nfiles : 1, sizeof *files);
    for (size_t i = 0; i < nfiles; i++) {
        char name[48];
        snprintf(name, sizeof name, "/t/ds=1/part-%05zu", i);
        files[i] = dpp_xstrdup(name);
    }
    return dpp_session_new(id, &spec, dpp_xstrdup("/t"), files, nfiles);
}

#endif
