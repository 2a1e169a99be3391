"""The marker under pytest-asyncio, and the google-genai SDK served with no change to it."""

import socket

import pytest

pytest_plugins = ["pytester"]

SERVER = """
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

HITS = []


class Server(ThreadingHTTPServer):
    allow_reuse_address = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        HITS.append(self.path)
        if self.path.endswith(":generateContent"):
            reply = {
                "candidates": [
                    {"content": {"parts": [{"text": "genai says hi"}], "role": "model"},
                     "finishReason": "STOP", "index": 0}
                ],
                "modelVersion": "gemini-2.5-flash",
            }
        else:
            reply = {"echo": body}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="session")
def server():
    # The same port in both runs, so the recorded URL is the replayed one.
    httpd = Server(("127.0.0.1", PORT), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def hits():
    return HITS
"""

ASYNCIO_TEST = """
import httpx
import pytest


@pytest.mark.asyncio
@pytest.mark.cassette
async def test_async_client(cassette, server, hits):
    async with httpx.AsyncClient() as client:
        reply = await client.post(f"{server}/v1/echo", json={"n": 1})
    assert reply.json() == {"echo": {"n": 1}}
    assert cassette.requests[0].status == 200
    print("HITS", len(hits))
"""

GENAI_TEST = """
import os

import pytest
from google import genai


@pytest.mark.cassette
def test_generate(cassette, server, hits):
    client = genai.Client(api_key="test-key", http_options={"base_url": server})
    reply = client.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    assert reply.text == "genai says hi"
    assert cassette.requests[0].url.endswith(":generateContent")
    print("HITS", len(hits))
"""


@pytest.mark.parametrize("source", [ASYNCIO_TEST, GENAI_TEST], ids=["pytest-asyncio", "genai"])
def test_records_then_replays_without_the_server(pytester, source):
    # Given a project whose test talks to a loopback server through an unmodified client
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytester.makeconftest(f"PORT = {port}\n" + SERVER)
    pytester.makepyfile(test_it=source)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")

    # When it runs once recording, then again replaying
    recorded = pytester.runpytest_subprocess(
        "--cassette-record=once", "-s", "-p", "no:cacheprovider"
    )
    replayed = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")

    # Then the first run reached the server, the second did not, and both passed
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(["*HITS 1*"])
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*HITS 0*", "*cassettes: 1 used, 1 replayed, 0 recorded*"])
    assert list(pytester.path.glob("cassettes/test_it/*.msgpack"))
