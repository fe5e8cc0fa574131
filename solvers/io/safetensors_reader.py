"""Reading a safetensors file with numpy alone, treating it as hostile (docs/networks.md
section 2), so that the core install reads the shipped networks without the safetensors
package (writing, in `save_model`, uses that package).

The format: 8 bytes, a little-endian unsigned integer N; N bytes of a UTF-8 JSON object
mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]} (byte
offsets into the data that follows the header) and, optionally, "__metadata__" to an
object of strings; then the data, little-endian, C order. Every number is checked
before it is used: N against the file, each range against the data, each range's length
against its dtype and shape, the ranges against each other. Nothing in the file is ever
executed or unpickled.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path

import numpy as np

from solvers.errors import InvalidInputError

MAX_HEADER = 100 << 20
"""The largest header accepted (as the reference implementation does)."""
DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bfloat16",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
    "BOOL": "?",
}  # fmt: skip
"""safetensors' dtype codes and numpy's names for them (bfloat16: ml_dtypes')."""


def numpy_dtype(code: str) -> np.dtype:
    """The numpy dtype of a safetensors dtype code in DTYPES. ml_dtypes, whose import is
    slow, is imported only for BF16 (tide's worker processes start faster)."""
    if DTYPES[code] == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DTYPES[code])


def read_safetensors(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The tensors (as numpy arrays, by name) and the metadata of a safetensors file.
    Anything else, or a file that breaks the format, is an InvalidInputError naming it."""
    path = Path(path)

    def refuse(why: str) -> InvalidInputError:
        return InvalidInputError(
            f"{path}: not a safetensors file (tide reads weights only from safetensors and "
            f"never unpickles): {why}"
        )

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) < 8:
        raise refuse("shorter than its 8-byte header length")
    size = int.from_bytes(raw[:8], "little")
    if size > MAX_HEADER:
        raise refuse(f"a header of {size} bytes (at most {MAX_HEADER})")
    if size > len(raw) - 8:
        raise InvalidInputError(
            f"{path}: truncated: its header says {size} bytes, the file has {len(raw) - 8} "
            "after the header length"
        )
    try:
        header = json.loads(raw[8 : 8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise refuse("the header is not UTF-8 JSON") from None
    if not isinstance(header, dict):
        raise refuse("the header is not a JSON object")
    metadata = header.pop("__metadata__", {}) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise refuse("__metadata__ is not an object of strings")
    data = memoryview(raw)[8 + size :]
    arrays, ranges = {}, []
    for name, entry in header.items():
        dtype, shape, (begin, end) = _entry(name, entry, refuse)
        if 0 <= begin <= end and end > len(data):
            raise InvalidInputError(
                f"{path}: truncated: tensor {name!r} ends at byte {end} of the data, which has "
                f"{len(data)}"
            )
        if not 0 <= begin <= end:
            raise refuse(f"tensor {name!r} lies outside the data ({begin}, {end})")
        if end - begin != math.prod(shape) * dtype.itemsize:
            raise refuse(f"tensor {name!r} has {end - begin} bytes for shape {shape}")
        ranges.append((begin, end, name))
        arrays[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape).copy()
    ranges.sort()
    for (_, end, first), (begin, _, second) in pairwise(ranges):
        if begin < end:
            raise refuse(f"tensors {first!r} and {second!r} overlap")
    return arrays, metadata


def _entry(name: str, entry: object, refuse) -> tuple[np.dtype, tuple[int, ...], list[int]]:
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise refuse(f"tensor {name!r} is not {{dtype, shape, data_offsets}}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPES:
        raise refuse(f"tensor {name!r} has dtype {dtype!r}")
    if not (
        isinstance(shape, list)
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape + offsets)
    ):
        raise refuse(f"tensor {name!r} has a malformed shape or data_offsets")
    return numpy_dtype(dtype), tuple(shape), offsets
