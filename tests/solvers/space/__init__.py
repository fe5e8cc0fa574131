"""Tests of solvers/space/: grids and the vision token maps."""
