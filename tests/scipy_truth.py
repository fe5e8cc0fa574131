"""Truths from scipy's integrators on tide's own fields (the operators are tide's, checked
against torch elsewhere; the integrator is not): DOP853 on a ReLU field crosses its
kinks by step-size control alone, without locating any."""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from solvers import Problem, backend
from solvers.equation.flow import LayerFlow


def dop853_layer(flow: LayerFlow, n: int, u: np.ndarray, rtol: float, dense: bool = False):
    """scipy's solution of layer n's field from u at t = n to n + 1 by DOP853 at
    rtol = atol = `rtol` (with its dense output when `dense`)."""
    shape = u.shape

    def field(t, y):
        return np.asarray(flow.field(n, np.float64(t), y.reshape(shape))).ravel()

    run = solve_ivp(
        field, (n, n + 1), u.ravel(), method="DOP853", rtol=rtol, atol=rtol, dense_output=dense
    )
    assert run.success, run.message
    return run


def dop853_final_state(problem: Problem, rtol: float) -> np.ndarray:
    """The state at t_final of a problem without norm projections (pre-LN or none), by
    DOP853 at rtol = atol = `rtol`, layer by layer on the field with its activation."""
    if problem.norm.constrained or problem.t_final != int(problem.t_final):
        raise ValueError("whole layers without the post-LN projections only")
    flow = LayerFlow.from_problem(problem, backend("float64"))
    u = np.array(problem.u0, dtype=np.float64)
    for n in range(int(problem.t_final)):
        u = dop853_layer(flow, n, u, rtol).y[:, -1].reshape(u.shape)
    return u
