"""What a replayed test never uses is not imported with the cassette machinery: the secret
scan's rules (compiled regular expressions, about 3 ms) and the scan itself load when a
recording is written or a text is first masked, and the translation of vcrpy's options when a
cassette_config holds any. Each check runs in a fresh interpreter, so that nothing else of the
test run imported them first."""

import subprocess
import sys
import textwrap

LEFT_OUT = (
    *(f"_safety.{name}" for name in ("rules", "secrets", "probes", "leaves", "joined")),
    "_plugin.vcr_keys",
    "_plugin.vcr_redact",
)


def run(code):
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_machinery_imports_neither_the_secret_scan_nor_vcrpy_options():
    loaded = run(
        f"""
        import sys
        import pytest_toolnexus._plugin.serve
        for name in {LEFT_OUT!r}:
            print(name, f"pytest_toolnexus.{{name}}" in sys.modules)
        """
    )
    assert loaded == [word for name in LEFT_OUT for word in (name, "False")]


def test_masking_a_text_loads_the_rules_it_needs():
    # An OpenAI-shaped key, made up: masked by the rules, which load on this first use.
    shown = run(
        """
        import sys
        from pytest_toolnexus._safety.mask import mask_text
        print("rules" in {m.rsplit(".", 1)[-1] for m in sys.modules if "_safety" in m})
        print(mask_text("key=sk-proj-" + "a1B2" * 8))
        print("pytest_toolnexus._safety.rules" in sys.modules)
        """
    )
    assert shown == ["False", "key=[secret]", "True"]
