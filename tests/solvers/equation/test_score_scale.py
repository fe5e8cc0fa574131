"""The score scale: the canonical 1/sqrt(d_k) is the real number, evaluated in each number
system; a scale given as a number is kept as given (solvers/equation/weights.py, issue 15)."""

from __future__ import annotations

import dataclasses
import math

import flint
import mpmath
import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve
from solvers.errors import InvalidInputError

NOT_POWERS_OF_4 = (3, 5, 6, 7)


def layer_with_d_k(d_k: int, seed: int = 0, **changes: object) -> LayerWeights:
    layer = LayerWeights.random(2 * d_k, 2, 4 * d_k, seed)
    return dataclasses.replace(layer, **changes) if changes else layer


def exact_scale(d_k: int) -> mpmath.mpf:
    """1/sqrt(d_k) to 60 digits."""
    with mpmath.workdps(60):
        return mpmath.mpf(1) / mpmath.sqrt(d_k)


def as_mpf(number: object) -> mpmath.mpf:
    """An mpf or the midpoint of an arb ball, exactly, as a 60-digit mpf."""
    if isinstance(number, flint.arb):
        number = number.mid().str(70, radius=False)
    with mpmath.workdps(60):
        return mpmath.mpf(number)


def test_a_layer_keeps_the_canonical_scale_as_none():
    layer = LayerWeights.random(6, 2, 12, 0)
    assert layer.scale is None
    assert layer.attention_scale == 1.0 / math.sqrt(3)
    assert layer.scaled(2.0).scale is None
    assert dataclasses.replace(layer, eps=1e-5).scale is None
    given = dataclasses.replace(layer, scale=0.3)
    assert given.scale == given.attention_scale == 0.3
    assert given.scaled(2.0).scale == 0.3


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_binary_formats_get_the_float64_value_bit_for_bit(name):
    """float64 and narrower: 1.0 / math.sqrt(d_k) rounded into the format, as before (and as
    torch computes it), for every d_k up to 512."""
    bk = backend(name)
    for d_k in range(1, 513):
        layer = LayerWeights.random(1, 1, 1, 0, d_k=d_k, d_v=1)
        packed = np.asarray(layer.on(bk).scale)
        before = np.asarray(bk.asarray(1.0 / math.sqrt(d_k)))
        assert packed.dtype == before.dtype
        assert packed.tobytes() == before.tobytes(), d_k


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_float64_solves_are_bit_identical_to_the_explicit_float64_scale(rng, norm):
    layers = [LayerWeights.random(12, 4, 24, rng) for _ in range(3)]  # d_k = 3
    explicit = [dataclasses.replace(w, scale=1.0 / math.sqrt(w.d_k)) for w in layers]
    u0 = rng.standard_normal((5, 12))
    canonical_result = solve(Problem(u0, PiecewiseControls(layers), 3, norm=norm))
    explicit_result = solve(Problem(u0, PiecewiseControls(explicit), 3, norm=norm))
    assert canonical_result.dtype == np.float64
    assert canonical_result.tobytes() == explicit_result.tobytes()


@pytest.mark.parametrize("name", ["mpmath", "arb"])
@pytest.mark.parametrize("d_k", NOT_POWERS_OF_4)
def test_high_precision_scale_is_exact_to_the_working_precision(name, d_k):
    bk = backend(name, 50)
    packed = layer_with_d_k(d_k).on(bk).scale
    value = np.asarray(packed).item()
    truth = exact_scale(d_k)
    assert abs(as_mpf(value) - truth) <= mpmath.mpf(10) ** -50 * truth
    # the float64 value is off by far more: the test can tell the two apart
    assert abs(mpmath.mpf(1.0 / math.sqrt(d_k)) - truth) > mpmath.mpf(10) ** -40 * truth
    if name == "arb":  # a rigorous ball: it contains 1/sqrt(d_k)
        with flint.ctx.workprec(400):
            assert value.contains(flint.arb(d_k).rsqrt())


def test_longdouble_scale_is_evaluated_in_long_double():
    bk = backend("longdouble")
    packed = np.asarray(layer_with_d_k(3).on(bk).scale)
    assert packed == np.longdouble(1) / np.sqrt(np.longdouble(3))
    error = abs(as_mpf(str(packed.item())) - exact_scale(3))
    assert error <= 2 * bk.unit_roundoff * exact_scale(3)


@pytest.mark.parametrize("name", ["float16", "float32", "float64", "longdouble", "mpmath", "arb"])
def test_a_given_scale_is_kept_as_given(name):
    """scale=0.3 is the float64 number 0.3 (like every weight), rounded into the backend."""
    bk = backend(name, 50) if name in ("mpmath", "arb") else backend(name)
    layer = layer_with_d_k(3, scale=0.3)
    packed = np.asarray(layer.on(bk).scale)
    expected = np.asarray(bk.asarray(0.3))
    if packed.dtype == object:
        assert as_mpf(packed.item()) == mpmath.mpf(0.3)  # the binary float, exactly
        assert bk.max_radius(packed) == 0.0
    else:
        assert packed.dtype == expected.dtype and packed == expected


def test_a_bad_scale_is_still_rejected():
    with pytest.raises(InvalidInputError, match=r"scale must be > 0, got -1\.0"):
        layer_with_d_k(3, scale=-1.0)


@pytest.mark.parametrize("name", ["mpmath", "arb"])
def test_the_float64_scale_was_a_1e_17_error_in_high_precision_solves(name):
    """What the float64-rounded scale cost: float64's 1/sqrt(3) is off by 1.3e-16 relative,
    and a 40-digit solve with d_k = 3 moves by 3.5e-17 relative when given it: far above
    10^-40, the error the solve should have, and below float64's resolution."""
    rng = np.random.default_rng(5)
    layers = [
        dataclasses.replace(LayerWeights.random(6, 2, 12, rng), activation="gelu") for _ in range(2)
    ]
    rounded = [dataclasses.replace(w, scale=1.0 / math.sqrt(w.d_k)) for w in layers]
    u0 = rng.standard_normal((3, 6))
    bk = backend(name, 40)
    exact = solve(Problem(u0, PiecewiseControls(layers), 2, norm="post"), backend=bk)
    old = solve(Problem(u0, PiecewiseControls(rounded), 2, norm="post"), backend=bk)
    size = max(abs(as_mpf(x)) for x in exact.flat)
    change = max(abs(as_mpf(a) - as_mpf(b)) for a, b in zip(exact.flat, old.flat, strict=True))
    assert 1e-25 < change / size < 1e-15


def test_torch_layers_have_the_canonical_scale_and_go_back_to_torch():
    """from_torch reads torch's 1/sqrt(d_k) as the canonical scale; to_torch takes canonical
    layers (and the float64 value given explicitly) and refuses a scale torch cannot hold."""
    torch = pytest.importorskip("torch")
    from solvers import from_torch
    from solvers.io.torch_modules import to_torch
    from tests.torch_models import random_torch_encoder, run_encoder

    encoder = random_torch_encoder(12, 4, 24, layers=2, seed=1)  # d_k = 3
    layers = from_torch(encoder)
    assert [w.scale for w in layers] == [None, None]
    u0 = np.random.default_rng(2).standard_normal((1, 5, 12))
    expected = run_encoder(encoder, u0, batch_first=True)
    explicit = [dataclasses.replace(w, scale=1.0 / math.sqrt(3)) for w in layers]
    for given in (layers, explicit):
        twin = to_torch(given, norm="post")
        with torch.no_grad():
            got = twin(torch.tensor(u0)).numpy()
        assert np.array_equal(got, expected)
    with pytest.raises(InvalidInputError, match="scale 1/sqrt"):
        to_torch([dataclasses.replace(layers[0], scale=0.3)], norm="post")
