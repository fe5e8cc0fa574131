"""Tests of solvers/io/: model readers and writers."""
