"""The formulas: KV cache, memory, decode step, prefill, parallelism, cost, the workload and the
scenario that combines them (docs/method.md, F1-F10). Pure functions over catalog entries."""
