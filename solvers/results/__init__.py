"""Result plumbing shared by every study: records that serialise losslessly to JSON,
provenance (versions, wall time), least-squares line fits with intervals, and the rounding
allowances that tolerances are derived from (docs/rounding.md section 1)."""
