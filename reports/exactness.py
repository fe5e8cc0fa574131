"""The built-in exactness study: the paper's exactness claims on fixed, seeded configurations.

Each Case names a configuration, the function that checks it and the verdict docs/model.md
predicts; the "claims" experiment (reports.experiments.claims) runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from properties.claim_check import CheckVerdict, ClaimCheck
from properties.exactness.paper_substeps import check_six_substeps
from properties.exactness.projection_theorem import (
    check_layer_norm_idempotence,
    check_projection_theorem,
)
from properties.exactness.transformer_identity import check_lie_is_transformer
from solvers import LayerWeights, backend
from solvers.backends import registered
from solvers.io.torch_modules import torch_available


@dataclass(frozen=True)
class Case:
    """One configuration: a label for progress output, its check, and the predicted verdict."""

    label: str
    run: Callable[[], list[ClaimCheck]]
    expectation: str
    needs_torch: bool = False


def _single(check: Callable[[], ClaimCheck]) -> Callable[[], list[ClaimCheck]]:
    return lambda: [check()]


def _transformer_cases(every: bool) -> list[Case]:
    configurations = [
        # (d, heads, d_ff, tokens, batch, norm, eps, affine, causal)
        (32, 4, 128, 16, 2, "post", 0.0, False, False),
        (32, 4, 128, 16, 2, "pre", 1e-5, True, False),
        (64, 8, 256, 33, 1, "post", 1e-5, True, True),
        (64, 1, 64, 7, 3, "pre", 0.0, False, True),
    ]
    cases = []
    for index, (d, heads, d_ff, tokens, batch, norm, eps, affine, causal) in enumerate(
        configurations
    ):
        rng = np.random.default_rng(index)
        layers = [
            LayerWeights.random(d, heads, d_ff, rng, eps=eps, affine=affine) for _ in range(6)
        ]
        u0 = rng.standard_normal((batch, tokens, d))
        runs = [("textbook", "float64", None)]
        runs += [("torch", "float64", None)] if every or torch_available() else []
        if index == 0:  # every number system on the first configuration
            systems = [("textbook", bk.name, bk.digits) for bk in registered()]
            runs += [run for run in systems if run not in runs]
        for reference, name, digits in runs:
            bk = backend(name, digits)
            check = partial(
                check_lie_is_transformer,
                layers,
                u0,
                reference=reference,
                norm=norm,
                causal=causal,
                precision=bk,
            )
            label = f"Lie dt=1 vs {reference}: d={d} heads={heads} norm={norm} {bk!r}"
            cases.append(Case(label, _single(check), CheckVerdict.HOLDS, reference == "torch"))
    return cases


def _six_substep_cases() -> list[Case]:
    u = np.random.default_rng(8).standard_normal((16, 32))
    runs = [(0.0, affine, bk.name, bk.digits) for affine in (False, True) for bk in registered()]
    runs += [(eps, affine, "float64", None) for eps in (1e-5, 1e-2) for affine in (False, True)]
    cases = []
    for eps, affine, name, digits in runs:
        layer = LayerWeights.random(32, 4, 32, rng=7, eps=eps, affine=affine)
        bk = backend(name, digits)
        cases.append(
            Case(
                f"six sub-steps vs post-LN: eps={eps} affine={affine} {bk!r}",
                _single(partial(check_six_substeps, layer, u, bk)),
                CheckVerdict.HOLDS if eps == 0 else CheckVerdict.FAILS,
            )
        )
    return cases


def _projection_cases() -> list[Case]:
    v = 1.0 + 3.0 * np.random.default_rng(11).standard_normal((4, 16, 32))
    cases = []
    for bk in registered():
        for sigma1, sigma2 in ((0.0, 1.0), (0.5, 2.0)):
            cases.append(
                Case(
                    f"Theorem 3.1: sigma1={sigma1} sigma2={sigma2} {bk!r}",
                    partial(
                        check_projection_theorem,
                        v,
                        sigma1,
                        sigma2,
                        np.random.default_rng(12),
                        samples=8,
                        precision=bk,
                    ),
                    CheckVerdict.HOLDS,
                )
            )
    rng = np.random.default_rng(13)
    d = 32
    w = rng.standard_normal((16, d))
    affine = (1.0 + 0.3 * rng.standard_normal(d), 0.3 * rng.standard_normal(d))
    for gain, bias, eps, expectation in (
        (1.0, 0.0, 0.0, CheckVerdict.HOLDS),
        (1.0, 0.0, 1e-5, CheckVerdict.FAILS),
        (1.0, 0.0, 1e-2, CheckVerdict.FAILS),
        (*affine, 0.0, CheckVerdict.FAILS),
        (*affine, 1e-5, CheckVerdict.FAILS),
    ):
        cases.append(
            Case(
                f"layer-norm idempotence: eps={eps} affine={np.ndim(gain) > 0}",
                _single(partial(check_layer_norm_idempotence, w, gain, bias, eps)),
                expectation,
            )
        )
    return cases


def exactness_cases(every: bool = False) -> list[Case]:
    """The cases of the built-in exactness study this machine can run, in report order;
    with `every`, the torch cases too where torch is not installed."""
    return _transformer_cases(every) + _six_substep_cases() + _projection_cases()
