"""Problem (initial data, controls, horizon, norm placement) and solve()."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

import numpy as np

from solvers.backends import Array, Backend
from solvers.backends import backend as resolve_backend
from solvers.controls import Controls, PiecewiseControls, SmoothControls
from solvers.errors import InvalidInputError, NumericalBreakdownError
from solvers.exact import ManufacturedSolution
from solvers.flow import LayerFlow
from solvers.operators import TokenMap
from solvers.reference import Reference
from solvers.schemes import LAYER_NORMS, LIE, SPLITTINGS, UNSPLIT, SteppingMethod
from solvers.validation import choice, finite_array, positive_int
from solvers.weights import _frozen

METHODS: dict[str, SteppingMethod] = {
    method.name: method
    for method in (
        *SPLITTINGS,
        *UNSPLIT,
        Reference(),
        Reference(name="reference-no-events", events=False),
    )
}


@dataclass(frozen=True, eq=False)
class Problem:
    """Integrate the layer flow from u0 on [0, t_final] under `controls`.

    u0 has shape (N, d) or (B, N, d). `norm` places the layer norms ("post", "pre",
    "none"; MODEL.md section 2). `causal` masks every token's attention to the tokens
    before it. `token_weights` (N positive numbers, the token quadrature weights w^x)
    add log w^x to the attention scores; None means the uniform grid (no bias).
    `feature_weights` (d positive numbers summing to 1, the feature quadrature weights
    w^y) make the layer norm's means and variances w^y-weighted; None means 1/d each.
    `manufactured` (a ManufacturedSolution of shape (N, d)) adds the forcing that makes it
    the exact solution; the solvers then start from it at working precision.
    `token_maps` (C_q (N, N), C_k (M, N), C_v (M, N)) are linear maps in the token
    variable applied to every layer's queries, keys and values before their biases: the
    CvT's convolutional projections, fixed in time (solvers.cvt.ConvProjection.matrices,
    keys and values on a coarser grid of M tokens when strided), or a selection of the
    rows that act as keys (passive probe tokens, solvers.vit.probed_problem); None means
    the identity. With token maps, `token_weights` has one weight per key (M), and
    `causal` is not allowed.
    """

    u0: np.ndarray
    controls: Controls
    t_final: float
    norm: str = "post"
    causal: bool = False
    token_weights: np.ndarray | None = None
    feature_weights: np.ndarray | None = None
    manufactured: ManufacturedSolution | None = None
    token_maps: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.controls, PiecewiseControls | SmoothControls):
            raise InvalidInputError(
                "controls must be PiecewiseControls or SmoothControls, "
                f"got {type(self.controls).__name__}"
            )
        d = self.controls.d_model
        u0 = finite_array("u0", self.u0)
        if u0.ndim not in (2, 3) or u0.shape[-1] != d or 0 in u0.shape:
            raise InvalidInputError(
                f"u0 must have shape (N, d) or (B, N, d) with d={d} and N, B >= 1, got {u0.shape}"
            )
        object.__setattr__(self, "u0", _frozen(u0))
        t_final = float(finite_array("t_final", self.t_final, ()))
        if not 0 < t_final <= self.controls.horizon:
            raise InvalidInputError(
                f"t_final must lie in (0, {self.controls.horizon}] (the controls' horizon), "
                f"got {t_final}"
            )
        object.__setattr__(self, "t_final", t_final)
        choice("norm", self.norm, LAYER_NORMS)
        if not isinstance(self.causal, bool | np.bool_):
            raise InvalidInputError(f"causal must be True or False, got {self.causal!r}")
        if self.token_maps is not None:
            object.__setattr__(self, "token_maps", self._checked_token_maps(self.token_maps))
        if self.token_weights is not None:
            keys = self.tokens if self.token_maps is None else len(self.token_maps[1])
            weights = finite_array("token_weights", self.token_weights, (keys,))
            if (weights <= 0).any():
                raise InvalidInputError(
                    f"token_weights must be > 0, got {weights[weights <= 0][0]} at token "
                    f"{int(np.argmax(weights <= 0))}"
                )
            object.__setattr__(self, "token_weights", _frozen(weights))
        if self.feature_weights is not None:
            weights = finite_array("feature_weights", self.feature_weights, (d,))
            if (weights <= 0).any() or abs(weights.sum() - 1) > 1e-12:
                raise InvalidInputError(
                    f"feature_weights must be positive and sum to 1, got sum {weights.sum()!r} "
                    f"and minimum {weights.min()!r}"
                )
            object.__setattr__(self, "feature_weights", _frozen(weights))
        if self.manufactured is not None:
            self._check_manufactured(self.manufactured)

    def _checked_token_maps(self, maps: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.causal:
            raise InvalidInputError(
                "token_maps cannot be combined with a causal mask (keys and queries are "
                "different token sets)"
            )
        try:
            query, key, value = maps
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"token_maps must be three matrices (C_q, C_k, C_v), got {maps!r:.80}"
            ) from exc
        n = self.tokens
        query = finite_array("token_maps C_q", query, (n, n))
        key = finite_array("token_maps C_k", key, (None, n))
        value = finite_array("token_maps C_v", value, (key.shape[0], n))
        positive_int("the key grid size (rows of C_k)", key.shape[0])
        return _frozen(query), _frozen(key), _frozen(value)

    def _check_manufactured(self, star: ManufacturedSolution) -> None:
        if not isinstance(star, ManufacturedSolution):
            raise InvalidInputError(
                f"manufactured must be a ManufacturedSolution, got {type(star).__name__}"
            )
        if self.feature_weights is not None:
            raise InvalidInputError(
                "a manufactured solution lies on S1 of the uniform feature grid; "
                "it cannot be combined with feature_weights"
            )
        if self.u0.shape != (star.tokens, star.d):
            raise InvalidInputError(
                f"the manufactured solution has shape {(star.tokens, star.d)}, u0 {self.u0.shape}"
            )
        if self.norm == "post":
            for n, layer in enumerate(self.controls.all_layers()):
                for name, (gain, bias) in (("norm1", layer.norm1), ("norm2", layer.norm2)):
                    if layer.eps != 0 or gain.ndim or gain != star.sigma2 or bias != star.sigma1:
                        raise InvalidInputError(
                            f"layer {n} {name} must be the projection onto the manufactured "
                            f"solution's S1 (gain {star.sigma2}, bias {star.sigma1}, eps 0)"
                        )

    @property
    def tokens(self) -> int:
        return self.u0.shape[-2]

    def score_bias(self, bk: Backend) -> Array | None:
        """The additive attention bias B: log w^x per key, and -inf above the diagonal if causal."""
        if self.token_weights is None and not self.causal:
            return None
        if self.token_maps is not None:  # one weight per key, for every query
            return bk.log(bk.asarray(self.token_weights, name="token_weights"))
        bias = bk.asarray(np.zeros((self.tokens, self.tokens)))
        if self.token_weights is not None:
            bias += bk.log(bk.asarray(self.token_weights, name="token_weights"))
        if self.causal:
            bias[np.triu_indices(self.tokens, k=1)] = bk.asarray(-np.inf)
        return bias

    def token_operators(self, bk: Backend) -> tuple[TokenMap, TokenMap, TokenMap] | None:
        """The token maps as operators x -> C x in bk (solvers.operators.attention)."""
        if self.token_maps is None:
            return None
        matrices = [bk.constant(c, name="token_maps") for c in self.token_maps]
        return tuple(partial(bk.matmul, c) for c in matrices)


def solve(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    backend: str | Backend = "float64",
) -> np.ndarray:
    """u(t_final) computed by `method` with `steps_per_unit` equal steps per unit of time.

    The steps land exactly on every layer boundary n (a final partial layer of length
    l < 1 gets ceil(l * steps_per_unit) equal steps). method "lie" with steps_per_unit=1
    is the standard Transformer; `METHODS` lists the others (Strang splittings with
    Euler, RK2, RK4 or exact sub-flows on tangent or ambient sub-fields, projected and
    ambient RK4, the extrapolation reference with and without ReLU event location).
    Returns a float array of the backend's precision (or an object array for the
    arbitrary-precision backends). Raises NumericalBreakdownError when the computation
    overflows or produces NaN in its number format.
    """
    return solve_layers(problem, method, steps_per_unit, backend)[-1]


def layer_lengths(t_final: float) -> list[Fraction]:
    """The length of each layer's interval [n, min(n + 1, t_final)], exactly."""
    end = Fraction(t_final)
    return [min(end, n + 1) - n for n in range(math.ceil(end))]


def checked_method(
    problem: Problem, method: str | SteppingMethod
) -> tuple[Problem, SteppingMethod]:
    """The problem and the method (resolved from its name) if the method can solve it.

    A post-LN flow lives on one constraint set per layer, so every method but the Lie
    scheme (the Transformer itself, which alternates between two) needs norm1 == norm2.
    """
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    if not isinstance(method, SteppingMethod):
        method = METHODS[choice("method", method, tuple(METHODS))]
    if problem.norm == "post" and method is not LIE:
        for n, layer in enumerate(problem.controls.all_layers()):
            same = all(np.array_equal(a, b) for a, b in zip(layer.norm1, layer.norm2, strict=True))
            if not same:
                raise InvalidInputError(
                    f"layer {n}: the post-LN flow of method {method.name!r} lives on one "
                    "constraint set per layer, so norm1 and norm2 must be equal (only the "
                    "Lie scheme, the Transformer itself, alternates between two)"
                )
    return problem, method


def solve_layers(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    backend: str | Backend = "float64",
) -> np.ndarray:
    """Like `solve`, but the states at t = 0, 1, ..., and t_final stacked on a leading axis.

    Entry n is u(min(n, t_final)): the output of the first n layers.
    """
    problem, method = checked_method(problem, method)
    steps_per_unit = positive_int("steps_per_unit", steps_per_unit)
    bk = resolve_backend(backend)

    def computation(working: Backend) -> Array:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
            return integrate(LayerFlow(problem, working), method, steps_per_unit)

    return bk.to_output(bk.certify(computation))


def integrate(flow: LayerFlow, method: SteppingMethod, steps_per_unit: int) -> Array:
    """The states at the layer boundaries of flow.problem, in flow.bk (already active).

    The driver behind `solve_layers`, exposed for instrumented flows (a LayerFlow
    subclass that records what the method evaluates); no validation, no certification.
    """
    problem, bk = flow.problem, flow.bk
    if problem.manufactured is not None:
        u = problem.manufactured.state(bk, bk.asarray(0))
    else:
        u = bk.asarray(problem.u0, name="u0")
    states = [u]
    for n, length in enumerate(layer_lengths(problem.t_final)):
        steps = math.ceil(length * steps_per_unit)
        if method.enters_constraint_set:
            u = flow.project(n, bk.asarray(n), u)
        u = method.advance(flow, n, bk.asarray(n), bk.asarray(length), steps, u)
        if not bk.all_finite(u):
            raise NumericalBreakdownError(
                f"{bk!r} produced inf or NaN in layer {n} (t in [{n}, {n + length}]): "
                "the values exceed what the format can hold"
            )
        states.append(u)
    return np.stack(states)
