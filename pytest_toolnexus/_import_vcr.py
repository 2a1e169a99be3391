"""``pytest-toolnexus import-vcr``: a vcrpy YAML cassette in, a format-v1 msgpack cassette out.

Each interaction goes through the same steps as a live recording: the body's
``content-encoding`` is decoded and the headers that describe the wire form are dropped, a JSON
body is stored parsed, an event stream is split into SSE events and NDJSON into lines, and the
session's redaction (credential headers, credential query values, account keys) is applied.
The secret scan then runs over the result, and nothing is written while it finds anything.

vcrpy keeps no timing, so every SSE event and NDJSON line is stamped ``t = 0`` and each response
has ``t_headers = t_end = 0``: on replay the whole body is there at once.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import importlib
import io
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from ._cassette import (
    Body,
    BytesBody,
    Cassette,
    ChunksBody,
    EmptyBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedRequest,
    RecordedResponse,
    SseBody,
    TextBody,
)
from ._errors import CassetteError
from ._headers import Headers
from ._record import BodyRecorder, fixed_body
from ._redact import redact_url
from ._secrets import SecretScanner
from ._version import __version__

__all__ = ["VcrImportError", "convert", "import_vcr", "load_vcr_cassette", "read_vcr"]

# Headers that describe the wire form of a body, which a cassette stores decoded; the live
# transport drops the same three.
_WIRE_HEADERS: Final = ("content-encoding", "content-length", "transfer-encoding")


class VcrImportError(Exception):
    """The source file cannot be read as a vcrpy cassette (exit code 2)."""


class _BodyProblem(Exception):
    """One interaction's body cannot be converted (exit code 1)."""


@dataclass(frozen=True, slots=True)
class Converted:
    """The result of converting a vcrpy document."""

    interactions: list[Interaction]
    summaries: list[str]
    problems: list[str]


# ---------------------------------------------------------------------------------------------
# Reading


def _yaml_load(text: bytes, source: Path) -> Any:
    """The YAML document, read with PyYAML's safe loader. A file with the Python tags older
    vcrpy versions wrote (``!!python/tuple``, a ``BytesIO`` request body) is read again with
    vcrpy's own safe loader, when vcrpy is installed; it constructs those few tags and no
    others. (vcrpy is not tried first: importing it costs a third of a second.)"""
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError as exc:
        raise VcrImportError(
            "import-vcr needs PyYAML to read vcrpy cassettes: pip install pyyaml (or vcrpy)"
        ) from exc
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.constructor.ConstructorError as exc:
        problem: Exception = exc
    except yaml.YAMLError as exc:
        raise _unreadable(source, exc) from exc
    try:
        serializer: Any = importlib.import_module("vcr.serializers.yamlserializer")
    except ImportError:
        raise _unreadable(source, problem) from problem
    try:
        return serializer.deserialize(text)
    except yaml.YAMLError as exc:
        raise _unreadable(source, exc) from exc


def _unreadable(source: Path, exc: Exception) -> VcrImportError:
    detail = " ".join(str(exc).split())[:300]
    return VcrImportError(f"{source} is not a YAML file vcrpy could read: {detail}")


def read_vcr(source: Path) -> tuple[list[Any], str]:
    """The raw interactions of a vcrpy (or Ruby VCR) cassette, and the name of its flavour."""
    try:
        data = source.read_bytes()
    except FileNotFoundError as exc:
        raise VcrImportError(f"{source} does not exist") from exc
    except OSError as exc:
        raise VcrImportError(f"cannot read {source}: {exc.strerror or exc}") from exc
    doc = _yaml_load(data, source)
    if isinstance(doc, list) and doc and isinstance(doc[0], Mapping) and "request" in doc[0]:
        raise VcrImportError(
            f"{source} is a cassette from vcrpy before 1.0 (no format version); run vcrpy's "
            "migration script (python -m vcr.migration) on it first"
        )
    if not isinstance(doc, Mapping):
        raise VcrImportError(
            f"{source} is not a vcrpy cassette: it is not a map with 'interactions'"
        )
    if "interactions" in doc:
        version = doc.get("version", 1)
        if version != 1:
            raise VcrImportError(
                f"{source} is a vcrpy cassette of format version {version!r}; import-vcr "
                "reads version 1"
            )
        raw, flavour = doc["interactions"], "vcrpy format 1"
    elif "http_interactions" in doc:
        raw, flavour = doc["http_interactions"], "ruby vcr"
    else:
        raise VcrImportError(f"{source} is not a vcrpy cassette: it has no 'interactions' list")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise VcrImportError(f"{source} is not a vcrpy cassette: 'interactions' is not a list")
    return raw, flavour


# ---------------------------------------------------------------------------------------------
# Converting one interaction


def _headers(raw: object, where: str) -> Headers:
    """vcrpy's ``{name: [values]}`` (a bare value is taken as one value) as ordered pairs."""
    if raw is None:
        return Headers()
    if not isinstance(raw, Mapping):
        raise _BodyProblem(f"{where} headers are not a map of name to values")
    pairs: list[tuple[str, str]] = []
    for name, values in raw.items():
        items = values if isinstance(values, list | tuple) else [values]
        for value in items:
            if value is None:  # vcrpy's filter_headers can leave a removed header as null
                continue
            text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            pairs.append((str(name), text))
    return Headers(pairs)


def _bytes_of(value: object, where: str) -> bytes:
    """A body as vcrpy stored it: text (UTF-8 on the wire), ``!!binary`` bytes, a ``BytesIO``
    or an iterator of parts (older vcrpy), a ``{string: ...}`` or ``{base64_string: ...}`` map."""
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, io.BytesIO):
        return value.getvalue()
    if isinstance(value, Mapping):
        if value.get("base64_string") is not None:
            encoded = value["base64_string"]
            try:
                return base64.b64decode(
                    encoded.encode() if isinstance(encoded, str) else encoded, validate=False
                )
            except (binascii.Error, TypeError, AttributeError) as exc:
                raise _BodyProblem(f"{where} body's base64_string is not base64: {exc}") from exc
        return _bytes_of(value.get("string"), where)
    if isinstance(value, Iterable):
        return b"".join(_bytes_of(part, where) for part in value)
    raise _BodyProblem(f"{where} body is a {type(value).__name__}, not text or bytes")


def _brotli_decompress(data: bytes) -> bytes:
    for name in ("brotli", "brotlicffi"):
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        result: bytes = module.decompress(data)
        return result
    raise _BodyProblem(
        "the response body is brotli-encoded (content-encoding: br) and no brotli module is "
        "installed: pip install brotli, then import again"
    )


def _inflate(data: bytes) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error:
        # Some servers send raw deflate, without the zlib wrapper.
        return zlib.decompress(data, -zlib.MAX_WBITS)


_DECODERS: Final[dict[str, Callable[[bytes], bytes]]] = {
    "gzip": gzip.decompress,
    "x-gzip": gzip.decompress,
    "deflate": _inflate,
    "br": _brotli_decompress,
}


def _decode(headers: Headers, data: bytes) -> tuple[bytes, list[str]]:
    """``data`` with its content-encodings undone (the last one applied first), and their
    names."""
    codings = [
        part.strip().lower()
        for value in headers.get_list("content-encoding")
        for part in value.split(",")
        if part.strip() and part.strip().lower() != "identity"
    ]
    if not data or not codings:
        return data, codings
    for coding in reversed(codings):
        decoder = _DECODERS.get(coding)
        if decoder is None:
            raise _BodyProblem(
                f"the response body has content-encoding {coding!r}, which import-vcr cannot "
                "decode (it decodes gzip, deflate and br)"
            )
        try:
            data = decoder(data)
        except _BodyProblem:
            raise
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            raise _BodyProblem(
                f"the response body says content-encoding {coding!r} but does not decode as "
                f"{coding}: {exc}"
            ) from exc
        except Exception as exc:  # brotli raises its own error type
            raise _BodyProblem(
                f"the response body says content-encoding {coding!r} but does not decode as "
                f"{coding}: {type(exc).__name__}: {exc}"
            ) from exc
    return data, codings


def _response_body(headers: Headers, data: bytes) -> Body:
    """The stored body, as a recording would store it; streams are split with every piece at
    ``t = 0``, since vcrpy keeps no timing."""
    recorder = BodyRecorder(headers)
    recorder.feed(data, 0.0)
    body = recorder.finish()
    if isinstance(body, ChunksBody):
        # Not an event stream nor NDJSON: kept whole, as a response read whole is.
        return fixed_body(headers, data)
    return body


def _status(raw: Mapping[str, Any]) -> int:
    status = raw.get("status")
    code = status.get("code") if isinstance(status, Mapping) else raw.get("status_code", status)
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
        raise _BodyProblem(f"the response status must be 100-599, found {code!r}")
    return code


def _convert_one(raw: object) -> tuple[Interaction, list[str]]:
    """One vcrpy interaction as a stored interaction (before redaction), and the encodings
    decoded from its response body."""
    if not isinstance(raw, Mapping):
        raise _BodyProblem("the interaction is not a map")
    request_raw = raw.get("request")
    response_raw = raw.get("response")
    if not isinstance(request_raw, Mapping) or not isinstance(response_raw, Mapping):
        raise _BodyProblem("the interaction needs a 'request' map and a 'response' map")
    method = request_raw.get("method")
    uri = request_raw.get("uri", request_raw.get("url"))
    if not isinstance(method, str) or not isinstance(uri, str):
        raise _BodyProblem("the request needs a method and a uri")
    request_headers = _headers(request_raw.get("headers"), "the request")
    content = _bytes_of(request_raw.get("body"), "the request")
    request = RecordedRequest(
        method.upper(),
        uri,
        request_headers,
        fixed_body(request_headers, content) if content else EmptyBody(),
    )
    status = _status(response_raw)
    headers = _headers(response_raw.get("headers"), "the response")
    old_httpx = "status_code" in response_raw  # vcrpy < 4.2 stored httpx's decoded content
    data = _bytes_of(
        response_raw.get("content") if old_httpx else response_raw.get("body"), "the response"
    )
    decoded: list[str] = []
    if not old_httpx:
        data, decoded = _decode(headers, data)
    headers = headers.without(*_WIRE_HEADERS)
    response = RecordedResponse(status, headers, _response_body(headers, data), 0.0, 0.0)
    return Interaction(request, response), decoded


def _kind(body: Body) -> str:
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
    return body.kind


def _label(raw: object) -> str:
    """``METHOD URL`` of a raw interaction, with credential query values redacted."""
    request = raw.get("request") if isinstance(raw, Mapping) else None
    if not isinstance(request, Mapping):
        return "?"
    method = request.get("method")
    uri = request.get("uri", request.get("url"))
    url = redact_url(uri) if isinstance(uri, str) else "?"
    return f"{str(method).upper() if method else '?'} {url}"


def convert(raw_interactions: Sequence[Any], scanner: SecretScanner) -> Converted:
    """Convert and redact every interaction; a problem with one is reported, not raised."""
    # Imported here: the session module pulls in the replay machinery, which `show`, `check`
    # and `diff` do not need.
    from ._session import _redacted

    interactions: list[Interaction] = []
    summaries: list[str] = []
    problems: list[str] = []
    for number, raw in enumerate(raw_interactions):
        try:
            interaction, decoded = _convert_one(raw)
        except _BodyProblem as exc:
            problems.append(scanner.mask(f"interaction #{number} ({_label(raw)}): {exc}"))
            continue
        safe = _redacted(interaction)
        interactions.append(safe)
        response = safe.response
        assert response is not None
        note = f", {'+'.join(decoded)} decoded" if decoded else ""
        summaries.append(
            scanner.mask(
                f"#{number} {safe.request.method} {safe.request.url} -> {response.status}, "
                f"{_kind(response.body)}{note}"
            )
        )
    return Converted(interactions, summaries, problems)


# ---------------------------------------------------------------------------------------------
# The command


def default_dest(source: Path) -> Path:
    """``chat.yaml`` becomes ``chat.msgpack``, beside it."""
    return source.with_suffix(".msgpack")


def load_vcr_cassette(
    source: Path, dest: Path, *, allow_secrets: Sequence[str] = ()
) -> tuple[Cassette, list[str]]:
    """The vcrpy cassette at ``source`` converted and redacted into an unsaved cassette bound
    to ``dest``, and one summary line per interaction.

    Raises :class:`VcrImportError` naming the file (and the interaction) when the source
    cannot be read, an interaction cannot be converted, or a secret would remain.
    """
    raw_interactions, flavour = read_vcr(source)
    scanner = SecretScanner(allow=allow_secrets)
    converted = convert(raw_interactions, scanner)
    if converted.problems:
        raise VcrImportError(f"{source}: " + "; ".join(converted.problems))
    hits = scanner.scan(converted.interactions)
    if hits:
        raise VcrImportError(
            f"{source}: after redaction it would hold {len(hits)} secret(s): "
            + "; ".join(str(hit) for hit in hits)
        )
    meta = {
        "imported_from": f"{source.name} ({flavour})",
        "converted_from": "vcrpy",
        "recorded_with": f"pytest-toolnexus {__version__} import-vcr",
    }
    return Cassette(dest, converted.interactions, meta), converted.summaries


def import_vcr(
    source: Path,
    dest: Path | None,
    *,
    force: bool,
    allow_secrets: Sequence[str],
    out: TextIO,
    err: TextIO,
) -> int:
    """Run ``import-vcr``; returns the exit code (0 written, 1 refused, 2 unreadable input)."""
    target = dest if dest is not None else default_dest(source)
    if target.resolve() == source.resolve():
        print(f"error: the destination {target} is the source file; name another DEST", file=err)
        return 2
    try:
        raw_interactions, flavour = read_vcr(source)
    except VcrImportError as exc:
        print(f"error: {exc}", file=err)
        return 2
    if target.exists() and not force:
        print(
            f"error: {target} exists; pass --force to overwrite it (nothing was written)",
            file=err,
        )
        return 1
    scanner = SecretScanner(allow=allow_secrets)
    converted = convert(raw_interactions, scanner)
    for line in converted.summaries:
        print(line, file=out)
    if converted.problems:
        for problem in converted.problems:
            print(f"error: {problem}", file=err)
        print(
            f"error: {target} was not written: {len(converted.problems)} interaction(s) "
            "could not be converted",
            file=err,
        )
        return 1
    hits = scanner.scan(converted.interactions)
    if hits:
        print(
            f"error: {target} was not written: after redaction it would hold {len(hits)} secret(s)",
            file=err,
        )
        for hit in hits:
            print(f"  - {hit}", file=err)
        print(
            "Remove them from the vcrpy cassette (or re-record it with filter_headers / "
            "filter_query_parameters), or, for a known fake value, pass --allow-secret VALUE.",
            file=err,
        )
        return 1
    meta = {
        "imported_from": f"{source.name} ({flavour})",
        "converted_from": "vcrpy",
        "recorded_with": f"pytest-toolnexus {__version__} import-vcr",
    }
    cassette = Cassette(target, converted.interactions, meta)
    try:
        cassette.save()
    except CassetteError as exc:
        print(f"error: {exc}", file=err)
        return 1
    except OSError as exc:
        print(f"error: cannot write {target}: {exc.strerror or exc}", file=err)
        return 1
    print(f"wrote {target} ({len(converted.interactions)} interaction(s))", file=out)
    return 0
