"""Refresh the outputs in docs/CLI.md by running every command in it.

    python examples/cli_doc.py

tests/test_cli.py runs build() and checks that docs/CLI.md is what it gives.

In a temporary folder: the demo builds agent.db, then each `$ heapmem ...`
line of the doc runs in order (with HEAPMEM_DB=agent.db and the demo's clock,
--now 2025-03-14), and its output replaces the lines under it.  Commands that
serve forever (mcp) keep their text.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "CLI.md"
HEAPMEM = [sys.executable, "-m", "heapmem.cli"]


def run(cmd: str, cwd: str) -> str:
    parts = shlex.split(cmd, comments=True)
    if not parts or parts[0] != "heapmem":
        return subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True).stdout
    args = HEAPMEM + ["--now", "2025-03-14"] + parts[1:]
    env = dict(os.environ, HEAPMEM_DB="agent.db", COLUMNS="100")
    env.pop("HEAPMEM_NAMESPACE", None)
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)
    return out.stdout + out.stderr


def build() -> str:
    """docs/CLI.md as it should read: every command's output, run now."""
    tmp = tempfile.mkdtemp()
    try:
        subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=tmp,
                       check=True, capture_output=True)
        lines = DOC.read_text().split("\n")
        out, i, in_block = [], 0, False
        while i < len(lines):
            line = lines[i]
            setup = re.match(r"<!-- cli-setup: (.*) -->$", line)
            if setup:  # a command the doc does not show, run for what follows
                run(setup.group(1), tmp)
            if line.startswith("```"):
                in_block = not in_block
                out.append(line)
                i += 1
                continue
            if in_block and line.startswith("$ ") and " mcp" not in line:
                out.append(line)
                i += 1
                while i < len(lines) and not lines[i].startswith("$ ") \
                        and not lines[i].startswith("```"):
                    i += 1
                text = run(line[2:], tmp).rstrip("\n")
                text = text.replace(tmp + os.sep, "").replace(str(ROOT), "/path/to/site-packages")
                if text:
                    out.extend(text.split("\n"))
                continue
            out.append(line)
            i += 1
        return "\n".join(out)
    finally:
        shutil.rmtree(tmp)


def main() -> None:
    DOC.write_text(build())
    print("docs/CLI.md refreshed")


if __name__ == "__main__":
    main()
