"""A memory made ready for the C core's heap_add, and a batch of them added.

Owns: one memory's fields checked and given their defaults as heap_add takes
them (prepare, prepare_many: what the core cannot see, Python's types, lone
surrogates, datetimes, the metadata's dict; every value for update()'s
UPDATE), one memory added through heap_add (add: the same-text rule asked
first, the Item it made), a batch inserted through heap_add_many (insert: at
most MAX_IDS rows a call, the Items in the rows' order), a memory changed in
place (update), and the vectors a Python embedder gives each of them.  The
checks of values, the ids, the features and the FTS index are the C core's
(csrc/store.c).  Memory's add, add_many and update call these inside their
write transaction.
"""
from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import apsw

from . import answers
from .config import DEFAULT_KIND, KIND_IMPORTANCE, MAX_IMPORTANCE
from .db import native, schema, sql
from .errors import DuplicateIdError
from .guard import c_sentence
from .results import Item, item
from .validate import check_name, check_namespace, check_text, check_thread, python_text, seconds

if TYPE_CHECKING:
    from .vectors import Vectors


def _add_args(r: Mapping[str, Any]) -> list[Any]:
    """A row as heap_add's arguments, in its order (copy's place null: the
    batch's)."""
    return [r["text"], r["namespace"], r["kind"], r["source"], r["id"], r["created_at"],
            r["importance"], r["key"], r["metadata"], None, r["thread"], r["turn"]]


def _item_sentence(e: BaseException, offset: int) -> str:
    """heap_add_many's sentence, its item numbered in the whole batch (the
    core numbers them in its call: item 3 of the call at offset 100_000 is
    item 100_003)."""
    text = c_sentence(e)
    return re.sub(r"^item (\d+)", lambda m: f"item {int(m[1]) + offset}", text)


def same_text(c: Any, row: Mapping[str, Any]) -> Item | None:
    """The oldest memory of row's namespace with its text and key, or None:
    what an add without an id gives back (sql.SAME_TEXT, heap_add's rule)."""
    same = c.execute(sql.SAME_TEXT, row).fetchall()
    return item(c.execute(sql.GET_MEMORY, {"id": same[0][0]}).fetchall()[0]) if same else None


def _importance(importance: Any, kind: str) -> float:
    """importance as a float in (0, MAX_IMPORTANCE]; None: the kind's."""
    if importance is None:
        return KIND_IMPORTANCE.get(kind, 1.0)
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        raise TypeError(f"importance must be a number, got {type(importance).__name__}")
    try:
        importance = float(importance)
    except OverflowError:  # an int beyond float range
        importance = math.inf
    if not (math.isfinite(importance) and 0 < importance <= MAX_IMPORTANCE):
        raise ValueError(f"importance must be a number in (0, {MAX_IMPORTANCE:g}], "
                         f"got {importance!r}")
    return importance


def _metadata(metadata: Any) -> str | None:
    """metadata (a dict) as the JSON text the file keeps, or None."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
    try:
        meta = json.dumps(dict(metadata), allow_nan=False, ensure_ascii=False, sort_keys=True)
        meta.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as e:
        raise ValueError(f"metadata must be JSON-serialisable (no NaN): {e}") from None
    except RecursionError:
        raise ValueError("metadata is nested too deeply to store as JSON") from None
    return meta


def prepare(now: Callable[[], float], text: Any, *, kind: Any = DEFAULT_KIND,
            source: Any = None, id: Any = None, namespace: Any = "default",
            created_at: Any = None, importance: Any = None, key: Any = None,
            metadata: Any = None, thread: Any = None, turn: Any = None,
            core: bool = False) -> dict[str, Any]:
    """One memory's fields as heap_add takes them (now(): the store's time,
    asked only when created_at is None).  core: the C core checks their
    values (heap_add, heap_add_many), so only what it cannot see is checked
    here: Python's types, lone surrogates, datetimes, the metadata's dict;
    else (update()'s UPDATE) every value here too."""
    if core:
        text = python_text(text, "text")
        kind = python_text(kind, "kind")
        source = python_text(source, "source", optional=True)
        id = python_text(id, "id", optional=True)
        namespace = python_text(namespace, "namespace")
        key = python_text(key, "key", optional=True)
    else:
        text = check_text(text)
        kind = check_name(kind, "kind")
        source = check_name(source, "source", optional=True)
        id = check_name(id, "id", optional=True)
        namespace = check_namespace(namespace)
        key = check_name(key, "key", optional=True)
    thread, turn = check_thread(thread, turn)
    created = seconds(created_at, "created_at") if created_at is not None else now()
    importance = _importance(importance, kind)
    return {"text": text, "kind": kind, "source": source, "id": id, "namespace": namespace,
            "created_at": created, "importance": importance, "key": key,
            "metadata": _metadata(metadata), "thread": thread, "turn": turn}


#: the fields an item of add_many may have: add()'s arguments
FIELDS = frozenset({"text", "kind", "source", "id", "namespace", "created_at", "importance",
                    "key", "metadata", "thread", "turn"})


def prepare_many(now: Callable[[], float], items: Iterable[Mapping[str, Any]]
                 ) -> list[dict[str, Any]]:
    """add_many's items prepared (as prepare(..., core=True)), each error
    naming its item: "add_many: item 3: ..."."""
    if isinstance(items, (str, bytes, Mapping)):
        raise TypeError("add_many takes a list of dicts, one per memory")
    rows = []
    for n, it in enumerate(items):
        if not isinstance(it, Mapping):
            raise TypeError(f"add_many: item {n} must be a dict, got {type(it).__name__}")
        unknown = set(it) - FIELDS
        if unknown:
            raise ValueError(f"add_many: item {n} has unknown field(s) {sorted(unknown)}")
        if "text" not in it:
            raise ValueError(f"add_many: item {n} has no text")
        try:
            rows.append(prepare(now, **it, core=True))
        except (TypeError, ValueError) as e:
            raise type(e)(f"add_many: item {n}: {e}") from None
    return rows


def _new_item(r: Mapping[str, Any], id: str, features: str, turn: Any) -> Item:
    """The Item a prepared row became, with the id, features and turn the core gave it."""
    return Item(id, r["text"], r["namespace"], r["kind"], r["source"], r["key"],
                r["importance"], r["created_at"], None,
                json.loads(r["metadata"]) if r["metadata"] else None,
                tuple(features.split()), r["thread"], turn)


def add(c: schema.Connection, row: dict[str, Any], copy: bool, reader: answers.Reader,
        vectors: Vectors) -> Item:
    """Add one prepared row through heap_add, inside the caller's write
    transaction; without an id or a thread (and copy False), a memory of
    its namespace with its text and key is returned instead, as it is.
    A duplicate id: DuplicateIdError; a value the core refuses: ValueError."""
    # the C core adds it (heap_add, csrc/store.c): its seq and id, its
    # shape features, namespace tag and token count, the FTS index
    if row["id"] is None and not copy and row["thread"] is None:
        # heap_add's own rule, asked first
        same = same_text(c, row)
        if same is not None:  # the memory that holds this text already
            return same
    try:
        added = c.execute(sql.ADD, {**row, "copy": 1}).fetchall()
    except apsw.ConstraintError:
        raise DuplicateIdError(f"a memory with id {row['id']!r} already exists; "
                               "it was not changed") from None
    except apsw.SQLError as e:  # the C core's sentence: a bad argument
        raise ValueError(c_sentence(e)) from None
    mid = reader.added(added)[0]
    mid, seq, feats, turn = reader.added(added, c.execute(sql.ADDED, {"id": mid}).fetchall())
    if vectors.in_python:
        c.execute(sql.INSERT_VECTOR, (seq, vectors.embed([row["text"]])[0].tobytes()))
    return _new_item(row, mid, feats, turn)


def update(c: schema.Connection, id: str, changes: Mapping[str, Any],
           now: Callable[[], float], vectors: Vectors) -> Item:
    """Change the memory id in place, inside the caller's write transaction:
    the fields in changes (text, kind, source, key, importance, metadata),
    checked here as add() checks them; importance not given stays, unless
    the kind changes and it was the old kind's default (then it is the new
    kind's).  Unknown id: ValueError."""
    rows = c.execute(sql.GET_MEMORY, {"id": id}).fetchall()
    if not rows:
        raise ValueError(f"unknown memory id {id!r}; nothing was updated")
    old = item(rows[0])
    kind = changes.get("kind", old.kind)
    imp = changes.get("importance", old.importance)
    if "importance" not in changes and "kind" in changes and \
            old.importance == KIND_IMPORTANCE.get(old.kind, 1.0):
        imp = None  # a memory's default importance follows its kind
    row = prepare(now, changes.get("text", old.text), kind=kind,
                  source=changes.get("source", old.source), id=id, namespace=old.namespace,
                  created_at=old.created_at, importance=imp, key=changes.get("key", old.key),
                  metadata=changes.get("metadata", old.metadata))
    seq, feats = c.execute(sql.UPDATE_MEMORY, row).fetchall()[0]
    if vectors.in_python and row["text"] != old.text:
        c.execute(sql.REPLACE_VECTOR, {"seq": seq, "v": vectors.embed([row["text"]])[0].tobytes()})
    return Item(id, row["text"], old.namespace, row["kind"], row["source"], row["key"],
                row["importance"], old.created_at, old.last_used_at,
                json.loads(row["metadata"]) if row["metadata"] else None,
                tuple(feats.split()), old.thread, old.turn)


def insert(c: schema.Connection, rows: list[dict[str, Any]], copy: bool,
           vectors: Vectors) -> list[Item]:
    """Add rows (checked by prepare) through the C core's batch form of
    heap_add (heap_add_many, csrc/store.c): the same checks, ids, same-text
    rule and features as add(), the FTS index taken once at the end; at
    most MAX_IDS rows a call, so a longer batch is several calls in this
    one transaction.  Returns the Items in the rows' order: a row that is
    a memory the namespace held already (or an earlier row's) is that
    memory, as it is."""
    last = c.execute(sql.LAST_SEQ).fetchall()[0][0]
    step = int(native.LIMITS["MAX_IDS"])
    ids: list[str] = []
    for at in range(0, len(rows), step):
        # each row as heap_add's arguments, in its order
        items = json.dumps([_add_args(r) for r in rows[at:at + step]], ensure_ascii=False,
                           separators=(",", ":"), check_circular=False)
        try:
            out = c.execute(sql.ADD_MANY, {"items": items, "copy": int(copy)}).fetchall()
        except apsw.ConstraintError as e:  # an id given that a memory has
            raise DuplicateIdError(_item_sentence(e, at)) from None
        except apsw.SQLError as e:  # the C core's sentence: a bad argument
            raise ValueError("add_many: " + _item_sentence(e, at)) from None
        ids += json.loads(out[0][0])
    # the rows the batch made, as they were given (with the core's features);
    # a row that is a memory held already is that memory, as it is
    made = {i: (seq, f, t) for i, seq, f, t in c.execute(sql.ADDED_SINCE, {"seq": last})}
    by_id: dict[str, Item] = {}
    for r, i in zip(rows, ids):
        if i in by_id:
            continue
        if i in made:
            by_id[i] = _new_item(r, i, made[i][1], made[i][2])
        else:
            by_id[i] = item(c.execute(sql.GET_MEMORY, {"id": i}).fetchall()[0])
    if vectors.in_python:
        new = sorted((seq, by_id[i].text) for i, (seq, _, _) in made.items())
        vecs = vectors.embed([t for _, t in new])
        c.executemany(sql.INSERT_VECTOR,
                      [(seq, vecs[j].tobytes()) for j, (seq, _) in enumerate(new)])
    return [by_id[i] for i in ids]
