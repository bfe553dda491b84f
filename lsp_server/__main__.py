"""``cpc-lsp``: start the language server over stdio (default) or TCP."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from lsp_server.server import build_server


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="cpc-lsp", description="CPC inline-completion language server")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (default)")
    transport.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP address")
    parser.add_argument("--model", help="GGUF model path, or 'default' / 'smollm2'")
    parser.add_argument("--log-file", help="write the server's log here")
    args = parser.parse_args(argv)
    if args.log_file:
        logging.basicConfig(filename=args.log_file, level=logging.INFO)
    server = build_server(model=args.model)
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()


if __name__ == "__main__":
    main()
