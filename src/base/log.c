// SPDX-License-Identifier: Apache-2.0
// Line-oriented logging to stderr with a level threshold.
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dpp/error.h"
#include "base/log.h"

static atomic_int log_threshold = DPP_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void dpp_log_set_level(dpp_log_level_t level)
{
    atomic_store(&log_threshold, (int)level);
}

int dpp_log_parse_level(const char *s, dpp_log_level_t *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (dpp_log_level_t)i;
            return 0;
        }
    }
    return DPP_EINVAL;
}

const char *dpp_log_quote(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    if (len < 3) {
        if (len)
            buf[0] = '\0';
        return buf;
    }
    buf[o++] = '"';
    for (; *s && o + 3 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            buf[o++] = '\\';
        buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

void dpp_log(dpp_log_level_t level, const char *fmt, ...)
{
    if ((int)level < atomic_load(&log_threshold))
        return;
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char line[2048];
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write per line so lines from several threads never interleave. */
    fwrite(line, 1, len, stderr);
}
