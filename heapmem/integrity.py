"""What check() looks at, and how it says what it found.

Owns: the integrity replay behind Memory.check(): SQLite's integrity_check,
the FTS index against the memories table, the meta keys and priors, the
memories' own fields and stored features, each namespace's BM25 statistics
(and its terms') against its memories, the vector index (heapmem.vectors),
the schema against heapmem's own, and the links against a replay of the
event log (heapmem.learning.links); each problem as one sentence.  It reads
only: damage is reported, never repaired.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import apsw

from . import vectors
from .db import native, schema, sql
from .errors import from_sqlite
from .guard import DAMAGE, DECODING, c_sentence
from .learning import links as learning
from .learning import priors
from .results import CheckReport
from .validate import POOLED

if TYPE_CHECKING:
    from .learning.pool import Pool

#: check() names at most this many memories of one kind of problem, then counts the rest
NAMED = 5
#: each namespace's BM25 statistics against its memories: the statement
#: counting what disagrees, and the sentence that says it
_STATISTICS = (
    (sql.WRONG_NTOK, "namespace statistics: {} memories have a wrong token count"),
    (sql.WRONG_NSTAG, "FTS index: {} memories carry another namespace's tag, so recall in "
                      "their namespace cannot find them"),
    (sql.WRONG_NAMESPACE_STATS, "namespace statistics: {} namespaces disagree with their "
                                "memories"),
    (sql.WRONG_BM25_TERMS, "BM25 term statistics: {} (namespace, term) rows of bm25_terms "
                           "disagree with the memories"),
)


def check(c: schema.Connection, *, readonly: bool, pool: Pool) -> CheckReport:
    """The report of a check of the store behind c (pool: its settings,
    read again from the file for the replay).  A check that cannot finish
    says where it stopped, among the problems."""
    problems: list[str] = []
    counts = (0, 0, 0)
    try:
        counts = _check(c, problems, readonly, pool)
    except DAMAGE + DECODING as e:
        problems.append(f"the check stopped early: {from_sqlite(e, 'check')}")
    return CheckReport(not problems, tuple(problems[:100]), *counts)


def _check(c: schema.Connection, problems: list[str], readonly: bool,
           pool: Pool) -> tuple[int, int, int]:
    ic = [r[0] for r in c.execute(sql.INTEGRITY)]
    if ic != ["ok"]:
        problems += [f"integrity_check: {m}" for m in ic]
    if readonly:
        # FTS5's 'integrity-check' command is a write, refused here: check
        # only that the index and the table hold the same rows
        odd = c.execute(sql.FTS_ROWS_APART).fetchall()[0][0]
        if odd:
            problems.append(f"FTS index does not match the memories table: {odd} rows "
                            "are in only one of them")
    else:
        try:
            c.execute(sql.FTS_INTEGRITY)
        except apsw.Error as e:
            problems.append(f"FTS index does not match the memories table: {e}")
    if schema.fts_deferred(c):
        problems.append("heapmem_meta holds 'fts_deferred': the FTS index trigger is off "
                        "for every writer (delete that row)")
    problems += [f"heapmem_meta: {m}" for m in schema.meta_problems(c)]
    problems += [f"heapmem_meta: {m}" for m in priors.problems(c)]
    problems += memory_problems(c)
    # each namespace's BM25 statistics against its memories (the C core's
    # functions refuse a value that is not UTF-8: said above, and here)
    for statement, said in _STATISTICS:
        try:
            odd = c.execute(statement).fetchall()[0][0]
        except apsw.SQLError as e:
            problems.append(said.split(":")[0] + f": cannot be checked ({c_sentence(e)})")
            continue
        if odd:
            problems.append(said.format(odd))
    problems += vectors.problems(c)
    objects = c.execute(sql.SCHEMA_OBJECTS).fetchall()
    problems += [f"schema: {m}" for m in schema.foreign_objects(
        objects, schema.user_version(c))]
    events, stored = _links_problems(c, problems, pool)
    nmem = c.execute(sql.COUNT_MEMORIES).fetchall()[0][0]
    return nmem, events, stored


def _links_problems(c: schema.Connection, problems: list[str], pool: Pool) -> tuple[int, int]:
    """The links against a replay of the event log: each namespace's links
    are what its events add up to; the pooled layer is theirs, capped, plus
    any prior merged from a links-only export (heapmem.io.transfer), which
    has no events.  Returns how many events and stored links it compared."""
    events = [(ns, json.loads(d)) for _, _, _, ns, _, _, d in c.execute(sql.EVENTS)]
    prior = schema.prior(c)
    replayed: dict = learning.replay(events)
    replayed = learning.pool(replayed, pool.read(c), prior, schema.PRIOR_SUPPORT)
    stored: dict[tuple[str, str], tuple] = {
        (ns, f): (a, b, n) for ns, f, a, b, n, _ in c.execute(sql.OWN_ROWS)}
    stored.update({(POOLED, f): (a, b, n, k) for f, _, a, b, n, k, _, _ in
                   learning.pooled_rows(c)})
    for (layer, f), s, r in learning.mismatches(stored, replayed):
        gives = "(" + ", ".join(f"{x:.6g}" for x in r) + ")" if r is not None else ""
        if s is None:
            problems.append(f"link {layer}:{f} is None, the event log gives {gives}")
        elif r is None:
            problems.append(f"link {layer}:{f} has no events behind it")
        else:
            problems.append(f"link {layer}:{f} is {s}, the event log gives {gives}")
    return len(events), len(stored)


def memory_problems(c: Any) -> list[str]:
    """What check() finds in the memories table itself: a field that is not
    UTF-8 (or a name holding a NUL byte), which heap_add refuses and only a
    raw write can leave; and stored shape features that are not what the C
    core gives the memory's text, kind and source now (a raw UPDATE of them
    leaves recall and learning with the old shape: issue 33)."""
    bad_text: list[str] = []
    stale: list[str] = []
    names = ("id", "namespace", "kind", "source", "key")
    for seq, *fields, meta, stored in c.execute(sql.STORED_MEMORIES):
        row = dict(zip((*names, "text"), fields))
        try:
            text = {k: None if v is None else bytes(v).decode("utf-8") for k, v in row.items()}
            if meta is not None:
                bytes(meta).decode("utf-8")
            shape = bytes(stored or b"").decode("utf-8")
            if any("\x00" in (text[k] or "") for k in names):
                raise UnicodeError
        except UnicodeError:
            bad_text.append(f"#{seq}")
            continue
        if text["text"] is None or text["kind"] is None:
            continue  # NOT NULL columns: integrity_check says it
        now = native.features(text["text"], text["kind"], text["source"])
        if now != shape:
            stale.append(repr(text["id"]))
    out = []
    for found, said in ((bad_text, "a field that is not valid UTF-8 (or a name with a NUL "
                         "byte), which heapmem never writes: memories"),
                        (stale, "stored features that are not what their text, kind and source "
                         "give now (a raw UPDATE changed them; recall and learning use the "
                         "stored ones; update() rewrites both): memories")):
        if found:
            more = f" and {len(found) - NAMED} more" if len(found) > NAMED else ""
            out.append(f"{len(found)} memories hold {said} {', '.join(found[:NAMED])}{more}")
    return out
