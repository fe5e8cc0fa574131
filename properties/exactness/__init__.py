"""Claims that something is exactly something else: the Lie scheme at dt = 1 is the standard
Transformer, the paper's six sub-steps are the post-LN Lie layer, and layer norm with
eps = 0 is the projection onto S1 (docs/model.md sections 1 and 2)."""
