"""Tests of solvers/, one folder per room (docs/architecture.md section 2); tests that cross
rooms (bad input at every entry) sit here."""
