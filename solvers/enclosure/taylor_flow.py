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
    """D_u f(t, u) on `box` (balls of the state's shape (..., N, d); t a ball) by inputs:
    an object array (inputs, size, size) of balls, block b the Jacobian of input b's field
    in input b's state (outputs x inputs, both flattened, size = N d), containing the
    Jacobian at every point of the box. Inputs of a batch do not interact (attention,
    the norms and the feed-forward map act within an input), so every entry between two
    inputs is exactly 0 and only the blocks are computed: the first Taylor coefficient of
    f(t, box + tau e_j) for the N d seeds e_j that move component j of every input at
    once, all in one batched evaluation (docs/enclosures.md section 4)."""
    tokens = box.shape[-2:]
    size = int(np.prod(tokens))
    inputs = int(np.prod(box.shape[:-2]))
    tape = flow.bk.tape()
    batch = np.broadcast_to(np.asarray(box, dtype=object), (size, *box.shape))
    u = tape.variable(batch)
    field = flow.bk.coefficients(flow.field(n, t, u))
    seeds = np.eye(size, dtype=np.int64).astype(object)
    seeds = seeds.reshape(size, *[1] * (box.ndim - 2), *tokens)
    u.coefficients.append(np.ascontiguousarray(np.broadcast_to(seeds, batch.shape)))
    tape.advance()
    return field[1].reshape(size, inputs, size).transpose(1, 2, 0)
