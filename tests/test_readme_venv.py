"""The README's commands as a newcomer types them: its first command, exactly as
written, in a fresh copy of the repository (a fresh venv, a non-editable
`pip install .`), then its shell lines from the repository root and from another
folder.

After a non-editable install the source tree in the repository root is not
built, and Python puts the current folder (or a script's folder) first on
sys.path: what runs there must not import the source tree by accident.

Needs pip to reach a package index or its cache (the build needs setuptools and
the runtime packages); skipped with that reason when it cannot. About a minute
with a warm pip cache.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                "*.so", "*.dylib", "*.dll", "*.o", "*.db", "*.db-wal", "*.db-shm",
                                ".pytest_cache", ".hypothesis", "heapmem.h")


def block(marker: str) -> str:
    m = re.search(r"<!-- " + marker + r" -->\n(?:<!--.*?-->\n)*```\w*\n(.*?)```", README, re.S)
    assert m, f"README has no block marked {marker}"
    return m.group(1)


def sh_lines() -> list[str]:
    """Every line of the README's ```sh blocks, in order."""
    return [ln for b in re.findall(r"```sh\n(.*?)```", README, re.S)
            for ln in b.splitlines() if ln.strip()]


def dollar_line(starts: str) -> tuple[str, str]:
    """A `$ command` line the README shows in a text block, and the output after it."""
    for b in re.findall(r"```text\n(.*?)```", README, re.S):
        if b.startswith("$ " + starts):
            cmd, _, out = b.partition("\n")
            return cmd[2:], out
    raise AssertionError(f"README shows no `$ {starts}...` line")


def copy_repo(dst: Path) -> None:
    """The working tree as it is (uncommitted changes included), without builds."""
    listed = None
    if (ROOT / ".git").exists() and shutil.which("git"):
        r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, timeout=60)
        if r.returncode == 0:
            listed = [p for p in r.stdout.decode().split("\0") if p]
    if listed is None:
        shutil.copytree(ROOT, dst, ignore=IGNORE)
        return
    for rel in listed:
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def clean_env(path_first: Path | None = None) -> dict[str, str]:
    """The caller's environment without the test's own venv; optionally a venv's bin
    first on PATH, as after `. .venv/bin/activate`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    here = os.path.dirname(sys.executable)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != here]
    if path_first is not None:
        parts.insert(0, str(path_first))
    env["PATH"] = os.pathsep.join(parts)
    return env


def bash(cmd: str, cwd: Path, env: dict[str, str], stdin: str | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def pip_reaches_packages(tmp: Path) -> str | None:
    """None if pip can fetch a build dependency (index or cache), else why not."""
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--disable-pip-version-check", "-d", str(tmp), "setuptools>=40.8"],
                       capture_output=True, text=True, timeout=180)
    if r.returncode == 0:
        return None
    return "pip reaches no package index and has no cache to install from: " + \
        (r.stderr.strip().splitlines() or ["no output"])[-1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A copy of the repository after the README's first command, run as written."""
    if shutil.which("bash") is None:
        pytest.skip("no bash to run the README's shell lines")
    base = tmp_path_factory.mktemp("readme-venv")
    why = pip_reaches_packages(base / "probe")
    if why:
        pytest.skip(why)
    repo = base / "heapmem"
    repo.mkdir()
    copy_repo(repo)
    first = sh_lines()[0]
    r = bash(first, repo, clean_env(), timeout=900)
    assert r.returncode == 0, f"`{first}` failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    if "pip install . " in first:  # non-editable: nothing is built in the source tree
        assert not list((repo / "heapmem").glob("heapmem0.*")), "the install built in the tree"
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return repo, elsewhere, r.stdout


def test_first_command_installs_and_runs_the_demo(installed):
    _, _, out = installed
    demo = out[out.index('Maya asks: "When is my flight to Lisbon?"'):]
    assert demo.strip() in README


def sqlite3_line() -> str:
    line = next((ln for ln in sh_lines() if ln.startswith("sqlite3 ")), None)
    assert line, "README has no sqlite3 line"
    assert ".venv/bin/heapmem path" in line
    return line


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_the_sql_sample_from_the_repository_root_twice(installed):
    """The README's SQL in the shell, as a reader types it after the install:
    the output the README shows, the second time too (a database in memory)."""
    repo, _, _ = installed
    for _ in range(2):
        r = bash(sqlite3_line(), repo, clean_env(), stdin=block("sql-sample"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == block("sql-output").strip()


def test_cli_line_from_the_repository_root(installed):
    """`heapmem ...` with the venv active, after the demo."""
    repo, _, _ = installed
    env = clean_env(repo / ".venv" / "bin")
    cmd, want = dollar_line("heapmem ")
    r = bash(cmd, repo, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want.strip()
    r = bash(".venv/bin/heapmem path", repo, clean_env())
    assert r.returncode == 0 and r.stdout.strip().startswith(str(repo / ".venv")), r.stdout


def test_python_sample_from_the_repository_root(installed):
    repo, _, _ = installed
    # after a non-editable install, `import heapmem` from the root finds the source
    # tree; it uses the installed library of the same version (heapmem.native)
    r = bash(".venv/bin/python -", repo, clean_env(), stdin=block("python-sample"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == block("python-output").strip()


def test_the_readme_sequence_from_another_folder(installed):
    """Demo, Python sample, SQL and CLI from a folder that is not the repository, with
    the venv's commands named by their full path: the README's outputs exactly."""
    repo, here, _ = installed
    venv = repo / ".venv" / "bin"
    first = sh_lines()[0].split("#")[0]
    demo = first.split("&&")[-1].strip()  # .venv/bin/python examples/lisbon.py
    demo = demo.replace(".venv/bin/", f"{venv}/").replace("examples/", f"{repo}/examples/")
    r = bash(demo, here, clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() in README
    r = bash(f"{shlex.quote(str(venv / 'python'))} -", here, clean_env(),
             stdin=block("python-sample"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == block("python-output").strip()
    if shutil.which("sqlite3"):
        line = sqlite3_line().replace(".venv/bin/heapmem", shlex.quote(str(venv / "heapmem")))
        r = bash(line, here, clean_env(), stdin=block("sql-sample"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == block("sql-output").strip()
    cmd, want = dollar_line("heapmem ")
    r = bash(cmd, here, clean_env(venv))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want.strip()
