"""A minimal Parquet reader: one flat string (BYTE_ARRAY) column, nothing more.

GloVe's word list in the pinned wheel is a Parquet file. Rather than making
every user install pyarrow (~176 MB) for one column of 400,000 words, this
module reads exactly what such a file uses:

- the footer: Thrift compact protocol, decoded generically into
  ``{field id: value}`` dicts (field ids are those of parquet.thrift);
- column chunks of a flat, required or optional BYTE_ARRAY column;
- dictionary pages (PLAIN) and data pages v1 and v2 holding either
  dictionary indices (RLE/bit-packed hybrid) or PLAIN values (writers fall
  back to PLAIN once the dictionary grows too big);
- definition levels for nulls (read as None);
- codecs UNCOMPRESSED, SNAPPY (see :mod:`.snappy`) and GZIP.

Anything else raises :class:`DataFormatError` rather than guessing.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Any

import numpy as np

from s2sad.datasets import snappy
from s2sad.datasets.errors import DataFormatError

__all__ = ["read_string_column"]

MAGIC = b"PAR1"
BYTE_ARRAY, OPTIONAL, REPEATED = 6, 1, 2
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3
PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY = 0, 2, 8


# --- Thrift compact protocol ----------------------------------------------------


class ThriftReader:
    """Decodes Thrift compact-protocol structs into ``{field id: value}`` dicts."""

    def __init__(self, buf: bytes, pos: int = 0):
        self.buf, self.pos = buf, pos

    def byte(self) -> int:
        if self.pos >= len(self.buf):
            raise DataFormatError("parquet: truncated Thrift data")
        self.pos += 1
        return self.buf[self.pos - 1]

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def struct(self) -> dict[int, Any]:
        fields: dict[int, Any] = {}
        last = 0
        while (head := self.byte()) != 0:
            delta, kind = head >> 4, head & 0x0F
            last = last + delta if delta else self.zigzag()
            fields[last] = kind == 1 if kind in (1, 2) else self.value(kind)
        return fields

    def value(self, kind: int) -> Any:
        if kind in (1, 2):  # a bool inside a list or map: one byte of its own
            return self.byte() == 1
        if kind == 3:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            self.pos += 8
            return struct.unpack("<d", self.buf[self.pos - 8 : self.pos])[0]
        if kind == 8:
            size = self.varint()
            self.pos += size
            return self.buf[self.pos - size : self.pos]
        if kind in (9, 10):
            return self.list()
        if kind == 11:
            return self.map()
        if kind == 12:
            return self.struct()
        raise DataFormatError(f"parquet: unknown Thrift type {kind}")

    def list(self) -> list[Any]:
        head = self.byte()
        size = head >> 4 if head >> 4 != 15 else self.varint()
        return [self.value(head & 0x0F) for _ in range(size)]

    def map(self) -> dict[Any, Any]:
        size = self.varint()
        if size == 0:
            return {}
        kinds = self.byte()
        return {self.value(kinds >> 4): self.value(kinds & 0x0F) for _ in range(size)}


# --- encodings ------------------------------------------------------------------


def rle_hybrid(buf: bytes, bit_width: int, count: int) -> np.ndarray:
    """Decode ``count`` values of Parquet's RLE / bit-packed hybrid encoding."""
    reader = ThriftReader(buf)  # only for its varint
    parts, total = [], 0
    byte_width = (bit_width + 7) // 8
    while total < count:
        header = reader.varint()
        if header & 1:  # bit-packed: (header >> 1) groups of 8 values
            nbytes = (header >> 1) * bit_width
            part = _unpack_bits(buf, reader.pos, nbytes, bit_width, 8 * (header >> 1))
            reader.pos += nbytes
        else:  # a run of one repeated value
            value = int.from_bytes(buf[reader.pos : reader.pos + byte_width], "little")
            part = np.full(header >> 1, value, dtype=np.int64)
            reader.pos += byte_width
        parts.append(part)
        total += len(part)
    return np.concatenate(parts)[:count] if parts else np.zeros(0, np.int64)


def _unpack_bits(buf: bytes, pos: int, nbytes: int, width: int, n: int) -> np.ndarray:
    """``n`` little-endian ``width``-bit integers packed into ``buf[pos:]``."""
    if width == 0:
        return np.zeros(n, dtype=np.int64)
    chunk = np.frombuffer(buf, np.uint8, nbytes, pos)
    bits = np.unpackbits(chunk, bitorder="little").reshape(n, width)
    return bits.astype(np.int64) @ (1 << np.arange(width, dtype=np.int64))


def plain_byte_arrays(buf: bytes, count: int) -> list[bytes]:
    """Decode ``count`` PLAIN byte arrays (each a 4-byte length, then bytes)."""
    out, pos = [], 0
    for _ in range(count):
        (size,) = struct.unpack_from("<I", buf, pos)
        out.append(buf[pos + 4 : pos + 4 + size])
        pos += 4 + size
    if pos > len(buf):
        raise DataFormatError("parquet: PLAIN values run past the page end")
    return out


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        try:
            return snappy.decompress(data)
        except snappy.SnappyError as exc:
            raise DataFormatError(f"parquet: bad Snappy page: {exc}") from exc
    if codec == 2:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataFormatError(f"parquet: bad GZIP page: {exc}") from exc
    raise DataFormatError(f"parquet: unsupported compression codec {codec}")


# --- pages and column chunks ----------------------------------------------------


def _values(
    body: bytes, encoding: int, count: int, dictionary: list[bytes] | None
) -> list[bytes]:
    """``count`` non-null values of a data page body after its levels."""
    if encoding == PLAIN:
        return plain_byte_arrays(body, count)
    if encoding in (PLAIN_DICTIONARY, RLE_DICTIONARY):
        if dictionary is None:
            raise DataFormatError("parquet: dictionary page missing")
        indices = rle_hybrid(body[1:], body[0], count) if count else []
        return [dictionary[i] for i in indices]
    raise DataFormatError(f"parquet: unsupported value encoding {encoding}")


def _with_nulls(defined: np.ndarray | None, values: list[bytes]) -> list[Any]:
    """Spread non-null ``values`` over the slots whose definition level is 1."""
    if defined is None:
        return values
    it = iter(values)
    return [next(it) if d else None for d in defined]


def _data_page_v1(
    page: bytes, header: dict, optional: bool, dictionary: list | None
) -> list[Any]:
    count, encoding = header[1], header[2]
    defined, pos = None, 0
    if optional:
        (size,) = struct.unpack_from("<I", page, 0)
        defined = rle_hybrid(page[4 : 4 + size], 1, count)
        pos = 4 + size
    nonnull = count if defined is None else int(defined.sum())
    return _with_nulls(defined, _values(page[pos:], encoding, nonnull, dictionary))


def _data_page_v2(
    raw: bytes, header: dict, codec: int, optional: bool, dictionary: list | None
) -> list[Any]:
    count, nulls, encoding = header[1], header[2], header[4]
    def_len, rep_len = header[5], header[6]
    levels_end = rep_len + def_len
    body = raw[levels_end:]
    if header.get(7, True):
        body = _decompress(codec, body)
    defined = rle_hybrid(raw[rep_len:levels_end], 1, count) if optional else None
    values = _values(body, encoding, count - nulls, dictionary)
    return _with_nulls(defined, values)


def _read_chunk(data: bytes, meta: dict, optional: bool) -> list[Any]:
    """All values of one column chunk, page by page."""
    codec, num_values = meta[4], meta[5]
    pos = min(meta.get(11, meta[9]), meta[9])
    dictionary, out = None, []
    while len(out) < num_values:
        reader = ThriftReader(data, pos)
        header = reader.struct()
        start, size = reader.pos, header[3]
        raw, pos = data[start : start + size], start + size
        if header[1] == DICTIONARY_PAGE:
            dictionary = plain_byte_arrays(_decompress(codec, raw), header[7][1])
        elif header[1] == DATA_PAGE:
            page = _decompress(codec, raw)
            out += _data_page_v1(page, header[5], optional, dictionary)
        elif header[1] == DATA_PAGE_V2:
            out += _data_page_v2(raw, header[8], codec, optional, dictionary)
    return out


def _leaf_column(schema: list[dict], name: str | None) -> tuple[int, bool]:
    """Index among the leaves of column ``name`` (or the only one) and whether
    it is optional; refuse anything but a flat BYTE_ARRAY column."""
    if any(5 in el for el in schema[1:]):
        raise DataFormatError("parquet: nested columns are not supported")
    leaves = schema[1:]
    names = [el[4].decode("utf-8") for el in leaves]
    if name is None and len(leaves) == 1:
        name = names[0]
    if name not in names:
        raise DataFormatError(f"parquet: no column {name!r} among {names}")
    leaf = leaves[names.index(name)]
    if leaf.get(1) != BYTE_ARRAY or leaf.get(3) == REPEATED:
        raise DataFormatError(f"parquet: column {name!r} is not a flat byte array")
    return names.index(name), leaf.get(3) == OPTIONAL


def read_string_column(data: bytes, name: str | None = None) -> list[str | None]:
    """The values of string column ``name`` of the Parquet file ``data``.

    ``name`` may be omitted for a file with one column. Nulls come back as None.
    """
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise DataFormatError("not a Parquet file (no PAR1 magic)")
    (footer_len,) = struct.unpack("<I", data[-8:-4])
    try:
        meta = ThriftReader(data, len(data) - 8 - footer_len).struct()
        column, optional = _leaf_column(meta[2], name)
        values = []
        for row_group in meta.get(4, []):
            chunk = row_group[1][column][3]
            values += _read_chunk(data, chunk, optional)
    except (KeyError, IndexError, TypeError, struct.error, ValueError) as exc:
        raise DataFormatError(f"parquet: malformed file ({exc!r})") from exc
    return [None if v is None else v.decode("utf-8") for v in values]
