"""A TLS endpoint in front of a plain HTTP server, as a team's Caddy or nginx is (docs/team-server.md).

It listens on 127.0.0.1 with a certificate that a certificate authority
made for the test signs (`trustme`), ends TLS, and passes the bytes both
ways to the server behind it, one thread per direction. The authority's PEM
file is what a client names in ``remoteCaFile``.
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import trustme


class TLSProxy:
    """``https://127.0.0.1:PORT`` in front of ``upstream`` (``(host, port)``); ``ca_file``: its authority's PEM."""

    def __init__(self, upstream: tuple[str, int], directory: Path) -> None:
        authority = trustme.CA()
        self.ca_file = directory / "team-ca.pem"
        authority.cert_pem.write_to_path(str(self.ca_file))
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        authority.issue_cert("127.0.0.1", "localhost").configure_cert(self._context)
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            secure = self._context.wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError):  # a client that does not trust the certificate hangs up here
            client.close()
            return
        server = socket.create_connection(self.upstream)
        back = threading.Thread(target=_pipe, args=(server, secure), daemon=True)
        back.start()
        _pipe(secure, server)
        back.join()
        for end in (secure, server):  # closed once neither direction's thread uses them
            end.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()

    def __enter__(self) -> TLSProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    """Copy ``source`` to ``target`` until either end closes; then shut both down, which ends the other
    direction's copy too. Neither is closed here: a socket closed while the other thread still reads or writes
    it frees its descriptor, a connection the test opens meanwhile (to the server, without the proxy) can be
    given the same number, and that thread then reads or writes the test's connection (llama-server answered
    such a connection HTTP 400, a bare request line spoilt)."""
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
