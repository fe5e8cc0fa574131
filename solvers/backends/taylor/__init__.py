"""Truncated Taylor series of arb balls, one order at a time (series: the tape and the
recurrences), and the backend that runs every operator on them (backend), for the
certified enclosures of solvers.enclosure (docs/enclosures.md section 2)."""
