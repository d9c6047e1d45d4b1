"""TensorBoard event files ("events.out.tfevents.*") read for their scalars, Qt-free and without TensorFlow or the
tensorboard package.

A file is a sequence of records, each

    uint64 length (little-endian) · uint32 masked CRC-32C of those 8 bytes · length bytes of data · uint32 masked
    CRC-32C of the data

and each record's data is an `Event` protocol buffer (tensorboard/compat/proto/event.proto): a wall time, a step,
and a `Summary` of tagged values. A scalar is either a value's `simple_value` (what torch's SummaryWriter and TF1
write) or a one-element tensor of a tag whose metadata names the "scalars" plugin or the scalar data class (what
TF2's `tf.summary.scalar` and `add_scalar(new_style=True)` write); TF2 writes a tag's metadata only with its first
value, so the plugin of each tag is remembered (`TagKinds`) across a run's files and polls. An Event may instead
say that a writer started a session at its step (a `SessionLog` START, what `SummaryWriter(purge_step=...)` writes
when a run resumes): `decode_event` says so, and the reader drops what was written before from that step on.

Why not the tensorboard package's reader: without TensorFlow its record reader checks each CRC in pure Python, a
byte at a time, and its `EventAccumulator` keeps 10,000 points per tag unless told otherwise
(benchmarks/runs_read_speed.py times both). Here the CRCs of a file's records are computed together with numpy
(`crc32c_many`), and the few fields a scalar needs are decoded by hand (`decode_event`).

`parse_records` takes whole records from the front of a buffer and leaves a record still being written for the
next read; a record whose length or data fails its checksum is `TfeventsError` naming the file and the byte, so
a file that is not what its name claims is said at once, never waited on.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

__all__ = ["EventScalars", "TagKinds", "TfeventsError", "crc32c_many", "decode_event", "masked_crc32c",
           "parse_records"]

LARGEST_RECORD = 256 << 20  # bytes; a real scalar record is ~50, a graph or an image some MB


class TfeventsError(ValueError):
    """A file that is not a readable TensorBoard event file (a checksum that fails, a record that cannot be an
    Event); the message names the file and where."""


# ---- CRC-32C (Castagnoli), as the record format checksums ------------------------------------------------------
def _crc32c_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> np.uint32(1)) ^ np.uint32(0x82F63B78), table >> np.uint32(1))
    return table.astype(np.uint32)


_TABLE = _crc32c_table()
_TABLE_LIST = _TABLE.tolist()
_MASK_DELTA = 0xA282EAD8
_VECTORISED_UP_TO = 1024  # bytes: longer records (rare, and checked only when they hold scalars) go one by one


def _mask(crc: np.ndarray | int):
    """The record format's masking: rotate right by 15 bits and add a constant (mod 2 ** 32)."""
    if isinstance(crc, int):
        return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF
    crc = crc.astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _crc32c_one(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE_LIST
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C of one record's length or data, as a tfevents file stores it."""
    return _mask(_crc32c_one(data))


def crc32c_many(buffer: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The masked CRC-32C of each slice buffer[start : start + length], as uint32.

    Slices of one length are checksummed together, a byte column at a time (a file of scalars holds a few
    lengths, so this is a few dozen numpy steps per length instead of a Python step per byte)."""
    result = np.zeros(len(starts), dtype=np.uint32)
    if len(starts) == 0:
        return result
    data = np.frombuffer(buffer, dtype=np.uint8)
    for length in np.unique(lengths):
        chosen = np.flatnonzero(lengths == length)
        if length > _VECTORISED_UP_TO:
            for index in chosen:
                start = int(starts[index])
                result[index] = _mask(_crc32c_one(buffer[start : start + int(length)]))
            continue
        columns = data[starts[chosen, None] + np.arange(int(length))[None, :]]  # (records, length)
        crc = np.full(len(chosen), 0xFFFFFFFF, dtype=np.uint32)
        for column in columns.T:
            crc = _TABLE[(crc ^ column) & 0xFF] ^ (crc >> np.uint32(8))
        result[chosen] = _mask(crc ^ np.uint32(0xFFFFFFFF))
    return result


# ---- records -------------------------------------------------------------------------------------------------
@dataclass
class Records:
    """Whole records found at the front of a buffer: where each one's data starts and how long it is."""

    starts: np.ndarray  # int64, offsets of the data in the buffer
    lengths: np.ndarray  # int64
    consumed: int  # bytes of whole records: the next record (still being written, or none) starts here


def parse_records(buffer: bytes, *, file_label: str, base_offset: int = 0) -> Records:
    """The whole records at the front of `buffer` (the bytes of a file from offset `base_offset`), their length
    checksums verified; a record not yet whole ends the list. TfeventsError when a length fails its checksum
    (this is not an event file, or it is damaged) or claims more than LARGEST_RECORD bytes."""
    starts, lengths = [], []
    position, size = 0, len(buffer)
    unpack = struct.unpack_from
    while position + 12 <= size:
        (length,) = unpack("<Q", buffer, position)
        if length > LARGEST_RECORD:
            # Checked again below with its checksum: what is not a length at all is said as damage.
            if _mask(_crc32c_one(buffer[position : position + 8])) != unpack("<I", buffer, position + 8)[0]:
                raise _bad_length(file_label, base_offset + position)
            raise TfeventsError(f"{file_label}: the record at byte {base_offset + position:,} says it holds "
                                f"{length:,} bytes; a TensorBoard scalar record holds tens, so this file is damaged "
                                "or is not what its name says")
        if position + 12 + length + 4 > size:
            break  # still being written: its end arrives with a later read
        starts.append(position)
        lengths.append(length)
        position += 12 + length + 4
    header_starts = np.asarray(starts, dtype=np.int64)
    length_sums = crc32c_many(buffer, header_starts, np.full(len(starts), 8, dtype=np.int64))
    stored = np.array([unpack("<I", buffer, start + 8)[0] for start in starts], dtype=np.uint32)
    bad = np.flatnonzero(length_sums != stored)
    if bad.size:
        raise _bad_length(file_label, base_offset + int(header_starts[bad[0]]))
    return Records(header_starts + 12, np.asarray(lengths, dtype=np.int64), position)


def _bad_length(file_label: str, offset: int) -> TfeventsError:
    return TfeventsError(f"{file_label} is not a TensorBoard event file, or is damaged: the record at byte "
                         f"{offset:,} fails its length checksum")


def verify_data(buffer: bytes, records: Records, chosen: np.ndarray, *, file_label: str, base_offset: int) -> None:
    """TfeventsError when the data of a chosen record fails its checksum."""
    if chosen.size == 0:
        return
    starts, lengths = records.starts[chosen], records.lengths[chosen]
    sums = crc32c_many(buffer, starts, lengths)
    stored = np.array([struct.unpack_from("<I", buffer, int(start + length))[0]
                       for start, length in zip(starts, lengths, strict=True)], dtype=np.uint32)
    bad = np.flatnonzero(sums != stored)
    if bad.size:
        offset = base_offset + int(starts[bad[0]]) - 12
        raise TfeventsError(f"{file_label} is damaged: the data of the record at byte {offset:,} fails its checksum")


# ---- protocol buffers: the few fields a scalar needs ---------------------------------------------------------------
class _NotAnEvent(Exception):
    pass


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise _NotAnEvent("a varint longer than 10 bytes")


def _fields(data: bytes, start: int, end: int):
    """(field number, wire type, value) of a message's fields; a length-delimited value is its (start, end)."""
    position = start
    while position < end:
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position)
        elif wire == 1:
            value, position = (position, position + 8), position + 8
        elif wire == 2:
            length, position = _varint(data, position)
            value, position = (position, position + length), position + length
        elif wire == 5:
            value, position = (position, position + 4), position + 4
        else:
            raise _NotAnEvent(f"wire type {wire}")
        if position > end:
            raise _NotAnEvent("a field runs past its message")
        yield number, wire, value


SCALARS_PLUGIN = "scalars"
_DATA_CLASS_SCALAR = 1
# TensorProto's dtype -> (its repeated field, struct format of tensor_content's one element)
_FLOAT, _DOUBLE, _INT32, _INT64, _BOOL, _BFLOAT16, _HALF = 1, 2, 3, 9, 10, 14, 19


@dataclass
class TagKinds:
    """Which tags of a run are scalars, as their metadata said (TF2 writes it with a tag's first value only)."""

    scalar: dict[str, bool] = field(default_factory=dict)


@dataclass
class EventScalars:
    wall_time: float
    step: int
    values: list[tuple[str, float]]  # (tag, value)
    # A SessionLog START: the writer (re)started at `step`, and what was written before at this step or later is
    # out of date (torch's SummaryWriter(purge_step=...), a resumed run): TensorBoard's EventAccumulator drops it.
    session_start: bool = False


_SESSION_START = 1  # SessionLog.SessionStatus.START


def decode_event(data: bytes, start: int, end: int, kinds: TagKinds) -> EventScalars | None:
    """The scalars of the Event in data[start:end], or that it starts a session; None when it holds neither.
    _NotAnEvent when it cannot be one."""
    wall_time, step, summaries, session_start = 0.0, 0, [], False
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == 1:
            (wall_time,) = struct.unpack_from("<d", data, value[0])
        elif number == 2 and wire == 0:
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 5 and wire == 2:
            summaries.append(value)
        elif number == 7 and wire == 2:  # session_log (6 is the deprecated log_message)
            for inner, inner_wire, status in _fields(data, *value):
                if inner == 1 and inner_wire == 0 and status == _SESSION_START:
                    session_start = True
    if not summaries:
        return EventScalars(wall_time, step, [], session_start=True) if session_start else None
    values = []
    for summary_start, summary_end in summaries:
        for number, wire, value in _fields(data, summary_start, summary_end):
            if number == 1 and wire == 2:
                scalar = _summary_value(data, value[0], value[1], kinds)
                if scalar is not None:
                    values.append(scalar)
    return EventScalars(wall_time, step, values, session_start) if values or session_start else None


def _summary_value(data: bytes, start: int, end: int, kinds: TagKinds) -> tuple[str, float] | None:
    tag, simple, tensor, metadata = "", None, None, None
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == 2:
            tag = data[value[0] : value[1]].decode("utf-8", errors="replace")
        elif number == 2 and wire == 5:
            (simple,) = struct.unpack_from("<f", data, value[0])
        elif number == 8 and wire == 2:
            tensor = value
        elif number == 9 and wire == 2:
            metadata = value
    if metadata is not None:
        kinds.scalar[tag] = _names_scalars(data, *metadata)
    if simple is not None:
        return tag, float(simple)
    if tensor is not None and kinds.scalar.get(tag, False):
        number = _tensor_scalar(data, *tensor)
        if number is not None:
            return tag, number
    return None


def _names_scalars(data: bytes, start: int, end: int) -> bool:
    """Whether a SummaryMetadata names the scalars plugin or the scalar data class."""
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == 2:  # plugin_data
            for inner, inner_wire, name in _fields(data, *value):
                if inner == 1 and inner_wire == 2 and data[name[0] : name[1]] == SCALARS_PLUGIN.encode():
                    return True
        elif number == 4 and wire == 0 and value == _DATA_CLASS_SCALAR:
            return True
    return False


def _tensor_scalar(data: bytes, start: int, end: int) -> float | None:
    """The one value of a TensorProto that holds one element (of a number type); None otherwise."""
    dtype, content, elements, repeated = 0, None, 1, []
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == 0:
            dtype = value
        elif number == 2 and wire == 2:
            for dim_field, dim_wire, dim in _fields(data, *value):
                if dim_field == 2 and dim_wire == 2:
                    for size_field, size_wire, size in _fields(data, *dim):
                        if size_field == 1 and size_wire == 0:
                            elements *= size
        elif number == 4 and wire == 2:
            content = data[value[0] : value[1]]
        elif number in (5, 6, 7, 10, 11, 13):
            repeated.append((number, wire, value))
    if elements != 1:
        return None
    if content:
        formats = {_FLOAT: "<f", _DOUBLE: "<d", _INT32: "<i", _INT64: "<q", _BOOL: "<?", _HALF: "<e"}
        if dtype == _BFLOAT16 and len(content) == 2:  # the high half of a float32
            return float(struct.unpack("<f", b"\0\0" + content)[0])
        layout = formats.get(dtype)
        if layout is None or struct.calcsize(layout) != len(content):
            return None
        return float(struct.unpack(layout, content)[0])
    for number, wire, value in repeated:
        if number == 5 and dtype == _FLOAT:  # float_val: packed (wire 2) or not (wire 5)
            return float(struct.unpack_from("<f", data, value[0])[0])
        if number == 6 and dtype == _DOUBLE:
            return float(struct.unpack_from("<d", data, value[0])[0])
        if number in (7, 10, 11, 13):
            if wire == 2:
                raw, _ = _varint(data, value[0])
            else:
                raw = value
            if number == 13:  # half_val holds the 16 bits of a float16 or a bfloat16
                bits = raw & 0xFFFF
                if dtype == _BFLOAT16:
                    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
                return float(struct.unpack("<e", struct.pack("<H", bits))[0])
            if number == 11:
                return float(bool(raw))
            return float(raw - (1 << 64) if raw >= 1 << 63 else raw)
    return None
