"""The quote: a Markdown and a PDF document for the chosen option, in English or Chinese.

Contents: the customer's inputs, the recommendation and the runner-up, the capacity table, cost
per month and per million tokens, the assumptions (prices with their dates, efficiencies,
headroom, the queueing model), the GPU families that were ruled out and why, and the sentence
that these are estimates to be confirmed by measurement.

One list of blocks (heading, paragraph, table) renders to both formats. The PDF uses fpdf2;
Chinese needs a CJK font (Debian `fonts-noto-cjk`): it is looked up in `CAPACITY_CJK_FONT`, then
in the usual font folders. Without one, the PDF falls back to English and says so.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from capacity.catalog import Catalog, default_catalog
from capacity.errors import InputError
from capacity.planner import Option, Plan, option_scenario
from capacity.queueing import QueueResult
from capacity.scenario import capacity_table
from capacity.units import GB

LANGS = ("en", "zh")

CJK_FONT_CANDIDATES: tuple[tuple[str, int], ...] = (
    ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2),
    ("/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc", 2),
    ("/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc", 2),
    ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", 0),
    ("/usr/share/fonts/truetype/arphic/uming.ttc", 0),
    ("/System/Library/Fonts/PingFang.ttc", 0),
    ("C:/Windows/Fonts/msyh.ttc", 0),
)
"""(path, index in the collection) tried in order; index 2 of Noto Sans CJK is Simplified
Chinese."""

T: dict[str, dict[str, str]] = {
    "title": {"en": "Capacity quote", "zh": "容量报价"},
    "prepared": {"en": "Prepared {date} with capacity (LLM-serving capacity planner).",
                 "zh": "{date} 由 capacity(LLM 推理容量规划工具)生成。"},
    "inputs": {"en": "Customer inputs", "zh": "客户输入"},
    "dau": {"en": "Daily active users", "zh": "日活用户"},
    "rpu": {"en": "Requests per user per day", "zh": "每用户每日请求数"},
    "peak": {"en": "Peak window", "zh": "峰值时段"},
    "peak_v": {"en": "{share:.0%} of daily requests in {hours:g} h",
               "zh": "每日 {share:.0%} 的请求集中在 {hours:g} 小时内"},
    "rate": {"en": "Peak arrival rate", "zh": "峰值到达率"},
    "conc": {"en": "Peak concurrency (entered)", "zh": "峰值并发(直接给定)"},
    "tokens": {"en": "Context / prompt / output", "zh": "上下文 / 提示 / 输出"},
    "slo": {"en": "SLOs", "zh": "SLO"},
    "slo_v": {"en": "TTFT <= {ttft:g} ms, TPOT <= {tpot:g} ms at p{q:g}",
              "zh": "p{q:g} 首字 <= {ttft:g} ms,每 token <= {tpot:g} ms"},
    "model": {"en": "Model", "zh": "模型"},
    "rec": {"en": "Recommendation", "zh": "推荐配置"},
    "runner": {"en": "Runner-up", "zh": "备选配置"},
    "none": {"en": "No configuration in the search meets every constraint. See the reasons "
                   "below.",
             "zh": "搜索范围内没有配置能同时满足所有约束,原因见下文。"},
    "quantity": {"en": "Quantity", "zh": "项目"},
    "value": {"en": "Value", "zh": "数值"},
    "config": {"en": "Configuration", "zh": "配置"},
    "month": {"en": "Cost per month", "zh": "每月成本"},
    "mtok": {"en": "Cost per M output tokens at SLO capacity",
             "zh": "满足 SLO 的满载每百万输出 token 成本"},
    "mtok_peak": {"en": "Cost per M output tokens at the peak load",
                  "zh": "峰值负载下每百万输出 token 成本"},
    "ttft": {"en": "Predicted TTFT (p{q:g}) at peak + headroom",
             "zh": "峰值加余量时预测首字延迟(p{q:g})"},
    "tpot": {"en": "Predicted TPOT (p{q:g}) at peak + headroom",
             "zh": "峰值加余量时预测每 token 延迟(p{q:g})"},
    "concurrency": {"en": "Requests in flight at peak / with headroom",
                    "zh": "峰值在途请求 / 含余量"},
    "capacity": {"en": "SLO-feasible capacity", "zh": "满足 SLO 的最大到达率"},
    "verdict": {"en": "Memory verdict / slots per replica", "zh": "显存结论 / 每副本槽位"},
    "binding": {"en": "Binding constraint", "zh": "最紧约束"},
    "sim": {"en": "Check by the discrete-event model at the design load",
            "zh": "离散事件模型在设计负载下的校验"},
    "sim_v": {"en": "TTFT p50/p90/p99 {a:.0f} / {b:.0f} / {c:.0f} ms; TPOT p50/p90/p99 "
                    "{d:.1f} / {e:.1f} / {f:.1f} ms; {ok:.0%} of requests meet both SLOs",
              "zh": "首字 p50/p90/p99 {a:.0f} / {b:.0f} / {c:.0f} ms;每 token p50/p90/p99 "
                    "{d:.1f} / {e:.1f} / {f:.1f} ms;{ok:.0%} 的请求同时满足两项 SLO"},
    "table": {"en": "Capacity table (per GPU)", "zh": "容量表(每张卡)"},
    "c": {"en": "Concurrency", "zh": "并发"},
    "kv": {"en": "Total KV GB", "zh": "总 KV GB"},
    "sub": {"en": "VRAM subtotal GB", "zh": "显存小计 GB"},
    "fit": {"en": "Verdict", "zh": "结论"},
    "ttft0": {"en": "TTFT (no queue)", "zh": "首字(无排队)"},
    "others": {"en": "Other options", "zh": "其他可选配置"},
    "rejected": {"en": "Ruled out, and why", "zh": "被排除的卡型及原因"},
    "fixes": {"en": "Cheaper configurations that miss on memory alone, and what fixes them",
              "zh": "仅因显存不足而落选的更便宜配置,以及补救办法"},
    "assumptions": {"en": "Assumptions", "zh": "假设"},
    "price": {"en": "Price of {gpu}: {cur} {price:.2f} per GPU-hour ({src}, as of {date})",
              "zh": "{gpu} 价格:每卡每小时 {cur} {price:.2f}({src},截至 {date})"},
    "fx": {"en": "Exchange rate: {rate:g} CNY per USD", "zh": "汇率:1 USD = {rate:g} CNY"},
    "engine": {"en": "Engine: vLLM-style continuous batching; gpu_memory_utilization {util:g}, "
                     "runtime overhead {ovh:g} GB per GPU, max_num_seqs {seqs}",
               "zh": "引擎:vLLM 式连续批处理;gpu_memory_utilization {util:g},"
                     "每卡运行时开销 {ovh:g} GB,max_num_seqs {seqs}"},
    "eff": {"en": "Efficiency: decode compute eff {eff:g}, prefill MFU {mfu:g}; bandwidth and "
                  "FLOP/s are spec-sheet (dense) figures",
            "zh": "效率:decode 算力效率 {eff:g},prefill MFU {mfu:g};带宽和算力取规格表(稠密)数值"},
    "headroom": {"en": "Headroom: {h:.0%} on the peak load; {m:.0%} on memory for 'fits'",
                 "zh": "余量:峰值负载加 {h:.0%};显存“能放下”判定留 {m:.0%}"},
    "queue": {"en": "Queueing: Poisson arrivals at the peak rate; prefill-first scheduling; "
                    "TTFT and TPOT percentiles from an M/G/1 model checked by a discrete-event "
                    "simulation; month = 730 hours",
              "zh": "排队:峰值时段按泊松到达;prefill 优先调度;首字与每 token 延迟分位数来自 "
                    "M/G/1 模型,并用离散事件模拟校验;每月按 730 小时计"},
    "estimate": {"en": "These figures are estimates from published specifications and the "
                       "assumptions above; they must be confirmed by measurement on the "
                       "target hardware and engine before commitment.",
                 "zh": "以上数字是根据公开规格和上述假设做出的估算,不是承诺;签约前必须在目标"
                       "硬件和引擎上实测确认。"},
    "no_cjk": {"en": "Note: no Chinese font was found on this machine (install "
                     "fonts-noto-cjk), so this PDF is in English.",
               "zh": ""},
    "searched": {"en": "Configurations evaluated: {n}", "zh": "评估的配置数:{n}"},
    "reason_memory": {"en": "memory", "zh": "显存"},
    "reason_slots": {"en": "slots", "zh": "槽位"},
    "reason_ttft": {"en": "TTFT", "zh": "首字延迟"},
    "reason_tpot": {"en": "TPOT", "zh": "每 token 延迟"},
    "reason_throughput": {"en": "throughput", "zh": "吞吐"},
    "verdict_fits": {"en": "fits", "zh": "能"},
    "verdict_tight": {"en": "tight", "zh": "勉强"},
    "verdict_does_not_fit": {"en": "does not fit", "zh": "不能"},
}


def tr(key: str, lang: str, **kw: object) -> str:
    """The text `key` in `lang`, formatted with `kw`."""
    return T[key][lang].format(**kw)


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


Block = Heading | Para | Table


def _money(x: float, cur: str) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{cur} {x:,.0f}" if x >= 100 else f"{cur} {x:,.2f}"


def _ms(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x / 1e3:.2f} s" if x >= 1000 else f"{x:.1f} ms"


def _option_rows(plan: Plan, o: Option, lang: str) -> list[tuple[str, str]]:
    q = plan.inputs.slo.quantile * 100
    cur = plan.inputs.currency
    return [
        (tr("config", lang), o.label),
        (tr("month", lang), _money(o.cost_per_month, cur)),
        (tr("mtok", lang), _money(o.cost_per_mtok, cur)),
        (tr("mtok_peak", lang), _money(o.cost_per_mtok_at_peak, cur)),
        (tr("ttft", lang, q=q), _ms(o.ttft_ms)),
        (tr("tpot", lang, q=q), _ms(o.tpot_ms)),
        (tr("concurrency", lang), f"{o.peak_concurrency:.1f} / {o.design_concurrency:.1f}"),
        (tr("capacity", lang), f"{o.capacity_rate_per_s:.2f} req/s"),
        (tr("verdict", lang), f"{tr('verdict_' + o.memory_verdict, lang)} / "
                              f"{o.slots_per_replica}"),
        (tr("binding", lang), f"{tr('reason_' + o.binding, lang)} "
                              f"({o.binding_ratio:.0%})"),
    ]


def quote_blocks(plan: Plan, *, lang: str = "en", simulation: QueueResult | None = None,
                 catalog: Catalog | None = None, today: dt.date | None = None,
                 top: int = 5) -> list[Block]:
    """The quote as a list of blocks (shared by the Markdown and the PDF)."""
    if lang not in LANGS:
        raise InputError(f"quote language must be one of {', '.join(LANGS)}, got '{lang}'")
    cat = catalog or default_catalog()
    inp, wl, slo = plan.inputs, plan.inputs.workload, plan.inputs.slo
    date = (today or dt.date.today()).isoformat()
    b: list[Block] = [Heading(f"{tr('title', lang)}: {plan.model_name}"),
                      Para(tr("prepared", lang, date=date)), Heading(tr("inputs", lang))]
    rows: list[tuple[str, str]] = [(tr("model", lang), inp.model)]
    if wl.daily_active_users is not None:
        rows += [(tr("dau", lang), f"{wl.daily_active_users:,.0f}"),
                 (tr("rpu", lang), f"{wl.requests_per_user_per_day:g}"),
                 (tr("peak", lang), tr("peak_v", lang, share=wl.peak_share,
                                       hours=wl.peak_hours)),
                 (tr("rate", lang), f"{plan.peak_rate_per_s or 0:.3f} req/s")]
    else:
        rows.append((tr("conc", lang), f"{wl.peak_concurrency:g}"))
    rows += [(tr("tokens", lang), f"{wl.context_tokens} / {wl.prompt} / {wl.output_tokens}"),
             (tr("slo", lang), tr("slo_v", lang, ttft=slo.ttft_ms, tpot=slo.tpot_ms,
                                  q=slo.quantile * 100))]
    b.append(Table((tr("quantity", lang), tr("value", lang)), tuple(rows)))
    b.append(Heading(tr("rec", lang)))
    best = plan.best
    if best is None:
        b.append(Para(tr("none", lang)))
    else:
        b.append(Table((tr("quantity", lang), tr("value", lang)),
                       tuple(_option_rows(plan, best, lang))))
        if simulation is not None:
            s = simulation
            b.append(Para(tr("sim", lang) + ": " + tr(
                "sim_v", lang, a=s.ttft_ms[0.5], b=s.ttft_ms[0.9], c=s.ttft_ms[0.99],
                d=s.tpot_ms[0.5], e=s.tpot_ms[0.9], f=s.tpot_ms[0.99], ok=s.slo_met_share)))
        b.append(Heading(tr("table", lang) + f": {best.label}"))
        scen = option_scenario(inp, best, cat)
        cs = sorted({max(1, math.ceil(best.peak_concurrency)),
                     max(1, math.ceil(best.design_concurrency)),
                     best.slots_per_replica * best.replicas})
        table = capacity_table(scen, [(c, wl.context_tokens) for c in cs])
        b.append(Table(
            (tr("c", lang), tr("kv", lang), tr("sub", lang), tr("fit", lang), tr("ttft0", lang),
             "TPOT", f"{inp.currency}/M tok"),
            tuple((str(r.concurrency), f"{r.kv_total_bytes / GB:.1f}",
                   f"{r.vram_subtotal_bytes / GB:.1f} / {r.usable_bytes / GB:.1f}",
                   tr("verdict_" + r.verdict, lang), f"{r.ttft_s:.2f} s",
                   f"{r.tpot_ms:.1f} ms", _money(r.cost_per_mtok, inp.currency))
                  for r in table)))
        runner = plan.runner_up
        if runner is not None:
            b.append(Heading(tr("runner", lang)))
            b.append(Table((tr("quantity", lang), tr("value", lang)),
                           tuple(_option_rows(plan, runner, lang))))
        b.append(Heading(tr("others", lang)))
        b.append(Table(
            ("#", tr("config", lang), tr("month", lang), "TTFT", "TPOT", tr("binding", lang)),
            tuple((str(i + 1), o.label, _money(o.cost_per_month, inp.currency),
                   _ms(o.ttft_ms), _ms(o.tpot_ms), tr("reason_" + o.binding, lang))
                  for i, o in enumerate(plan.options[:top]))))
    if plan.rejected:
        b.append(Heading(tr("rejected", lang)))
        b.append(Table(("GPU", tr("binding", lang), ""), tuple(
            (r.gpu_name, ", ".join(tr("reason_" + x, lang) for x in r.reasons), r.detail)
            for r in plan.rejected)))
    if plan.near_misses:
        b.append(Heading(tr("fixes", lang)))
        b.append(Table((tr("config", lang), ""), tuple(
            (m.option.label, "; ".join(f.description for f in m.fixes))
            for m in plan.near_misses)))
    b.append(Heading(tr("assumptions", lang)))
    shown = [plan.best, plan.runner_up] if plan.best else []
    for key in dict.fromkeys(o.gpu for o in shown if o is not None):
        g = cat.gpu(key)
        o = next(x for x in shown if x is not None and x.gpu == key)
        b.append(Para(tr("price", lang, gpu=g.name, cur=inp.currency, price=o.price_per_hour,
                         src=g.price_source, date=g.price_as_of)))
    b += [Para(tr("fx", lang, rate=inp.cny_per_usd)),
          Para(tr("engine", lang, util=inp.util, ovh=inp.overhead_gb, seqs=inp.max_num_seqs)),
          Para(tr("eff", lang, eff=inp.eff, mfu=inp.mfu)),
          Para(tr("headroom", lang, h=wl.headroom, m=inp.memory_headroom)),
          Para(tr("queue", lang)), Para(tr("searched", lang, n=plan.evaluated)),
          Para("**" + tr("estimate", lang) + "**")]
    return b


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    """Blocks as GitHub Markdown."""
    out: list[str] = []
    first = True
    for blk in blocks:
        if isinstance(blk, Heading):
            out.append(("# " if first else "## ") + blk.text)
            first = False
        elif isinstance(blk, Para):
            out.append(blk.text)
        else:
            out.append("| " + " | ".join(_md_cell(h) for h in blk.headers) + " |")
            out.append("|" + "|".join("---" for _ in blk.headers) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in blk.rows]
        out.append("")
    return "\n".join(out)


def quote_markdown(plan: Plan, *, lang: str = "en", simulation: QueueResult | None = None,
                   catalog: Catalog | None = None, today: dt.date | None = None) -> str:
    """The quote as Markdown."""
    return render_markdown(quote_blocks(plan, lang=lang, simulation=simulation,
                                        catalog=catalog, today=today))


def find_cjk_font() -> tuple[Path, int] | None:
    """A font file with Chinese glyphs and its index in the collection, or None.

    `CAPACITY_CJK_FONT` (a path, optionally `path#index`) wins; then the usual folders.
    """
    env = os.environ.get("CAPACITY_CJK_FONT", "").strip()
    if env:
        name, _, number = env.partition("#")
        if Path(name).is_file():
            return Path(name), int(number) if number.isdigit() else 0
    for path, index in CJK_FONT_CANDIDATES:
        if Path(path).is_file():
            return Path(path), index
    return None


def quote_pdf(plan: Plan, *, lang: str = "en", simulation: QueueResult | None = None,
              catalog: Catalog | None = None, today: dt.date | None = None,
              cjk_font: tuple[Path, int] | None | bool = True) -> bytes:
    """The quote as PDF bytes (fpdf2). Chinese needs a CJK font: `cjk_font=True` looks one up,
    a (path, index) pair uses it, None/False forces the fallback. Without a CJK font a Chinese
    quote falls back to English with a note; English uses the core Helvetica font (catalog
    names are ASCII)."""
    from fpdf import FPDF
    from fpdf.enums import XPos, YPos

    font = find_cjk_font() if cjk_font is True else (cjk_font or None)
    note = None
    if lang == "zh" and font is None:
        lang, note = "en", tr("no_cjk", "en")
    if lang == "en":
        font = None  # the core font is enough for English and keeps the file small
    blocks = quote_blocks(plan, lang=lang, simulation=simulation, catalog=catalog, today=today)
    pdf = FPDF(orientation="P", unit="mm", format="A4")
    pdf.set_auto_page_break(auto=True, margin=15)
    pdf.set_margins(15, 15, 15)
    pdf.add_page()
    family = "Helvetica"
    if font is not None:
        pdf.add_font("cjk", "", str(font[0]), collection_font_number=font[1])
        pdf.add_font("cjk", "B", str(font[0]), collection_font_number=font[1])
        family = "cjk"

    def text(s: str) -> str:
        s = s.replace("**", "")
        if family == "Helvetica":
            s = s.replace("≤", "<=").replace("—", "-").replace("×", "x")
            return s.encode("latin-1", "replace").decode("latin-1")
        return s

    width = pdf.w - pdf.l_margin - pdf.r_margin
    if note:
        pdf.set_font(family, size=9)
        pdf.multi_cell(width, 5, text(note), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        pdf.ln(2)
    first = True
    for blk in blocks:
        if isinstance(blk, Heading):
            pdf.set_font(family, size=16 if first else 12)
            if not first:
                pdf.ln(3)
            pdf.multi_cell(width, 8 if first else 7, text(blk.text), new_x=XPos.LMARGIN,
                           new_y=YPos.NEXT)
            first = False
        elif isinstance(blk, Para):
            pdf.set_font(family, size=9)
            pdf.multi_cell(width, 5, text(blk.text), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
            pdf.ln(1)
        else:
            pdf.set_font(family, size=8)
            with pdf.table(width=width, line_height=4.5, text_align="LEFT",
                           first_row_as_headings=True) as t:
                for row in (blk.headers, *blk.rows):
                    r = t.row()
                    for cell in row:
                        r.cell(text(cell))
            pdf.ln(2)
    return bytes(pdf.output())


def write_quote(path: str | Path, plan: Plan, *, lang: str = "en",
                simulation: QueueResult | None = None, catalog: Catalog | None = None) -> Path:
    """Write the quote to `path`: `.md` for Markdown, `.pdf` for PDF."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".md", ".markdown", ".pdf"):
        raise InputError(f"quote file '{p.name}' must end in .md or .pdf")
    if not p.parent.exists():
        raise InputError(f"folder '{p.parent}' does not exist; create it or choose another path")
    if suffix == ".pdf":
        p.write_bytes(quote_pdf(plan, lang=lang, simulation=simulation, catalog=catalog))
    else:
        p.write_text(quote_markdown(plan, lang=lang, simulation=simulation, catalog=catalog),
                     encoding="utf-8")
    return p
