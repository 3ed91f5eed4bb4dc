// SPDX-License-Identifier: Apache-2.0
// Per-session split bookkeeping at the master (see session.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "session.h"

dpp_session_t *dpp_session_new(const char *id, dpp_spec_t *spec, char *table_path, char **files,
                               size_t nfiles)
{
    dpp_session_t *s = dpp_xcalloc(1, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->spec = *spec;
    memset(spec, 0, sizeof *spec);
    s->spec_json = dpp_spec_to_json(&s->spec);
    if (s->spec_json == NULL)
        dpp_oom();
    s->table_path = table_path;
    s->files = files;
    s->nfiles = nfiles;
    s->splits = dpp_xcalloc(nfiles, sizeof *s->splits);
    s->counts[SPLIT_PENDING] = nfiles;
    return s;
}

void dpp_session_free(dpp_session_t *s)
{
    if (s == NULL)
        return;
    dpp_spec_close(&s->spec);
    free(s->spec_json);
    free(s->table_path);
    for (size_t i = 0; i < s->nfiles; i++)
        free(s->files[i]);
    free(s->files);
    free(s->splits);
    free(s->error);
    free(s);
}

void dpp_session_set(dpp_session_t *s, size_t i, split_state_t st)
{
    s->counts[s->splits[i].state]--;
    s->counts[st]++;
    s->splits[i].state = st;
    if (st == SPLIT_PENDING) {
        s->splits[i].lease_id = 0;
        s->splits[i].worker_id = 0;
    }
}

size_t dpp_session_rank_splits(const dpp_session_t *s, unsigned rank)
{
    size_t n = s->nfiles / s->spec.consumers;
    return n + (rank < s->nfiles % s->spec.consumers ? 1 : 0);
}

int dpp_session_consumed(dpp_session_t *s, size_t i)
{
    if (s->splits[i].state == SPLIT_CONSUMED)
        return 0;
    dpp_session_set(s, i, SPLIT_CONSUMED);
    if (s->counts[SPLIT_CONSUMED] < s->nfiles)
        return 0;
    if (s->epoch + 1 >= s->spec.epochs) {
        s->state = SESSION_DONE;
        return 0;
    }
    s->epoch++;
    for (size_t j = 0; j < s->nfiles; j++) {
        dpp_session_set(s, j, SPLIT_PENDING);
        s->splits[j].rows = 0;
    }
    return 1;
}

size_t dpp_session_release_worker(dpp_session_t *s, uint64_t worker_id)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        dpp_split_t *sp = &s->splits[i];
        if (sp->worker_id == worker_id &&
            (sp->state == SPLIT_LEASED || sp->state == SPLIT_PRODUCED)) {
            if (sp->state == SPLIT_PRODUCED)
                s->rows_produced -= sp->rows; /* counted again when re-produced */
            dpp_session_set(s, i, SPLIT_PENDING);
            n++;
        }
    }
    return n;
}

const char *dpp_session_state_name(session_state_t st)
{
    switch (st) {
    case SESSION_RUNNING:
        return "running";
    case SESSION_DONE:
        return "done";
    case SESSION_FAILED:
        return "failed";
    }
    return "unknown";
}
