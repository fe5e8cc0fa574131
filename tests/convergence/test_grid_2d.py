"""Grid refinement on the 2-D token domain: the CvT's convolutional attention converges to
its continuous operator at the midpoint rule's rate (spectral for smooth periodic kernels,
2 for the tent), the ViT's attention integral at each rule's rate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convergence.grid_2d import (
    cvt_flow_grid_study,
    cvt_grid_study,
    vit_flow_grid_study,
    vit_grid_study,
)
from convergence.order import OrderVerdict
from reports.experiments.vision.data import smooth_2d
from solvers import InvalidInputError, LayerWeights
from solvers.space.cvt import (
    ConvProjection,
    _convolve_on_grid,
    _kernel_matrix,
    conv_attention_at,
    gaussian_kernel,
    grid_points,
    periodic,
    tent_kernel,
)

D = 4
WAVES = np.array([[1, 0], [0, 1], [1, 2]])


def smooth_data(x: np.ndarray) -> np.ndarray:
    """A trigonometric polynomial on T^2 with D channels (seeded amplitudes and phases)."""
    rng = np.random.default_rng(0)
    amplitude, phase = rng.standard_normal((D, 3)), rng.uniform(0, 2 * np.pi, (D, 3))
    angle = 2 * np.pi * (x @ WAVES.T)
    return np.stack([(amplitude[c] * np.cos(angle + phase[c])).sum(axis=1) for c in range(D)], 1)


LAYER = LayerWeights.random(D, 2, 8, 1)


def test_smooth_periodic_kernel_converges_spectrally():
    projection = ConvProjection.shared(gaussian_kernel(0.07))
    study = cvt_grid_study(LAYER, projection, smooth_data, [6, 12, 24, 48], reference_size=256)
    assert study.spectral and study.errors[2] < 1e-11


@pytest.mark.parametrize("stride", [1, 2])
def test_tent_kernel_converges_at_order_two(stride):
    projection = ConvProjection.shared(tent_kernel(0.25), stride)
    study = cvt_grid_study(
        LAYER, projection, smooth_data, [12, 24, 48, 96], reference_size=768, expected=2
    )
    assert study.estimate.verdict == OrderVerdict.PASS, study.estimate
    assert not study.spectral


def spread_data(x: np.ndarray) -> np.ndarray:
    """Rows of feature spread >= 0.79 - 0.1 * 3.4 (pre-LN stays smooth, module docstring)."""
    return np.array([1.0, -1.0, 0.5, -0.5]) + 0.1 * smooth_data(x)


GELU_LAYERS = [
    dataclasses.replace(
        LayerWeights.random(D, 2, 4 * D, seed, weight_scale=0.8, affine=True, eps=1e-6),
        activation="gelu",
    )
    for seed in (2, 3)
]


@pytest.mark.parametrize(
    ("kernel", "order"), [(gaussian_kernel(0.07), None), (tent_kernel(0.25), 2)]
)
def test_the_cvt_network_converges_as_its_token_grid_refines(kernel, order):
    """Lie at dt = 1 (the network), strided keys and values: spectral for the Gaussian,
    order 2 for the tent whose radius is a whole number of cells on every grid."""
    study = cvt_flow_grid_study(
        GELU_LAYERS, ConvProjection.shared(kernel, 2), spread_data, [8, 16, 32, 64], expected=order
    )
    if order is None:
        assert study.spectral and study.errors[-1] < 1e-10
    else:
        assert study.estimate.verdict == OrderVerdict.PASS, study.estimate
        assert not study.spectral


@pytest.mark.parametrize(("rule", "order"), [("midpoint", 2.0), ("gauss-legendre", None)])
def test_the_vit_network_converges_as_its_token_grid_refines(rule, order):
    sizes = [4, 8, 16, 32] if order else [2, 4, 8, 16]
    data = lambda x: np.array([1.0, -1.0, 0.5, -0.5]) + 0.1 * smooth_2d(x)  # noqa: E731
    study = vit_flow_grid_study(GELU_LAYERS, data, rule, sizes, expected=order)
    if order is None:
        assert study.spectral and study.errors[-1] < 1e-11
    else:
        assert study.estimate.verdict == OrderVerdict.PASS, study.estimate


def skewed(kernel):
    """kernel times 1.5 + 3 z1 - 2 z2: not symmetric, so a reflected convolution shows."""
    return lambda z1, z2: kernel(z1, z2) * (1.5 + 3 * periodic(z1) - 2 * periodic(z2))


def test_on_the_grid_the_fft_convolution_is_the_direct_sum():
    kernel = skewed(tent_kernel(0.2))
    points = grid_points(8)
    values = smooth_data(points)
    direct = _kernel_matrix(kernel, points, points) @ values / 64
    assert np.allclose(_convolve_on_grid(kernel, values, 8), direct, rtol=0, atol=1e-13)


@pytest.mark.parametrize("stride", [1, 2])
def test_on_the_grid_the_nystrom_form_is_the_flows_operator(stride):
    """At the grid nodes, the FFT-based Nystrom extension equals the attention with the
    dense token maps that a Problem carries."""
    from solvers import backend
    from solvers.equation.operators import TokenLayout, attention

    projection = ConvProjection(
        skewed(tent_kernel(0.2)), skewed(tent_kernel(0.3)), skewed(gaussian_kernel(0.1)), stride
    )
    points = grid_points(8)
    bk = backend("float64")
    with bk.active():
        maps = [lambda x, c=c: c @ x for c in projection.matrices(8)]
        dense = attention(bk, smooth_data(points), LAYER.on(bk), TokenLayout(token_maps=maps))
    nystrom = conv_attention_at(LAYER, projection, smooth_data, 8, points)
    assert np.abs(nystrom - dense).max() < 1e-13


def test_bad_input():
    projection = ConvProjection.shared(tent_kernel(0.2), 3)
    with pytest.raises(InvalidInputError, match="stride 3 must divide the grid size 8"):
        conv_attention_at(LAYER, projection, smooth_data, 8, grid_points(2))
    with pytest.raises(InvalidInputError, match="stride 3 must divide the grid size 8"):
        projection.matrices(8)
    with pytest.raises(InvalidInputError, match="stride must be"):
        ConvProjection.shared(tent_kernel(0.2), 0)
    with pytest.raises(InvalidInputError, match="radius must lie in"):
        tent_kernel(0.7)
    with pytest.raises(InvalidInputError, match="reference grid"):
        cvt_grid_study(LAYER, projection, smooth_data, [4, 8, 16], reference_size=16)
    with pytest.raises(InvalidInputError, match="at least 4 sizes"):
        cvt_flow_grid_study(GELU_LAYERS, projection, spread_data, [6, 12, 24])
    with pytest.raises(InvalidInputError, match="constant ratio"):
        cvt_flow_grid_study(GELU_LAYERS, projection, spread_data, [6, 12, 18, 24])


@pytest.mark.parametrize(
    ("rule", "order"), [("midpoint", 2.0), ("trapezoid", 1.0), ("gauss-legendre", None)]
)
def test_vit_attention_integral_converges_at_its_rules_rate(rule, order):
    """Non-periodic data: midpoint 2, the periodic trapezoid (a rectangle rule here) 1,
    Gauss-Legendre per axis spectral."""
    from solvers import LayerWeights

    layer = LayerWeights.random(4, 2, 8, 0)
    sizes = [4, 8, 16, 32] if order else [4, 8, 16]
    study = vit_grid_study(layer, smooth_2d, rule, sizes, reference_size=160, expected=order)
    if order is None:
        assert study.spectral and study.errors[-1] < 1e-13
    else:
        assert study.estimate.verdict == OrderVerdict.PASS, study.estimate
