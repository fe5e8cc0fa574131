"""Enclosures contain the exact solution (issue "certified enclosures", first acceptance
check, at a size the suite can afford: the direct method's steps are short, see
docs/enclosures.md section 6): seeded small smooth flows enclosed at 30 digits contain the
reference at 50 digits in every component of every boundary, and an enclosure of a
perturbed field does not, so the containment check can fail."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve_reference
from solvers.enclosure import solver
from solvers.enclosure.solver import enclose
from solvers.equation.controls import SmoothControls
from solvers.errors import IntegrationError, InvalidInputError

T_FINAL = 0.05
FLOWS = [  # (seed, norm placement, norm kind, activation)
    (0, "pre", "layer", "gelu"),
    (1, "pre", "rms", "silu"),
    (2, "none", "layer", "gelu-tanh"),
    (3, "pre", "layer", "silu"),
]


def _problem(seed: int, norm: str, kind: str, activation: str, shift: float = 0.0) -> Problem:
    layer = LayerWeights.random(4, 2, 8, seed, activation=activation, norm_kind=kind, eps=1e-5)
    if shift:
        layer = LayerWeights.random(
            4, 2, 8, seed, activation=activation, norm_kind=kind, eps=1e-5, bias_scale=0.1 + shift
        )
    u0 = np.random.default_rng(seed).standard_normal((3, 4))
    return Problem(u0, PiecewiseControls([layer]), T_FINAL, norm=norm)


def _truth(problem: Problem) -> list:
    return solve_reference(problem, backend=backend("arb", 50)).states


@pytest.mark.parametrize("flow", FLOWS, ids=lambda f: "-".join(map(str, f)))
def test_the_enclosure_contains_a_50_digit_reference(flow):
    problem = _problem(*flow)
    enclosure = enclose(problem, backend("arb", 30))
    inside = enclosure.contains(_truth(problem))
    assert len(inside) == 2 and all(c.all() for c in inside)
    assert 0 < enclosure.width[-1] < 1e-20
    assert enclosure.steps > 0 and enclosure.taylor_evaluations >= 3 * enclosure.steps


def test_the_enclosure_of_a_perturbed_field_misses_the_reference():
    problem = _problem(*FLOWS[0])
    perturbed = _problem(*FLOWS[0], shift=1e-9)
    inside = enclose(perturbed, backend("arb", 30)).contains(_truth(problem))
    assert inside[0].all()  # the same initial state
    assert not inside[-1].all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": backend("mpmath", 30)}, "arb balls"),
        ({"tol": 2.0}, "tol"),
        ({"order": 1}, "order"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        enclose(_problem(*FLOWS[0]), **kwargs)


@pytest.mark.parametrize("variant", ["causal", "padding-mask", "dyt", "smooth-controls"])
def test_masks_dyt_and_smooth_controls_are_enclosed(variant):
    """The causal and padding masks' -inf scores (exp gives exactly 0 and no coefficients),
    DyT's tanh, and weights interpolated in time (the time a series of its own)."""
    kind = "dyt" if variant == "dyt" else "layer"
    eps = 0.0 if variant == "dyt" else 1e-5
    layers = [
        LayerWeights.random(4, 2, 8, seed, activation="gelu", eps=eps, norm_kind=kind)
        for seed in (4, 5)
    ]
    u0 = np.random.default_rng(4).standard_normal((3, 4))
    one = PiecewiseControls(layers[:1])
    if variant == "causal":
        problem = Problem(u0, one, T_FINAL, norm="pre", causal=True)
    elif variant == "padding-mask":
        problem = Problem(u0, one, T_FINAL, norm="pre", mask=np.array([1, 1, 0]))
    elif variant == "dyt":
        problem = Problem(u0, one, T_FINAL, norm="pre")
    else:
        controls = SmoothControls(layers, [0.0, 1.0], 1)
        problem = Problem(u0, controls, T_FINAL, norm="pre")
    inside = enclose(problem, backend("arb", 30)).contains(_truth(problem))
    assert all(c.all() for c in inside)


def test_a_flow_no_step_validates_raises_integration_error(monkeypatch):
    """Pre-RMSNorm with eps = 0 and a token of mean square 1e-60: its Taylor coefficients
    leave float64's range, so the proposed step is 0 (and every a priori box, at least
    2^-40 wide, reaches a zero mean square): the enclosure says so without attempting a
    step of length 0, which it would accept without advancing."""
    layer = LayerWeights.random(4, 2, 8, 0, activation="gelu", norm_kind="rms", eps=0.0)
    u0 = np.random.default_rng(0).standard_normal((3, 4))
    u0[1] = 1e-30
    problem = Problem(u0, PiecewiseControls([layer]), T_FINAL, norm="pre")
    lengths = []
    attempt = solver._Stepper._attempt

    def counted(self, n, t, h, *rest):
        lengths.append(h)
        return attempt(self, n, t, h, *rest)

    monkeypatch.setattr(solver._Stepper, "_attempt", counted)
    with pytest.raises(IntegrationError, match="no step from t = 0 on layer 0"):
        enclose(problem, backend("arb", 30))
    assert all(h > 0 for h in lengths)
