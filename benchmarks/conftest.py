"""Benchmarks are measured against a peer in the same run, never against wall-clock targets."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to time benchmarks in parallel workers: the test suite's default (-n auto)
    would share the cores between the timed runs and disable pytest-benchmark."""
    workers = config.getoption("numprocesses", None)
    if workers not in (None, 0) and not config.getoption("benchmark_disable", False):
        raise pytest.UsageError(
            "benchmarks time one process against another: run them with -n 0, e.g. "
            "python -m pytest benchmarks --benchmark-only -s -n 0"
        )
