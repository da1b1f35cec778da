"""The README as a newcomer replays it: the demo prints what it shows, the
Python and SQL samples print what they show, every time they run (friction 3:
running a sample twice changed the README's later outputs), and the SQL on
the demo's store ranks as Python does.  (Every block of every doc runs:
tests/test_docs.py; the first command in a fresh venv: tests/test_readme_venv.py.)"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import heapmem

ROOT = Path(__file__).parent.parent


def block(marker, doc="README.md"):
    text = (ROOT / doc).read_text()
    m = re.search(r"<!-- " + marker + r" -->\n(?:<!--.*?-->\n)*```\w*\n(.*?)```", text, re.S)
    assert m, f"{doc} has no block marked {marker}"
    return m.group(1)


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for doc in ("python", "sql", "cli", "mcp", "frameworks", "servers", "security",
                "benchmarks"):
        assert f"(docs/{doc}.md)" in text and (ROOT / "docs" / f"{doc}.md").exists(), doc


def test_demo_output_is_in_the_readme(tmp_path):
    demo = subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.strip() in (ROOT / "README.md").read_text()
    # the point of the demo: search buries the booking, learning lifts it
    search, _day_one, learned = demo.stdout.split("heapmem")[:3]
    assert "3. Booked the flight" in search
    assert "1. Booked the flight" in learned


def test_python_sample_prints_what_the_readme_shows_every_time(tmp_path):
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", block("python-sample")], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == block("python-output").strip()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_sql_sample_prints_what_the_readme_shows_every_time(tmp_path):
    for _ in range(2):
        out = subprocess.run(["sqlite3", "-cmd", f".load {heapmem.loadable_path()}", "-cmd",
                              ".mode box"], input=block("sql-sample"), capture_output=True,
                             text=True, timeout=60, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == block("sql-output").strip()


def test_sql_on_the_demo_store_ranks_like_recall(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], check=True,
                   capture_output=True, timeout=120, cwd=tmp_path)
    path = str(tmp_path / "agent.db")
    with heapmem.open(path, clock=lambda: 1741910400, readonly=True) as mem:
        rows = mem.connection.execute(block("sql-query", "docs/sql.md")).fetchall()
        res = mem.recall("When is my flight to Lisbon?", k=3, namespace="user:maya")
        assert [r[0] for r in rows] == res.ids
        assert [r[1] for r in rows] == [round(r.score, 3) for r in res]
