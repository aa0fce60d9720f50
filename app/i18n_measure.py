"""English and Simplified Chinese strings of the Measure and Results pages.

Same shape as `app/i18n.py` (key -> (English, Chinese)), kept in its own file so the lead can
fold it into `app/i18n.M` at merge time. `t(key, lang, **values)` formats one message;
`chart_labels(lang)` gives the labels `capacity.overlay_charts` takes.
"""

from __future__ import annotations

from typing import Final

M: Final[dict[str, tuple[str, str]]] = {
    # navigation
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
    "m_level": ("concurrency {c}: {done}/{total} done, {errors} errors, TTFT p50 {ttft} ms, "
                "TPOT p50 {tpot} ms",
                "并发 {c}：完成 {done}/{total}，错误 {errors}，首字延迟 p50 {ttft} ms，"
                "TPOT p50 {tpot} ms"),
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
    "r_gpus": ("GPUs", "GPU 数量"),
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
    "r_ratio": ("Measured / predicted per point (1 = agreement)",
                "逐点实测 / 预测（1 = 一致）"),
    "r_median_err": ("Median |measured / predicted - 1| per metric:",
                     "各指标的中位 |实测 / 预测 - 1|："),
    "r_ratio_table": ("Ratios per point", "逐点比值"),
    "r_compare": ("Runs side by side", "测量并排比较"),
    "r_col_metric": ("metric", "指标"),
    "r_calibrate": ("Calibrate in one step", "一步校准"),
    "r_calibrate_help": ("Fits bandwidth efficiency, per-step overhead, decode efficiency, "
                         "prefill MFU and overhead (SPEC F11) to these points; the error on "
                         "held-out points is always shown.",
                         "用这些点拟合带宽效率、每步开销、解码效率、预填充 MFU 与开销"
                         "（SPEC F11）；始终显示留出点上的误差。"),
    "r_cal_name": ("Name", "名称"),
    "r_fit": ("Fit", "拟合"),
    "r_save": ("Save", "保存"),
    "r_saved": ("Saved to {path}; pick it under Calibration to reuse it.",
                "已保存到 {path}；可在“校准”中选择复用。"),
    "r_knobs": ("Fitted knobs of '{name}'", "“{name}”的拟合参数"),
    "r_col_knob": ("knob", "参数"),
    "r_col_spec": ("spec-sheet", "规格值"),
    "r_col_fitted": ("fitted", "拟合值"),
    "r_col_std": ("std error", "标准误差"),
    "r_col_held_out": ("held out", "留出"),
    "r_holdout": ("Median |error|; held-out method: {method}.",
                  "中位绝对误差；留出方法：{method}。"),
    "r_residuals": ("Residuals per point", "逐点残差"),
    "r_uncertainty": ("Uncertainty and what moves the answer", "不确定性与关键输入"),
    "r_unc_c": ("At concurrency", "并发"),
    "r_unc_step": ("decode step (TPOT)", "解码步 (TPOT)"),
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
    "r_error": ("{msg}", "{msg}"),
    # overlay under load
    "roofline": ("roofline, no queueing", "屋顶线（无排队）"),
    "r_load_closed": ("TTFT and aggregate tok/s are predicted under load: a closed loop of C "
                      "clients in the continuous-batching model (each prefill waits for the "
                      "others and pauses decoding); shaded: its TTFT p90-p99. The grey dotted "
                      "line is the roofline without queueing (one prefill, C × 1000 / TPOT).",
                      "首字延迟与总吞吐按负载预测：连续批处理模型中 C 个客户端的闭环（每次预填充"
                      "要等其他请求的预填充，并暂停解码）；阴影为其首字延迟 p90-p99。灰色点线为"
                      "不含排队的屋顶线（一次预填充，C × 1000 / TPOT）。"),
    "r_load_open": ("TTFT and aggregate tok/s are predicted under load: Poisson arrivals at each "
                    "level's request rate in the continuous-batching model. The grey dotted "
                    "line is the roofline without queueing.",
                    "首字延迟与总吞吐按负载预测：连续批处理模型中按各档请求速率的泊松到达。"
                    "灰色点线为不含排队的屋顶线。"),
    "r_load_none": ("TTFT and aggregate tok/s: roofline without queueing (no output length or "
                    "arrival rate to model the load with).",
                    "首字延迟与总吞吐：不含排队的屋顶线（没有可用于负载建模的输出长度或请求速率）。"),
}

CHART_LABELS: Final[dict[str, tuple[str, str]]] = {
    "concurrency": ("concurrent requests", "并发请求数"),
    "ttft_ms": ("TTFT (ms)", "首字延迟 (ms)"),
    "tpot_ms": ("TPOT (ms)", "每 token 时间 (ms)"),
    "tok_s_per_request": ("tok/s per request", "每请求 tok/s"),
    "aggregate_tok_s": ("aggregate tok/s", "总吞吐 tok/s"),
    "series": ("prediction", "预测"),
    "spec-sheet": ("predicted, spec-sheet", "预测（规格值）"),
    "calibrated": ("predicted, calibrated", "预测（校准后）"),
    "c_vram": ("C_vram (predicted)", "显存最大并发（预测）"),
    "saturation": ("measured saturation", "实测饱和点"),
    "band": ("p90-p99", "p90-p99"),
    "ratio": ("measured / predicted", "实测 / 预测"),
}

_INDEX: Final = {"en": 0, "zh": 1}


def t(key: str, lang: str = "en", /, **values: object) -> str:
    """The message `key` in `lang` ('en' or 'zh'), formatted with `values` (KeyError: a bug)."""
    text = M[key][_INDEX.get(lang, 0)]
    return text.format(**values) if values else text


def chart_labels(lang: str = "en") -> dict[str, str]:
    """Axis titles and series names for `capacity.overlay_charts` in `lang`."""
    i = _INDEX.get(lang, 0)
    return {k: v[i] for k, v in CHART_LABELS.items()}
