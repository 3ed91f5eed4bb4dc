#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A dpp peer at the frame level, for tests that must break the protocol on
purpose (docs/protocol.md): writes frames by hand, prints what comes back.

    rawpeer.py HOST:PORT SCRIPT

SCRIPT, one step per word:
  hello[:ROLE]      HELLO{version 1, role, 32-byte nonce}; reads HELLO_REPLY
  auth-garbage      AUTH with 32 random bytes as mac
  status            STATUS{} (a request before AUTH when the server wants one)
  status-flood:N    N STATUS{} requests at once, none of the replies read
  idle:SECS         sends nothing for SECS seconds
  bigframe:N        a frame header announcing an N-byte HELLO message
  expect-error      reads one frame: must be ERROR; prints "error CODE MESSAGE"
  expect-closed     the server must close the connection within 5 s
  hold              keeps the connection open until stdin closes
Prints one line per step; exits 1 at the first step that does not hold."""
import os
import socket
import struct
import sys

TYPES = {"HELLO": 1, "HELLO_REPLY": 2, "ERROR": 3, "AUTH": 4, "STATUS": 12}
NAMES = {v: k for k, v in TYPES.items()}


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def frame(mtype, msg):
    return b"DPP1" + struct.pack("<HHII", mtype, 0, len(msg), 0) + msg


def read_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def read_frame(s):
    head = read_exact(s, 16)
    if head[:4] != b"DPP1":
        raise ValueError("bad magic %r" % head[:4])
    mtype, _flags, mlen, plen = struct.unpack("<HHII", head[4:])
    msg = read_exact(s, mlen)
    read_exact(s, plen)
    return mtype, msg


def parse(msg):
    """Field number -> value (ints for varints, bytes otherwise)."""
    out, i = {}, 0
    while i < len(msg):
        key, i = read_varint(msg, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            out[num], i = read_varint(msg, i)
        elif wire == 2:
            n, i = read_varint(msg, i)
            out[num], i = msg[i : i + n], i + n
        else:
            raise ValueError("wire type %d" % wire)
    return out


def read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    for step in sys.argv[2].split():
        name, _, arg = step.partition(":")
        if name == "hello":
            msg = field(1, 0, 1) + field(2, 2, (arg or "ctl").encode()) + field(3, 2, os.urandom(32))
            s.sendall(frame(TYPES["HELLO"], msg))
            t, m = read_frame(s)
            f = parse(m)
            print("reply %s challenge=%d proof=%d" % (NAMES.get(t, t), len(f.get(2, b"")), len(f.get(3, b""))))
        elif name == "auth-garbage":
            s.sendall(frame(TYPES["AUTH"], field(1, 2, os.urandom(32))))
            print("sent AUTH with a wrong mac")
        elif name == "status":
            s.sendall(frame(TYPES["STATUS"], b""))
            print("sent STATUS")
        elif name == "status-flood":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            data = frame(TYPES["STATUS"], b"") * int(arg)
            s.settimeout(30)
            s.sendall(data)
            print("sent %s STATUS requests" % arg)
        elif name == "bigframe":
            s.sendall(b"DPP1" + struct.pack("<HHII", TYPES["HELLO"], 0, int(arg), 0))
            print("sent a header for %s bytes" % arg)
        elif name == "idle":
            import time

            time.sleep(float(arg))
            print("idle %s s" % arg)
        elif name == "expect-error":
            t, m = read_frame(s)
            if t != TYPES["ERROR"]:
                print("expected ERROR, got %s" % NAMES.get(t, t))
                return 1
            f = parse(m)
            code = f.get(1, 0)
            code = (code >> 1) ^ -(code & 1)  # sint32 zigzag
            print("error %d %s" % (code, f.get(2, b"").decode()))
        elif name == "expect-closed":
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
                print("closed")
            except socket.timeout:
                print("still open after 5 s")
                return 1
            except ConnectionResetError:
                print("closed (reset)")
        elif name == "hold":
            print("holding", flush=True)
            sys.stdin.read()
        else:
            print("unknown step %s" % step)
            return 2
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
