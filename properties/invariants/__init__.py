"""What the operators and the flow preserve: relu and the layer-norm projection as
projections, the post-LN flow on its constraint set, attention rows as probability vectors
with outputs in the convex hull of the values, and permutation equivariance without
positions, each within the rounding its precision allows (docs/rounding.md)."""
