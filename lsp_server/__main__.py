"""``cpc-lsp``: start the language server over stdio (default) or TCP (loopback unless allowed)."""

from __future__ import annotations

import argparse
import ipaddress
import socket
from collections.abc import Sequence

from lsp_server import logs
from lsp_server.server import build_server

LOOPBACK = "127.0.0.1"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="cpc-lsp", description="CPC inline-completion language server")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (default)")
    transport.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        help=f"listen on a TCP address; HOST must be a loopback address ({LOOPBACK}, ::1, localhost; "
        f"{LOOPBACK} when left out) unless --allow-remote is given",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --tcp listen on a non-loopback address: anyone who reaches it can read what the editor sends",
    )
    parser.add_argument("--model", help="GGUF model path, or 'default' / 'smollm2'")
    parser.add_argument("--log-file", help="write the server's log here (no document text unless logDocuments is set)")
    args = parser.parse_args(argv)
    address = _tcp_address(parser, args.tcp, args.allow_remote) if args.tcp else None
    logs.setup(args.log_file)
    server = build_server(model=args.model)
    if address:
        server.start_tcp(*address)
    else:
        server.start_io()


def _tcp_address(parser: argparse.ArgumentParser, value: str, allow_remote: bool) -> tuple[str, int]:
    """``HOST:PORT`` checked: a port number, and a loopback host unless remote access is allowed."""
    host, colon, port = value.rpartition(":")
    host = host.strip("[]") or LOOPBACK  # [::1]:2087 is how an IPv6 address takes a port
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        parser.error(f"--tcp takes HOST:PORT with a port from 0 to 65535 (got {value!r})")
    if not allow_remote and not _is_loopback(host):
        parser.error(
            f"--tcp {value}: {host} is not a loopback address, so other machines could connect and read "
            f"your documents; use {LOOPBACK}:{port}, or add --allow-remote to listen there anyway"
        )
    return host, int(port)


def _is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(entry[4][0].split("%")[0]).is_loopback for entry in found)


if __name__ == "__main__":
    main()
