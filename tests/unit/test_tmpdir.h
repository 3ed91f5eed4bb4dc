/* SPDX-License-Identifier: Apache-2.0 */
/* A scratch directory for a cmocka suite: made by the group setup, removed
 * with everything in it by the group teardown. Header-only, test side. */
#ifndef DPP_TESTS_TEST_TMPDIR_H
#define DPP_TESTS_TEST_TMPDIR_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Makes "/tmp/dpp-test-TAG-XXXXXX" into dir (PATH_MAX bytes); 0 or -1. */
static inline int test_tmpdir_make(char *dir, const char *tag)
{
    snprintf(dir, PATH_MAX, "/tmp/dpp-test-%s-XXXXXX", tag);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int test_tmpdir_remove(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
