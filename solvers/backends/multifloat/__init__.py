"""Multi-float number systems: numbers as unevaluated sums of 2, 3 or 4 float64 limbs,
computed with float64 operations alone in compiled kernels (docs/rounding.md section 6)."""
