"""A fake Gemini Live server on loopback, speaking the public BidiGenerateContent protocol
(ai.google.dev/api/live): ``setup`` -> ``setupComplete``; ``clientContent`` -> the model's
turn as ``serverContent.modelTurn.parts`` chunks, then ``serverContent.turnComplete``, or a
``toolCall`` when the user asks for the weather; ``toolResponse`` -> the answer that uses it.

:func:`start` runs it in a thread with its own event loop; pytester projects get this file's
source as a module.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
from pathlib import Path

from websockets.asyncio.server import serve

GAP = 0.015
THINK = 0.0
"""Seconds the server thinks before each answer."""


async def _say(ws, words):
    await asyncio.sleep(THINK)
    for word in words:
        await asyncio.sleep(GAP)
        await ws.send(
            json.dumps(
                {"serverContent": {"modelTurn": {"role": "model", "parts": [{"text": word}]}}}
            )
        )
    await asyncio.sleep(GAP)
    await ws.send(json.dumps({"serverContent": {"turnComplete": True}}))


async def _session(ws):
    async for message in ws:
        event = json.loads(message)
        if "setup" in event:
            await ws.send(json.dumps({"setupComplete": {}}))
        elif "clientContent" in event or "client_content" in event:  # Vertex spells it so
            if "weather" in json.dumps(event).lower():
                await asyncio.sleep(THINK)
                call = {"id": "call_1", "name": "weather", "args": {"city": "Paris"}}
                await ws.send(json.dumps({"toolCall": {"functionCalls": [call]}}))
            else:
                await _say(ws, ["Hi ", "there!"])
        elif "toolResponse" in event or "tool_response" in event:
            await _say(ws, ["It ", "is ", "sunny."])


def tls_files(folder=None):
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files in ``folder`` (a new
    temporary one by default): ``(cert file, key file)``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = Path(tempfile.mkdtemp()) if folder is None else Path(folder)
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def tls():
    """A self-signed certificate for 127.0.0.1: ``(server context, client context)``. The
    google-genai SDK connects to Live over TLS only (it always hands ``connect`` an SSL
    context), so the fake server speaks wss."""
    cert_file, key_file = tls_files()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


def start(port=0, ssl_context=None):
    """Start the server on 127.0.0.1 in a thread (over TLS with ``ssl_context``); returns
    ``(port, stop)``."""
    ready = threading.Event()
    box = {}

    def run():
        async def main():
            box["stop"] = asyncio.Event()
            async with serve(_session, "127.0.0.1", port, ssl=ssl_context) as server:
                box["port"] = server.sockets[0].getsockname()[1]
                ready.set()
                await box["stop"].wait()

        box["loop"] = asyncio.new_event_loop()
        box["loop"].run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)

    def stop():
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)

    return box["port"], stop
