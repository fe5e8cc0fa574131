"""Every number system at the precisions the tests use."""

from solvers import backend

LOW_PRECISIONS = (backend("float16"), backend("bfloat16"), backend("float32"))
ALL_PRECISIONS = (
    *LOW_PRECISIONS,
    backend("float64"),
    backend("longdouble"),
    backend("mpmath", 30),
    backend("arb", 30),
)
