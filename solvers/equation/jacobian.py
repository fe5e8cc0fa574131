"""Central-difference Jacobians of maps between states, in any backend."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import NumericalBreakdownError

BatchMap = Callable[[Array], Array]
"""Takes a batch of states (leading axis) to the batch of their images."""


def jacobian(bk: Backend, evaluate: BatchMap, u: Array, step: float) -> Array:
    """The central-difference Jacobian (outputs x inputs, both flattened) of `evaluate` at u.

    Column j is (f(u + h e_j) - f(u - h e_j)) / 2h, all 2 n columns in one batched call;
    truncation O(h^2 |f'''|), rounding O(u_r |f| / h). Computed in bk (active), so that at
    high precision both are far below the quantities the Jacobian is used for.
    """
    size = int(np.prod(u.shape))
    unit = bk.asarray(np.eye(size).reshape(size, *u.shape))
    h = bk.asarray(step)
    out = evaluate(np.concatenate([u + unit * h, u - unit * h]))
    if not bk.all_finite(out):
        raise NumericalBreakdownError(f"{bk!r} produced inf or NaN in a perturbed evaluation")
    columns = (out[:size] - out[size:]) / (2 * h)
    return columns.reshape(size, -1).T


def relative_step(bk: Backend, u: Array, relative: float) -> float:
    """A difference step of `relative` times the state's size (at least 1)."""
    return relative * bk.error_scale(u)
