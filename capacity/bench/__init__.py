"""The benchmark client: its configuration, connections, streams, runner and orchestration,
per-request metrics, run files, the run store (DuckDB over the files) and the Measure page's
form, guard, Connect check and background jobs (the modules: docs/bench.md, "The client's code").

Submodules are imported where they are used (the client pulls in httpx; the store, DuckDB).
"""
