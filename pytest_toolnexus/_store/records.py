"""The records of a cassette: a request, its response or transport error, and the interaction
that holds them, each with the map it is stored as (``to_doc``, ``from_doc``).

An interaction read from a file is a :class:`LoadedInteraction`, which decodes its parts when
first read. A part found damaged raises :class:`CassetteFormatError` naming the file and the
interaction. The file itself (the document, loading, saving) is :mod:`.cassette`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Final

from pytest_toolnexus._safety.mask import masked_repr
from pytest_toolnexus._seam.errors import CassetteFormatError
from pytest_toolnexus._seam.headers import Headers

from .bodies import (
    Body,
    EmptyBody,
    MalformedCassette,
    body_from_doc,
    brief,
    checked_str,
    checked_time,
    checked_url,
    rounded_ms,
)

__all__ = [
    "Interaction",
    "LoadedInteraction",
    "RecordedError",
    "RecordedRequest",
    "RecordedResponse",
    "corrupt_at",
    "damage_reason",
]


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedError:
    """A transport failure: its kind (a :class:`TransportError` name), message and time."""

    kind: str
    message: str
    t: float

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "t": rounded_ms(self.t)}

    @classmethod
    def from_doc(cls, doc: object) -> RecordedError:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("an error must be a map")
        t = doc.get("t", 0.0)
        return cls(
            checked_str(doc.get("kind"), "an error kind"),
            checked_str(doc.get("message", ""), "an error message"),
            checked_time(t),
        )


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as recorded: the body parsed, the headers after redaction."""

    method: str
    url: str
    headers: Headers = field(default_factory=Headers)
    body: Body = field(default_factory=EmptyBody)

    def to_doc(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "url": self.url,
            "headers": [list(pair) for pair in self.headers.multi_items()],
            "body": self.body.to_doc(),
        }

    @classmethod
    def from_doc(cls, doc: object) -> RecordedRequest:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("a request must be a map")
        return cls(
            method=checked_str(doc.get("method"), "a request method"),
            url=checked_url(doc.get("url")),
            headers=_headers_from(doc.get("headers", [])),
            body=body_from_doc(doc.get("body", {"kind": "empty"}), timed=False),
        )


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """A response as recorded, with its timing in ms from the moment the request was sent.

    ``t_headers`` is when the status and headers arrived, ``t_end`` when the body ended (or was
    abandoned). ``error`` is a transport failure that cut the body short. ``complete`` is false
    when the client closed or cancelled the stream before its end, so the rest was never seen.
    """

    status: int
    headers: Headers = field(default_factory=Headers)
    body: Body = field(default_factory=EmptyBody)
    t_headers: float = 0.0
    t_end: float = 0.0
    error: RecordedError | None = None
    complete: bool = True

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "headers": [list(pair) for pair in self.headers.multi_items()],
            "t_headers": rounded_ms(self.t_headers),
            "t_end": rounded_ms(self.t_end),
            "body": self.body.to_doc(),
        }
        if self.error is not None:
            doc["error"] = self.error.to_doc()
        if not self.complete:
            doc["complete"] = False
        return doc

    @classmethod
    def from_doc(cls, doc: object) -> RecordedResponse:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("a response must be a map")
        status = doc.get("status")
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise MalformedCassette(f"a response status must be 100-599, found {brief(status)}")
        complete = doc.get("complete", True)
        if not isinstance(complete, bool):
            raise MalformedCassette("a response's 'complete' must be a boolean")
        error = doc.get("error")
        return cls(
            status=status,
            headers=_headers_from(doc.get("headers", [])),
            body=body_from_doc(doc.get("body", {"kind": "empty"}), timed=True),
            t_headers=checked_time(doc.get("t_headers", 0.0)),
            t_end=checked_time(doc.get("t_end", 0.0)),
            error=None if error is None else RecordedError.from_doc(error),
            complete=complete,
        )


_LIST_TYPE: Final = frozenset({list})


def _headers_from(doc: object) -> Headers:
    if not isinstance(doc, list):
        raise MalformedCassette("headers must be a list of [name, value] pairs")
    # Checked in C where possible: this runs twice for every interaction loaded.
    try:
        if not set(map(type, doc)) <= _LIST_TYPE:
            raise TypeError
        pairs = [(name, value) for name, value in doc]
        "".join([name for name, _ in pairs])
        "".join([value for _, value in pairs])
    except (TypeError, ValueError):
        raise MalformedCassette("each header must be a [name, value] pair of strings") from None
    return Headers.from_checked_pairs(pairs)


@masked_repr
@dataclass(frozen=True, slots=True)
class Interaction:
    """One request and what came of it: a response, or a transport error before any response."""

    request: RecordedRequest
    response: RecordedResponse | None = None
    error: RecordedError | None = None

    def __post_init__(self) -> None:
        if (self.response is None) == (self.error is None):
            raise ValueError("an Interaction has exactly one of response= and error=")

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"request": self.request.to_doc()}
        if self.response is not None:
            doc["response"] = self.response.to_doc()
        if self.error is not None:
            doc["error"] = self.error.to_doc()
        return doc

    @classmethod
    def from_doc(cls, doc: object) -> Interaction:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("an interaction must be a map")
        response = doc.get("response")
        error = doc.get("error")
        if (response is None) == (error is None):
            raise MalformedCassette("an interaction needs exactly one of 'response' and 'error'")
        return cls(
            request=RecordedRequest.from_doc(doc.get("request")),
            response=None if response is None else RecordedResponse.from_doc(response),
            error=None if error is None else RecordedError.from_doc(error),
        )


# The slots behind Interaction's three fields, which a loaded interaction fills on first read.
_SLOTS: Final = {name: Interaction.__dict__[name] for name in ("request", "response", "error")}
_DAMAGE: Final = (MalformedCassette, ValueError, TypeError, RecursionError)


def _part(name: str) -> property:
    slot = _SLOTS[name]

    def read(self: LoadedInteraction) -> Any:
        try:
            return slot.__get__(self, Interaction)
        except AttributeError:  # not decoded yet
            value = self._decode(name)
            slot.__set__(self, value)
            return value

    def write(self: LoadedInteraction, value: Any) -> None:
        # Only Interaction's own __init__ writes (through dataclasses.replace, say): the
        # instance stays frozen to everyone else, as Interaction's __setattr__ sees to.
        slot.__set__(self, value)

    return property(read, write, doc=f"The interaction's {name}, decoded on first read.")


@masked_repr
class LoadedInteraction(Interaction):
    """An :class:`Interaction` read from a file, whose request, response and error are decoded
    from the stored document when first read, not when the file is loaded.

    A session reads every request when it opens (to match them) and only the responses it
    plays, so a test that plays five answers of a thousand decodes five responses. A part
    whose shape is wrong raises :class:`CassetteFormatError` naming the file and the
    interaction when it is first read; ``load_cassette(path, validate=True)`` reads them all.
    It compares, hashes, prints and pickles as the plain :class:`Interaction` it stands for.
    """

    __slots__ = ("_source",)

    _source: tuple[dict[str, Any], str, int]  # the stored map, the file, the position

    request = _part("request")
    response = _part("response")
    error = _part("error")

    @classmethod
    def stored(cls, doc: dict[str, Any], where: str, position: int) -> LoadedInteraction:
        """The interaction stored as ``doc`` at ``position`` in the file ``where``, its
        outline already checked, its parts not yet decoded."""
        made = object.__new__(cls)
        _SOURCE.__set__(made, (doc, where, position))  # one slot: loading makes thousands
        return made

    def _decode(self, name: str) -> Any:
        try:
            doc, where, position = self._source
        except AttributeError:  # made by __init__, which sets all three parts
            raise AttributeError(name) from None
        raw = doc.get(name)
        try:
            if name == "request":
                return RecordedRequest.from_doc(raw)
            if raw is None:
                return None
            if name == "response":
                return RecordedResponse.from_doc(raw)
            return RecordedError.from_doc(raw)
        except _DAMAGE as exc:
            raise corrupt_at(where, position, damage_reason(exc)) from exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Interaction):
            return NotImplemented
        return (self.request, self.response, self.error) == (
            other.request,
            other.response,
            other.error,
        )

    __hash__ = Interaction.__hash__

    def __repr__(self) -> str:
        return (
            f"Interaction(request={self.request!r}, response={self.response!r}, "
            f"error={self.error!r})"
        )

    def __reduce__(self) -> tuple[type[Interaction], tuple[Any, ...]]:
        return (Interaction, (self.request, self.response, self.error))


_SOURCE: Final = LoadedInteraction.__dict__["_source"]


def damage_reason(exc: BaseException) -> str:
    """What went wrong, in words: the codec's own sentence, or the error a damaged value raised."""
    if isinstance(exc, MalformedCassette):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "a value is nested deeper than Python's recursion limit"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def corrupt_at(path: str | PathLike[str], position: int | None, reason: str) -> CassetteFormatError:
    """The error for the cassette at ``path`` found damaged at interaction ``position`` (None:
    in a fault injected into it), for ``reason``: it names the file, the place and the fix."""
    where = "an injected fault" if position is None else f"interaction {position}"
    return CassetteFormatError(
        f"cassette {path} is corrupt at {where}: {reason}; restore the file from version "
        "control, or record it again with record mode 'all'",
        path=str(path),
    )
