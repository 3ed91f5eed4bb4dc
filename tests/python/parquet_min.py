# SPDX-License-Identifier: Apache-2.0
"""A minimal Parquet writer for tests, written from the format's spec
(parquet-format's parquet.thrift; ../shared/REFERENCE.md "Parquet"): flat
schemas of INT64 and UTF-8 BYTE_ARRAY columns, required or optional,
uncompressed v1 data pages with PLAIN values and RLE definition levels, one
page a column chunk, any number of row groups. It shares no code with dpp's
reader or with dpp-gen's writer, so a test that reads its files with dpp
checks dpp against the format, not against itself."""
import struct

# Thrift compact protocol types
T_I32, T_I64, T_BINARY, T_LIST, T_STRUCT = 5, 6, 8, 9, 12
INT64, BYTE_ARRAY = 2, 6  # parquet Type
REQUIRED, OPTIONAL = 0, 1  # FieldRepetitionType
UTF8 = 0  # ConvertedType


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(n):
    return (n << 1) ^ (n >> 63)


class _Struct:
    """A Thrift compact struct being written: fields in increasing id order."""

    def __init__(self):
        self.out = bytearray()
        self.last = 0

    def _head(self, fid, ftype):
        delta = fid - self.last
        if 0 < delta <= 15:
            self.out.append((delta << 4) | ftype)
        else:
            self.out.append(ftype)
            self.out += _varint(_zigzag(fid))
        self.last = fid

    def i32(self, fid, v):
        self._head(fid, T_I32)
        self.out += _varint(_zigzag(v))
        return self

    def i64(self, fid, v):
        self._head(fid, T_I64)
        self.out += _varint(_zigzag(v))
        return self

    def binary(self, fid, b):
        if isinstance(b, str):
            b = b.encode("utf-8")
        self._head(fid, T_BINARY)
        self.out += _varint(len(b)) + b
        return self

    def struct(self, fid, s):
        self._head(fid, T_STRUCT)
        self.out += s.done()
        return self

    def list(self, fid, elem_type, items):
        self._head(fid, T_LIST)
        n = len(items)
        self.out += bytes([(n << 4) | elem_type]) if n < 15 else bytes([0xF0 | elem_type]) + _varint(n)
        for it in items:
            if elem_type == T_STRUCT:
                self.out += it.done()
            elif elem_type == T_I32:
                self.out += _varint(_zigzag(it))
            elif elem_type == T_BINARY:
                b = it.encode("utf-8") if isinstance(it, str) else it
                self.out += _varint(len(b)) + b
        return self

    def done(self):
        return bytes(self.out) + b"\x00"


def _levels(defs):
    """Definition levels (0 or 1) as the RLE/bit-packed hybrid with bit width
    1, in RLE runs, behind their 4-byte length."""
    body = bytearray()
    i = 0
    while i < len(defs):
        j = i
        while j < len(defs) and defs[j] == defs[i]:
            j += 1
        body += _varint((j - i) << 1) + bytes([defs[i]])
        i = j
    return struct.pack("<I", len(body)) + bytes(body)


def _plain(kind, values):
    out = bytearray()
    for v in values:
        if kind == INT64:
            out += struct.pack("<q", v)
        else:
            b = v.encode("utf-8") if isinstance(v, str) else v
            out += struct.pack("<I", len(b)) + b
    return bytes(out)


def write(path, columns, rows, row_group_rows):
    """Writes rows (tuples in column order; None is null in an optional
    column) as Parquet. columns: [(name, INT64 or BYTE_ARRAY, REQUIRED or
    OPTIONAL)]. A row group every row_group_rows rows."""
    out = bytearray(b"PAR1")
    groups = []
    for g0 in range(0, len(rows), row_group_rows):
        part = rows[g0:g0 + row_group_rows]
        chunks, total = [], 0
        for c, (name, kind, rep) in enumerate(columns):
            vals = [r[c] for r in part]
            data = b""
            if rep == OPTIONAL:
                data += _levels([0 if v is None else 1 for v in vals])
            elif any(v is None for v in vals):
                raise ValueError("a null in required column %s" % name)
            data += _plain(kind, [v for v in vals if v is not None])
            dph = _Struct().i32(1, len(vals)).i32(2, 0).i32(3, 3).i32(4, 3)
            ph = _Struct().i32(1, 0).i32(2, len(data)).i32(3, len(data)).struct(5, dph).done()
            offset = len(out)
            out += ph + data
            size = len(ph) + len(data)
            total += size
            meta = (_Struct().i32(1, kind).list(2, T_I32, [0, 3]).list(3, T_BINARY, [name])
                    .i32(4, 0).i64(5, len(vals)).i64(6, size).i64(7, size).i64(9, offset))
            chunks.append(_Struct().i64(2, offset).struct(3, meta))
        groups.append(_Struct().list(1, T_STRUCT, chunks).i64(2, total).i64(3, len(part)))
    schema = [_Struct().binary(4, "schema").i32(5, len(columns))]
    for name, kind, rep in columns:
        el = _Struct().i32(1, kind).i32(3, rep).binary(4, name)
        if kind == BYTE_ARRAY:
            el.i32(6, UTF8)
        schema.append(el)
    footer = (_Struct().i32(1, 1).list(2, T_STRUCT, schema).i64(3, len(rows))
              .list(4, T_STRUCT, groups).binary(6, "dpp tests/python/parquet_min.py").done())
    out += footer + struct.pack("<I", len(footer)) + b"PAR1"
    with open(path, "wb") as fh:
        fh.write(out)
