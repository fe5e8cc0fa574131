"""Tokens and features as continuous variables: quadrature grids on the token and feature
domains, continuous kernels sampled on them, and the vision variants (ViT patches on a
product grid, CvT's convolutional token maps) whose grid limits the grid studies measure
(docs/vision.md)."""
