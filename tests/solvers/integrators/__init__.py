"""Tests of solvers/integrators/: integrators and their dense output and events."""
