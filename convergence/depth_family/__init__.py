"""Networks of growing depth with depth-scaled residuals against their own flows and each
other (docs/depth.md): the study (`study.depth_family` and its records), the rates in 1 / L
(`rates`) and the family's verdict (`verdict`)."""

from convergence.depth_family.rates import FittedRate, fit_rate
from convergence.depth_family.study import DepthFamily, Member, check_family, depth_family
from convergence.depth_family.verdict import FamilyVerdict, family_verdict

__all__ = [
    "DepthFamily",
    "FamilyVerdict",
    "FittedRate",
    "Member",
    "check_family",
    "depth_family",
    "family_verdict",
    "fit_rate",
]
