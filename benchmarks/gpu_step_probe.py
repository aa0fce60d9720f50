"""Measure a dense transformer's decode step, prefill and GEMMs on one GPU with PyTorch's own
kernels: the physics under the operator step (docs/method.md, F4/F4c/F6c) on real hardware.

Not a serving engine and not a test: vLLM's dense bf16 layers run these same cuBLAS GEMMs
(`torch.nn.functional.linear`) and a FlashAttention kernel, under CUDA graphs, so this measures
what its forward pass costs on the GPU, without its scheduler, sampler or Python. Weights are
random (std 0.02); shapes are the catalog's (data/models): Llama-3.1-8B and Qwen3-32B, bf16.

What it writes (JSON lines, one object per measurement, to --out):
- `gemm`: y = x W^T for each layer GEMM of each model, M rows, median of graph replays over
  weight copies that together exceed the L2 (ms, TFLOP/s, GB/s of weight bytes read);
- `mamf`: the fastest square-ish bf16 GEMM over a few shapes (TFLOP/s), the device's ceiling
  (data/matmul_ceilings.toml's definition);
- `copy`: device-to-device copy and a read-only reduction of a few GB (GB/s);
- `decode`: one decode step of the whole model (embedding, every layer, final norm, LM head,
  argmax) for `batch` sequences each at `context` tokens of KV, with and without the attention
  (`no_attn`), ms;
- `prefill`: one forward pass over a prompt of `tokens` tokens (causal attention, logits for the
  last token only), ms;
- `mixed`: `batch` decoding sequences plus a prefill chunk of `chunk` tokens of a new sequence in
  one forward pass (vLLM V1's mixed step), ms; `run` = "mixsweep" (section `mixsweep`): the
  first model's decode batches and chunks of 64-1,024 tokens measured together;
- `decode_compiled` (section `compiled`): each model's decode step at 1K and 4K context with
  each layer compiled by TorchInductor (fused as vLLM V1 fuses), ms, and at 1K its
  `prefill_compiled` and `mixed_compiled` passes; `compiled_check`: the compiled layer against
  the eager one on the same inputs.

Run on a CUDA machine: `python benchmarks/gpu_step_probe.py --out probe.jsonl`; `--tiny` runs
toy shapes for a minute on any device (a check of the script, not a measurement). The figures
of the committed run are in data/reference/gpu_probe/ (docs/accuracy.md, "Our own GPU
measurement").
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

SHAPES: dict[str, dict[str, int]] = {
    "llama-3.1-8b": dict(layers=32, hidden=4096, q_heads=32, kv_heads=8, head_dim=128,
                         ffn=14336, vocab=128256),
    "qwen3-32b": dict(layers=64, hidden=5120, q_heads=64, kv_heads=8, head_dim=128,
                      ffn=25600, vocab=151936),
}
TINY: dict[str, dict[str, int]] = {
    "tiny": dict(layers=2, hidden=256, q_heads=4, kv_heads=2, head_dim=64, ffn=512, vocab=1000),
}
GEMM_M = (1, 2, 4, 8, 16, 24, 32, 48, 50, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768,
          1024, 1536, 2048, 3072, 4096, 8192, 16384)
BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 50, 64, 96, 128, 160, 192, 256, 320, 384, 512)
CONTEXTS = (1024, 4096)
PROMPTS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
MIXED = ((8, 256), (8, 2048), (32, 256), (32, 512), (32, 2048), (128, 512), (128, 2048))
MIX_BATCHES = (8, 32, 128)
MIX_CHUNKS = (64, 128, 256, 512, 1024)
COMPILED_BATCHES = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
COMPILED_CONTEXTS = (1024, 4096)
COMPILED_PROMPTS = (64, 128, 256, 512, 1024, 2048)


class Out:
    """JSON lines, flushed after each object, so a run cut short keeps what it measured."""

    def __init__(self, path: str) -> None:
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self.t0 = time.time()

    def write(self, **row: Any) -> None:
        row["t_s"] = round(time.time() - self.t0, 2)
        self.fh.write(json.dumps(row) + "\n")
        self.fh.flush()
        print(json.dumps(row), flush=True)


def timed_ms(fn: Callable[[], Any], dev: torch.device, reps: int = 20, warm: int = 3) -> float:
    """Median milliseconds of `fn()` over `reps` calls after `warm` calls."""
    for _ in range(warm):
        fn()
    if dev.type != "cuda":
        times = []
        for _ in range(max(2, reps // 5)):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def graphed(fn: Callable[[], Any], dev: torch.device) -> Callable[[], Any]:
    """`fn` captured in a CUDA graph (its replay), or `fn` itself off CUDA."""
    if dev.type != "cuda":
        return fn
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def gemm_sweep(out: Out, shapes: dict[str, dict[str, int]], dev: torch.device,
               dtype: torch.dtype, ms: tuple[int, ...]) -> None:
    """Each model's four layer GEMMs (qkv, o, gate_up, down) at M rows."""
    for name, s in shapes.items():
        h, d = s["hidden"], s["head_dim"]
        gemms = {"qkv": ((s["q_heads"] + 2 * s["kv_heads"]) * d, h),
                 "o": (h, s["q_heads"] * d), "gate_up": (2 * s["ffn"], h), "down": (h, s["ffn"])}
        for gname, (n, k) in gemms.items():
            copies = max(1, -(-512 * 2**20 // (n * k * 2))) if dev.type == "cuda" else 1
            ws = [torch.randn(n, k, device=dev, dtype=dtype) * 0.02 for _ in range(copies)]
            for m in ms:
                x = torch.randn(m, k, device=dev, dtype=dtype)

                def run(x: torch.Tensor = x, ws: list[torch.Tensor] = ws) -> None:
                    for w in ws:
                        F.linear(x, w)

                t = timed_ms(graphed(run, dev), dev) / len(ws)
                out.write(kind="gemm", model=name, gemm=gname, m=m, n=n, k=k, ms=t,
                          tflops=2 * m * n * k / t / 1e9, weight_gb_s=n * k * 2 / t / 1e6)
            del ws
            if dev.type == "cuda":
                torch.cuda.empty_cache()


def mamf(out: Out, dev: torch.device, dtype: torch.dtype, tiny: bool) -> None:
    """The fastest dense GEMM over a few large shapes."""
    sizes = [(256, 256, 256)] if tiny else [
        (4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192), (8192, 16384, 8192),
        (12288, 12288, 12288), (16384, 16384, 16384), (6144, 14336, 4096), (8192, 28672, 8192)]
    for m, n, k in sizes:
        a = torch.randn(m, k, device=dev, dtype=dtype)
        b = torch.randn(k, n, device=dev, dtype=dtype)
        t = timed_ms(lambda a=a, b=b: a @ b, dev, reps=10)
        out.write(kind="mamf", m=m, n=n, k=k, ms=t, tflops=2 * m * n * k / t / 1e9)
        del a, b


def copy_bw(out: Out, dev: torch.device, dtype: torch.dtype, tiny: bool) -> None:
    """Device-to-device copy (bytes read + written) and a read-only sum, GB/s."""
    n = 2**20 if tiny else 4 * 2**30 // 2
    a = torch.randn(n, device=dev, dtype=dtype)
    b = torch.empty_like(a)
    t = timed_ms(lambda: b.copy_(a), dev, reps=10)
    out.write(kind="copy", op="copy", bytes=2 * n * 2, ms=t, gb_s=2 * n * 2 / t / 1e6)
    t = timed_ms(lambda: a.sum(), dev, reps=10)
    out.write(kind="copy", op="sum", bytes=n * 2, ms=t, gb_s=n * 2 / t / 1e6)


class Model:
    """Random weights of one Llama-like shape and its forward passes."""

    def __init__(self, s: dict[str, int], dev: torch.device, dtype: torch.dtype) -> None:
        self.s, self.dev, self.dtype = s, dev, dtype
        h, d = s["hidden"], s["head_dim"]
        self.nq, self.nkv, self.d = s["q_heads"], s["kv_heads"], d

        def w(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, device=dev, dtype=dtype) * 0.02

        self.emb, self.head = w(s["vocab"], h), w(s["vocab"], h)
        self.norm = torch.ones(h, device=dev, dtype=dtype)
        self.layers = [dict(n1=torch.ones(h, device=dev, dtype=dtype),
                            n2=torch.ones(h, device=dev, dtype=dtype),
                            qkv=w((self.nq + 2 * self.nkv) * d, h), o=w(h, self.nq * d),
                            gu=w(2 * s["ffn"], h), down=w(h, s["ffn"]))
                       for _ in range(s["layers"])]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d))
        pos = torch.arange(0, 20000, device=dev, dtype=torch.float32)
        ang = torch.outer(pos, inv)
        self.cos = torch.cat([ang.cos(), ang.cos()], -1).to(dtype)
        self.sin = torch.cat([ang.sin(), ang.sin()], -1).to(dtype)

    @staticmethod
    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    def rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x [T, H, D], pos [T]."""
        c, s = self.cos[pos][:, None, :], self.sin[pos][:, None, :]
        x1, x2 = x.chunk(2, -1)
        return x * c + torch.cat([-x2, x1], -1) * s

    def layer(self, x: torch.Tensor, pos: torch.Tensor, n1: torch.Tensor, n2: torch.Tensor,
              wqkv: torch.Tensor, wo: torch.Tensor, wgu: torch.Tensor, wdown: torch.Tensor,
              kc: torch.Tensor | None, vc: torch.Tensor | None, n_dec: int, ctx: int,
              attn: bool) -> torch.Tensor:
        """One layer over `x` [T, h]: the first `n_dec` rows decode (their K and V written at
        position `ctx` of `kc`, `vc` [n_dec, kv, ctx + 1, D], attention over all of it), the
        rest are one prompt chunk from position 0 (causal attention over itself). Its weights
        are arguments, so `torch.compile` of it serves every layer."""
        nq, nkv, d, g = self.nq, self.nkv, self.d, self.nq // self.nkv
        t = x.shape[0]
        qkv = F.linear(self.rms(x, n1), wqkv)
        q = self.rope(qkv[:, : nq * d].view(t, nq, d), pos)
        k = self.rope(qkv[:, nq * d: (nq + nkv) * d].view(t, nkv, d), pos)
        v = qkv[:, (nq + nkv) * d:].view(t, nkv, d)
        if attn:
            parts = []
            if n_dec:
                assert kc is not None and vc is not None
                kc[:, :, ctx] = k[:n_dec]
                vc[:, :, ctx] = v[:n_dec]
                qd = q[:n_dec].view(n_dec, nkv, g, d)
                parts.append(F.scaled_dot_product_attention(qd, kc, vc).reshape(n_dec, nq * d))
            if t > n_dec:
                qp = q[n_dec:].transpose(0, 1)[None]
                kp = k[n_dec:].transpose(0, 1).repeat_interleave(g, 0)[None]
                vp = v[n_dec:].transpose(0, 1).repeat_interleave(g, 0)[None]
                o = F.scaled_dot_product_attention(qp, kp, vp, is_causal=True)
                parts.append(o[0].transpose(0, 1).reshape(t - n_dec, nq * d))
            a = parts[0] if len(parts) == 1 else torch.cat(parts)
        else:
            a = q.reshape(t, nq * d)
        x = x + F.linear(a, wo)
        gate, up = F.linear(self.rms(x, n2), wgu).chunk(2, -1)
        return x + F.linear(F.silu(gate) * up, wdown)

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor, n_dec: int,
                cache: torch.Tensor | None, ctx: int, attn: bool, last_only: int,
                layer: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
        """One forward pass over `tokens` [T]: the first `n_dec` rows are decoding sequences
        (each at `ctx` tokens of KV in `cache` [layers, 2, B, kv, ctx + 1, D]), the rest one
        prompt chunk from position 0 (`layer`, default `Model.layer`: pass a compiled one).
        Logits for the decode rows and the chunk's last token (`last_only` rows at the end),
        then argmax."""
        run = layer or self.layer
        x = self.emb[tokens]
        t = tokens.shape[0]
        for li, lw in enumerate(self.layers):
            kc = vc = None
            if n_dec and attn:
                assert cache is not None
                kc, vc = cache[li, 0, :n_dec], cache[li, 1, :n_dec]
            x = run(x, pos, lw["n1"], lw["n2"], lw["qkv"], lw["o"], lw["gu"], lw["down"], kc, vc,
                    n_dec, ctx, attn)
        rows = x if t == n_dec else torch.cat([x[:n_dec], x[t - last_only:]])
        logits = F.linear(self.rms(rows, self.norm), self.head)
        return logits.argmax(-1)

    def time_pass(self, n_dec: int, prompt: int, ctx: int, attn: bool,
                  cache: torch.Tensor | None,
                  forward: Callable[..., torch.Tensor] | None = None) -> float:
        t = n_dec + prompt
        tokens = torch.randint(0, self.s["vocab"], (t,), device=self.dev)
        pos = torch.cat([torch.full((n_dec,), ctx, device=self.dev, dtype=torch.long),
                         torch.arange(prompt, device=self.dev)])
        fwd = forward or self.forward
        fn = graphed(lambda: fwd(tokens, pos, n_dec, cache, ctx, attn, 1 if prompt else 0),
                     self.dev)
        return timed_ms(fn, self.dev)


def model_runs(out: Out, name: str, s: dict[str, int], dev: torch.device, dtype: torch.dtype,
               deadline: float, tiny: bool) -> None:
    m = Model(s, dev, dtype)
    kv_token = s["layers"] * 2 * s["kv_heads"] * s["head_dim"] * 2
    free = torch.cuda.mem_get_info()[0] if dev.type == "cuda" else 8 * 2**30
    kv_budget = max(0, free - 12 * 2**30) if dev.type == "cuda" else 2**28
    out.write(kind="model", model=name, **s, free_gb=free / 2**30, kv_budget_gb=kv_budget / 2**30)
    for ctx in ((64, 256) if tiny else CONTEXTS):
        bmax = max(b for b in BATCHES if b * (ctx + 1) * kv_token <= kv_budget)
        cache = torch.randn(s["layers"], 2, bmax, s["kv_heads"], ctx + 1, s["head_dim"],
                            device=dev, dtype=dtype)
        for b in BATCHES:
            if b > bmax or time.time() > deadline:
                break
            full = m.time_pass(b, 0, ctx, True, cache)
            bare = m.time_pass(b, 0, ctx, False, cache)
            out.write(kind="decode", model=name, batch=b, context=ctx, ms=full, no_attn_ms=bare)
        del cache
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    for p in ((64, 128) if tiny else PROMPTS):
        if time.time() > deadline:
            break
        out.write(kind="prefill", model=name, tokens=p, ms=m.time_pass(0, p, 0, True, None),
                  no_attn_ms=m.time_pass(0, p, 0, False, None))
    ctx = 1024 if not tiny else 64
    bmax = max(b for b, _ in MIXED)
    cache = torch.randn(s["layers"], 2, bmax, s["kv_heads"], ctx + 1, s["head_dim"],
                        device=dev, dtype=dtype)
    for b, c in MIXED:
        if time.time() > deadline:
            break
        out.write(kind="mixed", model=name, batch=b, context=ctx, chunk=c,
                  ms=m.time_pass(b, c, ctx, True, cache))
    del cache, m
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def mixed_sweep(out: Out, name: str, s: dict[str, int], dev: torch.device, dtype: torch.dtype,
                deadline: float, tiny: bool) -> None:
    """A decode batch alone and with each prompt chunk, in one run (`run` = "mixsweep"), so
    what a chunk adds is read off passes measured minutes apart at most."""
    m = Model(s, dev, dtype)
    ctx = 64 if tiny else 1024
    cache = torch.randn(s["layers"], 2, max(MIX_BATCHES), s["kv_heads"], ctx + 1,
                        s["head_dim"], device=dev, dtype=dtype)
    for b in MIX_BATCHES:
        out.write(kind="decode", run="mixsweep", model=name, batch=b, context=ctx,
                  ms=m.time_pass(b, 0, ctx, True, cache))
        for c in MIX_CHUNKS:
            if time.time() > deadline:
                return
            out.write(kind="mixed", run="mixsweep", model=name, batch=b, context=ctx, chunk=c,
                      ms=m.time_pass(b, c, ctx, True, cache))


def compiled_runs(out: Out, name: str, s: dict[str, int], dev: torch.device,
                  dtype: torch.dtype, deadline: float, tiny: bool) -> None:
    """The decode step again with each layer compiled by TorchInductor (`torch.compile` of
    `Model.layer`, its weights arguments, so one compilation serves every layer of a shape),
    which fuses the norms, rotary embedding, residuals and activation as vLLM V1's own
    compilation does, under the same CUDA graphs; embedding, final norm, LM head and argmax
    as before. At the first context the model also prefills (`COMPILED_PROMPTS`) and runs
    the mixed sweep's passes (`MIX_BATCHES` x `MIX_CHUNKS`) compiled."""
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 64
    m = Model(s, dev, dtype)
    fused = torch.compile(m.layer)
    for i, ctx in enumerate((64,) if tiny else COMPILED_CONTEXTS):
        _compiled_at(out, name, s, m, fused, ctx, dev, dtype, deadline,
                     passes=i == 0)
    del m
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def _compiled_at(out: Out, name: str, s: dict[str, int], m: Model,
                 fused: Callable[..., torch.Tensor], ctx: int, dev: torch.device,
                 dtype: torch.dtype, deadline: float, passes: bool) -> None:
    """`compiled_runs` at one context."""
    kv_token = s["layers"] * 2 * s["kv_heads"] * s["head_dim"] * 2
    free = torch.cuda.mem_get_info()[0] if dev.type == "cuda" else 2**40
    bmax = max(b for b in COMPILED_BATCHES if b * (ctx + 1) * kv_token <= free - 12 * 2**30
               or b == 1)
    cache = torch.randn(s["layers"], 2, bmax, s["kv_heads"], ctx + 1,
                        s["head_dim"], device=dev, dtype=dtype)
    t0 = time.time()
    x0 = torch.randn(8, s["hidden"], device=dev, dtype=dtype)
    p0 = torch.full((8,), ctx, device=dev, dtype=torch.long)
    lw = m.layers[0]
    args = (lw["n1"], lw["n2"], lw["qkv"], lw["o"], lw["gu"], lw["down"])
    same = (m.layer(x0, p0, *args, cache[0, 0, :8].clone(), cache[0, 1, :8].clone(), 8, ctx,
                    True)
            - fused(x0, p0, *args, cache[0, 0, :8].clone(), cache[0, 1, :8].clone(), 8, ctx,
                    True))
    out.write(kind="compiled_check", model=name, max_abs_diff=float(same.abs().max()),
              compile_s=round(time.time() - t0, 1))

    def fwd(*a: Any) -> torch.Tensor:
        return m.forward(*a, layer=fused)

    decoded = {}
    for b in COMPILED_BATCHES:
        if time.time() > deadline or b > bmax:
            break
        decoded[b] = m.time_pass(b, 0, ctx, True, cache, fwd)
        out.write(kind="decode_compiled", model=name, batch=b, context=ctx, ms=decoded[b],
                  compile_s=round(time.time() - t0, 1))
    if not passes:
        return
    for p in COMPILED_PROMPTS:
        if time.time() > deadline:
            return
        out.write(kind="prefill_compiled", model=name, tokens=p,
                  ms=m.time_pass(0, p, 0, True, None, fwd), compile_s=round(time.time() - t0, 1))
    for b in MIX_BATCHES:
        for c in MIX_CHUNKS:
            if time.time() > deadline or b not in decoded:
                return
            out.write(kind="mixed_compiled", model=name, batch=b, context=ctx, chunk=c,
                      ms=m.time_pass(b, c, ctx, True, cache, fwd),
                      compile_s=round(time.time() - t0, 1))


def smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.mem,"
                               "temperature.gpu,power.draw,driver_version", "--format=csv"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi: {exc}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu_probe.jsonl")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--sections", default="copy,gemm,decode,mamf")
    ap.add_argument("--models", default=",".join(SHAPES),
                    help="the models to run (default: all of SHAPES)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    torch.manual_seed(0)
    shapes = TINY if args.tiny else {k: SHAPES[k] for k in args.models.split(",")}
    out = Out(args.out)
    deadline = time.time() + args.budget_s
    out.write(kind="env", date=time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
              torch=torch.__version__, cuda=torch.version.cuda, python=platform.python_version(),
              device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
              smi=smi() if dev.type == "cuda" else "")
    sections = args.sections.split(",")
    steps: list[tuple[str, Callable[[], None]]] = [
        ("copy", lambda: copy_bw(out, dev, dtype, args.tiny)),
        ("gemm", lambda: gemm_sweep(out, shapes, dev, dtype, GEMM_M[:8] if args.tiny else GEMM_M)),
    ]
    for name, s in shapes.items():
        steps.append(("decode", lambda name=name, s=s: model_runs(
            out, name, s, dev, dtype, deadline, args.tiny)))
    steps.append(("mamf", lambda: mamf(out, dev, dtype, args.tiny)))
    first, s0 = next(iter(shapes.items()))
    steps.append(("mixsweep", lambda: mixed_sweep(out, first, s0, dev, dtype, deadline,
                                                  args.tiny)))
    for name, s in shapes.items():
        steps.append(("compiled", lambda name=name, s=s: compiled_runs(
            out, name, s, dev, dtype, deadline, args.tiny)))
    for section, fn in steps:
        if section not in sections:
            continue
        if time.time() > deadline:
            out.write(kind="skipped", section=section)
            continue
        try:
            fn()
        except Exception as exc:  # a measurement that breaks must not cost the rest
            out.write(kind="error", section=section, error=f"{type(exc).__name__}: {exc}"[:2000])
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    if dev.type == "cuda":
        out.write(kind="env_end", smi=smi())
    return 0


if __name__ == "__main__":
    sys.exit(main())
