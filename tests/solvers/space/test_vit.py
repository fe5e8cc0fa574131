"""The Vision Transformer: its encoder block is the pre-LN Lie step with GELU (torch twin to
1e-13 in float64, class token included), and its flow converges at the predicted orders."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from convergence.order import OrderVerdict
from convergence.time_step import time_step_study
from reports.experiments.vision.data import smooth_2d
from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, solve
from solvers.io.torch_modules import from_torch
from solvers.space.vit import attention_2d_at, patch_centres, patch_embedding, vit_initial_condition


class TorchViT(torch.nn.Module):
    """Patch embedding (Conv2d, kernel = stride = p), class token, position embeddings and
    torch's pre-LN GELU encoder: the ViT up to its classification head."""

    def __init__(self, channels, image, patch, d, heads, d_ff, layers, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.patch = torch.nn.Conv2d(channels, d, patch, stride=patch, dtype=torch.float64)
        count = (image // patch) ** 2
        self.cls = torch.nn.Parameter(torch.randn(1, 1, d, dtype=torch.float64))
        self.pos = torch.nn.Parameter(torch.randn(1, count + 1, d, dtype=torch.float64))
        block = torch.nn.TransformerEncoderLayer(
            d,
            heads,
            d_ff,
            dropout=0.0,
            activation="gelu",
            norm_first=True,
            batch_first=True,
            dtype=torch.float64,
        )
        self.encoder = torch.nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        for parameter in self.encoder.parameters():  # non-trivial norms and biases
            with torch.no_grad():
                parameter.add_(0.1 * torch.randn_like(parameter))

    def forward(self, x):
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(len(x), -1, -1), tokens], dim=1) + self.pos
        return self.encoder(tokens)


def _ours(model: TorchViT, images: np.ndarray, patch: int) -> np.ndarray:
    def array(t):
        return t.detach().numpy()

    u0 = vit_initial_condition(
        images,
        patch,
        array(model.patch.weight),
        array(model.patch.bias),
        array(model.cls)[0, 0],
        array(model.pos)[0],
    )
    layers = from_torch(model.encoder)
    assert all(w.activation == "gelu" for w in layers)
    return solve(Problem(u0, PiecewiseControls(layers), len(layers), norm="pre"), "lie", 1)


@pytest.mark.parametrize(
    ("channels", "image", "patch", "d", "heads", "d_ff", "layers"),
    [
        (3, 8, 4, 16, 2, 32, 2),
        (1, 12, 3, 8, 1, 8, 3),
        (3, 16, 4, 32, 4, 64, 2),
        (2, 6, 2, 12, 3, 48, 1),
    ],
)
def test_vit_encoder_is_the_pre_ln_gelu_lie_step(channels, image, patch, d, heads, d_ff, layers):
    model = TorchViT(channels, image, patch, d, heads, d_ff, layers, seed=d).eval()
    images = np.random.default_rng(d).standard_normal((2, channels, image, image))
    with torch.no_grad():
        expected = model(torch.tensor(images)).numpy()
    ours = _ours(model, images, patch)
    assert ours.shape == (2, 1 + (image // patch) ** 2, d)
    assert np.abs(ours - expected).max() <= 1e-13 * np.abs(expected).max()


def test_patch_embedding_is_the_convolution():
    rng = np.random.default_rng(0)
    images, weight, bias = (rng.standard_normal(s) for s in ((2, 3, 8, 12), (5, 3, 4, 4), (5,)))
    conv = torch.nn.functional.conv2d(
        torch.tensor(images), torch.tensor(weight), torch.tensor(bias), stride=4
    )
    expected = conv.flatten(2).transpose(1, 2).numpy()
    ours = patch_embedding(images, 4, weight, bias)
    assert np.abs(ours - expected).max() <= 1e-14 * np.abs(expected).max()
    assert patch_centres(2, 3)[4].tolist() == [0.75, 0.5]


def test_vit_flow_converges_at_the_predicted_orders():
    """Pre-LN with GELU: the field is smooth, so the reference keeps its order and Lie is
    first order, Strang with RK2 second, projected RK4 fourth."""
    rng = np.random.default_rng(4)
    layers = [LayerWeights.random(8, 2, 16, rng, weight_scale=0.8, affine=True) for _ in range(2)]
    layers = [dataclasses.replace(w, activation="gelu", eps=1e-6) for w in layers]
    u0 = rng.standard_normal((5, 8))
    problem = Problem(u0, PiecewiseControls(layers), 2, norm="pre")
    expected = {"lie": 1.0, "strang-rk2": 2.0, "strang-rk2-ambient": 2.0, "projected-rk4": 4.0}
    study = time_step_study(
        problem, list(expected), [4, 8, 16, 32, 64], expected=expected, reference_steps=8
    )
    for method in study.methods:
        assert method.estimate.verdict == OrderVerdict.PASS, (method.method, method.estimate)


def test_bad_images_are_named():
    with pytest.raises(InvalidInputError, match="patch size 3 must divide the image size 8 x 8"):
        patch_embedding(np.zeros((1, 1, 8, 8)), 3, np.zeros((2, 1, 3, 3)), np.zeros(2))
    with pytest.raises(InvalidInputError, match="positions"):
        vit_initial_condition(
            np.zeros((1, 1, 4, 4)),
            2,
            np.zeros((2, 1, 2, 2)),
            np.zeros(2),
            np.zeros(2),
            np.zeros((4, 2)),
        )


@pytest.mark.parametrize("rule", ["midpoint", "gauss-legendre"])
def test_probes_are_passive_and_follow_the_nystrom_extension(rule):
    """The node rows of the probed problem are the flow on the nodes exactly (no map reads
    a probe row), and a probe placed on a node has that token's trajectory."""
    from solvers.space.grids import product_quadrature
    from solvers.space.vit import probed_problem

    layers = [
        dataclasses.replace(
            LayerWeights.random(4, 2, 8, s, affine=True, eps=1e-6), activation="gelu"
        )
        for s in (0, 1)
    ]
    nodes_at = [1, 7, 12]
    nodes, weights = product_quadrature(rule, 4, 4)

    def data(x):
        return 1 + smooth_2d(x)

    controls = PiecewiseControls(layers)
    problem = probed_problem(controls, data, 4, rule, nodes[nodes_at], 2)
    plain = Problem(
        data(nodes), controls, 2, norm="pre", token_weights=None if rule == "midpoint" else weights
    )
    final = solve(problem, "projected-rk4", 4)
    assert np.abs(final[:16] - solve(plain, "projected-rk4", 4)).max() < 1e-14
    assert np.abs(final[-3:] - final[nodes_at]).max() < 1e-14


def test_off_the_grid_the_2d_attention_integral_is_the_quadrature_of_each_head():
    """attention_2d_at at points off the grid against the formula written out per head:
    sum_h [sum_j w_j e^{s q_h(x).k_h(y_j)} v_h(y_j) / sum_j w_j e^{...}] Wo_h + bo."""
    from solvers.space.grids import product_quadrature

    layer = LayerWeights.random(4, 2, 8, 5)
    nodes, weights = product_quadrature("gauss-legendre", 5, 5)
    points = np.random.default_rng(2).random((6, 2))
    values, probe = smooth_2d(nodes), smooth_2d(points)
    expected = np.tile(layer.bo, (6, 1))
    for h in range(layer.heads):
        q = probe @ layer.wq[h] + layer.bq[h]
        k = values @ layer.wk[h] + layer.bk[h]
        v = values @ layer.wv[h] + layer.bv[h]
        p = weights * np.exp(layer.attention_scale * q @ k.T)
        expected += (p / p.sum(axis=1, keepdims=True)) @ v @ layer.wo[h]
    ours = attention_2d_at(layer, smooth_2d, 5, "gauss-legendre", points)
    assert np.abs(ours - expected).max() < 1e-14
