"""compat.replace_in_libraries puts a wrapper in place of one function of httpx's and httpx2's
internals (the TLS and proxy patches go on through it): a library laid out otherwise is left as
it is, and a failure half-way puts back what was already replaced."""

import httpx
import httpx2
import pytest

from pytest_toolnexus._bridges import compat


def test_each_library_gets_its_own_wrapper_and_the_undo_puts_the_originals_back():
    from httpx._client import get_environment_proxies as original
    from httpx2._client import get_environment_proxies as original2

    seen = []

    def wrap(library, function):
        seen.append((library, function))
        return lambda: {"wrapped for": library}

    undo = compat.replace_in_libraries("_client", "get_environment_proxies", wrap)
    try:
        assert seen == [("httpx", original), ("httpx2", original2)]
        assert httpx._client.get_environment_proxies() == {"wrapped for": "httpx"}
        assert httpx2._client.get_environment_proxies() == {"wrapped for": "httpx2"}
    finally:
        undo()
    assert httpx._client.get_environment_proxies is original
    assert httpx2._client.get_environment_proxies is original2
    undo()  # a second undo changes nothing
    assert httpx._client.get_environment_proxies is original


@pytest.mark.parametrize(
    ("submodule", "name"),
    [
        ("_no_such_module", "get_environment_proxies"),
        ("_client", "no_such_function"),
        ("_client", "__all__"),
    ],
)
def test_a_library_laid_out_otherwise_is_left_as_it_is(submodule, name):
    def wrap(library, function):
        raise AssertionError(f"wrapped {library}.{submodule}.{name}")

    undo = compat.replace_in_libraries(submodule, name, wrap)
    undo()
    assert not hasattr(httpx, "_no_such_module")


def test_a_failure_half_way_puts_back_what_was_replaced(monkeypatch):
    from httpx._client import get_environment_proxies as original

    def wrap(library, function):
        if library == "httpx2":
            raise RuntimeError("the second library's wrapper cannot be made")
        return dict

    with pytest.raises(RuntimeError, match="second library"):
        compat.replace_in_libraries("_client", "get_environment_proxies", wrap)
    assert httpx._client.get_environment_proxies is original
