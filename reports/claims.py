"""The claims the report gives verdicts on: a registry of named claims, verdicts, evidence.

A claim is named in code (`Claim.LIE_FIRST_ORDER`), so a misspelt name fails at import;
its text is what the report prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, StrEnum


class ClaimVerdict(StrEnum):
    """What the evidence says about a claim, from best to worst."""

    VERIFIED = "verified"
    QUALIFIED = "qualified"
    REFUTED = "refuted"


NO_EVIDENCE = "no evidence"
"""The claims table's entry for a claim no experiment spoke to."""


class Claim(Enum):
    """The paper's claims and the claims the suite checks about them, in report order."""

    PROJECTION_THEOREM = "Layer norm (eps = 0, scalar gain) is the projection onto S1 (Theorem 3.1)"
    TORCH_LAYER_NORM = (
        "Torch-style layer norm (eps > 0 or per-feature gain and bias) is that projection"
    )
    RELU_PROJECTION = "ReLU is the projection onto the non-negative orthant"
    LIE_IS_TRANSFORMER = "The discretised equation (Lie, dt = 1) is exactly the Transformer"
    MULTI_HEAD = "Multi-head attention is covered"
    SIX_SUBSTEPS = "The paper's six sub-steps are the post-LN layer"
    LIE_FIRST_ORDER = "The Lie scheme (the Transformer) is a first-order discretisation of the flow"
    TIME_STEP_LIMIT = "The time-step limit exists (continuous limit in time)"
    TIME_STEP_LIMIT_EPS = "The time-step limit exists with torch-style LN (eps > 0, scalar gain)"
    TIME_STEP_LIMIT_AFFINE = (
        "The time-step limit exists for post-LN with per-feature LN gain and bias "
        "(trained post-LN norms)"
    )
    TIME_STEP_LIMIT_TWO_NORMS = (
        "The time-step limit exists for post-LN layers with two different scalar norms"
    )
    TIME_STEP_LIMIT_PRE_LN = "The time-step limit exists for pre-LN with per-feature gain and bias"
    GRID_LIMIT = "The grid discretisation converges to the continuous attention operator"
    PRECISION_FLOOR = "High precision moves the rounding floor below the truncation error"
    WELL_POSED = "The equation is well posed: u(T) depends continuously on data and controls"
    TRANSFORMER_NEAR_LIMIT = (
        "A trained-size Transformer is close to its continuous (time-step) limit"
    )
    TRAINED_NEAR_LIMIT = (
        "A trained network is close to its own time-step limit (outputs and decisions)"
    )
    DEPTH_SMOOTH_FLOW = (
        "Trained from a smooth initialisation with depth-scaled residuals, a Transformer "
        "approaches the flow of weights smooth in depth at rate 1 / L"
    )
    DEPTH_INDEPENDENT_ROUGH = (
        "From independent initialisations its weights do not become smooth in depth"
    )
    LAYER_NORM_CONDITIONING = (
        "Near constant rows the LN projection is ill-conditioned: Lipschitz ~ sigma2 / std"
    )
    STEP_SIZE_STABILITY = (
        "Step-size stability follows the linearised flow where the linearisation applies"
    )
    VIT_COVERED = "The framework covers the Vision Transformer (pre-LN, GELU)"
    VIT_TIME_STEP_LIMIT = "The ViT's time-step limit exists, with the schemes' orders"
    CVT_COVERED = "The framework covers the Convolutional vision Transformer (CvT)"
    CVT_TIME_STEP_LIMIT = "The CvT's time-step limit exists, with the schemes' orders"
    VISION_GRID_LIMIT = (
        "The vision flows have a token-grid limit (the network converges as its grid refines)"
    )

    @property
    def text(self) -> str:
        return self.value


@dataclass(frozen=True)
class Evidence:
    """What one experiment says about a registered claim: a verdict and why."""

    claim: Claim
    verdict: ClaimVerdict
    evidence: str

    def __post_init__(self) -> None:
        if not isinstance(self.claim, Claim):
            raise TypeError(f"evidence must name a registered Claim, got {self.claim!r}")
        if not isinstance(self.verdict, ClaimVerdict):
            raise TypeError(f"a claim verdict must be a ClaimVerdict, got {self.verdict!r}")


def verified_or(ok: bool, otherwise: ClaimVerdict) -> ClaimVerdict:
    """VERIFIED when `ok`, else `otherwise`."""
    return ClaimVerdict.VERIFIED if ok else otherwise


def combined(verdicts: Iterable[ClaimVerdict]) -> ClaimVerdict | None:
    """The verdict of several pieces of evidence: the worst of them (None if there are none)."""
    ranked = list(ClaimVerdict)
    found = [ranked.index(v) for v in verdicts]
    return ranked[max(found)] if found else None
