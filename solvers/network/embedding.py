"""Embeddings: a network's own map from what its users hold (token ids, images) to the
initial token states u(0) of the flow (docs/networks.md section 5).

The embedding is applied once, before the flow; it is not a layer of it. It is computed
in float64 with numpy from the network's own weights, so a study can start from token
ids without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.backends import backend
from solvers.equation.norms import layer_norm
from solvers.errors import InvalidInputError
from solvers.space.vit import vit_initial_condition
from solvers.validation import finite_array, indices

FLOAT64 = backend("float64")


@dataclass(frozen=True)
class TokenEmbedding:
    """u0[b, x] = E[t_bx] + P[x] + T, then LN(g, b, eps) when `norm` is given: word
    embeddings E (V, d), learned absolute positions P (max positions, d; None: none),
    one token-type row T (d,; BERT's type 0, the library's default; None: none), and
    BERT's embedding layer norm (None: none). Positions count from 0 at the first column,
    padding or not, as the libraries do when given no position ids; with `padding_id` p
    (RoBERTa's rule) they count from p + 1 over the tokens whose id is not p, and a token
    with id p sits at position p."""

    word: np.ndarray
    position: np.ndarray | None = None
    token_type: np.ndarray | None = None
    norm: tuple[np.ndarray, np.ndarray, float] | None = None
    padding_id: int | None = None
    takes = "tokens"
    """What it embeds: token ids."""

    def __post_init__(self) -> None:
        word = finite_array("word embeddings", self.word, (None, None))
        d = word.shape[1]
        object.__setattr__(self, "word", word)
        if self.position is not None:
            object.__setattr__(
                self, "position", finite_array("position embeddings", self.position, (None, d))
            )
        if self.token_type is not None:
            object.__setattr__(
                self, "token_type", finite_array("token-type embedding", self.token_type, (d,))
            )

    @property
    def d_model(self) -> int:
        return self.word.shape[1]

    @property
    def vocabulary(self) -> int:
        return self.word.shape[0]

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        """u0 (B, N, d) of token ids (B, N)."""
        tokens = token_ids(tokens, self.vocabulary)
        positions = np.broadcast_to(np.arange(tokens.shape[1]), tokens.shape)
        if self.padding_id is not None:
            real = tokens != self.padding_id
            positions = np.cumsum(real, axis=1) * real + self.padding_id
        if self.position is not None and positions.max() >= len(self.position):
            raise InvalidInputError(
                f"tokens need position {positions.max()}; the model embeds positions up to "
                f"{len(self.position) - 1}"
            )
        u0 = self.word[tokens]
        if self.position is not None:
            u0 = u0 + self.position[positions]
        if self.token_type is not None:
            u0 = u0 + self.token_type
        if self.norm is not None:
            gain, bias, eps = self.norm
            u0 = layer_norm(FLOAT64, u0, gain, bias, np.float64(eps))
        return u0


def token_ids(tokens: object, vocabulary: int, name: str = "tokens") -> np.ndarray:
    """`tokens` as an integer array (B, N) of ids in [0, vocabulary); a one-line
    InvalidInputError otherwise."""
    return indices(name, tokens, (None, None), vocabulary, "token ids", "the vocabulary")


@dataclass(frozen=True)
class PatchEmbedding:
    """The ViT's u0 = [c; e_1; ...; e_P] + E of images (B, C, H, W): patch tokens e_ij from
    a convolution with kernel = stride = p (`weight` (d, C, p, p), `bias` (d,)), the class
    token c in front and the position embeddings E (1 + P, d) added (solvers.space.vit)."""

    weight: np.ndarray
    bias: np.ndarray
    class_token: np.ndarray
    positions: np.ndarray
    takes = "pixels"
    """What it embeds: images."""

    def __post_init__(self) -> None:
        weight = finite_array("patch weight", self.weight, (None, None, None, None))
        if weight.shape[2] != weight.shape[3]:
            raise InvalidInputError(f"the patch weight must be square, got {weight.shape}")
        d = weight.shape[0]
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "bias", finite_array("patch bias", self.bias, (d,)))
        object.__setattr__(self, "class_token", finite_array("class token", self.class_token, (d,)))
        object.__setattr__(
            self, "positions", finite_array("position embeddings", self.positions, (None, d))
        )

    @property
    def d_model(self) -> int:
        return self.weight.shape[0]

    @property
    def patch(self) -> int:
        return self.weight.shape[2]

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        """u0 (B, 1 + P, d) of images (B, C, H, W)."""
        pixels = finite_array("pixels", pixels, (None, self.weight.shape[1], None, None))
        count = (pixels.shape[2] // self.patch) * (pixels.shape[3] // self.patch)
        divides = not (pixels.shape[2] % self.patch or pixels.shape[3] % self.patch)
        if divides and count + 1 != len(self.positions):
            raise InvalidInputError(
                f"pixels of size {pixels.shape[2]} x {pixels.shape[3]} make {count} patches of "
                f"{self.patch} x {self.patch}; the model's position embeddings are for "
                f"{len(self.positions) - 1}"
            )
        return vit_initial_condition(
            pixels, self.patch, self.weight, self.bias, self.class_token, self.positions
        )


Embedding = TokenEmbedding | PatchEmbedding
