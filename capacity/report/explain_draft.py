""""Show the math" for speculative decoding (F12): the verify pass, the draft, tau and the TPOT.

With a draft, a decode step verifies k + 1 tokens a sequence in one pass of the target and runs
the draft's k passes; each sequence keeps tau tokens of it on average, so
TPOT = (t_verify + t_draft) / tau (docs/method.md, F12; `capacity.model.speculative`). Every
`value` here is `capacity.model.draft_gain.draft_gain`'s figure, the one the Explorer's panel and
`capacity plan` show, and its TPOT is `evaluate`'s, so the page and the math agree.
"""

from __future__ import annotations

from capacity.model.draft_gain import DraftGain
from capacity.model.scenario import Evaluation, Scenario
from capacity.report.math_steps import MathStep
from capacity.report.math_steps import formula_number as num
from capacity.units import GB, TERA


def per_token_text(verify_ms: float, draft_ms: float, tau: float) -> str:
    """'(12 + 3) / 2.5': an engine step's two parts over tau, for a formula line."""
    return f"({num(verify_ms)} + {num(draft_ms)}) / {num(tau)}"


def draft_steps(s: Scenario, ev: Evaluation, g: DraftGain) -> tuple[MathStep, ...]:
    """F12's lines at the first point of `ev` (one concurrency; `g` from `draft_gain` at it):
    tau and where it comes from, the verify pass, the draft's passes, and the TPOT with its
    speed-up over no draft and the concurrency where the draft stops paying."""
    d = g.draft
    k, tau = d.depth, d.acceptance_length
    c_rep = float(g.per_replica_concurrency[0])
    verify, draft, tpot = float(g.verify_ms[0]), float(g.draft_ms[0]), float(g.tpot_ms[0])
    steps = [MathStep(
        key="draft_tau", formula="tau = tokens a sequence keeps per step (accepted + 1; "
                                 "1 <= tau <= k + 1)",
        substituted=f"tau = {num(tau)} of k + 1 = {k + 1} ({d.source})", value=tau,
        unit="tokens")]
    # the verify pass: the target's step over k + 1 tokens a sequence (DecodeStep's terms are
    # per emitted token, so times tau), the rest (overheads, the operator method's sums) apart
    bw_v = float(ev.decode.bandwidth_ms[0]) * tau
    cp_v = float(ev.decode.compute_ms[0]) * tau
    comm = float(ev.decode.comm_ms[0])
    rest = verify - max(bw_v, cp_v) - comm
    steps.append(MathStep(
        key="draft_verify",
        formula="t_verify = max((W + C x KV_request) / BW, 2 x P x C x (k + 1) / (F x eff))"
                + (" + comm" if comm else "")
                + (" + the rest (overheads, F4b's kernels in series)" if abs(rest) > 1e-9 else ""),
        substituted=f"max({num(bw_v)}, {num(cp_v)})" + (f" + {num(comm)}" if comm else "")
                    + (f" + {num(rest)}" if abs(rest) > 1e-9 else "") + f" = {num(verify)} ms",
        value=verify, unit="ms"))
    if d.passes == 0:
        steps.append(MathStep(key="draft_time", formula="t_draft = 0 (n-gram: a lookup in the "
                                                        "prompt, on the CPU)",
                              substituted=f"t_draft = {num(draft)} ms", value=draft, unit="ms"))
    else:
        kv_d = float(ev.kv_read_bytes) * d.kv_share
        knobs = s.draft_overhead_ms or s.verify_overhead_ms
        steps.append(MathStep(
            key="draft_time",
            formula="t_draft = k x max((W_d + C x KV_d) / BW, 2 x P_d x C / (F x eff))"
                    + (" + engine overheads" if knobs else ""),
            substituted=f"{k} x max(({num(s.draft_weights_per_gpu_gb)} + {num(c_rep)} x "
                        f"{num(kv_d / GB)}) GB / {num(s.bandwidth_gb_s * s.eta_bw)} GB/s, 2 x "
                        f"{num(d.params_b * 1e9)} x {num(c_rep)} / "
                        f"({num(s.tflops_per_replica * TERA)} x {num(s.eff)}))"
                        + (" + ..." if knobs else "") + f" = {num(draft)} ms",
            value=draft, unit="ms"))
    end = g.breakeven_concurrency
    steps.append(MathStep(
        key="draft_tpot", formula="TPOT = (t_verify + t_draft) / tau; speed-up = TPOT without "
                                  "the draft / TPOT",
        substituted=f"{per_token_text(verify, draft, tau)} = {num(tpot)} ms; "
                    f"{num(float(g.plain_tpot_ms[0]))} / {num(tpot)} = "
                    f"{float(g.speedup[0]):.2f}x; "
                    + (f"stops paying at C >= {end:,}" if end is not None
                       else "pays up to 4,096 sequences per replica"),
        value=tpot, unit="ms"))
    return tuple(steps)
