r"""The tests' data: copies of the development machine's offline datasets
(``../shared/data`` beside the repository, or ``GATE_SHARED_DATA``), and a
local HTTP server that serves them at the URLs PyG's dataset classes
download from.

Tests that need those files skip without them, saying which files and how
to provide them: a fresh clone has no ``../shared``.
"""

import contextlib
import functools
import http.server
import os
import os.path as osp
import shutil
import socket
import threading
import urllib.parse
from typing import Dict, Iterator

import pytest

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
#: The offline datasets, laid out as PyG's classes expect their roots
#: (``Planetoid/Cora/raw``, ``heterophilous/minesweeper/raw``, ...).
SHARED_DATA = os.environ.get('GATE_SHARED_DATA') or osp.join(
    ROOT, '..', 'shared', 'data'
)


def shared(*parts: str) -> str:
    return osp.join(SHARED_DATA, *parts)


def needs_shared(*parts: str):
    r"""Skips a test unless :obj:`SHARED_DATA/parts` exists."""
    path = shared(*parts)
    return pytest.mark.skipif(
        not osp.exists(path),
        reason=f'needs the offline dataset copy {path} (the ../shared/data '
        'folder of the development setup; set GATE_SHARED_DATA to a folder '
        'laid out as PyG roots to run it)',
    )


def copy_shared(part: str, dest) -> str:
    r"""Copies :obj:`SHARED_DATA/part` to :obj:`dest/part` (the tests never
    write into the shared folder); returns :obj:`dest`."""
    shutil.copytree(shared(part), osp.join(dest, part))
    return str(dest)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # fsspec closes its probing requests early


@contextlib.contextmanager
def serve(files: Dict[str, str], folder) -> Iterator[str]:
    r"""Serves the local files of :obj:`files` (URL path -> file) from
    :obj:`folder` (a copy) on ``127.0.0.1`` in a thread; yields the base
    URL, ``http://127.0.0.1:PORT``. The server stops on leaving."""
    for url_path, src in files.items():
        dest = osp.join(str(folder), url_path.lstrip('/'))
        os.makedirs(osp.dirname(dest), exist_ok=True)
        shutil.copyfile(src, dest)
    handler = functools.partial(_Quiet, directory=str(folder))
    server = _Server(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{server.server_port}'
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def local_url(base: str, url: str) -> str:
    r""":obj:`url` (a class's download URL) on the server at :obj:`base`,
    at the same path."""
    return base + urllib.parse.urlparse(url).path


def dead_url(url: str) -> str:
    r""":obj:`url` on a port of ``127.0.0.1`` that nothing listens on."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    return local_url(f'http://127.0.0.1:{port}', url)
