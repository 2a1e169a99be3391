"""The secret scan's first pass never misses what the rules find (issue 23, row 7).

The scan reads the strings of many interactions joined into one text, each rule once over it
(``_safety/probes.py``), and then reads string by string only the interactions that pass
reaches. That is what makes a 30 MB cassette's scan take seconds instead of minutes; it is
only sound if the pass reaches every string in which a rule, a credential word bound to a
value, or a credential environment variable's value matches. Here every rule's own pattern
draws the secrets (hypothesis ``from_regex``), placed among other strings at random, and the
scan must find exactly what reading each string alone with the rules finds.
"""

import random
import re
import string
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    SecretFoundError,
)
from pytest_toolnexus._safety.leaves import batches, leaves
from pytest_toolnexus._safety.probes import (
    KEYWORD_NEEDLES,
    PROBES,
    SEPARATOR,
    touched,
)
from pytest_toolnexus._safety.rules import KEYWORD_VALUE, RULES, is_credential_field, is_opaque
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._store.cassette import (
    BytesBody,
    ChunksBody,
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    RecordedError,
    SseBody,
    TextBody,
)

URL = "https://api.example.invalid/v1/chat"
FILLER = st.text(alphabet=string.ascii_letters + string.digits + " .:-_/+=\"'\n\x00", max_size=40)


BASE64 = string.ascii_letters + string.digits + "/+"
ALONE = next(p.pattern for _, _, _, p in RULES if p.pattern.startswith("(?<![A-Za-z0-9/+_.-])"))
# Drawn by hand where hypothesis cannot draw from the pattern (an AWS secret access key
# standing alone: three lookaheads).
DRAWN = {
    ALONE: st.text(alphabet=BASE64, min_size=40, max_size=40).filter(
        lambda v: (
            any(c.isupper() for c in v)
            and any(c.islower() for c in v)
            and any(c.isdigit() for c in v)
        )
    ),
}


def drawn(pattern):
    if pattern.pattern in DRAWN:
        return DRAWN[pattern.pattern]
    return st.from_regex(pattern, fullmatch=True)


def reaches(texts, index, values=()):
    """Whether a span of the first pass over ``texts`` joined reaches ``texts[index]``."""
    start = sum(len(t) + len(SEPARATOR) for t in texts[:index])
    end = start + len(texts[index])
    joined = SEPARATOR.join(texts)
    return any(b > start and a < end for a, b in touched(joined, values))


@pytest.mark.parametrize("rule", range(len(RULES)), ids=[r[0] for r in RULES])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(data=st.data())
def test_every_rule_match_is_reached_among_other_strings(rule, data):
    _, _, _, pattern = RULES[rule]
    secret = data.draw(drawn(pattern), label="secret")
    before = data.draw(FILLER, label="before")
    after = data.draw(FILLER, label="after")
    text = before + secret + after
    if pattern.search(text) is None:
        return  # the filler changed it (a letter before a \b): no match to reach
    texts = data.draw(st.lists(FILLER, max_size=4), label="others")
    at = data.draw(st.integers(0, len(texts)), label="at")
    texts.insert(at, text)
    assert reaches(texts, at)


@settings(max_examples=200, deadline=None, database=None)
@given(
    word=st.sampled_from(["password", "passwd", "pwd", "secret", "token", "key", "contraseña"]),
    case=st.lists(st.booleans(), min_size=10, max_size=10),
    binding=st.sampled_from(["=", ": ", '": "', " => ", '="', '"\r\n\r\n']),
    value=st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=8, max_size=30),
    others=st.lists(FILLER, max_size=3),
)
def test_a_credential_word_bound_to_a_value_is_reached_in_any_case(
    word, case, binding, value, others
):
    cased = "".join(c.upper() if up else c for c, up in zip(word, case, strict=False))
    text = f"client_{cased}{binding}{value}"
    assert KEYWORD_VALUE.search(text) is not None
    texts = [*others, text]
    assert reaches(texts, len(texts) - 1)


def test_casefolding_keeps_every_character_the_ignore_case_rules_read():
    # A rule that ignores case matches the long s as 's' and the Kelvin sign as 'k': the pass looks
    # for its needles in the casefolded text, so each such character must casefold to its
    # letter, and no character may casefold to nothing (positions are read across).
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    needles = {n for probe, _ in PROBES for n in probe.folded} | set(KEYWORD_NEEDLES)
    for letter in {c for needle in needles for c in needle}:
        for found in re.findall(re.escape(letter), every, re.IGNORECASE):
            assert found.casefold() == letter, (letter, found)
    assert all(c.casefold() for c in every)


def test_an_npmrc_token_line_is_found_without_npm_in_it():
    # detect-secrets' npm rule also takes a UUID token, which holds no "npm_": the rule is
    # tried wherever its line's literal is (it was tried only where "npm_" was).
    line = "//registry.npmjs.org/:_authToken=00000000-0000-0000-0000-000000000000"
    assert SecretScanner(environ={}).kind_of(line) == "an npm token"


@pytest.mark.parametrize(
    "segment",
    [
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12".replace("/", "%2F"),  # 40 alone, encoded
        "wJalrXUtnFEMI1K7MDENG2bPxRfiCYzEXAMPLE12",  # 40 alone between slashes
        quote("sk-proj-" + "Ab3" * 12, safe=""),
    ],
    ids=["encoded AWS key", "AWS key between slashes", "encoded project key"],
)
def test_a_secret_in_a_url_path_segment_is_reached(segment):
    scanner = SecretScanner(environ={})
    text = f"see https://files.example.invalid/v1/{segment}/content for it"
    assert scanner.kind_of(text) is not None
    assert reaches(["before", text, "after"], 1)


def test_an_opaque_segment_after_a_credential_named_one_is_reached():
    text = "https://api.example.invalid/v1/clientSecret/Zq4x9Lm2Pw7"
    assert SecretScanner(environ={}).kind_of(text) is not None
    assert reaches(["before", text], 1)


def test_a_credential_environment_value_is_reached_wherever_it_sits():
    value = "k8r2-" + "Zq4" * 6
    texts = ["before", f"x{value}y", "after"]
    assert reaches(texts, 1, [value])
    assert not reaches(texts, 0, [value])


# -- the whole scan against the rules read string by string ---------------------------------


def by_string(scanner, interactions):
    """What reading every string alone with the rules finds: (interaction, kind) pairs."""
    return {
        (number, kind)
        for number, interaction in enumerate(interactions)
        for _, text, name in leaves(interaction)
        if (kind := scanner.kind_of(text, name)) is not None
    }


OPAQUE = st.from_regex(r"[A-Za-z]{4}[0-9]{4}", fullmatch=True)
SECRET_TEXT = st.one_of(
    [drawn(pattern) for _, _, _, pattern in RULES] + [st.builds(lambda v: f"password={v}", OPAQUE)]
)
# A URL with a secret as a path segment (percent-encoded or not), or an opaque one after a
# credential-named segment: what the scan reads segment by segment.
IN_PATH = st.builds(
    lambda before, secret, encode, after: (
        f"https://api.example.invalid/v1/{before}/{quote(secret, safe='') if encode else secret}"
        f"/{after}"
    ),
    st.sampled_from(["files", "clientSecret", "x-y"]),
    st.one_of(SECRET_TEXT, OPAQUE),
    st.booleans(),
    st.sampled_from(["", "content", "a%20b"]),
)
LEAF = st.one_of(FILLER, FILLER, SECRET_TEXT, IN_PATH)
JSON = st.recursive(
    st.one_of(st.none(), st.integers(), LEAF),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(LEAF, st.sampled_from(["refresh_token", "clientSecret"])), inner, max_size=3
        ),
    ),
    max_leaves=8,
)


@st.composite
def interactions(draw):
    made = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["json", "sse", "ndjson", "text", "error"]))
        headers = Headers([(draw(st.sampled_from(["x-note", "x-api-key"])), draw(LEAF))])
        url = draw(st.one_of(st.just(URL), IN_PATH))
        request = RecordedRequest("POST", url, headers, JsonBody(draw(JSON)))
        if kind == "error":
            made.append(Interaction(request, error=RecordedError("ReadError", draw(LEAF), 1.0)))
            continue
        if kind == "json":
            body = JsonBody(draw(JSON))
        elif kind == "sse":
            body = SseBody(
                [{"t": float(i), "data": draw(JSON)} for i in range(draw(st.integers(1, 3)))]
            )
        elif kind == "ndjson":
            body = NdjsonBody([{"t": 1.0, "value": draw(JSON)}], draw(FILLER))
        else:
            body = TextBody(draw(LEAF))
        made.append(Interaction(request, RecordedResponse(200, Headers(), body)))
    return made


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(made=interactions())
def test_the_scan_finds_what_reading_each_string_alone_finds(made):
    scanner = SecretScanner(environ={})
    found = {(hit.interaction, hit.kind) for hit in scanner.scan(made) if not hit.across}
    assert found == by_string(scanner, made)


def every_kind():
    json_headers = Headers([("content-type", "application/json"), ("x-api-key", "ab12cd34ef")])
    request = RecordedRequest("POST", URL, json_headers, JsonBody({"a": ["b", {"c": "d"}], 1: "e"}))
    return [
        Interaction(
            request, RecordedResponse(200, json_headers, JsonBody({"password": "x9y8z7w6"}))
        ),
        Interaction(request, RecordedResponse(200, Headers(), TextBody("plain"))),
        Interaction(request, RecordedResponse(200, Headers(), BytesBody(b"by\xfftes"))),
        Interaction(
            request,
            RecordedResponse(
                200,
                Headers(),
                SseBody(
                    [{"t": 1.0, "data": {"k": "v"}}, {"t": 2.0, "text": "t", "comments": ["c"]}],
                    "tail",
                ),
            ),
        ),
        Interaction(
            request,
            RecordedResponse(200, Headers(), NdjsonBody([{"t": 1.0, "value": [1, "n"]}], "x")),
        ),
        Interaction(
            request, RecordedResponse(200, Headers(), ChunksBody([{"t": 0.0, "data": b"ch"}]))
        ),
        Interaction(
            request,
            RecordedResponse(
                200,
                Headers(),
                EventStreamBody(
                    [
                        {
                            "t": 1.0,
                            "headers": [[":event-type", 7, "chunk"]],
                            "payload": {"p": "q"},
                            "data": b"raw",
                        }
                    ],
                    b"tl",
                ),
                error=RecordedError("ReadError", "cut", 2.0),
            ),
        ),
        Interaction(request, error=RecordedError("ConnectError", "refused", 0.5)),
    ]


def test_the_first_pass_reads_every_string_of_every_body_kind():
    made = every_kind()
    for number, interaction in enumerate(made):
        (batch,) = batches([(number, interaction)])
        found = list(leaves(interaction))
        assert sorted(batch.texts) == sorted(text for _, text, _ in found)
        named = any(n is not None and is_credential_field(n) and is_opaque(t) for _, t, n in found)
        assert (batch.named == [number]) == named


# -- through the write, in a cassette of thousands ------------------------------------------


def answer(i):
    rng = random.Random(i)
    words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "kernel"]) for _ in range(60))
    return Interaction(
        RecordedRequest(
            "POST", URL, Headers([("content-type", "application/json")]), JsonBody({"q": i})
        ),
        RecordedResponse(
            200, Headers([("x-request-id", f"req_{i:032x}")]), JsonBody({"text": words})
        ),
    )


PLANTED = {
    "an AWS access key id": "AKIA" + "Q7XW3RZ2P6LMN4BT",
    "an AWS secret key standing alone": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12",
    "a Telegram bot token": "123456789:" + "AAH" + "x9Kq2Zt7Lm4Np8Rs1Vw5Yb3Cd6Fg0Hj2K",
    "a Discord bot token": "MTA" + "x" * 21 + ".Gq3b9Z." + "k" * 27,
    "a Twilio key": "SK" + "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d",
    "a Slack token": "XOXB-" + "1234567890-" + "abcdefghij",
    "a password bound in text": "PASSWORD: hunter2hunter2x9",
    "an OpenAI project key": "sk-proj-" + "Ab3" * 12,
}


@pytest.mark.parametrize("where", [0, 1499, 2999], ids=["first", "middle", "last"])
@pytest.mark.parametrize("family", list(PLANTED))
def test_one_secret_among_thousands_of_interactions_is_refused_naming_it(tmp_path, family, where):
    made = [answer(i) for i in range(3000)]
    planted = made[where]
    made[where] = Interaction(
        planted.request,
        RecordedResponse(200, Headers(), JsonBody({"text": f"as noted, {PLANTED[family]} is it"})),
    )
    path = tmp_path / "large.msgpack"
    with pytest.raises(SecretFoundError) as raised:
        Cassette(path, made).save()
    message = str(raised.value)
    assert f"interaction #{where}, response.body.value['text']" in message
    assert "1 secret(s)" in message
    assert PLANTED[family] not in message
    assert not path.exists()
    assert [p.name for p in Path(tmp_path).iterdir()] == []
