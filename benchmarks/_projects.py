"""Generated pytest projects for benchmarks 6 and 7, and running pytest on them in a subprocess.

A project is a folder with a ``pytest.ini``, test files and the cassettes its tests replay, in
the place each plugin looks by default: ``cassettes/<test module>/<test name>.msgpack`` under
the rootdir for pytest-toolnexus, ``cassettes/<test module>/<test name>.yaml`` beside the test
file for pytest-recording. Each test replays the requests of one ``Case``; the test code is the
same for every plugin but for the marker (and, for the ``MockTransport`` baseline, the client's
transport).

The request bodies and answers are made by the functions below whose source is also written
into the test files (``inspect.getsource``), so a test sends exactly what its cassette holds.
That is why the generator, the cassette writers and the test source share one module (a little
over 400 lines).
"""

from __future__ import annotations

import inspect
import json
import os
import random
import re
import resource
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from _common import now
from vcr.persisters.filesystem import FilesystemPersister
from vcr.request import Request as VcrRequest
from vcr.serializers import yamlserializer
from vcr.stubs.httpx_stubs import _serialize_response

from pytest_toolnexus import Cassette, Headers, Interaction, RecordedRequest, RecordedResponse
from pytest_toolnexus._store.cassette import JsonBody, SseBody, sse_event_doc
from pytest_toolnexus._store.streams import SseParser

URL = "https://api.openai.com/v1/chat/completions"

# -- what the tests send and get (this source is also written into every test file) ------------


def request_body(case: int, n: int, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a concise assistant for a test suite."},
            {"role": "user", "content": f"Case {case}, question {n}: what is next?"},
        ],
        "temperature": 0.2,
        "max_tokens": 256,
    }
    if stream:
        body["stream"] = True
    return body


def answer_doc(case: int, n: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{case}-{n}",
        "object": "chat.completion",
        "created": 1732000000 + case,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": f"Answer to case {case}, question {n}: " + "lorem ipsum " * 30,
                    "refusal": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 31, "completion_tokens": 60, "total_tokens": 91},
        "service_tier": "default",
        "system_fingerprint": "fp_0ba0d124f1",
    }


def answer_headers(case: int, n: int) -> list[tuple[str, str]]:
    return [
        ("date", "Tue, 19 Nov 2024 07:06:40 GMT"),
        ("content-type", "application/json"),
        ("x-request-id", f"req_{case:016x}{n:016x}"),
        ("openai-processing-ms", str(300 + (case * 7 + n) % 500)),
    ]


# ----------------------------------------------------------------------------------------------

_SSE_HEADERS = [
    ("date", "Tue, 19 Nov 2024 07:06:40 GMT"),
    ("content-type", "text/event-stream; charset=utf-8"),
    ("x-request-id", "req_5f2a9c0d1e3b4a6f8c7d9e0a1b2c3d4e"),
]

_WORDS = ("alpha", "bravo", "cache", "delta", "echo", "fjord", "gamma", "harbor", "index", "jitter")


@dataclass(frozen=True)
class Exchange:
    """One request of a test, answered with JSON or with ``events`` SSE chunks and [DONE]."""

    n: int
    events: int = 0  # 0: a JSON answer

    @property
    def stream(self) -> bool:
        return self.events > 0


@dataclass(frozen=True)
class Case:
    """One generated test: its number and the requests it sends, in order."""

    number: int
    exchanges: tuple[Exchange, ...]

    @property
    def name(self) -> str:
        return f"test_{self.number:04d}"


def one_request_cases(count: int) -> list[Case]:
    return [Case(i, (Exchange(0),)) for i in range(count)]


def mixed_cases(count: int, seed: int = 15, stream_share: float = 0.2) -> list[Case]:
    """``count`` tests of one to five requests each; about ``stream_share`` of the requests
    are answered with a stream of 10 to 40 chunks."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        exchanges = []
        for n in range(rng.randint(1, 5)):
            events = rng.randint(10, 40) if rng.random() < stream_share else 0
            exchanges.append(Exchange(n, events))
        cases.append(Case(i, tuple(exchanges)))
    return cases


def _stream_wire(case: int, exchange: Exchange) -> tuple[bytes, list[float]]:
    """An OpenAI chat stream: ``events`` chunks and [DONE], with each one's arrival in ms."""
    head = {
        "id": f"chatcmpl-{case}-{exchange.n}",
        "object": "chat.completion.chunk",
        "created": 1732000000 + case,
        "model": "gpt-4o-mini-2024-07-18",
    }
    lines, times = [], []
    for k in range(exchange.events):
        delta = {"content": " " + _WORDS[(case + k) % len(_WORDS)]}
        finish = "stop" if k == exchange.events - 1 else None
        chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        lines.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
        times.append(300.0 + 25.0 * k)
    lines.append(b"data: [DONE]\n\n")
    times.append(times[-1] + 1.0)
    return b"".join(lines), times


# -- cassettes, each written by its own library ------------------------------------------------


def _recorded_response(case: int, exchange: Exchange) -> RecordedResponse:
    t_headers = 250.0 + (case * 37 + exchange.n) % 400
    if not exchange.stream:
        return RecordedResponse(
            200,
            Headers(answer_headers(case, exchange.n)),
            JsonBody(answer_doc(case, exchange.n)),
            t_headers=t_headers,
            t_end=t_headers + 1.5,
        )
    wire, times = _stream_wire(case, exchange)
    parser = SseParser()
    events = parser.feed(wire)
    assert not parser.finish(), "the generated stream ends with a complete event"
    docs = [sse_event_doc(t, event) for t, event in zip(times, events, strict=True)]
    return RecordedResponse(
        200, Headers(_SSE_HEADERS), SseBody(docs), t_headers=250.0, t_end=times[-1] + 0.5
    )


def write_toolnexus_cassette(path: Path, case: Case, client: httpx.Client) -> None:
    interactions = []
    for exchange in case.exchanges:
        body = request_body(case.number, exchange.n, exchange.stream)
        sent = client.build_request("POST", URL, json=body)
        request = RecordedRequest("POST", URL, Headers(sent.headers.multi_items()), JsonBody(body))
        interactions.append(Interaction(request, _recorded_response(case.number, exchange)))
    path.parent.mkdir(parents=True, exist_ok=True)
    Cassette(path, interactions, {"clock_epoch": 1732000000.0}).save()


def write_vcrpy_cassette(path: Path, case: Case, client: httpx.Client) -> None:
    requests, responses = [], []
    for exchange in case.exchanges:
        body = request_body(case.number, exchange.n, exchange.stream)
        sent = client.build_request("POST", URL, json=body)
        requests.append(VcrRequest("POST", URL, sent.read(), sent.headers))
        if exchange.stream:
            wire, _ = _stream_wire(case.number, exchange)
            answer = httpx.Response(200, headers=_SSE_HEADERS, content=wire)
        else:
            answer = httpx.Response(
                200,
                headers=answer_headers(case.number, exchange.n),
                json=answer_doc(case.number, exchange.n),
            )
        responses.append(_serialize_response(answer, answer.read()))
    path.parent.mkdir(parents=True, exist_ok=True)
    FilesystemPersister.save_cassette(
        path, {"requests": requests, "responses": responses}, serializer=yamlserializer
    )


# -- test files ---------------------------------------------------------------------------------

_HELPERS = """
def _json(client, case, n):
    response = client.post(URL, json=request_body(case, n, False))
    assert response.status_code == 200
    assert response.json()["id"] == f"chatcmpl-{case}-{n}"


def _stream(client, case, n, events):
    with client.stream("POST", URL, json=request_body(case, n, True)) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert len(lines) == events + 1
    assert f'"id":"chatcmpl-{case}-{n}"' in lines[0]
    assert lines[-1] == "data: [DONE]"
"""

_MOCK_HELPERS = """
def _handler(case, n):
    def answer(request):
        return httpx.Response(200, headers=answer_headers(case, n), json=answer_doc(case, n))

    return answer
"""


def _module_head(mock: bool, shared_client: bool) -> str:
    parts = [
        '"""Generated by benchmarks/_projects.py."""',
        "from typing import Any\n\nimport httpx\nimport pytest",
        f'URL = "{URL}"',
        inspect.getsource(request_body),
        inspect.getsource(answer_doc),
        inspect.getsource(answer_headers),
        _HELPERS.strip("\n"),
    ]
    if mock:
        parts.append(_MOCK_HELPERS)
    if shared_client:
        parts.append(_SHARED_CLIENT)
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


_MOCK_CLIENTS = {
    # an httpx.Client over a MockTransport: builds no connection pool and no TLS context
    "mock": "httpx.Client(transport=httpx.MockTransport(_handler({case}, 0)))",
    # a default httpx.Client (its HTTPTransport, TLS context and all, as httpx.Client() builds)
    # with every URL mounted on a MockTransport
    "mock-mounted": 'httpx.Client(mounts={{"all://": httpx.MockTransport(_handler({case}, 0))}})',
}


_SHARED_CLIENT = """
@pytest.fixture(scope="module")
def client():
    with httpx.Client() as client:
        yield client
"""


def _test_source(case: Case, plugin: str, shared_client: bool) -> str:
    if plugin in _MOCK_CLIENTS:  # a baseline: one request, answered in-process
        assert len(case.exchanges) == 1
        assert not case.exchanges[0].stream
        client = _MOCK_CLIENTS[plugin].format(case=case.number)
        lines = [
            f"def {case.name}():",
            f"    with {client} as client:",
            f"        _json(client, {case.number}, 0)",
        ]
        return "\n".join(lines)
    marker = {"toolnexus": "cassette", "recording": "vcr"}[plugin]
    if shared_client:
        lines = [f"@pytest.mark.{marker}", f"def {case.name}(client):"]
        indent = "    "
    else:
        lines = [
            f"@pytest.mark.{marker}",
            f"def {case.name}():",
            "    with httpx.Client() as client:",
        ]
        indent = "        "
    for exchange in case.exchanges:
        if exchange.stream:
            lines.append(f"{indent}_stream(client, {case.number}, {exchange.n}, {exchange.events})")
        else:
            lines.append(f"{indent}_json(client, {case.number}, {exchange.n})")
    return "\n".join(lines)


PLUGINS = ("toolnexus", "recording", *_MOCK_CLIENTS)

# pytest-asyncio (in .venv for the test suite) warns on every run when the loop scope is unset.
_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


def write_project(
    folder: Path,
    cases: Sequence[Case],
    plugin: str,
    per_file: int = 100,
    shared_client: bool = False,
    conftest: str | None = None,
) -> Path:
    """A pytest project in ``folder`` whose tests replay ``cases`` through ``plugin``:
    ``toolnexus`` (``@pytest.mark.cassette``, msgpack cassettes), ``recording``
    (``@pytest.mark.vcr``, vcrpy YAML cassettes), ``mock`` (an ``httpx.MockTransport``
    client per test, no cassette) or ``mock-mounted`` (the same transport mounted on a
    default ``httpx.Client()``). Each test makes its own ``httpx.Client()``, or with
    ``shared_client`` the tests of a module share one (a module-scoped fixture; cassette
    plugins only). ``conftest`` is written as the project's conftest.py. Returns ``folder``."""
    assert plugin in PLUGINS, plugin
    assert not (shared_client and plugin in _MOCK_CLIENTS), "a baseline test makes its client"
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text(_INI)
    if conftest is not None:
        (folder / "conftest.py").write_text(conftest)
    with httpx.Client() as client:
        for start in range(0, len(cases), per_file):
            module = f"test_suite_{start // per_file:02d}"
            chunk = cases[start : start + per_file]
            tests = "\n\n\n".join(_test_source(case, plugin, shared_client) for case in chunk)
            head = _module_head(plugin in _MOCK_CLIENTS, shared_client)
            (folder / f"{module}.py").write_text(f"{head}\n\n{tests}\n")
            for case in chunk:
                cassettes = folder / "cassettes" / module
                if plugin == "toolnexus":
                    write_toolnexus_cassette(cassettes / f"{case.name}.msgpack", case, client)
                elif plugin == "recording":
                    write_vcrpy_cassette(cassettes / f"{case.name}.yaml", case, client)
    return folder


def cassette_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in (folder / "cassettes").rglob("*") if p.is_file())


# -- running pytest -----------------------------------------------------------------------------

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


@dataclass(frozen=True)
class Outcome:
    """How one pytest run ended: wall seconds (the whole process), the CPU seconds of it and
    its children (xdist's workers), exit code, counts."""

    wall: float
    cpu: float
    code: int
    counts: dict[str, int]
    tail: str

    @property
    def passed(self) -> int:
        return self.counts.get("passed", 0)

    @property
    def ran(self) -> int:
        return sum(v for k, v in self.counts.items() if k != "deselected")

    def all_passed(self, expected: int) -> bool:
        return self.code == 0 and self.passed == expected == self.ran


def summary_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line (``3 passed, 1 failed in 0.5s``)."""
    for line in reversed(output.strip().splitlines()):
        if " in " in line and _COUNT.search(line):
            counts: dict[str, int] = {}
            for number, word in _COUNT.findall(line):
                key = "errors" if word.startswith("error") else word
                counts[key] = counts.get(key, 0) + int(number)
            return counts
    return {}


def clean_env() -> dict[str, str]:
    """This process's environment without what would change a pytest run under test."""
    drop = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_AUTO_NUM_WORKERS", "CI")
    return {k: v for k, v in os.environ.items() if k not in drop}


BASE_ARGS = ("-q", "-p", "no:randomly", "-p", "no:cacheprovider")


def run_pytest(folder: Path, *args: str) -> Outcome:
    """``python -m pytest -q -p no:randomly -p no:cacheprovider ARGS`` in ``folder``."""
    folder = folder.resolve()
    argv = [sys.executable, "-m", "pytest", *BASE_ARGS, "--rootdir", str(folder), *args]
    cpu = _children_cpu()
    start = now()
    done = subprocess.run(argv, cwd=folder, env=clean_env(), capture_output=True, text=True)
    wall = now() - start
    cpu = _children_cpu() - cpu
    output = done.stdout + done.stderr
    tail = "\n".join(output.strip().splitlines()[-12:])
    return Outcome(wall, cpu, done.returncode, summary_counts(done.stdout), tail)


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished children and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
