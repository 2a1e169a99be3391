"""Headers: case-insensitive, ordered, multi-value (DESIGN §2, rule 1)."""

import httpx
import httpx2
import pytest

from pytest_toolnexus import Headers, TransportRequest, TransportResponse

COOKIES = [
    ("Set-Cookie", "a=1; Path=/"),
    ("set-cookie", "b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT"),
]


def test_lookup_ignores_case():
    headers = Headers({"retry-after": "7"})

    assert headers["Retry-After"] == "7"
    assert headers["RETRY-AFTER"] == "7"
    assert headers.get("Retry-After") == "7"
    assert "Retry-After" in headers
    assert "X-Missing" not in headers
    assert headers.get("X-Missing") is None


def test_a_missing_name_raises_key_error():
    with pytest.raises(KeyError):
        Headers()["retry-after"]


def test_non_string_names_are_never_contained():
    assert 1 not in Headers({"a": "b"})


def test_a_lowercase_retry_after_from_a_transport_reads_as_retry_after():
    response = TransportResponse(429, {"retry-after": "2"})

    assert isinstance(response.headers, Headers)
    assert response.headers["Retry-After"] == "2"


def test_request_headers_given_as_a_dict_become_headers():
    request = TransportRequest("post", "http://test/", headers={"x-api-key": "k"})

    assert isinstance(request.headers, Headers)
    assert request.headers["X-Api-Key"] == "k"
    assert request.method == "POST"


def test_every_value_of_a_repeated_name_is_kept_in_order():
    headers = Headers([*COOKIES, ("Content-Type", "text/plain")])

    assert headers.get_list("SET-COOKIE") == [value for _, value in COOKIES]
    assert headers.multi_items() == [*COOKIES, ("Content-Type", "text/plain")]
    assert headers.get_list("x-missing") == []


def test_reading_a_repeated_name_as_a_mapping_joins_like_httpx():
    ours = Headers(COOKIES)
    theirs = httpx.Headers(COOKIES)

    assert ours["set-cookie"] == theirs["set-cookie"]


def test_iteration_yields_each_name_once_as_first_spelled():
    headers = Headers([("Set-Cookie", "a=1"), ("set-cookie", "b=2"), ("X-Id", "9")])

    assert list(headers) == ["Set-Cookie", "X-Id"]
    assert len(headers) == 2
    assert dict(headers.items()) == {"Set-Cookie": "a=1, b=2", "X-Id": "9"}


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(COOKIES, id="str-pairs"),
        pytest.param([(k.encode(), v.encode()) for k, v in COOKIES], id="bytes-pairs"),
        pytest.param(Headers(COOKIES), id="Headers"),
        pytest.param(httpx.Headers(COOKIES), id="httpx.Headers"),
        pytest.param(httpx2.Headers(COOKIES), id="httpx2.Headers"),
    ],
)
def test_multiple_values_survive_every_way_of_building_headers(source):
    headers = Headers(source)

    assert headers.get_list("set-cookie") == [value for _, value in COOKIES]


def test_bytes_are_decoded_as_latin_1():
    headers = Headers([(b"X-Name", "caf\u00e9".encode("latin-1"))])

    assert headers["x-name"] == "caf\u00e9"


def test_a_value_that_is_not_text_is_refused():
    with pytest.raises(TypeError, match="header names and values must be str or bytes"):
        Headers({"content-length": 12})


def test_equality_ignores_name_case_and_matches_plain_mappings():
    assert Headers({"Content-Type": "text/plain"}) == Headers({"content-type": "text/plain"})
    assert Headers({"Content-Type": "text/plain"}) == {"content-type": "text/plain"}
    assert Headers({"a": "1"}) != Headers({"a": "2"})
    assert Headers(COOKIES) != Headers(COOKIES[:1])
    assert Headers({"a": "1"}) != ["a", "1"]


def test_equal_headers_hash_equal():
    first = Headers({"Retry-After": "1", "X-Id": "a"})
    second = Headers([("x-id", "a"), ("retry-after", "1")])

    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


def test_headers_are_immutable_and_copies_leave_the_original_alone():
    headers = Headers([*COOKIES, ("Retry-After", "1")])

    with pytest.raises(TypeError):
        headers["Retry-After"] = "2"
    without = headers.without("SET-COOKIE")
    replaced = headers.with_value("retry-after", "5")

    assert without.multi_items() == [("Retry-After", "1")]
    assert replaced.get_list("Retry-After") == ["5"]
    assert replaced.get_list("set-cookie") == [value for _, value in COOKIES]
    assert headers.get_list("set-cookie") == [value for _, value in COOKIES]
    assert headers["retry-after"] == "1"


def test_repr_shows_the_pairs_as_received():
    assert repr(Headers([("X-A", "1")])) == "Headers([('X-A', '1')])"
