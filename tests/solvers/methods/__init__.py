"""Tests of solvers/methods/: stepping methods and their orders."""
