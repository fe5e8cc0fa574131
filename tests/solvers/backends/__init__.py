"""Tests of solvers/backends/: number systems."""
