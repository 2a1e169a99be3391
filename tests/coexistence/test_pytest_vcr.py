"""pytest-toolnexus beside pytest-vcr: no option, marker or fixture collides, and both record
and replay in one run."""

import socket

import pytest

SERVER = """
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
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
        HITS.append(body["via"])
        data = json.dumps({"echo": body["via"]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="session")
def server():
    httpd = Server(("127.0.0.1", PORT), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{PORT}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def post(server):
    def send(via):
        with httpx.Client() as client:
            return client.post(f"{server}/echo", json={"via": via}).json()["echo"]

    return send


def pytest_sessionfinish(session):
    print("HITS", sorted(HITS))  # sorted: which plugin's test runs first is not the point
"""

BOTH = """
import pytest


@pytest.mark.vcr
def test_through_pytest_vcr(post):
    assert post("vcr") == "vcr"


@pytest.mark.cassette
def test_through_toolnexus(post):
    assert post("toolnexus") == "toolnexus"
"""


@pytest.fixture
def project(pytester):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytester.makeconftest(f"PORT = {port}\n" + SERVER)
    pytester.makepyfile(test_both=BOTH)
    return pytester


def test_help_lists_both_plugins_options(project):
    result = project.runpytest_subprocess("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--vcr-record={once,new_episodes,none,all}*"])
    result.stdout.fnmatch_lines(["*--cassette-record={none,once,new,all}*"])


def test_both_plugins_record_then_replay_in_one_run(project):
    recorded = project.runpytest_subprocess(
        "--vcr-record=once", "--cassette-record=once", "-s", "-p", "no:cacheprovider"
    )
    replayed = project.runpytest_subprocess("--vcr-record=none", "-s", "-p", "no:cacheprovider")

    recorded.assert_outcomes(passed=2)
    assert "HITS ['toolnexus', 'vcr']" in recorded.stdout.str()
    replayed.assert_outcomes(passed=2)
    assert "HITS []" in replayed.stdout.str()
    replayed.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 0 recorded*"])
    assert list(project.path.glob("cassettes/test_both/test_through_toolnexus.msgpack"))
    assert list(project.path.glob("cassettes/test_through_pytest_vcr.yaml"))
