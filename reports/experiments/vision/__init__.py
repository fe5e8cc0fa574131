"""The paper's vision variants as study experiments: the ViT and the CvT."""

from reports.experiments.vision.cvt import CVT
from reports.experiments.vision.vit import VIT

__all__ = ["CVT", "VIT"]
