"""Train the depth families the built-in study ships, deterministically, and write them with
their held-out inputs into reports/networks/ (docs/depth.md; docs/networks.md section 4).

    pip install ".[train]" && python studies/networks/depth_family.py [--depths 2,4,8,16,32,64]

The task is the shipped max-digit one (sequences of LENGTH digits, the class is their
largest digit). Every member is the same pre-LN GELU encoder (d = WIDTH, HEADS heads, FFN
D_FF, per-feature layer norms) at depth L, its residual branches scaled by h = HORIZON / L:

    u <- u + h SelfAttention(LN1(u)),    u <- u + h FFN(LN2(u)),

on a learned digit embedding plus a learned position embedding, read out by a final layer
norm, the mean over the tokens and a dense layer. Two initialisations of the layers:

- independent: torch's default initialisation, drawn afresh for every layer (and every
  member);
- smooth: every layer parameter a smooth random function of depth sampled at the layer
  times t_k = (k + 1/2) h, theta(t) = sum_m A_m g_m(t) over MODES cosine modes
  g_0 = 1, g_m = sqrt(2) cos(pi m t / HORIZON) (orthonormal on [0, HORIZON]), the
  coefficients A_m drawn once for the whole family, N(0, s^2 / MODES) with s the standard
  deviation of torch's default initialisation of that parameter (so that each layer's
  weights have the default's variance); parameters that torch initialises to a constant
  (biases set to 0, the norms' gains 1 and biases 0) keep it. Every member samples the
  same theta(t).

The embedding and the readout start from the same seeded draw in every member, and every
member trains with the same optimiser (Adam, LR), data (TRAIN seeded sequences), batch
order and budget (EPOCHS epochs of batches of BATCH). Each member is written by
solvers.save_model with h folded into its weights (docs/depth.md section 1) to
reports/networks/depth-max-digit/<initialisation>/L<depth>.safetensors, and the first
HELD_OUT held-out sequences with their labels to depth-max-digit-tokens.npy and
depth-max-digit-labels.npy. The script prints each member's held-out accuracy by tide
(Lie at dt = 1 and the readout) next to torch's. Everything is seeded and single-threaded
per member; the members train in parallel processes (joblib), one per core.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import math
import time
from pathlib import Path

import joblib
import numpy as np
import torch

from solvers import load_model, save_model, solve
from solvers.network.embedding import TokenEmbedding
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout

OUT = Path(__file__).resolve().parents[2] / "reports" / "networks"
NAME = "depth-max-digit"
DEPTHS = (2, 4, 8, 16, 32, 64)
INITIALISATIONS = ("smooth", "independent")
HORIZON = 1.0
"""T, as in Sander et al.: the flow runs over [0, 1] and member L's step is 1 / L."""
WIDTH, HEADS, D_FF = 16, 2, 32
LENGTH = 8
TRAIN, HELD = 5000, 1000
HELD_OUT = 50
"""The family's batch in the built-in study."""
EPOCHS, BATCH, LR = 12, 64, 3e-3
MODES = 3
SEED = 0


class DepthScaled(torch.nn.Module):
    """The family's encoder at depth L (module docstring)."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        torch.manual_seed(SEED)
        self.embed = torch.nn.Embedding(10, WIDTH)
        self.position = torch.nn.Parameter(0.1 * torch.randn(LENGTH, WIDTH))
        self.final = torch.nn.LayerNorm(WIDTH)
        self.classify = torch.nn.Linear(WIDTH, 10)
        self.h = HORIZON / depth
        self.layers = torch.nn.ModuleList(_layer() for _ in range(depth))

    def states(self, digits: torch.Tensor) -> torch.Tensor:
        return self.embed(digits) + self.position

    def forward(self, digits: torch.Tensor) -> torch.Tensor:
        u = self.states(digits)
        for layer in self.layers:
            y = layer.norm1(u)
            u = u + self.h * layer.self_attn(y, y, y, need_weights=False)[0]
            y = layer.norm2(u)
            u = u + self.h * layer.linear2(layer.activation(layer.linear1(y)))
        return self.classify(self.final(u).mean(1))


def _layer() -> torch.nn.TransformerEncoderLayer:
    return torch.nn.TransformerEncoderLayer(
        WIDTH, HEADS, D_FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )


def smooth_layers(module: DepthScaled) -> None:
    """Overwrite the layers' parameters by the family's smooth theta(t) at t_k = (k + 1/2) h
    (module docstring); the coefficients come from a generator seeded alike for every L."""
    depth = len(module.layers)
    times = (np.arange(depth) + 0.5) * module.h
    modes = np.stack(
        [np.ones(depth)]
        + [math.sqrt(2) * np.cos(math.pi * m * times / HORIZON) for m in range(1, MODES)]
    )  # (MODES, depth)
    generator = torch.Generator().manual_seed(SEED + 1)
    reference = _layer()  # torch's default draw: each parameter's constant or spread
    for name, value in reference.named_parameters():
        spread = float(value.detach().std()) if value.numel() > 1 else 0.0
        if spread == 0.0:  # a constant initialisation (0 or 1) stays constant in depth
            samples = [value.detach().clone() for _ in range(depth)]
        else:
            shape = (MODES, *value.shape)
            draw = torch.randn(shape, generator=generator, dtype=torch.float64)
            coefficients = draw * (spread / math.sqrt(MODES))
            weights = torch.tensor(modes.T)  # (depth, MODES)
            flat = weights @ coefficients.reshape(MODES, -1)
            samples = [flat[k].reshape(value.shape).float() for k in range(depth)]
        for layer, sample in zip(module.layers, samples, strict=True):
            layer.get_parameter(name).data.copy_(sample)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(SEED)
    sequences = torch.tensor(rng.integers(0, 10, (TRAIN + HELD, LENGTH)))
    return sequences, sequences.max(1).values


def train_member(initialisation: str, depth: int) -> dict:
    """Train one member and write it (module docstring); returns what it printed."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    started = time.perf_counter()
    sequences, labels = _data()
    module = DepthScaled(depth)
    if initialisation == "smooth":
        smooth_layers(module)
    optimiser = torch.optim.Adam(module.parameters(), lr=LR)
    generator = torch.Generator().manual_seed(SEED)
    module.train()
    loss_value = math.nan
    for _ in range(EPOCHS):
        order = torch.randperm(TRAIN, generator=generator)
        total = 0.0
        for start in range(0, TRAIN, BATCH):
            take = order[start : start + BATCH]
            optimiser.zero_grad()
            loss = torch.nn.functional.cross_entropy(module(sequences[take]), labels[take])
            loss.backward()
            optimiser.step()
            total += loss.item() * len(take)
        loss_value = total / TRAIN
    module = module.double().eval()
    held = sequences[TRAIN:]
    with torch.no_grad():
        torch_accuracy = float((module(held).argmax(-1) == labels[TRAIN:]).double().mean())
    path = save_model(
        network(module, f"{NAME}/{initialisation}/L{depth}"), _path(initialisation, depth)
    )
    tide = load_model(path)
    states = solve(tide.problem(tide.embed(held[:HELD_OUT].numpy())))
    accuracy = float(np.mean(tide.readout.decisions(states) == labels[TRAIN:][:HELD_OUT].numpy()))
    return {
        "member": f"{initialisation} L = {depth}",
        "loss": loss_value,
        "accuracy": accuracy,
        "torch_accuracy": torch_accuracy,
        "seconds": time.perf_counter() - started,
    }


def network(module: DepthScaled, source: str) -> Model:
    """The member as a suite Model: its layers with h folded into the attention output map
    and bias and the FFN's down map and bias (docs/depth.md section 1), read by
    solvers.load_model from a torch encoder of the folded layers."""
    folded = torch.nn.ModuleList(copy.deepcopy(layer) for layer in module.layers)
    with torch.no_grad():
        for layer in folded:
            for part in (layer.self_attn.out_proj, layer.linear2):
                part.weight.mul_(module.h)
                part.bias.mul_(module.h)
    encoder = torch.nn.TransformerEncoder(_layer(), 1, enable_nested_tensor=False).double()
    encoder.layers = folded
    layers = load_model(encoder)
    final = module.final
    readout = Readout(
        (final.weight.detach().numpy(), final.bias.detach().numpy(), final.eps),
        "mean",
        (Dense(module.classify.weight.detach().numpy().T, module.classify.bias.detach().numpy()),),
    )
    embedding = TokenEmbedding(
        module.embed.weight.detach().numpy(), module.position.detach().numpy()
    )
    return Model(layers.layers, layers.norm, False, readout, source, embedding)


def _path(initialisation: str, depth: int) -> Path:
    return OUT / NAME / initialisation / f"L{depth}.safetensors"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--depths",
        default=",".join(map(str, DEPTHS)),
        help="comma-separated depths, each twice the one before (default: %(default)s)",
    )
    parser.add_argument("--jobs", type=int, default=-1, help="parallel processes (default: cores)")
    args = parser.parse_args()
    try:
        depths = sorted({int(x) for x in args.depths.split(",")})
    except ValueError:
        parser.error(f"--depths must be comma-separated integers, got {args.depths!r}")
    ratios = {b / a for a, b in itertools.pairwise(depths)}
    if depths[0] < 1 or len(depths) < 2 or len(ratios) != 1 or not ratios.pop().is_integer():
        parser.error(
            f"--depths must be two or more depths growing by one integer factor, got {depths}"
        )
    for initialisation in INITIALISATIONS:
        (OUT / NAME / initialisation).mkdir(parents=True, exist_ok=True)
    sequences, labels = _data()
    np.save(OUT / f"{NAME}-tokens.npy", sequences[TRAIN:][:HELD_OUT].numpy().astype(np.int64))
    np.save(OUT / f"{NAME}-labels.npy", labels[TRAIN:][:HELD_OUT].numpy().astype(np.int64))
    jobs = [(i, L) for L in sorted(depths, reverse=True) for i in INITIALISATIONS]
    for done in joblib.Parallel(n_jobs=args.jobs, return_as="generator_unordered")(
        joblib.delayed(train_member)(i, L) for i, L in jobs
    ):
        print(
            f"{done['member']}: training loss {done['loss']:.4f}, held-out accuracy "
            f"{done['accuracy']:.3f} by tide on the first {HELD_OUT} (torch, all {HELD}: "
            f"{done['torch_accuracy']:.3f}), {done['seconds']:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
