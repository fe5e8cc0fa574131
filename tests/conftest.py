"""Shared fixtures: seeded generators and torch encoders built from seeded numpy draws."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)
