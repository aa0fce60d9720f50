"""F13: pipeline parallelism (PP). A replica's layers in PP consecutive stages, each a TP group.

A model too large for one node's GPUs runs, in vLLM's and SGLang's multi-node recipe, with a
tensor-parallel group per node and the nodes chained as pipeline stages (`--tensor-parallel-size
8 --pipeline-parallel-size 2` on two 8-GPU nodes). TP stays inside a scale-up domain; the
stages may cross nodes, handing each forward pass's activations to the next stage.

- **Memory.** A stage holds its layers' weights and their KV, split over its TP group: per GPU,
  the weights W x s / TP and a request's KV x s, where s = ceil(L / PP) / L is the largest
  stage's share of the L layers (`stage_share`; the embedding and the LM head are counted as
  the layers are, spread evenly).
- **Speed.** An engine keeps PP micro-batches in flight (vLLM V1's batch queue of
  `pipeline_parallel_size` batches, SGLang's micro-batches), so every stage works on one of them
  while the others are elsewhere in the pipe. A replica of TP x PP GPUs at C requests is then
  PP decode streams ("lanes") of C / PP sequences, each stream's token passing through every
  stage: its step is the TP group's step of the whole model at a batch of C / PP (the stages'
  weights and layers summed) plus the hand-offs (`pp_comm_line`). A prompt's prefill is the TP
  group's prefill plus its hand-offs, and PP prompts are in flight at once. `Scenario.replicas`
  counts the lanes (GPUs / TP), `Scenario.copies` the model's copies (GPUs / (TP x PP)).
- **A hand-off** sends the hidden states and the residual of every token the pass carries
  (2 x hidden x 2 bytes a token, bf16, as vLLM's Llama and DeepSeek stages pass both), split over
  the TP ranks (each sends its 1/TP and the receiver gathers them, vLLM's
  `send_tensor_dict(all_gather_group=tp)`), over the node's scale-up link where the next stage
  is on the same node, else the scale-out NIC (data/nodes.toml), plus a fixed latency per
  hand-off (`SCALE_UP_LATENCY_US`, `SCALE_OUT_LATENCY_US`: the expert-parallel all-to-all's).

Source: docs/method.md, "F13. Pipeline parallelism across nodes".
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Gpu, Model
from capacity.catalog.nodes import node_shape
from capacity.errors import InputError
from capacity.model.expert_parallel import SCALE_OUT_LATENCY_US, SCALE_UP_LATENCY_US
from capacity.model.parallel import ACTIVATION_BYTES, CommLine, tp_comm_line, tp_comm_ms
from capacity.types import FloatArray
from capacity.units import GB

HANDOFF_TENSORS: Final = 2
"""Activation tensors a stage hands to the next per token: the hidden states and the residual
(vLLM's `IntermediateTensors` of its Llama, Qwen and DeepSeek models)."""


def copy_layout(tp: int, pp: int = 1) -> str:
    """One copy of the model as a label: 'TP=8 x PP=2', 'TP=2', 'PP=2', '' (one GPU)."""
    return " x ".join(p for p in ((f"TP={tp}" if tp > 1 else ""), (f"PP={pp}" if pp > 1 else ""))
                      if p)


def check_pp(model: Model, n_gpus: int, tp: int, pp: int) -> None:
    """Raise InputError unless PP is a whole number of stages, at most one a layer, and TP x PP
    divides the GPU count."""
    if not (isinstance(pp, int) and pp >= 1):
        raise InputError(f"PP (pipeline stages) must be a whole number >= 1, got {pp}")
    if pp > model.layers:
        raise InputError(f"PP={pp} exceeds the {model.layers} layers of {model.name}: "
                         "a stage holds at least one layer")
    if n_gpus % (tp * pp):
        raise InputError(f"TP={tp} x PP={pp} = {tp * pp} GPUs a replica does not divide "
                         f"{n_gpus} GPUs")


def stage_share(model: Model, pp: int) -> float:
    """The largest stage's share of the layers, ceil(L / PP) / L (1 without PP): what one GPU
    holds of the weights and of a request's KV, over what TP alone would give it.
    Example: DeepSeek-V3's 61 layers in 2 stages: 31 / 61 = 0.508."""
    if pp <= 1:
        return 1.0
    return math.ceil(model.layers / pp) / model.layers


def handoffs(gpu: Gpu, tp: int, pp: int) -> tuple[int, int]:
    """(inside a node, across nodes): the hand-offs of one forward pass through PP stages of
    TP GPUs placed in order on the GPU's largest nodes (data/nodes.toml). Example: TP 8 x PP 2 on
    8-GPU H100 nodes: (0, 1); TP 4 x PP 4: (2, 1)."""
    per_node = node_shape(gpu.key).max_gpus_per_node
    inside = across = 0
    for k in range(pp - 1):
        if (k * tp) // per_node == ((k + 1) * tp) // per_node:
            inside += 1
        else:
            across += 1
    return inside, across


def pp_comm_line(model: Model, gpu: Gpu, tp: int, pp: int, handoff_ms: float = 0.0
                 ) -> CommLine:
    """The hand-offs of one forward pass carrying n tokens, ms, as a line
    `fixed_ms + per_token_ms x n`: each hand-off its link's latency and the engine's
    `handoff_ms` (a basis knob: data/engines.toml's `pp_handoff_ms`, 0 on the spec sheet), plus
    2 x hidden x 2 bytes a token over TP times the link's per-GPU rate (NVLink or PCIe inside a
    node, the NIC across).
    Example (DeepSeek-V3, hidden 7168, H100 TP 8 x PP 2 over 400 Gb/s InfiniBand): 0.05 ms +
    28,672 B / (8 x 50 GB/s) = 0.0717 us a token; a 64-sequence step 0.0546 ms, an 8K prompt
    0.637 ms. All zero without PP."""
    if pp <= 1:
        return CommLine()
    inside, across = handoffs(gpu, tp, pp)
    token_bytes = HANDOFF_TENSORS * model.hidden * ACTIVATION_BYTES
    scale_out = node_shape(gpu.key).scale_out_gb_s * GB
    fixed_us = (inside * SCALE_UP_LATENCY_US + across * SCALE_OUT_LATENCY_US
                + (pp - 1) * handoff_ms * 1e3)
    per_token_s = (inside * token_bytes / (tp * gpu.interconnect_gb_s * GB)
                   + across * token_bytes / (tp * scale_out))
    per_token_ms = per_token_s * 1e3
    return CommLine(fixed_ms=fixed_us / 1e3, per_token_ms=per_token_ms,
                    knee_tokens=math.inf, above_ms=per_token_ms)


def forward_comm_line(model: Model, gpu: Gpu, tp: int, pp: int = 1,
                      handoff_ms: float = 0.0) -> CommLine:
    """A decode step's communication as one line: F10's TP all-reduces (`tp_comm_line`) plus
    the PP hand-offs (`pp_comm_line`), added term by term (the hand-offs have no knee)."""
    a = tp_comm_line(model, gpu, tp)
    if pp <= 1:
        return a
    b = pp_comm_line(model, gpu, tp, pp, handoff_ms)
    return CommLine(fixed_ms=a.fixed_ms + b.fixed_ms, per_token_ms=a.per_token_ms + b.per_token_ms,
                    knee_tokens=a.knee_tokens, above_ms=a.above_ms + b.per_token_ms)


def forward_comm_ms(model: Model, gpu: Gpu, tp: int, tokens: npt.ArrayLike,
                    pp: int = 1, handoff_ms: float = 0.0) -> FloatArray:
    """`tp_comm_ms` of a forward pass over `tokens` tokens plus its PP hand-offs, ms."""
    n = np.asarray(tokens, dtype=np.float64)
    out = tp_comm_ms(model, gpu, tp, n)
    if pp > 1:
        out = out + pp_comm_line(model, gpu, tp, pp, handoff_ms).at(n)
    return np.asarray(out, dtype=np.float64)


def stream_slots(copy_slots: npt.ArrayLike, pp: int) -> npt.NDArray[np.int64]:
    """A decode stream's requests in memory: a copy's (`max_concurrency` on one of its GPUs,
    each holding its stage's share of every request's KV) split evenly over its PP
    micro-batches, floor(slots / PP) (the slots themselves without PP)."""
    return np.asarray(np.asarray(copy_slots, dtype=np.int64) // max(int(pp), 1), dtype=np.int64)
