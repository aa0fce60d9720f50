"""llama.cpp's `llama-server` as a real engine to measure: find or build the binary, start and
stop it, wait for `/health` (docs/accuracy.md, "Real engine").

The binary is built from the llama.cpp source vendored in the PyPI sdist of `llama-cpp-python`
(`vendor/llama.cpp`: CMake, the system C++ compiler, CPU only, no network code), once per
version, into `<cache>/llama.cpp/<version>/` (`capacity.workspace.cache_dir`, outside the
checkout; 5 to 25 minutes on a 2-core machine). The sdist and its sha256 are found through
the simple index (`find_sdist`: PEP 691 JSON, else PEP 503 HTML); a tarball put into the cache
by hand is checked against that sha256, or offline against a `.sha256` file beside it
(`check_tarball`). `$CAPACITY_LLAMA_SERVER` names an existing binary instead. The same source
tree holds the vocabulary-only GGUF files (`models/ggml-vocab-*.gguf`) that
`capacity.bench.gguf_model` builds its test models on.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin, urlsplit

import httpx

from capacity import workspace
from capacity.errors import CapacityError
from capacity.untrusted import loads_json

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
"""The llama-cpp-python release whose vendored llama.cpp is built (its sdist, from PyPI)."""
SIMPLE_INDEX = "https://pypi.org/simple/"
"""The package index, read through the simple repository API (PEP 503 HTML, PEP 691 JSON): the
sdist and its sha256 come from `<index>/llama-cpp-python/`. (PyPI's other JSON API,
`/pypi/<name>/<version>/json`, answered 404 on a machine where this one worked: issue 31.)"""
SIMPLE_ACCEPT = ("application/vnd.pypi.simple.v1+json, "
                 "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01")
"""PEP 691's content negotiation: JSON preferred, the HTML page (PEP 503) accepted."""
MAX_INDEX_BYTES = 32 << 20
"""Largest index page read, bytes (llama-cpp-python's lists a few hundred files)."""
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
)
"""CMake options of the build: CPU only, tuned for this machine, no HTTPS/curl, only the
server among the tools."""


class LlamaCppError(CapacityError):
    """The llama-server binary cannot be found, built or started."""


@dataclass(frozen=True, kw_only=True)
class Sdist:
    """One source distribution as the index lists it: where, its file name, its sha256."""

    url: str
    filename: str
    sha256: str


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


def _normalized(name: str) -> str:
    """A project name as PEP 503 compares it: runs of '-', '_' and '.' are one '-', lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


def index_page(package: str = SDIST_PACKAGE, index_url: str = SIMPLE_INDEX) -> str:
    """The package's page in a simple repository (`<index>/<normalized name>/`)."""
    return f"{index_url.rstrip('/')}/{_normalized(package)}/"


def _is_sdist_of(filename: str, package: str, version: str) -> bool:
    """Whether `filename` is the `.tar.gz` sdist of `package` `version` (either spelling of
    the name: `llama_cpp_python-0.3.36.tar.gz`, PEP 625's, or `llama-cpp-python-0.3.36.tar.gz`)."""
    if not filename.endswith(".tar.gz"):
        return False
    name, _, ver = filename[: -len(".tar.gz")].rpartition("-")
    return _normalized(name) == _normalized(package) and ver == version


def _sha256_of(value: object) -> str | None:
    """`value` as a sha256 hex digest (lower case) when it is one (64 hex digits), else None."""
    if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{64}", value):
        return value.lower()
    return None


def sdist_from_json(doc: object, *, base_url: str, package: str = SDIST_PACKAGE,
                    version: str = SDIST_VERSION) -> Sdist | None:
    """The sdist of `version` in a PEP 691 JSON page (`files`: filename, url, hashes), None
    when the page lists none with a sha256. Relative URLs are resolved against `base_url`."""
    files = doc.get("files") if isinstance(doc, dict) else None
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict):
            continue
        filename, url, hashes = entry.get("filename"), entry.get("url"), entry.get("hashes")
        sha = _sha256_of(hashes.get("sha256")) if isinstance(hashes, dict) else None
        if (isinstance(filename, str) and isinstance(url, str) and sha is not None
                and _is_sdist_of(filename, package, version)):
            return Sdist(url=urljoin(base_url, url), filename=filename, sha256=sha)
    return None


class _Anchors(HTMLParser):
    """The `<a href>` links of a PEP 503 page, with their text (the file's name)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def sdist_from_html(text: str, *, base_url: str, package: str = SDIST_PACKAGE,
                    version: str = SDIST_VERSION) -> Sdist | None:
    """The sdist of `version` in a PEP 503 HTML page (an anchor per file, its text the file's
    name, its href ending `#sha256=<digest>`), None when the page lists none with a sha256."""
    parser = _Anchors()
    parser.feed(text)
    parser.close()
    for href, label in parser.links:
        url, _, fragment = href.partition("#")
        filename = label or urlsplit(url).path.rsplit("/", 1)[-1]
        algo, _, digest = fragment.partition("=")
        sha = _sha256_of(digest) if algo == "sha256" else None
        if sha is not None and _is_sdist_of(filename, package, version):
            return Sdist(url=urljoin(base_url, url), filename=filename, sha256=sha)
    return None


def find_sdist(version: str = SDIST_VERSION, *, package: str = SDIST_PACKAGE,
               index_url: str = SIMPLE_INDEX, timeout_s: float = 60.0) -> Sdist:
    """The sdist of `package` `version` and its sha256, from the simple repository API: JSON
    asked for first (PEP 691), the HTML page (PEP 503) read when that is what comes back.
    LlamaCppError naming the URL (and the HTTP status when there is one) when the page cannot
    be read or lists no such sdist."""
    page = index_page(package, index_url)
    try:
        resp = httpx.get(page, headers={"Accept": SIMPLE_ACCEPT}, timeout=timeout_s,
                         follow_redirects=True)
    except httpx.HTTPError as exc:
        raise LlamaCppError(f"cannot read {page}: {type(exc).__name__}: {exc}") from None
    status = f"HTTP {resp.status_code} {resp.reason_phrase}".rstrip()
    if resp.status_code != 200:
        raise LlamaCppError(f"cannot read {page}: {status}")
    if len(resp.content) > MAX_INDEX_BYTES:
        raise LlamaCppError(f"cannot read {page}: {status}, but {len(resp.content):,} bytes "
                            f"(more than {MAX_INDEX_BYTES:,})")
    kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    base = str(resp.url)
    if kind.endswith("json"):
        try:
            found = sdist_from_json(loads_json(resp.text), base_url=base, package=package,
                                    version=version)
        except ValueError as exc:
            raise LlamaCppError(f"cannot read {page}: {status} {kind}, but not JSON "
                                f"({exc})") from None
    else:  # PEP 503's HTML: what an index without PEP 691 answers
        found = sdist_from_html(resp.text, base_url=base, package=package, version=version)
    if found is None:
        raise LlamaCppError(f"{page} ({status}, {kind or 'no content type'}) lists no sdist "
                            f"of {package} {version} with a sha256")
    return found


def file_sha256(path: Path) -> str:
    """The sha256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_file(tarball: Path) -> Path:
    """Where the expected digest of `tarball` is kept: `<tarball>.sha256` beside it."""
    return tarball.with_name(tarball.name + ".sha256")


def _read_sha256_file(path: Path) -> str:
    """The digest in a `.sha256` file: 64 hex digits first (`sha256sum`'s line is read too)."""
    words = path.read_text(encoding="utf-8", errors="replace").split()
    sha = _sha256_of(words[0]) if words else None
    if sha is None:
        raise LlamaCppError(f"{path} holds no sha256 (64 hex digits, as `sha256sum` writes "
                            "them)")
    return sha


def check_tarball(tarball: Path, version: str = SDIST_VERSION, *,
                  index_url: str = SIMPLE_INDEX, log: IO[str] | None = None) -> str:
    """Check a source tarball already in the cache (put there by hand, or downloaded before)
    against the sdist's sha256: the index's when it can be read, else the `.sha256` file beside
    it. Returns the digest; LlamaCppError when it differs or there is nothing to check it
    against (the message says how to provide the digest)."""
    expected_file = sha256_file(tarball)
    try:
        expected, source = find_sdist(version, index_url=index_url).sha256, index_page(
            index_url=index_url)
    except LlamaCppError as exc:
        if not expected_file.is_file():
            raise LlamaCppError(
                f"{tarball} cannot be checked: {exc}, and there is no {expected_file.name} "
                f"beside it. Write the sha256 that the index lists for "
                f"llama_cpp_python-{version}.tar.gz ({index_page(index_url=index_url)}, or "
                f"https://pypi.org/project/{SDIST_PACKAGE}/{version}/#files) into "
                f"{expected_file} (64 hex digits), or delete the tarball to download it "
                "again") from None
        expected, source = _read_sha256_file(expected_file), str(expected_file)
    actual = file_sha256(tarball)
    if actual != expected:
        raise LlamaCppError(f"{tarball}: sha256 {actual} is not the {expected} of {source}; "
                            "delete it to download the sdist again")
    _say(log, f"{tarball.name}: sha256 matches {source}")
    return actual


def _download(sdist: Sdist, tarball: Path, log: IO[str] | None) -> None:
    """Download the sdist into `tarball` (through a `.part` file), checked by its sha256; the
    digest is kept beside it (`sha256_file`) for a later check without the index."""
    _say(log, f"downloading {sdist.url}")
    digest = hashlib.sha256()
    tmp = tarball.with_name(tarball.name + ".part")
    try:
        with httpx.stream("GET", sdist.url, timeout=600.0, follow_redirects=True) as resp, \
                tmp.open("wb") as fh:
            if resp.status_code != 200:
                raise LlamaCppError(f"cannot download {sdist.url}: HTTP {resp.status_code} "
                                    f"{resp.reason_phrase}".rstrip())
            for block in resp.iter_bytes():
                digest.update(block)
                fh.write(block)
    except httpx.HTTPError as exc:
        tmp.unlink(missing_ok=True)
        raise LlamaCppError(f"cannot download {sdist.url}: {type(exc).__name__}: "
                            f"{exc}") from None
    except LlamaCppError:
        tmp.unlink(missing_ok=True)
        raise
    if digest.hexdigest() != sdist.sha256:
        tmp.unlink()
        raise LlamaCppError(f"{sdist.url}: sha256 {digest.hexdigest()} is not the "
                            f"{sdist.sha256} the index lists; nothing kept")
    tmp.replace(tarball)
    sha256_file(tarball).write_text(f"{sdist.sha256}  {tarball.name}\n", encoding="utf-8")


def fetch_source(version: str = SDIST_VERSION, log: IO[str] | None = None, *,
                 index_url: str = SIMPLE_INDEX) -> Path:
    """Download (once; checked by its sha256) and unpack the sdist; returns the llama.cpp tree.

    The sdist and its sha256 come from the simple index (`find_sdist`). A tarball already at
    `<version dir>/llama_cpp_python-<version>.tar.gz` (put there by hand on a machine without
    the index, or downloaded before) is used when it passes `check_tarball`."""
    src = source_dir(version)
    if (src / "CMakeLists.txt").is_file():
        return src
    folder = version_dir(version)
    folder.mkdir(parents=True, exist_ok=True)
    tarball = folder / f"llama_cpp_python-{version}.tar.gz"
    if tarball.is_file():
        check_tarball(tarball, version, index_url=index_url, log=log)
    else:
        _download(find_sdist(version, index_url=index_url), tarball, log)
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
    _say(log, f"building llama-server ({jobs} jobs; log in {logfile}; 5 to 25 min on "
              "a 2-core machine)")
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
