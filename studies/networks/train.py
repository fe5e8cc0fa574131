"""Train the four networks the built-in study ships, deterministically, and write them
with their held-out inputs into reports/networks/ (docs/networks.md section 4).

    pip install ".[train]" && python studies/networks/train.py

- vit-digits/: a pre-LN ViT (Hugging Face ViTForImageClassification: d = 32, 4 heads,
  3 layers, FFN 64, exact GELU, patch 2) trained on the scikit-learn digits (8 x 8
  images; the first 1437 of a seeded permutation for training, the other 360 held out),
  written by save_pretrained (config.json and safetensors).
- max-digit.safetensors: a post-LN ReLU torch TransformerEncoder (d = 32, 4 heads,
  2 layers, FFN 64; per-feature layer norms, as torch trains them) reading sequences of
  8 digits (a learned embedding of the digit plus a learned position embedding) and
  classifying the largest digit (mean of the final states, then a dense layer), trained
  on seeded random sequences, written by solvers.save_model with its embedding.
- for each of these two, inputs.npy: the held-out initial token states (the embeddings'
  output, the flow's initial condition, float32 to keep the files small) of the first
  VIT_HELD_OUT digits images or HELD_OUT digit sequences, and labels.npy: their true
  classes.
- char-sums/: a character-level language model (Hugging Face GPT2LMHeadModel: d = 32,
  4 heads, 2 layers, FFN 64, gelu_new, tied head, the 13 CHARACTERS, windows of
  LM_WINDOW = 24) trained on text the script generates: lines "a+b=c" of seeded sums of
  two numbers below 100. Written by save_pretrained, with char-sums-tokens.npy: held-out
  token ids (LM_HELD_OUT windows), judged against their own next characters.
- char-sums-llama/: the same task for a Llama-style decoder (Hugging Face
  LlamaForCausalLM: d = 32, 4 heads and 2 key-value heads, 2 layers, SwiGLU FFN 64,
  pre-RMSNorm with eps 1e-6, rotary positions with theta 1e4, tied head), trained
  alike, judged on char-sums-tokens.npy.

Everything is seeded and single-threaded; the script prints each network's held-out
accuracy (and the LM's loss), computed by tide (Lie at dt = 1 and the readout), next to
torch's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers
from sklearn.datasets import load_digits

from solvers import load_model, save_model, solve
from solvers.network.embedding import TokenEmbedding
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout

OUT = Path(__file__).resolve().parents[2] / "reports" / "networks"
HELD_OUT = 200
VIT_HELD_OUT = 100
"""The ViT's batch in the built-in study: its limit is the study's costliest case (a
reference whose steps the softmax's reach caps, over the whole batch), and 100 images
keep README command 1 near a minute and a half; 360 are held out."""
SEED = 0
CHARACTERS = "0123456789+=\n"
"""The LM's vocabulary: token id i is CHARACTERS[i]."""
LM_WINDOW = 24
LM_HELD_OUT = 8


def _train(module: torch.nn.Module, inputs, labels, epochs: int, lr: float, batch: int = 64):
    optimiser = torch.optim.Adam(module.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(SEED)
    module.train()
    for epoch in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        total = 0.0
        for start in range(0, len(order), batch):
            take = order[start : start + batch]
            optimiser.zero_grad()
            loss = torch.nn.functional.cross_entropy(module(inputs[take]), labels[take])
            loss.backward()
            optimiser.step()
            total += loss.item() * len(take)
        if epoch % 10 == 9:
            print(f"  epoch {epoch + 1}: loss {total / len(labels):.4f}", flush=True)
    module.eval()


class _ViT(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        size = dict(
            hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64
        )
        images = dict(image_size=8, patch_size=2, num_channels=1, num_labels=10)
        quiet = dict(hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        config = transformers.ViTConfig(**size, **images, **quiet)
        self.vit = transformers.ViTForImageClassification(config)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.vit(pixel_values=pixels).logits


def vit_digits() -> None:
    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32)[:, None]
    labels = torch.tensor(digits.target)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SEED))
    train, held = order[:1437], order[1437:]
    torch.manual_seed(SEED)
    model = _ViT()
    _train(model, images[train], labels[train], epochs=60, lr=3e-3)
    folder = OUT / "vit-digits"
    model.vit.save_pretrained(folder)
    twin = model.vit.double().eval()
    with torch.no_grad():
        out = twin(pixel_values=images[held].double(), output_hidden_states=True)
    torch_accuracy = float((out.logits.argmax(-1) == labels[held]).double().mean())
    _write(
        folder.parent / "vit-digits-inputs.npy",
        folder.parent / "vit-digits-labels.npy",
        out.hidden_states[0].numpy(),
        labels[held].numpy(),
        VIT_HELD_OUT,
    )
    _report(
        "vit-digits",
        load_model(folder),
        out.hidden_states[0].numpy(),
        labels[held].numpy(),
        torch_accuracy,
        VIT_HELD_OUT,
    )


class _MaxDigit(torch.nn.Module):
    LENGTH = 8

    def __init__(self) -> None:
        super().__init__()
        d = 32
        self.embed = torch.nn.Embedding(10, d)
        self.position = torch.nn.Parameter(0.1 * torch.randn(self.LENGTH, d))
        layer = torch.nn.TransformerEncoderLayer(
            d, 4, 64, dropout=0.0, activation="relu", batch_first=True, norm_first=False
        )
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.classify = torch.nn.Linear(d, 10)

    def states(self, digits: torch.Tensor) -> torch.Tensor:
        return self.embed(digits) + self.position

    def forward(self, digits: torch.Tensor) -> torch.Tensor:
        return self.classify(self.encoder(self.states(digits)).mean(1))


def max_digit() -> None:
    rng = np.random.default_rng(SEED)
    sequences = torch.tensor(rng.integers(0, 10, (6000, _MaxDigit.LENGTH)))
    labels = sequences.max(1).values
    train, held = slice(0, 5000), slice(5000, None)
    torch.manual_seed(SEED)
    model = _MaxDigit()
    _train(model, sequences[train], labels[train], epochs=40, lr=2e-3)
    model = model.double().eval()
    with torch.no_grad():
        states = model.states(sequences[held])
        torch_accuracy = float((model(sequences[held]).argmax(-1) == labels[held]).double().mean())
    encoder = load_model(model.encoder)
    head = Dense(model.classify.weight.detach().numpy().T, model.classify.bias.detach().numpy())
    embedding = TokenEmbedding(model.embed.weight.detach().numpy(), model.position.detach().numpy())
    network = Model(
        encoder.layers, encoder.norm, False, Readout(None, "mean", (head,)), "max-digit", embedding
    )
    path = save_model(network, OUT / "max-digit.safetensors")
    _write(
        OUT / "max-digit-inputs.npy",
        OUT / "max-digit-labels.npy",
        states.numpy(),
        labels[held].numpy(),
    )
    _report("max-digit", load_model(path), states.numpy(), labels[held].numpy(), torch_accuracy)


def sums_text(count: int, rng: np.random.Generator) -> str:
    """`count` lines "a+b=c" of seeded sums of two numbers below 100."""
    terms = rng.integers(0, 100, (count, 2))
    return "".join(f"{a}+{b}={a + b}\n" for a, b in terms)


def char_sums() -> None:
    """The character-level GPT-2 (module docstring), and the held-out windows both LMs
    are judged on."""
    torch.manual_seed(SEED)
    size = dict(vocab_size=len(CHARACTERS), n_positions=LM_WINDOW, n_embd=32, n_layer=2, n_head=4)
    quiet = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    config = transformers.GPT2Config(
        **size, n_inner=64, **quiet, bos_token_id=None, eos_token_id=None
    )
    tokens = _char_lm("char-sums", transformers.GPT2LMHeadModel(config))
    np.save(OUT / "char-sums-tokens.npy", tokens)


def char_sums_llama() -> None:
    """The character-level Llama (module docstring), judged on char-sums' windows."""
    torch.manual_seed(SEED)
    config = transformers.LlamaConfig(
        vocab_size=len(CHARACTERS),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=LM_WINDOW,
        rms_norm_eps=1e-6,
        rope_theta=1e4,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    _char_lm("char-sums-llama", transformers.LlamaForCausalLM(config))


def _char_lm(name: str, model: torch.nn.Module) -> np.ndarray:
    """Train a character LM on the generated sums (12 epochs of Adam, lr 3e-3, batches of
    64 windows), write it to OUT / name by save_pretrained, and print its held-out
    accuracy and loss by tide next to torch's; returns the held-out windows."""
    text = np.array([CHARACTERS.index(c) for c in sums_text(40_000, np.random.default_rng(SEED))])
    held = np.array(
        [CHARACTERS.index(c) for c in sums_text(2_000, np.random.default_rng(SEED + 1))]
    )
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(SEED)
    windows = torch.tensor(text[: len(text) // LM_WINDOW * LM_WINDOW]).view(-1, LM_WINDOW)
    model.train()
    for epoch in range(12):
        order = torch.randperm(len(windows), generator=generator)
        total = 0.0
        for start in range(0, len(order), 64):
            batch = windows[order[start : start + 64]]
            optimiser.zero_grad()
            loss = model(batch, labels=batch).loss
            loss.backward()
            optimiser.step()
            total += loss.item() * len(batch)
        print(f"  epoch {epoch + 1}: loss {total / len(windows):.4f}", flush=True)
    model.eval()
    folder = OUT / name
    model.save_pretrained(folder)
    starts = np.arange(LM_HELD_OUT) * (len(held) // LM_HELD_OUT)
    tokens = np.stack([held[s : s + LM_WINDOW] for s in starts]).astype(np.int64)
    twin = model.double()
    with torch.no_grad():
        torch_loss = twin(torch.tensor(tokens), labels=torch.tensor(tokens)).loss.item()
    network = load_model(folder)
    states = solve(network.problem(network.embed(tokens)))
    judged = network.readout.judge(states, None, tokens)
    print(
        f"{name}: held-out next-character accuracy {judged.accuracy:.4f}, loss "
        f"{judged.loss:.4f} nats by tide (torch's own loss, in float32: {torch_loss:.4f})",
        flush=True,
    )
    return tokens


def _write(
    inputs_path: Path,
    labels_path: Path,
    inputs: np.ndarray,
    labels: np.ndarray,
    count: int = HELD_OUT,
) -> None:
    np.save(inputs_path, inputs[:count].astype(np.float32))
    np.save(labels_path, labels[:count].astype(np.int64))


def _report(
    name: str,
    model: Model,
    inputs: np.ndarray,
    labels: np.ndarray,
    torch_accuracy: float,
    count: int = HELD_OUT,
) -> None:
    states = solve(model.problem(inputs[:count].astype(np.float32).astype(np.float64)))
    accuracy = float(np.mean(model.readout.decisions(states) == labels[:count]))
    print(
        f"{name}: held-out accuracy {accuracy:.4f} by tide on the first {count} (torch, "
        f"all {len(labels)}: {torch_accuracy:.4f})",
        flush=True,
    )


def main() -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    OUT.mkdir(parents=True, exist_ok=True)
    vit_digits()
    max_digit()
    char_sums()
    char_sums_llama()


if __name__ == "__main__":
    main()
