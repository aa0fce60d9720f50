"""The simulated endpoint: an OpenAI-compatible server whose timings follow the model's formulas."""
