"""Matching (DESIGN §4): method, normalised URL and semantic body equality; headers only when
named; ignored body paths; redacted credentials still match. And the miss message: it quotes
the request, the cassette and the mode, shows the nearest recording with a path-level diff, and
gives the fix.
"""

import ast
import json
import re

import httpx
import pytest

from pytest_toolnexus._bridges.httpx import HTTPBridge
from pytest_toolnexus._seam.depth import MAX_DEPTH
from pytest_toolnexus._seam.errors import CassetteMissError
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import TransportRequest, TransportResponse
from pytest_toolnexus._session import miss
from pytest_toolnexus._session.match import MatchRules, normalize_url, parse_body_path
from pytest_toolnexus._session.session import CassetteSession
from pytest_toolnexus._store.cassette import (
    Cassette,
    Interaction,
    JsonBody,
    RecordedRequest,
    RecordedResponse,
)

URL = "https://api.example.test/v1/chat/completions"
CHAT = {
    "model": "gpt-x",
    "temperature": 0.5,
    "messages": [
        {"role": "system", "content": "be brief", "id": "m-1"},
        {"role": "user", "content": "hi", "id": "m-2"},
    ],
    "metadata": {"request_id": "r-1", "user": "u"},
}


def recording(body=CHAT, url=URL, method="POST", headers=()):
    return Interaction(
        RecordedRequest(method, url, Headers(list(headers)), JsonBody(body)),
        RecordedResponse(200, Headers([("content-type", "application/json")]), JsonBody("ok")),
    )


@pytest.fixture
def cassette(tmp_path):
    """A factory: save the given interactions, open a replay-only session on them."""
    sessions = []

    def make(*interactions, **options):
        path = tmp_path / "cassettes" / "matching.msgpack"
        Cassette(path, list(interactions or [recording()])).save()
        options.setdefault("timing", "instant")
        options.setdefault("on_unused", "ignore")
        session = CassetteSession(path, record="none", **options)
        sessions.append(session)
        return session

    yield make
    for session in sessions:
        session.close()


def send(session, body=CHAT, url=URL, method="POST", **fields):
    return session.transport(TransportRequest(method, url, body=body, **fields))


# -- what matches -----------------------------------------------------------------------------


def test_query_order_is_irrelevant(cassette):
    session = cassette(recording(url=URL + "?a=1&b=2&b=3"))

    assert send(session, url=URL + "?b=2&a=1&b=3").status == 200


def test_query_values_still_matter(cassette):
    session = cassette(recording(url=URL + "?a=1"))

    with pytest.raises(CassetteMissError, match=r"url: recorded .*a=1, sent .*a=2"):
        send(session, url=URL + "?a=2")


def test_scheme_host_case_and_default_port_are_normalised():
    assert normalize_url("HTTPS://API.Example.test:443/v1?b=1&a=2#frag") == (
        "https://api.example.test/v1?a=2&b=1"
    )
    assert normalize_url("http://h:8080") == "http://h:8080/"


def test_key_order_and_whitespace_in_a_json_body_do_not_matter(cassette):
    session = cassette(recording(), recording())
    reordered = {key: CHAT[key] for key in reversed(list(CHAT))}
    spaced = (
        b'{ "messages" : [ {"id":"m-1", "content": "be brief",  "role": "system"},\n'
        b'  {"role":"user","content":"hi","id":"m-2"} ],\n'
        b'  "metadata": {"user": "u", "request_id": "r-1"}, "temperature": 0.5,'
        b' "model":"gpt-x" }'
    )

    first = send(session, body=reordered)
    # The same body as bytes under a JSON content type, as a raw seam client may send it.
    second = send(session, body=spaced, headers={"content-type": "application/json"})

    assert (first.status, second.status) == (200, 200)
    assert [r.interaction for r in session.requests] == [0, 1]


def test_json_sent_as_bytes_or_content_only_matches_the_parsed_recording(cassette):
    session = cassette(recording(), recording(), recording())
    spaced = b'{"model": "gpt-x",\n "temperature": 0.5, "messages": %s, "metadata": %s}' % (
        httpx.Request("POST", URL, json=CHAT["messages"]).content,
        httpx.Request("POST", URL, json=CHAT["metadata"]).content,
    )
    json_type = {"content-type": "application/json; charset=utf-8"}

    as_bytes = send(session, body=spaced, headers=json_type)
    content_only = send(session, body=None, content=spaced, headers=json_type)

    assert (as_bytes.status, content_only.status) == (200, 200)
    assert [r.interaction for r in session.requests] == [0, 1]


def test_an_httpx_client_sending_reformatted_json_matches(cassette):
    session = cassette()
    content = b'{"metadata":{"user":"u","request_id":"r-1"},  "model" : "gpt-x", "messages":' + (
        b'[{"role":"system","content":"be brief","id":"m-1"},'
        b'{"role":"user","content":"hi","id":"m-2"}], "temperature":0.5}'
    )

    with httpx.Client(transport=session.http_transport()) as client:
        response = client.post(URL, content=content, headers={"content-type": "application/json"})

    assert response.status_code == 200
    assert response.json() == "ok"


def test_a_different_value_is_a_miss(cassette):
    session = cassette()

    with pytest.raises(CassetteMissError):
        send(session, body={**CHAT, "temperature": 0.7})


def test_method_matters(cassette):
    session = cassette()

    with pytest.raises(CassetteMissError, match="method: recorded POST, sent PUT"):
        send(session, method="PUT")


def test_headers_do_not_matter_by_default(cassette):
    session = cassette(
        recording(headers=[("x-stainless-retry-count", "0"), ("user-agent", "OpenAI/Python 1")])
    )

    response = send(
        session,
        headers={"x-stainless-retry-count": "3", "user-agent": "curl", "x-new": "1"},
    )

    assert response.status == 200


def test_match_headers_makes_one_header_matter(cassette):
    session = cassette(
        recording(headers=[("OpenAI-Beta", "assistants=v2"), ("user-agent", "a")]),
        match_headers=["openai-beta"],
    )

    with pytest.raises(
        CassetteMissError, match=r"header openai-beta: recorded \['assistants=v2'\]"
    ):
        send(session, headers={"openai-beta": "assistants=v1", "user-agent": "a"})
    assert send(session, headers={"OPENAI-BETA": "assistants=v2", "user-agent": "b"}).status == 200


def test_x_stainless_headers_never_match_even_when_named():
    rules = MatchRules.build(match_headers=["X-Stainless-Retry-Count", "Accept"])

    assert rules.match_headers == ("accept",)


def test_a_named_credential_header_matches_on_presence_and_is_never_printed(cassette):
    session = cassette(
        recording(headers=[("authorization", "REDACTED")]), match_headers=["authorization"]
    )

    with pytest.raises(CassetteMissError) as caught:
        send(session, headers={"x-other": "1"})
    assert "header authorization: recorded ['REDACTED'], sent []" in str(caught.value)
    assert send(session, headers={"authorization": "Bearer sk-live-123"}).status == 200


def test_a_named_credential_header_value_stays_out_of_the_miss_message(cassette):
    session = cassette(recording(headers=[("x-api-key", "REDACTED")]), match_headers=["x-api-key"])

    with pytest.raises(CassetteMissError) as caught:
        send(session, body={"other": 1}, headers={"x-api-key": "sk-live-123"})

    assert "sk-live-123" not in str(caught.value)


# -- ignored body paths -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("metadata.request_id", ("metadata", "request_id")),
        ("messages.*.id", ("messages", "*", "id")),
        ("messages.1.content", ("messages", 1, "content")),
        ("root['messages'][1]['content']", ("messages", 1, "content")),
        ('root["metadata"]["request_id"]', ("metadata", "request_id")),
        ("root['messages'][*]['id']", ("messages", "*", "id")),
        ("root['a.b']", ("a.b",)),
    ],
)
def test_body_paths_parse_in_both_spellings(spec, parsed):
    assert parse_body_path(spec) == parsed


@pytest.mark.parametrize("spec", ["", "root[messages]", "root['a'"])
def test_a_bad_body_path_is_refused(spec):
    with pytest.raises(ValueError, match="path"):
        parse_body_path(spec)


CHANGED_IDS = {
    **CHAT,
    "messages": [
        {**CHAT["messages"][0], "id": "m-77"},
        {**CHAT["messages"][1], "id": "m-78"},
    ],
    "metadata": {"request_id": "r-2", "user": "u"},
}


@pytest.mark.parametrize(
    "ignore",
    [
        ["metadata.request_id", "messages.*.id"],
        ["root['metadata']['request_id']", "root['messages'][*]['id']"],
        ["metadata.request_id", "messages.0.id", "root['messages'][1]['id']"],
        ["metadata.*", "messages.*.id"],
    ],
    ids=["dotted-star", "deepdiff", "indexes", "star-key"],
)
def test_ignored_body_paths_do_not_matter(cassette, ignore):
    session = cassette(ignore_body=ignore)

    assert send(session, body=CHANGED_IDS).status == 200


def test_only_the_named_paths_are_ignored(cassette):
    session = cassette(ignore_body=["metadata.request_id", "messages.0.id"])

    with pytest.raises(CassetteMissError, match=r"root\['messages'\]\[1\]\['id'\]"):
        send(session, body=CHANGED_IDS)


def test_an_ignored_path_may_be_missing_on_either_side(cassette):
    without = {key: value for key, value in CHAT.items() if key != "metadata"}
    session = cassette(recording(body=without), ignore_body=["metadata"])

    assert send(session, body=CHAT).status == 200


# -- credentials in the query -----------------------------------------------------------------


def test_a_redacted_query_credential_matches_the_live_secret(tmp_path):
    path = tmp_path / "gemini.msgpack"
    live_url = "https://generativelanguage.example.test/v1beta/models/g:generate?key=real-secret"

    def live(request):
        return TransportResponse(200, [("content-type", "application/json")], {"ok": True})

    with CassetteSession(path, record="once", live=live) as session:
        session.transport(TransportRequest("POST", live_url, body={"q": 1}))
    stored = path.read_bytes()
    assert b"real-secret" not in stored
    assert b"key=REDACTED" in stored

    with CassetteSession(path, record="none", timing="instant") as session:
        replayed = session.transport(TransportRequest("POST", live_url, body={"q": 1}))
        with pytest.raises(CassetteMissError) as caught:
            session.transport(TransportRequest("POST", live_url, body={"q": 2}))

    assert replayed.body == {"ok": True}
    message = str(caught.value)
    assert "real-secret" not in message
    assert "key=REDACTED" in message
    assert "root['q']: recorded 1, sent 2" in message


# -- the miss message -------------------------------------------------------------------------

TURN_ONE = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}
TURN_TWO = {
    "model": "gpt-x",
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "tell me a joke"},
    ],
}


@pytest.fixture
def conversation(cassette):
    return cassette(recording(TURN_ONE), recording(TURN_TWO))


def changed_turn_two():
    messages = [dict(m) for m in TURN_TWO["messages"]]
    messages[1]["content"] = "Hello there!"
    return {**TURN_TWO, "messages": messages}


def test_the_miss_message_shows_the_nearest_request_with_a_deepdiff_path(conversation):
    send(conversation, body=TURN_ONE)

    with pytest.raises(CassetteMissError) as caught:
        send(conversation, body=changed_turn_two(), url=URL + "?trace=1")

    message = str(caught.value)
    lines = message.splitlines()
    assert lines[0] == f"No recorded interaction matches POST {URL}?trace=1"
    assert f"  cassette:      {conversation.path} (2 interaction(s), 1 already played)" in lines
    assert "  record mode:   none" in lines
    # The unplayed second turn is the nearest, not the first turn that was already played.
    assert f"Nearest recorded request: #1 POST {URL} (not yet played)" in lines
    assert "  root['messages'][1]['content']: recorded 'Hello!', sent 'Hello there!'" in lines
    assert f"  url: recorded {URL}, sent {URL}?trace=1" in lines
    assert "How to fix:" in lines
    assert any("record mode 'new'" in line for line in lines)
    assert "  - if those values change from run to run, ignore them: " in message
    assert "ignore_body=['messages.1.content']" in message


def test_the_suggested_ignore_body_path_makes_the_request_match(cassette):
    session = cassette(recording(TURN_TWO))
    with pytest.raises(CassetteMissError) as caught:
        send(session, body=changed_turn_two())
    suggested = re.search(r"ignore_body=\[(.*)\]", str(caught.value)).group(1)

    fixed = cassette(recording(TURN_TWO), ignore_body=[ast.literal_eval(suggested)])

    assert suggested == "'messages.1.content'"
    assert send(fixed, body=changed_turn_two()).status == 200


def test_the_miss_message_says_when_the_only_match_was_already_played(conversation):
    send(conversation, body=TURN_ONE)

    with pytest.raises(CassetteMissError) as caught:
        send(conversation, body=TURN_ONE)

    message = str(caught.value)
    assert "The same request was recorded as interaction #0, and it was already played" in message
    assert "sent more times than when the cassette was recorded" in message
    assert "record mode 'all'" in message
    assert "allow_repeats=True" in message
    assert "Nearest recorded request" not in message


SYSTEM = {"role": "system", "content": "You answer in one line."}
WEATHER_CALL = {
    "role": "assistant",
    "tool_calls": [{"id": "c1", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}],
}


def agent_turn(question, *rest):
    return {"model": "gpt-x", "messages": [SYSTEM, {"role": "user", "content": question}, *rest]}


def test_the_nearest_request_is_the_one_whose_body_is_most_alike_among_those_on_its_url(
    cassette,
):
    # Given three recorded requests to one URL, none played: two first turns of other
    # conversations, and, between them, the tool-result turn of the weather conversation
    tool_turn = agent_turn(
        "Weather in Paris?",
        WEATHER_CALL,
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
    )
    session = cassette(
        recording(agent_turn("Tell me a joke")),
        recording(tool_turn),
        recording(agent_turn("What is 2 + 2?")),
    )
    changed = agent_turn(
        "Weather in Paris?",
        WEATHER_CALL,
        {"role": "tool", "tool_call_id": "c1", "content": "19C"},
    )

    # When the tool-result turn is sent with another tool result
    with pytest.raises(CassetteMissError) as caught:
        send(session, body=changed)

    # Then the nearest is that turn, and the fix names the one value that changed, not the
    # whole message list
    lines = str(caught.value).splitlines()
    assert f"Nearest recorded request: #1 POST {URL} (not yet played)" in lines
    assert "  root['messages'][3]['content']: recorded '18C', sent '19C'" in lines
    assert (
        "  - if those values change from run to run, ignore them: "
        "ignore_body=['messages.3.content']"
    ) in lines


def test_with_one_request_on_the_url_the_bodies_are_not_compared_to_rank_it(cassette, monkeypatch):
    # Given one recorded request on the URL (and one on another path)
    session = cassette(recording(CHAT), recording(CHAT, url=URL.replace("chat/", "")))
    walked = []
    real = miss._leaves
    monkeypatch.setattr(miss, "_leaves", lambda value: walked.append(value) or real(value))

    with pytest.raises(CassetteMissError) as caught:
        send(session, body={**CHAT, "temperature": 0.9})

    # Then it is the nearest, and no body was walked to rank it
    assert f"Nearest recorded request: #0 POST {URL} (not yet played)" in str(caught.value)
    assert walked == []


@pytest.mark.parametrize(("letter", "size"), [("x", 10_059), ("\u00e9", 20_059)])
def test_the_miss_message_cuts_a_large_body(cassette, letter, size):
    session = cassette()
    big = {"model": "gpt-x", "messages": [{"role": "user", "content": letter * 10_000}]}

    with pytest.raises(CassetteMissError) as caught:
        send(session, body=big)

    message = str(caught.value)
    (summary,) = [line for line in message.splitlines() if "request body:" in line]
    assert summary.startswith('  request body:  {"model":"gpt-x","messages"')
    # The size is the body's encoded size, in bytes.
    assert summary.endswith(f"... ({size} bytes in all)")
    assert len(summary) < 320
    assert len(message) < 2_000
    # The diff lines for the huge value are shortened too.
    diff_lines = [line for line in message.splitlines() if line.startswith("  root[")]
    assert diff_lines
    assert all(len(line) < 200 for line in diff_lines)


def test_a_small_body_is_quoted_whole(cassette):
    session = cassette()

    with pytest.raises(CassetteMissError) as caught:
        send(session, body={"content": "\u00e9" * 200})

    text = "\u00e9" * 200
    assert f'  request body:  {{"content":"{text}"}}\n' in str(caught.value)


def test_the_miss_message_for_a_binary_body(cassette):
    session = cassette()

    with pytest.raises(CassetteMissError) as caught:
        send(session, body=b"\x00" * 5000)

    message = str(caught.value)
    assert "... (5000 bytes in all)" in message
    assert "body: recorded a json body, sent a raw body" in message


def test_a_miss_names_the_mode_it_happened_in(tmp_path):
    path = tmp_path / "once.msgpack"
    Cassette(path, [recording()]).save()

    with (
        CassetteSession(path, record="once", timing="instant", on_unused="ignore") as session,
        pytest.raises(CassetteMissError, match="record mode:   once"),
    ):
        send(session, body={"other": True})


def test_an_empty_cassette_says_so(tmp_path):
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()

    with (
        CassetteSession(path, record="none", timing="instant") as session,
        pytest.raises(CassetteMissError, match="The cassette has no interactions"),
    ):
        send(session)


def test_the_bridge_surfaces_a_miss_to_the_client(cassette):
    session = cassette()

    with (
        httpx.Client(transport=HTTPBridge(session.transport)) as client,
        pytest.raises(CassetteMissError, match="No recorded interaction matches POST"),
    ):
        client.post(URL, json={"unknown": 1})


# -- match_on, ignore_query, ignore_headers -----------------------------------------------------


def test_the_vcrpy_preset_ignores_the_body_but_not_the_url(cassette):
    session = cassette(recording(url=URL + "?a=1"), match_on="vcrpy")

    assert send(session, body={"model": "other", "max_tokens": 9}, url=URL + "?a=1").status == 200
    with pytest.raises(CassetteMissError, match=r"query a: recorded '1', sent '2'"):
        send(session, body=CHAT, url=URL + "?a=2")


def test_the_default_preset_still_compares_the_body(cassette):
    session = cassette(recording(), match_on="default")

    with pytest.raises(CassetteMissError, match=r"root\['temperature'\]"):
        send(session, body={**CHAT, "temperature": 1.0})


@pytest.mark.parametrize(
    ("parts", "sent_url", "matches"),
    [
        (["method", "path"], "http://other.test:8080/v1/chat/completions?x=1", True),
        (["method", "host"], "https://api.example.test/v2/else", True),
        (["method", "host"], "https://elsewhere.test/v1/chat/completions", False),
        (["uri"], "https://api.example.test:443/v1/chat/completions", True),
        (["uri"], "http://api.example.test/v1/chat/completions", False),
        (["method", "scheme", "path"], "https://other.test/v1/chat/completions", True),
        (["method", "port"], "https://x.test:443/anything", True),
        (["method", "port"], "https://x.test:8443/anything", False),
    ],
)
def test_match_on_compares_only_the_parts_it_names(cassette, parts, sent_url, matches):
    session = cassette(recording(), match_on=parts)

    if matches:
        assert send(session, body={"changed": True}, url=sent_url).status == 200
    else:
        with pytest.raises(CassetteMissError):
            send(session, body={"changed": True}, url=sent_url)


def test_match_on_without_method_answers_any_method(cassette):
    session = cassette(recording(method="POST"), match_on=["path"])

    assert send(session, method="PUT", body=None).status == 200


def test_an_unknown_match_on_part_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"match_on cannot compare 'verb'.*'vcrpy'.*headers"):
        MatchRules.build(match_on=["method", "verb"])
    with pytest.raises(ValueError, match="names nothing"):
        MatchRules.build(match_on=[])


def test_ignore_query_drops_a_parameter_that_sdk_drift_adds(cassette):
    session = cassette(
        recording(url=URL + "?api-version=1"), ignore_query=["beta"], match_on="vcrpy"
    )

    assert send(session, url=URL + "?beta=true&api-version=1").status == 200
    with pytest.raises(CassetteMissError, match=r"query api-version: recorded '1', sent '2'"):
        send(session, url=URL + "?beta=true&api-version=2")


def test_a_query_miss_suggests_ignore_query_with_the_parameter(cassette):
    session = cassette(recording(url=URL))

    with pytest.raises(CassetteMissError) as caught:
        send(session, url=URL + "?beta=true")
    message = str(caught.value)
    assert "query beta: only in the sent request ('true')" in message
    assert "ignore_query=['beta']" in message


def test_match_on_headers_compares_every_header_but_the_ignored_ones(cassette):
    session = cassette(
        recording(headers=[("accept", "application/json"), ("user-agent", "sdk/1.0")]),
        match_on=["method", "path", "headers"],
        ignore_headers=["User-Agent"],
    )

    with pytest.raises(CassetteMissError, match=r"header accept: recorded \['application/json'\]"):
        send(session, headers={"accept": "text/plain", "user-agent": "sdk/1.0"})
    sent = send(
        session,
        headers={
            "accept": "application/json",
            "user-agent": "sdk/2.0",
            "x-stainless-retry-count": "1",
        },
    )
    assert sent.status == 200


def test_a_body_miss_on_a_converted_vcrpy_cassette_names_the_preset(tmp_path):
    path = tmp_path / "converted.msgpack"
    Cassette(path, [recording()], {"converted_from": "vcrpy"}).save()
    session = CassetteSession(path, record="none", timing="instant", on_unused="ignore")
    with session, pytest.raises(CassetteMissError) as caught:
        send(session, body={**CHAT, "max_tokens": 100})
    assert "converted from vcrpy" in str(caught.value)
    assert "match_on='vcrpy'" in str(caught.value)

    # The same miss on a cassette recorded here does not mention vcrpy.
    native = tmp_path / "native.msgpack"
    Cassette(native, [recording()]).save()
    session = CassetteSession(native, record="none", timing="instant", on_unused="ignore")
    with session, pytest.raises(CassetteMissError) as caught:
        send(session, body={**CHAT, "max_tokens": 100})
    assert "vcrpy" not in str(caught.value)


# -- the fast path: a request sent again as the bytes it was recorded from ---------------------


@pytest.fixture
def parses(monkeypatch):
    """How many live bodies matching read (parsed, masked and canonicalised)."""
    from pytest_toolnexus._session import match

    calls = []
    real = match.live_body

    def counted(request):
        calls.append(request.url)
        return real(request)

    monkeypatch.setattr(match, "live_body", counted)
    return calls


def test_a_request_sent_as_its_recorded_bytes_matches_without_reading_its_body(cassette, parses):
    session = cassette(recording(), recording(), recording(body={**CHAT, "model": "other"}))

    with httpx.Client(transport=session.http_transport()) as client:
        answers = [client.post(URL, json=CHAT) for _ in range(2)]

    assert [a.status_code for a in answers] == [200, 200]
    assert [r.interaction for r in session.requests] == [0, 1]  # recorded order, each once
    assert parses == []


def test_bytes_in_another_layout_take_the_slow_path_once_then_the_fast_one(cassette, parses):
    session = cassette(recording(), recording())
    spaced = httpx.Request("POST", URL, json=CHAT).content.replace(b",", b", ")
    json_type = {"content-type": "application/json"}

    with httpx.Client(transport=session.http_transport()) as client:
        answers = [client.post(URL, content=spaced, headers=json_type) for _ in range(2)]

    assert [a.status_code for a in answers] == [200, 200]
    assert [r.interaction for r in session.requests] == [0, 1]
    assert parses == [URL]  # the second send was known by its bytes


def test_recorded_bytes_under_a_type_that_is_not_json_miss_as_before(cassette, parses):
    session = cassette()
    content = httpx.Request("POST", URL, json=CHAT).content

    with pytest.raises(CassetteMissError):
        send(session, body=content, content=content, headers={"content-type": "text/plain"})
    assert parses  # matched on the read body, as every request was before the fast path


def test_recorded_bytes_with_a_compared_header_that_differs_miss(cassette):
    session = cassette(recording(headers=[("x-tenant", "a")]), match_headers=("x-tenant",))
    content = httpx.Request("POST", URL, json=CHAT).content
    sent = {"content-type": "application/json", "x-tenant": "b"}

    with pytest.raises(CassetteMissError):
        send(session, body=CHAT, content=content, headers=sent)
    assert (
        send(session, body=CHAT, content=content, headers={**sent, "x-tenant": "a"}).status == 200
    )


def test_a_masked_account_key_still_matches_the_live_value_by_the_slow_path(cassette, parses):
    recorded = {**CHAT, "metadata": {"account_id": "[REDACTED]"}}
    session = cassette(recording(body=recorded))
    live = {**CHAT, "metadata": {"account_id": "acct-123"}}

    with httpx.Client(transport=session.http_transport()) as client:
        assert client.post(URL, json=live).status_code == 200
    assert parses == [URL]


def test_repeats_are_served_by_bytes_too(cassette, parses):
    session = cassette(allow_repeats=True)

    with httpx.Client(transport=session.http_transport()) as client:
        answers = [client.post(URL, json=CHAT).status_code for _ in range(3)]

    assert answers == [200, 200, 200]
    assert [r.interaction for r in session.requests] == [0, 0, 0]
    assert parses == []


def _nested(depth, leaf):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _at_depth(frames, call):
    """``call()`` run ``frames`` frames deeper than here, as code under test runs it."""
    return call() if frames <= 0 else _at_depth(frames - 1, call)


def test_a_miss_deep_in_the_stack_on_a_deep_body_is_still_a_miss_that_says_so(tmp_path):
    # A recorded body nested as deep as a cassette holds (MAX_DEPTH containers), then a miss
    # sent from 200 frames deeper. The sent body still parses and is compared (no walk of
    # matching recurses), but deepdiff, which shows how two bodies differ, recurses several
    # frames a level and runs out of stack on every Python: the miss is still reported, as a
    # miss between two JSON bodies, without the diff.
    deep = {"model": "m", "tools": _nested(MAX_DEPTH - 1, 1)}
    path = tmp_path / "deep.msgpack"
    recorded = RecordedRequest(
        "POST", URL, Headers([("content-type", "application/json")]), JsonBody(deep)
    )
    answer = RecordedResponse(200, Headers([("content-type", "application/json")]), JsonBody({}))
    Cassette(path, [Interaction(recorded, answer)]).save()
    other = json.dumps({**deep, "model": "n"}, separators=(",", ":")).encode()

    with CassetteSession(path, record="none", on_unused="ignore") as session:
        request = TransportRequest("POST", URL, [("content-type", "application/json")], other)
        with pytest.raises(CassetteMissError) as caught:
            _at_depth(200, lambda: session.transport(request))
        same = TransportRequest(
            "POST", URL, [("content-type", "application/json")], json.dumps(deep).encode()
        )
        assert _at_depth(200, lambda: session.transport(same)).status == 200

    message = str(caught.value)
    assert "nested too deep to diff within Python's recursion limit" in message
    assert "raw body" not in message  # the sent body was read as JSON, as at the open
