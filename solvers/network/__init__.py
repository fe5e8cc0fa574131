"""A trained network around the equation: the embedding that turns token ids or pixels into
u0, the flow's layers, and the readout (final norm, pooling, classifier or LM head) that
turns the final state into decisions and a loss (docs/networks.md)."""
