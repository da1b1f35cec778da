"""Runs LangGraph's own store tests (vendored here, see PROVENANCE.md) against
HeapmemStore: async tests run on a fresh event loop each, a small `mocker`
stands in for pytest-mock, and the tests EXCLUDED.md lists are skipped with
their reason."""
from __future__ import annotations

import asyncio
import inspect
import os
import re

import pytest

pytest.importorskip("langgraph")

from .lgadapt import MockerFixture  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _excluded() -> dict[str, str]:
    """{"file.py::test_name": reason} from EXCLUDED.md's table."""
    out = {}
    with open(os.path.join(HERE, "EXCLUDED.md"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\|\s*`([\w.]+::[\w\[\]-]+)`\s*\|\s*(.+?)\s*\|\s*$", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def pytest_collection_modifyitems(config, items):
    excluded = _excluded()
    for item in items:
        if not str(item.fspath).startswith(HERE):
            continue
        name = f"{os.path.basename(str(item.fspath))}::{item.originalname}"
        if name in excluded:
            item.add_marker(pytest.mark.skip(reason=f"not the BaseStore contract: "
                                                    f"{excluded[name]}"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    fn = pyfuncitem.obj
    if not inspect.iscoroutinefunction(fn):
        return None
    names = inspect.signature(fn).parameters
    asyncio.run(fn(**{n: pyfuncitem.funcargs[n] for n in names}))
    return True


@pytest.fixture
def mocker():
    m = MockerFixture()
    yield m
    m.stopall()
