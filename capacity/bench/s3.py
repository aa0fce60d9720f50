"""Runs in S3-compatible object storage: `s3://bucket/prefix` as a run store (docs/bench.md).

A team's runs land in one bucket (`capacity bench --out s3://bucket/prefix` uploads each run's
files: a level's Parquet file as the level ends, the rest when the run ends), and `capacity runs
--out s3://...` or the Results page (with $CAPACITY_BENCH_DIR set to the URL) read them.

DuckDB's own S3 reader, the httpfs extension, is downloaded at run time from DuckDB's extension
host, and the builds on PyPI (duckdb-extension-httpfs 1.5.5, duckdb-ext-httpfs 1.4.4) do not
match the DuckDB 2.0 installed here. So the store mirrors the bucket's run files into a local
cache folder with boto3 (the optional extra `capacity[s3]`), fetching only objects whose size
or time changed, and DuckDB reads the cache in place as it reads any folder.

Credentials and the endpoint come from boto3's usual sources: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL (an
S3-compatible server such as MinIO), or a profile. They are never written to a file or a
message: errors name the bucket and the failing operation only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from capacity import workspace
from capacity.errors import InputError, StoreError

RUN_FILE_RE = re.compile(
    r"^[^/]+/[^/]+/(?:shard-\d+of\d+/)?"
    r"(?:meta\.json|requests\.csv|summary\.csv|requests\.parquet)$")
"""Object keys (below the prefix) that are run files: `<label>/<run_id>/<file>`, or a shard's
`<label>/<run_id>/shard-<i>of<N>/<file>`."""


def is_s3(root: str | os.PathLike[str]) -> bool:
    """Whether a run root names object storage (`s3://...`; a Path made from such a URL has
    lost one slash: `s3:/...`)."""
    return str(root).startswith("s3:/")


def parse_url(root: str | os.PathLike[str]) -> tuple[str, str]:
    """(bucket, prefix without slashes at its ends) of `s3://bucket/prefix`."""
    text = re.sub(r"^s3:/+", "", str(root))
    bucket, _, prefix = text.partition("/")
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
        raise InputError(f"'{root}' is not an s3://bucket/prefix URL (bucket names are 3-63 "
                         "lowercase letters, digits, '.' and '-')")
    return bucket, prefix.strip("/")


def url_of(root: str | os.PathLike[str]) -> str:
    bucket, prefix = parse_url(root)
    return f"s3://{bucket}/{prefix}".rstrip("/")


def cache_dir(root: str | os.PathLike[str]) -> Path:
    """The local mirror of an s3:// run root: `<workspace>/cache/s3/<bucket>/<prefix>`."""
    bucket, prefix = parse_url(root)
    return workspace.home_dir() / "cache" / "s3" / bucket / prefix


def _client() -> Any:
    try:
        import boto3
    except ImportError:
        raise InputError("reading runs from s3:// needs boto3: pip install 'capacity[s3]'"
                         ) from None
    return boto3.client("s3")


def _fail(action: str, bucket: str, exc: Exception) -> StoreError:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") if hasattr(
        exc, "response") else None
    why = code or type(exc).__name__
    return StoreError(f"cannot {action} s3://{bucket}: {why} (check AWS_ENDPOINT_URL, the "
                      "bucket name and the AWS_* credentials)")


def pull(root: str | os.PathLike[str], client: Any = None) -> Path:
    """Mirror the run files under `s3://bucket/prefix` into `cache_dir(root)`; returns it.

    Objects are fetched only when missing locally or different in size or time; a local file
    is given its object's modification time (so the store's Parquet-vs-CSV freshness rule holds
    on the mirror); local files whose object is gone are removed."""
    bucket, prefix = parse_url(root)
    dest = cache_dir(root)
    s3 = client or _client()
    base = f"{prefix}/" if prefix else ""
    seen: set[Path] = set()
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base)
        for page in pages:
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(base):]
                if not RUN_FILE_RE.match(rel) or ".." in rel.split("/"):
                    continue
                path = dest / rel
                seen.add(path)
                mtime = obj["LastModified"].timestamp()
                try:
                    st = path.stat()
                    if st.st_size == obj["Size"] and abs(st.st_mtime - mtime) < 1e-3:
                        continue
                except OSError:
                    pass
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(path.name + ".part")
                s3.download_file(bucket, obj["Key"], str(tmp))
                os.utime(tmp, (mtime, mtime))
                tmp.replace(path)
    except InputError:
        raise
    except Exception as exc:  # botocore's errors: one line, no credentials
        raise _fail("read", bucket, exc) from None
    if dest.is_dir():
        for path in dest.rglob("*"):
            if path.is_file() and path not in seen and RUN_FILE_RE.match(
                    path.relative_to(dest).as_posix()):
                path.unlink()
    return dest


def push(files: list[Path], local_root: Path, root: str | os.PathLike[str],
         client: Any = None) -> None:
    """Upload `files` (under `local_root`) to the same relative keys under `root`, in the
    order given (CSV before its Parquet copy, so the copy is never older than its CSV)."""
    bucket, prefix = parse_url(root)
    s3 = client or _client()
    try:
        for path in files:
            rel = path.resolve().relative_to(local_root.resolve()).as_posix()
            s3.upload_file(str(path), bucket, f"{prefix}/{rel}" if prefix else rel)
    except InputError:
        raise
    except Exception as exc:
        raise _fail("write to", bucket, exc) from None
