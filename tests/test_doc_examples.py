"""The long worked examples of docs/ are run as the docs print them: each test reads the command
from the doc, runs it in-process and finds every figure the doc's prose quotes from it in the
output, so the doc and the software cannot drift apart silently (an audit on 2026-12-07 found
all of these stale). A figure the output does not print (a published measurement, a figure
derived from the output) is named in the test and checked some other way where it can be."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Set
from pathlib import Path

import pytest

from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.model.workload import Workload
from capacity.plan.disagg import Comparison, Link, compare
from capacity.plan.disagg_handover import descriptors_per_rank
from capacity.plan.options import PlanInputs, Slo

DOCS = Path(__file__).resolve().parents[1] / "docs"

FIGURE = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)%?")
"""A figure as the docs and the CLI write it: 2,244.9, 19.7, 48%; not the digits of a name
(p90, EP16, GB200, NVL72)."""


def figures(text: str) -> set[str]:
    return set(FIGURE.findall(text))


def between(text: str, start: str, end: str) -> str:
    """The text from `start` up to `end` (both must be there: a rewrite of the prose that drops
    one should update this test, not silence it)."""
    assert start in text, f"{start!r} is no longer in the doc"
    i = text.index(start)
    assert end in text[i:], f"{end!r} no longer follows {start!r}"
    return text[i:text.index(end, i)]


def block_command(text: str, start: str) -> list[str]:
    """The command of the indented block that begins with `start`, its `\\` lines joined."""
    i = text.index("    " + start)
    lines = []
    for line in text[i:].splitlines():
        lines.append(line.strip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            break
    argv = shlex.split(" ".join(lines))
    assert argv[0] == "capacity"
    return argv[1:]


def run(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> str:
    assert main(argv) == code
    return capsys.readouterr().out


def assert_quoted(prose: str, out: str, *, unprinted: Set[str] = frozenset(),
                  least: int = 8) -> None:
    """Every figure of `prose` but the `unprinted` ones is a figure of `out`."""
    quoted = figures(prose)
    assert unprinted <= quoted, f"figures no longer quoted: {sorted(unprinted - quoted)}"
    assert len(quoted - unprinted) >= least, "too few figures left to check"
    missing = sorted(quoted - unprinted - figures(out))
    assert missing == [], f"quoted in the doc but not in the output: {missing}\n{out}"


def test_disaggregated_layout_example(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/disaggregation.md, "One layout on the command line": `plan --prefill-pool 3x4
    --decode-pool 1x2 --pool-rate 2.4` (Llama-3.1-70B FP8 on H100s, 8K prompts)."""
    doc = (DOCS / "disaggregation.md").read_text(encoding="utf-8")
    argv = block_command(doc, "capacity plan --model llama-3.1-70b")
    assert "--prefill-pool" in argv
    out = run(argv, capsys)
    prose = between(doc, "gives 3P+1D on 14 GPUs", "(`tests/test_doc_examples.py`")
    assert_quoted(prose, out, least=15)
    assert "the TTFT SLO missed" in prose and "missed, TPOT" in out


def test_disaggregation_when_each_wins() -> None:
    """docs/disaggregation.md, "When each wins": the workloads of tests/test_disagg.py through
    `compare()`; each quotation of a bullet is in the reasons of its comparisons (a "..." skips
    words), and so is each price, each hand-over and the data-centre GPUs' layout."""
    doc = (DOCS / "disaggregation.md").read_text(encoding="utf-8")
    section = " ".join(between(doc, "## When each wins", "The rule the numbers follow").split())
    long_prompts, chat = section.split(" - **")[1:3]
    assert long_prompts.startswith("Long prompts") and chat.startswith("Short chat")

    def comparison(wl: Workload, ttft: float, tpot: float, gpus: tuple[str, ...],
                   max_gpus: int = 32) -> Comparison:
        return compare(PlanInputs(model="llama-3.1-70b", workload=wl,
                                  slo=Slo(ttft_ms=ttft, tpot_ms=tpot), gpus=gpus,
                                  currency="USD", max_gpus=max_gpus))

    dc = ("h100-sxm", "h200-sxm", "b200", "a100-80gb-sxm", "mi300x")
    eight_k = Workload(rate_per_s=2.0, context_tokens=16384, prompt_tokens=8192,
                       output_tokens=256)
    over_dc = comparison(eight_k, 2000, 20, dc)
    dc_reason = over_dc.reason
    reasons = {
        long_prompts: " ".join((comparison(eight_k, 2500, 20, ("h200-sxm",)).reason,
                                comparison(eight_k, 2000, 20, ("h200-sxm",)).reason, dc_reason)),
        chat: comparison(Workload(rate_per_s=8.0, context_tokens=4096, prompt_tokens=200,
                                  output_tokens=200), 1000, 50, dc, max_gpus=16).reason,
    }
    for bullet, said in reasons.items():
        quotes = [q for quote in re.findall(r'"([^"]+)"', bullet) for q in quote.split(" ... ")]
        assert quotes and [q for q in quotes if q not in said] == [], said
        prices = re.findall(r"USD ([\d,]+)", bullet)
        assert prices and [p for p in prices if f"USD {p}/month" not in said] == [], said
    handover = re.search(r"The hand-over is ([\d.]+) ms over InfiniBand", long_prompts)
    assert handover and f"KV hand-over {handover[1]} ms over infiniband" in reasons[long_prompts]
    layout = re.search(r"B200 prefill \(TP (\d)\) and MI300X decode \(TP (\d)\), (\w+) weights, "
                       r"(\d+) GPUs at USD [\d,]+ a month against (\d+) B200", long_prompts)
    assert layout is not None
    prefill_tp, decode_tp, weights, n, agg = layout.groups()
    assert (f"1P+1D ({prefill_tp} x B200 per prefill replica, {decode_tp} x MI300X per decode "
            f"replica, {n} GPUs") in dc_reason and f"aggregated needs {agg} x B200" in dc_reason
    assert dc_reason.startswith("disaggregated: ") and "prefill on B200 and decode on MI300X" \
        in dc_reason
    assert over_dc.best_disaggregated is not None
    assert over_dc.best_disaggregated.weights == weights.lower()


@pytest.mark.slow  # two wide-EP searches of three GPU types within 72 GPUs: 1 to 2 s
def test_wide_ep_size_example(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/expert-parallel.md, "An example": `size --model deepseek-v3 ... --wide-ep
    --wide-ep-max-gpus 72` on the chapter's basis (its table, row by row, and the paragraph
    after it), then the same on `--typical vllm` (the paragraph about it)."""
    doc = (DOCS / "expert-parallel.md").read_text(encoding="utf-8")
    argv = shlex.split(between(doc, "`capacity size --model deepseek-v3", "`)").strip("`"))[1:]
    assert "--wide-ep" in argv
    out = run(argv, capsys)
    section = out.split("Wide expert parallelism", 1)[1]
    listed = re.findall(r"^\d+\. (.*)$", section, re.M)
    table = between(doc, "| option | GPUs | USD/month |", "\n\n")
    rows = [r for r in table.splitlines()[2:] if r.startswith("| ")]
    assert len(rows) == len(listed), "the table lists every wide-EP option the command prints"
    for row, line in zip(rows, listed, strict=True):
        assert_quoted(row, line, least=7)
        # each part of the option's name as the output says it: "2 nodes x 8 H100", "EP16",
        # "DP attention", "32 redundant", "no overlap", "NVFP4", "InfiniBand 400 Gb/s"
        parts = row.removeprefix("| ").split(" | ", 1)[0].lower().split(", ")
        assert line.lower().startswith(parts[0]), (row, line)
        assert [p for p in parts if p not in line.lower()] == [], (row, line)
    wins = between(doc, "Wide EP wins here:", "These are")
    assert_quoted(wins, out)
    assert "\nwinner: wide EP: " in section
    assert aggregated(wins) in section

    typical = between(doc, "The same workload on the typical basis (`--typical vllm`", "\n\n")
    out = run([*argv, "--typical", "vllm"], capsys)
    assert_quoted(typical, out)
    assert aggregated(typical) in out.split("Wide expert parallelism", 1)[1]


def aggregated(prose: str) -> str:
    """What `size --wide-ep`'s verdict says of the cheapest aggregated option the prose names
    ("the cheapest aggregated option is 8 GB200 as 2 replicas of TP 4 in NVFP4 at USD 37,960")."""
    m = re.search(r"cheapest aggregated option is (\d+) (\S+) as (\d+) replicas of TP (\d+) in "
                  r"(\w+) (?:at )?\(?USD ([\d,]+)", " ".join(prose.split()))
    assert m is not None, prose
    n, gpu, replicas, tp, weights, usd = m.groups()
    return (f"aggregated needs {n} x {gpu} (NVL72) ({replicas} replicas x TP={tp}), "
            f"{weights.lower()}, fp8 KV (USD {usd}/month")


def test_wide_ep_pools_sglang_example(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/expert-parallel.md, "One layout a person chose": SGLang's 96-H100 layout (`plan
    --prefill-pool 1xEP32 --decode-pool 1xEP72 --typical sglang`)."""
    doc = (DOCS / "expert-parallel.md").read_text(encoding="utf-8")
    argv = block_command(doc, "capacity plan --model deepseek-v3 --gpu h100-sxm")
    assert "--prefill-pool" in argv
    out = run(argv, capsys)
    prose = between(doc, "On the typical SGLang basis", "; `tests/test_doc_examples.py`")
    # SGLang's own measurements, and figures derived from the output (checked below)
    measured = {"6,537", "2,788"}
    per_gpu = re.search(r"\(([\d,]+) input tok/s per GPU", prose)
    per_decode_gpu = re.search(r"\(([\d,]+) output tok/s per decode GPU", prose)
    fixed = re.search(r"a pass's ([\d.]+) ms fixed time", prose)
    descriptors = re.search(r", ([\d.]+) ms of it the descriptors", prose)
    assert per_gpu and per_decode_gpu and fixed and descriptors
    derived = {per_gpu[1], per_decode_gpu[1], fixed[1], descriptors[1]}
    assert_quoted(prose, out, unprinted=measured | derived, least=12)

    d = json.loads(run([*argv, "--format", "json"], capsys))
    prompt, output = d["prompt_tokens"], d["output_tokens"]
    # within the SLOs: a prefill deployment's capacity x its prompt over its GPUs, and the
    # decode one's x its output tokens over its GPUs
    assert per_gpu[1] == f"{d['prefill_capacity_per_s'] * prompt / d['prefill_ep']:,.0f}"
    assert per_decode_gpu[1] == f"{d['decode_capacity_per_s'] * output / d['decode_ep']:,.0f}"
    # a prompt's time is P / (EP x tok/s per GPU) + t0 x P / (EP x 16,384): t0 from the output
    ep, rate = d["prefill_ep"], d["prefill_tok_s_per_gpu"]
    t0 = (d["prefill_ms"] - prompt / (ep * rate) * 1e3) * ep * 16_384 / prompt
    assert fixed[1] == f"{t0:.1f}"
    # one descriptor per 16-token block per layer (61 layers, 125 blocks) at the link's cost
    model = default_catalog().variant(d["model_key"]).model
    us = Link(kind="infiniband", send_gb_s=50.0, recv_gb_s=50.0).descriptor_us
    assert descriptors[1] == f"{descriptors_per_rank(model, prompt) * us / 1e3:.0f}"


def _tpot_rows(out: str) -> dict[int, list[float]]:
    """`calibrate`'s TPOT table: concurrency -> measured, chapter's, err, fitted, err, held out,
    err (errors in %)."""
    section = out.split("TPOT (decode step), ms", 1)[1].split("median |error|", 1)[0]
    return {int(cells[0]): [float(c.rstrip("%")) for c in cells[2:]]
            for cells in (line.split() for line in section.splitlines())
            if cells and cells[0].isdigit()}


@pytest.mark.slow  # three fits of the published levels: 5 to 10 s on 2 busy cores
def test_published_rtx_4090_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/calibration.md, "The RTX 4090 published sweep": `calibrate --reference` on
    Mistral-7B, the table row by row, the TTFT sentence, the fit on three levels that predicts
    the other two, and the chapter-method fit of the paragraph after it."""
    import argparse

    from capacity.cli import calibrate
    from capacity.cli.main import build_parser
    from capacity.fit.calibration import apply as apply_calibration
    from capacity.fit.calibration import decode_measured_ms, fit, predict_ms
    from capacity.fit.planning import scenario_with_basis

    doc = (DOCS / "calibration.md").read_text(encoding="utf-8")
    section = " ".join(between(doc, "## The RTX 4090 published sweep", "\n## ").split())
    command = re.search(r"`capacity (calibrate --model mistral[^`]+)`", section)
    assert command is not None
    argv = shlex.split(command[1])
    assert "--reference" in argv
    out = run(argv, capsys)
    rows = _tpot_rows(out)
    table = re.findall(r"\| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([-+\d.]+)% \| ([\d.]+) \| "
                       r"([-+\d.]+)% \| ([\d.]+) \| ([-+\d.]+)% \|", section)
    assert [int(r[0]) for r in table] == sorted(rows)
    for c, *cells in table:
        assert [float(x) for x in cells] == pytest.approx(rows[int(c)], abs=0.005), c
    medians = re.search(r"\*\*([\d.]+)%\*\* \| \| \*\*([\d.]+)%\*\* \| \| \*\*([\d.]+)%\*\*",
                        section)
    assert medians is not None
    assert (f"median |error|: chapter's {medians[1]}%, fitted {medians[2]}%, held out "
            f"{medians[3]}%") in out

    ttft = re.search(r"TTFT at concurrency 4: measured (\d+) ms, the chapter's knobs \(MFU 0.3\) "
                     r"([\d.]+) ms \(\+(\d+)%; the spec sheet's MFU 1, ([\d.]+) ms\)", section)
    assert ttft is not None
    measured_ms, chapter_ms, over, spec_ms = ttft.groups()
    ttft_rows = out.split("TTFT (prefill), ms", 1)[1].split("median |error|", 1)[0]
    row = next(line.split() for line in ttft_rows.splitlines() if line.startswith("4 "))
    assert (row[2], f"{float(row[3]):.1f}", f"{float(row[4].rstrip('%')):.0f}") == (
        measured_ms, chapter_ms, over)

    # fitted on three levels (`--levels`), the other two predicted; the spec sheet's figures
    args = build_parser().parse_args(argv)
    base = calibrate.scenario_from_args(argparse.Namespace(**{**vars(args), "draft": None})
                                        ).with_(step_method="operator")
    points, _ = calibrate.load_points(args, base)
    levels = re.search(r"`--levels ([\d,]+)`\), the calibration predicts (\d+) and (\d+) within "
                       r"([-\d.]+)% and ([-\d.]+)% \(the spec sheet: ([-\d]+)% and ([-\d]+)%",
                       section)
    assert levels is not None
    cal = fit(calibrate.only_levels(points, levels[1]), base, name="levels")
    spec = scenario_with_basis(base, "spec")
    fitted_ms, _ = predict_ms(apply_calibration(cal, base), points)
    spec_step_ms, spec_ttft_ms = predict_ms(spec, points)
    errors = {int(p.concurrency): (f"{f / m - 1:+.1%}", f"{s / m - 1:+.0%}")
              for p, f, s in zip(points, fitted_ms, spec_step_ms, strict=True)
              for m in [decode_measured_ms(p)] if m is not None}
    assert (errors[int(levels[2])], errors[int(levels[3])]) == (
        (f"{levels[4]}%", f"{levels[6]}%"), (f"{levels[5]}%", f"{levels[7]}%"))
    assert f"{float(spec_ttft_ms[0]):.1f}" == spec_ms

    chapter = re.search(r"\(`eff` ([\d.]+), `eta_bw` ([\d.]+) at its bound, the RTX 4090's "
                        r"measured copy ceiling, and a ([\d.]+) ms step overhead\) and leaves "
                        r"([\d.]+)% fitted, ([\d.]+)% held out", section)
    assert chapter is not None
    out = run([*argv, "--step-method", "chapter"], capsys)
    eff, eta_bw, step_ms, fitted_err, held_err = chapter.groups()
    knobs = {line.split()[0]: line.split()[2] for line in out.splitlines()
             if line.split()[:1] in (["eff"], ["eta_bw"], ["step_overhead_ms"])}
    assert (f"{float(knobs['eff']):.2f}", f"{float(knobs['eta_bw']):.2f}",
            f"{float(knobs['step_overhead_ms']):.1f}") == (eff, eta_bw, step_ms)
    assert f"fitted {fitted_err}%, held out {held_err}%" in out


def _tokens(text: str) -> int:
    """'256' or '16K' (as the docs write prompt lengths) in tokens."""
    return int(text[:-1]) * 1024 if text.endswith("K") else int(text)


def test_measurement_plan_example(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/calibration.md, "The measurement plan": the command it shows prints the cells the
    prose lists for Llama-3.1-8B on the H100, and leaves the knob it names unpinned."""
    doc = (DOCS / "calibration.md").read_text(encoding="utf-8")
    section = " ".join(between(doc, "## The measurement plan", "\n## ").split())
    argv = block_command(doc, "capacity calibrate --plan --model llama-3.1-8b-bf16")
    argv = [a for a in argv if a not in ("[--format", "json]")]
    plan = json.loads(run([*argv, "--format", "json"], capsys))
    said = re.search(r"For Llama-3.1-8B on the H100 it is (\d+) cells \(([^)]*)\)", section)
    assert said is not None
    listed = set()
    for group in said[2].split("; "):
        lengths, _, levels = group.replace(" tokens", "").partition(" at ")
        listed |= {(_tokens(p), int(c)) for p in lengths.split(" and ")
                   for c in re.split(r", | and ", levels)}
    cells = {(c["prompt_tokens"], c["concurrency"]) for c in plan["cells"]}
    assert (int(said[1]), listed) == (len(cells), cells)
    assert f"the plan's {len(cells)} cells of Llama-3.1-8B on the H100" in section
    unpinned = re.search(r"`(\w+)` stays \"not pinned\"", section)
    assert unpinned is not None
    assert "not pinned by any sweep of this grid: " + unpinned[1] in run(argv, capsys)


def test_what_moves_tpot_most() -> None:
    """docs/calibration.md, "Uncertainty": the inputs `sensitivity` sorts first for TPOT at the
    chapter's 50 x 8K on the RTX 4090, in the doc's order, with the first one's range."""
    from capacity.fit.uncertainty import sensitivity
    from capacity.report.urlstate import DEFAULT_STATE

    doc = " ".join((DOCS / "calibration.md").read_text(encoding="utf-8").split())
    said = re.search(r"at 50 x 8K on the chapter's RTX 4090, bandwidth moves TPOT most "
                     r"\(([\d.]+) to ([\d.]+) ms\), then ([^;]+); MFU and `eff` do nothing", doc)
    assert said is not None
    assert (DEFAULT_STATE.c, DEFAULT_STATE.ctx, DEFAULT_STATE.gpu) == (50, 8192, "rtx-4090")
    moved = sensitivity(DEFAULT_STATE.scenario(default_catalog()), 50, "step_ms")
    words = {"context_tokens": "context", "layer_overhead_ms": "the per-layer overhead",
             "eta_bw": "`eta_bw`", "step_overhead_ms": "the per-step overhead"}
    first, *rest = moved
    assert first.name == "bandwidth_gb_s"
    assert (f"{first.output_low:.1f}", f"{first.output_high:.1f}") == (said[1], said[2])
    named = [words.get(s.name, s.name) for s in rest[:len(words)]]
    assert said[3] == ", ".join(named[:-1]) + " and " + named[-1]
    assert all(s.swing == 0 for s in moved if s.name in ("mfu", "eff"))


@pytest.mark.slow  # one search of every catalog GPU on the typical basis: 1 to 2 s
def test_planner_gpu_band_example(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/app.md (the Planner) and docs/method.md ("Planning with a calibration") quote the
    GPU band of the Planner's default inputs on `?cal=typical:vllm`: `capacity size --typical
    vllm`'s `gpu_band` at the Planner's defaults (its daily users; every other default the
    same as the command's)."""
    from capacity.report.planner_url import PlannerState

    app = " ".join((DOCS / "app.md").read_text(encoding="utf-8").split())
    said = re.search(r'\("([^"]+)", the Planner\'s default on `\?cal=typical:vllm`', app)
    assert said is not None
    method = " ".join((DOCS / "method.md").read_text(encoding="utf-8").split())
    assert f'("{said[1]}", `GpuBand.slow_misses`)' in method
    d = PlannerState()
    assert (d.mode, d.cal) == ("dau", "")
    out = json.loads(run(["size", "--dau", str(d.dau), "--model", d.model, "--typical", "vllm",
                          "--format", "json"], capsys))
    assert out["gpu_band"]["text"] == said[1]
