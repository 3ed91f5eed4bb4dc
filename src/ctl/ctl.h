/* SPDX-License-Identifier: Apache-2.0 */
/* What dppctl's commands share: options, failure reporting, master calls. */
#ifndef DPP_CTL_CTL_H
#define DPP_CTL_CTL_H

#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "wire/handshake.h"

/* Exit statuses (also in --help and docs/cli.md). */
enum {
    CTL_OK = 0,
    CTL_FAILED = 1,         /* the command failed; the reason is on stderr */
    CTL_USAGE = 2,          /* bad command line */
    CTL_SESSION_FAILED = 3, /* status, read: the session failed or was cancelled */
};

/* --table given at most this often: a mixture's sources (DPP_SPEC_MAX_SOURCES). */
#define CTL_MAX_TABLES 64

typedef struct ctl {
    const char *master;
    int json;
    int watch;       /* status: refresh until the session ends */
    int interval_ms; /* status --watch: between refreshes */
    unsigned rank;
    unsigned epochs; /* read: stop after this many; 0: all */
    int timeout_ms;
    /* validate, submit: --table, the folders of the spec's tables on this
     * machine to sample (a mixture's: one per source, in source order) */
    const char *tables[CTL_MAX_TABLES];
    unsigned ntables;
    unsigned sample;   /* validate --table: records to read */
    dpp_auth_t auth; /* --token-file or $DPP_TOKEN_FILE; none: token NULL */
} ctl_t;

/* Prints "dppctl: " fmt (with a and b) to stderr; returns CTL_FAILED. */
int ctl_fail(const char *fmt, const char *a, const char *b);

/* One request/reply with the master. An Error reply is printed and gives
 * CTL_FAILED; on 0 the caller frees *reply. */
int ctl_call_master(const ctl_t *ctl, uint16_t type, const ProtobufCMessage *req, uint16_t want,
                    ProtobufCMessage **reply);

/* validate --table (src/ctl/sample.c): reads up to `records` records of
 * the spec's table in folder dir (spread over up to 8 of its files) and
 * checks every name the spec reads: in some record, with values its
 * transforms take, rejected records within max_reject_ratio. Errors go to
 * stderr after "dppctl: SPEC_PATH: ", notes and the verdict to stdout.
 * Returns CTL_OK or CTL_FAILED. */
struct dpp_spec;
int ctl_sample_check(const struct dpp_spec *spec, const char *spec_path, const char *dir,
                     unsigned records);

/* validate --table and submit --table: ctl_sample_check() of each table
 * of spec: a spec of one table takes one folder (dirs[0]); a mixture's
 * source i is sampled in dirs[i], and the sources after the last folder
 * given under the data root dirs[0] is in (dirs[0] less source 0's table
 * path), or refused by name when that root is not known. Errors name the
 * source ("SPEC: sources[1] (table T): ..."). Returns CTL_OK, or
 * CTL_FAILED after every table was checked. */
int ctl_sample_tables(const struct dpp_spec *spec, const char *spec_path, const char *const *dirs,
                      unsigned ndirs, unsigned records);

/* ctl_sample_check() for a text session (sample_text.c): files[0..nfiles)
 * of the table (real path `table`, given as dir), k of them sampled. */
int ctl_sample_text(const struct dpp_spec *spec, const char *spec_path, const char *dir,
                    const char *table, char **files, size_t nfiles, size_t k, unsigned records);

/* status [SESSION], list, workers, cancel SESSION (src/ctl/status.c). */
int ctl_status(const ctl_t *ctl, const char *session);
int ctl_list(const ctl_t *ctl);
int ctl_workers(const ctl_t *ctl);
int ctl_cancel(const ctl_t *ctl, const char *session);

#endif
