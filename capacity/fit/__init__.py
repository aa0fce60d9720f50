"""Measurements against predictions: importing measured points, reference data, calibration of
the efficiency knobs, uncertainty bands, vLLM startup logs and the measured-vs-predicted overlay."""
