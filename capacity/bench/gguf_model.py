"""A Llama-shaped GGUF model with random weights and real shapes, for measuring a real engine
(llama.cpp) on any machine without downloading a model (docs/accuracy.md, "Real engine").

The vocabulary (tokens, scores, types, special ids) is copied from a vocabulary-only GGUF that
ships with the llama.cpp source (`models/ggml-vocab-llama-spm.gguf`, 32,000 tokens); the
weights are Gaussian (std 0.02), so the text is gibberish but every matrix product, KV write and
attention costs what a trained model of the same shape costs. `TEST_SHAPE` is ~156 M parameters:
8 layers, 16 query heads, 4 KV heads, head_dim 64 (hidden 1024), FFN 2816, untied output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from capacity.errors import InputError

Dtype = Literal["f32", "f16"]


@dataclass(frozen=True, kw_only=True)
class LlamaShape:
    """The shape of a Llama-architecture model."""

    layers: int
    q_heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    context_tokens: int = 4096
    tied: bool = False
    """The output head reuses the embedding table (no `output.weight` tensor)."""

    @property
    def hidden(self) -> int:
        """Model width = q_heads x head_dim."""
        return self.q_heads * self.head_dim

    @property
    def params(self) -> int:
        """Parameters: embeddings and, untied, the output head (V h each), per layer q/o
        (2 h^2), k/v (2 h kv_heads head_dim), gate/up/down (3 h ffn) and two norms (2 h), plus
        the final norm (h). Count, dimensionless."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        per_layer = 2 * h * h + 2 * h * kv + 3 * h * self.ffn + 2 * h
        return (1 if self.tied else 2) * self.vocab * h + self.layers * per_layer + h


TEST_SHAPE = LlamaShape(layers=8, q_heads=16, kv_heads=4, head_dim=64, ffn=2816, vocab=32000)
"""The issue's test model: 155.7 M parameters (the issue: ~156 M)."""
WIDE_SHAPE = LlamaShape(layers=4, q_heads=24, kv_heads=8, head_dim=64, ffn=4096, vocab=32000,
                        tied=True)
"""A second shape for the realtest's held-out model: half the layers, 1.5x the width, twice the
KV heads, a tied output head: 149.8 M parameters."""
BIG_SHAPE = LlamaShape(layers=6, q_heads=24, kv_heads=8, head_dim=64, ffn=4096, vocab=32000)
"""The realtest's model of another size (issue 31): 6 layers instead of 8, hidden 1536 instead
of 1024, 8 KV heads, an untied head: 249 M parameters, 1.63x the weight bytes `TEST_SHAPE` reads
per decode step (`capacity.fit.realtest_record.step_weight_params`), so a calibration on one
must transfer in size and depth to the other."""
LONG_SHAPE = LlamaShape(layers=2, q_heads=4, kv_heads=2, head_dim=64, ffn=704, vocab=32000,
                        context_tokens=40960, tied=True)
"""A narrow model with a 40K context for the long-prompt check (`python3 dev.py realtest
--long`): its per-token GEMMs are small, so a 32K-token prompt's time is mostly attention, the
O(L^2) part that a calibration at 4K must extrapolate; 9.7 M parameters."""


def _gguf() -> Any:
    """llama.cpp's `gguf` package (the optional extra `realtest`), or a one-line error."""
    try:
        import gguf
    except ImportError:
        raise InputError("writing a GGUF model needs llama.cpp's gguf package: "
                         "pip install 'capacity[realtest]'") from None
    return gguf


def _copy_vocab(writer: Any, vocab_path: Path) -> int:
    """Copy every `tokenizer.*` field of a vocabulary GGUF into `writer`; returns the vocab size."""
    gguf = _gguf()

    reader = gguf.GGUFReader(vocab_path)
    size = 0
    for name, fld in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        main = fld.types[0]
        value = fld.contents()
        if main == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, value, main, sub_type=fld.types[-1])
            if name == "tokenizer.ggml.tokens":
                size = len(value)
        else:
            writer.add_key_value(name, value, main)
    if not size:
        raise ValueError(f"{vocab_path}: no tokenizer.ggml.tokens")
    return size


def write_llama_gguf(path: Path, vocab_path: Path, *, shape: LlamaShape = TEST_SHAPE,
                     dtype: Dtype = "f32", seed: int = 0, name: str = "capacity-test") -> Path:
    """Write a random-weight Llama GGUF of `shape` at `path` (matrices in `dtype`, norms f32)."""
    gguf = _gguf()

    rng = np.random.default_rng(seed)
    mat = np.float16 if dtype == "f16" else np.float32
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    writer = gguf.GGUFWriter(tmp, "llama")
    writer.add_name(name)
    vocab = _copy_vocab(writer, vocab_path)
    if vocab != shape.vocab:
        raise ValueError(f"{vocab_path} has {vocab} tokens, the shape says {shape.vocab}")
    h, kv = shape.hidden, shape.kv_heads * shape.head_dim
    writer.add_vocab_size(vocab)
    writer.add_context_length(shape.context_tokens)
    writer.add_embedding_length(h)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_block_count(shape.layers)
    writer.add_head_count(shape.q_heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16"
                         else gguf.LlamaFileType.ALL_F32)

    def weight(rows: int, cols: int) -> np.ndarray[Any, Any]:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(mat)

    ones = np.ones(h, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(vocab, h))
    for i in range(shape.layers):
        b = f"blk.{i}"
        writer.add_tensor(f"{b}.attn_norm.weight", ones)
        writer.add_tensor(f"{b}.attn_q.weight", weight(h, h))
        writer.add_tensor(f"{b}.attn_k.weight", weight(kv, h))
        writer.add_tensor(f"{b}.attn_v.weight", weight(kv, h))
        writer.add_tensor(f"{b}.attn_output.weight", weight(h, h))
        writer.add_tensor(f"{b}.ffn_norm.weight", ones)
        writer.add_tensor(f"{b}.ffn_gate.weight", weight(shape.ffn, h))
        writer.add_tensor(f"{b}.ffn_up.weight", weight(shape.ffn, h))
        writer.add_tensor(f"{b}.ffn_down.weight", weight(h, shape.ffn))
    writer.add_tensor("output_norm.weight", ones)
    if not shape.tied:  # tied: llama.cpp reads the head from token_embd.weight
        writer.add_tensor("output.weight", weight(vocab, h))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path
