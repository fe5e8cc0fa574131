"""Adding a number system is its module plus one registration (docs/architecture.md
section 4): a renamed copy of float64, registered for the length of a test, joins every
list derived from solvers.backends.REGISTRY and passes the exactness cases."""

from __future__ import annotations

import numpy as np
import pytest

from properties.claim_check import CheckVerdict
from reports.exactness import exactness_cases
from solvers import backend
from solvers.backends import REGISTRY, BackendFactory, registered
from solvers.backends.floats import FusedFloatBackend
from solvers.reference.guard_digits import tighter_precision

NAME = "float64-copy"


@pytest.fixture
def copy(monkeypatch):
    """float64 under another name, registered once."""
    factory = BackendFactory(NAME, lambda digits: FusedFloatBackend(NAME, np.float64))
    monkeypatch.setitem(REGISTRY, NAME, factory)
    return backend(NAME)


def test_a_registered_backend_is_in_the_derived_lists(copy):
    assert copy in registered() and copy in registered(fixed_only=True)
    # a fixed format as wide as float64: a float32 reference may widen into either
    assert tighter_precision(backend("float32"), 1e-12, 1000).unit_roundoff == 2.0**-53


def test_the_exactness_cases_run_on_a_registered_backend(copy):
    """The Lie-is-the-Transformer case, the six sub-steps (with and without affine norms)
    and Theorem 3.1 (two constraint sets) each run in the new system and hold."""
    cases = [case for case in exactness_cases() if repr(copy) in case.label]
    assert len(cases) == 5, [case.label for case in cases]
    for case in cases:
        checks = case.run()
        assert checks and all(c.verdict == CheckVerdict(case.expectation) for c in checks)
        assert all(c.configuration.get("precision", repr(copy)) == repr(copy) for c in checks)
