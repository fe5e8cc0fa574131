"""The built-in exactness study: the paper's exactness claims on fixed, seeded configurations.

Each entry names the claim checker and its arguments; `run_exactness_study` runs them in
order and yields the ClaimCheck results (plain data) as they finish.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from properties.claim_check import ClaimCheck
from properties.paper_substeps import check_six_substeps
from properties.projection_theorem import check_layer_norm_idempotence, check_projection_theorem
from properties.standard_transformer import standard_encoder
from properties.transformer_identity import check_lie_is_transformer
from solvers import LayerWeights
from solvers.torch_io import torch_available, torch_forward


@dataclass(frozen=True)
class Case:
    """One configuration: a label for progress output and the function that checks it."""

    label: str
    run: Callable[[], list[ClaimCheck]]
    expectation: str
    """What MODEL.md predicts: "holds" or "fails" (a measured departure, e.g. eps > 0)."""


def _stack(
    seed: int, d: int, heads: int, d_ff: int, layers: int, **kwargs: Any
) -> list[LayerWeights]:
    rng = np.random.default_rng(seed)
    return [LayerWeights.random(d, heads, d_ff, rng, **kwargs) for _ in range(layers)]


def _transformer_cases() -> list[Case]:
    references: list[tuple[str, Any]] = [
        ("textbook encoder (concatenated heads)", standard_encoder)
    ]
    if torch_available():
        import torch  # only for the version string in the report

        references.append((f"torch {torch.__version__} TransformerEncoder", torch_forward))
    configurations = [
        # (d, heads, d_ff, tokens, batch, norm, eps, affine, causal, precision)
        (32, 4, 128, 16, 2, "post", 0.0, False, False, "float64"),
        (32, 4, 128, 16, 2, "pre", 1e-5, True, False, "float64"),
        (64, 8, 256, 33, 1, "post", 1e-5, True, True, "float64"),
        (64, 1, 64, 7, 3, "pre", 0.0, False, True, "float64"),
        (32, 4, 128, 16, 2, "post", 1e-5, True, False, "float32"),
    ]
    cases = []
    for index, (d, heads, d_ff, tokens, batch, norm, eps, affine, causal, precision) in enumerate(
        configurations
    ):
        layers = _stack(index, d, heads, d_ff, 6, eps=eps, affine=affine)
        u0 = np.random.default_rng(100 + index).standard_normal((batch, tokens, d))
        for name, reference in references:
            check = partial(
                check_lie_is_transformer, layers, u0, reference, name,
                norm=norm, causal=causal, precision=precision,
            )  # fmt: skip
            cases.append(
                Case(
                    f"Lie dt=1 vs {name}: d={d} heads={heads} norm={norm} {precision}",
                    lambda check=check: [check()],
                    "holds",
                )
            )
    return cases


def _six_substep_cases() -> list[Case]:
    cases = []
    for eps, affine in ((0.0, False), (0.0, True), (1e-5, False), (1e-2, False), (1e-5, True)):
        layer = LayerWeights.random(32, 4, 32, rng=7, eps=eps, affine=affine)
        u = np.random.default_rng(8).standard_normal((16, 32))
        cases.append(
            Case(
                f"six sub-steps vs post-LN: eps={eps} affine={affine}",
                lambda layer=layer, u=u: [check_six_substeps(layer, u)],
                "holds" if eps == 0 else "fails",
            )
        )
    return cases


def _projection_cases() -> list[Case]:
    cases = []
    for sigma1, sigma2, precision in (
        (0.0, 1.0, "float64"),
        (0.5, 2.0, "float64"),
        (0.5, 2.0, "float32"),
    ):
        v = 1.0 + 3.0 * np.random.default_rng(11).standard_normal((4, 16, 32))
        cases.append(
            Case(
                f"Theorem 3.1: sigma1={sigma1} sigma2={sigma2} {precision}",
                lambda v=v, s1=sigma1, s2=sigma2, p=precision: check_projection_theorem(
                    v, s1, s2, np.random.default_rng(12), precision=p
                ),
                "holds",
            )
        )
    rng = np.random.default_rng(13)
    d = 32
    v = rng.standard_normal((16, d))
    affine = (1.0 + 0.3 * rng.standard_normal(d), 0.3 * rng.standard_normal(d))
    for gain, bias, eps, expectation in (
        (1.0, 0.0, 0.0, "holds"),
        (1.0, 0.0, 1e-5, "fails"),
        (1.0, 0.0, 1e-2, "fails"),
        (*affine, 0.0, "fails"),
        (*affine, 1e-5, "fails"),
    ):
        cases.append(
            Case(
                f"layer-norm idempotence: eps={eps} affine={np.ndim(gain) > 0}",
                lambda g=gain, b=bias, e=eps: [check_layer_norm_idempotence(v, g, b, e)],
                expectation,
            )
        )
    return cases


def exactness_cases() -> list[Case]:
    """Every case of the built-in exactness study, in report order."""
    return _transformer_cases() + _six_substep_cases() + _projection_cases()


def run_exactness_study(cases: list[Case]) -> Iterator[tuple[Case, list[ClaimCheck]]]:
    """Run each case in turn, yielding it with its results."""
    for case in cases:
        yield case, case.run()
