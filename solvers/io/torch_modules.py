"""Conversion to and from torch.nn.TransformerEncoderLayer / TransformerEncoder.

torch is imported lazily inside these functions: it is an optional, test-time dependency
and never needed to solve anything.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from solvers.equation.norms import Placement, as_placement
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError


def torch_style_norm(gain: np.ndarray, bias: np.ndarray) -> tuple[Any, Any]:
    """A layer norm's per-feature (gain, bias) as LayerWeights keeps them: a constant
    vector is exactly a scalar gain (or bias), and is kept as one."""
    return tuple(v[0] if np.all(v == v[0]) else v for v in (gain, bias))


def torch_available() -> bool:
    """True when torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InvalidInputError(
            "torch is not installed; install the test extra: pip install 'tide-suite[test]'"
        ) from exc
    return torch


def _encoder_layers(module: Any) -> list[Any]:
    torch = _import_torch()
    nn = torch.nn
    if isinstance(module, nn.TransformerEncoderLayer):
        return [module]
    if isinstance(module, nn.TransformerEncoder):
        if module.norm is not None:
            raise InvalidInputError(
                "TransformerEncoder.norm (a final layer norm after the last layer) is not part of "
                "the layer flow: convert the layers, from_torch(encoder.layers), solve, and "
                "apply encoder.norm to the output yourself"
            )
        return list(module.layers)
    if isinstance(module, nn.ModuleList | list | tuple) and all(
        isinstance(layer, nn.TransformerEncoderLayer) for layer in module
    ):
        if not len(module):
            raise InvalidInputError("from_torch got an empty list of encoder layers")
        return list(module)
    raise InvalidInputError(
        "from_torch takes a torch.nn.TransformerEncoderLayer, a TransformerEncoder, or a "
        f"list (ModuleList) of TransformerEncoderLayers, got {type(module).__name__}"
    )


def tensor_array(tensor: Any) -> np.ndarray:
    """A torch tensor as a float64 numpy array (detached, on the CPU)."""
    return tensor.detach().cpu().double().numpy()


def norm_parameters(norm: Any) -> tuple[np.ndarray, np.ndarray]:
    """A torch LayerNorm's gain and bias as float64 arrays (ones and zeros where it has
    none: elementwise_affine=False or bias=False)."""
    d = norm.normalized_shape[0]
    gain = np.ones(d) if norm.weight is None else tensor_array(norm.weight)
    bias = np.zeros(d) if norm.bias is None else tensor_array(norm.bias)
    return gain, bias


def _norm_pair(norm: Any) -> tuple[Any, Any]:
    return torch_style_norm(*norm_parameters(norm))


def _layer_weights(index: int, layer: Any) -> LayerWeights:
    torch = _import_torch()
    functional, chosen = torch.nn.functional, layer.activation
    # torch flags any GELU module as gelu (activation_relu_or_gelu = 2), the tanh one too
    if chosen is functional.relu or isinstance(chosen, torch.nn.ReLU):
        activation = "relu"
    elif chosen is functional.gelu or (
        isinstance(chosen, torch.nn.GELU) and chosen.approximate == "none"
    ):
        activation = "gelu"
    elif (
        isinstance(chosen, functools.partial)
        and chosen.func is functional.gelu
        and not chosen.args
        and chosen.keywords == {"approximate": "tanh"}
    ):
        activation = "gelu-tanh"
    elif chosen is functional.silu or isinstance(chosen, torch.nn.SiLU):
        activation = "silu"
    else:
        raise InvalidInputError(
            f"layer {index}: activation {layer.activation!r} is not supported; only relu "
            "(the projection onto the non-negative orthant), exact gelu, silu, and gelu's tanh "
            "form as functools.partial(F.gelu, approximate='tanh') (torch's fast path runs an "
            "nn.GELU('tanh') module as the exact gelu)"
        )
    attn = layer.self_attn
    if not attn._qkv_same_embed_dim or attn.bias_k is not None or attn.add_zero_attn:
        raise InvalidInputError(
            f"layer {index}: self-attention with kdim/vdim != d_model, add_bias_kv or "
            "add_zero_attn is not supported"
        )
    if layer.norm1.eps != layer.norm2.eps:
        raise InvalidInputError(
            f"layer {index}: norm1.eps={layer.norm1.eps} differs from norm2.eps={layer.norm2.eps}"
        )
    d, heads = attn.embed_dim, attn.num_heads
    d_k = d // heads
    in_w = tensor_array(attn.in_proj_weight)
    in_b = np.zeros(3 * d) if attn.in_proj_bias is None else tensor_array(attn.in_proj_bias)
    out_w = tensor_array(attn.out_proj.weight)
    out_b = np.zeros(d) if attn.out_proj.bias is None else tensor_array(attn.out_proj.bias)

    def per_head(block: int) -> tuple[np.ndarray, np.ndarray]:
        # rows block*d .. (block+1)*d of in_proj map x -> x W^T; head h owns d_k of them
        w = in_w[block * d : (block + 1) * d].reshape(heads, d_k, d).transpose(0, 2, 1)
        return w, in_b[block * d : (block + 1) * d].reshape(heads, d_k)

    (wq, bq), (wk, bk), (wv, bv) = per_head(0), per_head(1), per_head(2)
    lin1, lin2 = layer.linear1, layer.linear2
    return LayerWeights(
        wq=wq,
        bq=bq,
        wk=wk,
        bk=bk,
        wv=wv,
        bv=bv,
        wo=out_w.T.reshape(heads, d_k, d),
        bo=out_b,
        w1=tensor_array(lin1.weight).T,
        b1=np.zeros(lin1.out_features) if lin1.bias is None else tensor_array(lin1.bias),
        w2=tensor_array(lin2.weight).T,
        b2=np.zeros(d) if lin2.bias is None else tensor_array(lin2.bias),
        norm1=_norm_pair(layer.norm1),
        norm2=_norm_pair(layer.norm2),
        eps=layer.norm1.eps,
        scale=None,  # torch's scale is the canonical 1/sqrt(d_k)
        activation=activation,
    )


def from_torch(module: Any) -> list[LayerWeights]:
    """The LayerWeights of a torch TransformerEncoderLayer, or of each layer of a
    TransformerEncoder or of a list (ModuleList) of encoder layers.

    relu, exact gelu, silu and gelu's tanh form (see `_torch_activation`) are accepted;
    dropout is ignored (the model is read as in eval mode). Whether the layers are pre- or
    post-LN is given by `torch_norm_placement`.
    """
    return [_layer_weights(n, layer) for n, layer in enumerate(_encoder_layers(module))]


def torch_norm_placement(module: Any) -> Placement:
    """PRE if the layers are norm_first, else POST (the Problem's `norm`)."""
    placements = {layer.norm_first for layer in _encoder_layers(module)}
    if len(placements) != 1:
        raise InvalidInputError("the encoder mixes norm_first=True and norm_first=False layers")
    return Placement.PRE if placements.pop() else Placement.POST


def to_torch(
    layers: Sequence[LayerWeights], norm: Placement | str = Placement.POST, dtype: str = "float64"
) -> Any:
    """A torch.nn.TransformerEncoder (batch_first, eval mode) carrying these weights.

    torch's layout requires d_k = d_v = d / heads and scale 1 / sqrt(d_k); norm is
    "post" or "pre" (torch has no un-normalised encoder layer).
    """
    torch = _import_torch()
    norm = as_placement(norm)
    if not norm.has_norms:
        raise InvalidInputError(f"torch encoder layers have norm 'post' or 'pre', got {norm!r}")
    first = layers[0]
    d, heads = first.d_model, first.heads
    torch_dtype = getattr(torch, dtype)
    modules = []
    for n, w in enumerate(layers):
        w.refuse_decoder_parts(f"layer {n}: a torch TransformerEncoderLayer")
        if (w.d_model, w.heads, w.d_k, w.d_v) != (
            d,
            heads,
            d // heads,
            d // heads,
        ) or not np.isclose(w.attention_scale, 1 / np.sqrt(d // heads), rtol=1e-15):
            raise InvalidInputError(
                f"layer {n} does not fit torch's layout (d={d}, heads={heads}, "
                f"d_k = d_v = d/heads, "
                f"scale 1/sqrt(d_k)); got d={w.d_model}, heads={w.heads}, d_k={w.d_k}, "
                f"d_v={w.d_v}, scale={w.attention_scale}"
            )
        layer = torch.nn.TransformerEncoderLayer(
            d,
            heads,
            w.d_ff,
            dropout=0.0,
            layer_norm_eps=w.eps,
            batch_first=True,
            norm_first=norm.normalises_inputs,
            activation=_torch_activation(torch, w.activation),
            dtype=torch_dtype,
        )

        def tensor(a: np.ndarray) -> Any:
            return torch.tensor(np.ascontiguousarray(a), dtype=torch_dtype)

        with torch.no_grad():
            attn = layer.self_attn
            attn.in_proj_weight.copy_(
                tensor(
                    np.concatenate([m.transpose(0, 2, 1).reshape(d, d) for m in (w.wq, w.wk, w.wv)])
                )
            )
            attn.in_proj_bias.copy_(
                tensor(np.concatenate([w.bq.ravel(), w.bk.ravel(), w.bv.ravel()]))
            )
            attn.out_proj.weight.copy_(tensor(w.wo.reshape(d, d).T))
            attn.out_proj.bias.copy_(tensor(w.bo))
            layer.linear1.weight.copy_(tensor(w.w1.T))
            layer.linear1.bias.copy_(tensor(w.b1))
            layer.linear2.weight.copy_(tensor(w.w2.T))
            layer.linear2.bias.copy_(tensor(w.b2))
            for target, (gain, bias) in ((layer.norm1, w.norm1), (layer.norm2, w.norm2)):
                target.weight.copy_(tensor(np.broadcast_to(gain, (d,))))
                target.bias.copy_(tensor(np.broadcast_to(bias, (d,))))
        modules.append(layer)
    encoder = torch.nn.TransformerEncoder(modules[0], len(modules), enable_nested_tensor=False)
    encoder.layers = torch.nn.ModuleList(modules)
    return encoder.eval()


def _torch_activation(torch: Any, activation: str) -> Any:
    """torch's form of an activation. GELU's tanh form as a function, not an nn.GELU
    module: torch's fast path treats every nn.GELU as the exact one."""
    if activation == "gelu-tanh":
        return functools.partial(torch.nn.functional.gelu, approximate="tanh")
    if activation == "silu":
        return torch.nn.functional.silu
    return activation


def torch_forward(
    layers: Sequence[LayerWeights],
    u0: np.ndarray,
    norm: Placement | str = Placement.POST,
    causal: bool = False,
) -> np.ndarray:
    """torch's float64 output for these layers on u0 of shape (N, d) or (B, N, d)."""
    torch = _import_torch()
    encoder = to_torch(layers, norm)
    x = torch.tensor(np.asarray(u0, dtype=np.float64))
    batched = x.ndim == 3
    x = x if batched else x[None]
    mask = (
        torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1], dtype=torch.float64)
        if causal
        else None
    )
    with torch.no_grad():
        y = encoder(x, mask=mask, is_causal=causal)
    y = y.numpy()
    return y if batched else y[0]
