"""Readout: what turns a network's final token states into scores, decisions and an output
measure (docs/networks.md sections 1 and 5).

A readout is applied unchanged to any final state (the network's, a refinement's, the
time-step limit's), so a change of decision between them is a property of the flow, not
of the head. Two kinds:

- a classifier pools the tokens to one vector per input and maps it to class scores
  (BERT's pooler and classifier, ViT's classifier on the class token, GPT-2's score on the
  last real token); its targets are labels, one per input;
- a language-model head (no pooling) maps every token to scores over the vocabulary
  (GPT-2's ln_f and tied unembedding); the decision at position x predicts the token at
  x + 1, and its targets are the input's own tokens.

Only real tokens are read (the padding mask of docs/model.md section 6): pooling skips the
padding the way the library does, and an LM head is judged at real positions only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.special

from solvers.backends import Backend, backend
from solvers.equation.norms import LAYER, NormKind, as_norm_kind
from solvers.errors import InvalidInputError
from solvers.validation import finite_array, indices

FLOAT64 = backend("float64")
POOLINGS = ("first", "last", "mean")
"""How a classifier reduces the tokens to one vector: the first token (BERT's [CLS], ViT's
class token; the first position whatever the mask, as the libraries do), the last real
token (GPT-2's sequence classification), or the mean of the real tokens."""
DENSE_ACTIVATIONS = ("none", "tanh", "relu")
"""After a dense layer of the readout: nothing, tanh (BERT's pooler) or relu (DistilBERT's
pre-classifier)."""


@dataclass(frozen=True)
class Dense:
    """y = act(x W + b), W of shape (in, out) acting on the right."""

    weight: np.ndarray
    bias: np.ndarray
    activation: str = "none"

    def __post_init__(self) -> None:
        weight = finite_array("readout weight", self.weight, (None, None))
        bias = finite_array("readout bias", self.bias, (weight.shape[1],))
        if self.activation not in DENSE_ACTIVATIONS:
            raise InvalidInputError(
                f"readout activation must be one of {DENSE_ACTIVATIONS}, got {self.activation!r}"
            )
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "bias", bias)

    def __call__(self, x: np.ndarray, bk: Backend = FLOAT64) -> np.ndarray:
        """act(x W + b) in `bk` (active; float64 by default)."""
        y = bk.affine(x, bk.asarray(self.weight), bk.asarray(self.bias))
        if self.activation == "relu":
            return bk.relu_(y)
        return bk.tanh(y) if self.activation == "tanh" else y


@dataclass(frozen=True)
class Judged:
    """What a readout decides on a batch of final states, and how well."""

    decisions: np.ndarray
    """One decision per judged position, flat: per input (a classifier) or per real token
    in row-major order (an LM head)."""
    correct: np.ndarray | None
    """Per target, whether the decision hits it (None without targets)."""
    loss: float | None
    """Mean cross-entropy, in nats, of the scores against the targets (None without)."""

    @property
    def accuracy(self) -> float | None:
        return None if self.correct is None else float(np.mean(self.correct))

    @property
    def scored(self) -> int | None:
        """How many decisions have a target (inputs, or next-token positions)."""
        return None if self.correct is None else len(self.correct)


@dataclass(frozen=True)
class Margins:
    """How far each judged decision is from a tie (flat, in the order of Judged.decisions)."""

    gap: np.ndarray
    """The leader's score minus the runner-up's (0 for a tie; inf with one class)."""
    uncertain: np.ndarray
    """Whether some other class could overtake the leader when every entry of the states
    moves by at most the error given (to first order; Readout.margins)."""


@dataclass(frozen=True)
class Readout:
    """scores = dense_k(... dense_1(pool(N(U)))): an optional final norm N (`norm`, the
    parameters of its kind `norm_kind` followed by eps: (gain, bias, eps) for the layer norm
    g (U - mean) / sqrt(var + eps) + b per token and for the RMSNorm
    g U / sqrt(rms(U)^2 + eps) of a decoder (docs/model.md section 7); solvers.equation.norms),
    a pooling (POOLINGS;
    None keeps every token), then dense layers. Without dense layers it returns the
    (normalised) states and decides nothing; without a pooling but with dense layers it is
    a language-model head (module docstring)."""

    norm: tuple | None = None
    pool: str | None = None
    dense: tuple[Dense, ...] = field(default_factory=tuple)
    norm_kind: NormKind | str = LAYER

    def __post_init__(self) -> None:
        object.__setattr__(self, "norm_kind", as_norm_kind(self.norm_kind))
        if self.pool is not None and self.pool not in POOLINGS:
            raise InvalidInputError(f"pool must be one of {POOLINGS} or None, got {self.pool!r}")
        object.__setattr__(self, "dense", tuple(self.dense))

    @property
    def classifies(self) -> bool:
        """Whether it ends in scores to take decisions from (at least one dense layer)."""
        return bool(self.dense)

    @property
    def next_token(self) -> bool:
        """Whether it is a language-model head: scores at every token for the next one."""
        return self.classifies and self.pool is None

    @property
    def classes(self) -> int | None:
        """How many scores it gives per decision (classes, or the vocabulary's size)."""
        return self.dense[-1].weight.shape[1] if self.dense else None

    def __call__(
        self, states: np.ndarray, mask: np.ndarray | None = None, bk: Backend = FLOAT64
    ) -> np.ndarray:
        """The readout of final states of shape (..., N, d), in float64 or in `bk` (active:
        in arb, balls containing the scores of every state in the state balls); `mask`
        (..., N) marks the real tokens (None: all)."""
        x = np.asarray(states, dtype=np.float64) if bk is FLOAT64 else states
        if self.norm is not None:
            x = self._normalised(x, bk)
        if self.pool is not None:
            x = _pooled(x, self.pool, _real(mask, np.shape(x)[:-1]))
        for layer in self.dense:
            x = layer(x, bk)
        return x

    def _normalised(self, x: np.ndarray, bk: Backend = FLOAT64) -> np.ndarray:
        *parameters, eps = self.norm
        numbers = tuple(bk.asarray(p) for p in parameters)
        return self.norm_kind.apply(bk, x, numbers, bk.asarray(np.float64(eps)))

    def decisions(self, states: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """argmax of the scores: one decision per input (..., ), or per token (..., N) for
        an LM head (masked positions included; `judge` leaves them out)."""
        if not self.classifies:
            raise InvalidInputError("this readout has no classifier: no decisions to take")
        return np.argmax(self(states, mask), axis=-1)

    def judge(
        self,
        states: np.ndarray,
        mask: np.ndarray | None = None,
        targets: np.ndarray | None = None,
    ) -> Judged:
        """Decisions at the judged positions and, with `targets`, their accuracy and the
        cross-entropy loss. Targets are labels (...,) for a classifier, or for an LM head
        the input's tokens (..., N): position x is judged against token x + 1 where both
        are real (no such position: no accuracy and no loss)."""
        if not self.classifies:
            raise InvalidInputError("this readout has no classifier: no decisions to take")
        scores = self(states, mask)
        chosen = np.argmax(scores, axis=-1)
        if not self.next_token:
            correct = None if targets is None else chosen == targets
            return Judged(
                chosen.ravel(),
                None if correct is None else correct.ravel(),
                _cross_entropy(scores, targets),
            )
        real = _real(mask, chosen.shape)
        judged = real[..., :-1] & real[..., 1:]
        if targets is None or not judged.any():  # nothing to score: unmeasured, not 0
            return Judged(chosen[real], None, None)
        ahead = targets[..., 1:][judged]
        before = scores[..., :-1, :][judged]
        return Judged(
            chosen[real], chosen[..., :-1][judged] == ahead, _cross_entropy(before, ahead)
        )

    def sensitivity(self, states: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Per judged decision and class, b_v with |delta s_v| <= b_v max|delta U| to first
        order: a bound of the scores' change when every real entry of the final states moves
        by at most 1, shape (decisions, classes) in the order of Judged.decisions.

        The norm and the first dense map W together (docs/networks.md section 7): with
        W~ = diag(g) W, the score's gradient in a token's entries is A W~, A the norm's
        Jacobian without its gain, so b = sum_i |(A W~)_iv| <= |W~_v - mean W~_v|_1 / sigma
        + |c|_1 |c^T W~_v| / (d sigma^3) for a layer norm (c = V - mean V, sigma =
        sqrt(var + eps)), |W~_v|_1 / r + |V|_1 |V^T W~_v| / (d r^3) for RMSNorm (r =
        sqrt(mean V^2 + eps)), the exact sum for DyT, whose Jacobian is diagonal
        (NormKind.jacobian_bound), and |W_v|_1 without a norm. The pooling weighs each real
        token's bound (each moves on its own); then b <- (b |W|) |act'(y)| through the rest,
        each activation by its derivative at the point (relu's one-sided at 0)."""
        if not self.classifies:
            raise InvalidInputError("this readout has no classifier: no decisions to take")
        x = np.asarray(states, dtype=np.float64)
        real = _real(mask, x.shape[:-1])
        bound = _first_map_sensitivity(self, x)
        z = x
        if self.norm is not None:
            z = self._normalised(x)
        if self.pool is not None:
            bound = _pooled(bound, self.pool, real)
            z = _pooled(z, self.pool, real)
        for k, layer in enumerate(self.dense):
            if k:
                bound = bound @ np.abs(layer.weight)
            y = z @ layer.weight + layer.bias
            bound = bound * _slope(layer.activation, y)
            z = layer(z)
        return bound.reshape(-1, bound.shape[-1]) if self.pool is not None else bound[real]

    def margins(
        self, states: np.ndarray, mask: np.ndarray | None = None, error: float = 0.0
    ) -> Margins:
        """Each judged decision's gap and whether states wrong by up to `error` (max-abs)
        could change it: some class c != a (a the leader) with s_a - s_c <= error (b_a + b_c),
        b the `sensitivity` (first order in `error`)."""
        scores = self(states, mask)
        if self.pool is not None:
            flat = scores.reshape(-1, scores.shape[-1])
        else:
            flat = scores[_real(mask, scores.shape[:-1])]
        leader = np.argmax(flat, axis=-1)[:, None]
        lead = np.take_along_axis(flat, leader, axis=-1)
        others = np.ones(flat.shape, bool)
        np.put_along_axis(others, leader, False, axis=-1)
        gap = np.where(others, lead - flat, np.inf).min(axis=-1)
        uncertain = np.zeros(len(flat), bool)
        if error > 0:
            reach = self.sensitivity(states, mask) * error
            lead_reach = np.take_along_axis(reach, leader, axis=-1)
            slack = np.where(others, lead - flat - (lead_reach + reach), np.inf)
            uncertain = slack.min(axis=-1) <= 0
        return Margins(gap, uncertain)

    def check_targets(self, targets: np.ndarray, batch: tuple[int, ...], name: str) -> np.ndarray:
        """`targets` checked for this readout on inputs of leading shape `batch` (B, N):
        integer class indices (B,) in range for a classifier, or token ids (B, N) below the
        vocabulary's size for an LM head; a one-line InvalidInputError otherwise."""
        if not self.classifies:
            raise InvalidInputError(f"{name}: the model's readout takes no decisions to judge")
        shape = batch if self.next_token else batch[:1]
        what = "token ids" if self.next_token else "class indices"
        within = f"the readout's {self.classes} scores"
        return indices(name, targets, shape, self.classes, what, within)


def _first_map_sensitivity(readout: Readout, x: np.ndarray) -> np.ndarray:
    """Per token of x (..., N, d), sum_i |d (N(x) W)_v / d x_i| bounded as in
    Readout.sensitivity: the final norm N (if any, NormKind.jacobian_bound) and the first
    dense map W together."""
    weight = readout.dense[0].weight
    if readout.norm is None:
        return np.broadcast_to(np.abs(weight).sum(axis=0), (*x.shape[:-1], weight.shape[1]))
    *parameters, eps = readout.norm
    return readout.norm_kind.jacobian_bound(x, tuple(parameters), float(eps), weight)


def _slope(activation: str, y: np.ndarray) -> np.ndarray | float:
    """|act'(y)| at the point, for the first-order bound: 1 - tanh(y)^2 for tanh; for relu 1
    where y >= 0 (the larger one-sided slope at 0) and 0 below; 1 without an activation."""
    if activation == "tanh":
        return 1.0 - np.tanh(y) ** 2
    return (y >= 0).astype(np.float64) if activation == "relu" else 1.0


def _real(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """The padding mask (True for a real token) broadcast to `shape` (..., N)."""
    return np.ones(shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), shape)


def _pooled(x: np.ndarray, pool: str, real: np.ndarray) -> np.ndarray:
    """One vector per input from tokens x (..., N, d): the first token, the last real one,
    or the mean of the real ones."""
    if pool == "first":
        return x[..., 0, :]
    if pool == "last":
        last = real.shape[-1] - 1 - np.argmax(real[..., ::-1], axis=-1)
        return np.take_along_axis(x, last[..., None, None], axis=-2)[..., 0, :]
    return (x * real[..., None].astype(np.float64)).sum(axis=-2) / real.sum(axis=-1)[..., None]


def _cross_entropy(scores: np.ndarray, targets: np.ndarray | None) -> float | None:
    """mean over the targets of -log softmax(scores)[target], in nats."""
    if targets is None:
        return None
    log_p = scipy.special.log_softmax(scores, axis=-1)
    return float(-np.mean(np.take_along_axis(log_p, targets[..., None], axis=-1)))
