"""Work against precision: the error-controlled reference beside what a user would pick
instead, mpmath.odefun (Taylor series) at 30 and 50 digits and scipy's DOP853 in float64.

The flow: one post-LN GELU layer, (tokens, d, heads, d_ff) = (3, 4, 2, 8), seeded. Every
error is the max-abs difference from solve_reference at 20 more digits (tolerance
10^-(digits + 14)). The issue's targets (issue 15), asserted by `test_targets` from the
numbers just measured, for each of the suite's high-precision backends (mpmath and arb):
at 30 and 50 digits, solve_reference(tol=10^-(digits - 4)) reaches the interval end at
least 100x faster than mpmath.odefun asked for the same tolerance at the same working
precision (mp.dps = digits), and with no more field evaluations than the fewest fixed
steps of the order-24 extrapolation ("extrapolation", 157 evaluations a step, in the same
backend) that reach its error (when none up to 32 steps does, the fixed steps having
stopped at their rounding floor, there is none to compare with, and the most accurate is
printed). And, at equal error (issue 32), solve_reference at the loosest decade, then
half-decade, of tolerance that reaches odefun's error (searched from 10^-(digits / 2)
down to the default; when 10^-(digits / 2) already reaches it, a looser one might too,
the time is an upper bound and the line says so) timed again against odefun (at its one
tolerance, not searched): one line per backend and digits, printed as figures, and one in
the multi-float format of those digits (float64x3 at 30, float64x4 at 50), whose target
is 300x (issue 45). The
float64 series (solve_reference against DOP853 over the whole layer) are
measured and plotted, not asserted. The figure (error against wall time, log-log) is
written under pytest's temporary directory; its path is printed.

odefun differentiates numerically: it takes Euler steps of 2^-(tol bits) at a precision of
prec * (degree + 1) bits (about 5000 at 30 digits, 13000 at 50), so its field is evaluated
at mpmath's current precision, as a field written for mpmath is; one held at the working
precision would feed it noise and it would shrink its series without end.

Intervals: [0, 1/4] at 30 digits, an eighth of the issue's T = 2, and [0, 1/32] at 50
digits, inside odefun's first series there, so that the module runs in minutes. The ratio
depends on the interval (odefun's cost per series is nearly fixed while the reference's
grows with the length), and on gmpy2, a core dependency on which mpmath's numbers are GMP
integers (odefun, whose numbers have thousands of bits, gains most). `test_targets` prints
the ratios, the evaluations and the errors of each run.

    python -m pytest benchmarks/test_reference_work_precision.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import dataclasses
import functools
import time

import mpmath
import numpy as np
import pytest
from mpmath.libmp import prec_to_dps
from scipy.integrate import solve_ivp

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve, solve_reference
from solvers.equation.flow import LayerFlow
from solvers.integrators.tableaux import extrapolation_evaluations

TOKENS, D, HEADS, D_FF, SEED = 3, 4, 2, 8, 0
DIGITS = (30, 50)
BACKENDS = ("mpmath", "arb")
"""The high-precision backends the targets are asserted for."""
MULTI_FLOAT = {30: "float64x3", 50: "float64x4"}
"""The multi-float format of each digits' line at equal error (issue 45): 48 and 64
digits, the narrowest holding 30 and 50."""
MULTI_FLOAT_SPEEDUP = 300
"""Their target at equal error against odefun; the mpmath and arb lines at equal error
(43x and 26x when issue 45 was filed) are printed as figures, not targets."""
FLOAT64 = 16
"""The key of float64 in INTERVAL and truth(): its digits, near enough."""
INTERVAL = {30: 1 / 4, 50: 1 / 32, FLOAT64: 1.0}
"""The interval [0, T] by working digits (float64: the whole layer)."""
TRUTH_DIGITS = 20
"""The truth's digits above the working precision."""
TARGET_SPEEDUP = 100
FIXED_EVALUATIONS = extrapolation_evaluations(12)
"""Field evaluations of one fixed step of the order-24 "extrapolation" (12 columns): 157."""
STEP_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
"""Fixed step counts over the interval, searched in order for the first to reach the error."""
REFERENCE_TOLS = (8, 4, None)
"""solve_reference's tolerances at `digits`: 10^-(digits - k), and None (the default); k = 4
is the run the targets are about."""
DEFAULT_EXPONENT = -1
"""solve_reference's default tolerance at D digits, 10^-D / 10, as 10^-(D - k)."""
FLOAT64_REFERENCE_TOLS = (1e-6, 1e-8, 1e-10, 1e-12, None)
DOP853_TOLS = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13)
FLOAT64_ROUNDS = 3


@dataclasses.dataclass(frozen=True)
class Run:
    """One point of the work-precision figure."""

    solver: str
    precision: str
    interval: float
    tol: float | None
    seconds: float
    error: float
    evaluations: int
    estimate: float | None = None
    """solve_reference's own estimate of its error."""


runs: list[Run] = []
targets: dict[tuple, Run] = {}
"""("reference" | "reference, default tol" | "fixed" | "equal error", backend, digits) and
("odefun", digits); "equal error" is None when no tolerance searched reaches odefun's."""
reached_at_the_loosest: set[tuple[str, int]] = set()
"""(backend, digits) whose equal-error search reached odefun's error at its loosest
tolerance: a looser one might too, and its time is an upper bound."""


@functools.cache
def problem(t_final: float) -> Problem:
    rng = np.random.default_rng(SEED)
    layer = dataclasses.replace(LayerWeights.random(D, HEADS, D_FF, rng), activation="gelu")
    u0 = rng.standard_normal((TOKENS, D))
    return Problem(u0, PiecewiseControls([layer]), t_final, norm="post")


@functools.cache
def truth(digits: int) -> tuple[np.ndarray, float]:
    """u(T) at digits + TRUTH_DIGITS and its own error estimate (untimed)."""
    truth_digits = digits + TRUTH_DIGITS
    result = solve_reference(
        problem(INTERVAL[digits]),
        tol=10.0 ** -(truth_digits - 6),
        backend=backend("mpmath", truth_digits),
    )
    return result.states[-1], result.error[-1]


def max_error(state: object, digits: int) -> float:
    """Max-abs difference from the truth, subtracted exactly."""
    exact, _ = truth(digits)
    with mpmath.workdps(digits + TRUTH_DIGITS + 40):
        pairs = zip(np.ravel(state), np.ravel(exact), strict=True)
        return float(max(abs(mpmath.mpf(x) - mpmath.mpf(y)) for x, y in pairs))


def timed(benchmark, run, rounds: int = 1):
    """run() under pytest-benchmark (median of `rounds`, after a warm-up round when there are
    several): its result and the seconds."""
    result = benchmark.pedantic(run, rounds=rounds, iterations=1, warmup_rounds=int(rounds > 1))
    return result, benchmark.stats.stats.median


def tolerance(digits: int, k: int | None) -> float | None:
    return None if k is None else 10.0 ** -(digits - k)


def reference_run(result, name: str, digits: int, seconds: float) -> Run:
    """The figure's point for a solve_reference result in `name` at `digits`."""
    return Run(
        "solve_reference",
        f"{name} {digits}",
        INTERVAL[digits],
        result.tolerance,
        seconds,
        max_error(result.states[-1], digits),
        result.evaluations,
        result.error[-1],
    )


@pytest.mark.parametrize("k", REFERENCE_TOLS, ids=lambda k: "default" if k is None else f"d-{k}")
@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("digits", DIGITS)
def test_reference_high_precision(benchmark, digits, name, k):
    benchmark.group = f"work-precision, {digits} digits, T = {INTERVAL[digits]}"
    truth(digits)  # outside the timing
    bk, tol = backend(name, digits), tolerance(digits, k)
    result, seconds = timed(
        benchmark, lambda: solve_reference(problem(INTERVAL[digits]), tol=tol, backend=bk)
    )
    run = reference_run(result, name, digits, seconds)
    runs.append(run)
    if k in (4, None):
        targets["reference" if k == 4 else "reference, default tol", name, digits] = run
    assert run.error <= 10 * max(result.error[-1], result.tolerance)


def odefun_final_state(flow_problem: Problem, digits: int, tol: float) -> tuple[np.ndarray, int]:
    """u(T) by mpmath.odefun (default degree) at mp.dps = digits, and its field evaluations.

    The field is evaluated at the precision odefun sets (see the module docstring): one
    mpmath backend and LayerFlow per precision, built on first use (inside the timing).
    """
    shape = flow_problem.u0.shape
    flows: dict[int, tuple] = {}
    calls = 0

    def field(x, y):
        nonlocal calls
        calls += 1
        prec = mpmath.mp.prec
        if prec not in flows:
            bk = backend("mpmath", prec_to_dps(prec) + 1)  # at least prec bits
            with bk.active():
                flows[prec] = bk, LayerFlow.from_problem(flow_problem, bk)
        bk, flow = flows[prec]
        with bk.active():
            u, t = bk.asarray(np.array(y, dtype=object).reshape(shape)), bk.asarray(x)
            du = flow.field(0, t, u)
        return [mpmath.mp.mpf(v) for v in du.ravel()]

    with mpmath.workdps(digits):
        bk = backend("mpmath", digits)
        with bk.active():
            flow = LayerFlow.from_problem(flow_problem, bk)
            u0 = flow.project(0, bk.asarray(0), bk.asarray(flow_problem.u0))
        solution = mpmath.odefun(field, 0, [mpmath.mp.mpf(v) for v in u0.ravel()], tol=tol)
        end = solution(mpmath.mpf(flow_problem.t_final))
    return np.array(end, dtype=object).reshape(shape), calls


@pytest.mark.parametrize("digits", DIGITS)
def test_odefun(benchmark, digits):
    benchmark.group = f"work-precision, {digits} digits, T = {INTERVAL[digits]}"
    truth(digits)
    tol = tolerance(digits, 4)
    (state, calls), seconds = timed(
        benchmark, lambda: odefun_final_state(problem(INTERVAL[digits]), digits, tol)
    )
    run = Run(
        "mpmath.odefun",
        f"mpmath {digits}",
        INTERVAL[digits],
        tol,
        seconds,
        max_error(state, digits),
        calls,
    )
    runs.append(run)
    targets["odefun", digits] = run
    assert run.error <= 10 * tol


def number_system(name: str, digits: int):
    """`name` at `digits` (mpmath, arb), or the fixed format `name` (a multi-float)."""
    return backend(name, digits) if name in BACKENDS else backend(name)


EQUAL_ERROR = [(digits, name) for digits in DIGITS for name in (*BACKENDS, MULTI_FLOAT[digits])]
"""The lines at equal error: each high-precision backend at each digits, and the
multi-float format of those digits."""


@pytest.mark.parametrize(("digits", "name"), EQUAL_ERROR)
def test_reference_at_equal_error(benchmark, digits, name):
    """solve_reference at a tolerance 10^-(digits - k) whose error reaches odefun's: k
    from digits / 2 down by one to the default (DEFAULT_EXPONENT) until the error reaches
    it, then k + 1/2 if that reaches it too (the error is not monotone in the tolerance,
    so this is the loosest decade and half-decade, not the loosest tolerance). The search
    is timed with perf_counter (for the figure), the tolerance found timed again under the
    benchmark. When none reaches odefun's error, None is recorded and test_targets says
    so."""
    benchmark.group = f"work-precision, {digits} digits, T = {INTERVAL[digits]}"
    if ("odefun", digits) not in targets:
        pytest.fail("run the whole module: the search needs odefun's error first")
    goal = targets["odefun", digits].error
    bk, flow_problem = number_system(name, digits), problem(INTERVAL[digits])

    def reaches(k: float) -> bool:
        start = time.perf_counter()
        result = solve_reference(flow_problem, tol=tolerance(digits, k), backend=bk)
        seconds = time.perf_counter() - start
        run = reference_run(result, name, digits, seconds)
        runs.append(run)
        return run.error <= goal

    found = next((k for k in range(digits // 2, DEFAULT_EXPONENT - 1, -1) if reaches(k)), None)
    targets["equal error", name, digits] = None
    if found is None:
        return
    if found == digits // 2:
        reached_at_the_loosest.add((name, digits))
    elif reaches(found + 0.5):
        found += 0.5
    tol = tolerance(digits, found)
    result, seconds = timed(benchmark, lambda: solve_reference(flow_problem, tol=tol, backend=bk))
    targets["equal error", name, digits] = reference_run(result, name, digits, seconds)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("digits", DIGITS)
def test_fixed_step(benchmark, digits, name):
    """The fewest fixed steps reaching the controlled reference's error; the search is timed
    with perf_counter (for the figure), the count found again under the benchmark. When no
    count reaches it, the most accurate is recorded."""
    benchmark.group = f"work-precision, {digits} digits, T = {INTERVAL[digits]}"
    if ("reference", name, digits) not in targets:
        pytest.fail("run the whole module: the search needs solve_reference's error first")
    goal = targets["reference", name, digits].error
    bk, flow_problem = backend(name, digits), problem(INTERVAL[digits])

    def steps_per_unit(steps: int) -> int:
        per_unit = round(steps / flow_problem.t_final)
        assert per_unit * flow_problem.t_final == steps  # the steps land on T
        return per_unit

    errors: dict[int, float] = {}
    for steps in STEP_COUNTS:
        start = time.perf_counter()
        state = solve(flow_problem, "extrapolation", steps_per_unit(steps), bk)
        seconds = time.perf_counter() - start
        errors[steps] = max_error(state, digits)
        runs.append(
            Run(
                "fixed-step extrapolation",
                f"{name} {digits}",
                INTERVAL[digits],
                None,
                seconds,
                errors[steps],
                steps * FIXED_EVALUATIONS,
            )
        )
        if errors[steps] <= goal:
            break
    reaching = [steps for steps, error in errors.items() if error <= goal]
    best = min(reaching) if reaching else min(errors, key=errors.__getitem__)
    state, seconds = timed(
        benchmark, lambda: solve(flow_problem, "extrapolation", steps_per_unit(best), bk)
    )
    targets["fixed", name, digits] = Run(
        f"fixed-step extrapolation, {best} steps",
        f"{name} {digits}",
        INTERVAL[digits],
        None,
        seconds,
        max_error(state, digits),
        best * FIXED_EVALUATIONS,
    )


def dop853_final_state(flow_problem: Problem, tol: float) -> tuple[np.ndarray, int]:
    """u(T) by scipy's DOP853 (rtol = atol = tol) on the flow's float64 tangent field."""
    bk = backend("float64")
    with bk.active():
        flow = LayerFlow.from_problem(flow_problem, bk)
        u0 = flow.project(0, bk.asarray(0.0), bk.asarray(flow_problem.u0))

        def field(t: float, y: np.ndarray) -> np.ndarray:
            u, s = y.reshape(u0.shape), bk.asarray(t)
            return flow.field(0, s, u).ravel()

        span = (0.0, flow_problem.t_final)
        solution = solve_ivp(field, span, u0.ravel(), method="DOP853", rtol=tol, atol=tol)
    assert solution.success, solution.message
    return solution.y[:, -1].reshape(u0.shape), solution.nfev


@pytest.mark.parametrize("tol", FLOAT64_REFERENCE_TOLS, ids=str)
def test_reference_float64(benchmark, tol):
    benchmark.group = f"work-precision, float64, T = {INTERVAL[FLOAT64]}"
    truth(FLOAT64)
    result, seconds = timed(
        benchmark,
        lambda: solve_reference(problem(INTERVAL[FLOAT64]), tol=tol, backend="float64"),
        FLOAT64_ROUNDS,
    )
    error = max_error(result.states[-1], FLOAT64)
    runs.append(
        Run(
            "solve_reference",
            "float64",
            INTERVAL[FLOAT64],
            result.tolerance,
            seconds,
            error,
            result.evaluations,
            result.error[-1],
        )
    )
    assert error <= 10 * max(result.error[-1], result.tolerance)


@pytest.mark.parametrize("tol", DOP853_TOLS, ids=str)
def test_dop853_float64(benchmark, tol):
    benchmark.group = f"work-precision, float64, T = {INTERVAL[FLOAT64]}"
    truth(FLOAT64)
    (state, calls), seconds = timed(
        benchmark, lambda: dop853_final_state(problem(INTERVAL[FLOAT64]), tol), FLOAT64_ROUNDS
    )
    runs.append(
        Run(
            "scipy DOP853",
            "float64",
            INTERVAL[FLOAT64],
            tol,
            seconds,
            max_error(state, FLOAT64),
            calls,
        )
    )
    assert np.isfinite(state).all()


def equal_error_lines() -> list[str]:
    """Per line of EQUAL_ERROR, solve_reference at the tolerance that reaches odefun's error
    (test_reference_at_equal_error) against odefun: the comparison at equal error (issue 32,
    item 5; issue 45). Returns the failures of the multi-float target (MULTI_FLOAT_SPEEDUP)
    and of a missing run; the mpmath and arb lines are figures."""
    failures = []
    for digits, name in EQUAL_ERROR:
        odefun = targets["odefun", digits]
        ours = targets["equal error", name, digits]
        if ours is None or ours.error > odefun.error:
            failures.append(
                f"{name} {digits} digits: no solve_reference tolerance down to the default "
                "reaches odefun's error"
            )
            continue
        ratio = odefun.seconds / ours.seconds
        loosest = (
            " (the loosest tolerance searched: a looser one may be faster)"
            if (name, digits) in reached_at_the_loosest
            else ""
        )
        target = MULTI_FLOAT_SPEEDUP if name == MULTI_FLOAT[digits] else None
        print(
            f"odefun at equal error: {name} {digits} digits: tide {ours.seconds:.3g} s error "
            f"{ours.error:.1e} (tol {ours.tol:.0e}), odefun {odefun.seconds:.3g} s error "
            f"{odefun.error:.1e}: {ratio:.1f}x"
            + ("" if target is None else f" (target >= {target}x)")
            + loosest
        )
        if target is not None and ratio < target:
            failures.append(f"{name} {digits} digits at equal error: {ratio:.1f}x")
    return failures


def save_figure(path) -> None:
    """Error against wall time, log-log, one series per solver and precision."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7.5, 5.5))
    series: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        series.setdefault((run.solver, run.precision), []).append(run)
    for (solver, precision), points in series.items():
        points = sorted(points, key=lambda run: -run.error)
        axes.loglog(
            [run.seconds for run in points],
            [max(run.error, 1e-300) for run in points],
            marker="o" if solver == "mpmath.odefun" else ".",
            markersize=8 if solver == "mpmath.odefun" else 6,
            label=f"{solver}, {precision}, T = {points[0].interval:g}",
        )
    axes.set_xlabel("wall time (s)")
    axes.set_ylabel("max-abs error at T")
    axes.set_title(f"post-LN GELU layer ({TOKENS} tokens, d = {D}, d_ff = {D_FF}), seed {SEED}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark, tmp_path_factory):
    """The table, the figure, the ratios, and the targets asserted on them (the fixture keeps
    this test running under --benchmark-only)."""
    needed = (
        {("odefun", digits) for digits in DIGITS}
        | {
            (what, name, digits)
            for what in ("reference", "fixed")
            for name in BACKENDS
            for digits in DIGITS
        }
        | {("equal error", name, digits) for digits, name in EQUAL_ERROR}
    )
    if not needed <= set(targets):
        pytest.fail(f"run the whole module with --benchmark-only; missing {needed - set(targets)}")
    print(
        f"\n{'solver':<24}{'precision':<12}{'T':>8}{'tol':>10}{'time s':>10}"
        f"{'error':>11}{'estimate':>11}{'evaluations':>13}"
    )
    for run in runs:
        tol = "-" if run.tol is None else f"{run.tol:.0e}"
        estimate = "-" if run.estimate is None else f"{run.estimate:.2e}"
        print(
            f"{run.solver:<24}{run.precision:<12}{run.interval:>8.5g}{tol:>10}"
            f"{run.seconds:>10.4g}{run.error:>11.2e}{estimate:>11}{run.evaluations:>13}"
        )
    for digits in (*DIGITS, FLOAT64):
        _, estimate = truth(digits)
        print(
            f"truth for {digits} digits: {digits + TRUTH_DIGITS} digits, own estimate "
            f"{estimate:.2e}"
        )
    path = tmp_path_factory.mktemp("work_precision") / "work_precision.png"
    save_figure(path)
    print(f"work-precision figure: {path}")

    failures = []
    for digits, name in ((digits, name) for digits in DIGITS for name in BACKENDS):
        odefun = targets["odefun", digits]
        reference, fixed = (targets[what, name, digits] for what in ("reference", "fixed"))
        speedup = odefun.seconds / reference.seconds
        reaches = fixed.error <= reference.error
        print(
            f"{name} {digits} digits, T = {INTERVAL[digits]}: odefun {odefun.seconds:.3g} s "
            f"(error {odefun.error:.2e}, {odefun.evaluations} evaluations at its raised "
            f"precision), solve_reference {reference.seconds:.3g} s (error "
            f"{reference.error:.2e}, {reference.evaluations} evaluations): {speedup:.1f}x "
            f"faster (target >= {TARGET_SPEEDUP}x); "
            + (
                "fewest fixed steps reaching it"
                if reaches
                else "no fixed count reaches it; the most accurate"
            )
            + f": {fixed.solver} {fixed.seconds:.3g} s (error {fixed.error:.2e}, "
            f"{fixed.evaluations} evaluations)"
        )
        if speedup < TARGET_SPEEDUP:
            failures.append(
                f"{name} {digits} digits: {speedup:.1f}x faster than odefun, not {TARGET_SPEEDUP}x"
            )
        if reaches and reference.evaluations > fixed.evaluations:
            failures.append(
                f"{name} {digits} digits: {reference.evaluations} field evaluations, more than "
                f"the {fixed.evaluations} of {fixed.solver}"
            )
        default = targets.get(("reference, default tol", name, digits))
        if default is not None:
            print(
                f"  solve_reference at its default tolerance ({default.tol:.1e}): "
                f"{default.seconds:.3g} s, error {default.error:.2e}, "
                f"{odefun.seconds / default.seconds:.1f}x faster than odefun"
            )
    failures += equal_error_lines()
    float64 = [run for run in runs if run.precision == "float64"]
    for run in (run for run in float64 if run.solver == "solve_reference"):
        rivals = [r for r in float64 if r.solver == "scipy DOP853" and r.error <= run.error]
        rival = min(rivals, key=lambda r: r.seconds, default=None)
        versus = (
            "no DOP853 run reaches it"
            if rival is None
            else f"DOP853's fastest run as accurate ({rival.tol:.0e}) took {rival.seconds:.3g} s "
            f"({rival.seconds / run.seconds:.2f}x)"
        )
        print(
            f"float64 solve_reference tol {run.tol:.1e}: error {run.error:.2e} in "
            f"{run.seconds:.3g} s; {versus}"
        )
    assert not failures, "; ".join(failures)
