"""The depth-family trainer (studies/networks/depth_family.py) against torch: a member
written with h folded into its weights is the torch network with scaled residual branches
(docs/depth.md section 1), and the smooth initialisation samples one smooth function of
depth (its unscaled weights' increments shrink like 1 / L, torch's independent draws do
not)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from convergence.weights_in_depth import unscaled, weight_increments  # noqa: E402
from solvers import solve  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "studies" / "networks" / "depth_family.py"


@pytest.fixture(scope="module")
def trainer():
    spec = importlib.util.spec_from_file_location("depth_family_trainer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("initialisation", ["smooth", "independent"])
def test_a_folded_member_is_the_network_with_scaled_residuals(trainer, initialisation):
    module = trainer.DepthScaled(4)
    if initialisation == "smooth":
        trainer.smooth_layers(module)
    with torch.no_grad():  # weights away from their initial symmetry, biases non-zero
        for p in module.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    module = module.double().eval()
    digits = torch.tensor(np.random.default_rng(0).integers(0, 10, (6, trainer.LENGTH)))
    with torch.no_grad():
        expected = module(digits).numpy()
    model = trainer.network(module, "member")
    states = solve(model.problem(model.embed(digits.numpy())))
    np.testing.assert_allclose(model.readout(states), expected, rtol=1e-10, atol=1e-11)


def test_the_smooth_initialisation_samples_one_smooth_function_of_depth(trainer):
    def increments(depth: int, smooth: bool) -> float:
        module = trainer.DepthScaled(depth)
        if smooth:
            trainer.smooth_layers(module)
        model = trainer.network(module.double(), f"L{depth}")
        return weight_increments(unscaled(model.layers, trainer.HORIZON / depth)).largest

    smooth = [increments(L, True) for L in (8, 16, 32)]
    independent = [increments(L, False) for L in (8, 16, 32)]
    ratios = np.array(smooth[:-1]) / np.array(smooth[1:])
    assert np.all(np.abs(ratios - 2) < 0.3), smooth  # rate 1 in 1 / L
    assert max(independent) / min(independent) < 1.2 and min(independent) > 0.5, independent
