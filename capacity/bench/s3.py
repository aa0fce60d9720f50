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

import json
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Any

from capacity import workspace
from capacity.bench.storage import LABEL_RE, RUN_ID_RE, RunStatus, owner_alive
from capacity.errors import InputError, StoreError

RUN_FILE_RE = re.compile(
    r"^[^/]+/[^/]+/(?:shard-\d+of\d+/)?"
    r"(?:meta\.json|requests\.csv|summary\.csv|requests\.parquet)$")
"""Object keys (below the prefix) that are run files: `<label>/<run_id>/<file>`, or a shard's
`<label>/<run_id>/shard-<i>of<N>/<file>`. Such a key is mirrored only when its label and run id
are names a run can have (`LABEL_RE`, `RUN_ID_RE`); otherwise it is skipped with a warning."""
MAX_SEGMENT_BYTES = 255
"""Longest segment (between slashes) of a bucket prefix, bytes in UTF-8: a folder name of the
local mirror (most filesystems stop at 255)."""
MAX_KEY_SHOWN = 200
"""Characters of an object key quoted in a warning."""
CLAIM_NAME = ".capacity-claim"
"""The object a writer puts first in its run's (or shard's) folder, with S3's conditional write
(`If-None-Match: *`), so that a second writer of the same run id and shard is refused
(`claim_run`). Not a run file: readers ignore it."""


def is_s3(root: str | os.PathLike[str]) -> bool:
    """Whether a run root names object storage (`s3://...`; a Path made from such a URL has
    lost one slash: `s3:/...`)."""
    return str(root).startswith("s3:/")


def _bad_segment(segment: str) -> str | None:
    """Why one segment of a prefix cannot name a folder of the mirror, or None."""
    if segment in ("", ".", ".."):
        return f"an empty, '.' or '..' segment ('{segment}')"
    if "\\" in segment or any(ord(c) < 32 or ord(c) == 127 for c in segment):
        return "a backslash or a control character"
    if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
        return f"a segment of more than {MAX_SEGMENT_BYTES} bytes"
    return None


def parse_url(root: str | os.PathLike[str]) -> tuple[str, str]:
    """(bucket, prefix without slashes at its ends) of `s3://bucket/prefix`.

    InputError for a bucket name S3 does not allow, and for a prefix that could leave the
    local mirror's folder: a '..' or '.' segment, an empty one ('a//b', a leading '/'), a
    backslash, a control character or a segment over MAX_SEGMENT_BYTES (one '/' at the end is
    allowed)."""
    text = re.sub(r"^s3:/{1,2}", "", str(root))
    bucket, _, prefix = text.partition("/")
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket) or ".." in bucket:
        raise InputError(f"'{str(root)[:MAX_KEY_SHOWN]}' is not an s3://bucket/prefix URL "
                         "(bucket names are 3-63 lowercase letters, digits, '.' and '-')")
    prefix = prefix[:-1] if prefix.endswith("/") else prefix
    for segment in prefix.split("/") if prefix else ():
        why = _bad_segment(segment)
        if why is not None:
            raise InputError(f"'{str(root)[:MAX_KEY_SHOWN]}': the prefix has {why}; give "
                             "s3://bucket/folder/... with plain folder names")
    return bucket, prefix


def url_of(root: str | os.PathLike[str]) -> str:
    bucket, prefix = parse_url(root)
    return f"s3://{bucket}/{prefix}".rstrip("/")


def cache_base() -> Path:
    """The folder of every local mirror: `<workspace>/cache/s3`."""
    return workspace.home_dir() / "cache" / "s3"


def cache_dir(root: str | os.PathLike[str]) -> Path:
    """The local mirror of an s3:// run root: `<workspace>/cache/s3/<bucket>/<prefix>`;
    InputError when it would resolve (symbolic links followed) outside `cache_base()`."""
    bucket, prefix = parse_url(root)
    base = cache_base()
    dest = base / bucket / prefix if prefix else base / bucket
    if not _inside(dest, base):
        raise InputError(f"the local mirror of '{str(root)[:MAX_KEY_SHOWN]}' would be outside "
                         f"{base}")
    return dest


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path`, resolved, is `folder` (resolved) or below it."""
    return path.resolve().is_relative_to(folder.resolve())


def _client() -> Any:
    try:
        import boto3
    except ImportError:
        raise InputError("reading runs from s3:// needs boto3: pip install 'capacity[s3]'"
                         ) from None
    return boto3.client("s3")


def _error_code(exc: Exception) -> str | None:
    """The S3 error code of a botocore ClientError ('NoSuchBucket', '404'...), else None."""
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    code = error.get("Code") if isinstance(error, dict) else None
    return str(code) if code is not None else None


def _fail(action: str, bucket: str, exc: Exception) -> StoreError:
    why = _error_code(exc) or type(exc).__name__
    return StoreError(f"cannot {action} s3://{bucket}: {why} (check AWS_ENDPOINT_URL, the "
                      "bucket name and the AWS_* credentials)")


def _key_problem(rel: str) -> str | None:
    """Why a run file's key (below the prefix) is not mirrored, or None: its label and run id
    must be names a run can have (no '.', '..', slashes or over-long names)."""
    label, run_id = rel.split("/")[:2]
    if not LABEL_RE.match(label):
        return "its label is not 1-64 letters, digits, '.', '_' or '-'"
    if not RUN_ID_RE.match(run_id):
        return "its run id is not 1-80 letters, digits, '.', '_' or '-'"
    return None


def _live_runs(dest: Path) -> set[Path]:
    """The run (or shard) folders of the mirror that a `capacity bench` on this host is
    writing now (its meta.json says running and its process is alive): a reader neither
    deletes nor replaces their files, which the writer has not uploaded yet."""
    live: set[Path] = set()
    if not dest.is_dir():
        return live
    for meta_path in [*dest.glob("*/*/meta.json"), *dest.glob("*/*/shard-*of*/meta.json")]:
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if (isinstance(meta, dict) and meta.get("status") == RunStatus.RUNNING
                and owner_alive(meta.get("owner"))):
            live.add(meta_path.parent)
    return live


def _is_404(exc: Exception) -> bool:
    return _error_code(exc) in ("404", "NoSuchKey")


def _download(s3: Any, bucket: str, key: str, path: Path, mtime: float) -> None:
    """Fetch one object to `path` atomically: into a temporary file of a name no other reader
    uses, given the object's time, then renamed over `path` (`os.replace`), so concurrent
    readers of one mirror never see, or remove, each other's half-written files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    try:
        s3.download_file(bucket, key, tmp)
        os.utime(tmp, (mtime, mtime))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def pull(root: str | os.PathLike[str], client: Any = None,
         warnings: list[str] | None = None) -> Path:
    """Mirror the run files under `s3://bucket/prefix` into `cache_dir(root)`; returns it.

    Objects are fetched only when missing locally or different in size or time; a local file
    is given its object's modification time (so the store's Parquet-vs-CSV freshness rule holds
    on the mirror); local files whose object is gone are removed. Each download is atomic
    (`_download`), so readers may share a mirror. A key that cannot be mirrored (a label or
    run id no run can have, a path outside the mirror, a name the filesystem refuses, an
    object gone since it was listed) is skipped with a line in `warnings`, and the rest is
    read. The files of a run that a `capacity bench` on this host is writing into the mirror
    are left as they are (`_live_runs`)."""
    bucket, prefix = parse_url(root)
    dest = cache_dir(root)
    s3 = client or _client()
    base = f"{prefix}/" if prefix else ""
    seen: set[Path] = set()
    live = _live_runs(dest)
    notes = warnings if warnings is not None else []

    def skip(key: str, why: str) -> None:
        notes.append(f"skipped s3://{bucket}/{key[:MAX_KEY_SHOWN]}: {why}")

    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base)
        for page in pages:
            for obj in page.get("Contents", []):
                key = str(obj["Key"])
                rel = key[len(base):]
                if not RUN_FILE_RE.match(rel):
                    continue  # not a run file (the bucket may hold anything else)
                why = _key_problem(rel)
                path = dest / rel
                if why is None and not _inside(path, dest):
                    why = "its local path would be outside the mirror"
                if why is not None:
                    skip(key, why)
                    continue
                seen.add(path)
                if path.parent in live:
                    continue
                mtime = obj["LastModified"].timestamp()
                try:
                    st = path.stat()
                    if st.st_size == obj["Size"] and abs(st.st_mtime - mtime) < 1e-3:
                        continue
                except OSError:
                    pass
                try:
                    _download(s3, bucket, key, path, mtime)
                except OSError as exc:  # this key only: a name too long, a full disk...
                    skip(key, f"cannot write {path.name} in the mirror "
                              f"({exc.strerror or type(exc).__name__})")
                except Exception as exc:
                    if not _is_404(exc):
                        raise
                    skip(key, "deleted since it was listed")
    except InputError:
        raise
    except Exception as exc:  # botocore's errors: one line, no credentials
        raise _fail("read", bucket, exc) from None
    if dest.is_dir():
        for path in dest.rglob("*"):
            if (path.is_file() and not path.is_symlink() and path not in seen
                    and path.parent not in live
                    and RUN_FILE_RE.match(path.relative_to(dest).as_posix())):
                path.unlink(missing_ok=True)
    return dest


def claim_run(root: str | os.PathLike[str], run_rel: str, client: Any = None) -> None:
    """Take the folder `run_rel` (`<label>/<run_id>` or `<label>/<run_id>/shard-<i>of<N>`)
    under `s3://bucket/prefix` for one writer, before it uploads anything; InputError when
    it is taken: objects are there already (an earlier run, or another client, with this
    run id and shard), or another writer put its claim first. The claim is a conditional
    write (`If-None-Match: *`), read back to check that it is this writer's (a server that
    ignores the condition, or refuses it as not implemented and takes a plain write)."""
    bucket, prefix = parse_url(root)
    s3 = client or _client()
    base = f"{prefix}/" if prefix else ""
    folder = f"{base}{run_rel.strip('/')}/"
    parts = run_rel.strip("/").split("/")
    where = f"s3://{bucket}/{folder}"
    taken = InputError(f"run '{parts[1] if len(parts) > 1 else run_rel}'"
                       + (f" {parts[2]}" if len(parts) > 2 else "")
                       + f" is already in {where[:MAX_KEY_SHOWN]} (an earlier run, or another "
                         "client writing the same --run-id and --shard): pick another --run-id "
                         "or shard; nothing was overwritten")
    token = os.urandom(16).hex()
    try:
        found = s3.list_objects_v2(Bucket=bucket, Prefix=folder, MaxKeys=1).get("KeyCount", 0)
        if found:
            raise taken
        if len(parts) > 2:  # a shard: a whole run with this id takes the id too
            whole = f"{base}{parts[0]}/{parts[1]}/"
            for name in ("meta.json", CLAIM_NAME):
                if s3.list_objects_v2(Bucket=bucket, Prefix=whole + name,
                                      MaxKeys=1).get("KeyCount", 0):
                    raise taken
        body = json.dumps({"token": token, "host": socket.gethostname(),
                           "pid": os.getpid()}).encode()
        try:
            s3.put_object(Bucket=bucket, Key=folder + CLAIM_NAME, Body=body, IfNoneMatch="*")
        except Exception as exc:
            code = _error_code(exc)
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                raise taken from None
            if code not in ("NotImplemented", "501", "InvalidArgument", "InvalidRequest"):
                raise
            # a server without conditional writes: claimed plainly, checked by reading back
            s3.put_object(Bucket=bucket, Key=folder + CLAIM_NAME, Body=body)
        got = s3.get_object(Bucket=bucket, Key=folder + CLAIM_NAME)["Body"].read()
        try:
            theirs = json.loads(got)
        except ValueError:
            theirs = None
        if not isinstance(theirs, dict) or theirs.get("token") != token:
            raise taken
    except InputError:
        raise
    except Exception as exc:
        raise _fail("write to", bucket, exc) from None


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
