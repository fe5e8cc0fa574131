"""Well-posedness: bounds on a layer's field from its weights, Gronwall bounds on the
Lipschitz constants of u0 -> u(T) and theta -> u(T), and continuous dependence measured by
difference quotients along seeded directions (docs/well-posedness.md)."""
