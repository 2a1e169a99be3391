"""The JSON array splitter, and the timed json body it leads to."""

import json

import pytest

from pytest_toolnexus._store.cassette import JsonBody, MalformedCassette, body_from_doc
from pytest_toolnexus._store.json_array import JsonArraySplitter

ARRAY = b'[{"a": "x,]}\\"", "b": [1, {"c": []}]}\n,\r\n"s\\\\", 12.5, true, null, [3]\n]'


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(ARRAY)])
def test_elements_are_found_wherever_the_chunks_are_cut(size):
    splitter = JsonArraySplitter()
    counts = [splitter.feed(ARRAY[i : i + size]) for i in range(0, len(ARRAY), size)]

    assert sum(counts) == len(json.loads(ARRAY)) == 6
    assert splitter.closed
    assert not splitter.broken


def test_each_element_counts_in_the_chunk_that_completes_it():
    splitter = JsonArraySplitter()

    assert [splitter.feed(c) for c in [b'[{"n":', b"0}", b",1", b",", b'"x"]']] == [0, 1, 0, 1, 1]


@pytest.mark.parametrize("body", [b'{"a": 1}', b"x", b"[1]]", b"[1} "])
def test_a_body_that_is_no_array_breaks_the_splitter(body):
    splitter = JsonArraySplitter()
    splitter.feed(body)

    assert splitter.broken


def test_a_timed_json_body_round_trips_and_replays_one_piece_per_element():
    body = JsonBody([{"n": 0}, 1], (10.0, 20.5))
    loaded = body_from_doc(body.to_doc(), timed=True)

    assert loaded == body
    assert list(loaded.pieces()) == [(10.0, b'[{"n":0}'), (20.5, b",1]")]
    assert b"".join(piece for _, piece in loaded.pieces()) == loaded.content()


@pytest.mark.parametrize(
    "doc",
    [
        {"kind": "json", "value": [1, 2], "times": [1.0]},
        {"kind": "json", "value": {"a": 1}, "times": [1.0]},
        {"kind": "json", "value": [1], "times": "1"},
        {"kind": "json", "value": [1], "times": [-1]},
    ],
)
def test_a_damaged_timed_json_body_is_refused(doc):
    with pytest.raises(MalformedCassette):
        body_from_doc(doc, timed=True)


def test_a_request_body_never_has_times():
    with pytest.raises(MalformedCassette):
        body_from_doc({"kind": "json", "value": [1], "times": [1.0]}, timed=False)
