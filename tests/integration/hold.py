#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Opens N TCP connections to HOST:PORT and keeps them open, sending
nothing, until stdin closes (or 60 s pass): a crowd of idle peers.

    hold.py HOST:PORT N

Prints "open K" once K connections are established (those the server
accepts and then closes still count as opened). Exits 0."""
import select
import socket
import sys
import time


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    n = int(sys.argv[2])
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect((host, int(port)))
        except OSError:
            s.close()
            continue
        socks.append(s)
    print("open %d" % len(socks), flush=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        r, _, _ = select.select([sys.stdin], [], [], 0.5)
        if r and not sys.stdin.read(1):
            break
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
