"""A LangGraph store backed by heapmem (pip install 'heapmem[langgraph]').

Owns: the mapping between LangGraph's BaseStore (namespaces as tuples, items
as keyed JSON values) and heapmem's namespaces and memories.  It changes the
store only through Memory's public verbs (add, update, list, recall,
feedback, forget).

    from heapmem.langgraph_store import HeapmemStore
    store = HeapmemStore("agent.db")
    store.put(("users", "maya"), "flight", {"text": "Booked: SFO to LIS, March 14, 9:40am"})
    hits = store.search(("users", "maya"), query="When is my flight to Lisbon?", limit=3)
    ...  # answer with hits
    store.mark_used(("users", "maya"), [hits[0].key])   # what the answer used: heapmem learns

graph = builder.compile(store=store) hands it to every node (langgraph.config.get_store()).

Mapping:
- a namespace tuple is a heapmem namespace, its labels joined with '/'
  (("users", "maya") -> "users/maya"); labels must be non-empty and hold
  no '/' or '.';
- an item is a memory with id "<namespace>.<key>"; its value (a JSON object)
  is kept whole in the memory's metadata, and the memory's text is the value's
  "text", "content" or "memory" field (the first that is a string), or the
  fields that PutOp.index names, or else the whole value as JSON.  A "kind" or
  "source" string in the value becomes the memory's kind or source, which
  feed what heapmem learns;
- search(query=...) is heapmem's recall in each namespace under the prefix
  (logged, so mark_used can report on it); SearchItem.score is its score.
  Without a query, items come newest first.  filter matches the value's
  fields exactly or with $eq, $ne, $gt, $gte, $lt, $lte;
- memories added to the same namespaces by other means show up with their
  id as key and {"text", "kind", "source", "metadata"} as value.

TTLs are not supported (supports_ttl is False).
"""
from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from langgraph.store.base import (BaseStore, GetOp, InvalidNamespaceError, Item,
                                  ListNamespacesOp, MatchCondition, Op, PutOp, Result,
                                  SearchItem, SearchOp)

from .results import Feedback
from .store import Memory
from .store import open as _open
from .validate import MAX_K

try:  # langgraph-checkpoint >= 2.1
    from langgraph.store.base import validate_op_namespace as _validate_op
except ImportError:  # pragma: no cover
    def _validate_op(op: Any) -> None:
        return None

#: The value fields whose text a memory is searched by, in order of preference.
TEXT_FIELDS = ("text", "content", "memory")
SEP = "/"


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, timezone.utc)


def _path(value: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _compare(item_value: Any, want: Any) -> bool:
    """A filter value against an item's value, as LangGraph's own stores do."""
    if isinstance(want, Mapping):
        if any(str(k).startswith("$") for k in want):
            return all(_operator(item_value, op, v) for op, v in want.items())
        return isinstance(item_value, Mapping) and all(
            _compare(item_value.get(k), v) for k, v in want.items())
    return item_value == want


def _operator(value: Any, op: str, want: Any) -> bool:
    if op == "$eq":
        return value == want
    if op == "$ne":
        return value != want
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(want)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _matches(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    pairs = zip(ns, path) if cond.match_type == "prefix" else zip(reversed(ns), reversed(path))
    if cond.match_type not in ("prefix", "suffix"):
        raise ValueError(f"unsupported match type {cond.match_type!r}: use prefix or suffix")
    return all(p == "*" or a == p for a, p in pairs)


class HeapmemStore(BaseStore):
    """A LangGraph BaseStore whose items are heapmem memories: search ranks by
    relevance x importance x learned usefulness, and mark_used() teaches it
    what answers used."""

    supports_ttl = False

    def __init__(self, memory: Memory | str | os.PathLike, *,
                 text_fields: Sequence[str] = TEXT_FIELDS):
        if isinstance(memory, Memory):
            self.memory = memory
            self._owned = False
        elif isinstance(memory, (str, os.PathLike)):
            self.memory = _open(os.fspath(memory))
            self._owned = True
        else:
            raise TypeError("HeapmemStore takes a heapmem.Memory or the path of a store")
        if isinstance(text_fields, str) or not all(isinstance(f, str) for f in text_fields):
            raise TypeError("text_fields must be a list of field names")
        self.text_fields = tuple(text_fields)
        #: the recall_id of the latest search in each heapmem namespace
        self.last_recalls: dict[str, int] = {}

    def close(self) -> None:
        """Close the heapmem store if this object opened it."""
        if self._owned:
            self.memory.close()

    # -- names ---------------------------------------------------------------------

    @staticmethod
    def namespace_name(namespace: Sequence[str]) -> str:
        """The heapmem namespace of a LangGraph namespace tuple."""
        ns = tuple(namespace)
        if not ns:
            raise InvalidNamespaceError("a namespace needs at least one label")
        for label in ns:
            if not isinstance(label, str) or not label.strip():
                raise InvalidNamespaceError(f"namespace labels must be non-empty strings, "
                                            f"got {label!r} in {ns}")
            if SEP in label or "." in label:
                raise InvalidNamespaceError(f"namespace label {label!r} holds '{SEP}' or '.'; "
                                            "heapmem joins labels with '/' and keys with '.'")
        return SEP.join(ns)

    @staticmethod
    def _tuple(name: str) -> tuple[str, ...]:
        return tuple(name.split(SEP))

    def _id(self, ns: str, key: Any) -> str:
        if not isinstance(key, str) or not key:
            raise ValueError(f"a key must be a non-empty string, got {key!r}")
        return f"{ns}.{key}"

    def _find(self, ns: str, key: str) -> Any:
        """The memory behind (namespace, key): the adapter's own, or one added
        by other means whose id is the key."""
        it = self.memory.get(self._id(ns, key))
        if it is None and len(key) <= 256 and "\x00" not in key and key.strip():
            it = self.memory.get(key)
            if it is not None and (self._value_of(it.metadata) is not None):
                it = None  # the adapter's own memory, under another namespace
        if it is None or it.namespace != ns:
            return None
        return it

    # -- values --------------------------------------------------------------------

    @staticmethod
    def _value_of(metadata: Any) -> dict | None:
        lg = metadata.get("langgraph") if isinstance(metadata, dict) else None
        return lg if isinstance(lg, dict) and isinstance(lg.get("value"), dict) else None

    def _text(self, value: Mapping[str, Any], index: Any) -> str:
        fields = index if isinstance(index, list) else self.text_fields
        parts: list[str] = []
        for f in fields:
            v = _path(value, f)
            if isinstance(v, str) and v.strip():
                parts.append(v)
            elif isinstance(v, list):
                parts.extend(x for x in v if isinstance(x, str) and x.strip())
            if parts and not isinstance(index, list):
                break  # the default: the first text field found
        if not parts:
            return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return "\n".join(parts)

    def _updated_at(self, it: Any) -> float:
        lg = self._value_of(it.metadata)
        return float(lg.get("updated_at", it.created_at)) if lg is not None else it.created_at

    def _item(self, it: Any, ns: str, *, score: float | None = None,
              search: bool = False) -> Item:
        lg = self._value_of(it.metadata)
        if lg is not None:
            key, value = lg.get("key", it.id), lg["value"]
            updated = lg.get("updated_at", it.created_at)
        else:
            key = it.id
            value = {"text": it.text, "kind": it.kind, "source": it.source,
                     "metadata": it.metadata}
            updated = it.created_at
        if search:
            return SearchItem(namespace=self._tuple(ns), key=key, value=value,
                              created_at=_utc(it.created_at), updated_at=_utc(updated),
                              score=score)
        return Item(value=value, key=key, namespace=self._tuple(ns),
                    created_at=_utc(it.created_at), updated_at=_utc(updated))

    # -- operations ----------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; results match them one to one (None for
        a put)."""
        ops = list(ops)
        for op in ops:
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise TypeError(f"unknown store operation {type(op).__name__}")
            _validate_op(op)
        out: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                out.append(self._get(op))
            elif isinstance(op, PutOp):
                self._put(op)
                out.append(None)
            elif isinstance(op, SearchOp):
                out.append(self._search(op))
            else:
                out.append(self._list_namespaces(op))
        return out

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    def _get(self, op: GetOp) -> Item | None:
        ns = self.namespace_name(op.namespace)
        it = self._find(ns, op.key)
        return None if it is None else self._item(it, ns)

    def _put(self, op: PutOp) -> None:
        ns = self.namespace_name(op.namespace)
        mid = self._id(ns, op.key)
        if getattr(op, "ttl", None) is not None:
            raise NotImplementedError("HeapmemStore does not support TTLs")
        mem = self.memory
        if op.value is None:
            it = self._find(ns, op.key)
            if it is not None:
                mem.forget([it.id])
            return
        if not isinstance(op.value, Mapping):
            raise TypeError(f"a value must be a dict, got {type(op.value).__name__}")
        value = dict(op.value)
        kind = value.get("kind") if isinstance(value.get("kind"), str) and \
            value["kind"].strip() else "fact"
        source = value.get("source") if isinstance(value.get("source"), str) and \
            value["source"].strip() else None
        text = self._text(value, op.index)
        now = mem.now()
        existing = mem.get(mid)
        meta = {"langgraph": {"key": op.key, "value": value, "updated_at": now}}
        if existing is None:
            mem.add(text, kind=kind, source=source, id=mid, namespace=ns, metadata=meta,
                    created_at=now)
            return
        # an update: same memory, new text and value (its recall log and links stay)
        mem.update(mid, text=text, kind=kind, source=source, importance=None, metadata=meta)

    def _namespaces_under(self, prefix: Sequence[str]) -> list[str]:
        prefix = tuple(prefix)
        if prefix:
            self.namespace_name(prefix)  # checks the labels
        n = len(prefix)
        return [ns for ns in self.memory.namespaces if self._tuple(ns)[:n] == prefix]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError("limit and offset must be 0 or more")
        namespaces = self._namespaces_under(op.namespace_prefix)
        want = op.offset + op.limit
        if want == 0 or not namespaces:
            return []
        keep = (lambda v: all(_compare(_path(v, k) if "." in k else v.get(k), f)
                              for k, f in op.filter.items())) if op.filter else None
        hits: list[tuple[float, str, Any]] = []
        if op.query:
            k = min(MAX_K, want * 4 if keep else want)
            for ns in namespaces:
                res = self.memory.recall(op.query, k=k, namespace=ns)
                if res.recall_id is not None:
                    self.last_recalls[ns] = res.recall_id
                hits.extend((r.score, ns, r) for r in res)
            hits.sort(key=lambda h: -h[0])
            items = [self._item(r, ns, score=s, search=True) for s, ns, r in hits]
        else:
            # newest update first (a put's time is in its metadata)
            found = [(it, ns) for ns in namespaces for it in self.memory.list(ns)]
            found.sort(key=lambda p: (-self._updated_at(p[0]), -p[0].created_at))
            items = [self._item(it, ns, search=True) for it, ns in found]
        if keep:
            items = [i for i in items if keep(i.value)]
        return items[op.offset:op.offset + op.limit]  # type: ignore[return-value]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        out = [self._tuple(ns) for ns in self.memory.namespaces]
        for cond in op.match_conditions or ():
            out = [ns for ns in out if _matches(cond, ns)]
        if op.max_depth is not None:
            out = sorted({ns[:op.max_depth] for ns in out})
        else:
            out = sorted(out)
        return out[op.offset:op.offset + op.limit]

    # -- feedback ------------------------------------------------------------------

    def _ids(self, namespace: Sequence[str], keys: Sequence[str]) -> list[str]:
        if isinstance(keys, str):
            raise TypeError("keys must be a list of keys, not one string; wrap it: [key]")
        ns = self.namespace_name(namespace)
        ids = []
        for key in keys:
            it = self._find(ns, key)
            if it is None:
                raise ValueError(f"no item {key!r} in namespace {tuple(namespace)}")
            ids.append(it.id)
        return ids

    def mark_used(self, namespace: Sequence[str], keys: Sequence[str], *,
                  recall_id: int | None = None) -> Feedback:
        """Report the items of a search that the answer used (heapmem learns
        from it).  recall_id defaults to the newest search that showed them."""
        return self.memory.mark_used(self._ids(namespace, keys), recall_id=recall_id)

    def mark_ignored(self, namespace: Sequence[str], keys: Sequence[str], *,
                     recall_id: int | None = None) -> Feedback:
        """Report items that a search showed and the answer did not use."""
        return self.memory.mark_ignored(self._ids(namespace, keys), recall_id=recall_id)

    def feedback(self, namespace: Sequence[str], used: Sequence[str], *,
                 recall_id: int | None = None) -> Feedback:
        """Report the used items; every other item the search showed counts as
        ignored.  recall_id defaults to the namespace's latest search."""
        ids = self._ids(namespace, used)
        if recall_id is None:
            recall_id = self.last_recalls.get(self.namespace_name(namespace))
        return self.memory.feedback(ids, recall_id=recall_id)

    async def amark_used(self, namespace: Sequence[str], keys: Sequence[str], *,
                         recall_id: int | None = None) -> Feedback:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.mark_used(namespace, keys, recall_id=recall_id))

    async def amark_ignored(self, namespace: Sequence[str], keys: Sequence[str], *,
                            recall_id: int | None = None) -> Feedback:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.mark_ignored(namespace, keys, recall_id=recall_id))
