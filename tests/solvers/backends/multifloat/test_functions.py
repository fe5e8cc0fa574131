"""The elementary functions of the multi-floats (solvers.backends.multifloat.functions,
docs/rounding.md section 6) against mpmath at twice the digits, on grids that include
large and tiny |x|, the edges where exp overflows and underflows, the reduction's
boundaries, and the regions where a naive formula cancels (erfc and the logistic function
on the negative side, tanh, expm1 and log near 0 and 1). Arguments carry all n limbs
(a random tail below the leading one), so the reductions' roundings are exercised. The
largest relative error in u^n = 2^(-53 n) is held to the bound of the table, on results in
the format's normal range (a result whose last limb would be subnormal cannot hold n
limbs' digits)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from solvers.backends.multifloat import functions
from solvers.backends.multifloat.array import MultiFloatArray
from solvers.backends.multifloat.backend import OPERATION_BOUND
from solvers.backends.multifloat.expansions import LIMBS
from tests.solvers.backends.multifloat.limbs import with_tails

GRIDS = {
    "exp": np.concatenate(
        [
            np.linspace(-700, 709.7, 211),
            [1e-300, -1e-20, 1e-8, 0.3465, -0.3466, 0.3467, 1, -1, 3.384e-4, -3.385e-4],
            [-708.3, -745.1, 709.77],
        ]
    ),
    "expm1": np.array(
        [1e-300, 1e-30, -1e-12, 1e-5, 3.4e-4, -3.4e-4, 0.1, 0.3, -0.34, 0.35, 2, -5, 40, -800]
    ),
    "log": np.concatenate(
        [10.0 ** np.linspace(-280, 300, 59), [1 + 2**-40, 1 - 2**-45, 0.7071, 1.4142, 2, 0.5]]
    ),
    "erfc": np.concatenate(
        [
            np.linspace(-6, 25, 249),
            [1e-300, -1e-20, 1 / 64 - 1e-12, 1 / 64 + 1e-12, 0.126, 7.99, 8.0, 8.01],
            [26.5, 27.2, 27.4, -27.4],
        ]
    ),
    "tanh": np.concatenate([np.linspace(-30, 30, 121), [1e-300, -1e-20, 1e-8, 1e-3, 400]]),
    "logistic": np.concatenate([np.linspace(-700, 700, 141), [1e-20, -1e-20, -37, 37]]),
    "sin": np.concatenate(
        [np.linspace(-3000, 3000, 201), [1e-300, 1e-20, 0.785398, 3.14159265358979, 1e5]]
    ),
    "cos": np.concatenate(
        [np.linspace(-3000, 3000, 201), [1e-20, 0.785398, 1.5707963267948966, 1e5]]
    ),
}
"""Arguments (their leading limbs) per function."""

REFERENCES = {
    "exp": mpmath.exp,
    "expm1": mpmath.expm1,
    "log": mpmath.log,
    "erfc": mpmath.erfc,
    "tanh": mpmath.tanh,
    "logistic": lambda x: 1 / (1 + mpmath.exp(-x)),
    "sin": mpmath.sin,
    "cos": mpmath.cos,
}

BOUNDS = {
    "exp": {2: 4, 3: 2, 4: 2},
    "expm1": {2: 4, 3: 2, 4: 2},
    "log": {2: 4, 3: 2, 4: 2},
    "erfc": {2: 8, 3: 4, 4: 4},
    "tanh": {2: 8, 3: 3, 4: 3},
    "logistic": {2: 4, 3: 2, 4: 2},
    "sin": {2: 4, 3: 3, 4: 3},
    "cos": {2: 4, 3: 3, 4: 3},
}
"""Largest relative error in u^n (docs/rounding.md section 6). erfc's grows with z^2:
exp(-z^2) inherits the rounding of z^2, up to OPERATION_BOUND u^n relatively, as an
absolute error in the exponent, so erfc is held to BOUND + OPERATION_BOUND z^2."""


def _arguments(name: str, n: int) -> MultiFloatArray:
    """The grid's values as n-limb numbers with a random tail below the leading limb."""
    return MultiFloatArray(with_tails(GRIDS[name], np.random.default_rng(7), n))


def _value(limbs: np.ndarray) -> mpmath.mpf:
    return mpmath.fsum(mpmath.mpf(float(v)) for v in limbs)


@pytest.mark.parametrize("n", LIMBS)
@pytest.mark.parametrize("name", sorted(GRIDS))
def test_each_function_is_within_its_bound(name, n):
    x = _arguments(name, n)
    y = getattr(functions, name)(x)
    normal = mpmath.mpf(2) ** (-1022 + 53 * (n - 1))
    checked = 0
    with mpmath.workprec(2 * 53 * n + 40):
        for i in range(x.shape[0]):
            argument = _value(x.limbs[:, i])
            exact = REFERENCES[name](argument)
            if exact == 0:
                assert _value(y.limbs[:, i]) == 0, f"{name} x{n} at {float(argument)!r}"
                continue
            if abs(exact) < normal:
                continue
            error = abs(_value(y.limbs[:, i]) - exact) / abs(exact) * mpmath.mpf(2) ** (53 * n)
            growth = OPERATION_BOUND[n] * float(argument) ** 2 if name == "erfc" else 0.0
            allowance = BOUNDS[name][n] + growth
            assert error <= allowance, f"{name} x{n} at {float(argument)!r}: {float(error):.3g}"
            checked += 1
    assert checked >= 0.8 * x.shape[0]


@pytest.mark.parametrize("n", LIMBS)
def test_the_edges_give_what_float64_gives(n):
    limbs = np.zeros((n, 6))
    limbs[0] = [np.inf, -np.inf, np.nan, 710.0, -746.0, 0.0]
    x = MultiFloatArray(limbs)
    e = functions.exp(x).limbs[0]
    assert e[0] == np.inf and e[1] == 0.0 and np.isnan(e[2]) and e[3] == np.inf
    assert e[4] == 0.0 and e[5] == 1.0
    c = functions.erfc(x).limbs[0]
    assert c[0] == 0.0 and c[1] == 2.0 and np.isnan(c[2]) and c[5] == 1.0
    log = functions.log(MultiFloatArray(limbs[:, [5, 1, 2]].copy())).limbs[0]
    assert log[0] == -np.inf and np.isnan(log[1]) and np.isnan(log[2])
    t = functions.tanh(x).limbs[0]
    assert t[0] == 1.0 and t[1] == -1.0 and t[5] == 0.0
