"""The benchmark client: SSE parsing, the async runner, per-request metrics, run files, the run
store (DuckDB over the files) and the Measure page's background jobs.

Submodules are imported where they are used (the client pulls in httpx; the store, DuckDB).
"""
