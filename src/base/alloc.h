/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation for the daemons: out of memory aborts with file and line.
 * Never used by the client library, which returns -ENOMEM instead. */
#ifndef DPP_BASE_ALLOC_H
#define DPP_BASE_ALLOC_H

#include <stddef.h>

void *dpp__xmalloc(size_t n, const char *file, int line);
void *dpp__xcalloc(size_t n, size_t size, const char *file, int line);
void *dpp__xrealloc(void *p, size_t n, const char *file, int line);
char *dpp__xstrdup(const char *s, const char *file, int line);
/* Reports out-of-memory at file:line and aborts. */
_Noreturn void dpp__oom(const char *file, int line);

#define dpp_xmalloc(n) dpp__xmalloc((n), __FILE__, __LINE__)
#define dpp_xcalloc(n, size) dpp__xcalloc((n), (size), __FILE__, __LINE__)
#define dpp_xrealloc(p, n) dpp__xrealloc((p), (n), __FILE__, __LINE__)
#define dpp_xstrdup(s) dpp__xstrdup((s), __FILE__, __LINE__)
#define dpp_oom() dpp__oom(__FILE__, __LINE__)

#endif
