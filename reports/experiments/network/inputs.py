"""The files of a "network-limit" study (reports.experiments.network.experiment): its keys, and
the model and arrays they name, read and checked against the model and each other when the
study is read; a case's parameters with the files' digests.

Arrays are read with numpy alone and never unpickled (allow_pickle=False refuses object
arrays); a model is read by solvers.load_model, which never unpickles either.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from reports.schema import Field, array_of, integer, number, one_of, precision, reject, text
from solvers import load_model
from solvers.enclosure.scope import check_scope
from solvers.errors import InvalidInputError, OutOfScopeError
from solvers.network.model import Model
from solvers.solving import METHODS, checked_method
from solvers.validation import finite_array, token_mask

STARTS = ("inputs", "tokens", "pixels")
"""The keys that give the initial condition: token states, or what the model embeds."""
FILES = ("model", *STARTS, "mask", "labels")


def _array_file(value: Any, where: str) -> str:
    path = text(value, where)
    _read_array(path, where)
    return path


def _read_array(path: str, where: str) -> np.ndarray:
    """An .npy array, never unpickled (allow_pickle=False refuses object arrays)."""
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise reject(where, f"no such file {path}") from None
    except (ValueError, OSError) as exc:
        raise reject(
            where, f"{path} is not a numeric .npy array (never unpickled): {exc}"
        ) from None


def _optional_file(help: str) -> Field:
    return Field(_array_file, None, help, relative=True)


FIELDS = {
    "model": Field(text, help="a save_pretrained directory or a .safetensors file", relative=True),
    "inputs": _optional_file("an .npy of initial token states (B, N, d)"),
    "tokens": _optional_file("an .npy of token ids (B, N), embedded by the model"),
    "pixels": _optional_file("an .npy of images (B, C, H, W), embedded by a ViT"),
    "mask": _optional_file("an .npy padding mask (B, N): 1 for a real token, 0 for padding"),
    "labels": _optional_file("an .npy of class indices (B,)"),
    "methods": Field(array_of(one_of(tuple(METHODS)), minimum=1, distinct=True), ["lie"]),
    "steps_per_unit": Field(
        array_of(integer(1, 100_000), minimum=4, distinct=True), [1, 2, 4, 8, 16]
    ),
    "max_steps_per_unit": Field(
        integer(1, 1_000_000),
        None,
        "a budget: a method short of 3 levels within 0.1 of the limit doubles its finest "
        "level up to here, and a network without a limit refines its check up to here",
    ),
    "precision": Field(
        array_of(precision, minimum=0, distinct=True),
        [],
        "number systems to run the network (dt = 1) in beside float64, e.g. "
        '["float32", "bfloat16"]',
    ),
    "certify": Field(
        integer(16, 1000),
        None,
        "arb digits of an enclosure of the limit that certifies its decisions and brackets "
        "the reference's true error (docs/enclosures.md; smooth flows only; minutes to hours)",
    ),
    "certify_tolerance": Field(
        number(positive=True),
        None,
        "the enclosure's local truncation per unit time, relative, in (0, 1) (default "
        "10^-(certify - 5)); decisions need far less than the default",
    ),
}


class Network:
    """A case's model and arrays, read and checked: the initial states, the mask and the
    targets the readout is judged against (labels, or an LM head's own tokens)."""

    def __init__(
        self, params: dict[str, Any], where: str = "", model: tuple[str, str] | None = None
    ) -> None:
        """`model`: (path, key) of the model to read instead of params["model"] (a member
        of a family, reports.experiments.depth_family)."""

        def at(key: str) -> str:
            return f"{where}.{key}" if where else key

        given = [key for key in STARTS if params[key] is not None]
        if len(given) != 1:
            raise reject(
                at("inputs"),
                f"give exactly one of {', '.join(STARTS)} (the initial condition), got "
                f"{', '.join(given) or 'none'}",
            )
        start = given[0]
        path, key = (params["model"], at("model")) if model is None else model
        self.model = self.read_model(path, key)
        array = _read_array(params[start], at(start))
        embedding = self.model.embedding
        if start != "inputs" and (embedding is None or embedding.takes != start):
            what = (
                "has no embedding: give inputs (token states)"
                if embedding is None
                else f"embeds {embedding.takes}, not {start}"
            )
            raise reject(at(start), f"the model {what}")
        try:
            if start == "inputs":
                states = finite_array(start, array, (None, None, self.model.d_model))
            else:
                states = self.model.embed(array)
        except InvalidInputError as exc:
            raise reject(at(start), f"{params[start]}: {exc}") from None
        self.states = states
        self.mask = None
        if params["mask"] is not None:
            self.mask = self._checked(
                at("mask"), params["mask"], lambda a: token_mask("mask", a, states.shape[:2])
            )
        self.targets = self._targets(params, start, array, at)
        try:
            self.problem = self.model.problem(states, self.mask)
        except InvalidInputError as exc:  # e.g. a sliding window shorter than the input
            raise reject(at(start), f"{params[start]}: {exc}") from None

    @staticmethod
    def read_model(path: str, where: str) -> Model:
        """The model at `path` (solvers.load_model); its errors name the key `where`."""
        try:
            return load_model(path)
        except InvalidInputError as exc:
            raise reject(where, str(exc)) from None

    @staticmethod
    def _checked(where: str, path: str, check: Any) -> np.ndarray:
        try:
            return check(_read_array(path, where))
        except InvalidInputError as exc:
            raise reject(where, f"{path}: {exc}") from None

    def _targets(self, params, start, array, at) -> np.ndarray | None:
        readout = self.model.readout
        lm = readout is not None and readout.next_token
        batch = self.states.shape[:2]
        if params["labels"] is not None:
            if lm:
                raise reject(
                    at("labels"),
                    "the model's LM head is judged against the input's own next tokens: give "
                    "tokens and no labels",
                )
            return self._checked(at("labels"), params["labels"], lambda a: self._labels(a, batch))
        return array if lm and start == "tokens" else None

    def _labels(self, labels: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
        readout = self.model.readout
        if readout is None or not readout.classifies:
            raise InvalidInputError("the model's readout takes no decisions to judge")
        return readout.check_targets(labels, batch, "labels")


def check_network(params: dict[str, Any], where: str) -> dict[str, Any]:
    """Read the files and check them against the model and each other, and the methods and
    the budget against the model (module docstring)."""
    network = Network(params, where)

    def at(key: str) -> str:
        return f"{where}.{key}" if where else key

    for method in params["methods"]:
        try:
            checked_method(network.problem, method)
        except InvalidInputError as exc:
            raise reject(at("methods"), str(exc)) from None
    if params["certify"] is not None:
        try:
            check_scope(network.problem)
        except OutOfScopeError as exc:
            raise reject(at("certify"), str(exc)) from None
    tolerance = params["certify_tolerance"]
    if tolerance is not None and (params["certify"] is None or not tolerance < 1):
        raise reject(
            at("certify_tolerance"),
            "needs certify (the digits)"
            if params["certify"] is None
            else f"must be < 1, got {tolerance}",
        )
    budget, finest = params["max_steps_per_unit"], max(params["steps_per_unit"])
    if budget is not None and budget < finest:
        raise reject(
            at("max_steps_per_unit"),
            f"must be at least the finest level of steps_per_unit ({finest}), got {budget}",
        )
    return params


def digest(path: str) -> str:
    """SHA-256 of a file, or of a folder's files (names and contents, in name order)."""
    sha = hashlib.sha256()
    target = Path(path)
    for file in sorted(target.iterdir()) if target.is_dir() else [target]:
        if file.is_file():
            sha.update(file.name.encode())
            sha.update(file.read_bytes())
    return sha.hexdigest()


def network_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    files = {key: params[key] for key in FILES if params[key] is not None}
    return [("network", params | {"sha256": {key: digest(p) for key, p in files.items()}})]
