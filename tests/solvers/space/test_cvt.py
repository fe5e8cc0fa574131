"""The CvT as a flow: the problem's token maps are the convolutional projections.

Truths the code did not produce: torch's depth-wise circular Conv2d and
MultiheadAttention (the CvT block is the pre-LN GELU Lie step at dt = 1, strided keys and
values included), the 60-digit solution of the same flow, and the identity maps, which
must leave the plain flow unchanged.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from convergence.order import OrderVerdict
from convergence.time_step import time_step_study
from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, backend, solve
from solvers.io.torch_modules import from_torch
from solvers.space.cvt import ConvProjection, grid_points, periodic, probed_problem, tent_kernel


def skewed_tent(n: int, tilt: tuple[float, float]):
    """A tent of radius 2h times a tilt 1.5 + a z1 + b z2: a 3 x 3 stencil, not symmetric,
    so a reflected convolution (torch's Conv2d is a cross-correlation) would be caught, and
    of mass 1.5, so a bias added before the convolution (C b != b) would be too."""
    tent = tent_kernel(2 / n)

    def kappa(z1, z2):
        return tent(z1, z2) * (1.5 + tilt[0] * periodic(z1) + tilt[1] * periodic(z2))

    return kappa


def projection(n: int, stride: int) -> ConvProjection:
    return ConvProjection(
        skewed_tent(n, (3.0, -2.0)),
        skewed_tent(n, (-1.0, 4.0)),
        skewed_tent(n, (2.0, 2.0)),
        stride,
    )


class TorchCvTBlock(torch.nn.Module):
    """Pre-LN CvT block: u + MHA(conv_q(LN1 u), conv_k(LN1 u), conv_v(LN1 u)), then
    u + FFN(LN2 u) with GELU; the convolutions depth-wise, circular, 3 x 3, keys and values
    with `stride`."""

    def __init__(self, n, d, heads, stride, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.n = n
        self.block = torch.nn.TransformerEncoderLayer(
            d,
            heads,
            2 * d,
            dropout=0.0,
            activation="gelu",
            norm_first=True,
            batch_first=True,
            dtype=torch.float64,
        )
        with torch.no_grad():
            for parameter in self.block.parameters():  # non-trivial norms and biases
                parameter.add_(0.1 * torch.randn_like(parameter))
        self.convs = []
        offsets = (np.arange(3) - 1) / n
        for kernel, s in zip(
            (
                projection(n, stride).kappa_q,
                projection(n, stride).kappa_k,
                projection(n, stride).kappa_v,
            ),
            (1, stride, stride),
            strict=True,
        ):
            conv = torch.nn.Conv2d(
                d,
                d,
                3,
                stride=s,
                padding=1,
                padding_mode="circular",
                groups=d,
                bias=False,
                dtype=torch.float64,
            )
            stencil = kernel(-offsets[:, None], -offsets[None, :]) / n**2  # w[a, b] = h^2 kappa(-o)
            with torch.no_grad():
                conv.weight.copy_(torch.tensor(np.broadcast_to(stencil, (d, 1, 3, 3))))
            self.convs.append(conv)

    def forward(self, u):
        batch, _, d = u.shape
        y = self.block.norm1(u).transpose(1, 2).reshape(batch, d, self.n, self.n)
        q, k, v = (conv(y).flatten(2).transpose(1, 2) for conv in self.convs)
        u = u + self.block.self_attn(q, k, v, need_weights=False)[0]
        b = self.block
        return u + b.linear2(b.activation(b.linear1(b.norm2(u))))


@pytest.mark.parametrize(
    ("n", "d", "heads", "stride"), [(4, 4, 1, 1), (6, 8, 2, 2), (8, 6, 3, 2), (8, 16, 4, 4)]
)
def test_cvt_block_is_the_lie_step_of_the_flow_with_token_maps(n, d, heads, stride):
    torch_block = TorchCvTBlock(n, d, heads, stride, seed=n + d).eval()
    u0 = np.random.default_rng(n).standard_normal((2, n * n, d))
    with torch.no_grad():
        expected = torch_block(torch.tensor(u0)).numpy()
    problem = Problem(
        u0,
        PiecewiseControls(from_torch(torch_block.block)),
        1,
        norm="pre",
        token_maps=projection(n, stride).matrices(n),
    )
    ours = solve(problem, "lie", 1)
    assert np.abs(ours - expected).max() / np.abs(expected).max() < 1e-13


def test_cvt_flow_converges_at_the_predicted_orders():
    """Pre-LN, GELU, strided convolutional projections: the field is smooth, so Lie is first
    order, Strang with RK2 second and projected RK4 fourth against the order-24 reference."""
    rng = np.random.default_rng(5)
    layers = [
        dataclasses.replace(
            LayerWeights.random(8, 2, 16, rng, weight_scale=0.8, affine=True, eps=1e-6),
            activation="gelu",
        )
        for _ in range(2)
    ]
    problem = Problem(
        rng.standard_normal((36, 8)),
        PiecewiseControls(layers),
        2,
        norm="pre",
        token_maps=projection(6, 2).matrices(6),
    )
    expected = {"lie": 1.0, "strang-rk2": 2.0, "projected-rk4": 4.0}
    study = time_step_study(problem, list(expected), [4, 8, 16, 32, 64, 128], expected=expected)
    for method in study.methods:
        assert method.estimate.verdict == OrderVerdict.PASS, (method.method, method.estimate)


def _cvt_problem(stride: int = 2, **extra) -> Problem:
    rng = np.random.default_rng(3)
    layers = [LayerWeights.random(4, 2, 8, rng, affine=True, eps=1e-6) for _ in range(2)]
    return Problem(
        rng.standard_normal((16, 4)),
        PiecewiseControls(layers),
        1.5,
        norm="pre",
        token_maps=projection(4, stride).matrices(4),
        **extra,
    )


def test_the_cvt_flow_agrees_with_its_60_digit_solution():
    problem = _cvt_problem()
    high = solve(problem, "strang-rk2", 4, backend("mpmath", 60)).astype(float)
    assert np.abs(solve(problem, "strang-rk2", 4) - high).max() < 1e-14 * np.abs(high).max()


def test_identity_token_maps_leave_the_flow_unchanged():
    problem = _cvt_problem()
    identity = np.eye(problem.tokens)
    plain = Problem(problem.u0, problem.controls, 1.5, norm="pre")
    mapped = Problem(
        problem.u0, problem.controls, 1.5, norm="pre", token_maps=(identity, identity, identity)
    )
    assert np.array_equal(solve(mapped, "lie", 3), solve(plain, "lie", 3))


def test_bad_token_maps_are_named():
    u0, controls = _cvt_problem().u0, _cvt_problem().controls
    square, coarse = np.eye(16), np.ones((4, 16)) / 16
    with pytest.raises(InvalidInputError, match="three matrices"):
        Problem(u0, controls, 1, token_maps=square)
    with pytest.raises(InvalidInputError, match="C_q"):
        Problem(u0, controls, 1, token_maps=(coarse, coarse, coarse))
    with pytest.raises(InvalidInputError, match="C_v"):
        Problem(u0, controls, 1, token_maps=(square, coarse, square))
    with pytest.raises(InvalidInputError, match="causal"):
        Problem(u0, controls, 1, causal=True, token_maps=(square, square, square))
    with pytest.raises(InvalidInputError, match="finite"):
        Problem(u0, controls, 1, token_maps=(square * np.nan, coarse, coarse))
    with pytest.raises(InvalidInputError, match="token_weights"):  # one per key: 4, not 16
        Problem(u0, controls, 1, token_weights=np.ones(16), token_maps=(square, coarse, coarse))


def test_the_key_grid_is_every_stride_th_grid_point():
    keys = ConvProjection.shared(tent_kernel(0.2), 2).on_key_grid(grid_points(4), 4)
    assert np.allclose(keys, [[0.125, 0.125], [0.125, 0.625], [0.625, 0.125], [0.625, 0.625]])


@pytest.mark.parametrize("stride", [1, 2])
def test_probes_are_passive_and_follow_the_nystrom_extension(stride):
    """The grid rows of the probed problem are the unprobed flow exactly (no map reads a
    probe row), and at a grid point the extension is the grid value, so a probe placed
    there has that token's trajectory."""
    problem = _cvt_problem()
    nodes = [0, 5, 14]
    base, waves = np.array([1, -1, 0.5, 0]), np.array([[1, 0, 1, 2], [0, 1, 1, -1]])

    def data(x):
        return base + np.cos(2 * np.pi * x @ waves)

    maps = projection(4, stride)
    probed = probed_problem(problem.controls, maps, data, 4, grid_points(4)[nodes], 1.5)
    plain = Problem(
        data(grid_points(4)), problem.controls, 1.5, norm="pre", token_maps=maps.matrices(4)
    )
    for method in ("lie", "strang-rk2"):
        final = solve(probed, method, 4)
        assert np.array_equal(final[:16], solve(plain, method, 4))
        assert np.abs(final[-3:] - final[nodes]).max() < 1e-14
