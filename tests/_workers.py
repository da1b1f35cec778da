"""Subprocess workers for the reliability tests (not a test module).

    python tests/_workers.py stress   PATH OUTDIR PROC THREADS OPS SECONDS SEED
    python tests/_workers.py zygote              (forks crash writers on request)
    python tests/_workers.py readonly PATH       (probes a store on read-only media)

Every worker writes what it has *acknowledged* - a call that returned - to a
file with os.write on an O_APPEND descriptor, one line per call, after the
call returns.  A line therefore means "heapmem told the caller this is
durable"; the parent checks the store against those lines after the worker
exits or is SIGKILLed.
"""
from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
import traceback

import heapmem

WORDS = ("flight hotel train lisbon paris berlin booked dinner meeting tuesday march friend "
         "sister doctor dentist passport visa budget salary rent garden piano guitar coffee "
         "tea allergy peanuts vegetarian marathon running yoga project deadline report "
         "invoice birthday anniversary wedding concert museum library").split()
QUESTIONS = ("When is my {} ?", "Where is the {} {}?", "Who booked the {}?",
             "What about {} and {}?", "How many {} did I {}?", "Is the {} on {}?", "{} {} {}")


def sentence(rnd: random.Random, n: int | None = None) -> str:
    n = n or rnd.randint(4, 14)
    words = rnd.choices(WORDS, k=n)
    if rnd.random() < 0.3:
        words.insert(rnd.randrange(len(words)), str(rnd.randint(1, 2030)))
    if rnd.random() < 0.3:
        words[0] = words[0].capitalize()
    return " ".join(words)


def question(rnd: random.Random) -> str:
    q = rnd.choice(QUESTIONS)
    return q.format(*rnd.choices(WORDS, k=q.count("{}")))


class Acks:
    """Append-only acknowledgement log: one os.write per line, so a line is
    either complete or (killed mid-write) cut, never interleaved.  With
    progress (a file descriptor), each line written is also reported there
    as "ack\\n" (one os.write of 4 bytes: atomic on a pipe), so a parent can
    wait for the Nth acknowledgement instead of guessing how long it takes."""

    def __init__(self, path: str, progress: int | None = None):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.progress = progress

    def write(self, *fields: object) -> None:
        os.write(self.fd, (json.dumps(list(fields)) + "\n").encode())
        if self.progress is not None:
            os.write(self.progress, b"ack\n")


def read_acks(path: str) -> list[list]:
    """The complete lines of an ack file, each a list of JSON values (a line
    cut by a kill has no newline and is dropped: it was not acknowledged)."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


# -- stress: several processes x threads on one file ------------------------------

def stress(path: str, outdir: str, proc: int, threads: int, ops: int, seconds: float,
           seed: int) -> None:
    """Threads of one process adding, recalling, judging and forgetting on one
    file: ops calls each (ops 0: until seconds have passed, the soak).  Threads
    0 and 1 share one Memory (heapmem must be thread-safe); the others open
    their own; the last thread also closes and reopens its store now and then.
    Every exception is an error: the parent asserts there are none.  The
    process prints "ready" once it has imported heapmem and starts its
    threads when the parent sends a line on stdin, so every process's threads
    race to open (and create) the store at once, however long their imports
    took."""
    print("ready", flush=True)
    sys.stdin.readline()
    stop_at = time.time() + seconds
    shared: list = []
    shared_lock = threading.Lock()
    stats = {"ops": 0, "adds": 0, "recalls": 0, "feedbacks": 0, "forgets": 0, "reopens": 0,
             "errors": 0}
    stats_lock = threading.Lock()
    errlog = Acks(os.path.join(outdir, f"errors-{proc}.txt"))

    def get_store(t: int):
        if t < 2:
            with shared_lock:
                if not shared:
                    shared.append(heapmem.open(path))
                return shared[0], False
        return heapmem.open(path), True

    def run(t: int) -> None:
        rnd = random.Random(seed * 1000 + proc * 100 + t)
        acks = Acks(os.path.join(outdir, f"acks-{proc}-{t}.txt"))
        scratch = f"scratch-{proc}-{t}"
        mine: list[str] = []  # this thread's memories in its scratch namespace
        local = {k: 0 for k in stats}
        try:
            mem, own = get_store(t)
        except Exception:
            errlog.write("open", traceback.format_exc())
            with stats_lock:
                stats["errors"] += 1
            return
        n = 0
        while n < ops if ops else time.time() < stop_at:
            n += 1
            op = rnd.random()
            try:
                if op < 0.25:
                    ns = rnd.choice(("alpha", "beta", scratch))
                    item = mem.add(sentence(rnd), namespace=ns,
                                   kind=rnd.choice(("fact", "preference", "episode", "note")),
                                   key=rnd.choice((None, None, "k1", "k2")))
                    acks.write("A", item.id, ns)
                    if ns == scratch:
                        mine.append(item.id)
                    local["adds"] += 1
                elif op < 0.33:
                    ns = rnd.choice(("alpha", "beta"))
                    items = mem.add_many([{"text": sentence(rnd), "namespace": ns}
                                          for _ in range(rnd.randint(1, 8))])
                    acks.write("A*", [i.id for i in items], ns)
                    local["adds"] += len(items)
                elif op < 0.75:
                    ns = rnd.choice(("alpha", "beta", scratch))
                    res = mem.recall(question(rnd), namespace=ns, k=rnd.randint(1, 6))
                    local["recalls"] += 1
                    for r in res:
                        if not r.text:
                            raise AssertionError("a result without text")
                    if res.recall_id is not None and len(res) and rnd.random() < 0.8:
                        used = rnd.sample(res.ids, rnd.randint(0, len(res)))
                        how = rnd.random()
                        if how < 0.55:
                            fb = mem.feedback(used=used, recall_id=res.recall_id)
                        elif how < 0.75:  # the answer quotes one of the shown memories
                            fb = mem.feedback(recall_id=res.recall_id,
                                              answer=rnd.choice(list(res)).text[:120])
                        else:
                            fb = mem.mark_used(used or res.ids[:1], recall_id=res.recall_id)
                        acks.write("F", res.recall_id, list(fb.used), list(fb.ignored))
                        local["feedbacks"] += 1
                elif op < 0.85:
                    res = mem.recall(question(rnd), namespace=rnd.choice(("alpha", "beta")),
                                     track=False)
                    assert res.recall_id is None
                    local["recalls"] += 1
                elif op < 0.92:
                    if mine:
                        gone = rnd.sample(mine, rnd.randint(1, min(3, len(mine))))
                        mem.forget(gone)
                        mine = [m for m in mine if m not in gone]
                        acks.write("X", gone)
                        local["forgets"] += 1
                elif op < 0.94:
                    mem.forget(namespace=scratch)
                    acks.write("X", mine)
                    mine = []
                    local["forgets"] += 1
                elif op < 0.97:
                    for it in rnd.sample(mine, min(2, len(mine))):
                        got = mem.get(it)
                        if got is None:
                            raise AssertionError(f"acknowledged memory {it} is missing")
                    mem.links(rnd.choice(("alpha", "*")))
                elif own and rnd.random() < 0.5:
                    mem.close()
                    mem = heapmem.open(path)
                    local["reopens"] += 1
                local["ops"] += 1
            except Exception:
                local["errors"] += 1
                errlog.write(f"thread {t}", traceback.format_exc())
        if own:
            mem.close()
        with stats_lock:
            for k, v in local.items():
                stats[k] += v

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    for m in shared:
        m.close()
    print(json.dumps(stats), flush=True)


# -- crash: a writer killed at a random point ------------------------------------------

#: How many calls a crash writer makes at most: far more than any kill
#: waits for (the parent kills after the Nth acknowledgement, not after a
#: time), so a writer ends by itself only if the parent is broken.
CRASH_CALLS = 100_000


def crash_writer(path: str, ackpath: str, seed: int, trial: int) -> None:
    """Write until killed: add_many batches, tracked recalls and feedback, and
    the odd forget.  Before a forget it logs its intent ('x'), after each call
    returns its acknowledgement ('B' batch, 'R' recall, 'F' feedback, 'X');
    every line is also reported on stdout (the zygote's pipe to the parent)."""
    rnd = random.Random(seed * 7919 + trial)
    acks = Acks(ackpath, progress=sys.stdout.fileno())
    if trial % 2:  # the WAL checkpointed on its thread after almost every commit: kills land there
        from heapmem.db import connect
        connect.CHECKPOINT_PAGES = 4
    mem = heapmem.open(path)
    acks.write("O", trial)
    batch = 0
    live: list[str] = []  # ids of acknowledged batches, to forget from
    for _ in range(CRASH_CALLS):
        op = rnd.random()
        if op < 0.45:
            batch += 1
            n = rnd.randint(1, 40)
            ns = rnd.choice(("alpha", "beta"))
            ids = [f"t{trial}b{batch}i{i}" for i in range(n)]
            mem.add_many([{"text": sentence(rnd, rnd.randint(4, 60)), "id": i, "namespace": ns,
                           "kind": rnd.choice(("fact", "episode", "preference"))} for i in ids])
            acks.write("B", ids)
            live += ids
        elif op < 0.93:
            ns = rnd.choice(("alpha", "beta"))
            res = mem.recall(question(rnd), namespace=ns, k=rnd.randint(1, 10))
            if res.recall_id is None:
                continue
            acks.write("R", res.recall_id, res.ids)
            used = rnd.sample(res.ids, rnd.randint(0, len(res)))
            mem.feedback(used=used, recall_id=res.recall_id)  # judges every shown memory
            acks.write("F", res.recall_id)
        elif live:
            gone = rnd.sample(live, min(len(live), rnd.randint(1, 5)))
            acks.write("x", gone)
            mem.forget(gone)
            acks.write("X", gone)
            live = [i for i in live if i not in gone]
    mem.close()


def zygote() -> None:
    """Fork crash writers on request, so that each trial starts in
    milliseconds with heapmem already imported.  Commands on stdin, one JSON
    object a line: {"cmd": "crash", ...} -> prints "pid <n>"; {"cmd": "reap",
    "pid": n} -> prints "status <n>", its wait status; {"cmd": "exit"}.  A
    writer shares the zygote's stdout: it prints "ack" after each
    acknowledgement and "end" if it ever stops by itself, so the parent kills
    it after the Nth acknowledgement, whatever the machine's speed."""
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "crash":
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    crash_writer(cmd["path"], cmd["ack"], cmd["seed"], cmd["trial"])
                except BaseException:
                    traceback.print_exc()
                    code = 1
                finally:
                    os.write(sys.stdout.fileno(), b"end\n")
                    os._exit(code)
            print(f"pid {pid}", flush=True)
        elif cmd["cmd"] == "reap":
            _, status = os.waitpid(cmd["pid"], 0)
            print(f"status {status}", flush=True)
        elif cmd["cmd"] == "exit":
            return


# -- readonly: a store on read-only media --------------------------------------------

def readonly_probe(path: str) -> None:
    """Open a store that lives on read-only media; recall and try to write.
    Prints a JSON report."""
    report: dict = {"uid": os.geteuid()}
    try:
        with open(os.path.join(os.path.dirname(path), "probe.tmp"), "w"):
            pass
        report["dir_writable"] = True
    except OSError:
        report["dir_writable"] = False
    try:
        with open(path, "r+b"):
            pass
        report["file_writable"] = True
    except OSError:
        report["file_writable"] = False
    try:
        mem = heapmem.open(path, readonly=True)
    except Exception as e:
        report["open_error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(report), flush=True)
        return
    res = mem.recall("When is the flight to Lisbon?", namespace="user:maya")
    report["recall_ids"] = res.ids
    report["recall_id"] = res.recall_id
    report["count"] = mem.count
    refused = {}
    for name, call in (("add", lambda: mem.add("a new memory", namespace="user:maya")),
                       ("add_many", lambda: mem.add_many([{"text": "another memory"}])),
                       ("feedback", lambda: mem.feedback(used=res.ids[:1], recall_id=1)),
                       ("mark_used", lambda: mem.mark_used(res.ids[:1], recall_id=1)),
                       ("forget_ids", lambda: mem.forget(res.ids[:1])),
                       ("forget_ns", lambda: mem.forget(namespace="user:maya"))):
        try:
            call()
            refused[name] = "not refused"
        except Exception as e:
            refused[name] = type(e).__name__
    report["refused"] = refused
    chk = mem.check()
    report["check_ok"] = chk.ok
    report["check_problems"] = list(chk.problems)
    mem.close()
    report["files"] = sorted(os.listdir(os.path.dirname(path)))
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    verb = sys.argv[1]
    if verb == "stress":
        p, out, proc, threads, ops, secs, seed = sys.argv[2:9]
        stress(p, out, int(proc), int(threads), int(ops), float(secs), int(seed))
    elif verb == "zygote":
        zygote()
    elif verb == "readonly":
        readonly_probe(sys.argv[2])
    else:
        raise SystemExit(f"unknown verb {verb!r}")
