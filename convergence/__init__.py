"""Refinement studies (time step, grid, precision) and order estimation."""
