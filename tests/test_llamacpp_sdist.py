"""Where the llama-server build gets its source (capacity.bench.llamacpp, issue 31): the sdist
and its sha256 from the simple index (PEP 691 JSON, PEP 503 HTML), a tarball put into the cache
by hand checked against that digest or, offline, a `.sha256` file beside it.

Every test runs against a loopback HTTP server on 127.0.0.1 serving a fake index and a fake
tarball; none contacts the real PyPI."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from capacity.bench import llamacpp

VERSION = "9.9.9"
FILENAME = f"llama_cpp_python-{VERSION}.tar.gz"


def _tarball() -> bytes:
    """A fake sdist: the vendored llama.cpp tree with a CMakeLists.txt, nothing else."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        body = b"cmake_minimum_required(VERSION 3.14)\n"
        info = tarfile.TarInfo(f"llama_cpp_python-{VERSION}/vendor/llama.cpp/CMakeLists.txt")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


TARBALL = _tarball()
SHA = hashlib.sha256(TARBALL).hexdigest()
OTHER_SHA = hashlib.sha256(b"another file").hexdigest()


@dataclass
class FakeIndex:
    """What the loopback server answers: the index page as JSON or HTML (or a status), the
    tarball; and the Accept headers it was asked with."""

    mode: str = "json"
    """'json' (PEP 691 when asked for), 'html' (an index without PEP 691), 'not-json' (a JSON
    content type over an empty body) or 'missing' (404)."""
    listed_sha: str = SHA
    accepts: list[str] = field(default_factory=list)
    downloads: int = 0
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple/"

    def page(self) -> tuple[int, str, bytes]:
        files = [  # another version and a wheel first: only the sdist of VERSION is taken
            {"filename": "llama_cpp_python-0.1.0.tar.gz", "url": "../../files/old.tar.gz",
             "hashes": {"sha256": OTHER_SHA}},
            {"filename": f"llama_cpp_python-{VERSION}-py3-none-any.whl",
             "url": "../../files/x.whl", "hashes": {"sha256": OTHER_SHA}},
            {"filename": FILENAME, "url": f"../../files/{FILENAME}",
             "hashes": {"sha256": self.listed_sha}},
        ]
        if self.mode == "missing":
            return 404, "text/html", b"<html>Not Found</html>"
        if self.mode == "not-json":
            return 200, "application/vnd.pypi.simple.v1+json", b""
        if self.mode == "json" and "application/vnd.pypi.simple.v1+json" in self.accepts[-1]:
            doc = {"meta": {"api-version": "1.1"}, "name": "llama-cpp-python", "files": files}
            return 200, "application/vnd.pypi.simple.v1+json", json.dumps(doc).encode()
        anchors = "".join(f'<a href="{f["url"]}#sha256={f["hashes"]["sha256"]}">'
                          f'{f["filename"]}</a><br/>\n' for f in files)
        html = f"<!DOCTYPE html><html><body>\n{anchors}</body></html>"
        return 200, "text/html", html.encode()


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeIndex]:
    """A fake simple index on 127.0.0.1 and an empty cache (no proxy in between)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CAPACITY_CACHE_DIR", str(tmp_path / "cache"))
    fake = FakeIndex()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/simple/llama-cpp-python/":
                fake.accepts.append(self.headers.get("Accept", ""))
                status, kind, body = fake.page()
            elif self.path == f"/files/{FILENAME}":
                fake.downloads += 1
                status, kind, body = 200, "application/octet-stream", TARBALL
            else:
                status, kind, body = 404, "text/plain", b"no such file"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def _closed_port_url() -> str:
    """An index that cannot be reached: a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple/"


def test_the_sdist_and_its_sha256_come_from_the_json_simple_index(index: FakeIndex) -> None:
    found = llamacpp.find_sdist(VERSION, index_url=index.url)
    assert found == llamacpp.Sdist(url=f"http://127.0.0.1:{index.port}/files/{FILENAME}",
                                   filename=FILENAME, sha256=SHA)
    assert index.accepts[0].startswith("application/vnd.pypi.simple.v1+json")


def test_an_index_without_json_is_read_as_html(index: FakeIndex) -> None:
    index.mode = "html"
    found = llamacpp.find_sdist(VERSION, index_url=index.url)
    assert (found.filename, found.sha256) == (FILENAME, SHA)
    assert found.url == f"http://127.0.0.1:{index.port}/files/{FILENAME}"


def test_a_404_names_the_status_and_the_url(index: FakeIndex) -> None:
    index.mode = "missing"
    with pytest.raises(llamacpp.LlamaCppError) as err:
        llamacpp.find_sdist(VERSION, index_url=index.url)
    assert str(err.value) == (f"cannot read {index.url}llama-cpp-python/: HTTP 404 Not Found")


def test_a_reply_that_is_not_json_names_the_status_and_the_url(index: FakeIndex) -> None:
    index.mode = "not-json"
    with pytest.raises(llamacpp.LlamaCppError, match=r"cannot read http://127\.0\.0\.1:\d+/"
                       r"simple/llama-cpp-python/: HTTP 200 OK .*, but not JSON"):
        llamacpp.find_sdist(VERSION, index_url=index.url)


def test_a_version_the_index_does_not_list_is_named(index: FakeIndex) -> None:
    with pytest.raises(llamacpp.LlamaCppError, match="lists no sdist of llama-cpp-python 8.8.8"):
        llamacpp.find_sdist("8.8.8", index_url=index.url)


def test_the_sdist_is_downloaded_checked_unpacked_and_its_digest_kept(
        index: FakeIndex) -> None:
    src = llamacpp.fetch_source(VERSION, index_url=index.url)
    assert src == llamacpp.source_dir(VERSION) and (src / "CMakeLists.txt").is_file()
    tarball = llamacpp.version_dir(VERSION) / FILENAME
    assert tarball.read_bytes() == TARBALL and index.downloads == 1
    assert llamacpp.sha256_file(tarball).read_text() == f"{SHA}  {FILENAME}\n"
    assert llamacpp.fetch_source(VERSION, index_url=index.url) == src  # unpacked: no request
    assert index.downloads == 1


def test_a_download_whose_sha256_differs_is_refused_and_not_kept(index: FakeIndex) -> None:
    index.listed_sha = OTHER_SHA
    with pytest.raises(llamacpp.LlamaCppError, match=f"sha256 {SHA} is not the {OTHER_SHA}"):
        llamacpp.fetch_source(VERSION, index_url=index.url)
    assert list(llamacpp.version_dir(VERSION).iterdir()) == []


def _by_hand(data: bytes = TARBALL) -> Path:
    tarball = llamacpp.version_dir(VERSION) / FILENAME
    tarball.parent.mkdir(parents=True)
    tarball.write_bytes(data)
    return tarball


def test_a_tarball_put_in_the_cache_by_hand_is_checked_against_the_index(
        index: FakeIndex) -> None:
    _by_hand()
    assert (llamacpp.fetch_source(VERSION, index_url=index.url) / "CMakeLists.txt").is_file()
    assert index.downloads == 0 and len(index.accepts) == 1


def test_a_tarball_by_hand_that_the_index_disowns_is_refused_and_kept(
        index: FakeIndex) -> None:
    tarball = _by_hand(TARBALL + b"tampered")
    with pytest.raises(llamacpp.LlamaCppError, match="is not the .* of http://127.0.0.1"):
        llamacpp.fetch_source(VERSION, index_url=index.url)
    assert tarball.is_file() and not llamacpp.source_dir(VERSION).exists()


def test_offline_a_tarball_by_hand_is_checked_against_its_sha256_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_CACHE_DIR", str(tmp_path / "cache"))
    offline = _closed_port_url()
    tarball = _by_hand()
    llamacpp.sha256_file(tarball).write_text(f"{OTHER_SHA}  {FILENAME}\n")
    with pytest.raises(llamacpp.LlamaCppError, match=f"not the {OTHER_SHA} of .*\\.sha256"):
        llamacpp.fetch_source(VERSION, index_url=offline)
    llamacpp.sha256_file(tarball).write_text(SHA.upper() + "\n")  # a bare digest is read too
    assert (llamacpp.fetch_source(VERSION, index_url=offline) / "CMakeLists.txt").is_file()


def test_offline_a_tarball_by_hand_without_a_sha256_file_is_refused_with_how_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_CACHE_DIR", str(tmp_path / "cache"))
    offline = _closed_port_url()
    tarball = _by_hand()
    with pytest.raises(llamacpp.LlamaCppError) as err:
        llamacpp.fetch_source(VERSION, index_url=offline)
    msg = str(err.value)
    assert f"{tarball} cannot be checked: cannot read {offline}llama-cpp-python/" in msg
    assert f"no {FILENAME}.sha256 beside it" in msg
    assert f"into {llamacpp.sha256_file(tarball)} (64 hex digits)" in msg
    assert not llamacpp.source_dir(VERSION).exists()
    llamacpp.sha256_file(tarball).write_text("not a digest\n")
    with pytest.raises(llamacpp.LlamaCppError, match=r"holds no sha256"):
        llamacpp.fetch_source(VERSION, index_url=offline)


def test_the_index_page_and_sdist_names_follow_pep_503() -> None:
    assert llamacpp.index_page() == "https://pypi.org/simple/llama-cpp-python/"
    assert llamacpp.index_page("Llama_CPP.python", "http://mirror/simple") == (
        "http://mirror/simple/llama-cpp-python/")
    html = ('<a href="https://files.example/llama-cpp-python-1.0.tar.gz#sha256=' + SHA
            + '" data-requires-python="&gt;=3.8">llama-cpp-python-1.0.tar.gz</a>'
            '<a href="/x/llama_cpp_python-1.0.tar.gz#md5=00">llama_cpp_python-1.0.tar.gz</a>')
    found = llamacpp.sdist_from_html(html, base_url="https://idx/simple/p/", version="1.0")
    assert found is not None and found.sha256 == SHA  # the older spelling of the name
    assert llamacpp.sdist_from_html(html, base_url="https://i/", version="1.1") is None
    assert llamacpp.sdist_from_json({"files": "nonsense"}, base_url="https://i/") is None
