"""Response-only fixtures: a file that holds one response, ``{"status", "headers", "body"}``,
and no request (a JavaScript test that mocks ``fetch`` writes them: the status, the headers as
``{name: value}`` and the body as the text ``response.text()`` gave).

Such a file has no method or URL to replay it at, so it is imported only for a request the user
names (``--request "POST https://api.anthropic.com/v1/messages"``). The stored request has that
method and URL, no headers, and an ``any`` body: it answers whatever body the client sends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import AnyBody, RecordedRequest

from .import_vcr_body import BodyProblem

__all__ = ["FIXTURE_SOURCE", "AnsweredRequest", "fixture_response"]

FIXTURE_SOURCE: Final = "response fixture"
"""What a cassette imported from a response-only fixture says it was converted from."""

_METHOD: Final = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True, slots=True)
class AnsweredRequest:
    """The request a response-only fixture answers: a method and an absolute http(s) URL."""

    method: str
    url: str

    @classmethod
    def parse(cls, text: str) -> AnsweredRequest:
        """``"POST https://api.anthropic.com/v1/messages"`` as a request. Raises
        :class:`ValueError`, saying what is wrong, for anything else."""
        parts = text.split()
        if len(parts) != 2:
            raise ValueError(
                f"{text!r} is not METHOD URL (for example "
                "'POST https://api.anthropic.com/v1/messages')"
            )
        method, url = parts
        if not _METHOD.fullmatch(method):
            raise ValueError(f"{method!r} in {text!r} is not an HTTP method")
        split = urlsplit(url)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ValueError(f"{url!r} in {text!r} is not an absolute http:// or https:// URL")
        return cls(method.upper(), url)

    def recorded(self) -> RecordedRequest:
        """The stored request: this method and URL, no headers, any body."""
        return RecordedRequest(self.method, self.url, Headers(), AnyBody())


def fixture_response(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The fixture's response in the form of a vcrpy response map, after checking each of its
    three fields: ``status`` an integer, ``headers`` a map of names to text values, ``body``
    text (the decoded text a client read: it is never content-decoded again)."""
    status = raw["status"]
    if isinstance(status, bool) or not isinstance(status, int):
        raise BodyProblem(f"the fixture's 'status' is {status!r}, not an integer status code")
    headers = raw["headers"]
    if not isinstance(headers, Mapping):
        raise BodyProblem("the fixture's 'headers' is not a map of header names to values")
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise BodyProblem(f"the fixture's header {name!r} is {_json_type(value)}, not text")
    body = raw["body"]
    if not isinstance(body, str):
        raise BodyProblem(f"the fixture's 'body' is {_json_type(body)}, not text")
    return {
        "status": {"code": status},
        "headers": {name: [value] for name, value in headers.items()},
        "body": {"string": body},
    }


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"
