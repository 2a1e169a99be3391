"""Secrets in headers beyond the credential list (issue 23, rows 3 and 5): a key used as a
header's *name* is refused at the write and by ``check``; a bearer token or a JSON Web Token
inside the value of any header (``Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io.
<JWT>``) is redacted at record time, as ``Authorization`` is.

Every secret here is a fake built at run time.
"""

import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    SecretFoundError,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._cli.main import main as cli
from pytest_toolnexus._store.cassette import JsonBody
from tests.test_secret_scan import FAKES, JSON

URL = "https://api.example.invalid/v1/chat"
KEY = FAKES["an OpenAI project key (sk-proj-...)"]


def answering(headers):
    def live(request):
        return TransportResponse(200, Headers([*JSON.multi_items(), *headers]), {"ok": True})

    return live


# -- 3: a key used as a header name ----------------------------------------------------------


@pytest.mark.parametrize("side", ["request", "response"])
def test_a_key_used_as_a_header_name_is_refused_without_printing_it(tmp_path, side):
    path = tmp_path / "c.msgpack"
    sent = {KEY: "1"} if side == "request" else {}
    live = answering([(KEY, "1")] if side == "response" else [])
    session = CassetteSession(path, record="all", timing="instant", live=live)
    session.transport(TransportRequest("POST", URL, sent, {"q": 1}))

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    message = str(caught.value)
    assert KEY not in message
    assert f"interaction #0, {side}.headers['<secret>'] (name): an OpenAI project key" in message
    assert not path.exists()


def test_check_refuses_a_key_used_as_a_header_name(tmp_path, capsys):
    path = tmp_path / "leaky.msgpack"
    interaction = Interaction(
        RecordedRequest("POST", URL, Headers([(KEY.lower(), "x"), (KEY, "y")]), JsonBody({})),
        RecordedResponse(200, JSON, JsonBody({"ok": True})),
    )
    Cassette(path, [interaction], {}).save(unsafe_verbatim=True)
    capsys.readouterr()

    assert cli(["check", str(path)]) == 1

    out = capsys.readouterr().out
    assert f"FAIL {path}: " in out
    assert "request.headers['<secret>'] (name): an OpenAI project key" in out
    assert KEY not in out
    assert KEY.lower() not in out
