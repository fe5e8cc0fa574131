"""Stability in depth and in the step size: layer maps and their Jacobians, perturbation
growth and finite-time Lyapunov exponents, the linear prediction of the largest stable
step and the measured stability map against it, and a stiff test family
(docs/stability.md)."""
