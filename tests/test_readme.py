"""Every sample in the README runs and prints what the README shows."""
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import heapmem

ROOT = Path(__file__).parent.parent


def block(marker):
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- " + marker + r" -->\n```\w*\n(.*?)```", text, re.S)
    assert m, f"README has no block marked {marker}"
    return m.group(1)


@pytest.fixture
def readme_dir(tmp_path, monkeypatch):
    """The README's sequence: the demo, then the Python sample, in one folder."""
    monkeypatch.chdir(tmp_path)
    demo = subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")],
                          capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stderr
    sample = subprocess.run([sys.executable, "-c", block("python-sample")],
                            capture_output=True, text=True, timeout=120)
    assert sample.returncode == 0, sample.stderr
    return tmp_path, demo.stdout, sample.stdout


def test_demo_output_is_in_the_readme(readme_dir):
    _, demo, _ = readme_dir
    assert demo.strip() in (ROOT / "README.md").read_text()
    # the point of the demo: search buries the booking, learning lifts it
    search, _day_one, learned = demo.split("heapmem")[:3]
    assert "3. Booked the flight" in search
    assert "1. Booked the flight" in learned


def test_python_sample_prints_what_the_readme_shows(readme_dir):
    _, _, out = readme_dir
    assert out.strip() == block("python-output").strip()


def test_readme_sql_ranks_like_recall(readme_dir):
    path = str(readme_dir[0] / "agent.db")
    with heapmem.open(path, clock=lambda: 1741910400, readonly=True) as mem:
        rows = mem.connection.execute(block("sql-query")).fetchall()
        res = mem.recall("When is my flight to Lisbon?", k=3, namespace="user:maya")
        assert [r[0] for r in rows] == res.ids
        assert [r[1] for r in rows] == [round(r.score, 3) for r in res]


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_sqlite3_shell_runs_the_readme_sql(readme_dir):
    path = str(readme_dir[0] / "agent.db")
    out = subprocess.run(["sqlite3", path, "-cmd", f".load {heapmem.loadable_path()}",
                          "-cmd", ".mode box"], input=block("sql-query"), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == block("sql-output").strip()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_every_readme_sample_prints_what_the_readme_shows():
    pytest.importorskip("langgraph")
    pytest.importorskip("mcp")
    from heapmem import sqld
    try:
        sqld.binary()  # the tenant databases' sample runs on a libSQL server
    except sqld.SqldNotFound as e:
        pytest.skip(f"no sqld here: {e}")
    build = runpy.run_path(str(ROOT / "examples" / "readme.py"))["build"]
    assert build() == (ROOT / "README.md").read_text(), \
        "README.md is stale: run python examples/readme.py"
