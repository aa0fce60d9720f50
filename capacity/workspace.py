"""Where the project reads its data and keeps the user's state: the one place that names every
environment variable and every folder (docs/configuration.md).

Two kinds of folder:
- the bundled data, read-only: the catalogs (`weight_formats.toml`, `models/`, `gpus/`), the
  published reference measurements (`reference/`), the published calibration
  (`calibrations/`), the sample run (`bench/sample-rtx-4090-sim`) and the translations
  (`i18n/`). From a checkout it is the
  checkout's `data/`; from an installed wheel, the copy inside the package (`capacity/_data`).
- the workspace, the user's state: benchmark runs (`bench/`), custom catalog entries
  (`custom/`) and saved calibrations (`calibrations/`). It is `$CAPACITY_HOME` when set, else
  the checkout's `data/` when running from a checkout (so nothing moves for a developer), else
  a per-user folder (`$XDG_DATA_HOME/capacity` or `~/.local/share/capacity` on Linux,
  `%APPDATA%\\capacity` on Windows, `~/Library/Application Support/capacity` on macOS).

Every function reads the environment when it is called, never at import, so a test (or a
long-running app) sees a changed variable at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Variable:
    """One environment variable the project reads: its name, what it does, its default."""

    name: str
    meaning: str
    default: str


CAPACITY_HOME = "CAPACITY_HOME"
CAPACITY_DATA_DIR = "CAPACITY_DATA_DIR"
CAPACITY_CUSTOM_DIR = "CAPACITY_CUSTOM_DIR"
CAPACITY_BENCH_DIR = "CAPACITY_BENCH_DIR"
CAPACITY_CALIBRATIONS_DIR = "CAPACITY_CALIBRATIONS_DIR"
CAPACITY_MEASURE = "CAPACITY_MEASURE"
CAPACITY_MEASURE_ALLOW_HOSTS = "CAPACITY_MEASURE_ALLOW_HOSTS"
CAPACITY_CJK_FONT = "CAPACITY_CJK_FONT"
CAPACITY_LLAMA_SERVER = "CAPACITY_LLAMA_SERVER"
CAPACITY_CACHE_DIR = "CAPACITY_CACHE_DIR"
CAPACITY_PUBLIC_URL = "CAPACITY_PUBLIC_URL"
OPENAI_API_KEY = "OPENAI_API_KEY"
CAPACITY_BENCH_BASE_URL = "CAPACITY_BENCH_BASE_URL"
CAPACITY_RUN_STARTED_BY = "CAPACITY_RUN_STARTED_BY"
XDG_CACHE_HOME = "XDG_CACHE_HOME"
XDG_DATA_HOME = "XDG_DATA_HOME"
APPDATA = "APPDATA"

VARIABLES: tuple[Variable, ...] = (
    Variable(name=CAPACITY_HOME,
             meaning="the workspace: the folder that holds bench runs, custom catalog entries "
                     "and saved calibrations",
             default="the checkout's data/ when running from a checkout, else the per-user "
                     "folder"),
    Variable(name=CAPACITY_DATA_DIR,
             meaning="another catalog folder to read instead of the bundled one "
                     "(weight_formats.toml, models/, gpus/)",
             default="the bundled data"),
    Variable(name=CAPACITY_CUSTOM_DIR,
             meaning="where custom models and GPUs are saved and read (models/, gpus/)",
             default="<workspace>/custom"),
    Variable(name=CAPACITY_BENCH_DIR,
             meaning="where benchmark runs are stored and read (capacity bench, capacity runs, "
                     "Measure, Results): a folder, or s3://bucket/prefix for runs in object "
                     "storage (docs/bench.md)",
             default="<workspace>/bench"),
    Variable(name=CAPACITY_CALIBRATIONS_DIR,
             meaning="where calibrations are saved and read (besides the bundled, read-only "
                     "ones)",
             default="<workspace>/calibrations"),
    Variable(name=CAPACITY_MEASURE,
             meaning="how far the Measure page may reach: 'closed' (loopback only, plus "
                     "CAPACITY_MEASURE_ALLOW_HOSTS), 'open' (any host) or 'off' (no runs); any "
                     "other value is off",
             default="closed"),
    Variable(name=CAPACITY_MEASURE_ALLOW_HOSTS,
             meaning="comma-separated hosts the Measure page may connect to and benchmark "
                     "when closed (then loopback only for the simulator the app started, "
                     "unless listed)",
             default="none: loopback only"),
    Variable(name=CAPACITY_CJK_FONT,
             meaning="a TTF/OTF/TTC font with Chinese glyphs for the Chinese quote PDF "
                     "(PATH, or PATH#INDEX in a collection)",
             default="the first of the usual Noto CJK, WenQuanYi, AR PL, PingFang or "
                     "Microsoft YaHei font files found"),
    Variable(name=CAPACITY_LLAMA_SERVER,
             meaning="an existing llama.cpp `llama-server` binary for `python3 dev.py realtest` "
                     "(skips the build)",
             default="<cache>/llama.cpp/<version>/llama-server, built there on first use"),
    Variable(name=CAPACITY_CACHE_DIR,
             meaning="the cache for large rebuildable things: the llama-server build and the "
                     "GGUF test models of `python3 dev.py realtest`",
             default="$XDG_CACHE_HOME/capacity (default ~/.cache/capacity)"),
    Variable(name=CAPACITY_PUBLIC_URL,
             meaning="the app's public address (https://capacity.example.com) that the "
                     "quote's \"reproduce this plan\" link starts with; only an http(s) "
                     "address is used",
             default="none: a relative /planner?... link (the app never guesses its own "
                     "address, which behind a proxy is a loopback one)"),
    Variable(name=OPENAI_API_KEY,
             meaning="the API key `capacity bench` sends when --api-key is not given (the "
                     "Measure page passes its key to the run this way)",
             default="none"),
    Variable(name=CAPACITY_BENCH_BASE_URL,
             meaning="the base URL `capacity bench` measures when --base-url is not given (the "
                     "Measure page passes its URL to the run this way, so that a password in "
                     "it never stands on a command line other users can list)",
             default="http://127.0.0.1:8000/v1"),
    Variable(name=CAPACITY_RUN_STARTED_BY,
             meaning="set by the app for its own `capacity bench` children only: the signed-in "
                     "user's id, written to the run's meta.json as `started_by` (do not set it "
                     "yourself)",
             default="none: the run has no owner (every user sees it)"),
    Variable(name=XDG_CACHE_HOME,
             meaning="the base of the cache when CAPACITY_CACHE_DIR is not set "
                     "($XDG_CACHE_HOME/capacity)",
             default="~/.cache"),
    Variable(name=XDG_DATA_HOME,
             meaning="Linux: the base of the per-user workspace ($XDG_DATA_HOME/capacity)",
             default="~/.local/share"),
    Variable(name=APPDATA,
             meaning="Windows: the base of the per-user workspace (%APPDATA%\\capacity)",
             default="~/AppData/Roaming"),
)
"""Every environment variable the project reads (docs/configuration.md has the same table)."""

_NAMES = frozenset(v.name for v in VARIABLES)
PACKAGE_DIR = Path(__file__).resolve().parent
SAMPLE_RUNS = ("sample-rtx-4090-sim",)
"""The bundled runs (labels under bundled `bench/`) that a fresh workspace starts with."""


def get(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of the environment variable `name` (stripped; "" when unset).

    `name` must be one of VARIABLES; `environ` defaults to the process environment, read now.
    """
    if name not in _NAMES:
        raise ValueError(f"{name} is not a variable listed in capacity.workspace.VARIABLES")
    env = os.environ if environ is None else environ
    return env.get(name, "").strip()


def _path(name: str) -> Path | None:
    value = get(name)
    return Path(value).expanduser() if value else None


# ---------------------------------------------------------------------------------------------
# bundled, read-only

@cache
def checkout_root() -> Path | None:
    """The checkout the package runs from (it has pyproject.toml and data/ beside capacity/),
    else None (an installed wheel). Cached: the package does not move while it runs, and the
    planner asks for bundled files hundreds of times a search."""
    root = PACKAGE_DIR.parent
    if (root / "pyproject.toml").is_file() and (root / "data" / "weight_formats.toml").is_file():
        return root
    return None


def bundled_data_dir() -> Path:
    """The bundled data: the checkout's `data/`, else the package's `_data` (in the wheel)."""
    root = checkout_root()
    if root is not None:
        return root / "data"
    return _package_dir("_data")


def _package_dir(name: str) -> Path:
    """A folder of the installed package (the wheel's `_data`, `_app`). importlib.resources
    loads here: a checkout never needs it, and it is 15 ms of every command's start-up."""
    from importlib import resources

    return Path(str(resources.files("capacity") / name))


def catalog_dir() -> Path:
    """The folder the catalog is read from: $CAPACITY_DATA_DIR, else the bundled data."""
    return _path(CAPACITY_DATA_DIR) or bundled_data_dir()


def reference_dir() -> Path:
    """The published reference measurements (published.csv, keys.toml), read-only."""
    return bundled_data_dir() / "reference"


def bundled_calibrations_dir() -> Path:
    """The bundled, read-only calibrations (e.g. rtx-4090-vllm-published)."""
    return bundled_data_dir() / "calibrations"


def bundled_bench_dir() -> Path:
    """The bundled sample runs, read-only."""
    return bundled_data_dir() / "bench"


def i18n_dir() -> Path:
    """The translations, one file per language (`en.toml`, `zh.toml`), read-only."""
    return bundled_data_dir() / "i18n"


def app_dir() -> Path:
    """The folder holding the Streamlit app (streamlit_app.py, pages/, app/): the checkout's
    root, else the package's `_app` (in the wheel)."""
    root = checkout_root()
    if root is not None and (root / "streamlit_app.py").is_file():
        return root
    return _package_dir("_app")


# ---------------------------------------------------------------------------------------------
# the workspace: the user's state

def user_data_dir() -> Path:
    """The per-user workspace when neither $CAPACITY_HOME nor a checkout gives one."""
    if sys.platform == "win32":
        base = _path(APPDATA) or Path.home() / "AppData" / "Roaming"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = _path(XDG_DATA_HOME) or Path.home() / ".local" / "share"
    return base / "capacity"


def home_dir() -> Path:
    """The workspace: $CAPACITY_HOME, else the checkout's `data/`, else the per-user folder."""
    explicit = _path(CAPACITY_HOME)
    if explicit is not None:
        return explicit
    root = checkout_root()
    return root / "data" if root is not None else user_data_dir()


def custom_dir() -> Path:
    """Custom catalog entries: $CAPACITY_CUSTOM_DIR, else `<workspace>/custom`."""
    return _path(CAPACITY_CUSTOM_DIR) or home_dir() / "custom"


def bench_dir() -> Path:
    """Benchmark runs: $CAPACITY_BENCH_DIR, else `<workspace>/bench` (see `prepare_bench_dir`)."""
    return _path(CAPACITY_BENCH_DIR) or home_dir() / "bench"


def calibrations_dir() -> Path:
    """Saved calibrations: $CAPACITY_CALIBRATIONS_DIR, else `<workspace>/calibrations`."""
    return _path(CAPACITY_CALIBRATIONS_DIR) or home_dir() / "calibrations"


def prepare_bench_dir() -> Path:
    """`bench_dir()`, with the bundled sample run copied in the first time the workspace's
    bench folder is created, so a fresh install lists it (Results, `capacity runs`).

    Nothing is copied into a folder named by $CAPACITY_BENCH_DIR, nor into one that already
    exists (a sample the user deleted stays deleted). From a checkout the folder is the
    bundled one and already holds the sample.
    """
    import shutil  # here: with bz2, lzma and zlib it is a few ms of every command's start-up

    target = bench_dir()
    if get(CAPACITY_BENCH_DIR) or target.exists():
        return target
    source = bundled_bench_dir()
    staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for label in SAMPLE_RUNS:
        if (source / label).is_dir():
            shutil.copytree(source / label, staging / label)
    try:
        staging.rename(target)
    except OSError:  # another process created it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def cache_dir() -> Path:
    """Large, rebuildable files kept outside the repository (the llama-server build, GGUF test
    models): $CAPACITY_CACHE_DIR, else `$XDG_CACHE_HOME/capacity` (`~/.cache/capacity`)."""
    explicit = _path(CAPACITY_CACHE_DIR)
    if explicit is not None:
        return explicit
    return (_path(XDG_CACHE_HOME) or Path.home() / ".cache") / "capacity"


def llama_server_override() -> Path | None:
    """$CAPACITY_LLAMA_SERVER: an existing llama-server binary to use instead of building one."""
    return _path(CAPACITY_LLAMA_SERVER)


# ---------------------------------------------------------------------------------------------
# settings

def cjk_font() -> str:
    """$CAPACITY_CJK_FONT: a font path, optionally `path#index` in a collection ("" unset)."""
    return get(CAPACITY_CJK_FONT)


def public_url() -> str:
    """$CAPACITY_PUBLIC_URL without a trailing '/', when it is an http(s) address with a host
    ("" otherwise: links stay relative)."""
    raw = get(CAPACITY_PUBLIC_URL).rstrip("/")
    return raw if is_link_base(raw) else ""


def is_link_base(url: str) -> bool:
    """Whether `url` may start a link the tool writes (a quote's, a page's): an http(s)
    address with a host and no query (not `javascript:`, `data:` or `file:`)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and not parts.query


def openai_api_key() -> str | None:
    """$OPENAI_API_KEY, or None when unset or empty."""
    return get(OPENAI_API_KEY) or None


def bench_base_url() -> str | None:
    """$CAPACITY_BENCH_BASE_URL, or None when unset or empty."""
    return get(CAPACITY_BENCH_BASE_URL) or None


def run_started_by() -> str:
    """$CAPACITY_RUN_STARTED_BY: who started a run from the app ('' for nobody)."""
    return get(CAPACITY_RUN_STARTED_BY)


def env_snapshot(names: tuple[str, ...]) -> dict[str, str | None]:
    """The current values of these environment variables (None where unset), to put back
    with `set_env` (`capacity probe --threads` sets the BLAS libraries' thread variables for
    the numpy it is about to load)."""
    return {name: os.environ.get(name) for name in names}


def set_env(values: Mapping[str, str | None]) -> None:
    """Set (or, for None, unset) environment variables of this process."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
