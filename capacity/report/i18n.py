"""Every bilingual string of capacity, English and Simplified Chinese, in one table.

`MESSAGES` maps a key to its (English, Chinese) text; `t(key, lang, **values)` formats one.
The app (streamlit_app.py, pages/, app/), the Planner page and the library's quote document
(`capacity.report.quote`, Markdown and PDF) all read this table, so a string is changed in one place.

Keys are grouped by where they appear; a prefix marks a group where one reads better or where
keys would collide: `m_`/`r_` (Measure/Results pages; `m_` and `r_` also hold the math steps and
the reliefs the library names), `pl_` (Planner page), `quote_` (the quote document), `fig_`
(the planner's headline figures: one label on the Planner page and in the quote), `chart_`
and `overlay_` (labels of `capacity.report.charts` and `capacity.report.overlay_charts`, read through
`app.i18n.chart_labels` and `app.i18n.overlay_chart_labels`). tests/test_app_i18n.py checks that
every key has both languages with the same placeholders, that the keys the library produces
are covered, and that every key literal the pages and the quote use exists here.

Pure: no Streamlit, so the library's quote can use it.
"""

from __future__ import annotations

from typing import Final

LANGS: Final = ("en", "zh")
"""The languages, in the order of the pairs in `MESSAGES`."""

LANG_NAMES: Final = {"en": "English", "zh": "中文"}
"""Each language's name in itself (the app's language switch)."""

MESSAGES: Final[dict[str, tuple[str, str]]] = {
    # app and navigation
    "app_title": ("Capacity planner", "容量规划"),
    "nav_explorer": ("Explorer", "探索器"),
    "nav_catalog": ("Catalog", "目录"),
    "nav_planner": ("Planner", "规划"),
    "nav_measure": ("Measure", "测量"),
    "nav_results": ("Results", "结果"),
    "language": ("Language", "语言"),
    "sidebar_caption": ("LLM serving: memory, bandwidth, compute and SLO in one method.",
                        "大模型推理：显存、带宽、算力与 SLO，一套方法。"),
    # explorer: inputs
    "model": ("Model", "模型"),
    "weights": ("Weight format", "权重格式"),
    "gpu": ("GPU", "GPU"),
    "gpus": ("GPUs", "GPU 数量"),
    "tp": ("Tensor parallel (TP)", "张量并行（TP）"),
    "tp_short": ("TP", "TP"),
    "tp_moved": ("TP={old} is not possible for {model} on {n} GPUs; moved to TP={new}, the "
                 "nearest size that is.",
                 "{model} 在 {n} 张 GPU 上不能用 TP={old}；已改为最接近的可行值 TP={new}。"),
    "ctx": ("Context per request (tokens)", "每个请求的上下文（tokens）"),
    "prompt": ("Prompt length for TTFT (tokens)", "计算首字延迟的提示长度（tokens）"),
    "prompt_follows": ("Prompt = the whole context", "提示长度 = 整个上下文"),
    "help_prompt_follows": ("On: TTFT is for a prompt as long as the context, and follows it. "
                            "Off: set the prompt length apart.",
                            "开：首字延迟按与上下文等长的提示计算，并随上下文变化。关：单独设定提示长度。"),
    "ttft_prompt_follows": ("TTFT is for a prompt of {p} tokens (the whole context; set it apart "
                            "under Workload and memory).",
                            "首字延迟按 {p} tokens 的提示计算（即整个上下文；可在“负载与显存”中单独设定）。"),
    "ttft_prompt_apart": ("TTFT is for a prompt of {p} tokens, set apart from the {ctx}-token "
                          "context (under Workload and memory).",
                          "首字延迟按 {p} tokens 的提示计算，与 {ctx} tokens 的上下文分开设定"
                          "（见“负载与显存”）。"),
    "kv": ("KV cache precision", "KV 缓存精度"),
    "block": ("KV block size (tokens)", "KV 块大小（tokens）"),
    "util": ("GPU memory utilization", "显存利用率"),
    "overhead": ("Runtime overhead per GPU (GB)", "每卡运行时开销（GB）"),
    "c": ("Concurrent requests", "并发请求数"),
    "c_exact": ("exact", "精确值"),
    "ctx_exact": ("tokens", "tokens"),
    "help_exact": ("Type an exact value; the slider beside it follows.",
                   "输入精确值；旁边的滑块随之移动。"),
    "slo_ttft_ms": ("TTFT target (ms)", "首字延迟目标（ms）"),
    "slo_tpot_ms": ("TPOT target (ms)", "每 token 时间目标（ms）"),
    "slo_cost": ("Cost target per M tokens (0 = none)", "每百万 token 成本目标（0 = 不设）"),
    "price": ("Price per GPU-hour", "每 GPU 小时价格"),
    "currency": ("Currency", "货币"),
    "rate": ("Exchange rate (CNY per USD)", "汇率（人民币/美元）"),
    "eff": ("Decode compute efficiency (eff)", "解码计算效率（eff）"),
    "mfu": ("Prefill MFU", "预填充 MFU"),
    "headroom": ("Memory headroom for 'fits'", "“放得下”所需的显存余量"),
    "help_util": ("Fraction of total GPU memory the engine may use (vLLM "
                  "gpu_memory_utilization).",
                  "推理引擎可用的显存比例（vLLM 的 gpu_memory_utilization，按总显存计）。"),
    "help_tp": ("Tensor parallel size. Replicas = GPUs / TP; only sizes that divide the GPU "
                "count and the model's heads are offered. A model that fits one card is "
                "usually better served by replicas.",
                "张量并行大小。副本数 = GPU 数 / TP；只列出能整除 GPU 数和模型头数的取值。"
                "单卡放得下的模型通常用多副本更好。"),
    "help_eff": ("Fraction of peak TFLOP/s a decode step reaches (the chapter uses 1.0; real "
                 "values are lower).", "解码阶段达到的峰值算力比例（原文取 1.0，实际更低）。"),
    "sec_inputs": ("Inputs", "输入"),
    "sec_workload": ("Workload and memory", "负载与显存"),
    "sec_prefix": ("Prefix caching", "前缀缓存"),
    "prefix_tokens": ("Shared prefix (system prompt), tokens", "共享前缀（系统提示）token 数"),
    "prefix_share": ("Share of requests that reuse it", "复用它的请求占比"),
    "help_prefix": ("A prefix cache holds the KV of a shared system prompt once and skips its "
                    "prefill for every request that reuses it (docs/method.md, Prefix caching). "
                    "0 turns it off.",
                    "前缀缓存只保存一份共享系统提示的 KV，复用它的请求跳过这部分预填充"
                    "（docs/method.md，前缀缓存）。0 表示关闭。"),
    "prefix_title": ("Prefix caching: {p} shared tokens, reused by {share} of requests",
                     "前缀缓存：共享 {p} 个 token，{share} 的请求复用"),
    "prefix_ttft": ("Mean TTFT, no load", "空载平均首字延迟"),
    "prefix_cvram": ("C_vram, prefix held once", "前缀只存一份时的显存最大并发"),
    "prefix_cost": ("{cur} per M tokens at C_vram", "满显存并发时 {cur}/百万 token"),
    "pl_log": ("Size from a log", "按请求日志规划"),
    "pl_log_help": ("A request log, CSV or JSON lines: a timestamp, prompt tokens and output tokens "
                    "per request, optionally a conversation id (capacity bench's requests.csv, "
                    "AIPerf's profile_export.jsonl, the Azure LLM, BurstGPT and Mooncake traces as "
                    "they are). Its busiest hour is sized with this page's SLOs, percentile, "
                    "model, GPUs and prices; the length inputs above are replaced by the log's.",
                    "请求日志（CSV，或每行一个 JSON 对象）：每个请求的时间戳、提示 token 数、输出 "
                    "token 数，可选会话编号；本工具压测的请求文件、常见压测工具的导出与公开请求轨迹"
                    "均可直接读取（列名见方法文档）。按本页的 SLO、分位数、模型、GPU 与价格为其最忙"
                    "的一小时规划；上方的长度输入由日志代替。"),
    "pl_log_upload": ("Request log", "请求日志"),
    "pl_log_error": ("This log cannot be used: {msg}", "无法使用此日志：{msg}"),
    "pl_log_read": ("{rows} rows, {kept} used, {left} left out", "{rows} 行，使用 {kept} 行，"
                    "剔除 {left} 行"),
    "pl_log_bad": ("Left out: {reasons}", "剔除原因：{reasons}"),
    "pl_log_bad_0": ("missing or unreadable timestamp", "时间戳缺失或无法解析"),
    "pl_log_bad_1": ("prompt tokens not a whole number >= 1", "提示 token 数不是 >= 1 的整数"),
    "pl_log_bad_2": ("output tokens not a whole number >= 1", "输出 token 数不是 >= 1 的整数"),
    "pl_log_bad_3": ("failed request", "失败的请求"),
    "pl_log_peak": ("Busiest hour {hour}:00 ({clock}): {n} requests = {rate} req/s; burstiness CV "
                    "{cv} (1 = Poisson); prefix reuse {reuse}",
                    "最忙时段 {hour}:00（{clock}）：{n} 个请求 = {rate} 请求/秒；到达间隔变异系数 "
                    "{cv}（1 = 泊松）；前缀复用 {reuse}"),
    "pl_log_no_arrivals": ("This file has no send times (a vLLM result saved without start_times): "
                           "its lengths are shown, but no rate to size for. Give a log with "
                           "timestamps, or enter the traffic above.",
                           "该文件没有发送时间（未保存 start_times 的 vLLM 结果）：只显示长度分布，"
                           "没有可据以规划的到达率。请提供带时间戳的日志，或在上方输入流量。"),
    "pl_log_clock_utc": ("UTC", "协调世界时"),
    "pl_log_clock_rel": ("hours from the first request", "自第一个请求起的小时"),
    "pl_log_lengths": ("Prompt and output lengths", "提示与输出长度"),
    "pl_log_arrivals": ("Requests per hour of the day", "一天中每小时的请求数"),
    "pl_log_tokens": ("tokens (from)", "token 数（起）"),
    "pl_log_requests": ("requests", "请求数"),
    "pl_log_hour": ("hour of the day", "小时"),
    "pl_log_prompt": ("prompt", "提示"),
    "pl_log_output": ("output", "输出"),
    "pl_log_workload": ("Sized for: {rate} req/s, mean prompt {prompt} and output {out} tokens, "
                        "context {ctx} tokens (p{q} of prompt + output)",
                        "规划依据：{rate} 请求/秒，平均提示 {prompt}、输出 {out} token，"
                        "上下文 {ctx} token（提示 + 输出的 p{q}）"),
    "pl_log_options": ("Options for the log's busiest hour", "日志最忙时段的方案"),
    "pl_col_max_rate": ("max req/s within the SLO", "SLO 内最大请求/秒"),
    "quote_prefix": ("Prefix caching", "前缀缓存"),
    "quote_prefix_v": ("{p} shared tokens reused by {share} of requests: prefill {t0} s -> {t1} s "
                       "(mean, no load), C_vram per replica {c0} -> {c1}",
                       "{share} 的请求复用 {p} 个共享 token：预填充 {t0} s -> {t1} s（空载平均），"
                       "每副本显存最大并发 {c0} -> {c1}"),
    "prefix_caption": ("Without the cache: TTFT {t0}, C_vram {c0}, {cost0} {cur} per M tokens. "
                       "The prefix is capped below the prompt ({p} tokens).",
                       "无缓存时：首字延迟 {t0}，显存最大并发 {c0}，每百万 token {cost0} {cur}。"
                       "前缀长度不超过提示长度（{p} token）。"),
    "sec_slo": ("Targets (SLO)", "目标（SLO）"),
    "sec_cost": ("Price and currency", "价格与货币"),
    "sec_eff": ("Efficiency (calibration)", "效率（校准）"),
    "eta_bw": ("Bandwidth efficiency (eta_bw)", "带宽效率"),
    "help_eta_bw": ("Achieved share of the spec-sheet memory bandwidth in a decode step (the "
                    "chapter uses 1.0; a Planner option on a typical-engine basis opens with "
                    "the engine's value).",
                    "解码一步实际达到的规格表显存带宽比例（原文取 1.0；按典型引擎效率规划的"
                    "方案打开时带入该引擎的数值）。"),
    "step_oh_ms": ("Per-step overhead (ms)", "每步开销（ms）"),
    "prefill_oh_ms": ("Prefill overhead (ms)", "预填充开销（ms）"),
    "pred_basis_knobs": ("Prediction: roofline with the efficiencies set here (bandwidth efficiency "
                         "{eta_bw:.2f}, eff {eff:.2f}, MFU {mfu:.2f}, step overhead {t0:.1f} ms, "
                         "prefill overhead {p0:.1f} ms).",
                         "预测依据：按此处设置的效率计算屋顶线（带宽效率 {eta_bw:.2f}，eff {eff:.2f}，"
                         "MFU {mfu:.2f}，每步开销 {t0:.1f} ms，预填充开销 {p0:.1f} ms）。"),
    "prediction": ("Prediction", "预测依据"),
    "spec_sheet": ("the chapter's assumptions (MFU 0.3)", "本章假设（MFU 0.3）"),
    "basis_spec": ("the spec sheet (every efficiency at its peak: an upper bound on speed)",
                   "规格表（所有效率取峰值：速度上限）"),
    "basis_chapter": ("the chapter's assumptions (decode eff 1, prefill MFU 0.3)",
                      "本章假设（解码算力效率 1，预填充 MFU 0.3）"),
    "basis_typical": ("typical {engine} efficiency (no calibration)", "{engine} 典型效率（未校准）"),
    "basis_cal": ("calibration '{name}' (fitted to measurements)", "校准“{name}”（按实测拟合）"),
    "basis_entered": ("efficiencies entered by hand", "手动输入的效率"),
    "basis_knobs": ("decode compute eff {eff:.2f}, prefill MFU {mfu:.2f}, bandwidth efficiency "
                    "{eta:.2f}, {t0:.1f} ms per step, {p0:.1f} ms per prefill",
                    "解码算力效率 {eff:.2f}，预填充 MFU {mfu:.2f}，带宽效率 {eta:.2f}，每步 {t0:.1f} "
                    "ms，每次预填充 {p0:.1f} ms"),
    "help_prediction": ("The knobs the speed figures rest on. The chapter's assumptions (the default): "
                        "eff 1 and prefill MFU 0.3, the worked example's. The spec sheet: every "
                        "efficiency at its peak, the upper bound on speed. Typical engine: knobs "
                        "derived from published measurements. A saved calibration (the Results "
                        "page or `capacity calibrate`): knobs fitted on your measurements.",
                        "速度类数字所依据的效率参数。本章假设（默认）：算力效率 1、预填充 MFU 0.3，"
                        "即书中算例的取值。规格表：所有效率取峰值，是速度上限。典型引擎：由公开实测推得的"
                        "参数。已保存的校准（结果页或 `capacity calibrate`）：按你的实测拟合的参数。"),
    "pred_basis_cal": ("Prediction: calibrated with '{name}' (bandwidth efficiency {eta_bw:.2f}, "
                       "step overhead {t0:.1f} ms, eff {eff:.2f}, MFU {mfu:.2f}).",
                       "预测依据：校准 '{name}'（带宽效率 {eta_bw:.2f}，每步开销 {t0:.1f} ms，eff "
                       "{eff:.2f}，MFU {mfu:.2f}）。"),
    "pred_basis_spec": ("Prediction: the spec sheet, every efficiency at its peak: an upper bound "
                        "on speed; real engines are typically 1.3x to 3x slower until calibrated "
                        "with measurements.",
                        "预测依据：规格表，所有效率取峰值，是速度上限；未用实测校准前，真实引擎通常慢 "
                        "1.3 到 3 倍。"),
    "pred_basis_chapter": ("Prediction: the chapter's assumptions (decode eff 1, prefill MFU 0.3). "
                           "Not an upper bound: the spec sheet (MFU 1) is faster, and real engines "
                           "are often slower.",
                           "预测依据：本章假设（解码算力效率 1，预填充 MFU 0.3）。这不是速度上限："
                           "规格表（MFU 1）更快，真实引擎常常更慢。"),
    "pred_basis_typical": ("Prediction: typical {engine} efficiency ({knobs}), from published measurements; "
                           "calibrate to replace it.",
                           "预测依据：{engine} 典型效率（{knobs}），来自公开实测；校准后替换。"),
    "sec_uncertainty": ("How sure is this? TPOT likely {lo:.1f} to {hi:.1f} ms; what moves it most",
                        "有多确定？每 token 延迟大致在 {lo:.1f} 到 {hi:.1f} ms；什么影响最大"),
    "unc_basis_cal": ("Band: the calibrated prediction plus or minus its error on held-out measurements.",
                      "区间：校准预测加减其在留出实测点上的误差。"),
    "unc_basis_spec": ("Band: from the spec sheet, every efficiency at its peak (fast edge), to "
                       "typical efficiencies of real engines (slow edge); calibrate to narrow it.",
                       "区间：从规格表（所有效率取峰值，快端）到真实引擎的典型效率（慢端）；校准后会变窄。"),
    "unc_quantity": ("quantity", "指标"),
    "unc_flags": ("The calibration has knobs real engines do not reach, or that its data "
                  "could not pin down; treat its prediction with care:",
                  "该校准的部分参数超出真实引擎能达到的范围，或数据不足以确定；请谨慎看待其预测："),
    "unc_flag_high": ("{knob} = {value:.3g}, above the plausible {limit:g}",
                      "{knob} = {value:.3g}，高于合理上限 {limit:g}"),
    "unc_flag_std": ("{knob} = {value:.3g} with a standard error of {std:.3g} (over half "
                     "its value)", "{knob} = {value:.3g}，标准误 {std:.3g}（超过其值的一半）"),
    "unc_wider": ("The band is wider than the calibration's own error, because:",
                  "区间比校准自身的误差更宽，原因是："),
    "unc_w_model": ("fitted on {measured}, applied to {used}: +{amount} ({output})",
                    "在 {measured} 上拟合，用于 {used}：+{amount}（{output}）"),
    "unc_w_gpu": ("measured on {measured}, applied to {used}: +{amount} ({output})",
                  "在 {measured} 上测量，用于 {used}：+{amount}（{output}）"),
    "unc_w_context": ("measured at {measured} tokens, used at {used}: +{amount} ({output})",
                      "测量时为 {measured} tokens，现在为 {used}：+{amount}（{output}）"),
    "unc_w_concurrency": ("measured at concurrency {measured}, used at {used}: +{amount} "
                          "({output})", "测量时并发为 {measured}，现在为 {used}：+{amount}（{output}）"),
    "unc_w_few_points": ("only {measured} measured point(s), fewer than {used}: +{amount} "
                         "({output})", "只有 {measured} 个测量点，少于 {used} 个：+{amount}（{output}）"),
    "unc_w_implausible": ("{measured} = {used} is implausible: +{amount} ({output})",
                          "{measured} = {used} 不合理：+{amount}（{output}）"),
    "unc_out_step_ms": ("TPOT", "每 token 延迟"),
    "unc_out_ttft_s": ("TTFT", "首字延迟"),
    "unc_out_both": ("TPOT and TTFT", "每 token 延迟和首字延迟"),
    "unc_low": ("low", "低"),
    "unc_mid": ("prediction", "预测"),
    "unc_high": ("high", "高"),
    "sens_step": ("What moves TPOT most", "对每 token 延迟影响最大的输入"),
    "sens_ttft": ("What moves TTFT most (s)", "对首字延迟影响最大的输入（s）"),
    "sens_input": ("input", "输入"),
    "sens_range": ("range", "范围"),
    "sens_swing": ("swing", "变化幅度"),
    "in_eta_bw": ("bandwidth efficiency", "带宽效率"),
    "in_eff": ("decode compute efficiency", "解码计算效率"),
    "in_step_overhead_ms": ("per-step overhead (ms)", "每步开销（ms）"),
    "in_mfu": ("prefill MFU", "预填充 MFU"),
    "in_prefill_overhead_ms": ("prefill overhead (ms)", "预填充开销（ms）"),
    "in_overhead_gb": ("runtime memory overhead (GB)", "运行时显存开销（GB）"),
    "in_util": ("memory utilization", "显存利用率"),
    "in_bandwidth_gb_s": ("memory bandwidth (GB/s)", "显存带宽（GB/s）"),
    "in_tflops": ("peak TFLOP/s", "峰值 TFLOP/s"),
    "in_weights_gb": ("weight size (GB)", "权重大小（GB）"),
    "in_context_tokens": ("context (tokens)", "上下文（tokens）"),
    "in_eta_kv": ("KV-read bandwidth efficiency", "KV 读取带宽效率"),
    "in_attn_sat_batch": ("attention saturation batch (sequences)", "注意力饱和批量（序列数）"),
    "in_seq_overhead_ms": ("per-sequence step overhead (ms)", "每序列每步开销（ms）"),
    "in_batch1_factor": ("step at batch 1 / formula (ratio)", "单序列步长 / 公式（比值）"),
    "in_attn_mfu": ("prefill attention MFU", "预填充注意力 MFU"),
    # explorer: headline and verdicts
    "headline": ("{c} concurrent requests × {ctx} tokens on {n} × {gpu}",
                 "{n} × {gpu}：{c} 个并发请求 × {ctx} tokens"),
    "overall_pass": ("Works: every constraint passes.", "可行：所有约束都满足。"),
    "overall_tight": ("Works, but tight: little headroom left.", "可行，但余量很小。"),
    "overall_fail": ("Does not work as set: {names} fail (what binds and what would relieve "
                     "it are below).", "按当前设置不可行：{names}不通过（瓶颈与缓解办法见下方）。"),
    "metric_tpot": ("TPOT", "每 token 延迟"),
    "metric_ttft": ("TTFT", "首字延迟"),
    "metric_tok_s": ("tok/s per request", "每请求 tok/s"),
    "metric_agg": ("aggregate tok/s", "总吞吐 tok/s"),
    "metric_cost": ("{cur} per M tokens", "{cur}/百万 token"),
    "metric_cost_at": ("{cur} per M tokens at C = {c}, decoding", "C = {c} 解码时每百万 token 成本（{cur}）"),
    "help_metric_cost": ("F7 with C sequences decoding back to back (the chapter's figure, no prefill): "
                         "price x {paid} GPUs paid / (aggregate tok/s x 3600) x 1e6. Per month: "
                         "{month}. The deployment's cost at its design load and at its SLO-feasible "
                         "capacity is in the box below.",
                         "F7，C 个序列连续解码（本章的算法，不含预填充）：价格 x 计费 {paid} 张卡 "
                         "/（总 tok/s x 3600）x 1e6。每月：{month}。部署在设计负载与满足 SLO 的最大负载下"
                         "的成本见下方方框。"),
    "headline_spare": (" + {n} spare", " + {n} 张备用"),
    "ex_spare": ("N+1: one spare replica (paid for, not serving)", "N+1：加一个备用副本（计费，不服务）"),
    "out_tokens": ("Output tokens per request", "每个请求的输出 token 数"),
    "help_out_tokens": ("Tokens each request generates: the load view and the deployment's figures "
                        "(TTFT and TPOT under load, cost per M output tokens).",
                        "每个请求生成的 token 数：用于负载视图与部署数字（负载下的首字与每 token "
                        "延迟、每百万输出 token 成本）。"),
    "help_ex_pct": ("The percentile of TTFT and TPOT the deployment's figures are checked at (the "
                    "Planner's).",
                    "部署数字中首字与每 token 延迟取的分位数（与规划页相同）。"),
    "help_ex_spare": ("N+1: one more replica (TP GPUs) paid for in every cost, never serving (the Planner's "
                      "spare).",
                      "N+1：多备一个副本（TP 张卡），计入所有成本，不参与服务（与规划页的备用相同）。"),
    "dep_title": ("The deployment, as the Planner and the quote show it: {label}",
                  "部署（与规划页和报价一致）：{label}"),
    "dep_load_rate": ("at the design load of {rate} req/s (the Planner's peak with headroom)",
                      "设计负载 {rate} req/s（规划页的峰值加余量）"),
    "dep_load_conc": ("at a design load of {c} requests in flight (a closed loop)",
                      "设计负载：{c} 个在途请求（闭环）"),
    "dep_ok": ("meets every check", "满足所有约束"),
    "dep_fails": ("fails on {reasons}", "未通过：{reasons}"),
    "dep_use_c": ("Use {c} concurrent requests as the design load", "改用 {c} 个并发请求作为设计负载"),
    "metric_month": ("per month (24 × 7)", "每月（全天运行）"),
    "metric_cvram": ("C_vram (memory)", "显存最大并发"),
    "help_cvram": ("The most requests at this context that fit in memory (F3).",
                   "此上下文下显存能同时容纳的最多请求数（F3）。"),
    "help_ttft": ("Prefill of the prompt, linear part plus the attention term, no queueing.",
                  "预填充时间：线性部分加注意力项，不含排队。"),
    "help_tpot": ("One decode step: the larger of the bandwidth and compute terms.",
                  "一个解码步：带宽项与计算项中较大者。"),
    "list_sep": ("; ", "；"),
    "colon": (": ", "："),
    "comma": (", ", "，"),
    "dash": (" - ", "——"),
    "c_memory": ("Memory (VRAM)", "显存"),
    "c_bandwidth": ("Bandwidth", "带宽"),
    "c_compute": ("Compute", "算力"),
    "c_slo": ("SLO", "SLO"),
    "q_memory": ("Do weights + KV fit?", "权重 + KV 放得下吗？"),
    "q_bandwidth": ("Is one decode step fast enough?", "一个解码步够快吗？"),
    "q_compute": ("Are prefill and big batches fast enough?", "预填充和大批次够快吗？"),
    "q_slo": ("Are TTFT, TPOT and cost within target?", "首字延迟、每 token 延迟和成本达标吗？"),
    "st_pass": ("pass", "通过"),
    "st_tight": ("tight", "紧张"),
    "st_fail": ("fail", "不通过"),
    "d_subtotal": ("{value:.1f} GB needed of {limit:.1f} GB usable (VRAM × util)",
                   "需要 {value:.1f} GB，可用 {limit:.1f} GB（显存 × 利用率）"),
    "d_bandwidth_term": ("memory term {value:.2f} ms per step vs {limit:g} ms TPOT target",
                         "访存项每步 {value:.2f} ms，每 token 延迟目标 {limit:g} ms"),
    "d_compute_term": ("compute term {value:.2f} ms per step vs {limit:g} ms TPOT target",
                       "计算项每步 {value:.2f} ms，每 token 延迟目标 {limit:g} ms"),
    "d_ttft": ("TTFT {value_s:.2f} s vs {limit_s:.2f} s target",
               "首字延迟 {value_s:.2f} s，目标 {limit_s:.2f} s"),
    "d_tpot": ("TPOT {value:.1f} ms vs {limit:g} ms target",
               "每 token 延迟 {value:.1f} ms，目标 {limit:g} ms"),
    "d_cost": ("{value:.3f} {unit} per M tokens vs {limit:g} target",
               "每百万 token {value:.3f} {unit}，目标 {limit:g}"),
    "b_memory": ("Memory binds: {c} requests need {subtotal:.1f} GB per GPU but only "
                 "{usable:.1f} GB is usable ({short:.1f} GB short); memory holds at most "
                 "{c_vram} at this context.",
                 "瓶颈是显存：{c} 个请求每卡需要 {subtotal:.1f} GB，可用只有 {usable:.1f} GB"
                 "（差 {short:.1f} GB）；此上下文下显存最多容纳 {c_vram} 个并发。"),
    "b_memory_none": ("Memory binds: {c} requests need {subtotal:.1f} GB per GPU but only "
                      "{usable:.1f} GB is usable ({short:.1f} GB short); at this context "
                      "memory holds not even one request.",
                      "瓶颈是显存：{c} 个请求每卡需要 {subtotal:.1f} GB，可用只有 "
                      "{usable:.1f} GB（差 {short:.1f} GB）；此上下文下显存连一个请求都放不下。"),
    "b_memory_weights": ("Memory binds: the weights and overhead alone exceed the usable "
                         "memory by {short:.1f} GB, before any KV cache.",
                         "瓶颈是显存：仅权重和运行时开销就超出可用显存 {short:.1f} GB，"
                         "还没算 KV 缓存。"),
    "b_ttft": ("Compute binds the first token: TTFT {ttft:.2f} s is over the {slo:.2f} s target "
               "(prefill is compute-bound).",
               "瓶颈是算力（首字）：首字延迟 {ttft:.2f} s 超过 {slo:.2f} s 目标（预填充受算力限制）"
               "。"),
    "b_tpot_bandwidth": ("Bandwidth binds: each decode step moves weights and KV in {step:.1f} "
                         "ms, over the {slo:g} ms TPOT target.",
                         "瓶颈是带宽：每个解码步搬运权重和 KV 需 {step:.1f} ms，超过 {slo:g} ms "
                         "的每 token 延迟目标。"),
    "b_tpot_compute": ("Compute binds the decode step: {step:.1f} ms, over the {slo:g} ms TPOT "
                       "target.",
                       "瓶颈是算力（解码）：每步 {step:.1f} ms，超过 {slo:g} ms 的每 token 延迟目标。"),
    "b_cost": ("Cost binds: {cost:.3f} {cur} per M tokens is over the {slo:g} {cur} target.",
               "瓶颈是成本：每百万 token {cost:.3f} {cur}，超过 {slo:g} {cur} 的目标。"),
    "b_ok_memory": ("Everything passes; memory is closest to its limit ({subtotal:.1f} of "
                    "{usable:.1f} GB), and holds up to {c_vram} requests at this context.",
                    "全部通过；最接近上限的是显存（{subtotal:.1f} / {usable:.1f} GB），"
                    "此上下文下最多容纳 {c_vram} 个请求。"),
    "b_ok_bandwidth": ("Everything passes; bandwidth binds the decode step ({step:.1f} ms of "
                       "a {slo:g} ms target).",
                       "全部通过；解码步受带宽限制（{step:.1f} ms，目标 {slo:g} ms）。"),
    "b_ok_compute": ("Everything passes; compute is closest to its limit (TTFT {ttft:.2f} s of "
                     "{slo_ttft:.2f} s).",
                     "全部通过；最接近上限的是算力（首字延迟 {ttft:.2f} s，目标 {slo_ttft:.2f} "
                     "s）。"),
    "pin": ("Pin this what-if to compare", "固定此方案以便比较"),
    "help_pin": ("Keep these inputs beside the page while you change them; the pair is in the "
                 "URL.", "修改输入时把当前方案保留在旁边对比；两个方案都保存在链接中。"),
    "repin": ("Pin this", "固定当前"),
    "help_repin": ("Pin the current what-if instead.", "改为固定当前方案。"),
    "unpin": ("Unpin", "取消固定"),
    "compare_title": ("Compared with the pinned what-if", "与已固定方案对比"),
    "compare_diff": ("The pinned one differs in:", "已固定方案的不同之处："),
    "compare_item": ("{name}: {pinned} (now {now})", "{name}：{pinned}（当前 {now}）"),
    "compare_same": ("The pinned what-if equals this one: change an input to compare.",
                     "已固定方案与当前相同：修改输入即可比较。"),
    "compare_overall": ("overall", "总体"),
    "compare_ch_step_ms": ("TPOT vs concurrency", "每 token 延迟随并发变化"),
    "compare_ch_aggregate_tok_s": ("aggregate tok/s vs concurrency", "总吞吐随并发变化"),
    "compare_ch_cost_per_mtok": ("cost per M tokens vs concurrency", "每百万 token 成本随并发变化"),
    "compare_error": ("The pinned what-if cannot be computed any more: {msg}",
                      "已固定方案已无法计算：{msg}"),
    "relief": ("What would relieve it", "缓解办法"),
    "relief_ranked": ("What would relieve it (each alone, cheapest first; click to apply)",
                      "缓解办法（每项单独即可，按成本从低到高；点击即应用）"),
    "relief_click": ("What would relieve it (each alone; click to apply)",
                     "缓解办法（每项单独即可；点击即应用）"),
    "relief_apply": ("Apply this change to the inputs above", "把这项改动应用到上面的输入"),
    "relief_none": ("No single change in the usual knobs relieves it; try a larger GPU or "
                    "a smaller model.", "常用手段单独都不够；试试更大的 GPU 或更小的模型。"),
    "r_gpus": ("{value} GPUs as replicas", "{value} 张 GPU（多副本）"),
    "r_gpus_tp": ("{value} GPUs at TP={tp}", "{value} 张 GPU，TP={tp}"),
    "r_tp_memory": ("TP={value} on the {n} GPUs (weights and KV split across them)",
                    "在这 {n} 张卡上用 TP={value}（权重和 KV 分到各卡）"),
    "r_weights": ("{value} weights", "{value} 权重"),
    "r_kv_dtype": ("{value} KV cache", "{value} KV 缓存"),
    "r_context": ("a context of {value} tokens", "上下文 {value} tokens"),
    "r_concurrency": ("at most {value} concurrent requests", "并发不超过 {value}"),
    "r_concurrency_cost": ("{value} concurrent requests (fill the memory)",
                           "并发提高到 {value}（用满显存）"),
    "r_prompt": ("prompts up to {value} tokens", "提示不超过 {value} tokens"),
    "r_tp": ("TP={value}: split the prefill across {value} GPUs",
             "TP={value}：预填充分摊到 {value} 张卡"),
    "r_mfu": ("a prefill MFU of {value} (better kernels, chunked prefill tuning)",
              "预填充 MFU 提到 {value}（更好的算子、分块预填充调优）"),
    "r_price": ("a price of at most {value:.2f} {cur} per GPU-hour",
                "每 GPU 小时价格不超过 {value:.2f} {cur}"),
    "r_memory_result": ("{verdict}, {subtotal:.1f} of {usable:.1f} GB per GPU, {cost:.3f} {cur} "
                        "per M tokens",
                        "{verdict}，每卡 {subtotal:.1f} / {usable:.1f} GB，每百万 token "
                        "{cost:.3f} {cur}"),
    "gives": ("gives", "结果"),
    "v_fits": ("fits", "放得下"),
    "v_tight": ("tight", "勉强"),
    "v_does_not_fit": ("does not fit", "放不下"),
    "notice_title": ("Some link parameters were ignored:", "链接中的部分参数已忽略："),
    "err_inputs": ("These inputs cannot be computed: {msg}", "这些输入无法计算：{msg}"),
    "err_catalog": ("The catalog cannot be read: {msg}", "无法读取目录：{msg}"),
    "share": ("The URL holds every input: copy it to share this what-if.",
              "网址包含全部输入：复制即可分享这个假设。"),
    "warn_scenario": ("Note: {msg}", "注意：{msg}"),
    "fix_long_context": ("Use the model's limit: {limit} tokens", "改用模型上限：{limit} tokens"),
    # explorer: charts
    "engine": ("Engine scheduling", "引擎调度"),
    "help_engine": ("How the engine batches requests (data/engines.toml): chapter = whole prompts, "
                    "decoding waits, KV reserved at the context; vLLM = chunked prefill beside "
                    "the decodes, KV by the tokens held; SGLang = prefill batches of its chunk "
                    "size; llama.cpp = fixed slots. It changes the load view below, not the chapter's "
                    "figures above.",
                    "引擎如何组批（data/engines.toml）：chapter = 整段提示词预填充、解码等待、按上下文预留"
                    " KV；vLLM = 分块预填充与解码同批、按实际持有的 token 分配 KV；SGLang = 按其分块大小成"
                    "批预填充；llama.cpp = 固定槽位。它改变下方的负载视图，不改变上方本章的数字。"),
    "sec_load": ("Under load: {engine}", "负载下：{engine}"),
    "step_method": ("Decode step", "解码步"),
    "step_method_chapter": ("chapter (one roofline)", "本章（单一屋顶线）"),
    "step_method_operator": ("by operator (GEMMs, then attention)", "按算子（先 GEMM，再注意力）"),
    "step_method_bound": ("spec-sheet bound (the least a GPU must do)", "规格表上限（GPU 至少要做的）"),
    "help_step_method": ("How the decode step combines its terms. Chapter (F4): the memory traffic "
                         "and the arithmetic of the whole step overlap, max(bytes / bandwidth, "
                         "FLOPs / compute). By operator (F4b): the weight GEMMs and the attention "
                         "run one after another, each on its own roofline; never faster than the "
                         "chapter's over the same bytes and FLOPs, slower where the GEMMs turn "
                         "compute-bound at large batches; it counts the weights as engines run "
                         "them (a separate input embedding table is only looked up; prefill runs "
                         "the output head at the last position only; docs/method.md). A saved calibration"
                         " uses its own.",
                         "解码步各项如何合成。本章（F4）：整步的访存与计算重叠，取 max（字节 / "
                         "带宽，FLOPs / 算力）。按算子（F4b）：权重 GEMM 与注意力先后执行，各按自己的屋顶"
                         "线计时；在相同字节与 FLOPs 下不会比本章更快，大批量时 GEMM 转为算力受限处更慢；"
                         "它按引擎的实际做法计权重（独立的输入词嵌入表只查表；预填充只在最后一个位置计算输"
                         "出头；docs/method.md）。已保存的校准使用其自身的方法。"),
    "pl_help_engine": ("How the engine batches requests (data/engines.toml): its max_num_seqs per "
                       "GPU, chunked prefill and KV admission set each option's slots and the event "
                       "model's TTFT and TPOT under the design load.",
                       "引擎如何组批（data/engines.toml）：其每卡 max_num_seqs、分块预填充与 KV "
                       "分配方式决定每个方案的槽位数，以及事件模型在设计负载下的首字延迟与每 token "
                       "延迟。"),
    "load_caption": ("{c} users in a closed loop (no think time), {p} prompt + {o} output tokens "
                     "each, {slots} slots per replica; discrete-event model of the engine's scheduling "
                     "(queueing in docs/method.md).",
                     "{c} 个用户闭环（无思考时间），每个请求 {p} 个提示词 token + {o} 个输出 token，"
                     "每个副本 {slots} 个槽位；按该引擎调度的离散事件模型（docs/method.md 排队一节）"
                     "。"),
    "load_caption_rate": ("Poisson arrivals at the design load of {rate} req/s (an open loop, "
                          "as `capacity plan --rate`), {p} prompt + {o} output tokens each, "
                          "{slots} slots per replica; discrete-event model of the engine's "
                          "scheduling (queueing in docs/method.md).",
                          "设计负载 {rate} req/s 的泊松到达（开环，同 `capacity plan --rate`），"
                          "每个请求 {p} 个提示词 token + {o} 个输出 token，每个副本 {slots} 个槽位；"
                          "按该引擎调度的离散事件模型（docs/method.md 排队一节）。"),
    "load_too_many": ("More than {n} users per replica: the load view is left out.",
                      "每个副本超过 {n} 个用户：不显示负载视图。"),
    "load_ttft_p50": ("TTFT p50 under load", "负载下首字延迟 p50"),
    "load_ttft_p90": ("TTFT p90 under load", "负载下首字延迟 p90"),
    "load_tpot_p50": ("TPOT p50 under load", "负载下每 token 延迟 p50"),
    "load_tpot_p90": ("TPOT p90 under load", "负载下每 token 延迟 p90"),
    "engine_name_chapter": ("chapter (whole prompts, KV reserved at the context)",
                            "本章（整段预填充，按上下文预留 KV）"),
    "engine_name_vllm": ("vLLM V1 (chunked prefill, paged KV)", "vLLM V1（分块预填充，分页 KV）"),
    "engine_name_sglang": ("SGLang (chunked prefill batches, token pool)",
                           "SGLang（分块预填充批次，token 池）"),
    "engine_name_llamacpp": ("llama.cpp server (fixed slots, n_batch)",
                             "llama.cpp 服务器（固定槽位，提示词分块处理）"),
    "sec_charts": ("Curves", "曲线"),
    "ch_step_time": ("Decode step time vs concurrency", "解码步时间随并发变化"),
    "ch_throughput": ("Speed: per request and aggregate", "速度：每请求与总吞吐"),
    "ch_vram": ("Memory of one GPU at the chosen concurrency", "所选并发下单卡显存"),
    "ch_ttft": ("TTFT vs prompt length", "首字延迟随提示长度变化"),
    "ch_cost": ("Cost per million tokens vs concurrency", "每百万 token 成本随并发变化"),
    "ch_roofline": ("Roofline: where decode and prefill sit", "屋顶线：解码与预填充的位置"),
    # explorer: table
    "sec_table": ("Capacity table", "容量表"),
    "table_help": ("Edit, add or delete rows (concurrency × context); the results follow.",
                   "可编辑、添加或删除行（并发 × 上下文），结果随之更新。"),
    "table_rows_error": ("Table rows need a concurrency >= 1 and a context >= 1 token.",
                         "表格行需要并发 >= 1、上下文 >= 1 token。"),
    "dl_csv": ("Download CSV", "下载 CSV"),
    "dl_md": ("Download Markdown", "下载 Markdown"),
    "col_concurrency": ("concurrency", "并发"),
    "col_context_tokens": ("context (tokens)", "上下文（tokens）"),
    "col_kv_total_gb": ("KV total (GB)", "KV 合计（GB）"),
    "col_subtotal_gb": ("VRAM subtotal (GB)", "显存小计（GB）"),
    "col_usable_gb": ("usable (GB)", "可用（GB）"),
    "col_verdict": ("memory", "显存结论"),
    "col_ttft_s": ("TTFT (s)", "首字延迟（s）"),
    "col_tpot_ms": ("TPOT (ms)", "每 token 延迟（ms）"),
    "col_tok_s_per_request": ("tok/s per request", "每请求 tok/s"),
    "col_aggregate_tok_s": ("aggregate tok/s", "总吞吐 tok/s"),
    "col_cost_per_mtok": ("cost per M tokens", "每百万 token 成本"),
    "col_slo": ("SLO", "SLO"),
    # explorer: the math
    "sec_math": ("Show the math", "显示计算过程"),
    "math_help": ("The chapter's formulas with the current numbers; every figure above comes "
                  "from these.", "原文公式代入当前数值；上面每个数字都由此而来。"),
    "m_kv_token": ("KV per token (F1)", "每 token 的 KV（F1）"),
    "m_kv_request": ("KV per request (F2)", "每请求的 KV（F2）"),
    "m_budget": ("KV budget per GPU (F3)", "每卡 KV 预算（F3）"),
    "m_c_vram": ("Concurrency the memory allows (F3)", "显存允许的并发（F3）"),
    "m_subtotal": ("Memory at the chosen concurrency (F8)", "所选并发下的显存（F8）"),
    "m_bandwidth_term": ("Bandwidth term of the decode step (F4)", "解码步的带宽项（F4）"),
    "m_compute_term": ("Compute term of the decode step (F4)", "解码步的计算项（F4）"),
    "m_step": ("Step time and speed (F4)", "步时间与速度（F4）"),
    "m_operator_step": ("Decode step by operator group (F4b): GEMMs, then attention",
                        "按算子组计算的解码步（F4b）：先权重 GEMM，再注意力"),
    "m_ttft": ("Time to first token (F6)", "首字延迟（F6）"),
    "m_cost": ("Cost per million tokens (F7)", "每百万 token 成本（F7）"),
    "m_crossover": ("Crossover concurrency (F5)", "交叉并发（F5）"),
    # catalog page
    "cat_title": ("Catalog: models and GPUs", "目录：模型与 GPU"),
    "cat_intro": ("Every entry carries its source and date. Weights marked * are published "
                  "sizes; the others are parameters × bits.",
                  "每个条目都注明来源和日期。带 * 的权重是公开的实际大小，"
                  "其余按参数量 × 位宽计算。"),
    "tab_models": ("Models", "模型"),
    "tab_gpus": ("GPUs", "GPU"),
    "tab_add": ("Add your own", "添加自定义"),
    "mc_key": ("key", "键"),
    "mc_name": ("name", "名称"),
    "mc_params_total_b": ("params (B)", "参数量（B）"),
    "mc_params_active_b": ("active (B)", "激活参数（B）"),
    "mc_layers": ("layers by kind", "各类层数"),
    "mc_kv_kib_per_token_fp16": ("KV KiB/token fp16", "KV KiB/token fp16"),
    "mc_kv_kib_per_token_fp8": ("KV KiB/token fp8", "KV KiB/token fp8"),
    "mc_max_context_tokens": ("max context", "最大上下文"),
    "mc_embeddings": ("embeddings", "词嵌入"),
    "emb_tied": ("tied", "共享"),
    "emb_separate": ("separate", "独立"),
    "emb_unknown": ("not stated", "未注明"),
    "mc_weights_gb": ("weights GB by format", "各格式权重 GB"),
    "mc_custom": ("custom", "自定义"),
    "mc_source": ("source", "来源"),
    "mc_as_of": ("as of", "日期"),
    "gc_key": ("key", "键"),
    "gc_name": ("name", "名称"),
    "gc_memory_gb": ("memory (GB)", "显存（GB）"),
    "gc_memory_driver_gib": ("driver reports (GiB)", "驱动报告（GiB）"),
    "gc_memory_type": ("memory type", "显存类型"),
    "gc_bandwidth_gb_s": ("bandwidth (GB/s)", "带宽（GB/s）"),
    "gc_bf16_tflops": ("BF16 dense TFLOP/s", "BF16 稠密 TFLOP/s"),
    "gc_fp8_tflops": ("FP8 dense TFLOP/s", "FP8 稠密 TFLOP/s"),
    "gc_int8_tops": ("INT8 dense TOP/s", "INT8 稠密 TOP/s"),
    "gc_interconnect": ("interconnect", "互联"),
    "gc_price_per_hour": ("price per hour", "每小时价格"),
    "gc_currency": ("currency", "货币"),
    "gc_price_as_of": ("price as of", "价格日期"),
    "gc_custom": ("custom", "自定义"),
    "gc_source": ("source", "来源"),
    "gc_as_of": ("as of", "日期"),
    "add_intro": ("Custom entries are saved under {folder} and appear in the Explorer at "
                  "once. The form covers dense models with full-attention (and optional "
                  "linear-attention) layers; for MoE, sliding-window or MLA models upload a "
                  "TOML file shaped like data/models/*.toml.",
                  "自定义条目保存在 {folder} 下，立即出现在探索器中。表单适用于全注意力"
                  "（可加线性注意力层）的稠密模型；MoE、滑动窗口或 MLA 模型请上传与 "
                  "data/models/*.toml 格式相同的 TOML 文件。"),
    "add_kind": ("Add a", "添加"),
    "kind_model": ("model", "模型"),
    "kind_gpu": ("GPU", "GPU"),
    "kind_upload": ("TOML file", "TOML 文件"),
    "kind_modelfile": ("model file", "模型文件"),
    "mf_intro": ("Upload a Hugging Face config.json or a GGUF file: layers by kind, heads, "
                 "head_dim, sliding windows, MLA and MoE are read from it and the parameter "
                 "count is computed from the shapes. A GGUF's header is enough (its first "
                 "megabytes: `head -c 20M model.gguf > header.gguf`); its weight size comes "
                 "from its tensor table. For a config.json, state the safetensors' total size "
                 "below (or use `capacity catalog add-model FOLDER`, which sums them).",
                 "上传 Hugging Face 的 config.json 或 GGUF 文件：从中读取各类层数、头数、"
                 "head_dim、滑动窗口、MLA 和 MoE，并按形状计算参数量。GGUF 只需文件头"
                 "（前若干 MB：`head -c 20M model.gguf > header.gguf`），权重大小取自其张量表。"
                 "config.json 请在下方填写 safetensors 文件总大小（或用 "
                 "`capacity catalog add-model 文件夹` 自动求和）。"),
    "f_modelfile": ("config.json or GGUF (header) of one model", "一个模型的 config.json 或 GGUF（文件头）"),
    "mf_key": ("key (empty: from the file)", "键（留空：取自文件）"),
    "mf_weights_gb": ("weight files' size (GB, 0 = params × bits; config.json only)",
                      "权重文件大小（GB，0 = 参数量 × 位宽；仅 config.json）"),
    "f_key": ("key (lower-case, e.g. my-model-7b)", "键（小写，例如 my-model-7b）"),
    "f_name": ("display name", "显示名称"),
    "f_params_b": ("parameters (billions)", "参数量（十亿）"),
    "f_num_layers": ("layers in all", "总层数"),
    "f_full_layers": ("full-attention layers", "全注意力层数"),
    "f_linear_layers": ("linear-attention layers (no KV)", "线性注意力层数（无 KV）"),
    "f_state_bytes": ("state bytes per linear layer per request", "每个线性层每请求的状态字节数"),
    "f_kv_heads": ("KV heads", "KV 头数"),
    "f_head_dim": ("head dim", "头维度"),
    "f_q_heads": ("query heads", "查询头数"),
    "f_hidden": ("hidden size", "隐藏维度"),
    "f_vocab": ("vocabulary", "词表大小"),
    "f_tied": ("output head and input embedding", "输出头与输入词嵌入"),
    "f_tied_unknown": ("not known (counted as tied)", "未知（按共享计）"),
    "f_tied_tied": ("tied (one shared table)", "共享（同一张表）"),
    "f_tied_separate": ("separate tables", "各自独立"),
    "f_tied_help": ("config.json's tie_word_embeddings. A separate input embedding is only "
                    "looked up, so the operator step method leaves it out of the decode "
                    "step's bytes and FLOPs (docs/method.md, F4b).",
                    "config.json 的 tie_word_embeddings。独立的输入词嵌入只做查表，"
                    "算子级步长方法不把它计入解码步的字节与 FLOPs（docs/method.md，F4b）。"),
    "f_max_context_tokens": ("max context (tokens)", "最大上下文（tokens）"),
    "f_weights_gb": ("stated weight size (GB, 0 = params × bits)",
                     "实际权重大小（GB，0 = 参数量 × 位宽）"),
    "f_weights_format": ("format of that size", "该大小对应的格式"),
    "f_source": ("source (where the figures come from)", "来源（数字出处）"),
    "f_as_of": ("as of (date)", "日期"),
    "f_memory_gb": ("memory (GB)", "显存（GB）"),
    "f_memory_type": ("memory type", "显存类型"),
    "f_bandwidth_gb_s": ("bandwidth (GB/s)", "带宽（GB/s）"),
    "f_bf16_tflops": ("BF16 dense TFLOP/s", "BF16 稠密 TFLOP/s"),
    "f_fp8_tflops": ("FP8 dense TFLOP/s (0 = none)", "FP8 稠密 TFLOP/s（0 = 不支持）"),
    "f_int8_tops": ("INT8 dense TOP/s (0 = none)", "INT8 稠密 TOP/s（0 = 不支持）"),
    "f_interconnect": ("interconnect", "互联"),
    "f_interconnect_kind": ("interconnect kind", "互联类型"),
    "f_interconnect_gb_s": ("all-reduce bandwidth (GB/s)", "all-reduce 带宽（GB/s）"),
    "f_price_per_hour": ("price per GPU-hour", "每 GPU 小时价格"),
    "f_price_source": ("price source", "价格来源"),
    "f_replace": ("replace an existing custom entry with this key", "覆盖同键的已有自定义条目"),
    "f_upload": ("TOML file of one model or one GPU", "一个模型或一个 GPU 的 TOML 文件"),
    "f_save": ("Validate and save", "校验并保存"),
    "saved": ("Saved {kind} '{key}' to {path}; it is now in the Explorer's lists.",
              "已将{kind} '{key}' 保存到 {path}；探索器的列表中已可选择。"),
    "not_saved": ("Not saved: {msg}", "未保存：{msg}"),
    # issue 14 item 12: words that stayed English in Chinese mode
    "choose_options": ("Choose options", "请选择"),
    "r_measured": ("measured (p50)", "实测（p50）"),
    "r_ratio_col": ("measured / {series}", "实测 / {series}"),
    "cat_missing": ("Not saved: fill in {fields}.", "未保存：请填写{fields}。"),
    "layer_full": ("full", "全注意力"),
    "layer_sliding": ("sliding", "滑动窗口"),
    "layer_linear": ("linear", "线性注意力"),
    "layer_mla": ("mla", "MLA"),
    "layer_window": ("window {w}", "窗口 {w}"),
    "status_running": ("running", "进行中"),
    "status_finished": ("finished", "已完成"),
    "status_interrupted": ("interrupted", "已中断"),
    "note_bad_basis": ("basis '{value}' is not one of: chapter, spec, typical:ENGINE "
                       "({engines}), or a saved calibration's name",
                       "预测依据“{value}”不是以下之一：chapter、spec、typical:ENGINE（{engines}）"
                       "或已保存校准的名称"),
    "note_link_unknown": ("`{name}={value}` is not in the catalog; using {using}",
                          "`{name}={value}`不在目录中；改用 {using}"),
    "note_link_format": ("`weights={value}` is not a format of {model}; using {using}",
                         "`weights={value}`不是 {model} 的权重格式；改用 {using}"),
    "note_link_no_calibration": ("`calibration={value}` is not a saved calibration; using the "
                                 "chapter's assumptions",
                                 "`calibration={value}`不是已保存的校准；改用本章假设"),
    "note_link_tp": ("`tp={value}` is not possible for {model} on {n} GPUs; using TP={tp}, the "
                     "nearest size that is",
                     "{model} 在 {n} 张卡上不能用`tp={value}`；改用最接近的可行值 TP={tp}"),
    "note_link_cannot": ("these settings cannot be used ({why}); using the defaults",
                         "这些设置无法计算（{why}）；改用默认值"),
    "note_link_mix": ("'mix' ignored ({why}); no added workloads",
                      "已忽略“mix”（{why}）；不加其他工作负载"),
    "note_link_ignored": ("`{name}={value}` ignored ({why}); using {using}",
                          "已忽略`{name}={value}`（{why}）；改用 {using}"),
    "note_link_ignored_basis": ("`{name}={value}` ignored ({why}); using the chapter's "
                                "assumptions", "已忽略`{name}={value}`（{why}）；改用本章假设"),
    "note_why_not_number": ("not a number", "不是数字"),
    "note_why_not_finite": ("not a finite number", "不是有限的数"),
    "note_why_not_whole": ("not a whole number", "不是整数"),
    "note_why_outside": ("outside {lo}..{hi}", "超出 {lo}..{hi}"),
    "note_context_limit": ("context {context} tokens exceeds {model}'s limit of {limit} tokens",
                           "上下文 {context} tokens 超出 {model} 的上限 {limit} tokens"),
    "note_no_slot": ("{model} on {gpu} (TP={tp}) holds no request of {context} tokens: use more "
                     "or bigger GPUs, a shorter context or FP8 KV",
                     "{gpu}（TP={tp}）上的 {model} 放不下一个 {context} tokens 的请求：请用更多或更大"
                     "的 GPU、更短的上下文或 FP8 KV"),
    "note_imp_line": ("line {n}", "第 {n} 行"),
    "note_imp_result": ("result {n}", "第 {n} 个结果"),
    "note_imp_utf8": ("{file}: cannot read it as UTF-8 text", "{file}：无法按 UTF-8 文本读取"),
    "note_imp_missing": ("{file}: {where}: `{name}` is missing; it is required",
                         "{file}：{where}：缺少必填项`{name}`"),
    "note_imp_not_number": ("{file}: {where}: `{name}` = `{value}` is not a number",
                            "{file}：{where}：`{name}` = `{value}` 不是数字"),
    "note_imp_not_positive": ("{file}: {where}: `{name}` = `{value}` must be a number > 0",
                              "{file}：{where}：`{name}` = `{value}` 必须是大于 0 的数"),
    "note_imp_bad_json": ("{file}: looks like JSON but does not parse; expected a `vllm bench "
                          "serve` result or AIPerf profile_export_aiperf.json",
                          "{file}：像 JSON 但无法解析；应为 `vllm bench serve` 的结果或 AIPerf 的 "
                          "profile_export_aiperf.json"),
    "note_imp_unknown_json": ("{file}: a JSON file with neither vLLM bench keys nor AIPerf "
                              "metrics; choose its format",
                              "{file}：这个 JSON 文件既没有 vLLM 基准测试的键，也没有 AIPerf 的指标；"
                              "请选择其格式"),
    "note_imp_empty": ("{file}: the file is empty", "{file}：文件是空的"),
    "note_imp_bad_csv": ("{file}: not a readable CSV", "{file}：不是可读的 CSV"),
    "note_imp_no_rows": ("{file}: a header but no data rows", "{file}：只有表头，没有数据行"),
    "note_imp_missing_columns": ("{file}: missing column(s) `{missing}`; the header must include "
                                 "`{required}`; found: `{found}`",
                                 "{file}：缺少列 `{missing}`；表头必须包含 `{required}`；实际为：`{found}`"),
    "note_long_context": ("context {context} tokens exceeds {model}'s limit of {limit} tokens; "
                          "computed anyway",
                          "上下文 {context} tokens 超出 {model} 的上限 {limit} tokens；仍照算"),
    "note_no_points": ("no {kind} points: {names} not fitted",
                       "没有 {kind} 数据点：{names} 未拟合"),
    "note_one_context": ("TPOT at one context length only: bandwidth efficiency and per-step overhead "
                         "trade off against each other; measure a second context to separate them "
                         "(their sum at this context is well determined)",
                         "每 token 延迟只在一个上下文长度下测得：带宽效率与每步开销此消彼长；再测一个上下"
                         "文长度即可分开二者（二者在此上下文下之和已确定）"),
    "note_eff_undetermined": ("compute never binds at the measured points: eff is not "
                              "determined by them (kept near {eff:g}); measure at higher "
                              "concurrency or shorter context to fit it",
                              "实测点上算力从未成为瓶颈：eff 无法由它们确定（保持在 {eff:g} 附近）；"
                              "请在更高并发或更短上下文下测量以拟合它"),
    "note_from_itl": ("decode step from the median inter-token latency at {levels} of {total} "
                      "levels (stalls and prefills between tokens left out)",
                      "解码步取自 {total} 个并发档中 {levels} 个档的 token 间延迟中位数（已排除 token "
                      "之间的停顿与预填充）"),
    "note_over_memory": ("{levels} level(s) held more than twice the requests that fit in "
                         "memory at their context (the engine ran a smaller batch and queued "
                         "the rest): left out of the decode fit",
                         "{levels} 个并发档的请求数超过其上下文下显存容量的两倍（引擎实际批量更小，"
                         "其余在排队）：未用于解码拟合"),
    "note_ttft_under_load": ("some prompt lengths were measured only under load: their TTFT may "
                             "include queueing; measure them at concurrency 1",
                             "部分提示长度只在负载下测过：其首字延迟可能包含排队；请在并发 1 下测量"),
    "note_not_pinned": ("not pinned by these points (they stay near their prior): {names}; "
                        "`capacity calibrate --plan` lists a sweep that pins every knob",
                        "这些数据点无法确定（保持在先验值附近）：{names}；"
                        "`capacity calibrate --plan` 会列出能确定全部参数的测量方案"),
    "note_method_gemm_compute": ("the weight GEMMs are compute-bound here ({gemm:g} ms) while "
                                 "attention reads the KV cache ({attn:g} ms): the kernels run one "
                                 "after the other, so the operator step is their sum ({op:g} ms), "
                                 "not the chapter's max of all bytes and all FLOPs ({ch:g} ms)",
                                 "此处权重 GEMM 受算力限制（{gemm:g} ms），而注意力在读取 KV 缓存"
                                 "（{attn:g} ms）：两类内核先后执行，算子法的步时间是二者之和"
                                 "（{op:g} ms），而非本章公式中全部字节与全部 FLOPs 的最大值"
                                 "（{ch:g} ms）"),
    "note_method_embedding": ("the operator step does not read the input embedding table "
                              "({gb:g} GB of the weights, separate from the output head): "
                              "engines look up one row per sequence ({op:g} ms against "
                              "{ch:g} ms)",
                              "算子法的步时间不读取输入词嵌入表（权重中的 {gb:g} GB，与输出头"
                              "分开）：引擎每个序列只查一行（{op:g} ms 对比 {ch:g} ms）"),
    "note_method_prefill": ("F6b multiplies {body:g} B of the {p:g} B parameters per prompt "
                            "token: the input embedding is a lookup and the output head "
                            "({head:g} B) turns only the last position into logits ({share:g}% "
                            "fewer FLOPs than the chapter's 2 x P x L)",
                            "F6b 每个提示词 token 只乘 {p:g} B 参数中的 {body:g} B：输入词嵌入是查表，"
                            "输出头（{head:g} B）只为最后一个位置计算 logits（比本章的 2 x P x L "
                            "少 {share:g}% FLOPs）"),
    "note_method_knobs": ("the operator step adds what the chapter's leaves out: the small-batch "
                          "attention floor, per-sequence overhead and KV-read efficiency "
                          "({op:g} ms against {ch:g} ms)",
                          "算子法加入了本章公式未含的部分：小批量注意力下限、每序列开销与 KV 读取效率"
                          "（{op:g} ms 对比 {ch:g} ms）"),
    "note_overhead_from_max": ("overhead from a measured maximum of {requests} requests at "
                               "{tokens} tokens",
                               "运行时开销由实测最大 {requests} 个请求（每个 {tokens} tokens）推得"),
    # the vLLM startup log's terms (capacity.fit.vllm_log.reconcile): names and causes
    "note_vllm_consistent": ("consistent (within 5%)", "一致（相差 5% 以内）"),
    "note_vllm_gpu_memory": ("GPU memory", "GPU 显存"),
    "note_vllm_weights": ("weights per GPU", "每卡权重"),
    "note_vllm_overhead": ("runtime overhead (activation peak, non-torch)",
                           "运行时开销（激活峰值、非 torch 分配）"),
    "note_vllm_overhead_implied": ("runtime overhead (implied: VRAM x util - weights - KV)",
                                   "运行时开销（推算：显存 x 利用率 - 权重 - KV）"),
    "note_vllm_kv_memory": ("KV cache memory", "KV 缓存显存"),
    "note_vllm_kv_tokens": ("KV cache size", "KV 缓存容量"),
    "note_vllm_max_conc": ("maximum concurrency at {tokens} tokens",
                           "每请求 {tokens} tokens 时的最大并发"),
    "note_vllm_util": ("gpu_memory_utilization", "显存利用率"),
    "note_vllm_cause_gpu_memory": ("the driver's figure differs from the catalog's (marketed "
                                   "'GB' are often GiB; some is reserved): set --vram to the "
                                   "logged figure",
                                   "驱动报告的显存与目录不同（标称的 GB 常是 GiB，且有预留）："
                                   "用 `--vram` 设为日志中的数值"),
    "note_vllm_cause_weights": ("the served checkpoint differs from the catalog variant "
                                "(another weight format, quantization scales, tied or untied "
                                "embeddings, a vision tower): set --weights-gb to the logged "
                                "figure",
                                "实际加载的权重与目录中的版本不同（权重格式、量化缩放、嵌入是否共享、"
                                "视觉塔）：用 `--weights-gb` 设为日志中的数值"),
    "note_vllm_cause_overhead": ("runtime memory differs by engine version, "
                                 "max_num_batched_tokens and CUDA graphs: set --overhead-gb to "
                                 "the logged figure",
                                 "运行时显存随引擎版本、`max_num_batched_tokens` 与 CUDA 图而变："
                                 "用 `--overhead-gb` 设为日志中的数值"),
    "note_vllm_cause_overhead_implied": ("runtime memory (activations at max_num_batched_tokens, "
                                         "non-torch allocations) differs by engine version: set "
                                         "--overhead-gb to the implied figure",
                                         "运行时显存（`max_num_batched_tokens` 下的激活、非 torch "
                                         "分配）随引擎版本而变：用 `--overhead-gb` 设为推算的数值"),
    "note_vllm_cause_kv_memory": ("follows from the terms above: VRAM x util - weights - "
                                  "overhead; check the one that disagrees",
                                  "由上面各项得出：显存 x 利用率 - 权重 - 开销；请检查不一致的那一项"),
    "note_vllm_cause_kv_tokens": ("KV bytes per token differ from the model: check --kv-dtype "
                                  "(fp8 halves it)",
                                  "每 token 的 KV 字节数与模型不同：请检查 `--kv-dtype`（fp8 减半）"),
    "note_vllm_cause_kv_agree": ("KV bytes per token agree ({kib:.1f} KiB); the difference "
                                 "follows from the KV cache memory above",
                                 "每 token 的 KV 字节数一致（{kib:.1f} KiB）；差异来自上面的 KV 缓存显存"),
    "note_vllm_cause_kv_implied": ("KV bytes per token differ from the model: check --kv-dtype "
                                   "(fp8 halves it); the log implies {implied:.1f} KiB per "
                                   "token, the model {model:.1f} KiB (hybrid and sliding-window "
                                   "layers are sized per layer group by vLLM)",
                                   "每 token 的 KV 字节数与模型不同：请检查 `--kv-dtype`（fp8 减半）；"
                                   "日志推得每 token {implied:.1f} KiB，模型为 {model:.1f} KiB"
                                   "（vLLM 按层组分别计算混合与滑动窗口层）"),
    "note_vllm_cause_max_conc": ("follows from the KV cache size and KV per request; vLLM counts "
                                 "requests of the full max_model_len, real ones are often shorter",
                                 "由 KV 缓存容量与每请求 KV 得出；vLLM 按完整的 `max_model_len` "
                                 "计请求，实际请求往往更短"),
    "note_vllm_cause_util": ("the server ran with another util; the terms above use the logged "
                             "one", "服务端用了另一个利用率；上面各项按日志中的数值计算"),
    "unit_requests": ("requests", "个请求"),
    "unit_fraction": ("fraction", "比例"),
    "r_ref_label": ("{model} ({fmt}) on {gpu}, {engine}, {p} in / {o} out",
                    "{model}（{fmt}），{gpu}，{engine}，输入 {p} / 输出 {o}"),
    "r_unc_basis_typical": ("typical efficiency ranges (no calibration)",
                            "真实引擎的典型效率范围（无校准）"),
    "r_unc_basis_cal": ("calibration '{name}': +/- {step:.0%} step, +/- {ttft:.0%} TTFT "
                        "(held-out error)",
                        "校准“{name}”：解码步 ±{step:.0%}，首字延迟 ±{ttft:.0%}（留出误差）"),
    "r_unc_basis_cal_far": ("calibration '{name}': +/- {step:.0%} step, +/- {ttft:.0%} TTFT "
                            "(held-out error, widened by its distance from here)",
                            "校准“{name}”：解码步 ±{step:.0%}，首字延迟 ±{ttft:.0%}"
                            "（留出误差，按与此处的距离放宽）"),
    "open_in_explorer": ("Open it in the Explorer", "在探索器中打开"),
    # measure page
    "m_title": ("Measure an endpoint", "测量推理服务"),
    "m_intro": ("Runs `capacity bench` in the background against an OpenAI-compatible "
                "endpoint; the finished run appears in Results beside the prediction.",
                "在后台对 OpenAI 兼容接口运行 `capacity bench`；完成的测量会出现在“结果”页，"
                "与预测并列。"),
    "m_disabled": ("Measuring is switched off on this deployment ({reason}). Import existing "
                   "measurements on the Results page instead.",
                   "此部署已关闭测量功能（{reason}）。可在“结果”页导入已有测量数据。"),
    "m_allow": ("This deployment only measures these hosts: {hosts} (and the simulator on "
                "loopback).", "此部署只允许测量这些主机：{hosts}（以及本机上的模拟器）。"),
    "m_loopback_only": ("This deployment measures only endpoints on this machine (127.0.0.1, "
                        "localhost) and the simulator: CAPACITY_MEASURE_ALLOW_HOSTS or "
                        "CAPACITY_MEASURE=open allow more (docs/configuration.md).",
                        "此部署只测量本机上的接口（127.0.0.1、localhost）和模拟器："
                        "设置 CAPACITY_MEASURE_ALLOW_HOSTS 或 CAPACITY_MEASURE=open 可放开"
                        "（见 docs/configuration.md）。"),
    "m_sim_title": ("No GPU at hand? Start a simulated endpoint",
                    "手头没有 GPU？启动模拟接口"),
    "m_sim_help": ("One click starts `capacity sim-server` for the chosen model and GPU on "
                   "127.0.0.1 (timings from the formulas) and fills the form with its URL.",
                   "一键在 127.0.0.1 上为所选模型和 GPU 启动 `capacity sim-server`（时间由公式"
                   "计算），并把地址填入表单。"),
    "m_sim_model": ("Simulated model", "模拟的模型"),
    "m_sim_gpu": ("Simulated GPU", "模拟的 GPU"),
    "m_sim_speedup": ("Speed-up", "加速倍数"),
    "m_sim_speedup_help": ("Divides every delay; 1 = real time (measurements then match the "
                           "prediction's time scale).",
                           "所有延迟除以该倍数；1 = 实时（测量结果与预测的时间尺度一致）。"),
    "m_sim_start": ("Start the simulated endpoint", "启动模拟接口"),
    "m_sim_stop": ("Stop the simulated endpoint", "停止模拟接口"),
    "m_sim_running": ("Simulated {model} on {gpu} at {url} (speed-up {speedup:g}).",
                      "模拟接口：{gpu} 上的 {model}，地址 {url}（加速 {speedup:g} 倍）。"),
    "m_endpoint": ("Endpoint", "接口"),
    "m_base_url": ("Base URL", "基础地址"),
    "m_base_url_help": ("The OpenAI base URL, ending in /v1.", "OpenAI 基础地址，以 /v1 结尾。"),
    "m_api_key": ("API key (never stored)", "API 密钥（不会保存）"),
    "m_api_key_help": ("Sent to the endpoint only; passed to the benchmark process through "
                       "its environment, never written to a file or a command line.",
                       "只发送给接口；通过环境变量传给测量进程，从不写入文件或命令行。"),
    "m_connect": ("Connect", "连接"),
    "m_reachable": ("reachable", "可访问"),
    "m_auth": ("key accepted", "密钥有效"),
    "m_models": ("models", "模型数"),
    "m_streams": ("streams", "支持流式"),
    "m_yes": ("yes", "是"),
    "m_no": ("no", "否"),
    "m_model": ("Model name on the endpoint", "接口上的模型名"),
    "m_model_help": ("Empty: the first model /v1/models lists. Connect to pick from the list.",
                     "留空：使用 /v1/models 列出的第一个模型。连接后可从列表中选择。"),
    "m_sweep": ("Sweep", "测量设置"),
    "m_levels": ("Concurrency levels", "并发级别"),
    "m_levels_help": ("A comma list, e.g. 1,4,16.", "逗号分隔，例如 1,4,16。"),
    "m_requests": ("Requests per level", "每级请求数"),
    "m_passes": ("Passes per level", "每档测量遍数"),
    "m_passes_help": ("Go through the levels this many times, forward then backward, each "
                      "time with a share of the requests: a machine whose speed drifts "
                      "during the run then shifts no level against another.",
                      "按此遍数轮流测量各并发档（先正序，再倒序），每遍测一部分请求："
                      "运行期间机器速度漂移时，不会让某一档相对其他档偏快或偏慢。"),
    "m_requests_help": ("Aim for 3-5x the concurrency.", "建议为并发数的 3-5 倍。"),
    "m_prompt_chars": ("Prompt characters", "提示字符数"),
    "m_max_tokens": ("Max output tokens", "最大输出 tokens"),
    "m_label": ("Label", "标签"),
    "m_label_help": ("Names the folder under data/bench: letters, digits, '.', '_', '-'.",
                     "作为 data/bench 下的文件夹名：字母、数字、'.'、'_'、'-'。"),
    "m_slo_ttft": ("TTFT target (ms, 0 = none)", "首字延迟目标（ms，0 = 不设）"),
    "m_slo_tpot": ("TPOT target (ms, 0 = none)", "每 token 时间目标（ms，0 = 不设）"),
    "m_slo_help": ("For goodput: requests that meet every target, per second.",
                   "用于有效吞吐：每秒满足全部目标的请求数。"),
    "m_hardware": ("Hardware and prediction", "硬件与预测"),
    "m_gpu": ("GPU behind the endpoint", "接口背后的 GPU"),
    "m_gpus": ("GPUs", "GPU 数量"),
    "m_price": ("Price per GPU-hour", "每 GPU 小时价格"),
    "m_currency": ("Currency", "货币"),
    "m_predict": ("Catalog model it serves", "对应的目录模型"),
    "m_workload": ("Workload (lengths drawn per request)", "工作负载（逐请求抽取长度）"),
    "m_workload_none": ("none: every prompt as above", "无：每个提示如上"),
    "workload_preset_chat": ("Chat (conversation service)", "聊天（对话服务）"),
    "workload_preset_code": ("Code completion", "代码补全"),
    "workload_preset_rag": ("RAG with long documents", "长文档检索增强生成"),
    "workload_preset_agentic": ("Agentic multi-turn", "智能体多轮对话"),
    "workload_preset_summarize": ("Batch summarisation", "批量摘要"),
    "m_workload_help": ("A preset of data/workloads.toml: each request draws its prompt and output "
                        "tokens and the shared system prompt from it (`capacity bench --workload`); "
                        "with a request rate, arrivals follow its bursts. The prompt and output "
                        "fields above are then not used.",
                        "data/workloads.toml 中的预设：每个请求从中抽取提示与输出 token 数以及共享系统提示"
                        "（`capacity bench --workload`）；设置请求速率时，到达过程按其突发特征。"
                        "此时上方的提示与输出字段不再使用。"),
    "m_predict_help": ("Stored with the run, so Results can draw the prediction for it.",
                       "随测量保存，供“结果”页绘制对应的预测。"),
    "m_start": ("Start measuring", "开始测量"),
    "m_stop": ("Stop (keep what was measured)", "停止（保留已测数据）"),
    "m_no_job": ("No measurement running in this session.", "本会话没有正在进行的测量。"),
    "m_progress": ("Run '{label}': {status}", "测量“{label}”：{status}"),
    "m_status_running": ("running", "进行中"),
    "m_status_finished": ("finished", "已完成"),
    "m_status_stopped": ("stopped, measured requests kept", "已停止，已测请求已保留"),
    "m_status_failed": ("failed", "失败"),
    "m_level": ("concurrency {c}: {done}/{total} done, {errors} errors, TTFT p50 {ttft} ms, TPOT "
                "p50 {tpot} ms",
                "并发 {c}：完成 {done}/{total}，错误 {errors}，首字延迟 p50 {ttft} ms，每 token "
                "延迟 p50 {tpot} ms"),
    "m_failed": ("The benchmark stopped before measuring anything:\n\n```\n{log}\n```",
                 "测量尚未开始就停止了：\n\n```\n{log}\n```"),
    "m_done": ("Stored as run {run} (label '{label}').", "已保存为测量 {run}（标签“{label}”）。"),
    "m_open_results": ("Open it in Results", "在“结果”页查看"),
    "m_error": ("{msg}", "{msg}"),
    # results page
    "r_title": ("Results: measured vs predicted", "结果：实测与预测"),
    "r_intro": ("Measured points on the predicted curves (spec-sheet and calibrated), the "
                "ratio per point, and a calibration fitted from them in one step.",
                "实测点叠加在预测曲线上（规格值与校准值），逐点给出比值，并可一步拟合校准。"),
    "r_source": ("Measured points from", "实测数据来源"),
    "r_source_run": ("a stored run", "已保存的测量"),
    "r_source_import": ("an imported file", "导入的文件"),
    "r_runs": ("Stored runs", "已保存的测量"),
    "r_store_warning": ("Note: {msg}", "注意：{msg}"),
    "r_no_runs": ("No stored runs under {root} yet: measure on the Measure page, or import a "
                  "file.", "{root} 下还没有测量：请在“测量”页测量，或导入文件。"),
    "r_f_label": ("Label", "标签"),
    "r_f_endpoint": ("Endpoint", "接口"),
    "r_f_model": ("Model", "模型"),
    "r_f_date": ("Date range", "日期范围"),
    "r_c_label": ("label", "标签"),
    "r_c_started_at": ("started", "开始时间"),
    "r_c_status": ("status", "状态"),
    "r_c_model": ("model", "模型"),
    "r_c_gpu": ("GPU", "GPU"),
    "r_c_levels": ("levels", "并发级别"),
    "r_c_requests_ok": ("ok", "成功"),
    "r_c_requests_failed": ("failed", "失败"),
    "r_c_base_url": ("endpoint", "接口"),
    "r_c_run_id": ("run id", "测量 ID"),
    "r_pick": ("Runs to show (the first is overlaid and calibrated)",
               "要显示的测量（第一个用于叠加和校准）"),
    "r_pick_help": ("Pick several to compare them side by side.", "选多个可并排比较。"),
    "r_no_levels": ("This run has no finished level yet (a summary row is written when a "
                    "level ends).", "该测量还没有完成的级别（每级结束时写入汇总行）。"),
    "r_fit_batch1": ("llama.cpp run: the fit also learns the step of one sequence on its own "
                     "(its CPU backend runs one sequence through other kernels than two or more).",
                     "llama.cpp 测量：拟合还单独学习单序列的步长（其 CPU 后端对单序列与多序列使用"
                     "不同的内核）。"),
    "r_run_warnings": ("The bench warned about this run ({n}); its numbers may not be what "
                       "they seem:", "压测对该测量给出了警告（{n} 条），其数字可能并非表面所示："),
    "r_import": ("Import measurements", "导入测量数据"),
    "r_import_help": ("A CSV with concurrency, context_tokens, tpot_ms (optional prompt_tokens, "
                      "output_tokens, ttft_ms, output_tok_s), a `vllm bench serve` result JSON, "
                      "or AIPerf's profile_export_aiperf.json / .csv.",
                      "CSV（列 concurrency、context_tokens、tpot_ms，可选 prompt_tokens、"
                      "output_tokens、ttft_ms、output_tok_s）、`vllm bench serve` 结果 JSON，"
                      "或 AIPerf 的 profile_export_aiperf.json / .csv。"),
    "r_upload": ("File", "文件"),
    "r_format": ("Format", "格式"),
    "r_aiperf_c": ("Concurrency (AIPerf CSV only)", "并发（仅 AIPerf CSV）"),
    "r_aiperf_c_help": ("AIPerf's CSV export does not record the concurrency.",
                        "AIPerf 的 CSV 导出不记录并发数。"),
    "r_imported": ("Read {n} points from {name}.", "已从 {name} 读取 {n} 个点。"),
    "r_predict": ("Prediction", "预测"),
    "r_model": ("Catalog model", "目录模型"),
    "r_gpu": ("GPU", "GPU"),
    "r_gpu_count": ("GPUs", "GPU 数量"),
    "r_calibration": ("Calibration", "校准"),
    "r_cal_none": ("spec-sheet only", "仅规格值"),
    "r_cal_fitted": ("{name} (fitted now, not saved)", "{name}（刚拟合，未保存）"),
    "r_reference": ("Published reference curves", "公开发布的参考曲线"),
    "r_reference_help": ("Measurements shipped in data/reference/published.csv, each with its "
                         "source.", "data/reference/published.csv 中的测量数据，均注明出处。"),
    "r_published": ("published", "公开数据"),
    "r_nothing": ("Pick a stored run, import a file, or select a published curve.",
                  "请选择已保存的测量、导入文件，或选择公开参考曲线。"),
    "r_overlay": ("Measured on predicted", "实测叠加预测"),
    "r_overlay_help": ("Predicted for {model} on {n} × {gpu} at {prompt:.0f} prompt and "
                       "{output:.0f} output tokens; calibration: {cal}. Points: p50; bars: "
                       "p90 to p99.",
                       "预测：{n} × {gpu} 上的 {model}，提示 {prompt:.0f}、输出 {output:.0f} "
                       "tokens；校准：{cal}。点为 p50，竖条为 p90 到 p99。"),
    "r_note": ("Note: {msg}", "注意：{msg}"),
    "r_sat_none": ("No saturation seen in the measured levels; predicted C_vram is {c_vram}.",
                   "测量范围内未见饱和；预测的显存最大并发为 {c_vram}。"),
    "r_sat_errors": ("First failures at concurrency {c:g} (an OOM or rejection), against a "
                     "predicted C_vram of {c_vram} (ratio {ratio:.2f}).",
                     "并发 {c:g} 时首次出现失败（显存不足或被拒绝），预测的显存最大并发为 "
                     "{c_vram}（比值 {ratio:.2f}）。"),
    "r_sat_plateau": ("Aggregate throughput stops scaling after concurrency {c:g}, against a "
                      "predicted C_vram of {c_vram} (ratio {ratio:.2f}).",
                      "并发 {c:g} 之后总吞吐不再随并发增长，预测的显存最大并发为 {c_vram}"
                      "（比值 {ratio:.2f}）。"),
    "r_fm_title": ("Highest load within the SLO: measured vs predicted", "SLO 内最高负载：实测与预测"),
    "r_fm_help": ("This run searched the highest load at which p{pct} TTFT <= {ttft} ms and TPOT "
                  "<= {tpot} ms (`capacity bench --find-max`, {n} probes, {stopped}). The prediction "
                  "is the event model's highest Poisson rate for the same targets with the model "
                  "and GPU chosen above.",
                  "本次运行搜索了 p{pct} 首字延迟 <= {ttft} ms 且每 token 延迟 <= {tpot} ms 时的最高负载（"
                  "`capacity bench --find-max`，{n} 次探测，{stopped}）。预测值是事件模型在上方所选模型与"
                  " GPU 下、相同目标时的最高泊松到达率。"),
    "r_fm_measured": ("measured maximum", "实测最大值"),
    "r_fm_converged": ("converged", "已收敛"),
    "r_fm_predicted": ("predicted maximum", "预测最大值"),
    "r_fm_unit_rate": ("req/s", "请求/秒"),
    "r_fm_unit_concurrency": ("requests in flight", "并发请求"),
    "r_fm_bracket": ("bracket {lo} - {hi}", "区间 {lo} - {hi}"),
    "r_fm_ratio": ("measured / predicted {ratio}", "实测 / 预测 {ratio}"),
    "r_fm_no_prediction": ("The prediction is a request rate; this run searched concurrency.",
                           "预测值是请求速率；本次运行搜索的是并发数。"),
    "r_fm_speedup": ("Speedup of the simulated endpoint", "模拟端点的加速倍数"),
    "r_fm_speedup_help": ("`capacity sim-server --speedup` divides every time: 1 for a real server.",
                          "`capacity sim-server --speedup` 会把所有时间除以该倍数；真实服务器填 "
                          "1。"),
    "r_fm_load": ("load (req/s or requests in flight)", "负载（请求/秒或并发数）"),
    "r_fm_ttft": ("TTFT at the percentile (ms)", "该百分位的首字延迟（ms）"),
    "r_fm_verdict": ("probe", "探测"),
    "r_fm_passed": ("meets the SLO", "满足 SLO"),
    "r_fm_failed": ("misses the SLO", "未满足 SLO"),
    "r_fm_target": ("TTFT target", "首字延迟目标"),
    "r_ratio": ("Measured / predicted per point (1 = agreement)",
                "逐点实测 / 预测（1 = 一致）"),
    "r_median_err": ("Median |measured / predicted - 1| per metric:",
                     "各指标的中位 |实测 / 预测 - 1|："),
    "r_ratio_table": ("Ratios per point", "逐点比值"),
    "r_compare": ("Runs side by side", "测量并排比较"),
    "r_col_metric": ("metric", "指标"),
    "r_accuracy": ("Accuracy on your runs", "在您的测量上的准确度"),
    "r_accuracy_help": ("Each measured level beside the spec-sheet prediction (every efficiency "
                        "at peak: an upper bound on speed) and, with a calibration chosen above, "
                        "the calibrated one; the same table `capacity validate` prints for the "
                        "published measurements (docs/accuracy.md).",
                        "每个实测档位与规格值预测（所有效率取峰值：速度的上界）并列；若上方选择了"
                        "校准，再列出校准后的预测。与 `capacity validate` 对公开测量输出的表相同"
                        "（docs/accuracy.md）。"),
    "r_acc_summary": ("{ok} of {n} rows: the spec sheet is not slower than measured ({rate}). "
                      "Median |error|: spec-sheet {spec}; calibrated: {cal}.",
                      "{n} 行中 {ok} 行规格值预测不慢于实测（{rate}）。中位绝对误差：规格值 "
                      "{spec}；校准后：{cal}。"),
    "r_acc_c_concurrency": ("concurrency", "并发"),
    "r_acc_c_metric": ("metric", "指标"),
    "r_acc_c_stat": ("statistic", "统计量"),
    "r_acc_c_measured": ("measured", "实测"),
    "r_acc_c_spec": ("spec-sheet", "规格值"),
    "r_acc_c_optimism": ("optimism (x)", "乐观倍数（x）"),
    "r_acc_c_calibrated": ("calibrated", "校准后"),
    "r_acc_c_error": ("calibrated error", "校准误差"),
    "r_acc_c_saturated": ("saturated", "已饱和"),
    "r_acc_m_step": ("decode step (ms)", "解码步（ms）"),
    "r_acc_m_ttft": ("TTFT (ms)", "首字延迟（ms）"),
    "r_acc_m_throughput": ("throughput (tok/s)", "吞吐（tok/s）"),
    "r_acc_m_e2e": ("end-to-end (ms)", "端到端（ms）"),
    "r_acc_stat_mean": ("mean", "均值"),
    "r_acc_stat_median": ("median", "中位数"),
    "r_acc_no_cal": ("no calibration chosen", "未选择校准"),
    "r_acc_yes": ("yes", "是"),
    "r_acc_no": ("no", "否"),
    "r_calibrate": ("Calibrate in one step", "一步校准"),
    "r_calibrate_help": ("Fits bandwidth efficiency, per-step overhead, decode efficiency, prefill "
                         "MFU and overhead (F11 (docs/method.md)) to these points; the error on "
                         "held-out points is always shown.",
                         "用这些点拟合带宽效率、每步开销、解码效率、预填充 MFU 与开销（F11（docs/method.m"
                         "d））；始终显示留出点上的误差。"),
    "r_cal_name": ("Name", "名称"),
    "r_fit": ("Fit", "拟合"),
    "r_save": ("Save", "保存"),
    "r_saved": ("Saved to {path}; pick it under Calibration to reuse it.",
                "已保存到 {path}；可在“校准”中选择复用。"),
    "r_knobs": ("Fitted knobs of '{name}'", "“{name}”的拟合参数"),
    "r_col_knob": ("knob", "参数"),
    "r_col_spec": ("chapter's", "本章假设"),
    "r_col_fitted": ("fitted", "拟合值"),
    "r_col_std": ("std error", "标准误差"),
    "r_col_held_out": ("held out", "留出"),
    "r_holdout": ("Median |error|; held-out method: {method}.",
                  "中位绝对误差；留出方法：{method}。"),
    "r_residuals": ("Residuals per point", "逐点残差"),
    "r_uncertainty": ("Uncertainty and what moves the answer", "不确定性与关键输入"),
    "r_unc_c": ("At concurrency", "并发"),
    "r_unc_step": ("decode step (TPOT)", "解码步（每 token 延迟）"),
    "r_unc_ttft": ("TTFT", "首字延迟"),
    "r_unc_cvram": ("C_vram", "显存最大并发"),
    "r_unc_range": ("band {lo:.2f} to {hi:.2f} ms", "区间 {lo:.2f} 至 {hi:.2f} ms"),
    "r_unc_range_s": ("band {lo:.3f} to {hi:.3f} s", "区间 {lo:.3f} 至 {hi:.3f} s"),
    "r_unc_range_c": ("band {lo} to {hi}", "区间 {lo} 至 {hi}"),
    "r_unc_basis": ("Band from {basis}.", "区间依据：{basis}。"),
    "r_sens": ("Which input moves the decode step most: {top}",
               "对解码步影响最大的输入：{top}"),
    "r_col_input": ("input", "输入"),
    "r_col_low": ("low", "低值"),
    "r_col_high": ("high", "高值"),
    "r_col_out_low": ("step ms at low", "低值时步时间 ms"),
    "r_col_out_high": ("step ms at high", "高值时步时间 ms"),
    "r_col_swing": ("swing", "变化幅度"),
    "r_vllm": ("vLLM startup log", "vLLM 启动日志"),
    "r_vllm_paste": ("Paste the log", "粘贴日志"),
    "r_vllm_help": ("Reads weights, activation peak, KV cache size, blocks and 'Maximum "
                    "concurrency', and reconciles each with the prediction for the same "
                    "settings.", "读取权重、激活峰值、KV 缓存大小、块数和“Maximum concurrency”，"
                    "并与相同设置下的预测逐项核对。"),
    "r_vllm_settings": ("Compared at util {util:g} and {ctx} tokens per request; found: "
                        "{found}.", "按利用率 {util:g}、每请求 {ctx} tokens 比较；读到：{found}。"),
    "r_col_term": ("term", "项"),
    "r_col_unit": ("unit", "单位"),
    "r_col_logged": ("logged", "日志值"),
    "r_col_predicted": ("predicted", "预测值"),
    "r_col_ratio": ("predicted / logged", "预测 / 日志"),
    "r_col_cause": ("likely cause", "可能原因"),
    "r_error": ("{msg}", "无法读取：{msg}"),
    # planner page (pages/planner.py)
    "pl_title": ("Planner: which card, how many, what it costs", "规划：选什么卡、几张、多少钱"),
    "pl_intro": ("Daily users and SLOs in; ranked GPU options out, each with the constraint that "
                 "binds. Peak concurrency is not daily users: the peak arrival rate times the request "
                 "duration is (Little's law).",
                 "输入日活和 SLO，输出排好序的 GPU 方案及其最紧约束。峰值并发不是日活：峰值到达率乘以请求"
                 "时长才是（利特尔法则）。"),
    "pl_model": ("Model and weights", "模型与权重格式"),
    "pl_mode": ("Load given as", "负载输入方式"),
    "pl_mode_dau": ("daily users", "日活"),
    "pl_mode_conc": ("peak concurrency", "峰值并发"),
    "pl_dau": ("Daily active users", "日活用户"),
    "pl_rpu": ("Requests per user per day", "每用户每日请求"),
    "pl_share": ("Share of daily requests in the peak", "峰值时段请求占比"),
    "pl_hours": ("Peak window, hours", "峰值时长（小时）"),
    "pl_conc": ("Peak concurrency (requests in flight)", "峰值并发（在途请求）"),
    "pl_ctx": ("Context, tokens", "上下文（token）"),
    "pl_out": ("Output tokens per request", "每请求输出 token"),
    "pl_ttft": ("TTFT SLO, ms", "首字 SLO(ms)"),
    "pl_tpot": ("TPOT SLO, ms", "每 token SLO(ms)"),
    "pl_pct": ("SLO percentile", "SLO 分位"),
    "pl_headroom": ("Headroom on the peak", "峰值余量"),
    "pl_space": ("Search space and engine", "搜索范围与引擎"),
    "pl_gpus": ("GPUs", "GPU"),
    "pl_maxg": ("Most GPUs per option", "每方案最多 GPU 数"),
    "pl_kv": ("KV precisions", "KV 精度"),
    "pl_tp": ("Allow tensor parallel", "允许张量并行"),
    "pl_currency": ("Currency", "币种"),
    "pl_util": ("gpu_memory_utilization", "显存利用率（`gpu_memory_utilization`）"),
    "pl_mfu": ("Prefill MFU", "预填充 MFU"),
    "pl_best": ("Recommendation", "推荐"),
    "pl_fx": ("Exchange rate, CNY per USD", "汇率（1 USD 兑 CNY）"),
    "pl_prices": ("Prices per GPU-hour ({cur})", "每卡每小时价格（{cur}）"),
    "pl_prices_help": ("Edit a price to your provider's offer; it replaces the catalog's in the "
                       "ranking, the quote and the link.",
                       "把价格改成您的供应商报价；它会替代目录价格，用于排序、报价和链接。"),
    "pl_col_gpu": ("GPU", "GPU"),
    "pl_col_price": ("price per GPU-hour ({cur})", "每卡每小时价格（{cur}）"),
    "pl_col_catalog": ("list price ({cur})", "标价（{cur}）"),
    "pl_col_source": ("price source", "价格来源"),
    "pl_offer": ("Offer", "报价类型"),
    "pl_offer_catalog": ("catalog prices", "目录价格"),
    "help_pl_offer": ("Price each GPU with a published offer of this kind (data/offers.toml: provider, "
                      "date and source per row; the cheapest when several providers offer it). "
                      "A GPU without one keeps its catalog price, and the page and the quote say "
                      "so.",
                      "用该类型的公开报价给每种 GPU 定价（data/offers.toml：每行有供应商、日期和来源；"
                      "多家供应商时取最便宜的）。没有该报价的 GPU 保留目录价格，页面和报价单会注明。"),
    "pl_no_offer": ("no {kind} offer: catalog price ({src})", "无{kind}报价：按目录价格（{src}）"),
    "pl_offer_missing": ("No {kind} offer for {gpus}: priced at the catalog's price.",
                         "{gpus} 没有{kind}报价：按目录价格计算。"),
    "pl_ax_month": ("{cur} / month", "{cur} / 月"),
    "pl_ax_goodput": ("SLO-feasible goodput, req/s", "满足 SLO 的吞吐（req/s）"),
    "pl_ax_rate": ("arrival rate, req/s", "到达率（req/s）"),
    "pl_ax_ttft": ("TTFT, ms", "首字延迟（ms）"),
    "pl_ax_pct": ("percentile", "分位"),
    "pl_cost_target": ("Cost target per M output tokens (0 = none)", "每百万输出 token 成本目标（0 = 不设）"),
    "pl_options": ("Ranked options ({n} meet every constraint, {m} evaluated)",
                   "排序方案（{n} 个满足全部约束，共评估 {m} 个）"),
    "pl_none": ("No configuration meets every constraint; the reasons are below.",
                "没有配置满足全部约束，原因见下。"),
    "pl_rejected": ("Ruled out", "被排除"),
    "pl_near": ("Cheaper, but short of memory", "更便宜但显存不够"),
    "pl_chart_cost": ("Cost vs SLO-feasible goodput (Pareto front marked)",
                      "成本与满足 SLO 的吞吐（标出帕累托前沿）"),
    "pl_chosen": ("Option to inspect", "查看方案"),
    "pl_chart_ttft": ("TTFT percentiles vs arrival rate (discrete-event model)",
                      "首字延迟分位数随到达率变化（离散事件模型）"),
    "pl_sim": ("Event model at the design load: TTFT p50/p90/p99 {a:.0f}/{b:.0f}/{c:.0f} ms, TPOT "
               "p50/p90/p99 {d:.1f}/{e:.1f}/{f:.1f} ms, {ok:.0%} meet both SLOs.",
               "设计负载下的离散事件模型：首字 p50/p90/p99 {a:.0f}/{b:.0f}/{c:.0f} ms，每 token "
               "p50/p90/p99 {d:.1f}/{e:.1f}/{f:.1f} ms，{ok:.0%} 同时满足两项 SLO。"),
    "pl_explorer": ("Open in Explorer", "在探索器中打开"),
    "help_pl_mfu": ("Prefill MFU under the chapter's assumptions (0.3 there); the other bases bring their "
                    "own.",
                    "本章假设下的预填充 MFU（书中取 0.3）；其他依据自带取值。"),
    "pl_quote_md": ("Download quote (Markdown)", "下载报价（Markdown）"),
    "pl_quote_pdf": ("Download quote (PDF)", "下载报价（PDF）"),
    "pl_error": ("Cannot plan these inputs: {msg}", "无法规划：{msg}"),
    "pl_col_option": ("option", "方案"),
    "pl_col_month": ("per month", "每月"),
    "pl_col_binding": ("binding", "最紧约束"),
    "pl_col_memory": ("memory", "显存"),
    "pl_col_link": ("Explorer", "探索器"),
    "pl_col_nodes": ("nodes (GPUs each)", "节点（每台卡数）"),
    "pl_col_variants": ("equivalent variants", "等价变体"),
    "pl_reason_memory": ("memory", "显存"),
    "pl_reason_slots": ("slots", "槽位"),
    "pl_reason_ttft": ("TTFT", "首字"),
    "pl_reason_tpot": ("TPOT", "每 token"),
    "pl_reason_throughput": ("throughput", "吞吐"),
    "pl_reason_cost": ("cost", "成本"),
    # the quote document (capacity/report/quote.py), Markdown and PDF
    "quote_title": ("Capacity quote", "容量报价"),
    "quote_prepared": ("Prepared {date} with capacity (LLM-serving capacity planner).",
                       "{date} 由 capacity（LLM 推理容量规划工具）生成。"),
    "quote_inputs": ("Customer inputs", "客户输入"),
    "quote_link": ("Reproduce this plan in the Planner: {url}", "在规划页复现本方案：{url}"),
    "quote_dau": ("Daily active users", "日活用户"),
    "quote_rpu": ("Requests per user per day", "每用户每日请求数"),
    "quote_peak": ("Peak window", "峰值时段"),
    "quote_peak_v": ("{share:.0%} of daily requests in {hours:g} h",
                     "每日 {share:.0%} 的请求集中在 {hours:g} 小时内"),
    "quote_rate": ("Peak arrival rate", "峰值到达率"),
    "quote_conc": ("Peak concurrency (entered)", "峰值并发（直接给定）"),
    "quote_tokens": ("Context / prompt / output", "上下文 / 提示 / 输出"),
    "quote_slo": ("SLOs", "SLO"),
    "quote_slo_v": ("TTFT <= {ttft:g} ms, TPOT <= {tpot:g} ms at p{q:g}",
                    "p{q:g} 首字 <= {ttft:g} ms，每 token <= {tpot:g} ms"),
    "quote_model": ("Model", "模型"),
    "quote_cost_target": ("Cost target per M output tokens at SLO capacity",
                          "满足 SLO 的最大负载下每百万输出 token 成本目标"),
    "quote_rec": ("Recommendation", "推荐配置"),
    "quote_runner": ("Runner-up", "备选配置"),
    "quote_none": ("No configuration in the search meets every constraint. See the reasons below.",
                   "搜索范围内没有配置能同时满足所有约束，原因见下文。"),
    "quote_quantity": ("Quantity", "项目"),
    "quote_value": ("Value", "数值"),
    "quote_config": ("Configuration", "配置"),
    # the headline figures: one definition each (capacity.plan.search.Option), one label,
    # shared by the Planner page and the quote
    "fig_month": ("Cost per month", "每月成本"),
    "fig_gpus": ("GPUs paid for", "计费卡数"),
    "fig_gpus_v": ("{n} serving + {spare} spare", "{n} 张服务 + {spare} 张备用"),
    "fig_gpus_v1": ("all serving", "全部服务"),
    "fig_gpus_idle": ("; {idle} idle in whole nodes", "；整台节点中 {idle} 张闲置"),
    "fig_price": ("Price per GPU-hour", "每卡每小时价格"),
    "fig_price_catalog": ("catalog price, as of {date}", "目录价格，截至 {date}"),
    "fig_price_offer": ("{kind} offer{provider}, as of {date}", "{kind}报价{provider}，截至 {date}"),
    "fig_price_entered": ("entered", "手动录入"),
    "fig_price_missing": ("catalog price: no {kind} offer for this GPU", "目录价格：该 GPU 没有{kind}报价"),
    "fig_mtok_design": ("Cost per M output tokens at the design load ({rate} req/s)",
                        "设计负载（{rate} req/s）下每百万输出 token 成本"),
    "fig_mtok": ("Cost per M output tokens at the SLO-feasible capacity ({rate} req/s)",
                 "满足 SLO 的最大负载（{rate} req/s）下每百万输出 token 成本"),
    "fig_ttft": ("TTFT p{q:g} at the design load (peak + headroom)",
                 "设计负载（峰值加余量）下首字延迟 p{q:g}"),
    "fig_tpot": ("TPOT p{q:g} at the design load (peak + headroom)",
                 "设计负载（峰值加余量）下每 token 延迟 p{q:g}"),
    "fig_col_mtok": ("per M tok, SLO capacity", "每百万 token（SLO 容量）"),
    "fig_col_mtok_design": ("per M tok, design load", "每百万 token（设计负载）"),
    "fig_col_price": ("per GPU-hour", "每卡每小时"),
    "fig_col_gpus": ("GPUs paid", "计费卡数"),
    "fig_col_ttft": ("TTFT p{q:g}, design load", "首字 p{q:g}（设计负载）"),
    "fig_col_tpot": ("TPOT p{q:g}, design load", "每 token p{q:g}（设计负载）"),
    "quote_concurrency": ("Requests in flight at peak / with headroom", "峰值在途请求 / 含余量"),
    "quote_capacity": ("SLO-feasible capacity", "满足 SLO 的最大到达率"),
    "quote_verdict": ("Memory verdict / slots per replica", "显存结论 / 每副本槽位"),
    "quote_binding": ("Binding constraint", "最紧约束"),
    "quote_sim": ("Check by the discrete-event model at the design load",
                  "离散事件模型在设计负载下的校验"),
    "quote_sim_v": ("TTFT p50/p90/p99 {a:.0f} / {b:.0f} / {c:.0f} ms; TPOT p50/p90/p99 {d:.1f} "
                    "/ {e:.1f} / {f:.1f} ms; {ok:.0%} of requests meet both SLOs",
                    "首字 p50/p90/p99 {a:.0f} / {b:.0f} / {c:.0f} ms；每 token p50/p90/p99 {d:.1f} "
                    "/ {e:.1f} / {f:.1f} ms；{ok:.0%} 的请求同时满足两项 SLO"),
    "quote_table": ("Capacity table", "容量表"),
    "quote_table_note": ("Concurrency is the deployment's total, {r} replica(s) sharing it; memory "
                         "is per GPU; TTFT and TPOT here are the prefill and the decode step at "
                         "that concurrency without queueing (the Explorer's figures), below the "
                         "p{q:g} figures above, which include queueing.",
                         "并发为整个部署的合计，由 {r} 个副本分担；显存为每张卡；此处首字与每 token "
                         "延迟是该并发下不含排队的预填充与解码单步时间（与探索器一致），低于上文含排队的 "
                         "p{q:g} 数值。"),
    "quote_c": ("Concurrency (deployment)", "并发（整个部署）"),
    "quote_c_rep": ("per replica", "每副本"),
    "quote_kv": ("KV per GPU, GB", "每卡 KV(GB)"),
    "quote_sub": ("VRAM per GPU: subtotal / usable, GB", "每卡显存：小计 / 可用（GB）"),
    "quote_fit": ("Verdict", "结论"),
    "quote_ttft0": ("TTFT (prefill, no queue)", "首字（预填充，无排队）"),
    "quote_tpot0": ("TPOT (decode step, no queue)", "每 token（解码单步，无排队）"),
    "quote_others": ("Other options", "其他可选配置"),
    "quote_nodes": ("Nodes", "节点"),
    "quote_nodes_v": ("{n} nodes of {layout} GPUs ({form}, {link})",
                      "{n} 台节点，各 {layout} 张卡（{form}，{link}）"),
    "quote_nodes_v1": ("one node of {layout} GPUs ({form}, {link})",
                       "1 台节点，{layout} 张卡（{form}，{link}）"),
    "quote_form_sxm": ("SXM", "SXM"),
    "quote_form_oam": ("OAM", "OAM"),
    "quote_form_pcie": ("PCIe cards", "PCIe 卡"),
    "quote_link_nvlink": ("NVLink domain of {n} GPUs", "{n} 卡 NVLink 互联"),
    "quote_link_infinity_fabric": ("Infinity Fabric domain of {n} GPUs",
                                   "{n} 卡 Infinity Fabric 互联"),
    "quote_link_pcie": ("PCIe only, no GPU-to-GPU link", "仅 PCIe，无卡间高速互联"),
    "quote_why": ("Why", "原因"),
    "quote_fix_col": ("What would make it fit", "怎样能放下"),
    "quote_band_spare": (" (serving GPUs; the {n} spare comes on top)", "（仅计服务卡；另加 {n} 张备用）"),
    "warn_tokens_over": ("prompt + output = {total} tokens exceed the {ctx}-token context: a "
                         "serving engine refuses such requests (vLLM's `max_model_len`); raise "
                         "the context or shorten the prompt",
                         "提示 + 输出 = {total} 个 token，超过 {ctx} 的上下文：推理引擎会拒绝此类"
                         "请求（vLLM 的 `max_model_len`）；请加大上下文或缩短提示"),
    "alt_title": ("Why this card: cheaper options that were ruled out, and what would make them work",
                  "为何选这张卡：被排除的更便宜方案，以及怎样才能行"),
    "alt_col": ("One change that makes a configuration feasible",
                "只改一项即可满足要求的配置"),
    "alt_ttft": ("with a TTFT target of {v} (p{q:g})", "若首字延迟目标放宽到 {v}（p{q:g}）"),
    "alt_tpot": ("with a TPOT target of {v} (p{q:g})", "若每 token 延迟目标放宽到 {v}（p{q:g}）"),
    "alt_prompt": ("with prompts of at most {v} tokens", "若提示不超过 {v} 个 token"),
    "alt_users": ("for at most {v} daily users", "若日活不超过 {v}"),
    "alt_item": ("{what}, {label} at {cost} a month", "{what}，{label}，每月 {cost}"),
    "alt_or": ("; or ", "；或"),
    "quote_variants": ("Equivalent variants (same GPUs, same cost)", "等价变体（同卡同价）"),
    "quote_variant": ("{w} weights, {kv} KV", "{w} 权重，{kv} KV"),
    "quote_variants_many": ("{n} more: weights {w}; KV {kv}", "另有 {n} 种：权重 {w}；KV {kv}"),
    "quote_rejected": ("Ruled out, and why", "被排除的卡型及原因"),
    "quote_fixes": ("Cheaper configurations that miss on memory alone, and what fixes them",
                    "仅因显存不足而落选的更便宜配置，以及补救办法"),
    "quote_assumptions": ("Assumptions", "假设"),
    "quote_price": ("Price of {gpu}: {cur} {price:.2f} per GPU-hour ({src}, as of {date})",
                    "{gpu} 价格：每卡每小时 {cur} {price:.2f}（{src}，截至 {date}）"),
    "quote_price_entered": ("Price of {gpu}: {cur} {price:.2f} per GPU-hour (entered for this quote)",
                            "{gpu} 价格：每卡每小时 {cur} {price:.2f}（本报价录入）"),
    "quote_price_offer": ("Price of {gpu}: {cur} {price:.2f} per GPU-hour, from the offer: {offer}",
                          "{gpu} 价格：每卡每小时 {cur} {price:.2f}，来自报价：{offer}"),
    "quote_price_no_offer": ("Price of {gpu}: {cur} {price:.2f} per GPU-hour; no {kind} offer for "
                             "this GPU, so the catalog's price ({src}, as of {date})",
                             "{gpu} 价格：每卡每小时 {cur} {price:.2f}；该 GPU 没有{kind}报价，"
                             "按目录价格（{src}，截至 {date}）"),
    "offer_kind_on-demand": ("on-demand", "按需"),
    "offer_kind_reserved-1y": ("reserved 1-year", "预留 1 年"),
    "offer_kind_spot": ("spot", "竞价（可中断）"),
    "offer_per_gpu": ("per GPU-hour", "每卡每小时"),
    "offer_per_node": ("per {n}-GPU node-hour", "每 {n} 卡节点每小时"),
    "offer_as_of": (", as of {date}", "，截至 {date}"),
    "offer_source": (" ({src})", "（来源：{src}）"),
    "quote_basis": ("Basis of the figures", "数字依据"),
    "quote_band": ("GPUs within the uncertainty band", "不确定区间内的卡数"),
    "quote_band_v": ("{n} GPUs, {lo}-{hi} within the band", "{n} 张卡，区间内 {lo}-{hi} 张"),
    "quote_band_more": ("more than {n}", "超过 {n}"),
    "quote_band_open": ("{n} GPUs, {lo} to more than {top} within the band",
                        "{n} 张卡，区间内 {lo} 张到超过 {top} 张"),
    "lbl_replicas": ("{r} replicas", "{r} 个副本"),
    "lbl_spare": (" + {n} spare", " + {n} 张备用"),
    "pl_spare": ("N+1: one spare replica per option", "N+1：每个方案加一个备用副本"),
    "fix_gpus": ("{n} GPUs ({r} replicas)", "{n} 张卡（{r} 个副本）"),
    "fix_kv": ("{d} KV cache", "{d} KV 缓存"),
    "fix_ctx": ("{ctx} context", "{ctx} 上下文"),
    "fix_conc": ("at most {c} concurrent requests", "最多 {c} 个并发请求"),
    "rej_never": ("the weights and KV never fit, even on {n} GPUs ({w}, {kv} KV)",
                  "即使用 {n} 张卡，权重和 KV 也放不下（{w}，{kv} KV）"),
    "rej_closest": ("closest: {label} fails on {reasons}", "最接近的配置：{label}，未通过：{reasons}"),
    "rej_prefill": ("; prefill alone takes {pre:.2f} s (SLO {slo:g} s)",
                    "；仅预填充就需 {pre:.2f} 秒（SLO {slo:g} 秒）"),
    "rej_queue": ("; prefill takes {pre:.2f} s, and waiting behind other prompts at the peak pushes "
                  "p{q:g} TTFT past {slo:g} s",
                  "；预填充需 {pre:.2f} 秒，峰值时排在其他请求之后，p{q:g} 首字延迟超过 {slo:g} "
                  "秒"),
    # the catalog's price sources (data/gpus/*.toml), for the Chinese quote: the English text is
    # the data's own, matched exactly
    "src_cloud": ("indicative cloud on-demand price (capacity default, not a quote); edit to your "
                  "provider's",
                  "云厂商按需价格参考值（capacity 默认值，不是报价）；请改为您的供应商价格"),
    "src_rental": ("indicative rental price (capacity default, not a quote); edit to your provider's",
                   "租赁价格参考值（capacity 默认值，不是报价）；请改为您的供应商价格"),
    "src_chapter": ("the capacity-planning chapter, worked example in docs/method.md: RTX 4090 "
                    "rental, CNY 2 per hour",
                    "容量规划一章的示例（docs/method.md）：RTX 4090 租赁，每小时 2 元"),
    "quote_growth": ("Runs out with {g:.0%} growth per month", "按每月增长 {g:.0%} 何时不够用"),
    "quote_growth_v": ("in month {m}", "第 {m} 个月"),
    "quote_growth_never": ("not within 10 years", "10 年内不会"),
    "pl_growth": ("Traffic growth per month", "每月流量增长"),
    "quote_fx": ("Exchange rate: {rate:g} CNY per USD", "汇率：1 USD = {rate:g} CNY"),
    "quote_engine": ("Engine: {engine} scheduling with continuous batching; gpu_memory_utilization "
                     "{util:g}, runtime overhead {ovh:g} GB per GPU, max_num_seqs {seqs}",
                     "引擎：{engine}调度，连续批处理；gpu_memory_utilization {util:g}，每卡运行时开销 "
                     "{ovh:g} GB，max_num_seqs {seqs}"),
    "quote_eff": ("Efficiency, {basis}: {knobs}; bandwidth and FLOP/s are the catalog's spec-sheet "
                  "(dense) figures",
                  "效率，{basis}：{knobs}；带宽和算力取目录中的规格表（稠密）数值"),
    "quote_headroom": ("Headroom: {h:.0%} on the peak load; {m:.0%} on memory for 'fits'",
                       "余量：峰值负载加 {h:.0%}；显存“能放下”判定留 {m:.0%}"),
    "quote_queue": ("Queueing: Poisson arrivals at the peak rate; prefill-first scheduling; TTFT "
                    "and TPOT percentiles from an M/G/1 model checked by a discrete-event simulation; "
                    "month = 730 hours",
                    "排队：峰值时段按泊松到达；预填充优先调度；首字与每 token 延迟分位数来自 M/G/1 "
                    "模型，并用离散事件模拟校验；每月按 730 小时计"),
    "quote_estimate": ("These figures are estimates from published specifications and the assumptions "
                       "above; they must be confirmed by measurement on the target hardware and "
                       "engine before commitment.",
                       "以上数字是根据公开规格和上述假设做出的估算，不是承诺；签约前必须在目标硬件和引擎上"
                       "实测确认。"),
    "quote_no_cjk": ("Note: no Chinese font was found on this machine (install fonts-noto-cjk), "
                     "so this PDF is in English.",
                     "注意：本机未找到中文字体（请安装 fonts-noto-cjk），因此此 PDF 为英文。"),
    "quote_searched": ("Configurations evaluated: {n}", "评估的配置数：{n}"),
    "quote_reason_memory": ("memory", "显存"),
    "quote_reason_slots": ("slots", "槽位"),
    "quote_reason_ttft": ("TTFT", "首字延迟"),
    "quote_reason_tpot": ("TPOT", "每 token 延迟"),
    "quote_reason_throughput": ("throughput", "吞吐"),
    "quote_reason_cost": ("cost", "成本"),
    "quote_verdict_fits": ("fits", "放得下"),
    "quote_verdict_tight": ("tight", "勉强"),
    "quote_verdict_does_not_fit": ("does not fit", "放不下"),
    # chart labels of capacity.report.charts (Explorer): chart_<name> -> app.i18n.chart_labels
    "chart_concurrency": ("concurrent requests", "并发请求数"),
    "chart_current": ("this what-if", "当前方案"),
    "chart_pinned": ("pinned", "已固定方案"),
    "chart_what_if": ("what-if", "方案"),
    "chart_step_ms": ("decode step (ms)", "解码步（ms）"),
    "chart_bandwidth": ("bandwidth term", "带宽项"),
    "chart_compute": ("compute term", "计算项"),
    "chart_step": ("step time = max", "步时间 = 最大值"),
    "chart_c_vram": ("C_vram (memory limit)", "C_vram（显存上限）"),
    "chart_chosen": ("chosen concurrency", "所选并发"),
    "chart_slo_tpot": ("TPOT target", "每 token 延迟目标"),
    "chart_slo_ttft": ("TTFT target", "首字延迟目标"),
    "chart_slo_cost": ("cost target", "成本目标"),
    "chart_tok_s_per_request": ("tok/s per request", "每请求 tok/s"),
    "chart_aggregate_tok_s": ("aggregate tok/s", "总吞吐 tok/s"),
    "chart_series": ("series", "曲线"),
    "chart_value": ("value", "数值"),
    "chart_gb": ("GB per GPU", "每卡 GB"),
    "chart_weights": ("weights", "权重"),
    "chart_overhead": ("overhead", "运行时开销"),
    "chart_nccl": ("NCCL buffers", "NCCL 缓冲"),
    "chart_kv": ("KV cache", "KV 缓存"),
    "chart_free": ("free (within util)", "空闲（利用率内）"),
    "chart_reserved": ("outside util", "利用率之外"),
    "chart_usable": ("VRAM × util", "显存 × 利用率"),
    "chart_vram": ("VRAM", "显存"),
    "chart_segment": ("segment", "部分"),
    "chart_prompt_tokens": ("prompt length (tokens)", "提示长度（tokens）"),
    "chart_ttft_s": ("TTFT (s)", "首字延迟（s）"),
    "chart_linear": ("linear (2PL / F × MFU)", "线性（2PL / F × MFU）"),
    "chart_attention": ("with attention (O(L²))", "含注意力（O(L²)）"),
    "chart_chosen_prompt": ("chosen prompt", "所选提示长度"),
    "chart_cost": ("cost per M tokens", "每百万 token 成本"),
    "chart_intensity": ("arithmetic intensity (FLOP/byte)", "算术强度（FLOP/字节）"),
    "chart_tflops": ("TFLOP/s per GPU", "每卡 TFLOP/s"),
    "chart_roof": ("roofline", "屋顶线"),
    "chart_ridge": ("ridge point", "拐点"),
    "chart_decode_curve": ("decode, C = 1..max", "解码，C = 1..最大"),
    "chart_decode": ("decode at chosen C", "所选并发的解码"),
    "chart_prefill": ("prefill", "预填充"),
    "chart_verdict": ("memory verdict", "显存结论"),
    "chart_bound": ("binds", "瓶颈"),
    "chart_point": ("point", "点"),
    # chart labels of capacity.report.overlay_charts (Results): overlay_<name> ->
    # app.i18n.overlay_chart_labels
    "overlay_concurrency": ("concurrent requests", "并发请求数"),
    "overlay_ttft_ms": ("TTFT (ms)", "首字延迟（ms）"),
    "overlay_tpot_ms": ("TPOT (ms)", "每 token 时间（ms）"),
    "overlay_tok_s_per_request": ("tok/s per request", "每请求 tok/s"),
    "overlay_aggregate_tok_s": ("aggregate tok/s", "总吞吐 tok/s"),
    "overlay_series": ("prediction", "预测"),
    "overlay_spec-sheet": ("predicted, spec-sheet", "预测（规格值）"),
    "overlay_calibrated": ("predicted, calibrated", "预测（校准后）"),
    "overlay_c_vram": ("C_vram (predicted)", "显存最大并发（预测）"),
    "overlay_saturation": ("measured saturation", "实测饱和点"),
    "overlay_find_max": ("highest within the SLO (measured)", "SLO 内最高并发（实测）"),
    "overlay_band": ("p90-p99", "p90-p99"),
    "overlay_ratio": ("measured / predicted", "实测 / 预测"),
    "overlay_roofline": ("roofline, no queueing", "屋顶线（无排队）"),
    "r_load_closed": ("TTFT and aggregate tok/s are predicted under load: a closed loop of C clients "
                      "in the continuous-batching model (each prefill waits for the others and "
                      "pauses decoding); shaded: its TTFT p90-p99. The grey dotted line is the "
                      "roofline without queueing (one prefill, C × 1000 / TPOT).",
                      "首字延迟与总吞吐按负载预测：连续批处理模型中 C 个客户端的闭环（每次预填充要等其他请"
                      "求的预填充，并暂停解码）；阴影为其首字延迟 p90-p99。灰色点线为不含排队的屋顶线（一"
                      "次预填充，C × 1000 / 每 token 延迟）。"),
    "r_load_open": ("TTFT and aggregate tok/s are predicted under load: Poisson arrivals at each "
                    "level's request rate in the continuous-batching model. The grey dotted "
                    "line is the roofline without queueing.",
                    "首字延迟与总吞吐按负载预测：连续批处理模型中按各档请求速率的泊松到达。"
                    "灰色点线为不含排队的屋顶线。"),
    "r_load_none": ("TTFT and aggregate tok/s: roofline without queueing (no output length or "
                    "arrival rate to model the load with).",
                    "首字延迟与总吞吐：不含排队的屋顶线（没有可用于负载建模的输出长度或请求速率）。"),
    # issue 13, second pass (whole nodes, typical efficiency, mixes)
    "lbl_whole_nodes": (", {k} node(s) of {g} ({used} used)", "，{k} 个 {g} 卡节点（用 {used} 张）"),
    "quote_basis_per_figure": ("TTFT, TPOT, capacity and cost per M tokens: {speed}; memory: the "
                               "catalog's sizes; cost per month: the prices below",
                               "首字延迟、每 token 时间、容量与每百万 token 成本：{speed}；显存："
                               "目录中的容量；每月成本：下列价格"),
    "mix_title": ("Capacity quote: a mix of {n} workloads on one fleet",
                  "容量报价：{n} 个工作负载共用一个集群"),
    "mix_rule": ("Each workload is sized on its own replicas of the fleet's GPU (replicas are not "
                 "shared between models); the fleet is their sum, and each workload's share is "
                 "its part of the cost per month.",
                 "每个工作负载在集群同型号 GPU 上按自己的副本单独测算（不同模型之间不共享副本）"
                 "；集群为其总和，各工作负载的占比为其每月成本所占份额。"),
    "mix_none": ("No GPU type serves every workload within the limits.",
                 "没有一种 GPU 型号能在限制内服务所有工作负载。"),
    "mix_short": ("{gpu}: no option meets the SLOs of {names}.", "{gpu}：没有方案满足 {names} 的 SLO。"),
    "mix_fleet": ("Recommended fleet: {n} x {gpu}, {cost} per month", "推荐集群：{n} 张 {gpu}，每月 {cost}"),
    "mix_workload": ("Workload", "工作负载"),
    "mix_gpus": ("GPUs paid", "计费卡数"),
    "mix_gpu": ("GPU", "GPU"),
    "mix_share": ("Share", "占比"),
    "mix_total": ("Fleet", "集群合计"),
    "mix_others": ("Other fleets (cheapest first)", "其他集群（按成本从低到高）"),
    "mix_part": ("Workload: {name}", "工作负载：{name}"),
    "mix_add": ("Mix: more workloads on the same fleet", "混合：同一集群上的更多工作负载"),
    "mix_help": ("The inputs above are the first workload. Each added workload has its own model, "
                 "traffic and SLOs and shares the peak window, headroom, GPUs, prices and efficiency "
                 "basis above; each is sized on its own replicas of one GPU type.",
                 "上面的输入是第一个工作负载。每个新增工作负载有自己的模型、流量和 SLO，并沿用上面的高峰时"
                 "段、余量、GPU、价格和效率依据；各自在同一型号 GPU 上按自己的副本测算。"),
    "mix_n": ("Workloads to add", "新增工作负载数"),
    "mix_first": ("main", "主负载"),
    "mix_quote_md": ("Mix quote (Markdown)", "混合报价（Markdown）"),
    "mix_quote_pdf": ("Mix quote (PDF)", "混合报价（PDF）"),
    # -- issue 14 items 8-11: Measure and Results (runs chosen freely, prompt lengths, request
    # rate, simulators this app started, calibration report and knob labels)
    "r_pick_none": ("No run chosen: pick one or more above (or published curves below).",
                    "未选择运行：请在上方选择一个或多个（或在下方选择公开曲线）。"),
    "r_fit_on": ("Fit on: {runs}", "拟合数据：{runs}"),
    "r_knob_eta_bw": ("bandwidth efficiency η_bw (fraction)", "带宽效率 η_bw（比例）"),
    "r_knob_step_overhead_ms": ("step overhead (ms)", "每步开销（毫秒）"),
    "r_knob_eff": ("decode compute efficiency (fraction)", "解码计算效率（比例）"),
    "r_knob_mfu": ("prefill MFU (fraction)", "预填充 MFU（比例）"),
    "r_knob_prefill_overhead_ms": ("prefill overhead (ms)", "预填充开销（毫秒）"),
    "r_knob_eta_kv": ("KV-read bandwidth efficiency η_kv (fraction)", "KV 读取带宽效率 η_kv（比例）"),
    "r_knob_attn_sat_batch": ("attention saturation batch b_sat (sequences)",
                              "注意力饱和批量 b_sat（序列数）"),
    "r_knob_seq_overhead_ms": ("per-sequence step overhead (ms)", "每序列每步开销（毫秒）"),
    "r_knob_batch1_factor": ("step at batch 1 / formula (ratio)", "单序列步长 / 公式（比值）"),
    "r_knob_attn_mfu": ("prefill attention MFU (fraction)", "预填充注意力 MFU（比例）"),
    "r_col_pinned": ("pinned by the data", "数据能否确定"),
    "r_pinned_yes": ("yes", "能"),
    "r_pinned_no": ("no: stays near its prior", "否：保持在先验值附近"),
    "r_fit_method": ("Fitted with the operator step (F4b): the decode step from the median inter-token "
                     "latency, prefill from TTFT at concurrency 1.",
                     "以算子法步模型（F4b）拟合：解码步取 token 间延迟中位数，预填充取并发 1 下的首字延迟"
                     "。"),
    "m_preset_calib": ("Calibration sweep", "校准测量方案"),
    "m_preset_calib_help": ("Fill the sweep with the smallest one that pins every calibration "
                            "knob of the model to predict with on the GPU below (`capacity "
                            "calibrate --plan`). Each prompt length runs every level; a level "
                            "that does not fit in memory at a long prompt queues in the engine.",
                            "用能确定下方预测模型在该 GPU 上全部校准参数的最小方案填写测量（"
                            "`capacity calibrate --plan`）。每个提示长度都会跑全部并发档；长提示下"
                            "放不进显存的档会在引擎中排队。"),
    "m_preset_calib_done": ("Sweep filled from the calibration plan of {model} on {gpu}: {n} "
                            "cells, prompt lengths {prompts} tokens, levels {levels}, "
                            "{tokens} output tokens, in {passes} passes (forward, then "
                            "backward). Results fits it in one click (Fit).",
                            "已按 {model} 在 {gpu} 上的校准方案填写测量：{n} 个测量点，提示长度 "
                            "{prompts} tokens，并发档 {levels}，输出 {tokens} tokens，分 {passes} "
                            "遍测量（先正序，再倒序）。在结果页点击“拟合”即可一键拟合。"),
    "r_export_md": ("Download report (Markdown)", "下载报告（Markdown）"),
    "r_export_csv": ("Download tables (CSV)", "下载表格（CSV）"),
    "r_report_title": ("Calibration '{name}'", "校准“{name}”"),
    "r_report_basis": ("{model} on {gpu}; fitted on: {inputs}", "{model}，{gpu}；拟合数据：{inputs}"),
    "r_report_errors": ("Median |error|", "误差绝对值中位数"),
    "m_prompt_list": ("Prompt lengths, chars", "提示长度（字符）"),
    "m_prompt_list_help": ("A comma list, e.g. 1000,8000: one run per length, one after the "
                           "other, each under the label plus '-p' and the length.",
                           "逗号分隔，例如 1000,8000：每个长度依次运行一次，标签为原标签加 “-p” 和长度。"),
    "m_rate": ("Request rate, req/s", "请求速率（次/秒）"),
    "m_rate_help": ("0 keeps a closed loop of C clients; a rate sends Poisson arrivals at that "
                    "rate, capped by each level's concurrency (capacity bench --request-rate).",
                    "0 表示 C 个客户端的闭环；填入速率则按该速率泊松到达，受各档并发上限约束"
                    "（capacity bench --request-rate）。"),
    "m_queue": ("Run {i} of {n} (prompt {chars} characters)", "第 {i} / {n} 次运行（提示 {chars} 字符）"),
    "m_sims": ("Simulated endpoints this app started", "本应用启动的模拟接口"),
    "m_sim_reattached": ("Reattached to the simulated endpoint already running at {url}.",
                         "已重新连接到正在 {url} 运行的模拟接口。"),
    "m_sim_use": ("Use", "使用"),
    "m_sim_stop_one": ("Stop", "停止"),
    "m_sim_row": ("{model} on {gpu} at {url} (speed-up {speedup:g}, pid {pid})",
                  "{model}，{gpu}，{url}（加速 {speedup:g}，进程 {pid}）"),
    # -- Results tables in the page's language: runs side by side, the fit's residuals
    "r_cmp_concurrency": ("concurrency", "并发数"),
    "r_cmp_ttft_p50_ms": ("TTFT p50 ms", "首字延迟 p50（毫秒）"),
    "r_cmp_tpot_p50_ms": ("TPOT p50 ms", "每 token 时间 p50（毫秒）"),
    "r_cmp_output_tok_s": ("output tok/s", "输出 tok/s"),
    "r_cmp_requests_failed": ("failed", "失败"),
    "r_res_kind": ("kind", "类型"),
    "r_res_concurrency": ("concurrency", "并发数"),
    "r_res_context": ("context (tokens)", "上下文（token）"),
    "r_res_measured_ms": ("measured (ms)", "实测（毫秒）"),
    "r_res_spec_ms": ("chapter's (ms)", "本章假设（毫秒）"),
    "r_res_fitted_ms": ("fitted (ms)", "拟合（毫秒）"),
    "r_res_held_out_ms": ("held out (ms)", "留出（毫秒）"),
    "r_res_fitted_error": ("fitted error", "拟合误差"),
    "r_res_held_out_error": ("held-out error", "留出误差"),
}

_INDEX: Final = {lang: i for i, lang in enumerate(LANGS)}


def t(key: str, lang: str = "en", /, **values: object) -> str:
    """The message `key` in `lang` ('en' or 'zh'; any other falls back to English), formatted
    with `values`.

    An unknown key is a bug: it raises KeyError (a test checks every key the pages use).
    """
    text = MESSAGES[key][_INDEX.get(lang, 0)]
    return text.format(**values) if values else text


def error_text(exc: BaseException, lang: str = "en") -> str:
    """A library error's message in `lang`: its `Note` (`note_text`) when it was raised with
    one, else its English text."""
    arg = exc.args[0] if exc.args else ""
    if lang == "en" or not isinstance(arg, str):
        return str(exc)  # the library's own English, every detail kept
    return note_text(arg, lang)


def note_text(note: str, lang: str = "en") -> str:
    """A library message (`capacity.types.Note`: a scenario's warning, a calibration's note) in
    `lang`; a plain string (a note read back from a saved calibration) stays as it is."""
    code = getattr(note, "code", None)
    key = f"note_{code}"
    if code is None or key not in MESSAGES:
        return str(note)
    params = {k: note_text(v, lang) if getattr(v, "code", None) else v
              for k, v in getattr(note, "params", {}).items()}  # a reason that is a note too
    return t(key, lang, **params)


def engine_label(engine: str, lang: str = "en") -> str:
    """An engine profile's display name in `lang` (a profile without a translation: its own name
    from data/engines.toml)."""
    key = "engine_name_" + engine
    if key in MESSAGES:
        return t(key, lang)
    from capacity.catalog.engines import engine_profile  # only for profiles without a message
    return engine_profile(engine).name
