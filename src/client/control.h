/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON text of a session's status (src/client/control.c), written by
 * hand: libdppclient carries no JSON library. dppctl prints the same text. */
#ifndef DPP_CLIENT_CONTROL_H
#define DPP_CLIENT_CONTROL_H

#include <stddef.h>

#include "dpp.pb-c.h"

/* A growing text; failed: an allocation failed, the text is incomplete. */
typedef struct dpp_jbuf {
    char *text;
    size_t len, cap;
    int failed;
} dpp_jbuf_t;

void dpp__jbuf_printf(dpp_jbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dpp__jbuf_puts(dpp_jbuf_t *b, const char *s);

/* Appends the session as one JSON object: its counters, times (ms since
 * 1970, null when not known), cache and text work when there is any,
 * rejects by reason, and the ranks when the status is of one session
 * (docs/cli.md, status -o json). */
void dpp__session_json(dpp_jbuf_t *b, const Dpp__SessionStatus *s);

#endif
