#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A TCP proxy that resets one connection mid-stream: listens on
127.0.0.1:LISTEN_PORT, forwards every connection to UPSTREAM (HOST:PORT),
and once the first connection has carried CUT bytes from the upstream
towards the client, closes both of its sides with a reset (SO_LINGER 0),
bytes still in flight lost. Later connections are forwarded whole.

    rstproxy.py LISTEN_PORT UPSTREAM CUT

Prints "listening" when ready and "reset after N bytes" when it cut.
Runs until killed (the test stops it)."""
import selectors
import socket
import struct
import sys


def main():
    port = int(sys.argv[1])
    host, uport = sys.argv[2].rsplit(":", 1)
    cut = int(sys.argv[3])
    lsn = socket.socket()
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind(("127.0.0.1", port))
    lsn.listen(64)
    lsn.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsn, selectors.EVENT_READ, None)
    print("listening", flush=True)
    pairs = {}  # socket -> (peer socket, is_upstream, conn number)
    count = 0
    carried = {}
    cut_done = False

    def close_pair(a, reset):
        b, _, _ = pairs.pop(a, (None, None, None))
        for s in (a, b):
            if s is None:
                continue
            pairs.pop(s, None)
            try:
                sel.unregister(s)
            except (KeyError, ValueError):
                pass
            if reset:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()

    while True:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            if s is lsn:
                c, _ = lsn.accept()
                try:
                    u = socket.create_connection((host, int(uport)), timeout=5)
                except OSError:
                    c.close()
                    continue
                count += 1
                for x in (c, u):
                    x.setblocking(True)
                    x.settimeout(5)
                pairs[c] = (u, False, count)
                pairs[u] = (c, True, count)
                carried[count] = 0
                sel.register(c, selectors.EVENT_READ, None)
                sel.register(u, selectors.EVENT_READ, None)
                continue
            if s not in pairs:
                continue
            other, upstream, n = pairs[s]
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                close_pair(s, False)
                continue
            if upstream and n == 1 and not cut_done:
                carried[n] += len(data)
                if carried[n] >= cut:
                    cut_done = True
                    print("reset after %d bytes" % carried[n], flush=True)
                    close_pair(s, True)
                    continue
            try:
                other.sendall(data)
            except OSError:
                close_pair(s, False)


if __name__ == "__main__":
    main()
