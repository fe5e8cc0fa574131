"""Claims about operators and flows, as checks that return a verdict and the measured defect."""
