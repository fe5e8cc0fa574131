"""Conditioning and rounding: the first-order rounding model of an operator, a layer and a
solve at unit roundoff u, and the measured Lipschitz constants of the layer-norm projection
near constant rows and of attention as its temperature falls (docs/rounding.md)."""
