"""llama.cpp's `llama-server` as a real engine to measure: find or build the binary, start and
stop it, wait for `/health` (docs/accuracy.md, "Real engine").

The binary is built from the llama.cpp source vendored in the PyPI sdist of `llama-cpp-python`
(`vendor/llama.cpp`: CMake, the system C++ compiler, CPU only, no network code), once per
version, into `<cache>/llama.cpp/<version>/` (`capacity.workspace.cache_dir`, outside the
checkout; about 15 minutes on 2 cores). `$CAPACITY_LLAMA_SERVER` names an existing binary
instead. The same source tree holds the vocabulary-only GGUF files (`models/ggml-vocab-*.gguf`)
that `capacity.bench.gguf_model` builds its test models on.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from capacity import workspace
from capacity.errors import CapacityError

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
"""The llama-cpp-python release whose vendored llama.cpp is built (its sdist, from PyPI)."""
PYPI_JSON = "https://pypi.org/pypi/{package}/{version}/json"
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
)
"""CMake options of the build: CPU only, tuned for this machine, no HTTPS/curl, only the
server among the tools."""


class LlamaCppError(CapacityError):
    """The llama-server binary cannot be found, built or started."""


def version_dir(version: str = SDIST_VERSION) -> Path:
    """`<cache>/llama.cpp/<version>`: the build, its logs and the source of one version."""
    return workspace.cache_dir() / "llama.cpp" / version


def cached_binary(version: str = SDIST_VERSION) -> Path:
    """Where the built binary of `version` is found (it may not exist yet): a link to
    `build/bin/llama-server`, whose shared libraries sit beside it."""
    return version_dir(version) / "llama-server"


def source_dir(version: str = SDIST_VERSION) -> Path:
    """The vendored llama.cpp source of `version` once the sdist is unpacked."""
    return version_dir(version) / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"


def vocab_file(name: str = "llama-spm", version: str = SDIST_VERSION) -> Path:
    """A vocabulary-only GGUF shipped with the llama.cpp source (`models/ggml-vocab-NAME.gguf`)."""
    return source_dir(version) / "models" / f"ggml-vocab-{name}.gguf"


def locate(version: str = SDIST_VERSION) -> Path | None:
    """The binary to run: $CAPACITY_LLAMA_SERVER when set (it must exist), else the cached
    build of `version`, else None."""
    override = workspace.llama_server_override()
    if override is not None:
        if not override.is_file() or not os.access(override, os.X_OK):
            raise LlamaCppError(f"{workspace.CAPACITY_LLAMA_SERVER}={override}: not an "
                                "executable file")
        return override
    path = cached_binary(version)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _sdist_url(version: str) -> tuple[str, str, str]:
    """(url, filename, sha256) of the sdist of `version`, from PyPI's JSON API."""
    url = PYPI_JSON.format(package=SDIST_PACKAGE, version=version)
    try:
        meta = httpx.get(url, timeout=60.0, follow_redirects=True).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise LlamaCppError(f"cannot read {url}: {exc}") from None
    for entry in meta.get("urls", []):
        if entry.get("packagetype") == "sdist":
            return str(entry["url"]), str(entry["filename"]), str(entry["digests"]["sha256"])
    raise LlamaCppError(f"{SDIST_PACKAGE} {version} has no sdist on PyPI")


def fetch_source(version: str = SDIST_VERSION, log: IO[str] | None = None) -> Path:
    """Download (once; checked by its sha256) and unpack the sdist; returns the llama.cpp tree."""
    src = source_dir(version)
    if (src / "CMakeLists.txt").is_file():
        return src
    folder = version_dir(version)
    folder.mkdir(parents=True, exist_ok=True)
    tarball = folder / f"llama_cpp_python-{version}.tar.gz"
    if not tarball.is_file():
        url, _, sha = _sdist_url(version)
        _say(log, f"downloading {url}")
        digest = hashlib.sha256()
        tmp = tarball.with_suffix(".part")
        with httpx.stream("GET", url, timeout=600.0, follow_redirects=True) as resp, \
                tmp.open("wb") as fh:
            resp.raise_for_status()
            for block in resp.iter_bytes():
                digest.update(block)
                fh.write(block)
        if digest.hexdigest() != sha:
            tmp.unlink()
            raise LlamaCppError(f"{url}: sha256 mismatch")
        tmp.replace(tarball)
    _say(log, f"unpacking {tarball.name}")
    with tarfile.open(tarball) as tar:
        tar.extractall(folder, filter="data")
    if not (src / "CMakeLists.txt").is_file():
        raise LlamaCppError(f"{tarball.name}: no vendor/llama.cpp inside")
    return src


def _say(log: IO[str] | None, text: str) -> None:
    if log is not None:
        print(f"llama.cpp: {text}", file=log, flush=True)


def build(version: str = SDIST_VERSION, *, jobs: int = 2, log: IO[str] | None = None) -> Path:
    """Build `llama-server` of `version` into the cache (reusing a finished build); returns its
    path. The compiler output goes to `<version dir>/build.log`."""
    done = cached_binary(version)
    if done.is_file():
        return done
    if shutil.which("cmake") is None:
        raise LlamaCppError("cmake is not installed (apt-get install cmake, or pip install cmake)")
    src = fetch_source(version, log)
    folder = version_dir(version)
    build_dir = folder / "build"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    logfile = folder / "build.log"
    _say(log, f"building llama-server ({jobs} jobs; log in {logfile}, ~15 min on 2 cores)")
    with logfile.open("a") as out:
        for cmd in (["cmake", "-S", str(src), "-B", str(build_dir), *gen, *CMAKE_FLAGS],
                    ["cmake", "--build", str(build_dir), "--target", "llama-server",
                     "-j", str(jobs)]):
            rc = subprocess.run(["nice", "-n", "19", *cmd] if shutil.which("nice") else cmd,
                                stdout=out, stderr=subprocess.STDOUT).returncode
            if rc != 0:
                raise LlamaCppError(f"'{' '.join(cmd[:3])} ...' failed (exit {rc}); see {logfile}")
    built = build_dir / "bin" / "llama-server"
    if not built.is_file():
        raise LlamaCppError(f"the build finished but {built} is missing; see {logfile}")
    # a link, not a copy: the binary finds its shared libraries (libllama, libggml) beside it
    done.unlink(missing_ok=True)
    done.symlink_to(built.relative_to(folder))
    return done


def locate_or_build(version: str = SDIST_VERSION, *, log: IO[str] | None = None) -> Path:
    """The binary to run, building it first when neither the override nor a cache has one."""
    return locate(version) or build(version, log=log)


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """How to start one llama-server: model file, port, slots, context, threads."""

    model_path: Path
    port: int
    parallel: int = 8
    ctx_tokens: int = 8192
    """`-c`: the total context (split evenly among the `parallel` slots without
    `kv_unified`; one pool they share with it)."""
    batch_tokens: int = 2048
    """`-b`: the logical batch (prompt tokens processed per step)."""
    threads: int | None = None
    alias: str | None = None
    """`--alias`: the model id the server reports (else the file path)."""
    kv_unified: bool = True
    """`--kv-unified`: one KV buffer for all slots. Without it (llama.cpp's choice when
    `--parallel` is given) each slot has a KV stream of its own and a decode step runs one
    micro-batch per run of consecutive busy slots (its batch split for per-slot streams takes
    consecutive sequence ids), so busy slots 1, 3, 6 and 7 cost three passes over the weights:
    measured here, 75-90 ms per token at 4 sequences against 45-47 ms unified, the same levels
    after the same history (docs/bench.md, "Real engines")."""
    extra: tuple[str, ...] = ()

    def argv(self, binary: Path) -> list[str]:
        """The command line."""
        cmd = [str(binary), "-m", str(self.model_path), "--host", "127.0.0.1",
               "--port", str(self.port), "--parallel", str(self.parallel),
               "-c", str(self.ctx_tokens), "-b", str(self.batch_tokens), "--metrics",
               "--slots", "--no-webui"]
        if self.threads:
            cmd += ["-t", str(self.threads)]
        if self.alias:
            cmd += ["--alias", self.alias]
        if self.kv_unified:
            cmd.append("--kv-unified")
        return cmd + list(self.extra)


class LlamaServer:
    """A running llama-server (a context manager: stopped on exit)."""

    def __init__(self, binary: Path, config: ServerConfig, *, log_path: Path | None = None
                 ) -> None:
        self.binary, self.config = binary, config
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`.../v1`)."""
        return f"http://127.0.0.1:{self.config.port}/v1"

    @property
    def root_url(self) -> str:
        """The server's root (`/health`, `/slots`, `/metrics` live here)."""
        return f"http://127.0.0.1:{self.config.port}"

    def start(self, *, timeout_s: float = 120.0) -> LlamaServer:
        """Start the process and wait until `/health` answers 200."""
        self._log = self.log_path.open("ab") if self.log_path else None
        self._proc = subprocess.Popen(self.config.argv(self.binary), stdout=self._log or
                                      subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            wait_healthy(self.root_url, timeout_s=timeout_s, proc=self._proc)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate the process (kill after 10 s) and close its log."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaServer:
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_healthy(root_url: str, *, timeout_s: float = 120.0,
                 proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll `GET /health` until 200 (llama.cpp answers 503 while the model loads)."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise LlamaCppError(f"llama-server exited with code {proc.returncode} before it "
                                "was healthy")
        try:
            resp = httpx.get(f"{root_url}/health", timeout=5.0)
            if resp.status_code == 200:
                return
            last = f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.25)
    raise LlamaCppError(f"{root_url}/health not ready after {timeout_s:g} s ({last})")


def server_info(root_url: str, paths: Sequence[str] = ("/health", "/slots", "/props")
                ) -> dict[str, Any]:
    """The JSON of llama.cpp's introspection endpoints (a path that fails maps to None)."""
    out: dict[str, Any] = {}
    for path in paths:
        try:
            resp = httpx.get(f"{root_url}{path}", timeout=10.0)
            out[path] = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            out[path] = None
    return out
