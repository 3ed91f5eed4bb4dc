// SPDX-License-Identifier: Apache-2.0
// Text and names for dpp error numbers (include/dpp/error.h) and -errno.
#include <errno.h>
#include <string.h>

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
