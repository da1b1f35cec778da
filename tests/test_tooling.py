"""The linter and the type checker, run by the tests so that CI (.ci/run, the
README's test command) fails on a finding: `ruff check` over heapmem, tests,
examples and bench, and `mypy` over heapmem, both with the settings in
pyproject.toml.

Each runs at the version the test extra pins (setup.py); another version may
find other things, so the test skips, saying which it found, when the
installed one differs or is missing (`.venv/bin/pip install -e ".[test]"`).
"""
from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the versions setup.py's test extra pins
PINS = {"ruff": "0.17.6", "mypy": "2.4.1"}
LINTED = ["heapmem", "tests", "examples", "bench"]


def _tool(name: str) -> None:
    try:
        have = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{name} is not installed (the test extra brings {name}=={PINS[name]})")
    if have != PINS[name]:
        pytest.skip(f"{name} {have} is installed, the test extra pins {PINS[name]}: "
                    "another version may find other things")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_the_pins_are_the_test_extras():
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    test_extra = re.search(r'"test": \[(.*?)\]', setup, re.S)
    assert test_extra, "setup.py has no test extra"
    for name, version in PINS.items():
        assert f'"{name}=={version}' in test_extra.group(1), (name, version)


def test_ruff_finds_nothing():
    _tool("ruff")
    r = _run(["ruff", "check", "--no-cache", "--output-format", "concise", *LINTED])
    assert r.returncode == 0, f"ruff check {' '.join(LINTED)}:\n{r.stdout}{r.stderr}"


def test_mypy_finds_nothing(tmp_path):
    _tool("mypy")
    # the cache in a temporary folder: nothing written to the source tree
    r = _run(["mypy", "--cache-dir", str(tmp_path / "mypy"), "--no-error-summary"])
    assert r.returncode == 0, f"mypy heapmem:\n{r.stdout}{r.stderr}"
