"""vcrpy's filters and ``before_record_*`` callbacks, as redact steps on a recorded
:class:`Interaction`.

A step returns the interaction changed, or None when the callback said not to record it (a
``before_record_request`` that returns None). The callbacks get what vcrpy gives them: a
request with ``method``, ``uri`` (``url``), ``host``, ``port``, ``path``, ``query``,
``headers`` and ``body`` (bytes), and a response dict with ``status``, ``headers`` (name ->
list of values) and ``body.string``. What they change is read back; a streamed response's
body cannot be changed that way (its pieces and their times would be lost), and saying so is
an error that names the native hook.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._session.record_body import fixed_body
from pytest_toolnexus._store.bodies import Body, BytesBody, EmptyBody, JsonBody, TextBody
from pytest_toolnexus._store.cassette import Interaction, RecordedRequest

__all__ = [
    "FilterList",
    "VcrRequest",
    "filter_headers",
    "filter_post_data",
    "filter_query",
    "record_request_hook",
    "record_response_hook",
]

FilterList = list[tuple[str, Any]]
"""vcrpy's filter entries: a name, and its replacement (None removes it; a callable is called
with ``key=``, ``value=`` and ``request=`` and returns the new value, or None to remove it)."""

Step = Callable[[Interaction], Interaction | None]
V = TypeVar("V")
_HOOK: Final = "write a pytest_toolnexus_redact hook instead (docs/pytest.md#hooks)"


class _CaseInsensitive(MutableMapping[str, V]):
    """The headers a vcrpy callback edits: a dict whose names ignore case, as vcrpy's do."""

    def __init__(self, pairs: Iterable[tuple[str, V]] = ()) -> None:
        self._items: dict[str, tuple[str, V]] = {}
        for name, value in pairs:
            self[name] = value

    def __getitem__(self, name: str) -> V:
        return self._items[name.lower()][1]

    def __setitem__(self, name: str, value: V) -> None:
        self._items[name.lower()] = (name, value)

    def __delitem__(self, name: str) -> None:
        del self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)


class VcrRequest:
    """A recorded request as vcrpy's ``Request`` shows it to ``before_record_request``."""

    def __init__(self, request: RecordedRequest) -> None:
        self.method = request.method
        self.uri = request.url
        self.headers: MutableMapping[str, str] = _CaseInsensitive(request.headers.multi_items())
        self.body: bytes | None = request.body.content() or None
        self._source = request

    @property
    def url(self) -> str:
        return self.uri

    @property
    def scheme(self) -> str:
        return urlsplit(self.uri).scheme

    protocol = scheme

    @property
    def host(self) -> str:
        return urlsplit(self.uri).hostname or ""

    @property
    def port(self) -> int | None:
        parts = urlsplit(self.uri)
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)

    @property
    def path(self) -> str:
        return urlsplit(self.uri).path

    @property
    def query(self) -> list[tuple[str, str]]:
        return sorted(parse_qsl(urlsplit(self.uri).query, keep_blank_values=True))

    def recorded(self) -> RecordedRequest:
        """The request with what the callback changed."""
        source = self._source
        headers = Headers(list(self.headers.items()))
        body = source.body
        if (self.body or b"") != source.body.content():
            body = _whole_body(headers, self.body or b"")
        return dataclasses.replace(
            source, method=self.method, url=self.uri, headers=headers, body=body
        )


def _whole_body(headers: Headers, data: bytes) -> Body:
    return fixed_body(headers, data) if data else EmptyBody()


def _streamed(body: Body) -> bool:
    if isinstance(body, JsonBody):
        return body.times is not None
    return not isinstance(body, TextBody | BytesBody | EmptyBody)


def _replaced(name: str, value: str, replacement: Any, request: VcrRequest) -> str | None:
    if callable(replacement):
        result = replacement(key=name, value=value, request=request)
        return None if result is None else str(result)
    return None if replacement is None else str(replacement)


def filter_headers(pairs: FilterList) -> Step:
    """vcrpy's ``filter_headers``: each named request header removed or replaced."""
    wanted = {name.lower(): replacement for name, replacement in pairs}

    def step(interaction: Interaction) -> Interaction:
        adapter = VcrRequest(interaction.request)
        kept: list[tuple[str, str]] = []
        for name, value in interaction.request.headers.multi_items():
            if name.lower() not in wanted:
                kept.append((name, value))
                continue
            new = _replaced(name, value, wanted[name.lower()], adapter)
            if new is not None:
                kept.append((name, new))
        request = dataclasses.replace(interaction.request, headers=Headers(kept))
        return dataclasses.replace(interaction, request=request)

    return step


def filter_query(pairs: FilterList) -> Step:
    """vcrpy's ``filter_query_parameters``: each named query parameter removed or replaced."""
    wanted = dict(pairs)

    def step(interaction: Interaction) -> Interaction:
        adapter = VcrRequest(interaction.request)
        parts = urlsplit(interaction.request.url)
        query: list[tuple[str, str]] = []
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name not in wanted:
                query.append((name, value))
                continue
            new = _replaced(name, value, wanted[name], adapter)
            if new is not None:
                query.append((name, new))
        url = urlunsplit(parts._replace(query=urlencode(query)))
        return dataclasses.replace(
            interaction, request=dataclasses.replace(interaction.request, url=url)
        )

    return step


def filter_post_data(pairs: FilterList) -> Step:
    """vcrpy's ``filter_post_data_parameters``: each named top-level field of a JSON or form
    request body removed or replaced."""
    wanted = dict(pairs)

    def step(interaction: Interaction) -> Interaction:
        request = interaction.request
        adapter = VcrRequest(request)
        body = request.body
        if isinstance(body, JsonBody) and isinstance(body.value, dict):
            value: dict[str, Any] = {}
            for name, item in body.value.items():
                if name not in wanted:
                    value[name] = item
                    continue
                replacement = wanted[name]
                if callable(replacement):
                    item = replacement(key=name, value=item, request=adapter)
                elif replacement is None:
                    continue
                else:
                    item = replacement
                if item is not None:
                    value[name] = item
            body = JsonBody(value)
        elif isinstance(body, TextBody) and "=" in body.text:
            fields: list[tuple[str, str]] = []
            for name, item in parse_qsl(body.text, keep_blank_values=True):
                if name not in wanted:
                    fields.append((name, item))
                    continue
                new = _replaced(name, item, wanted[name], adapter)
                if new is not None:
                    fields.append((name, new))
            body = TextBody(urlencode(fields))
        else:
            return interaction
        return dataclasses.replace(interaction, request=dataclasses.replace(request, body=body))

    return step


def record_request_hook(callback: Callable[[Any], Any]) -> Step:
    """vcrpy's ``before_record_request``: the callback edits (or drops, returning None) the
    request as vcrpy's ``Request``."""

    def step(interaction: Interaction) -> Interaction | None:
        adapter = VcrRequest(interaction.request)
        result = callback(adapter)
        if result is None:
            return None
        if not isinstance(result, VcrRequest):
            raise TypeError(
                f"before_record_request returned {type(result).__name__}, not the request it "
                f"was given (or None to leave it unrecorded); {_HOOK}"
            )
        return dataclasses.replace(interaction, request=result.recorded())

    return step


def _response_dict(interaction: Interaction) -> dict[str, Any]:
    response = interaction.response
    assert response is not None
    headers: _CaseInsensitive[list[str]] = _CaseInsensitive()
    for name, value in response.headers.multi_items():
        headers.setdefault(name, []).append(value)
    content = b"" if _streamed(response.body) else response.body.content()
    return {
        "status": {"code": response.status, "message": ""},
        "headers": headers,
        "body": {"string": content},
    }


def record_response_hook(callback: Callable[[Any], Any]) -> Step:
    """vcrpy's ``before_record_response``: the callback edits (or drops, returning None) the
    response as vcrpy's dict."""

    def step(interaction: Interaction) -> Interaction | None:
        response = interaction.response
        if response is None:
            return interaction  # a request that failed has no response to show
        given = _response_dict(interaction)
        before = given["body"]["string"]
        result = callback(given)
        if result is None:
            return None
        if not isinstance(result, dict):
            raise TypeError(
                f"before_record_response returned {type(result).__name__}, not the response "
                f"dict it was given (or None to leave it unrecorded); {_HOOK}"
            )
        headers_doc = result.get("headers", {})
        status = result.get("status", {}).get("code", response.status)
        data = result.get("body", {}).get("string", b"")
        data = data.encode() if isinstance(data, str) else bytes(data)
        pairs = [
            (name, str(value))
            for name, values in headers_doc.items()
            for value in (values if isinstance(values, list) else [values])
        ]
        headers = Headers(pairs)
        body = response.body
        if data != before:
            if _streamed(body):
                raise TypeError(
                    "before_record_response changed the body of a streamed response, which "
                    "would lose its pieces and their times; " + _HOOK
                )
            body = _whole_body(headers, data)
        changed = dataclasses.replace(response, status=int(status), headers=headers, body=body)
        return dataclasses.replace(interaction, response=changed)

    return step
