"""A cassette path that leads out of the project through a symlink is said, once per cassette
per run, naming the file really read or written (issue 23, row 13).

The link may be the cassette folder, a folder below it, or the cassette file itself. A shared
cassette store outside the repository is a setup of its own, so it is a warning
(``CassetteSymlinkWarning``), not a refusal; a run that wants a refusal turns it into an error.
A write through a folder link lands outside the project, and the end-of-run summary says so
beside it; a write to a cassette that is itself a link replaces the link with a file in the
project and leaves the file it led to alone. Covered: pytest (pytester projects, the loopback
server below), ``use_cassette`` in a project folder, and ``check`` and ``show``.
"""

import json
import os
import warnings
from pathlib import Path

import pytest

from pytest_toolnexus import CassetteSymlinkWarning, TransportResponse, use_cassette
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._store.place import link_out, project_root
from tests.support.servers import LoopbackServer, write_response

WARNING = "CassetteSymlinkWarning"


def _echo(request, conn):
    body = json.dumps({"echo": json.loads(request.body or b"null")}).encode()
    write_response(conn, 200, [("Content-Type", "application/json")], body)


@pytest.fixture
def server():
    with LoopbackServer(_echo) as running:
        yield running


@pytest.fixture
def store(tmp_path_factory):
    """A shared cassette store outside every project of these tests."""
    return tmp_path_factory.mktemp("store").resolve()


def recording_test(server, name="test_it", record="once"):
    return f"""
        import httpx, pytest

        @pytest.mark.cassette(record="{record}")
        def {name}(cassette):
            assert httpx.post("{server.url("/v1/x")}", json={{"n": 7}}).status_code == 200
        """


def record_into(pytester, server, *args):
    pytester.makepyfile(test_rec=recording_test(server))
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)


def warnings_said(result):
    return result.stdout.str().count(f"{WARNING}: cassette ")


# -- pytest ----------------------------------------------------------------------------------


def test_recording_through_a_linked_cassette_folder_warns_and_the_summary_says_where(
    pytester, server, store
):
    # Given: the project's cassettes folder is a symlink to a store outside it
    (pytester.path / "cassettes").symlink_to(store, target_is_directory=True)

    result = record_into(pytester, server)

    # Then: the test passes, the recording is in the store, and both the warning and the
    # summary name the real file
    result.assert_outcomes(passed=1, warnings=1)
    real = store / "test_rec" / "test_it.msgpack"
    assert real.is_file()
    out = result.stdout.str()
    assert (
        f"{WARNING}: cassette cassettes/test_rec/test_it.msgpack lies outside the project "
        f"({pytester.path}): the symlink cassettes -> {store} leads out of it, so the cassette "
        f"is read from {real}, and a recording is written there" in " ".join(out.split())
    )
    result.stdout.fnmatch_lines(
        [
            f"  written: cassettes/test_rec/test_it.msgpack "
            f"(through a symlink, to {real}, outside the project)"
        ]
    )


def test_replaying_a_shared_cassette_through_a_link_warns_once_for_the_run(pytester, server, store):
    # Given: a cassette recorded into the store, which three tests share by name, two
    # requests each, through a linked folder below the cassette folder
    (pytester.path / "cassettes").mkdir()
    (pytester.path / "cassettes" / "shared").symlink_to(store, target_is_directory=True)
    url = server.url("/v1/x")
    pytester.makepyfile(
        test_shared=f"""
        import httpx, pytest

        @pytest.mark.cassette("shared/chat", record="new", allow_repeats=True)
        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_it(cassette, n):
            for _ in range(2):
                assert httpx.post("{url}", json={{"n": 7}}).json() == {{"echo": {{"n": 7}}}}
        """
    )
    first = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=3, warnings=1)
    assert (store / "chat.msgpack").is_file()

    # When: the run replays it (record mode none, the default)
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--cassette-record=none"
    )

    # Then: one warning for the run, naming the file read, and nothing about a write
    result.assert_outcomes(passed=3, warnings=1)
    assert warnings_said(result) == 1
    text = " ".join(result.stdout.str().split())
    assert f"the symlink cassettes/shared -> {store} leads out of it" in text
    assert f"so the cassette is read from {store / 'chat.msgpack'}." in text
    assert "a recording is written" not in text


def test_a_cassette_file_linked_out_is_read_through_and_a_recording_replaces_the_link(
    pytester, server, store
):
    # Given: a good cassette in the store, and the test's cassette file a symlink to it
    record_into(pytester, server).assert_outcomes(passed=1)
    made = pytester.path / "cassettes" / "test_rec" / "test_it.msgpack"
    shared = store / "kept.msgpack"
    made.replace(shared)
    made.symlink_to(shared)
    before = shared.read_bytes()

    replayed = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=1, warnings=1)
    assert f"so the cassette is read from {shared}." in " ".join(replayed.stdout.str().split())

    # When: the test records again, in mode all
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--cassette-record=all"
    )

    # Then: the warning said beforehand that the link would be replaced; it was, and the
    # shared file is untouched
    result.assert_outcomes(passed=1, warnings=1)
    text = " ".join(result.stdout.str().split())
    assert (
        f"a recording replaces the link with a file in the project and leaves {shared} as it is"
        in text
    )
    assert f"its symlink to {shared} was replaced by a file in the project" in text
    assert not made.is_symlink()
    assert made.is_file()
    assert shared.read_bytes() == before


def test_a_run_that_turns_the_warning_into_an_error_writes_nothing_outside(pytester, server, store):
    (pytester.path / "cassettes").symlink_to(store, target_is_directory=True)

    result = record_into(pytester, server, "-W", "error::pytest_toolnexus.CassetteSymlinkWarning")

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{WARNING}: cassette cassettes/test_rec/test_it.msgpack*"])
    assert list(store.iterdir()) == []


@pytest.mark.parametrize(
    "layout",
    ["a plain folder", "a link inside the project", "a cassette dir named outside"],
)
def test_no_warning_where_no_link_leads_out(pytester, server, store, layout):
    args = []
    if layout == "a link inside the project":
        (pytester.path / "fixtures" / "recorded").mkdir(parents=True)
        (pytester.path / "cassettes").symlink_to(pytester.path / "fixtures" / "recorded")
    elif layout == "a cassette dir named outside":
        args = [f"--cassette-dir={store}"]  # the user put it there: no link to say

    result = record_into(pytester, server, *args)

    result.assert_outcomes(passed=1)
    assert WARNING not in result.stdout.str()


# -- use_cassette ----------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder, the current one, as a script runs in."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(folder)
    return folder


def answer(sent):
    return TransportResponse(200, {"content-type": "application/json"}, {"ok": True})


def use(path, requests, **options):
    """Open ``path`` with use_cassette, send ``requests`` numbered requests, and return the
    CassetteSymlinkWarnings said (every one, whatever the filters)."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with use_cassette(path, live=answer, patch_clients=False, **options) as cassette:
            for n in range(requests):
                cassette.transport(_request(n))
    return [w for w in said if issubclass(w.category, CassetteSymlinkWarning)]


def test_use_cassette_warns_once_per_cassette_naming_where_it_reads_and_writes(project, store):
    (project / "recorded").symlink_to(store, target_is_directory=True)
    path = Path("recorded") / "a" / "chat.msgpack"

    said = use(path, 3, record="once")
    again = use(path, 3)

    assert len(said) == 1
    assert again == []
    message = str(said[0].message)
    real = store / "a" / "chat.msgpack"
    assert f"the symlink recorded -> {store} leads out of it" in message
    assert f"read from {real}, and a recording is written there" in message
    assert said[0].filename == __file__  # said at the use_cassette call
    assert real.is_file()


def test_use_cassette_replaying_a_linked_file_says_it_reads_only(project, store):
    (project / "recorded").mkdir()
    assert use(store / "ok.msgpack", 1, record="once") == []  # named outside: not a link
    (project / "recorded" / "ok.msgpack").symlink_to(store / "ok.msgpack")

    said = use("recorded/ok.msgpack", 1)

    assert len(said) == 1
    message = str(said[0].message)
    assert f"the symlink recorded/ok.msgpack -> {store / 'ok.msgpack'} leads out" in message
    assert f"read from {store / 'ok.msgpack'}." in message
    assert "recording" not in message


def _request(n):
    from pytest_toolnexus import TransportRequest

    return TransportRequest("POST", "https://api.example.invalid/v1/x", body={"n": n})


# -- check and show --------------------------------------------------------------------------


def _cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_check_enters_a_linked_folder_and_warns_of_each_cassette_there(project, store, capsys):
    # Given: a cassette in the project, and a store linked in below the cassette folder
    use("cassettes/own.msgpack", 1, record="once")
    use(store / "s.msgpack", 1, record="once")
    (project / "cassettes" / "shared").symlink_to(store, target_is_directory=True)

    code, out, err = _cli(capsys, "check", "cassettes")

    # Then: both are checked (the linked one was skipped before), and the one through the
    # link is warned of, naming its real file
    assert code == 0, out
    assert "ok   cassettes/own.msgpack (1 interaction)" in out
    assert "ok   cassettes/shared/s.msgpack (1 interaction)" in out
    assert "2 cassette(s) checked, 0 with problems" in out
    assert err.count("warning: cassette ") == 1
    assert f"cassettes/shared -> {store} leads out of it" in err
    assert f"read from {store / 's.msgpack'}" in err


def test_check_ends_on_a_symlink_loop_checking_each_cassette_once(project, capsys):
    use("cassettes/a/x.msgpack", 1, record="once")
    (project / "cassettes" / "a" / "again").symlink_to(project / "cassettes")

    code, out, err = _cli(capsys, "check", "cassettes")

    assert code == 0, out
    assert "1 cassette(s) checked, 0 with problems" in out
    assert err == ""  # the loop stays inside the project


def test_show_warns_on_stderr_and_prints_the_cassette(project, store, capsys):
    use(store / "s.msgpack", 1, record="once")
    (project / "cassettes").symlink_to(store, target_is_directory=True)

    code, out, err = _cli(capsys, "show", "cassettes/s.msgpack")

    assert code == 0
    assert "#0 POST https://api.example.invalid/v1/x" in out
    assert "warning" not in out
    assert f"the symlink cassettes -> {store} leads out of it" in err


# -- the rule ----------------------------------------------------------------------------------


def test_the_project_is_the_nearest_folder_with_a_marker(tmp_path):
    (tmp_path / "p" / "tests" / "deep").mkdir(parents=True)
    (tmp_path / "p" / "setup.cfg").write_text("")
    assert project_root(tmp_path / "p" / "tests" / "deep") == tmp_path / "p"
    assert project_root(tmp_path) == tmp_path


def test_a_path_through_a_link_then_back_up_is_said_too(tmp_path, store):
    # root/link/../x reads as root/x, but the system opens <store's parent>/x
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(store, target_is_directory=True)
    named = Path(f"{root}{os.sep}link{os.sep}..{os.sep}x.msgpack")

    found = link_out(named, root)

    assert found is not None
    assert found.path == root / "x.msgpack"
    assert found.real == store.parent / "x.msgpack"
    assert found.link == root / "link"


@pytest.mark.parametrize("record", ["none", "once", "new", "all"])
def test_a_cassette_that_is_a_symlink_loop_is_refused_when_opened_saying_so(tmp_path, record):
    from pytest_toolnexus import CassetteFormatError, CassetteSession, CassetteWriteError

    (tmp_path / "a.msgpack").symlink_to(tmp_path / "b.msgpack")
    (tmp_path / "b.msgpack").symlink_to(tmp_path / "a.msgpack")

    with pytest.raises((CassetteFormatError, CassetteWriteError)) as caught:
        CassetteSession(tmp_path / "a.msgpack", record=record)

    assert "leads round in a loop" in str(caught.value)
    assert caught.value.path == str(tmp_path / "a.msgpack")


def test_a_replay_of_a_dangling_cassette_link_names_where_it_points(tmp_path):
    from pytest_toolnexus import CassetteMissError, CassetteSession, TransportRequest

    link = tmp_path / "tape.msgpack"
    link.symlink_to(tmp_path / "moved" / "tape.msgpack")
    session = CassetteSession(link)

    with pytest.raises(CassetteMissError) as caught:
        session.transport(TransportRequest("GET", "http://127.0.0.1:9/v1/models"))

    message = str(caught.value)
    assert f"is a symlink to {tmp_path / 'moved' / 'tape.msgpack'}, which does not exist" in message
    assert "GET http://127.0.0.1:9/v1/models" in message
