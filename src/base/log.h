/* SPDX-License-Identifier: Apache-2.0 */
/* One line per event on stderr: `ts=... level=... <event> key=value ...`.
 * Callers write the event name first, then key=value fields. */
#ifndef DPP_COMMON_LOG_H
#define DPP_COMMON_LOG_H

#include <stddef.h>

typedef enum dpp_log_level {
    DPP_LOG_DEBUG = 0,
    DPP_LOG_INFO = 1,
    DPP_LOG_WARN = 2,
    DPP_LOG_ERROR = 3,
} dpp_log_level_t;

/* The process-wide threshold; messages below it are dropped. Logging is the
 * one piece of process state dpp keeps global: every component of a process
 * shares stderr anyway. */
void dpp_log_set_level(dpp_log_level_t level);

/* Parses "debug", "info", "warn" or "error". Returns 0 or DPP_EINVAL. */
int dpp_log_parse_level(const char *s, dpp_log_level_t *out);

/* Writes s into buf as a quoted log value: surrounding double quotes, with
 * '"' and '\\' escaped and control bytes shown as '?', cut to fit len.
 * Returns buf. For text that comes from peers or files. */
const char *dpp_log_quote(const char *s, char *buf, size_t len);

void dpp_log(dpp_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define DPP_DEBUG(...) dpp_log(DPP_LOG_DEBUG, __VA_ARGS__)
#define DPP_INFO(...) dpp_log(DPP_LOG_INFO, __VA_ARGS__)
#define DPP_WARN(...) dpp_log(DPP_LOG_WARN, __VA_ARGS__)
#define DPP_ERROR(...) dpp_log(DPP_LOG_ERROR, __VA_ARGS__)

#endif
