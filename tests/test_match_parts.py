"""The parts of a match (method, URL with its query, body, headers), each on its own: a part
explains a difference between a recorded request and a sent one exactly when their keys for
that part differ, so a miss message never shows a difference matching did not use, nor leaves
out one it did. The future ``serve`` command and WebSocket frame matching reuse these parts.
"""

import pytest

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import TransportRequest
from pytest_toolnexus._session.body_part import BodyPart, parse_body_path
from pytest_toolnexus._session.match import MatchRules
from pytest_toolnexus._session.parts import HeadersPart, MethodPart, QueryPart, UrlPart
from pytest_toolnexus._store.cassette import AnyBody, BytesBody, JsonBody, RecordedRequest

URL = "https://api.example.test/v1/chat"


@pytest.mark.parametrize(
    ("part", "recorded", "sent", "differs"),
    [
        (MethodPart(), "post", "POST", False),
        (MethodPart(), "POST", "PUT", True),
        (MethodPart(compared=False), "POST", "PUT", False),
    ],
)
def test_the_method_part_explains_what_its_key_tells_apart(part, recorded, sent, differs):
    assert (part.key(recorded) != part.key(sent)) is differs
    assert bool(part.explain(recorded, sent)) is differs


VCRPY_URL = UrlPart(frozenset(("scheme", "host", "port", "path", "query")))


@pytest.mark.parametrize(
    ("part", "recorded", "sent", "lines"),
    [
        (UrlPart(), URL, "HTTPS://API.example.test:443/v1/chat", []),
        (UrlPart(), URL + "?b=2&a=1", URL + "?a=1&b=2", []),
        (UrlPart(), URL + "?key=REDACTED", URL + "?key=sk-live", []),  # presence only
        (
            UrlPart(),
            URL + "?a=1",
            URL + "?a=2",
            [f"url: recorded {URL}?a=1, sent {URL}?a=2", "query a: recorded '1', sent '2'"],
        ),
        (
            UrlPart(),
            URL,
            URL + "/other",
            [f"url: recorded {URL}, sent {URL}/other"],  # another path: no query lines
        ),
        (UrlPart(query=QueryPart(ignored=frozenset({"beta"}))), URL, URL + "?beta=1", []),
        (UrlPart(frozenset({"path"})), URL + "?a=1", "http://other.test/v1/chat?a=2", []),
        (VCRPY_URL, URL, "http://api.example.test/v1/chat", ["url: recorded "]),
    ],
)
def test_the_url_part_explains_what_its_key_tells_apart(part, recorded, sent, lines):
    explained = part.explain(recorded, sent)

    assert (part.key(recorded) != part.key(sent)) is bool(lines)
    assert len(explained) == len(lines)
    assert all(line.startswith(start) for line, start in zip(explained, lines, strict=True))


def test_the_query_part_names_each_parameter_that_differs_but_the_ignored_ones():
    part = QueryPart(ignored=frozenset({"trace"}))

    assert part.differences("a=1&b=2&trace=x", "a=1&c=3&trace=y") == [
        ("b", "query b: only in the recording ('2')"),
        ("c", "query c: only in the sent request ('3')"),
    ]
    assert part.key("trace=x&b=2&a=1") == part.key("a=1&b=2&trace=y") == "a=1&b=2"


def sent(body):
    return TransportRequest("POST", URL, Headers([("content-type", "application/json")]), body)


@pytest.mark.parametrize(
    ("part", "recorded", "body", "differs"),
    [
        (BodyPart(), JsonBody({"a": 1, "b": [1, 2]}), {"b": [1, 2], "a": 1}, False),
        (BodyPart(), JsonBody({"a": 1}), {"a": 2}, True),
        (
            BodyPart(ignored=(parse_body_path("meta.id"),)),
            JsonBody({"meta": {"id": 1}}),
            {"meta": {"id": 2}},
            False,
        ),
        (BodyPart(), JsonBody({"user_id": "u-1"}), {"user_id": "u-2"}, False),  # an account key
        (BodyPart(), BytesBody(b"abc"), b"abd", True),
        (BodyPart(compared=False), JsonBody({"a": 1}), {"a": 2}, False),
    ],
)
def test_the_body_part_explains_what_its_key_tells_apart(part, recorded, body, differs):
    request = sent(body)
    lines, _ = part.explain(recorded, request)

    assert (part.key(recorded) != part.key(body)) is differs
    assert bool(lines) is differs


def test_a_recorded_body_of_any_keys_apart_from_every_sent_body_and_the_rules_try_it_second():
    rules = MatchRules.build()
    recorded = RecordedRequest("POST", URL, Headers(), AnyBody())
    key = rules.key_of_request(sent({"a": 1}))

    assert rules.key_of_recorded(recorded) != key
    assert rules.key_of_recorded(recorded) == key.any_body


@pytest.mark.parametrize(
    ("part", "differs"),
    [
        (HeadersPart(), False),
        (HeadersPart(named=("accept",)), True),
        (HeadersPart(named=("authorization",)), False),  # a credential: by presence only
        (HeadersPart(every=True), True),
        (HeadersPart(every=True, ignored=frozenset({"accept", "user-agent"})), False),
    ],
)
def test_the_headers_part_explains_what_its_key_tells_apart(part, differs):
    recorded = Headers([("accept", "a/b"), ("authorization", "REDACTED"), ("user-agent", "1")])
    now = Headers([("accept", "c/d"), ("authorization", "Bearer sk-x"), ("user-agent", "2")])

    assert (part.key(recorded) != part.key(now)) is differs
    assert bool(part.explain(recorded, now)) is differs


def test_the_vcrpy_preset_and_the_ignore_lists_configure_the_parts():
    rules = MatchRules.build(
        match_on="vcrpy", ignore_query=["Beta"], ignore_headers=["User-Agent"], match_headers=["X"]
    )

    assert rules.preset == "vcrpy"
    assert rules.method == MethodPart(compared=True)
    assert rules.url.query.ignored == frozenset({"beta"})
    assert not rules.body.compared
    assert rules.headers == HeadersPart(
        named=("x",), every=False, ignored=frozenset({"user-agent"})
    )


def test_the_index_plays_a_recorded_exact_body_before_an_any_body_then_the_any_body():
    from pytest_toolnexus._session.match import Index
    from pytest_toolnexus._store.cassette import Interaction, RecordedResponse

    def recorded(body):
        request = RecordedRequest(
            "POST", URL, Headers([("content-type", "application/json")]), body
        )
        return Interaction(request, RecordedResponse(200))

    index = Index(MatchRules.build(), [recorded(AnyBody()), recorded(JsonBody({"a": 1}))])

    assert [index.take(sent({"a": 1})) for _ in range(3)] == [1, 0, None]
    repeats = Index(MatchRules.build(), [recorded(JsonBody({"a": 1}))], allow_repeats=True)
    assert [repeats.take(sent({"a": 1})) for _ in range(3)] == [0, 0, 0]
    assert repeats.take(sent({"a": 2})) is None
