"""Every number system at the precisions the tests use: the registered ones
(solvers.backends.REGISTRY), an arbitrary precision at its typical digits."""

from solvers.backends import registered

ALL_PRECISIONS = tuple(registered())
