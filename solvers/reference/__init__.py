"""The error-controlled reference: extrapolation whose own error estimate drives its step
size and order, which steps to every ReLU kink and carries an estimate of its global error
(docs/schemes.md section 7). `solve_reference` runs it over a problem; the method
"reference" of `solve` is the same controller."""
