"""Every label, verdict and explanation of the app in English and Simplified Chinese.

`t(key, lang, **values)` formats one message; `chart_labels(lang)` gives the labels the chart
builders in `capacity.charts` take. A test checks that every key has both languages and that
the chart, table, math and relief keys the library produces are all covered.
"""

from __future__ import annotations

from typing import Final

LANG_NAMES: Final = {"en": "English", "zh": "中文"}

M: Final[dict[str, tuple[str, str]]] = {
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
    "tp": ("Tensor parallel (TP)", "张量并行 (TP)"),
    "ctx": ("Context per request (tokens)", "每个请求的上下文 (tokens)"),
    "prompt": ("Prompt length for TTFT (tokens)", "计算首字延迟的提示长度 (tokens)"),
    "kv": ("KV cache precision", "KV 缓存精度"),
    "block": ("KV block size (tokens)", "KV 块大小 (tokens)"),
    "util": ("GPU memory utilization", "显存利用率"),
    "overhead": ("Runtime overhead per GPU (GB)", "每卡运行时开销 (GB)"),
    "c": ("Concurrent requests", "并发请求数"),
    "slo_ttft_ms": ("TTFT target (ms)", "首字延迟目标 (ms)"),
    "slo_tpot_ms": ("TPOT target (ms)", "每 token 时间目标 (ms)"),
    "slo_cost": ("Cost target per M tokens (0 = none)", "每百万 token 成本目标 (0 = 不设)"),
    "price": ("Price per GPU-hour", "每 GPU 小时价格"),
    "currency": ("Currency", "货币"),
    "rate": ("Exchange rate (CNY per USD)", "汇率 (人民币/美元)"),
    "eff": ("Decode compute efficiency (eff)", "解码计算效率 (eff)"),
    "mfu": ("Prefill MFU", "预填充 MFU"),
    "headroom": ("Memory headroom for 'fits'", "“放得下”所需的显存余量"),
    "help_util": ("Fraction of total GPU memory the engine may use (vLLM "
                  "gpu_memory_utilization).",
                  "推理引擎可用的显存比例（vLLM 的 gpu_memory_utilization，按总显存计）。"),
    "help_tp": ("Replicas = GPUs / TP. A model that fits one card is usually better served by "
                "replicas.", "副本数 = GPU 数 / TP。单卡放得下的模型通常用多副本更好。"),
    "help_eff": ("Fraction of peak TFLOP/s a decode step reaches (the chapter uses 1.0; real "
                 "values are lower).", "解码阶段达到的峰值算力比例（原文取 1.0，实际更低）。"),
    "sec_inputs": ("Inputs", "输入"),
    "sec_workload": ("Workload and memory", "负载与显存"),
    "sec_slo": ("Targets (SLO)", "目标 (SLO)"),
    "sec_cost": ("Price and currency", "价格与货币"),
    "sec_eff": ("Efficiency", "效率"),
    "prediction": ("Prediction", "预测依据"),
    "spec_sheet": ("spec-sheet (no calibration)", "规格表(未校准)"),
    "help_prediction": ("Spec-sheet: the chapter's roofline with the efficiencies below. A saved "
                        "calibration (fitted on the Results page or with `capacity calibrate`) "
                        "replaces them with values fitted on measurements.",
                        "规格表:按本章的屋顶线和下面的效率计算。已保存的校准(在结果页或用 "
                        "`capacity calibrate` 拟合)会用实测拟合出的数值替换它们。"),
    "pred_basis_cal": ("Prediction: calibrated with '{name}' (bandwidth efficiency {eta_bw:.2f}, "
                       "step overhead {t0:.1f} ms, eff {eff:.2f}, MFU {mfu:.2f}).",
                       "预测依据:校准 '{name}'(带宽效率 {eta_bw:.2f},每步开销 {t0:.1f} ms,"
                       "eff {eff:.2f},MFU {mfu:.2f})。"),
    "pred_basis_spec": ("Prediction: spec-sheet roofline, an upper bound on speed; real engines "
                        "are typically 1.3x to 3x slower until calibrated with measurements.",
                        "预测依据:规格表屋顶线,是速度上限;未用实测校准前,真实引擎通常慢 "
                        "1.3 到 3 倍。"),
    "sec_uncertainty": ("How sure is this? TPOT likely {lo:.1f} to {hi:.1f} ms; what moves it "
                        "most", "有多确定?TPOT 大致在 {lo:.1f} 到 {hi:.1f} ms;什么影响最大"),
    "unc_basis_cal": ("Band: the calibrated prediction plus or minus its error on held-out "
                      "measurements.", "区间:校准预测加减其在留出实测点上的误差。"),
    "unc_basis_spec": ("Band: from the spec-sheet figures (fast edge) to typical efficiencies "
                       "of real engines (slow edge); calibrate to narrow it.",
                       "区间:从规格表数值(快端)到真实引擎的典型效率(慢端);校准后会变窄。"),
    "unc_quantity": ("quantity", "指标"),
    "unc_low": ("low", "低"),
    "unc_mid": ("prediction", "预测"),
    "unc_high": ("high", "高"),
    "sens_step": ("What moves TPOT most", "对 TPOT 影响最大的输入"),
    "sens_ttft": ("What moves TTFT most (s)", "对首字延迟影响最大的输入 (s)"),
    "sens_input": ("input", "输入"),
    "sens_range": ("range", "范围"),
    "sens_swing": ("swing", "变化幅度"),
    "in_eta_bw": ("bandwidth efficiency", "带宽效率"),
    "in_eff": ("decode compute efficiency", "解码计算效率"),
    "in_step_overhead_ms": ("per-step overhead (ms)", "每步开销 (ms)"),
    "in_mfu": ("prefill MFU", "预填充 MFU"),
    "in_prefill_overhead_ms": ("prefill overhead (ms)", "预填充开销 (ms)"),
    "in_overhead_gb": ("runtime memory overhead (GB)", "运行时显存开销 (GB)"),
    "in_util": ("memory utilization", "显存利用率"),
    "in_bandwidth_gb_s": ("memory bandwidth (GB/s)", "显存带宽 (GB/s)"),
    "in_tflops": ("peak TFLOP/s", "峰值 TFLOP/s"),
    "in_weights_gb": ("weight size (GB)", "权重大小 (GB)"),
    "in_context_tokens": ("context (tokens)", "上下文 (tokens)"),
    # explorer: headline and verdicts
    "headline": ("{c} concurrent requests × {ctx} tokens on {n} × {gpu}",
                 "{n} × {gpu}：{c} 个并发请求 × {ctx} tokens"),
    "overall_pass": ("Works: every constraint passes.", "可行：所有约束都满足。"),
    "overall_tight": ("Works, but tight: little headroom left.", "可行，但余量很小。"),
    "overall_fail": ("Does not work as set: {names} fail (what binds and what would relieve "
                     "it are below).", "按当前设置不可行：{names}不通过（瓶颈与缓解办法见下方）。"),
    "metric_tpot": ("TPOT", "TPOT"),
    "metric_ttft": ("TTFT", "首字延迟"),
    "metric_tok_s": ("tok/s per request", "每请求 tok/s"),
    "metric_agg": ("aggregate tok/s", "总吞吐 tok/s"),
    "metric_cost": ("{cur} per M tokens", "{cur}/百万 token"),
    "metric_month": ("per month (24 × 7)", "每月（全天运行）"),
    "metric_cvram": ("C_vram (memory)", "显存最大并发"),
    "help_cvram": ("The most requests at this context that fit in memory (F3).",
                   "此上下文下显存能同时容纳的最多请求数 (F3)。"),
    "help_ttft": ("Prefill of the prompt, linear part plus the attention term, no queueing.",
                  "预填充时间：线性部分加注意力项，不含排队。"),
    "help_tpot": ("One decode step: the larger of the bandwidth and compute terms.",
                  "一个解码步：带宽项与计算项中较大者。"),
    "list_sep": ("; ", "；"),
    "c_memory": ("Memory (VRAM)", "显存"),
    "c_bandwidth": ("Bandwidth", "带宽"),
    "c_compute": ("Compute", "算力"),
    "c_slo": ("SLO", "SLO"),
    "q_memory": ("Do weights + KV fit?", "权重 + KV 放得下吗？"),
    "q_bandwidth": ("Is one decode step fast enough?", "一个解码步够快吗？"),
    "q_compute": ("Are prefill and big batches fast enough?", "预填充和大批次够快吗？"),
    "q_slo": ("Are TTFT, TPOT and cost within target?", "TTFT、TPOT 和成本达标吗？"),
    "st_pass": ("pass", "通过"),
    "st_tight": ("tight", "紧张"),
    "st_fail": ("fail", "不通过"),
    "d_subtotal": ("{value:.1f} GB needed of {limit:.1f} GB usable (VRAM × util)",
                   "需要 {value:.1f} GB，可用 {limit:.1f} GB（显存 × 利用率）"),
    "d_bandwidth_term": ("memory term {value:.2f} ms per step vs {limit:g} ms TPOT target",
                         "访存项每步 {value:.2f} ms，TPOT 目标 {limit:g} ms"),
    "d_compute_term": ("compute term {value:.2f} ms per step vs {limit:g} ms TPOT target",
                       "计算项每步 {value:.2f} ms，TPOT 目标 {limit:g} ms"),
    "d_ttft": ("TTFT {value_s:.2f} s vs {limit_s:.2f} s target",
               "首字延迟 {value_s:.2f} s，目标 {limit_s:.2f} s"),
    "d_tpot": ("TPOT {value:.1f} ms vs {limit:g} ms target",
               "TPOT {value:.1f} ms，目标 {limit:g} ms"),
    "d_cost": ("{value:.3f} {unit} per M tokens vs {limit:g} target",
               "每百万 token {value:.3f} {unit}，目标 {limit:g}"),
    "b_memory": ("Memory binds: {c} requests need {subtotal:.1f} GB per GPU but only "
                 "{usable:.1f} GB is usable ({short:.1f} GB short); memory holds at most "
                 "{c_vram} at this context.",
                 "瓶颈是显存：{c} 个请求每卡需要 {subtotal:.1f} GB，可用只有 {usable:.1f} GB"
                 "（差 {short:.1f} GB）；此上下文下显存最多容纳 {c_vram} 个并发。"),
    "b_memory_weights": ("Memory binds: the weights and overhead alone exceed the usable "
                         "memory by {short:.1f} GB, before any KV cache.",
                         "瓶颈是显存：仅权重和运行时开销就超出可用显存 {short:.1f} GB，"
                         "还没算 KV 缓存。"),
    "b_ttft": ("Compute binds the first token: TTFT {ttft:.2f} s is over the {slo:.2f} s "
               "target (prefill is compute-bound).",
               "瓶颈是算力（首字）：TTFT {ttft:.2f} s 超过 {slo:.2f} s 目标（预填充受算力限制）。"),
    "b_tpot_bandwidth": ("Bandwidth binds: each decode step moves weights and KV in "
                         "{step:.1f} ms, over the {slo:g} ms TPOT target.",
                         "瓶颈是带宽：每个解码步搬运权重和 KV 需 {step:.1f} ms，超过 "
                         "{slo:g} ms 的 TPOT 目标。"),
    "b_tpot_compute": ("Compute binds the decode step: {step:.1f} ms, over the {slo:g} ms "
                       "TPOT target.",
                       "瓶颈是算力（解码）：每步 {step:.1f} ms，超过 {slo:g} ms 的 TPOT 目标。"),
    "b_cost": ("Cost binds: {cost:.3f} {cur} per M tokens is over the {slo:g} {cur} target.",
               "瓶颈是成本：每百万 token {cost:.3f} {cur}，超过 {slo:g} {cur} 的目标。"),
    "b_ok_memory": ("Everything passes; memory is closest to its limit ({subtotal:.1f} of "
                    "{usable:.1f} GB), and holds up to {c_vram} requests at this context.",
                    "全部通过；最接近上限的是显存（{subtotal:.1f} / {usable:.1f} GB），"
                    "此上下文下最多容纳 {c_vram} 个请求。"),
    "b_ok_bandwidth": ("Everything passes; bandwidth binds the decode step ({step:.1f} ms of "
                       "a {slo:g} ms target).",
                       "全部通过；解码步受带宽限制（{step:.1f} ms，目标 {slo:g} ms）。"),
    "b_ok_compute": ("Everything passes; compute is closest to its limit (TTFT {ttft:.2f} s "
                     "of {slo_ttft:.2f} s).",
                     "全部通过；最接近上限的是算力（TTFT {ttft:.2f} s，目标 {slo_ttft:.2f} s）。"),
    "relief": ("What would relieve it", "缓解办法"),
    "relief_none": ("No single change in the usual knobs relieves it; try a larger GPU or "
                    "a smaller model.", "常用手段单独都不够；试试更大的 GPU 或更小的模型。"),
    "r_gpus": ("{value} GPUs as replicas", "{value} 张 GPU（多副本）"),
    "r_kv_dtype": ("{value} KV cache", "{value} KV 缓存"),
    "r_context": ("a {value} context", "{value} 上下文"),
    "r_concurrency": ("at most {value} concurrent requests", "并发不超过 {value}"),
    "r_concurrency_cost": ("{value} concurrent requests (fill the memory)",
                           "并发提高到 {value}（用满显存）"),
    "r_prompt": ("prompts up to {value} tokens", "提示不超过 {value} tokens"),
    "r_tp": ("TP={value}: split the prefill across {value} GPUs",
             "TP={value}：预填充分摊到 {value} 张卡"),
    "r_mfu": ("a prefill MFU of {value} (better kernels, chunked prefill tuning)",
              "预填充 MFU 提到 {value}（更好的算子、分块预填充调优）"),
    "r_price": ("a price of at most {value:.2f} per GPU-hour", "每 GPU 小时价格不超过 {value:.2f}"),
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
    # explorer: charts
    "sec_charts": ("Curves", "曲线"),
    "ch_step_time": ("Decode step time vs concurrency", "解码步时间 vs 并发"),
    "ch_throughput": ("Speed: per request and aggregate", "速度：每请求与总吞吐"),
    "ch_vram": ("Memory of one GPU at the chosen concurrency", "所选并发下单卡显存"),
    "ch_ttft": ("TTFT vs prompt length", "首字延迟 vs 提示长度"),
    "ch_cost": ("Cost per million tokens vs concurrency", "每百万 token 成本 vs 并发"),
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
    "col_context_tokens": ("context (tokens)", "上下文 (tokens)"),
    "col_kv_total_gb": ("KV total (GB)", "KV 合计 (GB)"),
    "col_subtotal_gb": ("VRAM subtotal (GB)", "显存小计 (GB)"),
    "col_usable_gb": ("usable (GB)", "可用 (GB)"),
    "col_verdict": ("memory", "显存结论"),
    "col_ttft_s": ("TTFT (s)", "TTFT (s)"),
    "col_tpot_ms": ("TPOT (ms)", "TPOT (ms)"),
    "col_tok_s_per_request": ("tok/s per request", "每请求 tok/s"),
    "col_aggregate_tok_s": ("aggregate tok/s", "总吞吐 tok/s"),
    "col_cost_per_mtok": ("cost per M tokens", "每百万 token 成本"),
    "col_slo": ("SLO", "SLO"),
    # explorer: the math
    "sec_math": ("Show the math", "显示计算过程"),
    "math_help": ("The chapter's formulas with the current numbers; every figure above comes "
                  "from these.", "原文公式代入当前数值；上面每个数字都由此而来。"),
    "m_kv_token": ("KV per token (F1)", "每 token 的 KV (F1)"),
    "m_kv_request": ("KV per request (F2)", "每请求的 KV (F2)"),
    "m_budget": ("KV budget per GPU (F3)", "每卡 KV 预算 (F3)"),
    "m_c_vram": ("Concurrency the memory allows (F3)", "显存允许的并发 (F3)"),
    "m_subtotal": ("Memory at the chosen concurrency (F8)", "所选并发下的显存 (F8)"),
    "m_bandwidth_term": ("Bandwidth term of the decode step (F4)", "解码步的带宽项 (F4)"),
    "m_compute_term": ("Compute term of the decode step (F4)", "解码步的计算项 (F4)"),
    "m_step": ("Step time and speed (F4)", "步时间与速度 (F4)"),
    "m_ttft": ("Time to first token (F6)", "首字延迟 (F6)"),
    "m_cost": ("Cost per million tokens (F7)", "每百万 token 成本 (F7)"),
    "m_crossover": ("Crossover concurrency (F5)", "交叉并发 (F5)"),
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
    "mc_params_total_b": ("params (B)", "参数量 (B)"),
    "mc_params_active_b": ("active (B)", "激活参数 (B)"),
    "mc_layers": ("layers by kind", "各类层数"),
    "mc_kv_kib_per_token_fp16": ("KV KiB/token fp16", "KV KiB/token fp16"),
    "mc_kv_kib_per_token_fp8": ("KV KiB/token fp8", "KV KiB/token fp8"),
    "mc_max_context_tokens": ("max context", "最大上下文"),
    "mc_weights_gb": ("weights GB by format", "各格式权重 GB"),
    "mc_custom": ("custom", "自定义"),
    "mc_source": ("source", "来源"),
    "mc_as_of": ("as of", "日期"),
    "gc_key": ("key", "键"),
    "gc_name": ("name", "名称"),
    "gc_memory_gb": ("memory (GB)", "显存 (GB)"),
    "gc_memory_driver_gib": ("driver reports (GiB)", "驱动报告 (GiB)"),
    "gc_memory_type": ("memory type", "显存类型"),
    "gc_bandwidth_gb_s": ("bandwidth (GB/s)", "带宽 (GB/s)"),
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
    "add_intro": ("Custom entries are saved under data/custom/ and appear in the Explorer at "
                  "once. The form covers dense models with full-attention (and optional "
                  "linear-attention) layers; for MoE, sliding-window or MLA models upload a "
                  "TOML file shaped like data/models/*.toml.",
                  "自定义条目保存在 data/custom/ 下，立即出现在探索器中。表单适用于全注意力"
                  "（可加线性注意力层）的稠密模型；MoE、滑动窗口或 MLA 模型请上传与 "
                  "data/models/*.toml 格式相同的 TOML 文件。"),
    "add_kind": ("Add a", "添加"),
    "kind_model": ("model", "模型"),
    "kind_gpu": ("GPU", "GPU"),
    "kind_upload": ("TOML file", "TOML 文件"),
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
    "f_max_context_tokens": ("max context (tokens)", "最大上下文 (tokens)"),
    "f_weights_gb": ("stated weight size (GB, 0 = params × bits)",
                     "实际权重大小（GB，0 = 参数量 × 位宽）"),
    "f_weights_format": ("format of that size", "该大小对应的格式"),
    "f_source": ("source (where the figures come from)", "来源（数字出处）"),
    "f_as_of": ("as of (date)", "日期"),
    "f_memory_gb": ("memory (GB)", "显存 (GB)"),
    "f_memory_type": ("memory type", "显存类型"),
    "f_bandwidth_gb_s": ("bandwidth (GB/s)", "带宽 (GB/s)"),
    "f_bf16_tflops": ("BF16 dense TFLOP/s", "BF16 稠密 TFLOP/s"),
    "f_fp8_tflops": ("FP8 dense TFLOP/s (0 = none)", "FP8 稠密 TFLOP/s（0 = 不支持）"),
    "f_int8_tops": ("INT8 dense TOP/s (0 = none)", "INT8 稠密 TOP/s（0 = 不支持）"),
    "f_interconnect": ("interconnect", "互联"),
    "f_interconnect_kind": ("interconnect kind", "互联类型"),
    "f_interconnect_gb_s": ("all-reduce bandwidth (GB/s)", "all-reduce 带宽 (GB/s)"),
    "f_price_per_hour": ("price per GPU-hour", "每 GPU 小时价格"),
    "f_price_source": ("price source", "价格来源"),
    "f_replace": ("replace an existing custom entry with this key", "覆盖同键的已有自定义条目"),
    "f_upload": ("TOML file of one model or one GPU", "一个模型或一个 GPU 的 TOML 文件"),
    "f_save": ("Validate and save", "校验并保存"),
    "saved": ("Saved {kind} '{key}' to {path}; it is now in the Explorer's lists.",
              "已将{kind} '{key}' 保存到 {path}；探索器的列表中已可选择。"),
    "not_saved": ("Not saved: {msg}", "未保存：{msg}"),
    "open_in_explorer": ("Open it in the Explorer", "在探索器中打开"),
}

CHART_LABELS: Final[dict[str, tuple[str, str]]] = {
    "concurrency": ("concurrent requests", "并发请求数"),
    "step_ms": ("decode step (ms)", "解码步 (ms)"),
    "bandwidth": ("bandwidth term", "带宽项"),
    "compute": ("compute term", "计算项"),
    "step": ("step time = max", "步时间 = 最大值"),
    "c_vram": ("C_vram (memory limit)", "C_vram（显存上限）"),
    "chosen": ("chosen concurrency", "所选并发"),
    "slo_tpot": ("TPOT target", "TPOT 目标"),
    "slo_ttft": ("TTFT target", "TTFT 目标"),
    "slo_cost": ("cost target", "成本目标"),
    "tok_s_per_request": ("tok/s per request", "每请求 tok/s"),
    "aggregate_tok_s": ("aggregate tok/s", "总吞吐 tok/s"),
    "series": ("series", "曲线"),
    "value": ("value", "数值"),
    "gb": ("GB per GPU", "每卡 GB"),
    "weights": ("weights", "权重"),
    "overhead": ("overhead", "运行时开销"),
    "nccl": ("NCCL buffers", "NCCL 缓冲"),
    "kv": ("KV cache", "KV 缓存"),
    "free": ("free (within util)", "空闲（利用率内）"),
    "reserved": ("outside util", "利用率之外"),
    "usable": ("VRAM × util", "显存 × 利用率"),
    "vram": ("VRAM", "显存"),
    "segment": ("segment", "部分"),
    "prompt_tokens": ("prompt length (tokens)", "提示长度 (tokens)"),
    "ttft_s": ("TTFT (s)", "首字延迟 (s)"),
    "linear": ("linear (2PL / F × MFU)", "线性 (2PL / F × MFU)"),
    "attention": ("with attention (O(L²))", "含注意力 (O(L²))"),
    "chosen_prompt": ("chosen prompt", "所选提示长度"),
    "cost": ("cost per M tokens", "每百万 token 成本"),
    "intensity": ("arithmetic intensity (FLOP/byte)", "算术强度 (FLOP/字节)"),
    "tflops": ("TFLOP/s per GPU", "每卡 TFLOP/s"),
    "roof": ("roofline", "屋顶线"),
    "ridge": ("ridge point", "拐点"),
    "decode_curve": ("decode, C = 1..max", "解码，C = 1..最大"),
    "decode": ("decode at chosen C", "所选并发的解码"),
    "prefill": ("prefill", "预填充"),
    "verdict": ("memory verdict", "显存结论"),
    "bound": ("binds", "瓶颈"),
    "point": ("point", "点"),
}

_INDEX: Final = {"en": 0, "zh": 1}


def t(key: str, lang: str = "en", /, **values: object) -> str:
    """The message `key` in `lang` ('en' or 'zh'), formatted with `values`.

    An unknown key is a bug: it raises KeyError (a test walks every key the pages use).
    """
    text = M[key][_INDEX.get(lang, 0)]
    return text.format(**values) if values else text


def chart_labels(lang: str = "en") -> dict[str, str]:
    """Axis titles and series names for `capacity.charts` in `lang`."""
    i = _INDEX.get(lang, 0)
    return {k: v[i] for k, v in CHART_LABELS.items()}


def verdict_text(verdict: str, lang: str = "en") -> str:
    """F8's memory verdict ('fits', 'tight', 'does_not_fit') in `lang`."""
    return t("v_" + verdict, lang)


def status_text(status: str, lang: str = "en") -> str:
    """A constraint status ('pass', 'tight', 'fail') in `lang`."""
    return t("st_" + status, lang)
