// SPDX-License-Identifier: Apache-2.0
// Aborting allocation wrappers for the daemons (see alloc.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

static _Noreturn void oom(size_t n, const char *file, int line)
{
    fprintf(stderr, "level=error out_of_memory bytes=%zu at=%s:%d\n", n, file, line);
    abort();
}

void dpp__oom(const char *file, int line)
{
    oom(0, file, line);
}

void *dpp__xmalloc(size_t n, const char *file, int line)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n, file, line);
    return p;
}

void *dpp__xcalloc(size_t n, size_t size, const char *file, int line)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size, file, line);
    return p;
}

void *dpp__xrealloc(void *p, size_t n, const char *file, int line)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n, file, line);
    return q;
}

char *dpp__xstrdup(const char *s, const char *file, int line)
{
    size_t n = strlen(s) + 1;
    char *p = dpp__xmalloc(n, file, line);
    memcpy(p, s, n);
    return p;
}
