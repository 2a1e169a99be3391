"""How stored stream bodies become the pieces replay hands over: the JSON encoding of event
data, the stored times as delivery times, and the lazily made piece list a plan holds."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_toolnexus._session.replay import _LazyPieces
from pytest_toolnexus._store.bodies import _COMPACT, _json_line
from pytest_toolnexus._store.cassette import MalformedCassette, SseBody

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(_json)
def test_event_data_is_encoded_as_the_standard_library_encodes_it(value):
    # The encoder made once must give what json's own compact, no-NaN encoding gives.
    assert _json_line(value) == _COMPACT.encode(value)
    assert json.loads(_json_line(value)) == value


@pytest.mark.parametrize(
    ("value", "error"),
    [(math.nan, ValueError), ({"x": [math.inf]}, ValueError), ({b"key": 1}, TypeError)],
    ids=["nan", "infinity", "bytes-key"],
)
def test_a_value_json_cannot_hold_fails_as_the_standard_library_fails(value, error):
    with pytest.raises(error):
        _COMPACT.encode(value)
    with pytest.raises(error):
        _json_line(value)
    assert _json_line({"after": 1}) == '{"after":1}'  # a failure leaves nothing behind


def test_stored_times_become_delivery_times_raised_to_the_previous_one():
    body = SseBody(
        [
            {"t": 5.0, "data": {"n": 1}},
            {"t": 3.0, "data": {"n": 2}},  # earlier than the one before: delivered with it
            {"t": 7, "data": {"n": 3}},  # an integer, as a hand-written file may hold
            {"t": 8.5, "text": "[DONE]"},
        ]
    )

    pieces = list(body.pieces())

    assert [t for t, _ in pieces] == [5.0, 5.0, 7.0, 8.5]
    assert all(type(t) is float for t, _ in pieces)
    assert b"".join(p for _, p in pieces) == (
        b'data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\ndata: [DONE]\n\n'
    )


@pytest.mark.parametrize("t", [-1.0, math.nan, math.inf, 1e13, "5", None, True])
def test_a_time_out_of_range_or_not_a_number_is_malformed(t):
    body = SseBody([{"t": 1.0, "data": 1}, {"t": t, "data": 2}])
    pieces = body.pieces()

    assert next(pieces)[0] == 1.0
    with pytest.raises(MalformedCassette, match="an event time 't' must be a number of ms"):
        next(pieces)


def test_lazy_pieces_iterated_twice_at_once_each_get_every_piece_in_order():
    made = []

    def source():
        for n in range(6):
            made.append(n)
            yield float(n), bytes([n])

    pieces = _LazyPieces(source())
    first, second = iter(pieces), iter(pieces)
    seen_first, seen_second = [], []
    # Interleaved unevenly: each one sometimes pulls new pieces from the source, sometimes
    # reads what the other one made.
    for turn in [0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1]:
        (seen_first if turn == 0 else seen_second).append(next(first if turn == 0 else second))

    expected = [(float(n), bytes([n])) for n in range(6)]
    assert seen_first == expected
    assert seen_second == expected
    assert made == list(range(6))  # the source ran once
    assert list(pieces) == expected
    assert len(pieces) == 6
    assert pieces[2] == expected[2]
