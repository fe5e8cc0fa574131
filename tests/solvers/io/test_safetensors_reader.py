"""read_safetensors (numpy alone) against the safetensors package, and hostile files."""

from __future__ import annotations

import json
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from solvers import InvalidInputError
from solvers.io.safetensors_reader import DTYPES, numpy_dtype, read_safetensors
from tests.hf_models import SHIPPED


def test_every_dtype_reads_as_the_library_wrote_it(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {}
    for name in DTYPES:
        dtype = numpy_dtype(name)
        values = rng.standard_normal((3, 4)) * 50
        if dtype == np.dtype(ml_dtypes.bfloat16) or dtype.kind == "f":
            arrays[name] = values.astype(dtype)
        elif dtype.kind == "b":
            arrays[name] = values > 0
        else:
            arrays[name] = np.abs(values).astype(dtype)
    arrays["scalar"] = np.array(2.5)
    arrays["empty"] = np.zeros((0, 3))
    path = tmp_path / "all.safetensors"
    save_file(arrays, str(path), metadata={"format": "x", "note": "é"})
    got, metadata = read_safetensors(path)
    assert metadata == {"format": "x", "note": "é"}
    assert set(got) == set(arrays)
    for name, array in arrays.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        assert got[name].tobytes() == array.tobytes(), name


def _file(path, header: object, data: bytes = b"", size: int | None = None) -> None:
    text = json.dumps(header).encode()
    length = len(text) if size is None else size
    path.write_bytes(length.to_bytes(8, "little") + text + data)


@pytest.mark.parametrize(
    ("header", "data", "size", "why"),
    [
        ({}, b"", 10**9, "a header of 1000000000 bytes"),
        ({"w": {"dtype": "F64", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8, None,
         "lies outside the data"),
        ({"w": {"dtype": "F64", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None,
         "has 8 bytes for shape"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, None,
         "overlap"),
        ({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8, None,
         "dtype 'C64'"),
        ({"w": {"dtype": "F64", "shape": [True], "data_offsets": [0, 8]}}, b"\0" * 8, None,
         "malformed"),
        ({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8], "x": 1}}, b"\0" * 8, None,
         "is not {dtype"),
        ({"__metadata__": {"a": 1}}, b"", None, "not an object of strings"),
        ([1, 2], b"", None, "not a JSON object"),
    ],
)  # fmt: skip
def test_hostile_files_are_refused_in_one_line(tmp_path, header, data, size, why):
    path = tmp_path / "bad.safetensors"
    _file(path, header, data, size)
    with pytest.raises(InvalidInputError, match="not a safetensors file") as refused:
        read_safetensors(path)
    assert why in str(refused.value) and str(path) in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("kept", [0.3, 0.9, 0.999])
def test_a_truncated_file_is_called_truncated(tmp_path, kept):
    """A download cut short is 'truncated', not 'not a safetensors file' (issue 43, item 9)."""
    header = {"w": {"dtype": "F64", "shape": [64], "data_offsets": [0, 512]}}
    whole = tmp_path / "whole.safetensors"
    _file(whole, header, b"\0" * 512)
    raw = whole.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(raw[: max(9, int(kept * len(raw)))])
    with pytest.raises(InvalidInputError, match="truncated") as refused:
        read_safetensors(cut)
    assert str(cut) in str(refused.value) and "not a safetensors" not in str(refused.value)


def test_short_and_non_json_files(tmp_path):
    short = tmp_path / "short"
    short.write_bytes(b"\x01\x02")
    with pytest.raises(InvalidInputError, match="shorter than its 8-byte header"):
        read_safetensors(short)
    garbage = tmp_path / "garbage"
    garbage.write_bytes((4).to_bytes(8, "little") + b"\xff\xfe{}")
    with pytest.raises(InvalidInputError, match="not UTF-8 JSON"):
        read_safetensors(garbage)


def test_the_core_install_reads_the_shipped_networks_without_safetensors():
    """With the safetensors package (and torch, transformers) made unimportable, the
    shipped networks still load: the core install runs the built-in study."""
    script = (
        "import sys\n"
        "for name in ('safetensors', 'torch', 'transformers'):\n"
        "    sys.modules[name] = None\n"
        "from solvers import load_model\n"
        f"print(len(load_model({str(SHIPPED / 'vit-digits')!r}).layers),"
        f" len(load_model({str(SHIPPED / 'max-digit.safetensors')!r}).layers),"
        f" len(load_model({str(SHIPPED / 'char-sums-llama')!r}).layers))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["3", "2", "2"]
