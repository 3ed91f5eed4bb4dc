// SPDX-License-Identifier: Apache-2.0
// Text and names for dpp error numbers (include/dpp/error.h) and -errno,
// and error sentences in a caller's buffer (errtext.h).
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/errtext.h"
#include "dpp/error.h"

const char *dpp_strerror(int err)
{
    switch (err) {
#define DPP_ERROR_TEXT(name, num, msg)                                                             \
    case num:                                                                                      \
        return msg;
        DPP_ERRORS(DPP_ERROR_TEXT)
#undef DPP_ERROR_TEXT
    case 0:
        return "success";
    }
    if (err < 0 && err > -4096)
        return strerror(-err); /* glibc's table is static and thread-safe */
    return "unknown error";
}

const char *dpp_err_name(int err)
{
    switch (err) {
#define DPP_ERROR_NAME(name, num, msg)                                                             \
    case num:                                                                                      \
        return #name;
        DPP_ERRORS(DPP_ERROR_NAME)
#undef DPP_ERROR_NAME
    case 0:
        return "OK";
    }
    if (err < 0 && err > -4096) {
        const char *name = strerrorname_np(-err);
        if (name)
            return name;
    }
    return "EUNKNOWN";
}

int dpp_errf(int code, char *buf, size_t len, const char *fmt, ...)
{
    if (len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
    return code;
}
