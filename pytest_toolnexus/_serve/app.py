"""``pytest-toolnexus serve``: the aiohttp application and its life, from launch to a signal.

aiohttp's web server, not ``http.server``: replay answers with streams whose pieces go out
over seconds, for many clients at once, and its clock waits are ``await``s, so one asyncio
loop serves every connection while each stream sleeps; aiohttp writes each piece as it is
given (chunked, no buffering) and is already among the bridges' optional dependencies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import ssl
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from aiohttp import web

from pytest_toolnexus._seam.errors import CassetteError

from .answer import answer, asks_websocket, log
from .catalog import Catalog, ServeOptions
from .control import PREFIX, control, report_of
from .sockets import close_at_shutdown

__all__ = [
    "TLSFilesError",
    "base_url",
    "listen",
    "log_to",
    "make_app",
    "run",
    "serve_forever",
    "server_tls",
    "write_atomically",
]

_CATALOG = web.AppKey("catalog", Catalog)


def make_app(catalog: Catalog) -> web.Application:
    """The application serving ``catalog``: the control API, and every other path replayed."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path.startswith(PREFIX):
            return await control(catalog, request)
        if asks_websocket(request):
            # Imported with the first WebSocket: a server of HTTP cassettes never loads it.
            from .websocket import answer_websocket

            return await answer_websocket(catalog, request)
        return await answer(catalog, request)

    app = web.Application(client_max_size=1 << 30)
    app[_CATALOG] = catalog
    close_at_shutdown(app)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def base_url(host: str, port: int, *, tls: bool = False) -> str:
    scheme = "https" if tls else "http"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def server_tls(cert: Path, key: Path) -> ssl.SSLContext:
    """The TLS context a server answers with, from a certificate chain and its private key
    (PEM files). Raises :class:`TLSFilesError`, saying which file and why, when they do not
    load."""
    for given, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise TLSFilesError(f"{given} {path}: no such file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        # A key under a passphrase is refused here, not asked for at the terminal.
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except _Encrypted:
        raise TLSFilesError(
            f"--tls-key {key} is encrypted with a passphrase, which serve cannot ask for: give "
            "it the key unencrypted (openssl pkey -in KEY -out PLAIN)"
        ) from None
    except (OSError, ssl.SSLError) as exc:
        raise TLSFilesError(
            f"cannot load --tls-cert {cert} with --tls-key {key}: {exc}. Give a PEM certificate "
            "(chain) for the address the clients connect to and its private key"
        ) from None
    return context


class TLSFilesError(Exception):
    """The certificate or key given for TLS cannot be loaded."""


class _Encrypted(Exception):
    pass


def _no_passphrase() -> bytes:
    raise _Encrypted


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)  # a failed write leaves nothing beside ``path``
        raise


async def listen(
    app: web.Application,
    *,
    host: str,
    port: int,
    url_file: Path | None,
    out: TextIO,
    stop: asyncio.Event | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Serve ``app`` until SIGINT or SIGTERM (or ``stop``), then close every connection and
    return. The base URL is printed on one line once it listens, and written to ``url_file``.
    With ``tls``, it answers HTTPS (and WSS) only."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for number in signals:
        loop.add_signal_handler(number, stop.set)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=4096, shutdown_timeout=1.0, ssl_context=tls)
        await site.start()
        url = base_url(host, runner.addresses[0][1], tls=tls is not None)
        if url_file is not None:
            write_atomically(url_file, url + "\n")
        print(url, file=out, flush=True)
        await stop.wait()
    finally:
        for number in signals:
            loop.remove_signal_handler(number)
        await runner.cleanup()


async def serve_forever(
    catalog: Catalog,
    *,
    host: str,
    port: int,
    url_file: Path | None,
    out: TextIO,
    report_file: Path | None = None,
    stop: asyncio.Event | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Serve ``catalog`` until a signal, then write the report (``GET /_toolnexus/report``'s)
    to ``report_file`` when one is given."""
    try:
        app = make_app(catalog)
        await listen(app, host=host, port=port, url_file=url_file, out=out, stop=stop, tls=tls)
    finally:
        if report_file is not None:
            write_atomically(report_file, json.dumps(report_of(catalog), indent=1) + "\n")


def log_to(err: TextIO) -> None:
    """Send the server's log (misses, broken connections) to ``err``."""
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("pytest-toolnexus: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False


def run(
    paths: Sequence[Path],
    options: ServeOptions,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    url_file: Path | None = None,
    report_file: Path | None = None,
    tls: tuple[Path, Path] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """The ``serve`` command: 0 after a clean shutdown, 2 when a cassette cannot be served.
    ``tls`` (a certificate chain and its key) makes it answer HTTPS and WSS."""
    log_to(err)
    catalog = Catalog(options)
    try:
        context = None if tls is None else server_tls(*tls)
        catalog.load(paths)
    except (CassetteError, TLSFilesError) as exc:
        print(f"error: {exc}", file=err)
        return 2
    try:
        asyncio.run(
            serve_forever(
                catalog,
                host=host,
                port=port,
                url_file=url_file,
                report_file=report_file,
                out=out,
                tls=context,
            )
        )
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc}", file=err)
        return 2
    return 0
