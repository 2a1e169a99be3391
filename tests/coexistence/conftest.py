"""This folder runs in its own environment, with pytest-vcr installed and pytest-recording not
(pytest-recording refuses to start beside pytest-vcr). ``python3 .ci/dev.py test`` builds that
environment (.venv-pytest-vcr) and runs this folder there, after the main suite; in the main
environment, where pytest-vcr cannot be installed, there is nothing here to collect."""

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("pytest_vcr") else ["test_*.py"]
