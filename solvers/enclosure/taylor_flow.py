"""Taylor coefficients of the flow's solutions and the field's Jacobian, from one Taylor
evaluation of the field each (docs/enclosures.md section 2)."""

from __future__ import annotations

import numpy as np

from solvers.backends import Array
from solvers.equation.flow import LayerFlow


def solution_coefficients(flow: LayerFlow, n: int, t: Array, x: Array, order: int) -> list[Array]:
    """u_0 = x, u_1, ..., u_order: the Taylor coefficients in tau of the solution
    u(t + tau) of u' = f(t, u) through x at time t, on layer n, from u_{k+1} = f(t + tau,
    u)_k / (k + 1), the time a series t + tau too (smooth controls read it). With balls
    for x and t the coefficients enclose those of every solution through a point of x at
    a time of t, since coefficient k is a function of (t, x) computed in ball arithmetic.
    `flow` runs in a backend's Taylor series (Backend.taylor_series, active)."""
    tape = flow.bk.tape()
    u = tape.variable(x)
    time = tape.variable(t)
    field = flow.bk.coefficients(flow.field(n, time, u))
    time.coefficients.append(np.asarray(1, dtype=object))
    for k in range(order):
        u.coefficients.append(field[k] / (k + 1))
        if k + 1 < order:
            if k >= 1:
                time.coefficients.append(np.asarray(0, dtype=object))
            tape.advance()
    return u.coefficients


def field_jacobian(flow: LayerFlow, n: int, t: Array, box: Array) -> Array:
    """D_u f(t, u) on `box` (balls of the state's shape; t a ball), as a (size, size)
    object array of balls (outputs x inputs, both flattened) containing the Jacobian at
    every point of the box: the first Taylor coefficient of f(t, box + tau e_j) for every
    unit vector e_j, all in one batched evaluation."""
    size = int(np.prod(box.shape))
    tape = flow.bk.tape()
    batch = np.broadcast_to(np.asarray(box, dtype=object), (size, *box.shape))
    u = tape.variable(batch)
    field = flow.bk.coefficients(flow.field(n, t, u))
    unit = np.eye(size, dtype=np.int64).astype(object).reshape(size, *box.shape)
    u.coefficients.append(unit)
    tape.advance()
    return field[1].reshape(size, size).T
