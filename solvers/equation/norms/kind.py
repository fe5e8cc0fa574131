"""NormKind: what every kind of norm knows of itself (docs/model.md sections 1, 7 and 8).

A norm of a layer is a map N: R^d -> R^d applied to every row (token) of a state, with
parameters in the order `NormKind.parameters` (a gain and a bias, each a scalar or a
vector of length d, then any scalar of the kind's own) and the layer's eps. A kind
validates its parameters, applies itself in every backend, bounds its Jacobian for the
readout's margins, and, where the kind has a constraint set whose tangent projection is
implemented, carries the post-norm flow (`tangent`); otherwise `post_refusal` says why
there is no post-norm flow.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import InvalidInputError, UndefinedOperationError
from solvers.validation import finite_array

Parameters = tuple
"""A norm's parameters, in the order of its kind's `parameters` names."""


_INSTANCES: dict[type, NormKind] = {}
"""The one instance of each kind (NormKind.__new__)."""


class NormKind(ABC):
    """One kind of norm, a singleton registered in solvers.equation.norms.KINDS.

    Kinds compare by identity; comparing one with a string is a TypeError, so that code
    asks a kind's properties instead of its name.
    """

    name: ClassVar[str]
    """The key in studies, model files and LayerWeights(norm_kind=...)."""
    title: ClassVar[str]
    """How messages name it."""
    parameters: ClassVar[tuple[str, ...]] = ("gain", "bias")
    """Its parameters' names, in the order a norm's tuple holds them."""
    extension: ClassVar[bool] = True
    """Whether it is a part beyond docs/model.md section 1, named (by its title) in the
    refusals of consumers that implement the layer norm only (`decoder_parts`)."""
    post_refusal: ClassVar[str | None] = None
    """Why a post-norm flow of this kind is refused, or None when `tangent` carries one."""
    takes_eps: ClassVar[bool] = True
    """Whether the layer's eps enters the norm (a kind without one refuses eps != 0)."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            raise TypeError(
                f"a norm kind is compared as an object, not with the string {other!r} "
                "(solvers.equation.norms)"
            )
        return self is other

    __hash__ = object.__hash__

    def __new__(cls) -> NormKind:
        """One instance per kind: a copy (a worker's, a deep copy) is the same object."""
        if cls not in _INSTANCES:
            _INSTANCES[cls] = super().__new__(cls)
        return _INSTANCES[cls]

    def __reduce__(self) -> tuple:
        return (type(self), ())

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def default(self) -> Parameters:
        """The parameters of a norm given none: gain 1, bias 0 (and the kind's defaults)."""
        return (1.0, 0.0)

    def checked(self, name: str, value: object, d: int) -> Parameters:
        """`value` as this kind's parameters (frozen float64 arrays) for rows of d features;
        InvalidInputError naming `name` and the part otherwise."""
        size = len(self.parameters)
        try:
            parts = tuple(value)
        except TypeError:
            parts = ()
        if len(parts) != size:
            raise InvalidInputError(
                f"{name} must be a tuple ({', '.join(self.parameters)}) for a {self.title}, "
                f"got {value!r:.80}"
            )
        checked = []
        for part, entry in zip(self.parameters, parts, strict=True):
            array = finite_array(f"{name} {part}", entry)
            allowed = ((), (d,)) if self.per_feature(part) else ((),)
            if array.shape not in allowed:
                what = (
                    "a scalar or a vector of length d=" + str(d) if len(allowed) > 1 else "a scalar"
                )
                raise InvalidInputError(f"{name} {part} must be {what}, got shape {array.shape}")
            checked.append(array)
        return self._own_checks(name, tuple(checked))

    @staticmethod
    def per_feature(part: str) -> bool:
        """Whether parameter `part` may be a vector of length d (the gain and the bias) or
        must be a scalar (a kind's own parameters)."""
        return part in ("gain", "bias")

    def _own_checks(self, name: str, parameters: Parameters) -> Parameters:
        """The kind's own constraints on checked parameters (none by default)."""
        return parameters

    def check_eps(self, eps: float) -> None:
        """Refuse eps != 0 for a kind that takes none."""
        if eps and not self.takes_eps:
            raise InvalidInputError(f"a {self.title} has no eps; got eps = {eps!r}")

    def random(self, rng: np.random.Generator, d: int, affine: bool) -> Parameters:
        """Seeded parameters for LayerWeights.random: with `affine` per-feature gains
        1 + 0.3 N(0, 1) and biases 0.3 N(0, 1); otherwise the defaults."""
        if not affine:
            return self.default()
        return 1.0 + 0.3 * rng.standard_normal(d), 0.3 * rng.standard_normal(d)

    operator: ClassVar[Callable[..., Array]]
    """The norm as a function of (bk, u, *parameters, eps, weights)."""

    def apply(
        self, bk: Backend, u: Array, parameters: Parameters, eps: Array, weights: object = None
    ) -> Array:
        """N(u) per row of u (..., N, d) in bk, with feature quadrature `weights` w^y (summing
        to 1; None: 1/d each) where the kind takes statistics over the features."""
        return type(self).operator(bk, u, *parameters, eps, weights)

    @abstractmethod
    def jacobian_bound(
        self, x: np.ndarray, parameters: Parameters, eps: float, weight: np.ndarray
    ) -> np.ndarray:
        """Per row of x (..., N, d), in float64, a bound of sum_i |d (N(x) W)_v / d x_i| for
        each column v of W (d, k): what a state's error moves the scores of a readout
        whose first map W follows the norm (solvers.network.readout, first order)."""

    def tangent(self, bk: Backend, u: Array, g: Array, weights: Array | None = None) -> Array:
        """Pi_T(u) g, the projection onto the tangent space of the kind's constraint set at
        u: defined for the kinds with a post-norm flow only."""
        raise InvalidInputError(f"{self.title}: {self.post_refusal}")


def require_positive(bk: Backend, statistic: Array, operator: str, row: str, what: str) -> None:
    """Raise UndefinedOperationError naming the first token whose row `statistic` (..., N, 1)
    is not certainly positive: `operator` is undefined at such a `row`."""
    zero = ~bk.certainly_positive(statistic[..., 0])
    if zero.any():
        where = tuple(int(i) for i in np.argwhere(zero)[0])
        token = where[-1]
        batch = f" in batch entry {where[:-1]}" if len(where) > 1 else ""
        raise UndefinedOperationError(
            f"{operator} is undefined at a {row}: token {token}{batch} has {what} "
            f"{bk.to_float64(statistic[where])[0]:.3g} in {bk!r} "
            "(use eps > 0 or perturb the row)"
        )


def radial_jacobian_bound(
    centred: np.ndarray, direct: np.ndarray, scaled: np.ndarray, eps: float
) -> np.ndarray:
    """direct / r + |c|_1 |c^T W~| / (d r^3) with r = sqrt(mean c^2 + eps): the bound of a
    norm c -> g c / r(c) composed with W (LN centres first; RMSNorm does not)."""
    d = centred.shape[-1]
    radius = np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + eps)
    l1 = np.abs(centred).sum(axis=-1, keepdims=True)
    return direct / radius + l1 * np.abs(centred @ scaled) / (d * radius**3)
