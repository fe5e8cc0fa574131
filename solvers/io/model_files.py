"""load_model and save_model: a user's network in, as a Model; weights out, as safetensors
(docs/networks.md sections 1 and 2).

Sources: a torch TransformerEncoder or TransformerEncoderLayer (an encoder's final norm
becomes the readout), a Hugging Face module (BERT, RoBERTa, DistilBERT, ViT, GPT-2, Llama,
Mistral, Qwen2: bare, task or LM model; solvers.io.hugging_face), a
directory written by `save_pretrained` (config.json and safetensors, read locally with
solvers.io.safetensors_reader, numpy alone), or a `.safetensors` file written by `save_model` (the
architecture in its metadata). Nothing is ever unpickled: a pickle, or any file that is
not safetensors, is refused with a one-line error naming it. torch is imported only for
torch modules, the safetensors package only to write; transformers never.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from solvers.equation.norms import as_norm_kind
from solvers.equation.weights import GATE_MAPS, MAPS, LayerWeights
from solvers.errors import InvalidInputError
from solvers.io.hf_tensors import Tensors
from solvers.io.hugging_face import hf_model
from solvers.io.safetensors_reader import read_safetensors
from solvers.io.torch_modules import (
    from_torch,
    norm_parameters,
    tensor_array,
    torch_norm_placement,
)
from solvers.network.embedding import PatchEmbedding, TokenEmbedding
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout

FORMAT = "tide-model/1"
"""The `format` entry of save_model's metadata."""


def load_model(source: Any) -> Model:
    """The Model of `source` (see the module docstring)."""
    if isinstance(source, str | Path):
        path = Path(source)
        if path.is_dir():
            return _pretrained_directory(path)
        if path.is_file():
            return _tide_file(path)
        raise InvalidInputError(f"{path}: no such file or directory")
    module = type(source).__module__
    if module.startswith("transformers."):
        arrays = {name: tensor_array(tensor) for name, tensor in source.state_dict().items()}
        return hf_model(source.config.to_dict(), arrays, type(source).__name__)
    if module.startswith("torch."):
        return _torch_encoder(source)
    raise InvalidInputError(
        f"cannot read a model from {type(source).__name__}: give a torch encoder, a Hugging "
        "Face model, a save_pretrained directory or a .safetensors file"
    )


def _torch_encoder(module: Any) -> Model:
    """A torch encoder: its layers, placement, and final norm (if any) as the readout."""
    import torch

    final = (
        getattr(module, "norm", None) if isinstance(module, torch.nn.TransformerEncoder) else None
    )
    layers = module.layers if final is not None else module
    readout = None
    if final is not None:
        readout = Readout(norm=(*norm_parameters(final), float(final.eps)))
    return Model(
        tuple(from_torch(layers)),
        torch_norm_placement(layers),
        False,
        readout,
        type(module).__name__,
    )


def _pretrained_directory(path: Path) -> Model:
    """config.json and the safetensors weights (one file, or the shards an index lists)."""
    config_path = path / "config.json"
    if not config_path.is_file():
        raise InvalidInputError(f"{path}: no config.json (not a save_pretrained directory)")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{config_path}: not valid JSON ({exc})") from None
    files = sorted(path.glob("*.safetensors"))
    if not files:
        pickled = sorted(p.name for p in path.glob("*.bin")) + sorted(
            p.name for p in path.glob("*.pt")
        )
        found = f" (found {', '.join(pickled)}: pickles, which tide never loads)" if pickled else ""
        raise InvalidInputError(f"{path}: no .safetensors weights{found}")
    arrays: dict[str, np.ndarray] = {}
    for file in files:
        arrays |= read_safetensors(file)[0]
    return hf_model(config, arrays, str(path))


def _tide_file(path: Path) -> Model:
    arrays, metadata = read_safetensors(path)
    if metadata.get("format") != FORMAT:
        raise InvalidInputError(
            f"{path}: a safetensors file without tide's metadata (format {FORMAT!r}); "
            "a Hugging Face model is read from its save_pretrained directory"
        )
    try:
        architecture = json.loads(metadata["architecture"])
    except (KeyError, json.JSONDecodeError):
        raise InvalidInputError(
            f"{path}: the metadata's architecture is missing or not JSON"
        ) from None
    if not architecture.get("layers"):
        raise InvalidInputError(f"{path}: the model has no layers (its architecture lists none)")
    t = Tensors(str(path), arrays)
    layers = []
    for i, spec in enumerate(architecture["layers"]):
        shapes = spec["shapes"]
        names = MAPS + GATE_MAPS if "w_gate" in shapes else MAPS
        values = {name: t(f"layers.{i}.{name}", tuple(shapes[name])) for name in names}
        kind = as_norm_kind(spec.get("norm_kind", "layer"))
        norms = [
            tuple(_norm_part(t, shapes, f"norm{j}.{part}", i) for part in kind.parameters)
            for j in (1, 2)
        ]
        layers.append(
            LayerWeights(
                **values,
                norm1=norms[0],
                norm2=norms[1],
                eps=spec["eps"],
                scale=spec["scale"],
                activation=spec["activation"],
                norm_kind=kind,
                rope_theta=spec.get("rope_theta"),
                rope_factor=spec.get("rope_factor", 1.0),
            )
        )
    readout = None
    if (spec := architecture.get("readout")) is not None:
        norm, kind = None, as_norm_kind(spec.get("norm_kind", "layer"))
        if spec["norm"] is not None:
            d = len(layers[0].bo)
            norm = (
                *(_readout_norm_part(t, kind, part, d) for part in kind.parameters),
                spec["norm"],
            )
        dense = tuple(
            Dense(
                t(f"readout.dense.{k}.weight", tuple(shape)),
                t(f"readout.dense.{k}.bias", (shape[1],)),
                activation,
            )
            for k, (shape, activation) in enumerate(spec["dense"])
        )
        readout = Readout(norm, spec["pool"], dense, kind)
    embedding = _read_embedding(t, architecture.get("embedding"), len(layers[0].bo))
    return Model(
        tuple(layers),
        architecture["norm"],
        architecture["causal"],
        readout,
        str(path),
        embedding,
        architecture.get("window"),
    )


def _read_embedding(
    t: Tensors, spec: dict[str, Any] | None, d: int
) -> TokenEmbedding | PatchEmbedding | None:
    """The embedding save_model wrote (`spec` from the metadata: its kind and shapes)."""
    if spec is None:
        return None
    if spec["kind"] == "patches":
        shape = tuple(spec["weight"])
        return PatchEmbedding(
            t("embedding.weight", shape),
            t("embedding.bias", (d,)),
            t("embedding.class_token", (d,)),
            t("embedding.positions", tuple(spec["positions"])),
        )
    position = spec.get("position")
    return TokenEmbedding(
        t("embedding.word", tuple(spec["word"])),
        None if position is None else t("embedding.position", tuple(position)),
        t("embedding.token_type", (d,)) if spec.get("token_type") else None,
        None
        if spec.get("norm") is None
        else (t("embedding.norm.gain", (d,)), t("embedding.norm.bias", (d,)), spec["norm"]),
        spec.get("padding_id"),
    )


def _embedding_tensors(
    embedding: TokenEmbedding | PatchEmbedding | None,
) -> tuple[dict[str, np.ndarray], dict[str, Any] | None]:
    """The tensors and the metadata spec under which save_model stores an embedding."""
    if embedding is None:
        return {}, None
    if isinstance(embedding, PatchEmbedding):
        tensors = {
            "embedding.weight": embedding.weight,
            "embedding.bias": embedding.bias,
            "embedding.class_token": embedding.class_token,
            "embedding.positions": embedding.positions,
        }
        spec = {
            "kind": "patches",
            "weight": list(embedding.weight.shape),
            "positions": list(embedding.positions.shape),
        }
        return tensors, spec
    tensors = {"embedding.word": embedding.word}
    spec = {
        "kind": "tokens",
        "word": list(embedding.word.shape),
        "position": None,
        "token_type": embedding.token_type is not None,
        "norm": None,
        "padding_id": embedding.padding_id,
    }
    if embedding.position is not None:
        tensors["embedding.position"] = embedding.position
        spec["position"] = list(embedding.position.shape)
    if embedding.token_type is not None:
        tensors["embedding.token_type"] = embedding.token_type
    if embedding.norm is not None:
        gain, bias, eps = embedding.norm
        tensors["embedding.norm.gain"] = np.broadcast_to(gain, embedding.word.shape[1:])
        tensors["embedding.norm.bias"] = np.broadcast_to(bias, embedding.word.shape[1:])
        spec["norm"] = float(eps)
    return tensors, spec


def _norm_part(t: Tensors, shapes: dict[str, list[int]], name: str, layer: int) -> Any:
    """A norm's parameter: a scalar (stored with shape (1,)) or a per-feature vector."""
    shape = tuple(shapes[name])
    value = t(f"layers.{layer}.{name}", shape or (1,))
    return value if shape else value[0]


def _readout_norm_part(t: Tensors, kind: Any, part: str, d: int) -> Any:
    """The readout norm's parameter `part`: per feature (d,) or a scalar (stored as (1,))."""
    if kind.per_feature(part):
        return t(f"readout.norm.{part}", (d,))
    return t(f"readout.norm.{part}", (1,))[0]


def save_model(model: Model, path: str | Path) -> Path:
    """Write the model to a `.safetensors` file (float64 tensors; the architecture, readout
    and embedding as JSON in the metadata) that load_model reads back exactly."""
    try:
        from safetensors.numpy import save_file
    except ImportError:
        raise InvalidInputError(
            "save_model needs the safetensors package: pip install 'tide-suite[models]'"
        ) from None
    path = Path(path)
    if path.suffix != ".safetensors":
        raise InvalidInputError(f"{path}: save_model writes a .safetensors file")
    tensors: dict[str, np.ndarray] = {}
    layers = []
    for i, w in enumerate(model.layers):
        shapes = {}
        for name in w.map_names:
            tensors[f"layers.{i}.{name}"] = np.ascontiguousarray(getattr(w, name), np.float64)
            shapes[name] = list(np.shape(getattr(w, name)))
        for j, norm in ((1, w.norm1), (2, w.norm2)):
            for part, value in zip(w.norm_kind.parameters, norm, strict=True):
                tensors[f"layers.{i}.norm{j}.{part}"] = np.atleast_1d(np.asarray(value, np.float64))
                shapes[f"norm{j}.{part}"] = list(np.shape(value))
        layers.append(
            {
                "shapes": shapes,
                "eps": float(w.eps),
                "activation": w.activation,
                "scale": None if w.scale is None else float(w.scale),
                "norm_kind": w.norm_kind.name,
                "rope_theta": w.rope_theta,
                "rope_factor": w.rope_factor,
            }
        )
    readout = None
    if model.readout is not None:
        r = model.readout
        if r.norm is not None:
            for part, value in zip(r.norm_kind.parameters, r.norm[:-1], strict=True):
                shape = (model.d_model,) if r.norm_kind.per_feature(part) else (1,)
                tensors[f"readout.norm.{part}"] = np.ascontiguousarray(
                    np.broadcast_to(value, shape), np.float64
                )
        for k, layer in enumerate(r.dense):
            tensors[f"readout.dense.{k}.weight"] = np.ascontiguousarray(layer.weight)
            tensors[f"readout.dense.{k}.bias"] = np.ascontiguousarray(layer.bias)
        readout = {
            "norm": None if r.norm is None else float(r.norm[-1]),
            "pool": r.pool,
            "norm_kind": r.norm_kind.name,
            "dense": [[list(layer.weight.shape), layer.activation] for layer in r.dense],
        }
    embedded, embedding = _embedding_tensors(model.embedding)
    tensors |= {name: np.ascontiguousarray(value, np.float64) for name, value in embedded.items()}
    architecture = {
        "layers": layers,
        "norm": model.norm.value,
        "causal": model.causal,
        "readout": readout,
        "embedding": embedding,
        "window": model.window,
    }
    save_file(
        tensors, str(path), metadata={"format": FORMAT, "architecture": json.dumps(architecture)}
    )
    return path
