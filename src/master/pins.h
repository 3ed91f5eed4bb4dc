/* SPDX-License-Identifier: Apache-2.0 */
/* Pinning at submit: the version of every file a session's spec names
 * beside its table (tokenizer, vocabularies) goes into the spec's "pins",
 * so that every split of the session reads that version or fails, and the
 * index of a text table is keyed by it (docs/guarantees.md). */
#ifndef DPP_MASTER_PINS_H
#define DPP_MASTER_PINS_H

#include <stddef.h>
#include <stdint.h>

#include "master.h"
#include "spec/spec.h"

/* Pins spec's side files as they are now under the data root of its table
 * (table_path: the table's resolved folder or s3:// URL); an object's HEAD
 * ends by the listing's deadline_ns or *stop (0, NULL: never). A pin the
 * spec gave that the file no longer matches is refused. Off the loop
 * thread: reads only what the master fixed at start. Returns 0, or the
 * error with err naming the file (a missing one too: it would fail every
 * split). */
int dpp_master_pin_files(const dpp_master_t *m, dpp_spec_t *spec, const char *table_path,
                         uint64_t deadline_ns, const int *stop, char *err, size_t errlen);

#endif
