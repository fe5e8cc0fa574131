"""The "depth-family" experiment kind (docs/depth.md)."""
