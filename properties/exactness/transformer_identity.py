"""Claim: the uniform-grid Lie scheme with dt = 1 is the standard Transformer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from properties.claim_check import ClaimCheck
from properties.exactness.standard_transformer import standard_encoder
from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.io.torch_modules import torch_forward

CLAIM = "Lie scheme, dt = 1, uniform grid = standard Transformer"
REFERENCES = ("textbook", "torch")


def check_lie_is_transformer(
    layers: Sequence[LayerWeights],
    u0: np.ndarray,
    *,
    reference: str = "textbook",
    norm: str = "post",
    causal: bool = False,
    precision: str | Backend = "float64",
) -> ClaimCheck:
    """Relative max-abs distance between solve(..., steps_per_unit=1) and a reference encoder.

    reference "textbook" is `standard_encoder` in the same number system; "torch" is
    torch's float64 TransformerEncoder (torch must be installed). The tolerance is 16
    unit roundoffs per layer of the coarser of the two precisions, the growth of rounding
    errors through a stack of well-conditioned layers (measured: 3 to 10 per stack).
    """
    bk = backend(precision)
    problem = Problem(u0, PiecewiseControls(layers), len(layers), norm=norm, causal=causal)
    got = solve(problem, backend=bk)
    if reference == "textbook":
        expected, roundoff = (
            standard_encoder(layers, problem.u0, norm, causal, bk),
            bk.unit_roundoff,
        )
    elif reference == "torch":
        expected = torch_forward(layers, problem.u0, norm, causal)
        roundoff = max(bk.unit_roundoff, backend("float64").unit_roundoff)
    else:
        raise InvalidInputError(f"unknown reference {reference!r}; allowed: {REFERENCES}")
    with bk.active():
        difference = bk.to_float64(got - bk.asarray(expected))
    scale = np.max(np.abs(bk.to_float64(got)))
    first = layers[0]
    return ClaimCheck(
        claim=CLAIM,
        configuration={
            "reference": reference,
            "precision": repr(bk),
            "layers": len(layers),
            "tokens": problem.tokens,
            "d": first.d_model,
            "heads": first.heads,
            "d_ff": first.d_ff,
            "norm": norm,
            "eps": first.eps,
            "causal": causal,
            "per_feature_affine": first.norm1[0].ndim > 0,
        },
        defect=float(np.max(np.abs(difference)) / scale),
        tolerance=16 * len(layers) * roundoff,
        note="relative max-abs difference of the outputs",
    )
