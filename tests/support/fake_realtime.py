"""A fake OpenAI Realtime server on loopback, speaking the public event protocol of the GA
Realtime API (platform.openai.com/docs/api-reference/realtime): ``session.created`` on connect,
``session.update`` -> ``session.updated``, ``conversation.item.create`` ->
``conversation.item.added``, and ``response.create`` -> a text turn
(``response.output_text.delta``), an audio turn (base64 ``response.output_audio.delta`` chunks
with their transcript) or a function call (``response.function_call_arguments.delta``), each
ending in ``response.done``. Events come a few ms apart, as a live server's do.

Tests start it with :func:`start` (a thread running its own event loop) and stop it with the
returned ``stop``; pytester projects get this file's source as a module.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import threading

from websockets.asyncio.server import serve

GAP = 0.015
"""Seconds between two events of one answer."""

THINK = 0.0
"""Seconds the server thinks before each answer (``response.created``)."""

AUDIO = [bytes([n]) * 48 for n in range(3)]
"""The audio turn's PCM chunks, sent base64 encoded."""

_ids = itertools.count(1)


def _event(kind, **fields):
    return json.dumps({"type": kind, "event_id": f"event_{next(_ids)}", **fields})


async def _answer(ws, items, modalities):
    last = items[-1] if items else {}
    response = {"id": f"resp_{next(_ids)}", "object": "realtime.response", "status": "in_progress"}
    await asyncio.sleep(THINK)
    await ws.send(_event("response.created", response=response))
    await asyncio.sleep(GAP)
    text = ""
    if last.get("type") == "message" and "weather" in json.dumps(last):
        call = {"type": "function_call", "id": "item_call", "call_id": "call_1", "name": "weather"}
        await ws.send(
            _event(
                "response.output_item.added", response_id=response["id"], output_index=0, item=call
            )
        )
        for piece in ('{"city":', '"Paris"}'):
            await asyncio.sleep(GAP)
            await ws.send(
                _event(
                    "response.function_call_arguments.delta",
                    response_id=response["id"],
                    item_id="item_call",
                    output_index=0,
                    call_id="call_1",
                    delta=piece,
                )
            )
        await ws.send(
            _event(
                "response.function_call_arguments.done",
                response_id=response["id"],
                item_id="item_call",
                output_index=0,
                call_id="call_1",
                name="weather",
                arguments='{"city":"Paris"}',
            )
        )
    elif "audio" in modalities:
        for chunk in AUDIO:
            await asyncio.sleep(GAP)
            await ws.send(
                _event(
                    "response.output_audio.delta",
                    response_id=response["id"],
                    item_id="item_audio",
                    output_index=0,
                    content_index=0,
                    delta=base64.b64encode(chunk).decode(),
                )
            )
        for piece in ("Hello ", "there"):
            await ws.send(
                _event(
                    "response.output_audio_transcript.delta",
                    response_id=response["id"],
                    item_id="item_audio",
                    output_index=0,
                    content_index=0,
                    delta=piece,
                )
            )
            text += piece
        await ws.send(
            _event(
                "response.output_audio.done",
                response_id=response["id"],
                item_id="item_audio",
                output_index=0,
                content_index=0,
            )
        )
    else:
        answer = "It is sunny." if last.get("type") == "function_call_output" else "Hi there!"
        for piece in answer.split(" "):
            await asyncio.sleep(GAP)
            await ws.send(
                _event(
                    "response.output_text.delta",
                    response_id=response["id"],
                    item_id="item_text",
                    output_index=0,
                    content_index=0,
                    delta=piece + " ",
                )
            )
            text += piece + " "
        await ws.send(
            _event(
                "response.output_text.done",
                response_id=response["id"],
                item_id="item_text",
                output_index=0,
                content_index=0,
                text=text,
            )
        )
    await asyncio.sleep(GAP)
    done = {**response, "status": "completed", "output": []}
    await ws.send(_event("response.done", response=done))


async def _session(ws):
    items = []
    modalities = ["text"]
    await ws.send(_event("session.created", session={"type": "realtime", "model": "gpt-realtime"}))
    async for message in ws:
        event = json.loads(message)
        kind = event.get("type")
        if kind == "session.update":
            session = event.get("session", {})
            modalities = session.get("output_modalities", modalities)
            await ws.send(_event("session.updated", session={"type": "realtime", **session}))
        elif kind == "conversation.item.create":
            item = {"id": f"item_{next(_ids)}", **event["item"]}
            items.append(item)
            await ws.send(_event("conversation.item.added", item=item))
        elif kind == "response.create":
            asked = (event.get("response") or {}).get("output_modalities", modalities)
            await _answer(ws, items, asked)


def start(port=0):
    """Start the server on 127.0.0.1 in a thread; returns ``(port, stop)``."""
    return _start(_session, port)


def start_refusing(status, port=0):
    """Start a server that refuses every handshake with HTTP ``status`` and a short text body,
    as an API does a key it does not take; returns ``(port, stop)``."""

    def refuse(connection, request):
        return connection.respond(status, "refused by the fake Realtime server\n")

    return _start(_session, port, process_request=refuse)


def start_slow(seconds, port=0):
    """Start the server, each handshake answered ``seconds`` late; returns ``(port, stop)``."""

    async def late(connection, request):
        await asyncio.sleep(seconds)

    return _start(_session, port, process_request=late)


def start_raw(answer, port=0):
    """Start a loopback TCP server that reads a request's head and writes ``answer`` (bytes)
    back, then holds the connection until the client closes it: a server that breaks the
    protocol in a way no WebSocket library would. Returns ``(port, stop)``."""

    async def serve_one(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        await reader.read()
        writer.close()

    @contextlib.asynccontextmanager
    async def opened():
        server = await asyncio.start_server(serve_one, "127.0.0.1", port)
        async with server:
            yield server.sockets[0].getsockname()[1]

    return _in_thread(opened)


def _start(handler, port, **options):
    @contextlib.asynccontextmanager
    async def opened():
        async with serve(handler, "127.0.0.1", port, **options) as server:
            yield server.sockets[0].getsockname()[1]

    return _in_thread(opened)


def _in_thread(opened):
    """Run the server ``opened()`` opens (an async context manager giving its port) on a loop
    of its own, in a thread, until ``stop`` is called; returns ``(port, stop)``."""
    ready = threading.Event()
    box = {}

    async def main():
        box["stop"] = asyncio.Event()
        async with opened() as port:
            box["port"] = port
            ready.set()
            await box["stop"].wait()

    def run():
        box["loop"] = asyncio.new_event_loop()
        box["loop"].run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)

    def stop():
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)

    return box["port"], stop
