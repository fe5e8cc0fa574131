"""The reference's controller on plain ODEs, no Transformer: u' = lambda u, and a scalar
field with a ReLU kink, u' = 1 - 2 relu(u - 1/2), whose solutions are known in closed
form (docs/schemes.md sections 7 and 8). The error estimate, the caps and the events come
from the System handed to the controller (solvers.reference.system)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from solvers import backend
from solvers.errors import IntegrationError
from solvers.methods.kinks import ActivationPattern
from solvers.reference.controller import Controller, Work
from solvers.reference.system import System

T = 2.0
BACKENDS = [(backend("float64"), 1e-12), (backend("mpmath", 30), 1e-25)]


def _run(system, u0, tol, *, max_steps=10_000, on_step=None):
    """The controller across [0, T] from u0: its state, its global estimate and its work."""
    bk = system.bk
    controller = Controller(bk, tol, max_steps, Work())
    with bk.active():
        u = controller.cross(system, bk.asarray(0.0), bk.asarray(u0), bk.asarray(T), None, on_step)
    return u, controller.error, controller.work


def _distance(bk, u, exact: list[str]) -> float:
    """max |u - exact| with the exact values given as decimal strings (60 digits)."""
    with bk.active():
        return float(np.max(np.abs(bk.to_float64(u - bk.asarray(np.array([exact]))))))


def _linear(bk, rate, caps=()):
    return System(bk, lambda t, u, pattern: bk.asarray(rate) * u, caps=caps)


@pytest.mark.parametrize(("bk", "tol"), BACKENDS, ids=["float64", "mpmath30"])
@pytest.mark.parametrize("rate", [-1.5, 0.8])
def test_a_linear_ode_is_crossed_within_its_own_estimate(bk, tol, rate):
    """u(T) = u0 exp(rate T): the controller's state is no further from it than its own
    global estimate, and that estimate is within a few tolerances per accepted step."""
    u0 = np.array([[1.0, 2.0]])
    u, estimate, work = _run(_linear(bk, rate), u0, tol)
    with mpmath.workdps(60):
        exact = [mpmath.nstr(v * mpmath.exp(mpmath.mpf(rate) * T), 60) for v in (1, 2)]
    error = _distance(bk, u, exact)
    scale = 2.0 * max(1.0, np.exp(rate * T))
    assert error <= estimate <= 4 * tol * scale * work.accepted
    assert work.events == [] and work.accepted >= 1


def test_a_cap_bounds_every_step():
    """A cap provider of 0.05 holds every accepted step to at most 0.05: at least T / 0.05
    steps, and the state as accurate as without the cap."""
    bk, tol = BACKENDS[0]
    sizes = []
    system = _linear(bk, -1.5, caps=(lambda t, u, start: 0.05,))
    u, estimate, work = _run(system, np.array([[1.0]]), tol, on_step=lambda s: sizes.append(s.h))
    assert max(float(h) for h in sizes) <= 0.05 * (1 + 1e-15)
    assert work.accepted == len(sizes) >= T / 0.05
    assert _distance(bk, u, [repr(float(np.exp(-1.5 * T)))]) <= max(estimate, 1e-15)


def test_the_budget_is_enforced_with_the_systems_name():
    bk, tol = BACKENDS[0]
    system = _linear(bk, 1.0, caps=(lambda t, u, start: 0.01,))
    with pytest.raises(IntegrationError, match=r"the ODE, t = .*budget of 5 steps"):
        _run(system, np.array([[1.0]]), tol, max_steps=5)


def _kinked(bk):
    """u' = 1 - 2 relu(u - 1/2), its unit's pattern p held: 1 - 2 p (u - 1/2); the unit's
    pre-activation is z = u - 1/2 and it moves the field by 2 per unit of activation."""
    one, two, half = bk.asarray(1.0), bk.asarray(2.0), bk.asarray(0.5)

    def preactivation(t, u):
        return u - half

    def field(t, u, pattern):
        if pattern is None:
            pattern = bk.asarray((bk.to_float64(u - half) > 0).astype(np.float64))
        return one - two * pattern * (u - half)

    weights = np.full((1, 1), 2.0)

    def events(t, u):
        return ActivationPattern.watch(bk, preactivation, t, u, weights, bk.error_scale)

    return System(bk, field, events=events)


@pytest.mark.parametrize(("bk", "tol"), BACKENDS, ids=["float64", "mpmath30"])
def test_a_kink_is_located_and_crossed_within_the_estimate(bk, tol):
    """From u(0) = 0, u = t until the unit switches on at t = 1/2, then
    u = 1 - exp(-2 (t - 1/2)) / 2: one event, at 1/2, and u(T) within the estimate."""
    u, estimate, work = _run(_kinked(bk), np.array([[0.0]]), tol)
    assert [(e.layer, e.unit) for e in work.events] == [(0, (0, 0))]
    assert abs(work.events[0].time - 0.5) <= 1e-12
    with mpmath.workdps(60):
        exact = [mpmath.nstr(1 - mpmath.exp(-2 * (mpmath.mpf(T) - 0.5)) / 2, 60)]
    error = _distance(bk, u, exact)
    assert error <= estimate <= 4 * tol * work.accepted
    assert work.cut >= 1
