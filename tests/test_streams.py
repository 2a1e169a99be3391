"""Incremental SSE and NDJSON framing (DESIGN §3): every unit is handed back as soon as its last
byte is fed, however the bytes are cut into chunks, and encoding an event re-parses to itself.
"""

import json

import pytest

from pytest_toolnexus._store.streams import NdjsonSplitter, SseEvent, SseParser, encode_sse_event

STREAM = (
    b": keep-alive\n"
    b"event: message_start\n"
    b"id: 7\n"
    b"retry: 1500\n"
    b'data: {"type": "message_start"}\n'
    b"\n"
    b"data: first line\n"
    b"data:second line\n"
    b"data\n"
    b"\n"
    b"event: ping\n"
    b"\n"
    b"data: [DONE]\n"
    b"\n"
)
EXPECTED = [
    SseEvent(
        event="message_start",
        data='{"type": "message_start"}',
        id="7",
        retry=1500,
        comments=["keep-alive"],
    ),
    SseEvent(data="first line\nsecond line\n"),
    SseEvent(event="ping"),
    SseEvent(data="[DONE]"),
]


def feed_all(parser, chunks):
    """Every event the parser completes, with the index of the chunk that completed it."""
    out = []
    for index, chunk in enumerate(chunks):
        out.extend((index, event) for event in parser.feed(chunk))
    return out


def one_byte_chunks(data):
    return [data[i : i + 1] for i in range(len(data))]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_each_line_ending_frames_the_same_events(newline):
    parser = SseParser()

    events = [event for _, event in feed_all(parser, [STREAM.replace(b"\n", newline)])]

    assert events == EXPECTED
    assert parser.finish() == ""


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_fed_one_byte_at_a_time_each_event_completes_on_its_last_byte(newline):
    data = STREAM.replace(b"\n", newline)
    parser = SseParser()

    completed = feed_all(parser, one_byte_chunks(data))

    assert [event for _, event in completed] == EXPECTED
    # Each event is handed back by the chunk holding the first byte of its terminating blank
    # line: nothing waits for a later chunk.
    ends = []
    position = 0
    blank = newline * 2
    for _ in EXPECTED:
        position = data.index(blank, position) + len(newline)
        ends.append(position)
        position += len(newline)
    assert [index for index, _ in completed] == ends


def test_a_crlf_split_across_two_chunks_is_one_line_ending():
    parser = SseParser()

    first = parser.feed(b"data: a\r\n\r")
    second = parser.feed(b"\ndata: b\r\n\r\n")

    assert first == [SseEvent(data="a")]
    # Had the split LF been read as a blank line, an empty event would have been dispatched
    # here, or the "b" event split in two.
    assert second == [SseEvent(data="b")]
    assert parser.finish() == ""


def test_a_lone_cr_ends_an_event_without_waiting_for_the_next_chunk():
    parser = SseParser()

    assert parser.feed(b"data: one\r\r") == [SseEvent(data="one")]
    assert parser.feed(b"\r") == []  # a blank line after a blank line is no event
    assert parser.feed(b"data: two\r\r") == [SseEvent(data="two")]
    assert parser.finish() == ""


def test_a_utf8_character_split_across_chunks_is_joined():
    payload = "data: caf\u00e9 \U0001f600\n\n".encode()
    cut_in_e = payload.index("\u00e9".encode()) + 1
    cut_in_emoji = payload.index("\U0001f600".encode()) + 2
    parser = SseParser()

    events = (
        parser.feed(payload[:cut_in_e])
        + parser.feed(payload[cut_in_e:cut_in_emoji])
        + parser.feed(payload[cut_in_emoji:])
    )

    assert events == [SseEvent(data="caf\u00e9 \U0001f600")]
    assert "\ufffd" not in events[0].data


def test_a_leading_bom_is_dropped_even_when_split():
    parser = SseParser()

    events = parser.feed(b"\xef\xbb") + parser.feed(b"\xbfdata: x\n\n")

    assert events == [SseEvent(data="x")]


def test_a_bom_later_in_the_stream_is_kept():
    parser = SseParser()

    events = parser.feed(b"data: a\n\n") + parser.feed(b"data: \xef\xbb\xbfb\n\n")

    assert events == [SseEvent(data="a"), SseEvent(data="\ufeffb")]


def test_comments_are_kept_with_the_event_they_precede():
    parser = SseParser()

    events = parser.feed(b":\n: one\n:  two\ndata: x\n\n")

    assert events == [SseEvent(data="x", comments=["", "one", " two"])]


def test_id_with_nul_and_non_numeric_retry_are_ignored():
    parser = SseParser()

    events = parser.feed(b"id: a\x00b\nretry: 10s\ndata: x\n\n")

    assert events == [SseEvent(data="x")]


def test_an_event_with_no_data_is_kept():
    parser = SseParser()

    events = parser.feed(b"event: ping\n\nid: 3\n\nretry: 10\n\n")

    assert events == [SseEvent(event="ping"), SseEvent(id="3"), SseEvent(retry=10)]


def test_an_unterminated_tail_is_handed_back_by_finish():
    parser = SseParser()

    assert parser.feed(b'data: done\n\nevent: half\ndata: {"a"') == [SseEvent(data="done")]
    tail = parser.finish()

    assert tail == 'event: half\ndata: {"a"'
    # The tail framed as an event of its own re-parses to what was pending.
    assert SseParser().feed(tail.encode() + b"\n\n") == [SseEvent(event="half", data='{"a"')]
    assert parser.finish() == ""


def test_finish_flushes_a_dangling_partial_utf8_character_as_a_replacement():
    parser = SseParser()

    parser.feed(b"data: \xc3")
    tail = parser.finish()

    assert tail == "data: \ufffd"


EVENTS = [
    SseEvent(data='{"choices":[{"delta":{"content":"Hi"}}]}'),
    SseEvent(data="[DONE]"),
    SseEvent(event="content_block_delta", data="{}", id="42", retry=3000),
    SseEvent(data="line one\nline two\n\nafter a blank data line"),
    SseEvent(data=""),
    SseEvent(data="  leading spaces"),
    SseEvent(comments=["", "just a comment", " spaced"]),
    SseEvent(event="ping"),
    SseEvent(event="", id=""),
    SseEvent(data="caf\u00e9 \U0001f600", comments=["note"]),
]


@pytest.mark.parametrize("event", EVENTS, ids=range(len(EVENTS)))
def test_encode_sse_event_reparses_to_the_same_event(event):
    encoded = encode_sse_event(event)

    assert encoded.endswith(b"\n\n")
    assert SseParser().feed(encoded) == [event]


def test_encoded_events_reparse_in_order_from_one_byte_chunks():
    wire = b"".join(encode_sse_event(event) for event in EVENTS)

    events = [event for _, event in feed_all(SseParser(), one_byte_chunks(wire))]

    assert events == EVENTS


NDJSON = b'{"message":{"content":"H\xc3\xa9"},"done":false}\nnot json at all\r\n\n{"done":true}\n'


def test_ndjson_lines_come_back_whole_and_in_order():
    splitter = NdjsonSplitter()

    lines = splitter.feed(NDJSON)

    assert lines == [
        '{"message":{"content":"H\u00e9"},"done":false}',
        "not json at all",
        "",
        '{"done":true}',
    ]
    assert json.loads(lines[0])["message"]["content"] == "H\u00e9"
    assert splitter.finish() == ""


def test_ndjson_a_line_completes_on_the_chunk_with_its_newline():
    splitter = NdjsonSplitter()

    completed = [
        (index, line)
        for index, chunk in enumerate(one_byte_chunks(NDJSON))
        for line in splitter.feed(chunk)
    ]

    newline_positions = [i for i, byte in enumerate(NDJSON) if byte == ord("\n")]
    assert [index for index, _ in completed] == newline_positions
    assert [line for _, line in completed] == NdjsonSplitter().feed(NDJSON)


def test_ndjson_an_unterminated_last_line_is_the_tail():
    splitter = NdjsonSplitter()

    assert splitter.feed(b'{"a":1}\n{"b":') == ['{"a":1}']
    assert splitter.finish() == '{"b":'
    assert splitter.finish() == ""


def test_ndjson_a_utf8_character_split_across_chunks_is_joined():
    data = '{"t":"\u00e9\U0001f600"}\n'.encode()
    splitter = NdjsonSplitter()

    lines = []
    for chunk in one_byte_chunks(data):
        lines += splitter.feed(chunk)

    assert lines == ['{"t":"\u00e9\U0001f600"}']


def test_ndjson_lines_reencoded_split_back_to_themselves():
    lines = ['{"a":1}', "plain", "", '{"b":[1,2]}']
    wire = "".join(line + "\n" for line in lines).encode()

    assert NdjsonSplitter().feed(wire) == lines


# Issue 23, row 8: one 60 MB event took 131 s to record, as each chunk made the parser search
# the whole unended line again (and each data line copied the event's data so far). The work
# is counted here, not timed: the characters handed to the line splitter, and those copied
# into an event's data, stay linear in the size of the stream.

HUGE = 1_000_000
CHUNK = 1_000


class CountingSplit:
    """A line splitter that counts the characters it is asked to search."""

    def __init__(self, split):
        self._split = split
        self.searched = 0

    def __call__(self, text):
        self.searched += len(text)
        return self._split(text)


def chunked(data, size=CHUNK):
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_a_huge_one_line_event_in_small_chunks_is_searched_once(monkeypatch, newline):
    import pytest_toolnexus._store.streams as streams

    counting = CountingSplit(streams._NEWLINE.split)
    monkeypatch.setattr(streams, "_NEWLINE", type("Pattern", (), {"split": staticmethod(counting)}))
    wire = b"data: " + b"x" * HUGE + newline * 2
    parser = SseParser()

    events = [event for chunk in chunked(wire) for event in parser.feed(chunk)]

    assert [len(event.data) for event in events] == [HUGE]
    assert parser.finish() == ""
    # No character is split twice: the old parser searched about 500 times the stream's size
    # here. A piece with no line end is kept without being split at all, so only the pieces
    # that end a line reach the splitter (the count sees the parser's work: it is not 0).
    assert 0 < counting.searched <= len(wire)


def test_a_huge_ndjson_line_in_small_chunks_is_searched_once(monkeypatch):
    import pytest_toolnexus._store.streams as streams

    counting = CountingSplit(streams._split_lf)
    monkeypatch.setattr(streams, "_split_lf", counting)
    line = '{"data":"' + "x" * HUGE + '"}'
    splitter = NdjsonSplitter()

    lines = [out for chunk in chunked(line.encode() + b"\n") for out in splitter.feed(chunk)]

    assert lines == [line]
    assert splitter.finish() == ""
    assert 0 < counting.searched <= len(line) + 1


def test_an_event_of_many_data_lines_builds_its_data_once(monkeypatch):
    import pytest_toolnexus._store.streams as streams

    built = []

    class Watched(SseEvent):
        """An event that notes the length of each data it is given."""

        @property
        def data(self):
            return SseEvent.data.__get__(self)

        @data.setter
        def data(self, value):
            if value is not None:
                built.append(len(value))
            SseEvent.data.__set__(self, value)

    monkeypatch.setattr(streams, "SseEvent", Watched)
    lines = 5_000
    texts = [f"{i:099d}" for i in range(lines)]
    wire = "".join(f"data: {text}\n" for text in texts).encode() + b"\n"
    parser = SseParser()

    events = [event for chunk in chunked(wire) for event in parser.feed(chunk)]

    assert len(events) == 1
    assert events[0].data == "\n".join(texts)
    # Built once, whole; line by line it would copy 100 * 5,000**2 / 2 characters.
    assert sum(built) == len(events[0].data)
