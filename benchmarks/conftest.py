"""Benchmarks are measured against a peer in the same run, never against wall-clock targets."""
