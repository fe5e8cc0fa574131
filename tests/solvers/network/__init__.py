"""Tests of solvers/network/: trained networks' heads."""
