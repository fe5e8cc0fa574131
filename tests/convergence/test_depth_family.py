"""depth_family on synthetic families whose rates are known (docs/depth.md sections 2 to
6): weights sampled from a smooth theta(t) at the layer times (own-flow, family and
increment rates 1), weights alternating between two fixed layers (own-flow and family
rates 1, increments that do not shrink), and the checks of a family."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convergence.depth_family import FamilyVerdict, check_family, depth_family
from convergence.weights_in_depth import FOLDED, unscaled, weight_increments
from solvers import InvalidInputError, LayerWeights
from solvers.network.model import Model

DEPTHS = (2, 4, 8, 16, 32, 64)
HORIZON = 1.0
A = LayerWeights.random(8, 2, 16, 1, activation="gelu")
B = LayerWeights.random(8, 2, 16, 2, activation="gelu")


def folded(w: LayerWeights, h: float) -> LayerWeights:
    return dataclasses.replace(w, **{name: getattr(w, name) * h for name in FOLDED})


def theta(t: float) -> LayerWeights:
    """A smooth path from A (t = 0) to B (t = T): (1 - s) A + s B, s = (1 - cos(pi t/T))/2."""
    s = (1 - np.cos(np.pi * t / HORIZON)) / 2
    return dataclasses.replace(
        A, **{name: (1 - s) * getattr(A, name) + s * getattr(B, name) for name in A.map_names}
    )


def member(depth: int, kind: str) -> Model:
    h = HORIZON / depth
    if kind == "smooth":  # sampled at the middle of each layer's interval
        layers = [theta((k + 0.5) * h) for k in range(depth)]
    else:
        layers = [A if k % 2 == 0 else B for k in range(depth)]
    return Model([folded(w, h) for w in layers], "pre", source=f"{kind}-{depth}")


@pytest.fixture(scope="module")
def u0() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((2, 4, 8))


@pytest.fixture(scope="module", params=["smooth", "alternating"])
def family(request, u0):
    models = [member(L, request.param) for L in reversed(DEPTHS)]  # any order
    return request.param, depth_family(models, [u0] * len(models), horizon=HORIZON)


def test_the_rates_are_the_expected_ones(family):
    kind, result = family
    assert [m.depth for m in result.members] == list(DEPTHS) and result.depth_ratio == 2
    assert abs(result.own_flow_rate.rate - 1) <= 0.2 and result.own_flow_rate.shrinks
    assert abs(result.family_rate.rate - 1) <= 0.2 and result.family_rate.shrinks
    assert result.members[-1].family_distance is None
    if kind == "smooth":
        assert abs(result.increment_rate.rate - 1) <= 0.2 and result.increment_rate.shrinks
        assert result.verdict == FamilyVerdict.SMOOTH
        variations = [m.weight_variation for m in result.members]
        assert max(variations) < 1.5 * variations[1]  # bounded: it tends to TV(theta)
    else:
        assert result.increment_rate.rate < 0.2 and result.increment_rate.stays
        assert result.verdict == FamilyVerdict.AVERAGED
        variations = [m.weight_variation for m in result.members]
        assert variations[-1] > 20 * variations[0]  # grows like L


def test_the_own_flow_distance_is_first_order_in_h(family):
    """docs/depth.md section 2: D_own(L) ~ C h, so L D_own(L) settles to a constant."""
    _, result = family
    scaled = [m.depth * m.own_flow_distance for m in result.members[1:]]
    assert max(scaled) / min(scaled) < 1.3
    assert all(m.own_flow_error < 1e-3 * m.own_flow_distance for m in result.members)


def test_the_unscaled_weights_are_the_unfolded_ones():
    h = 0.125
    back = unscaled([folded(A, h)], h)[0]
    for name in A.map_names:
        np.testing.assert_allclose(getattr(back, name), getattr(A, name), rtol=1e-15)


def test_increments_of_samples_of_a_line_are_exact():
    """theta_k = A + k D: every increment is |D|, the largest layer is the last one."""
    difference = dataclasses.replace(A, **{n: getattr(B, n) - getattr(A, n) for n in A.map_names})

    def at(k: int) -> LayerWeights:
        return dataclasses.replace(
            A, **{n: getattr(A, n) + k * getattr(difference, n) for n in A.map_names}
        )

    layers = [at(k) for k in range(4)]
    vector = np.concatenate([np.ravel(getattr(difference, n)) for n in A.map_names])
    norms = [
        np.linalg.norm(
            np.concatenate(
                [np.ravel(getattr(w, n)) for n in A.map_names]
                + [np.ravel(np.broadcast_to(v, (8,))) for v in (*w.norm1, *w.norm2)]
            )
        )
        for w in layers
    ]
    found = weight_increments(layers)
    np.testing.assert_allclose(found.largest, np.linalg.norm(vector) / max(norms), rtol=1e-12)
    np.testing.assert_allclose(found.variation, 3 * np.linalg.norm(vector) / max(norms))
    assert weight_increments(layers[:1]).largest is None


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([member(4, "smooth")], "at least two members"),
        ([member(2, "smooth"), member(4, "smooth"), member(4, "alternating")], "equal depth"),
        ([member(2, "smooth"), member(4, "smooth"), member(6, "smooth")], "constant integer"),
        (
            [member(2, "smooth"), Model([LayerWeights.random(4, 2, 8, 0)] * 4, "pre", source="w4")],
            "different widths",
        ),
        (
            [
                member(2, "smooth"),
                Model([LayerWeights.random(8, 2, 16, 0, affine=True)] * 4, "post", source="affine"),
            ],
            "no time-step limit",
        ),
    ],
)
def test_a_family_that_is_not_one_is_refused(models, message):
    with pytest.raises(InvalidInputError, match=message):
        check_family(models)


def test_inputs_must_match_the_members(u0):
    models = [member(2, "smooth"), member(4, "smooth")]
    with pytest.raises(InvalidInputError, match="as many inputs"):
        depth_family(models, [u0])
    with pytest.raises(InvalidInputError, match="horizon"):
        depth_family(models, [u0, u0], horizon=0.0)


def _rate(verdict, rate=1.0):
    from convergence.depth_family import FittedRate

    return FittedRate(
        rate, (rate - 0.1, rate + 0.1), verdict, "given", [2, 4, 8], "order estimator"
    )


@pytest.mark.parametrize(
    ("family", "increments", "expected"),
    [
        ("NO-LIMIT", "PASS", FamilyVerdict.DIVERGES),
        ("NO-LIMIT", "NO-LIMIT", FamilyVerdict.DIVERGES),
        ("PASS", "PASS", FamilyVerdict.SMOOTH),
        ("PASS", "NO-LIMIT", FamilyVerdict.AVERAGED),
        ("PRE-ASYMPTOTIC", "PASS", FamilyVerdict.UNDECIDED),
        ("PASS", "PRE-ASYMPTOTIC", FamilyVerdict.UNDECIDED),
        ("FLOOR", "NO-LIMIT", FamilyVerdict.UNDECIDED),
    ],
)
def test_the_family_verdict_follows_the_rates(family, increments, expected):
    """docs/depth.md section 5, in its order; an undecided verdict names what is open."""
    from convergence.depth_family import family_verdict
    from convergence.order import OrderVerdict

    verdict, reason = family_verdict(_rate(OrderVerdict(family)), _rate(OrderVerdict(increments)))
    assert verdict == expected, reason
    if expected == FamilyVerdict.UNDECIDED:
        assert "cannot tell" in reason and "would decide" in reason
