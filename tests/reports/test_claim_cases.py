"""Claim cases are keyed by their labels, the same on every machine: a worker runs the case
of the stored label or refuses it by name (reports.experiments.claims)."""

from __future__ import annotations

import re

import pytest

import reports.exactness
import reports.experiments.claims as claims
from reports.exactness import exactness_cases
from solvers.errors import InvalidInputError


def test_each_case_is_keyed_by_its_own_label():
    cases = claims._cases({})
    assert cases and all(key == {"label": label} for label, key in cases)
    assert len({label for label, _ in cases}) == len(cases)  # one key, one check


def test_a_stored_label_runs_that_case():
    label = "layer-norm idempotence: eps=0.0 affine=False"
    result = claims.run({"label": label}, 0)
    assert result.label == label and result.checks


def test_a_worker_without_torch_refuses_a_torch_case_by_its_label(monkeypatch):
    """On a machine without torch the torch cases are not listed; a key that names one (a
    resumed run, a Dask worker) is refused, naming it, rather than shifted onto another."""
    torch_cases = [c for c in exactness_cases(every=True) if c.needs_torch]
    assert torch_cases and all("vs torch" in c.label for c in torch_cases)
    monkeypatch.setattr(claims, "torch_available", lambda: False)
    monkeypatch.setattr(reports.exactness, "torch_available", lambda: False)
    assert not [c for c in exactness_cases() if c.needs_torch]
    label = torch_cases[0].label
    with pytest.raises(InvalidInputError, match=re.escape(f"{label!r} compares with torch")):
        claims.run({"label": label}, 0)


def test_an_unknown_label_is_refused_by_name():
    with pytest.raises(InvalidInputError, match="no exactness case 'Lie dt=2'"):
        claims.run({"label": "Lie dt=2"}, 0)
