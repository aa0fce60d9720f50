"""Catalogs: models, GPUs and weight formats read from TOML data files, and the user's own entries.

`loader` parses and validates the bundled catalog; `custom` saves and reads the entries a user
adds (a custom folder in the workspace). Nothing here computes a prediction.
"""
