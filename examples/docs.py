"""Regenerate README.md and docs/*.md: run every code block they show and
paste its real output under it.  One command:

    python examples/docs.py            # rewrite README.md, every docs/*.md and
                                       # docs/report.png (examples/report_shot.py)
    python examples/docs.py docs/cli.md   # just these
    python examples/docs.py --check    # change nothing; exit 1 naming each stale doc

tests/test_docs.py runs build() on each doc and checks the file is what it
gives, and that every fenced block is run or says why not.  After a change to
the C core, the CLI or the examples (a merge), run this and commit the result.
The picture needs Debian's chromium (apt-get install chromium); without it
the docs are rebuilt and the picture is left, with a line saying so.

Each doc runs in a temporary folder where the demo (examples/lisbon.py) has
made agent.db, top to bottom, so a block may use what an earlier one made.
What runs, by the HTML comment on the line before a fence:

    <!-- run -->                  a ```python block: run with this Python;
                                  its output goes in the next <!-- output --> block
    <!-- run: sqlite3 [FILE] -->  a ```sql block: fed to the sqlite3 shell with
                                  heapmem loaded and .mode box (no FILE: a
                                  database in memory); output as above
    <!-- run: file PATH -->       with run: sqlite3, the block is PATH's text
    <!-- run: sqld -->            a ```python block run against a libSQL primary
                                  and its replica on free loopback ports (put in
                                  place of the addresses the block shows)
    <!-- run: sqld-tenants -->    the same, the servers keeping a database per
                                  tenant (--namespaces)
    <!-- output -->               this block is the output of the last block run
    <!-- not run: WHY -->         a block that does not run here, and why (WHY
                                  names the test that covers it)
    <!-- setup: COMMAND -->       (anywhere) a command run there, not shown
    <!-- sql-reference -->        (a region up to <!-- /sql-reference -->) the
                                  heap_* reference examples/sqlref.py writes

A ```text block whose first line starts with "$ " is a session: each "$ "
line is run (heapmem with the demo's clock, --now 2025-03-14, and
HEAPMEM_DB=agent.db; python is this Python; examples/ is this repository's)
and its output replaces the lines under it; "$ heapmem ... mcp" lines,
which serve until stopped, keep their text.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md"] + [f"docs/{n}.md" for n in (
    "python", "sql", "cli", "mcp", "frameworks", "servers", "security", "benchmarks")]
HEAPMEM = [sys.executable, "-m", "heapmem"]
DIRECTIVE = re.compile(r"<!-- (run|output|not run|setup|sql-reference|/sql-reference)"
                       r"(?::\s*(.*?))? -->\s*$")


def _env() -> dict[str, str]:
    env = dict(os.environ, HEAPMEM_DB="agent.db", COLUMNS="100")
    env.pop("HEAPMEM_NAMESPACE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _clean(text: str, tmp: str) -> str:
    import heapmem
    out = text.replace(tmp + os.sep, "").replace(tmp, ".")
    return out.replace(str(Path(heapmem.loadable_path()).parent), "/path/to/site-packages/heapmem")


def session_line(cmd: str, tmp: str) -> str:
    """A "$ " line's output (stdout, then stderr)."""
    parts = shlex.split(cmd, comments=True)
    if parts and parts[0] == "heapmem":
        args = HEAPMEM + ["--now", "2025-03-14"] + parts[1:]
    elif parts and parts[0] == "python":
        args = [sys.executable] + [str(ROOT / p) if p.startswith("examples/") else p
                                   for p in parts[1:]]
    else:
        args = ["bash", "-c", cmd]
    out = subprocess.run(args, cwd=tmp, capture_output=True, text=True, env=_env(),
                         timeout=600)
    return out.stdout + out.stderr


def sqlite3(sql: str, db: Optional[str], tmp: str) -> str:
    import heapmem
    if shutil.which("sqlite3") is None:
        raise RuntimeError("the sqlite3 shell is needed: apt-get install sqlite3")
    args = ["sqlite3"] + ([db] if db else []) + [
        "-cmd", f".load {heapmem.loadable_path()}", "-cmd", ".mode box"]
    out = subprocess.run(args, input=sql, cwd=tmp, capture_output=True, text=True,
                         timeout=600)
    return out.stdout + out.stderr


def sqld(code: str, tmp: str, namespaces: bool) -> str:
    """code's output against a libSQL primary and its replica on free
    loopback ports, put in place of the addresses the docs show: the
    primary's 127.0.0.1:8080 (HTTP) and 127.0.0.1:9090 (admin, with
    namespaces), the replica's 127.0.0.1:8081."""
    from heapmem.remote import sqld as server
    http, grpc, admin, replica = (server.free_port() for _ in range(4))
    procs = []
    try:
        for args in (server.command(os.path.join(tmp, "srv-p"), http=f"127.0.0.1:{http}",
                                    grpc=f"127.0.0.1:{grpc}", namespaces=namespaces,
                                    admin=f"127.0.0.1:{admin}" if namespaces else None),
                     server.command(os.path.join(tmp, "srv-r"), http=f"127.0.0.1:{replica}",
                                    primary_grpc_url=f"http://127.0.0.1:{grpc}",
                                    namespaces=namespaces)):
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            port = int(args[args.index("--http-listen-addr") + 1].rsplit(":", 1)[1])
            deadline = time.monotonic() + 30
            while not server.answers(port):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sqld did not start on port {port}")
                time.sleep(0.05)
        for shown, real in (("8080", http), ("9090", admin), ("8081", replica)):
            code = code.replace(f"127.0.0.1:{shown}", f"127.0.0.1:{real}")
        return python(code, tmp)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def python(code: str, tmp: str) -> str:
    out = subprocess.run([sys.executable, "-"], input=code, cwd=tmp, capture_output=True,
                         text=True, env=_env(), timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"a python block failed:\n{code}\n{out.stderr}")
    return out.stdout


def _fence(lines: list[str], i: int) -> int:
    """The index of the closing fence of the block opened at lines[i]."""
    j = i + 1
    while not lines[j].startswith("```"):
        j += 1
    return j


def _directives(lines: list[str], i: int) -> dict[str, str]:
    """The directives on the comment lines just before lines[i] (a fence)."""
    out = {}
    j = i - 1
    while j >= 0 and lines[j].startswith("<!--"):
        m = DIRECTIVE.match(lines[j])
        if m:
            out[m.group(1)] = m.group(2) or ""
        j -= 1
    return out


def _session(body: list[str], tmp: str) -> list[str]:
    out, k = [], 0
    while k < len(body):
        line = body[k]
        out.append(line)
        k += 1
        if not line.startswith("$ ") or re.search(r"\bmcp\b", line):
            continue
        while k < len(body) and not body[k].startswith("$ "):
            k += 1
        text = _clean(session_line(line[2:], tmp), tmp).rstrip("\n")
        if text:
            out.extend(text.split("\n"))
    return out


def build(doc: str) -> str:
    """doc (a path under the repository) as it should read: every block run now."""
    lines = (ROOT / doc).read_text().split("\n")
    tmp = tempfile.mkdtemp()
    try:
        subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=tmp,
                       check=True, capture_output=True)
        out: list[str] = []
        last = ""
        i = 0
        while i < len(lines):
            line = lines[i]
            m = DIRECTIVE.match(line)
            if m and m.group(1) == "setup":
                session_line(m.group(2), tmp)
            if m and m.group(1) == "sql-reference":
                sys.path.insert(0, str(ROOT / "examples"))
                import sqlref
                out.append(line)
                out.extend(sqlref.reference().rstrip("\n").split("\n"))
                while not lines[i].startswith("<!-- /sql-reference -->"):
                    i += 1
                out.append(lines[i])
                i += 1
                continue
            if not line.startswith("```"):
                out.append(line)
                i += 1
                continue
            end = _fence(lines, i)
            body = lines[i + 1:end]
            d = _directives(lines, i)
            run = d.get("run")
            if run is not None and run.startswith("sqlite3"):
                words = run.split()[1:]
                db = None
                if words[:1] == ["file"]:  # the block is a file of the repository's
                    body = (ROOT / words[1]).read_text().rstrip("\n").split("\n")
                elif words:
                    db = words[0]
                last = _clean(sqlite3("\n".join(body) + "\n", db, tmp), tmp)
            elif run in ("sqld", "sqld-tenants"):
                last = sqld("\n".join(body), tmp, namespaces=run == "sqld-tenants")
            elif run is not None:
                last = _clean(python("\n".join(body) + "\n", tmp), tmp)
            elif "output" in d:
                body = last.rstrip("\n").split("\n")
            elif body and body[0].startswith("$ "):
                body = _session(body, tmp)
            out.append(line)
            out.extend(body)
            out.append(lines[end])
            i = end + 1
        return "\n".join(out)
    finally:
        shutil.rmtree(tmp)


def picture(check: bool) -> bool:
    """Whether docs/report.png shows the page heapmem writes today; unless
    check, make it so (with chromium)."""
    import runpy
    shot = runpy.run_path(str(ROOT / "examples" / "report_shot.py"))
    tmp = tempfile.mkdtemp()
    try:
        today = shot["page_text"](Path(shot["page"](tmp)).read_text())
    finally:
        shutil.rmtree(tmp)
    if shot["shown_text"](shot["OUT"].read_bytes()) == today:
        return True
    if check:
        return False
    if shutil.which("chromium") is None:
        print("docs/report.png is stale, and chromium is not here to make it again: "
              "apt-get install chromium, then python examples/report_shot.py")
        return False
    shot["main"]()
    return True


def main(argv: list[str]) -> int:
    check = "--check" in argv
    docs = [a for a in argv if not a.startswith("--")] or DOCS
    shown = any(not a.startswith("--") for a in argv) or picture(check)  # (just some docs)
    stale = [] if shown or not check else ["docs/report.png"]
    for doc in docs:
        text = build(doc)
        if text != (ROOT / doc).read_text():
            stale.append(doc)
            if not check:
                (ROOT / doc).write_text(text)
    if check:
        for doc in stale:
            print(f"{doc} is stale: run python examples/docs.py"
                  + ("" if doc.endswith(".png") else f" {doc}"))
        return 1 if stale else 0
    print(f"rebuilt {len(docs)} docs" + (f"; changed: {', '.join(stale)}" if stale else
                                          "; nothing changed"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
