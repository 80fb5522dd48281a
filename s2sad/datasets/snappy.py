"""A pure-Python Snappy decompressor (raw block format, no framing).

Parquet files written by Arrow compress their pages with Snappy. Reading the
one parquet file we need (GloVe's word list) should not require installing
pyarrow, and Snappy's block format is small enough to decode by hand:

    varint uncompressed_length, then elements until the input ends:
    tag & 3 == 0  literal: length - 1 in tag >> 2 (60..63: 1..4 more bytes)
    tag & 3 == 1  copy: length 4 + (tag >> 2 & 7), offset 11 bits
    tag & 3 == 2  copy: length 1 + (tag >> 2), offset 2 bytes little-endian
    tag & 3 == 3  copy: length 1 + (tag >> 2), offset 4 bytes little-endian

A copy repeats ``length`` bytes starting ``offset`` bytes back in the output;
it may overlap the bytes it produces (offset < length repeats a pattern).
"""

from __future__ import annotations

__all__ = ["decompress", "SnappyError"]


class SnappyError(ValueError):
    """The input is not a valid Snappy block."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a little-endian base-128 varint at ``pos``; return (value, end)."""
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise SnappyError("truncated or oversized varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _copy(out: bytearray, offset: int, length: int) -> None:
    """Append ``length`` bytes copied from ``offset`` back (overlap allowed)."""
    if offset == 0 or offset > len(out):
        raise SnappyError(f"copy offset {offset} outside the {len(out)} bytes so far")
    start = len(out) - offset
    if length <= offset:
        out += out[start : start + length]
    else:
        pattern = out[start:]
        out += (pattern * (length // offset + 1))[:length]


def decompress(buf: bytes) -> bytes:
    """Decompress one raw Snappy block."""
    expected, pos = _varint(buf, 0)
    out = bytearray()
    end = len(buf)
    while pos < end:
        tag = buf[pos]
        kind = tag & 3
        if kind == 0:
            length = tag >> 2
            pos += 1
            if length >= 60:
                extra = length - 59
                length = int.from_bytes(buf[pos : pos + extra], "little")
                pos += extra
            length += 1
            if pos + length > end:
                raise SnappyError("literal runs past the end of the input")
            out += buf[pos : pos + length]
            pos += length
            continue
        if kind == 1:
            length = 4 + ((tag >> 2) & 7)
            offset = ((tag >> 5) << 8) | buf[pos + 1] if pos + 1 < end else 0
            pos += 2
        else:
            width = 2 if kind == 2 else 4
            length = 1 + (tag >> 2)
            offset = int.from_bytes(buf[pos + 1 : pos + 1 + width], "little")
            pos += 1 + width
        if pos > end:
            raise SnappyError("copy element runs past the end of the input")
        _copy(out, offset, length)
    if len(out) != expected:
        raise SnappyError(f"decoded {len(out)} bytes, header says {expected}")
    return bytes(out)
