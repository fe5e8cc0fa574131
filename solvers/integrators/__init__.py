"""Integrators that know nothing of a layer: Butcher tableaux and the one explicit Runge-Kutta
step, the Gragg-Bulirsch-Stoer extrapolation tableau with its work and Lebesgue constants,
and the location of the first zero crossing among switching functions. Each acts on a
field (t, u) -> f(t, u) in a backend (docs/schemes.md)."""
