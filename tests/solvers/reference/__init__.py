"""Tests of solvers/reference/: the error-controlled reference."""
