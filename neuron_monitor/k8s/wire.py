"""Protocol-buffers wire format, the little of it the pod-resources messages need.

Reads a serialized message (bytes) and yields ``(field_number, wire_type, value)``: an int for varint and
fixed-width fields, a ``memoryview`` for length-delimited ones (strings, bytes, sub-messages, packed arrays).
Unknown fields are therefore skipped for free, as protobuf requires. ``field_values`` gathers the fields a decoder
wants by number, ``text``/``last_text``/``message`` check their types. Malformed input raises ``WireError``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5

_MAX_VARINT_BYTES = 10


class WireError(ValueError):
    """The bytes are not a valid protobuf message."""


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Decode one base-128 varint at ``pos``; return (value, position after it)."""
    result = 0
    shift = 0
    end = min(len(buf), pos + _MAX_VARINT_BYTES)
    while pos < end:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise WireError("truncated or overlong varint")


def iter_fields(data: bytes | memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """Yield every field of one message in wire order."""
    buf = memoryview(data)
    pos = 0
    size = len(buf)
    while pos < size:
        key, pos = read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire_type == VARINT:
            value, pos = read_varint(buf, pos)
            yield number, wire_type, value
        elif wire_type == LENGTH_DELIMITED:
            length, pos = read_varint(buf, pos)
            if pos + length > size:
                raise WireError(f"field {number}: length {length} runs past the end of the message")
            yield number, wire_type, buf[pos : pos + length]
            pos += length
        elif wire_type == FIXED64:
            if pos + 8 > size:
                raise WireError(f"field {number}: truncated 64-bit value")
            yield number, wire_type, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire_type == FIXED32:
            if pos + 4 > size:
                raise WireError(f"field {number}: truncated 32-bit value")
            yield number, wire_type, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise WireError(f"field {number}: unsupported wire type {wire_type}")


def text(value: int | memoryview) -> str:
    """A string field's value (invalid UTF-8 is replaced, never fatal)."""
    if not isinstance(value, memoryview):
        raise WireError("expected a length-delimited string")
    return bytes(value).decode("utf-8", "replace")


def message(value: int | memoryview) -> memoryview:
    """A sub-message field's bytes."""
    if not isinstance(value, memoryview):
        raise WireError("expected a length-delimited sub-message")
    return value


def field_values(
    data: bytes | memoryview, numbers: Collection[int], limit: int | None = None
) -> dict[int, list[int | memoryview]]:
    """The values of the fields ``numbers`` of one message, by field number, each field's in wire order (a repeated
    field has them all; every other field is skipped). ``limit``: WireError as soon as more values than that are
    gathered (a message of millions of tiny entries is refused before they are all held)."""
    out: dict[int, list[int | memoryview]] = {n: [] for n in numbers}
    left = -1 if limit is None else limit
    for number, _wt, value in iter_fields(data):
        values = out.get(number)
        if values is not None:
            if left == 0:
                raise WireError(f"more than {limit} entries")
            left -= 1
            values.append(value)
    return out


def last_text(values: list[int | memoryview]) -> str:
    """A singular string field from its values: the last one wins, as protobuf parsers do ("" when absent); each is
    checked to be a string."""
    out = ""
    for value in values:
        out = text(value)
    return out
