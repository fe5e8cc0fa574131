"""Stepping methods on a layer's flow: the Transformer's own Lie layer, Lie and Strang
splittings with their sub-solvers, unsplit projected Runge-Kutta, the fixed-step
extrapolation with ReLU event location, the check that a method has a flow to solve, and
the one layer loop (`driver.integrate`) that steps a method from layer boundary to layer
boundary (docs/schemes.md)."""
