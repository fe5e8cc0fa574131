"""Arrays of multi-float numbers that numpy code handles as it handles its own arrays.

A `MultiFloatArray` holds its numbers as one float64 array `limbs` of shape (n, *shape):
limbs[k] is the k-th limb of every element (docs/rounding.md section 6). Indexing,
slicing, reshapes, transposes, concatenation and the like act on the element axes and
carry the limb axis along (a negative axis means the same axis of the limbs, a
non-negative one is shifted past the limb axis); `+ - * /`, negation, absolute value,
sqrt and comparisons run the compiled kernels of `kernels`. numpy's own functions
reach these through `__array_ufunc__` and `__array_function__`, so the operators, written
once for numpy arrays, run on multi-float arrays unchanged. What is not implemented raises
TypeError rather than passing through float64: a silent conversion would drop every limb
but the first. Other operands (Python numbers, float arrays, booleans, and object
arrays of Fractions or mpmath numbers) are read exactly where n limbs hold them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from solvers.backends.multifloat import conversion, kernels


class MultiFloatArray(NDArrayOperatorsMixin):
    """Multi-float numbers of n limbs in an array of element shape `limbs.shape[1:]`."""

    __slots__ = ("limbs",)

    def __init__(self, limbs: np.ndarray) -> None:
        self.limbs = limbs

    @property
    def limb_count(self) -> int:
        return self.limbs.shape[0]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.limbs.shape[1:]

    @property
    def ndim(self) -> int:
        return self.limbs.ndim - 1

    @property
    def size(self) -> int:
        return self.limbs[0].size

    @property
    def T(self) -> MultiFloatArray:
        return self.transpose()

    @property
    def flat(self):
        """The elements in row-major order, each a 0-d multi-float array."""
        flat = self.limbs.reshape(self.limb_count, -1)
        return (MultiFloatArray(flat[:, i]) for i in range(flat.shape[1]))

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"MultiFloatArray(x{self.limb_count}, shape={self.shape})"

    def __float__(self) -> float:
        if self.size != 1:
            raise TypeError("only a single multi-float converts to float")
        return float(np.sum(self.limbs.reshape(self.limb_count)[::-1]))

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "a multi-float array does not convert to a numpy array implicitly (it would keep "
            "one limb of its numbers); use its backend's to_float64 or to_strings"
        )

    def __getitem__(self, key: Any) -> MultiFloatArray:
        return MultiFloatArray(self.limbs[_limb_key(key)])

    def __setitem__(self, key: Any, value: object) -> None:
        target = self.limbs[0][key].shape
        self.limbs[_limb_key(key)] = aligned(limbs_of(value, self.limb_count), target)

    def copy(self) -> MultiFloatArray:
        return MultiFloatArray(self.limbs.copy())

    def reshape(self, *shape: Any) -> MultiFloatArray:
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        return MultiFloatArray(self.limbs.reshape(self.limb_count, *shape))

    def transpose(self, *axes: int) -> MultiFloatArray:
        if len(axes) == 1 and isinstance(axes[0], tuple | list):
            axes = tuple(axes[0])
        if not axes:
            axes = tuple(range(self.ndim))[::-1]
        return MultiFloatArray(self.limbs.transpose(0, *(_axis(a, self.ndim) for a in axes)))

    def swapaxes(self, first: int, second: int) -> MultiFloatArray:
        return MultiFloatArray(self.limbs.swapaxes(_limb_axis(first), _limb_axis(second)))

    def ravel(self) -> MultiFloatArray:
        return self.reshape(-1)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any):
        handler = _UFUNCS.get(ufunc)
        if method != "__call__" or handler is None or set(kwargs) - {"out"}:
            return NotImplemented
        n = max(x.limb_count for x in inputs if isinstance(x, MultiFloatArray))
        result = handler(n, *inputs)
        out = kwargs.get("out")
        if out is None:
            return result
        (target,) = out
        if not isinstance(target, MultiFloatArray) or not isinstance(result, MultiFloatArray):
            return NotImplemented
        target.limbs[...] = aligned(result.limbs, target.shape)
        return target

    def __array_function__(self, func: Callable, types: tuple, args: tuple, kwargs: dict):
        handler = _FUNCTIONS.get(func)
        if handler is None:
            return NotImplemented
        return handler(*args, **kwargs)


def _axis(axis: int, ndim: int) -> int:
    """An element axis as the limb array's axis (0 is the limbs)."""
    return (axis % ndim) + 1


def _limb_axis(axis: int) -> int:
    """An element axis, negative or not, as the same axis of the limb array."""
    return axis if axis < 0 else axis + 1


def _limb_key(key: Any) -> tuple:
    return (slice(None), *(key if isinstance(key, tuple) else (key,)))


def limbs_of(value: object, n: int) -> np.ndarray:
    """The limbs (n, *shape) of a multi-float array, or of any value `conversion.read`
    reads (a float64 value exactly, as its first limb)."""
    if isinstance(value, MultiFloatArray):
        if value.limb_count != n:
            raise TypeError(f"x{value.limb_count} numbers meet x{n} numbers")
        return value.limbs
    return conversion.read(value, n)


def aligned(limbs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Limbs (n, *s) broadcast to element shape `shape` (a view)."""
    n, element = limbs.shape[0], limbs.shape[1:]
    padded = limbs.reshape(n, *(1,) * (len(shape) - len(element)), *element)
    return np.broadcast_to(padded, (n, *shape))


def _float64(value: object) -> np.ndarray | None:
    """value as float64 numbers if it is float64 (or narrower floats) already, else None."""
    if isinstance(value, float | np.floating):
        return np.float64(value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.dtype.itemsize <= 8:
        return value.astype(np.float64, copy=False)
    return None


def _binary(operation: int) -> Callable:
    """The ufunc of an operation: with a float64 operand, addition, subtraction and
    multiplication take the float64 kernels (`kernels.binary_float`)."""

    def apply(n: int, x: object, y: object) -> MultiFloatArray:
        if isinstance(x, MultiFloatArray) and isinstance(y, MultiFloatArray):
            return MultiFloatArray(kernels.binary(operation, limbs_of(x, n), limbs_of(y, n)))
        if operation != kernels.DIV:
            c = _float64(y)
            if c is not None:
                return MultiFloatArray(kernels.binary_float(operation, limbs_of(x, n), c))
            c = _float64(x)
            if c is not None:
                z = kernels.binary_float(operation, limbs_of(y, n), c)
                return MultiFloatArray(-z if operation == kernels.SUB else z)
        return MultiFloatArray(kernels.binary(operation, limbs_of(x, n), limbs_of(y, n)))

    return apply


def _difference_sign(n: int, x: object, y: object) -> np.ndarray:
    """The sign of x - y elementwise: the sign of its leading limb (the subtraction is
    accurate, so a non-zero difference has a non-zero leading limb of its sign)."""
    return np.sign(kernels.binary(kernels.SUB, limbs_of(x, n), limbs_of(y, n))[0])


def _compare(test: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def apply(n: int, x: object, y: object) -> np.ndarray:
        return test(_difference_sign(n, x, y))

    return apply


def _negative(n: int, x: object) -> MultiFloatArray:
    return MultiFloatArray(-limbs_of(x, n))


def _absolute(n: int, x: object) -> MultiFloatArray:
    limbs = limbs_of(x, n)
    return MultiFloatArray(np.where(limbs[0] < 0, -limbs, limbs))


def _extremum(pick_first: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def apply(n: int, x: object, y: object) -> MultiFloatArray:
        first, second = limbs_of(x, n), limbs_of(y, n)
        choose = pick_first(_difference_sign(n, x, y))
        shape = choose.shape
        return MultiFloatArray(np.where(choose, aligned(first, shape), aligned(second, shape)))

    return apply


def _power(n: int, x: object, k: object) -> MultiFloatArray:
    """x^k for a whole number k (a Python or numpy integer, or an integral float64) by
    repeated squaring, a reciprocal for k < 0; x^0 is 1 (numpy's 0^0 too). Other exponents
    are not implemented (TypeError)."""
    if isinstance(k, MultiFloatArray) or np.ndim(k) != 0 or float(k) != int(k):
        return NotImplemented
    base, k = MultiFloatArray(limbs_of(x, n)), int(k)
    result = MultiFloatArray(aligned(conversion.read(1, n), base.shape).copy())
    square = base
    for bit in bin(abs(k))[:1:-1]:
        if bit == "1":
            result = result * square
        square = square * square
    return 1.0 / result if k < 0 else result


def _finite(n: int, x: object) -> np.ndarray:
    return np.all(np.isfinite(limbs_of(x, n)), axis=0)


_UFUNCS: dict[np.ufunc, Callable] = {
    np.add: _binary(kernels.ADD),
    np.subtract: _binary(kernels.SUB),
    np.multiply: _binary(kernels.MUL),
    np.true_divide: _binary(kernels.DIV),
    np.negative: _negative,
    np.positive: lambda n, x: MultiFloatArray(limbs_of(x, n).copy()),
    np.absolute: _absolute,
    np.sqrt: lambda n, x: MultiFloatArray(kernels.sqrt(limbs_of(x, n))),
    np.square: lambda n, x: _binary(kernels.MUL)(n, x, x),
    np.power: _power,
    np.greater: _compare(lambda s: s > 0),
    np.greater_equal: _compare(lambda s: s >= 0),
    np.less: _compare(lambda s: s < 0),
    np.less_equal: _compare(lambda s: s <= 0),
    np.equal: _compare(lambda s: s == 0),
    np.not_equal: _compare(lambda s: s != 0),
    np.maximum: _extremum(lambda s: s >= 0),
    np.minimum: _extremum(lambda s: s <= 0),
    np.isfinite: _finite,
    np.isnan: lambda n, x: np.any(np.isnan(limbs_of(x, n)), axis=0),
    np.isinf: lambda n, x: np.isinf(limbs_of(x, n)[0]),
    np.isneginf: lambda n, x: np.isneginf(limbs_of(x, n)[0]),
    np.signbit: lambda n, x: np.signbit(limbs_of(x, n)[0]),
}
"""The ufuncs multi-float arrays answer (others: TypeError)."""


def _count(arrays: Sequence[object]) -> int:
    counts = {x.limb_count for x in arrays if isinstance(x, MultiFloatArray)}
    if len(counts) != 1:
        raise TypeError(f"multi-floats of limb counts {sorted(counts)} do not combine")
    return counts.pop()


def _joined(join: Callable) -> Callable:
    def apply(arrays: Sequence[object], axis: int = 0, **kwargs: Any) -> MultiFloatArray:
        n = _count(arrays)
        return MultiFloatArray(join([limbs_of(a, n) for a in arrays], axis=_limb_axis(axis)))

    return apply


def _where(condition: np.ndarray, x: object, y: object) -> MultiFloatArray:
    n = _count([x, y])
    condition = np.asarray(condition)
    shape = np.broadcast_shapes(condition.shape, np.shape(x), np.shape(y))
    first, second = aligned(limbs_of(x, n), shape), aligned(limbs_of(y, n), shape)
    return MultiFloatArray(np.where(np.broadcast_to(condition, shape), first, second))


def _same(change: Callable[[np.ndarray], np.ndarray]) -> Callable:
    """A function of one array as its change of the limb array."""

    def apply(a: MultiFloatArray, *args: Any, **kwargs: Any) -> MultiFloatArray:
        return MultiFloatArray(change(a.limbs, *args, **kwargs))

    return apply


def _take(a: MultiFloatArray, indices: Any, axis: int | None = None) -> MultiFloatArray:
    if axis is None:
        return MultiFloatArray(np.take(a.limbs.reshape(a.limb_count, -1), indices, axis=1))
    return MultiFloatArray(np.take(a.limbs, indices, axis=_limb_axis(axis)))


def _repeat(a: MultiFloatArray, repeats: Any, axis: int | None = None) -> MultiFloatArray:
    if axis is None:
        return MultiFloatArray(np.repeat(a.limbs.reshape(a.limb_count, -1), repeats, axis=1))
    return MultiFloatArray(np.repeat(a.limbs, repeats, axis=_limb_axis(axis)))


def _expand_dims(a: MultiFloatArray, axis: int) -> MultiFloatArray:
    axis = axis if axis < 0 else axis + 1
    return MultiFloatArray(np.expand_dims(a.limbs, axis))


def _moveaxis(a: MultiFloatArray, source: int, destination: int) -> MultiFloatArray:
    return MultiFloatArray(np.moveaxis(a.limbs, _limb_axis(source), _limb_axis(destination)))


def _broadcast_to(a: object, shape: tuple[int, ...]) -> MultiFloatArray:
    return MultiFloatArray(aligned(a.limbs, tuple(shape)))


def _triangle(keep: Callable) -> Callable:
    def apply(a: MultiFloatArray, k: int = 0) -> MultiFloatArray:
        return MultiFloatArray(keep(a.limbs, k))

    return apply


_FUNCTIONS: dict[Callable, Callable] = {
    np.concatenate: _joined(np.concatenate),
    np.stack: _joined(np.stack),
    np.where: _where,
    np.reshape: lambda a, shape, **kw: a.reshape(shape),
    np.transpose: lambda a, axes=None: a.transpose(*(axes or ())),
    np.swapaxes: lambda a, first, second: a.swapaxes(first, second),
    np.moveaxis: _moveaxis,
    np.expand_dims: _expand_dims,
    np.broadcast_to: _broadcast_to,
    np.take: _take,
    np.repeat: _repeat,
    np.triu: _triangle(np.triu),
    np.tril: _triangle(np.tril),
    np.copy: lambda a, **kw: a.copy(),
    np.ravel: lambda a: a.ravel(),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a: a.size,
    np.zeros_like: _same(lambda limbs, **kw: np.zeros_like(limbs)),
    np.empty_like: _same(lambda limbs, **kw: np.empty_like(limbs)),
    np.ascontiguousarray: _same(np.ascontiguousarray),
}
"""The numpy functions multi-float arrays answer (others: TypeError)."""
