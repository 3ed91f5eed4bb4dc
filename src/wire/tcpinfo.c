// SPDX-License-Identifier: Apache-2.0
// The kernel's TCP counters glibc's <netinet/tcp.h> does not declare, in a
// file of their own: <linux/tcp.h>, which does, cannot be included beside it.
#include <linux/tcp.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "wire/net.h"

uint64_t dpp_tcp_rwnd_limited_us(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    /* tcpi_rwnd_limited: Linux 4.10 and later; an older kernel fills less */
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_rwnd_limited) + sizeof ti.tcpi_rwnd_limited)
        return UINT64_MAX;
    return ti.tcpi_rwnd_limited;
}
