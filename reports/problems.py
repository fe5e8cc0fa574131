"""Problems named in study files: a table of sizes and options -> a seeded Problem.

    problem = { d = 6, tokens = 5, heads = 2, d_ff = 8, layers = 2, norm = "post",
                weight_scale = 0.7, relu_shift = 2.5, manufactured = true }

`manufactured = true` starts from the manufactured solution on S1 (solvers.equation.exact) and
adds its forcing, so the exact solution is known; otherwise u0 is N(0, 1). `relu_shift`
adds a constant to the FFN's hidden biases b1: with a large enough shift no hidden
pre-activation crosses zero, the field is smooth and the extrapolation reference is
cheap. `uniform_attention` zeroes Wk, b_v, b_o and the FFN's output (W2, b2): every
token attends uniformly and the solution is known in closed form (solvers.equation.exact). `eps`
and `affine` give torch-style layer norms (eps > 0; per-feature gains
1 + 0.3 N(0, 1) and biases 0.3 N(0, 1)). `norm1 = [gain, bias]` gives every layer a first
norm that differs from its second, as trained post-LN layers have (scalars; the flow is
then the one on S2 of docs/limits.md section 3). `activation` is the FFN's: "relu" (the
default, with ReLU event location in the references), "gelu" or "gelu-tanh" (smooth, no
events: the cheaper choice for large smooth studies). Weights and data come from the
case's seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from reports.schema import Field, array_of, boolean, integer, number, one_of, reject, table
from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.equation.manufactured import ManufacturedSolution
from solvers.equation.norms import Placement
from solvers.equation.weights import ACTIVATIONS

PROBLEM_FIELDS = {
    "d": Field(integer(1, 512), 6, "features"),
    "tokens": Field(integer(1, 512), 5, "tokens"),
    "heads": Field(integer(1, 64), 2, "attention heads (must divide d)"),
    "d_ff": Field(integer(1, 4096), 8, "hidden width of the FFN"),
    "layers": Field(integer(1, 256), 2, "layers: the horizon T"),
    "norm": Field(one_of(tuple(p.value for p in Placement)), "post"),
    "weight_scale": Field(number(positive=True), 0.7),
    "relu_shift": Field(number(), 0.0),
    "eps": Field(number(low=0.0), 0.0),
    "affine": Field(boolean, False),
    "norm1": Field(array_of(number(), minimum=2), None, "norm1's [gain, bias] (scalars)"),
    "manufactured": Field(boolean, False),
    "uniform_attention": Field(boolean, False),
    "activation": Field(one_of(ACTIVATIONS), "relu", "the FFN's activation"),
}


def problem_spec(value: Any, where: str) -> dict[str, Any]:
    """Check a problem table (see the module docstring) and the rules between its keys."""
    spec = table(value, where, PROBLEM_FIELDS)
    if spec["d"] % spec["heads"]:
        raise reject(f"{where}.heads", f"must divide d = {spec['d']}, got {spec['heads']}")
    if spec["norm1"] is not None:
        if len(spec["norm1"]) != 2 or not spec["norm1"][0] > 0:
            raise reject(f"{where}.norm1", f"must be [gain > 0, bias], got {spec['norm1']}")
        if spec["affine"]:
            raise reject(f"{where}.norm1", "cannot be combined with affine (per-feature) norms")
    if spec["manufactured"] and spec["uniform_attention"]:
        raise reject(f"{where}.uniform_attention", "cannot be combined with manufactured")
    if spec["manufactured"]:
        if spec["d"] < 3:
            raise reject(f"{where}.d", "must be >= 3 for a manufactured solution on S1")
        if Placement(spec["norm"]).constrained and (spec["eps"] or spec["affine"]):
            raise reject(
                f"{where}.manufactured",
                "a post-LN manufactured solution needs projections (eps = 0, affine = false)",
            )
    return spec


def with_default_problem(params: dict[str, Any]) -> dict[str, Any]:
    """params with its optional "problem" key filled with the default problem."""
    return params | {"problem": params.get("problem") or problem_spec({}, "problem")}


def build_problem(spec: dict[str, Any], seed: int) -> Problem:
    """The seeded Problem a checked problem spec describes."""
    rng = np.random.default_rng(seed)
    layers = [
        LayerWeights.random(
            spec["d"],
            spec["heads"],
            spec["d_ff"],
            rng,
            weight_scale=spec["weight_scale"],
            eps=spec["eps"],
            affine=spec["affine"],
        )
        for _ in range(spec["layers"])
    ]
    if spec["uniform_attention"]:
        layers = [
            dataclasses.replace(
                w,
                wk=np.zeros_like(w.wk),
                bv=np.zeros_like(w.bv),
                bo=np.zeros_like(w.bo),
                w2=np.zeros_like(w.w2),
                b2=np.zeros_like(w.b2),
            )
            for w in layers
        ]
    if spec["relu_shift"]:
        layers = [dataclasses.replace(w, b1=w.b1 + spec["relu_shift"]) for w in layers]
    if spec["norm1"] is not None:
        layers = [dataclasses.replace(w, norm1=tuple(spec["norm1"])) for w in layers]
    if spec["activation"] != "relu":
        layers = [dataclasses.replace(w, activation=spec["activation"]) for w in layers]
    controls = PiecewiseControls(layers)
    if spec["manufactured"]:
        star = ManufacturedSolution(spec["tokens"], spec["d"])
        return Problem(star.initial(), controls, spec["layers"], spec["norm"], manufactured=star)
    u0 = rng.standard_normal((spec["tokens"], spec["d"]))
    return Problem(u0, controls, spec["layers"], spec["norm"])
