"""``pytest-toolnexus import-vcr``: a vcrpy YAML cassette in, a format-v1 msgpack cassette out.

Each interaction goes through the same steps as a live recording: the body's
``content-encoding`` is decoded and the headers that describe the wire form are dropped, a JSON
body is stored parsed, an event stream is split into SSE events and NDJSON into lines, and the
store's redaction (credential headers, credential query values, account keys) is applied.
The secret scan then runs over the result, and nothing is written while it finds anything.

vcrpy keeps no timing, so every SSE event and NDJSON line is stamped ``t = 0`` and each response
has ``t_headers = t_end = 0``: on replay the whole body is there at once.

A response-only fixture (``{status, headers, body}``, :mod:`._import_vcr_fixture`) goes through
the same steps, as the answer to the request the user names.

Why one module of over 400 lines: it is one pipeline (read, convert each interaction, redact,
scan, write), with its error sentences; the body conversion is already apart in
:mod:`._import_vcr_body` and the response-only fixtures in :mod:`._import_vcr_fixture`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._safety.redact_interaction import redacted
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.bodies import keeps_content_length
from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    Body,
    BytesBody,
    Cassette,
    EmptyBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedRequest,
    RecordedResponse,
    SseBody,
    TextBody,
)
from pytest_toolnexus._version import __version__

from .import_vcr_body import (
    BodyProblem,
    decode,
    parsed_body,
    raw_body,
    request_body,
    response_body,
)
from .import_vcr_fixture import FIXTURE_SOURCE, AnsweredRequest, fixture_response
from .import_vcr_read import VcrImportError, default_dest, read_vcr

__all__ = [
    "AnsweredRequest",
    "VcrImportError",
    "convert",
    "default_dest",
    "import_vcr",
    "load_vcr_cassette",
    "read_vcr",
]

# Headers that describe the wire form of a body, which a cassette stores decoded; the live
# transport drops the same three.
_WIRE_HEADERS: Final = ("content-encoding", "content-length", "transfer-encoding")

# The fields each map of a vcrpy interaction may hold. Any other field is an error: a field
# import-vcr does not read is data it would drop. The fields read and deliberately left out,
# each because the cassette format has no place for it and replay does not need it:
# - ``recorded_at`` (Ruby VCR, an interaction's wall-clock time): the cassette keeps offsets
#   from the request, and vcrpy has none to give;
# - ``http_version`` (Ruby VCR, vcrpy's old httpx form): replay speaks to the client in
#   process, and the client's library sets its own protocol version;
# - ``status.message`` (the reason phrase): clients derive it from the code;
# - ``response.url`` (vcrpy's aiohttp form) when it is the request's URL; a different one
#   (a redirect) is an error.
INTERACTION_KEYS: Final = frozenset({"request", "response", "recorded_at"})
REQUEST_KEYS: Final = frozenset({"method", "uri", "url", "body", "headers", "parsed_body"})
RESPONSE_KEYS: Final = frozenset(
    {"status", "headers", "body", "parsed_body", "status_code", "content", "http_version", "url"}
)
STATUS_KEYS: Final = frozenset({"code", "message"})


@dataclass(frozen=True, slots=True)
class Converted:
    """The result of converting a vcrpy document."""

    interactions: list[Interaction]
    summaries: list[str]
    problems: list[str]
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Converting one interaction


def _check_keys(raw: Mapping[Any, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        raise BodyProblem(
            f"{where} has the field(s) {', '.join(map(repr, unknown))}, which import-vcr "
            f"does not understand (it reads {', '.join(sorted(allowed))})"
        )


def _headers(raw: object, where: str) -> Headers:
    """vcrpy's ``{name: [values]}`` (a bare value is taken as one value) as ordered pairs."""
    if raw is None:
        return Headers()
    if not isinstance(raw, Mapping):
        raise BodyProblem(f"{where} headers are not a map of name to values")
    pairs: list[tuple[str, str]] = []
    for name, values in raw.items():
        items = values if isinstance(values, list | tuple) else [values]
        for value in items:
            if value is None:  # vcrpy's filter_headers can leave a removed header as null
                continue
            if isinstance(value, bytes):
                text = value.decode("latin-1")
            elif isinstance(value, str | int | float) and not isinstance(value, bool):
                text = str(value)
            else:
                raise BodyProblem(
                    f"{where} header {name!r} has a value of type {type(value).__name__}"
                )
            pairs.append((str(name), text))
    return Headers(pairs)


def _status(raw: Mapping[str, Any]) -> int:
    status = raw.get("status")
    if isinstance(status, Mapping):
        _check_keys(status, STATUS_KEYS, "the response status")
        code = status.get("code")
    else:
        code = raw.get("status_code", status)
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
        raise BodyProblem(f"the response status must be 100-599, found {code!r}")
    return code


def _body_field(raw: Mapping[str, Any], names: tuple[str, ...], where: str) -> str | None:
    """The one body field of a request or response map that holds content (a parsed body
    holds content whenever it is there: ``{}`` is a JSON value)."""
    present = [
        name
        for name in names
        if (raw.get(name) is not None if name == "parsed_body" else _has_content(raw.get(name)))
    ]
    if len(present) > 1:
        raise BodyProblem(f"{where} has a body in both {present[0]!r} and {present[1]!r}")
    return present[0] if present else None


def _has_content(value: object) -> bool:
    if value is None:
        return False
    if isinstance(value, Mapping):
        return any(_has_content(item) for item in value.values())
    return not (isinstance(value, str | bytes | list | tuple) and not value)


def _absolute(uri: str) -> tuple[str, str]:
    """``uri`` as an absolute URL, and a warning ("" when none). A hand-edited uri without a
    scheme whose first part names a host (``googleapis.com``, ``localhost:8080/v1``) gets
    ``https://``; one that names no host (``""``, ``/v1/chat``) cannot be replayed."""
    try:
        parts = urlsplit(uri)
        has_host = bool(parts.scheme and parts.hostname)
    except ValueError:
        return uri, ""  # a broken IPv6 literal: the loader's matching names it
    if has_host:
        return uri, ""
    host = uri.split("/", 1)[0].rpartition("@")[2].split(":", 1)[0]
    if "://" not in uri and ("." in host or host == "localhost") and not uri.startswith("/"):
        fixed = f"https://{uri}"
        return fixed, f"the uri {uri!r} has no scheme; it is imported as {fixed!r}"
    raise BodyProblem(
        f"the request uri {uri!r} is not an absolute URL (a scheme and a host), so no client "
        "could send it"
    )


def _request(raw: Mapping[str, Any]) -> tuple[RecordedRequest, str]:
    """The stored request, and a warning about its uri ("" when none)."""
    _check_keys(raw, REQUEST_KEYS, "the request")
    method = raw.get("method")
    uri = raw.get("uri", raw.get("url"))
    if not isinstance(method, str) or not isinstance(uri, str):
        raise BodyProblem("the request needs a method and a uri")
    uri, warning = _absolute(uri)
    headers = _headers(raw.get("headers"), "the request")
    field = _body_field(raw, ("body", "parsed_body"), "the request")
    body: Body
    if field == "parsed_body":
        body = parsed_body(raw["parsed_body"], "the request")
    else:
        body = request_body(headers, raw_body(raw.get("body"), "the request"))
    return RecordedRequest(method.upper(), uri, headers, body), warning


def _response(
    raw: Mapping[str, Any], request: RecordedRequest
) -> tuple[RecordedResponse, str, str]:
    """The stored response, a note on what was decoded, and a warning ("" when none)."""
    _check_keys(raw, RESPONSE_KEYS, "the response")
    url = raw.get("url")
    if url is not None and url != request.url and _absolute(url)[0] != request.url:
        raise BodyProblem(
            "the response has the field 'url', which names another URL than the request's "
            "(a redirect); import-vcr keeps one URL per interaction"
        )
    status = _status(raw)
    headers = _headers(raw.get("headers"), "the response")
    old_httpx = "status_code" in raw  # vcrpy < 4.2 stored httpx's decoded content
    field = _body_field(
        raw,
        ("content", "body", "parsed_body") if old_httpx else ("body", "parsed_body"),
        "the response",
    )
    note = warning = ""
    body: Body
    if field == "parsed_body":
        body = parsed_body(raw["parsed_body"], "the response")
    else:
        raw_data = raw_body(raw.get(field or "body"), "the response")
        data = raw_data.data
        if not old_httpx:
            data, note = decode(headers, raw_data)
        body, warning = response_body(headers.without(*_WIRE_HEADERS), data, binary=raw_data.binary)
    dropped: tuple[str, ...] = _WIRE_HEADERS
    if isinstance(body, EmptyBody) and keeps_content_length(request.method, status):
        # No body by definition: its content-length is the size a GET would have had.
        dropped = ("content-encoding", "transfer-encoding")
    response = RecordedResponse(status, headers.without(*dropped), body, 0.0, 0.0)
    return response, f", {note}" if note else "", warning


def _convert_one(raw: object, answers: AnsweredRequest | None) -> tuple[Interaction, str, str]:
    """One vcrpy interaction (or, when ``answers`` is given, a response-only fixture) as a
    stored interaction (before redaction), a note on the encodings decoded from its
    response body, and a warning about that body ("" when none)."""
    if answers is not None:
        if not isinstance(raw, Mapping):
            raise BodyProblem("the fixture is not a map")
        request = answers.recorded()
        response, note, warning = _response(fixture_response(raw), request)
        return Interaction(request, response), f"{note}, any request body", warning
    if not isinstance(raw, Mapping):
        raise BodyProblem("the interaction is not a map")
    _check_keys(raw, INTERACTION_KEYS, "the interaction")
    request_raw = raw.get("request")
    response_raw = raw.get("response")
    if not isinstance(request_raw, Mapping) or not isinstance(response_raw, Mapping):
        raise BodyProblem("the interaction needs a 'request' map and a 'response' map")
    request, about_uri = _request(request_raw)
    response, note, warning = _response(response_raw, request)
    return Interaction(request, response), note, "; ".join(w for w in (about_uri, warning) if w)


def _kind(response: RecordedResponse) -> str:
    body = response.body
    if isinstance(body, SseBody):
        return f"sse, {len(body.events)} event(s)"
    if isinstance(body, NdjsonBody):
        return f"ndjson, {len(body.lines)} line(s)"
    if isinstance(body, TextBody):
        return f"text, {len(body.text)} char(s)"
    if isinstance(body, BytesBody):
        return f"bytes, {len(body.data)} byte(s)"
    if isinstance(body, JsonBody):
        return "json"
    if isinstance(body, EmptyBody):
        length = response.headers.get("content-length")
        return "no body" if length is None else f"no body, content-length {length} kept"
    return body.kind


def _label(raw: object, answers: AnsweredRequest | None) -> str:
    """``METHOD URL`` of a raw interaction (or of the request a fixture answers), with
    credential query values redacted."""
    if answers is not None:
        return f"{answers.method} {redact_url(answers.url)}"
    request = raw.get("request") if isinstance(raw, Mapping) else None
    if not isinstance(request, Mapping):
        return "?"
    method = request.get("method")
    uri = request.get("uri", request.get("url"))
    url = redact_url(uri) if isinstance(uri, str) else "?"
    return f"{str(method).upper() if method else '?'} {url}"


def convert(
    raw_interactions: Sequence[Any],
    scanner: SecretScanner,
    *,
    answers: AnsweredRequest | None = None,
) -> Converted:
    """Convert and redact every interaction; a problem with one is reported, not raised.
    With ``answers``, each raw item is a response-only fixture answering that request."""
    interactions: list[Interaction] = []
    summaries: list[str] = []
    problems: list[str] = []
    warnings: list[str] = []
    for number, raw in enumerate(raw_interactions):
        try:
            interaction, note, warning = _convert_one(raw, answers)
        except BodyProblem as exc:
            label = _label(raw, answers)
            problems.append(scanner.mask(f"interaction #{number} ({label}): {exc}"))
            continue
        safe = redacted(interaction)
        interactions.append(safe)
        response = safe.response
        assert response is not None
        summaries.append(
            scanner.mask(
                f"#{number} {safe.request.method} {safe.request.url} -> {response.status}, "
                f"{_kind(response)}{note}"
            )
        )
        if warning:
            label = _label(raw, answers)
            warnings.append(scanner.mask(f"interaction #{number} ({label}): {warning}"))
    return Converted(interactions, summaries, problems, warnings)


# ---------------------------------------------------------------------------------------------
# The command


def _meta(source: Path, flavour: str, *, fixture: bool) -> dict[str, Any]:
    return {
        "imported_from": f"{source.name} ({flavour})",
        "converted_from": FIXTURE_SOURCE if fixture else "vcrpy",
        "recorded_with": f"pytest-toolnexus {__version__} import-vcr",
    }


@dataclass(frozen=True, slots=True)
class Outcome:
    """What converting one file came to: the cassette (unsaved), or the errors that kept it
    from being written, and the summary lines either way."""

    cassette: Cassette | None
    summaries: list[str]
    errors: list[str]
    warnings: list[str] = field(default_factory=list)
    """What was converted but deserves a look (a body that looks like a stream, kept whole)."""
    reasons: list[str] = field(default_factory=list)
    """Why nothing was written, one line each: the interactions that could not be converted,
    or where each remaining secret sits (never its value)."""
    secret: bool = False
    """Whether what kept it from being written is a remaining secret."""


def _no_request(source: Path) -> VcrImportError:
    return VcrImportError(
        f"{source} is a response-only fixture ({{status, headers, body}}): it holds one "
        "response and no request, so there is no method or URL to replay it at. Name the "
        f'request it answers: pytest-toolnexus import-vcr {source} --request "METHOD URL" '
        '(for example --request "POST https://api.anthropic.com/v1/messages")'
    )


def convert_file(
    source: Path,
    dest: Path,
    *,
    allow_secrets: Sequence[str] = (),
    request: AnsweredRequest | None = None,
) -> Outcome:
    """Read, convert, redact and scan one vcrpy cassette, or a response-only fixture as the
    answer to ``request`` (which a vcrpy cassette ignores). Raises :class:`VcrImportError`
    when ``source`` cannot be read as either, or is a fixture and no ``request`` is given."""
    found = read_vcr(source)
    scanner = SecretScanner(allow=allow_secrets)
    if found.fixture is None:
        converted = convert(found.interactions, scanner)
    elif request is None:
        raise _no_request(source)
    else:
        converted = convert([found.fixture], scanner, answers=request)
    if converted.problems:
        errors = [f"{source}: {problem}" for problem in converted.problems]
        errors.append(
            f"{dest} was not written: {len(converted.problems)} interaction(s) could not be "
            "converted"
        )
        return Outcome(
            None, converted.summaries, errors, converted.warnings, list(converted.problems)
        )
    hits = scanner.scan(converted.interactions)
    if hits:
        errors = [
            f"{dest} was not written: after redaction it would hold {len(hits)} secret(s)",
            *(f"  - {hit}" for hit in hits),
            "Remove them from the vcrpy cassette (or re-record it with filter_headers / "
            "filter_query_parameters), or, for a known fake value, pass --allow-secret VALUE.",
        ]
        reasons = [str(hit) for hit in hits]
        return Outcome(None, converted.summaries, errors, converted.warnings, reasons, True)
    meta = _meta(source, found.flavour, fixture=found.fixture is not None)
    cassette = Cassette(dest, converted.interactions, meta)
    return Outcome(cassette, converted.summaries, [], converted.warnings)


def load_vcr_cassette(
    source: Path,
    dest: Path,
    *,
    allow_secrets: Sequence[str] = (),
    request: str | AnsweredRequest | None = None,
) -> tuple[Cassette, list[str]]:
    """The vcrpy cassette at ``source`` converted and redacted into an unsaved cassette bound
    to ``dest``, and one summary line per interaction. A response-only fixture is converted
    as the answer to ``request`` (``"POST https://api.anthropic.com/v1/messages"``), which a
    vcrpy cassette ignores.

    Raises :class:`VcrImportError` naming the file (and the interaction) when the source
    cannot be read, an interaction cannot be converted, or a secret would remain; and
    :class:`ValueError` when ``request`` is not ``METHOD URL``.
    """
    if isinstance(request, str):
        request = AnsweredRequest.parse(request)
    outcome = convert_file(source, dest, allow_secrets=allow_secrets, request=request)
    if outcome.cassette is None:
        detail = "; ".join(line.strip() for line in outcome.errors[:-1] or outcome.errors)
        if not detail.startswith(str(source)):
            detail = f"{source}: {detail}"
        raise VcrImportError(detail)
    return outcome.cassette, outcome.summaries


def write_one(
    source: Path,
    target: Path,
    *,
    force: bool,
    allow_secrets: Sequence[str],
    out: TextIO,
    err: TextIO,
    summaries: bool = True,
    request: AnsweredRequest | None = None,
) -> int:
    """Convert ``source`` into ``target``; returns the exit code (0 written, 1 refused, 2
    unreadable input). Nothing is written unless every interaction converts cleanly."""
    if target.resolve() == source.resolve():
        print(f"error: the destination {target} is the source file; name another DEST", file=err)
        return 2
    if not source.exists():
        print(f"error: {source} does not exist", file=err)
        return 2
    if target.exists() and not force:
        print(
            f"error: {target} exists; pass --force to overwrite it (nothing was written)",
            file=err,
        )
        return 1
    try:
        outcome = convert_file(source, target, allow_secrets=allow_secrets, request=request)
    except VcrImportError as exc:
        print(f"error: {exc}", file=err)
        return 2
    if summaries:
        for line in outcome.summaries:
            print(line, file=out)
    for line in outcome.warnings:
        print(f"warning: {source}: {line}", file=err)
    if outcome.cassette is None:
        for line in outcome.errors:
            print(line if line.startswith(("  ", "Remove")) else f"error: {line}", file=err)
        return 1
    try:
        outcome.cassette.save(allow_secrets=allow_secrets)
    except CassetteError as exc:
        print(f"error: {exc}", file=err)
        return 1
    except OSError as exc:
        print(f"error: cannot write {target}: {exc.strerror or exc}", file=err)
        return 1
    print(f"wrote {target} ({len(outcome.cassette.interactions)} interaction(s))", file=out)
    return 0


def import_vcr(
    source: Path,
    dest: Path | None,
    *,
    force: bool,
    allow_secrets: Sequence[str],
    out: TextIO,
    err: TextIO,
    request: AnsweredRequest | None = None,
) -> int:
    """Run ``import-vcr`` on one file; returns the exit code (0 written, 1 refused, 2
    unreadable input)."""
    target = dest if dest is not None else default_dest(source)
    return write_one(
        source,
        target,
        force=force,
        allow_secrets=allow_secrets,
        out=out,
        err=err,
        request=request,
    )
