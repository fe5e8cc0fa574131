"""Tests of solvers/equation/: the equation: operators, norms, controls, masks."""
