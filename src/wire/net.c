// SPDX-License-Identifier: Apache-2.0
// Address parsing and blocking framed request/reply over TCP (see net.h).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wire/handshake.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"
#include "wire/net.h"

int dpp_addr_parse(const char *s, struct sockaddr_storage *out)
{
    char host[256];
    const char *port;
    if (s == NULL || *s == '\0')
        return DPP_EINVAL;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || end[1] != ':' || (size_t)(end - s - 1) >= sizeof host)
            return DPP_EINVAL;
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (colon == NULL || (size_t)(colon - s) >= sizeof host)
            return DPP_EINVAL;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        port = colon + 1;
    }
    char *endp;
    errno = 0;
    long p = strtol(port, &endp, 10);
    if (*port == '\0' || *endp != '\0' || errno || p < 0 || p > 65535 || host[0] == '\0')
        return DPP_EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL)
        return DPP_ERESOLVE;
    memset(out, 0, sizeof *out);
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

const char *dpp_connect_hint(int rc, char *buf, size_t len)
{
    const char *where = "set --master HOST:PORT or DPP_MASTER to the master's --listen address";
    if (rc == -ECONNREFUSED)
        snprintf(buf, len,
                 "connection refused: nothing listens there. Is the master running? "
                 "If so, %s",
                 where);
    else if (rc == DPP_ERESOLVE)
        snprintf(buf, len, "the host name does not resolve (DNS): check its spelling, or %s",
                 where);
    else if (rc == DPP_EINVAL)
        snprintf(buf, len, "not an address: expected HOST:PORT or [V6]:PORT; %s", where);
    else if (rc == DPP_ETIMEDOUT)
        snprintf(buf, len,
                 "no answer in time: a firewall, a host that is down, or another port? "
                 "Else %s",
                 where);
    else if (rc == -EHOSTUNREACH || rc == -ENETUNREACH)
        snprintf(buf, len, "%s: check the network and the address", dpp_strerror(rc));
    else
        snprintf(buf, len, "%s", dpp_strerror(rc));
    return buf;
}

int dpp_addr_is_loopback(const char *host_port)
{
    struct sockaddr_storage ss;
    int rc = dpp_addr_parse(host_port, &ss);
    if (rc)
        return rc;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    return 0;
}

int dpp_addr_format(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];
    int n;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        n = snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        n = snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        return DPP_EINVAL;
    }
    return n < 0 || (size_t)n >= len ? DPP_EINVAL : 0;
}

int dpp_write_port_file(const char *path, const char *addr)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -errno;
    int ok = fprintf(f, "%s\n", addr) > 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = -errno;
        unlink(tmp);
        return err ? err : -EIO;
    }
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for fd to become ready for `events` until deadline (ms, monotonic). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return DPP_ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int write_all(int fd, const uint8_t *p, size_t len, int64_t deadline)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        int rc = wait_fd(fd, POLLOUT, deadline);
        if (rc)
            return rc;
    }
    return 0;
}

/* Reads until one whole frame is buffered; returns 0 with *f set. */
static int read_frame(dpp_sync_conn_t *c, dpp_frame_t *f, size_t *flen, int64_t deadline)
{
    for (;;) {
        if (c->len > 0) {
            int rc = dpp_frame_parse(c->buf, c->len, &c->limits, f, flen);
            if (rc <= 0)
                return rc;
            size_t need = *flen ? *flen : DPP_FRAME_HEADER_SIZE;
            if (need > c->cap) {
                uint8_t *nb = realloc(c->buf, need);
                if (nb == NULL)
                    return -ENOMEM;
                c->buf = nb;
                c->cap = need;
            }
        }
        if (c->len == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 4096;
            uint8_t *nb = realloc(c->buf, cap);
            if (nb == NULL)
                return -ENOMEM;
            c->buf = nb;
            c->cap = cap;
        }
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0)
            return DPP_ECLOSED;
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        int rc = wait_fd(c->fd, POLLIN, deadline);
        if (rc)
            return rc;
    }
}

int dpp_sync_send(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *m, int timeout_ms)
{
    size_t len;
    uint8_t *out = dpp_frame_pack(type, m, 0, &len);
    if (out == NULL)
        return -ENOMEM;
    int rc = write_all(c->fd, out, len, now_ms() + timeout_ms);
    free(out);
    return rc;
}

int dpp_sync_call(dpp_sync_conn_t *c, uint16_t type, const ProtobufCMessage *req,
                  uint16_t *reply_type, ProtobufCMessage **reply, int timeout_ms)
{
    int rc = dpp_sync_send(c, type, req, timeout_ms);
    return rc ? rc : dpp_sync_recv(c, reply_type, reply, timeout_ms);
}

int dpp_sync_recv(dpp_sync_conn_t *c, uint16_t *reply_type, ProtobufCMessage **reply,
                  int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int rc;
    dpp_frame_t f;
    size_t flen;
    rc = read_frame(c, &f, &flen, deadline);
    if (rc)
        return rc;
    ProtobufCMessage *m = dpp_frame_unpack(&f);
    *reply_type = f.type;
    memmove(c->buf, c->buf + flen, c->len - flen);
    c->len -= flen;
    if (m == NULL)
        return DPP_EMSG;
    *reply = m;
    return 0;
}

int dpp_sync_connect(dpp_sync_conn_t *c, const char *addr, const char *role, int timeout_ms,
                     const dpp_auth_t *auth)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    dpp_frame_limits_default(&c->limits);
    struct sockaddr_storage ss;
    int rc = dpp_addr_parse(addr, &ss);
    if (rc)
        return rc;
    int64_t deadline = now_ms() + timeout_ms;
    c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -errno;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    socklen_t slen =
        ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (connect(c->fd, (struct sockaddr *)&ss, slen) != 0) {
        if (errno != EINPROGRESS) {
            rc = -errno;
            goto fail;
        }
        rc = wait_fd(c->fd, POLLOUT, deadline);
        if (rc)
            goto fail;
        int err = 0;
        socklen_t elen = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        if (err) {
            rc = -err;
            goto fail;
        }
    }
    Dpp__Hello hello = DPP__HELLO__INIT;
    hello.version = DPP_PROTOCOL_VERSION;
    hello.role = (char *)role;
    dpp_auth_state_t st;
    if ((rc = dpp_auth_hello(auth, &st, &hello)) != 0)
        goto fail;
    uint16_t rtype;
    ProtobufCMessage *reply = NULL;
    rc = dpp_sync_call(c, DPP_MSG_HELLO, &hello.base, &rtype, &reply, timeout_ms);
    if (rc)
        goto fail;
    Dpp__Auth am = DPP__AUTH__INIT;
    int send = 0;
    if (rtype == DPP_MSG_ERROR) {
        rc = ((Dpp__Error *)reply)->code;
        snprintf(c->error, sizeof c->error, "%s", ((Dpp__Error *)reply)->message);
    } else if (rtype != DPP_MSG_HELLO_REPLY) {
        rc = DPP_EMSGTYPE;
    } else {
        rc = dpp_auth_answer(auth, &st, role, (Dpp__HelloReply *)reply, &am, &send, c->error,
                             sizeof c->error);
    }
    protobuf_c_message_free_unpacked(reply, NULL);
    if (rc == 0 && send) /* no answer: a wrong token gets an Error in reply to the next request */
        rc = dpp_sync_send(c, DPP_MSG_AUTH, &am.base, timeout_ms);
    if (rc)
        goto fail;
    return 0;

fail:
    dpp_sync_close(c);
    return rc;
}

void dpp_sync_close(dpp_sync_conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}
