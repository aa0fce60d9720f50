"""The subcommands of `capacity` and their one-line summaries, in the order `--help` lists them.

One table read twice: by each subcommand's `add_parser` (its `help=`) and by `capacity --help`,
which lists the commands from here without importing their modules (pandas, httpx, uvicorn and
the planner stay unloaded for a help screen or a mistyped command).
"""

from __future__ import annotations

from typing import Final

SUMMARIES: Final[dict[str, str]] = {
    "plan": "memory, bandwidth, compute and cost for one setup (the chapter's tables)",
    "size": "rank GPU options for daily users (or peak concurrency) and SLOs",
    "frontier": "throughput per GPU vs interactivity: the Pareto front and its cost per M tokens",
    "workload": "summarise a request log; list the named workloads",
    "bench": "measure TTFT, TPOT and throughput of an OpenAI-compatible endpoint",
    "sim-server": "serve a simulated OpenAI-compatible endpoint (no GPU needed)",
    "runs": "list stored benchmark runs, show a summary, or query them with SQL",
    "calibrate": "fit bandwidth/compute efficiency and overheads from measured points",
    "validate": "score the predictor against every shipped published measurement",
    "probe": "measure this machine (bandwidth, GEMM rate) and save it as a GPU entry",
    "catalog": "add a custom model entry from a config.json or a GGUF file",
    "app": "start the Streamlit app (extra arguments go to `streamlit run`)",
}
"""Subcommand -> its summary; the module is capacity/cli/<name with - as _>.py."""
