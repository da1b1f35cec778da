"""Rebuild README.md from examples/readme_template.md, running every sample.

    python examples/readme.py

Runs the demo in a temporary folder, then the Python sample, then the SQL
sample in the sqlite3 shell, then the tenant databases' sample against a
libSQL server with namespaces (a primary and a replica on free loopback
ports), and pastes their real output into the template (tests/test_readme.py
checks that the README still matches).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import heapmem
from heapmem import sqld

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = '''import heapmem

mem = heapmem.open("agent.db", clock=lambda: 1741910400)  # the demo's store, its fixed clock
mem.add("Maya prefers a window seat", kind="preference", source="maya", namespace="user:maya")
res = mem.recall("When is my flight to Lisbon?", k=3, namespace="user:maya")
for r in res:
    print(r.rank, f"{r.score:.3f}", r.text)
print(res[0].explain())
print(mem.feedback(used=[res[0].id], recall_id=res.recall_id))
# no word in common with the booking: the vectors find it (hybrid recall, the default)
print(mem.recall("What time does my plane leave?", k=1, namespace="user:maya")[0].text)'''

SQL = """SELECT id, round(score, 3) AS score, text
FROM heap_recall('When is my flight to Lisbon?', 'user:maya', 3, 1741910400, NULL, 0);"""

# the whole loop in the sqlite3 shell: examples/loop.sql in a new file
LOOP = (ROOT / "examples" / "loop.sql").read_text()


# the addresses the README shows: the primary's admin API and the replica
TENANTS = '''import heapmem
from heapmem import sqld

for name in ("acme", "globex"):                       # one database per tenant
    sqld.create_database("127.0.0.1:9090", name)      # the primary's --admin address
acme = heapmem.open("http://127.0.0.1:8081", database="acme")       # through the replica
globex = heapmem.open("http://127.0.0.1:8081", database="globex")
acme.add("Booked the flight: SFO to LIS, departs March 14", namespace="user:maya")
q = "When is my flight to Lisbon?"                    # read back at once, through the replica
print("acme:", acme.recall(q, namespace="user:maya").ids, acme.count)
print("globex:", globex.recall(q, namespace="user:maya").ids, globex.count)'''


def tenants(tmp: str, run: dict) -> str:
    """The tenant sample's output, against a primary with namespaces and its
    replica on free ports (in place of 9090 and 8081)."""
    http, grpc, admin, replica = (sqld.free_port() for _ in range(4))
    procs = []
    try:
        for args in (sqld.command(os.path.join(tmp, "srv-p"), http=f"127.0.0.1:{http}",
                                  grpc=f"127.0.0.1:{grpc}", namespaces=True,
                                  admin=f"127.0.0.1:{admin}"),
                     sqld.command(os.path.join(tmp, "srv-r"), http=f"127.0.0.1:{replica}",
                                  primary_grpc_url=f"http://127.0.0.1:{grpc}",
                                  namespaces=True)):
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
            port = int(args[args.index("--http-listen-addr") + 1].rsplit(":", 1)[1])
            deadline = time.monotonic() + 30
            while not sqld.answers(port):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sqld did not start on port {port}")
                time.sleep(0.05)
        sample = TENANTS.replace("127.0.0.1:9090", f"127.0.0.1:{admin}").replace(
            "127.0.0.1:8081", f"127.0.0.1:{replica}")
        return subprocess.run([sys.executable, "-c", sample], **run).stdout
    finally:
        for p in procs:
            p.kill()
            p.wait()


def build() -> str:
    """The README as the template and the samples' real output make it."""
    tmp = tempfile.mkdtemp()
    try:
        run = dict(cwd=tmp, capture_output=True, text=True, check=True)
        demo = subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], **run).stdout
        shutil.copy(os.path.join(tmp, "agent.db"), os.path.join(tmp, "mcp.db"))
        mcp = subprocess.run([sys.executable, str(ROOT / "examples" / "mcp_client.py"), "mcp.db"],
                             **run).stdout
        hybrid = subprocess.run([sys.executable, str(ROOT / "examples" / "hybrid.py"),
                                 os.path.join(tmp, "hybrid.db")], **run).stdout
        answers = subprocess.run([sys.executable, str(ROOT / "examples" / "answer_loop.py"),
                                  os.path.join(tmp, "answers.db")], **run).stdout
        pyout = subprocess.run([sys.executable, "-c", SAMPLE], **run).stdout
        cli = subprocess.run([sys.executable, "-m", "heapmem.cli", "--db", "agent.db",
                              "--now", "2025-03-14", "-n", "user:maya", "recall",
                              "When is my flight to Lisbon?", "-k", "2", "--no-track"],
                             **run).stdout
        lg = subprocess.run([sys.executable, str(ROOT / "examples" / "langgraph_agent.py"),
                             os.path.join(tmp, "lg.db")], **run).stdout
        lg = lg[lg.index("...and"):]
        sqlout = subprocess.run(["sqlite3", "agent.db", "-cmd",
                                 f".load {heapmem.loadable_path()}", "-cmd", ".mode box"],
                                input=SQL + "\n", **run).stdout
        loopout = subprocess.run(["sqlite3", "loop.db", "-cmd",
                                  f".load {heapmem.loadable_path()}", "-cmd", ".mode box"],
                                 input=LOOP, **run).stdout
        tenantsout = tenants(tmp, run)
    finally:
        shutil.rmtree(tmp)
    text = (ROOT / "examples" / "readme_template.md").read_text()
    for key, value in {"DEMO": demo, "PYSAMPLE": SAMPLE, "PYOUT": pyout,
                       "SQL": SQL, "SQLOUT": sqlout, "LOOP": LOOP.rstrip("\n"),
                       "LOOPOUT": loopout,
                       "CLI": "$ heapmem --db agent.db --now 2025-03-14 -n user:maya recall "
                              "\"When is my flight to Lisbon?\" -k 2 --no-track\n" + cli,
                       "LANGGRAPH": lg,
                       "ANSWERS": "$ python examples/answer_loop.py\n" + answers,
                       "MCP": "$ python examples/mcp_client.py agent.db\n" + mcp,
                       "HYBRID": "$ python examples/hybrid.py\n" + hybrid,
                       "TENANTS": TENANTS, "TENANTSOUT": tenantsout,
                       "WUSE": f"{heapmem.ScoringConfig().w_usefulness:g}"}.items():
        text = text.replace("{{" + key + "}}", value.rstrip("\n"))
    return text


def main() -> None:
    (ROOT / "README.md").write_text(build())
    print("README.md rebuilt")


if __name__ == "__main__":
    main()
