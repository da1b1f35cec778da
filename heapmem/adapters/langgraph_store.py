"""A LangGraph store backed by heapmem (pip install "heapmem[langgraph]").

Owns: the mapping between LangGraph's BaseStore (namespaces as tuples, items
as keyed JSON values, TTLs) and heapmem's namespaces and memories.  It changes
the store only through Memory's public verbs (add, update, get, list, recall,
feedback, forget).

    from heapmem.adapters.langgraph_store import HeapmemStore
    store = HeapmemStore("agent.db")
    store.put(("users", "maya"), "flight", {"text": "Booked: SFO to LIS, March 14, 9:40am"})
    hits = store.search(("users", "maya"), query="When is my flight to Lisbon?", limit=3)
    ...  # answer with hits
    store.mark_used(("users", "maya"), [hits[0].key])   # what the answer used: heapmem learns

graph = builder.compile(store=store) hands it to every node (langgraph.config.get_store()).

Mapping:
- a namespace tuple is a heapmem namespace, its labels joined with '/'
  (("users", "maya") -> "users/maya").  Any label LangGraph allows can be
  stored: '%', '/', '.', NUL and lone surrogates in a label are written as
  %XX escapes of their UTF-8 bytes (("a/b",) -> "a%2Fb"), a label made only
  of spaces has its first character escaped, and the lone label "*" (heapmem's
  pooled layer) is "%2A", so the mapping is one to one and
  HeapmemStore.namespace_tuple() reverses it;
- an item is a memory with id "<namespace>.<key>" (the key escaped the same
  way, '%', NUL and surrogates only), so ("users", "maya"), "flight" is
  memory "users/maya.flight".  A namespace or id longer than 250 characters
  is shortened to its first 180 characters, "%%h" and the SHA-256 of the
  whole (no escaped name holds "%%"); the namespace tuple and key are kept in
  the memory's metadata, and every read checks them;
- the value (a JSON object) is kept whole in the memory's metadata, under
  "langgraph" with the key, the time of the last put and the TTL.  The
  memory's text, which recall searches, is every string found at the index
  fields (LangGraph paths: "a.b", "arr[*]", "{a,b}"), those of the put's
  `index=[...]`, else the store's `fields`, else the value's "text",
  "content" or "memory" field (the first that is a string), else the whole
  value as JSON;
- an item put with index=False, or with none of its index fields present,
  is kept in the namespace's unindexed twin "<namespace>%%u": get, list and
  search without a query see it, and a search with a query returns it after
  the ranked items, with score None;
- heapmem's kind and source (which feed what it learns) come from the value
  only when the store is built with kind_field= / source_field= (a value
  that is not a usable name is ignored); otherwise every item is a "fact";
  likewise a memory's place in a conversation (Memory.add's thread and turn:
  recall then finds a reply by the words of the turn it answers) with
  thread_field= / turn_field= (a thread that is not a usable name is
  ignored; without a usable turn, a whole number, the item is its thread's
  next turn), set when an item is first put and kept by later puts;
- search(query=...) ranks with heapmem's recall in every namespace under the
  prefix, then returns every other item that matches the filter, newest
  first with score None, as LangGraph's stores do.  The filter applies
  before the page is cut, so it never loses a match to the ranking.
  SearchItem.score is the core's recall across the namespaces searched
  (Memory.recall with a list of namespaces): its relevance on one scale
  for all of them (BM25 over the best BM25 among them), so a
  weak match in one namespace never ties an exact match in another.  Only
  what a search returns is logged as shown: a recall of the namespace down
  to its last item on the page (feedback() judges only the page);
  filter matches the value's fields (dotted paths) exactly or with $eq,
  $ne, $gt, $gte, $lt, $lte;
- memories added to the same namespaces by other means show up with their
  id as key and {"text", "kind", "source", "metadata"} as value;
- a recall_id given to mark_used, mark_ignored, feedback or report_answer
  must be a search of the namespace named: another namespace's is refused
  (ValueError, nothing judged), as the MCP server refuses it;
- an item's times are datetimes in UTC; a time from the file that no
  datetime holds (after the year 9999, before year 1) reads as the latest
  (earliest) one, never as an OverflowError.

TTL (supports_ttl is True): put(..., ttl=minutes) stores the expiry time
(the Memory's clock, mem.now(), plus ttl) in the item's metadata; a get or
search with refresh_ttl (the default) moves it to now + ttl again.
sweep_ttl() forgets every expired item, and start_ttl_sweeper() runs it on a
thread every sweep_interval_minutes.  ttl={"default_ttl": minutes,
"refresh_on_read": bool, "sweep_interval_minutes": m, "omit_expired": bool}
sets the defaults, as LangGraph's TTLConfig.  An expired item is never read
back, by get or search, even before a sweep has forgotten it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import json
import math
import os
import threading
import urllib.parse
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
)

from ..config import DEFAULT_KIND
from ..errors import CorruptStoreError, DuplicateIdError
from ..results import Feedback
from ..store import Memory
from ..store import open as _open
from ..validate import MAX_K, MAX_NAME_CHARS, MAX_TURN, check_recall_id

try:  # langgraph-checkpoint >= 2.1
    from langgraph.store.base import validate_op_namespace as _validate_op
except ImportError:  # pragma: no cover
    def _validate_op(op: Any) -> None:
        return None

#: The value fields whose text a memory is searched by when no index fields
#: are set, in order of preference (the first string found).
TEXT_FIELDS = ("text", "content", "memory")
SEP = "/"
#: Marks a shortened name: what follows is the SHA-256 of the whole name.
HASHED = "%%h"
#: Ends the name of a namespace's twin that holds its unindexed items.
UNINDEXED = "%%u"
#: Longest namespace name or id kept whole; longer ones are shortened.
LONGEST = 250
_HEAD = 180
#: How many searches' pages feedback() remembers.
PAGES_KEPT = 1024


#: The earliest and latest times a datetime holds (years 1 and 9999, UTC).
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)
_LATEST = datetime.max.replace(tzinfo=timezone.utc)


def _utc(t: float) -> datetime:
    """The UTC datetime of a Unix time; a time no datetime holds (before year
    1, after 9999, infinite: a value from the file, not from heapmem's own
    clock) is the earliest or latest one, and NaN the earliest."""
    try:
        return datetime.fromtimestamp(t, timezone.utc)
    except (OverflowError, ValueError, OSError):
        return _LATEST if t > 0 else _EARLIEST


# -- names -------------------------------------------------------------------------

def _escape(s: str, also: str, *, blank: bool) -> str:
    """s with '%', the characters of `also`, NUL and lone surrogates written
    as %XX escapes of their UTF-8 bytes; with blank, a string of spaces only
    gets its first character escaped (heapmem refuses blank names)."""
    out = []
    for i, ch in enumerate(s):
        if ch == "%" or ch in also or ch == "\x00" or "\ud800" <= ch <= "\udfff" or (
                blank and i == 0 and not s.strip()):
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out)


def _unescape(s: str) -> str:
    return urllib.parse.unquote(s, errors="surrogatepass")


def _shorten(name: str) -> str:
    """A name of at most LONGEST characters standing for `name`."""
    if len(name) <= LONGEST:
        return name
    head = name[:_HEAD]
    cut = head.rfind("%", len(head) - 2)
    if cut >= 0:  # never split a %XX escape
        head = head[:cut]
    return head + HASHED + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()


def _full_name(namespace: Sequence[str]) -> str:
    ns = tuple(namespace)
    if not ns:
        raise InvalidNamespaceError("a namespace needs at least one label")
    labels = []
    for label in ns:
        if not isinstance(label, str):
            raise InvalidNamespaceError(f"namespace labels must be strings, got {label!r} in {ns}")
        if not label:
            raise InvalidNamespaceError(f"namespace labels must not be empty, got {ns}")
        labels.append(_escape(label, "/.", blank=True))
    name = SEP.join(labels)
    return "%2A" if name == "*" else name


def _path(value: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


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
        a, b = _number(value), _number(want)
        if a is None or b is None:
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _matches(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    if cond.match_type not in ("prefix", "suffix"):
        raise ValueError(f"unsupported match type {cond.match_type!r}: use prefix or suffix")
    pairs = zip(ns, path) if cond.match_type == "prefix" else zip(reversed(ns), reversed(path))
    return all(p == "*" or a == p for a, p in pairs)


def _usable_name(v: Any) -> str | None:
    """v if heapmem takes it as a kind or source, else None."""
    if isinstance(v, str) and v.strip() and len(v) <= MAX_NAME_CHARS and "\x00" not in v:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return v
    return None


class LangChainEmbedder:
    """A heapmem embedder (a callable from texts to a 2-D array, with a .name)
    made of LangGraph's `index["embed"]`: a LangChain Embeddings, a function
    from texts to vectors, or a "provider:model" string."""

    def __init__(self, embed: Any, *, dims: int | None = None, name: str | None = None):
        self.embeddings = ensure_embeddings(embed)
        if name is None:
            name = embed if isinstance(embed, str) else getattr(
                embed, "model", None) or getattr(embed, "__qualname__", None) or \
                type(embed).__qualname__
        self.name = f"langchain:{name}"
        self.dims = dims

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        v = np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32)
        if self.dims is not None and v.ndim == 2 and v.shape[1] != self.dims:
            raise ValueError(f"the embeddings have {v.shape[1]} dimensions; index['dims'] "
                             f"says {self.dims}")
        return v


class HeapmemStore(BaseStore):
    """A LangGraph BaseStore whose items are heapmem memories: search ranks by
    relevance x importance x learned usefulness, and mark_used() teaches it
    what answers used.

    memory: a heapmem.Memory, or the path of a store to open (closed by
    close()).  index: LangGraph's IndexConfig; its "fields" (paths) are what
    the memory's text is made of, and its "embed" (with a path only) turns on
    heapmem's hybrid recall with those embeddings.  text_fields: the same as
    index["fields"].  ttl: LangGraph's TTLConfig.  kind_field, source_field:
    the value fields that give heapmem's kind and source, if any;
    thread_field, turn_field: those that give its thread (a conversation's
    id) and turn there, if any.
    """

    supports_ttl = True

    def __init__(self, memory: Memory | str | os.PathLike, *,
                 text_fields: Sequence[str] | None = None,
                 index: Mapping[str, Any] | None = None,
                 ttl: TTLConfig | Mapping[str, Any] | None = None,
                 kind_field: str | None = None, source_field: str | None = None,
                 thread_field: str | None = None, turn_field: str | None = None):
        if index is not None and not isinstance(index, Mapping):
            raise TypeError("index must be a dict (LangGraph's IndexConfig)")
        index = dict(index or {})
        if text_fields is not None and index.get("fields") is not None:
            raise ValueError("give the index fields once: text_fields or index['fields']")
        fields = text_fields if text_fields is not None else index.get("fields")
        if fields is not None and (isinstance(fields, str) or not all(
                isinstance(f, str) for f in fields)):
            raise TypeError("text_fields / index['fields'] must be a list of field paths")
        embed = index.get("embed")
        if isinstance(memory, Memory):
            if embed is not None:
                raise ValueError("index['embed'] needs the path of a store; for a Memory, open "
                                 "it with heapmem.open(path, embedder=LangChainEmbedder(embed))")
            self.memory = memory
            self._owned = False
        elif isinstance(memory, (str, os.PathLike)):
            embedder = None if embed is None else LangChainEmbedder(
                embed, dims=index.get("dims"), name=index.get("name"))
            self.memory = _open(os.fspath(memory), embedder=embedder)
            self._owned = True
        else:
            raise TypeError("HeapmemStore takes a heapmem.Memory or the path of a store")
        for what, f in (("kind_field", kind_field), ("source_field", source_field),
                        ("thread_field", thread_field), ("turn_field", turn_field)):
            if f is not None and not isinstance(f, str):
                raise TypeError(f"{what} must be a field name or None")
        if ttl is not None and not isinstance(ttl, Mapping):
            raise TypeError("ttl must be a dict (LangGraph's TTLConfig)")
        #: the paths the memory's text is made of (None: TEXT_FIELDS, the first found)
        self.fields: tuple[str, ...] | None = None if fields is None else tuple(fields)
        self.text_fields = self.fields or TEXT_FIELDS
        self.index_config = index or None
        self.ttl_config: TTLConfig | None = dict(ttl) if ttl is not None else None
        if self.ttl_config and self.ttl_config.get("default_ttl") is not None:
            self._check_ttl(self.ttl_config["default_ttl"])
        self.kind_field = kind_field
        self.source_field = source_field
        self.thread_field = thread_field
        self.turn_field = turn_field
        #: the recall_id of the latest search in each heapmem namespace
        self.last_recalls: dict[str, int] = {}
        self._pages: dict[int, list[str]] = {}  # recall_id -> the ids its search returned
        self._tuples: dict[str, tuple[str, ...]] = {}  # shortened name -> its namespace
        self._lock = threading.RLock()
        self._sweeper: tuple[threading.Thread, threading.Event] | None = None

    def close(self) -> None:
        """Stop the TTL sweeper and close the heapmem store if this object
        opened it."""
        self.stop_ttl_sweeper()
        if self._owned:
            self.memory.close()

    # -- names ---------------------------------------------------------------------

    @staticmethod
    def namespace_name(namespace: Sequence[str]) -> str:
        """The heapmem namespace of a LangGraph namespace tuple (its labels
        escaped and joined with '/', shortened past 250 characters)."""
        return _shorten(_full_name(namespace))

    @staticmethod
    def item_id(namespace: Sequence[str], key: str) -> str:
        """The id of the memory behind (namespace, key)."""
        if not isinstance(key, str):
            raise TypeError(f"a key must be a string, got {type(key).__name__}")
        return _shorten(_full_name(namespace) + "." + _escape(key, "", blank=False))

    def namespace_tuple(self, name: str) -> tuple[str, ...]:
        """The LangGraph namespace of a heapmem namespace name (the reverse of
        namespace_name; an unindexed twin maps to its namespace)."""
        if name.endswith(UNINDEXED):
            name = name[:-len(UNINDEXED)]
        if HASHED not in name:
            return tuple(_unescape(label) for label in name.split(SEP))
        ns = self._tuples.get(name)
        if ns is None:
            for it in self.memory.list(name, limit=1) + self.memory.list(
                    name + UNINDEXED, limit=1):
                lg = self._value_of(it.metadata)
                if lg is not None and isinstance(lg.get("namespace"), list):
                    ns = tuple(lg["namespace"])
                    break
            if ns is None:  # not the adapter's: show the name as it is
                return (name,)
            self._tuples[name] = ns
        return ns

    def _own(self, it: Any, namespace: tuple[str, ...], key: str) -> bool:
        """Whether memory it is the adapter's item (namespace, key)."""
        lg = self._value_of(it.metadata)
        if lg is None or lg.get("key", it.id) != key:
            return False
        held = lg.get("namespace")
        return held is None or tuple(held) == namespace

    def _find(self, namespace: tuple[str, ...], key: str) -> Any:
        """The memory behind (namespace, key): the adapter's own (in the
        namespace or its unindexed twin), or one added by other means whose
        id is the key."""
        ns = self.namespace_name(namespace)
        it = self.memory.get(self.item_id(namespace, key))
        if it is not None and it.namespace in (ns, ns + UNINDEXED) and self._own(
                it, namespace, key):
            return it
        if _usable_name(key) is None:
            return None
        it = self.memory.get(key)
        if it is None or it.namespace != ns or self._value_of(it.metadata) is not None:
            return None  # (an adapter's memory: of another namespace)
        return it

    # -- values --------------------------------------------------------------------

    @staticmethod
    def _value_of(metadata: Any) -> dict | None:
        lg = metadata.get("langgraph") if isinstance(metadata, dict) else None
        return lg if isinstance(lg, dict) and isinstance(lg.get("value"), dict) else None

    def _text(self, value: Mapping[str, Any], index: Any) -> str | None:
        """The text to search the value by, or None when there is none."""
        paths = index if isinstance(index, list) else self.fields
        if paths is None:
            for f in TEXT_FIELDS:
                v = _path(value, f)
                if isinstance(v, str) and v.strip():
                    return v
            return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        parts = [t for p in paths for t in get_text_at_path(dict(value), p)
                 if isinstance(t, str) and t.strip()]
        return "\n".join(parts) if parts else None

    def _value(self, it: Any) -> dict:
        """The item's value, as get() returns it."""
        lg = self._value_of(it.metadata)
        if lg is not None:
            return lg["value"]
        return {"text": it.text, "kind": it.kind, "source": it.source, "metadata": it.metadata}

    @staticmethod
    def _created_at(it: Any) -> float:
        """The memory's creation time (the file's value, which heapmem's own
        verbs keep a number)."""
        t = _number(it.created_at)
        if t is None or math.isnan(t):
            raise CorruptStoreError(f"memory {it.id!r} has a creation time that is not a "
                                    f"number ({it.created_at!r}); the file is damaged")
        return t

    def _updated_at(self, it: Any) -> float:
        """The time of the item's last put (its metadata's, when that is a
        finite number), else its creation time."""
        lg = self._value_of(it.metadata)
        t = _number(lg.get("updated_at")) if lg is not None else None
        return t if t is not None and math.isfinite(t) else self._created_at(it)

    def _item(self, it: Any, namespace: tuple[str, ...], *, score: float | None = None,
              search: bool = False) -> Item:
        lg = self._value_of(it.metadata)
        key = lg.get("key", it.id) if lg is not None else it.id
        value = self._value(it)
        updated = self._updated_at(it)
        if search:
            return SearchItem(namespace=namespace, key=key, value=value,
                              created_at=_utc(self._created_at(it)), updated_at=_utc(updated),
                              score=score)
        return Item(value=value, key=key, namespace=namespace,
                    created_at=_utc(self._created_at(it)), updated_at=_utc(updated))

    # -- TTL -----------------------------------------------------------------------

    @staticmethod
    def _check_ttl(ttl: Any) -> float:
        t = _number(ttl)
        if t is None or not math.isfinite(t) or t < 0:
            raise ValueError(f"ttl must be a number of minutes >= 0 (or None), got {ttl!r}")
        return t

    def _expired(self, it: Any, now: float) -> bool:
        lg = self._value_of(it.metadata)
        exp = lg.get("expires_at") if lg is not None else None
        return isinstance(exp, (int, float)) and exp <= now

    def _hidden(self, it: Any, now: float) -> bool:
        """An item past its TTL is never served, swept or not (as LangGraph's
        own stores behave; omit_expired is accepted and changes nothing)."""
        return self._expired(it, now)

    def _refresh(self, its: Iterable[Any], now: float) -> None:
        """Move the expiry of items with a TTL to now + TTL."""
        for it in its:
            lg = self._value_of(it.metadata)
            if lg is None:
                continue
            ttl = _number(lg.get("ttl"))
            # (a TTL the adapter never wrote, from the file: not a number, or
            # one that puts the expiry past any time, is left as it is)
            expires = now + ttl * 60 if ttl is not None and ttl >= 0 else math.nan
            if not math.isfinite(expires) or lg.get("expires_at") == expires:
                continue
            meta = dict(it.metadata)
            meta["langgraph"] = {**lg, "expires_at": expires}
            self.memory.update(it.id, metadata=meta)

    def sweep_ttl(self) -> int:
        """Forget every item whose TTL has run out (by the Memory's clock);
        returns how many.  Each sweep reads every item's metadata once."""
        with self._lock:
            now = self.memory.now()
            doomed = [it.id for name in self.memory.namespaces
                      for it in self.memory.list(name) if self._expired(it, now)]
            return self.memory.forget(doomed) if doomed else 0

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None
                          ) -> concurrent.futures.Future:
        """Run sweep_ttl() on a thread every sweep_interval_minutes (default:
        the ttl config's, else 5), first at once.  The future completes when
        stop_ttl_sweeper() stops it."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        interval = sweep_interval_minutes or (self.ttl_config or {}).get(
            "sweep_interval_minutes") or 5
        interval = self._check_ttl(interval)
        with self._lock:
            if self._sweeper is not None:
                raise RuntimeError("the TTL sweeper is running already")
            stop = threading.Event()

            def run() -> None:
                try:
                    while True:
                        self.sweep_ttl()
                        if stop.wait(interval * 60):
                            break
                    fut.set_result(None)
                except BaseException as e:  # reported through the future
                    fut.set_exception(e)

            thread = threading.Thread(target=run, name="heapmem-ttl-sweeper", daemon=True)
            self._sweeper = (thread, stop)
            thread.start()
        return fut

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the TTL sweeper; True once it has stopped (or never ran)."""
        with self._lock:
            sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        thread, stop = sweeper
        stop.set()
        thread.join(timeout)
        return not thread.is_alive()

    # -- operations ----------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; results match them one to one (None for
        a put).  Batches from different threads take turns."""
        ops = list(ops)
        for op in ops:
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise TypeError(f"unknown store operation {type(op).__name__}")
            _validate_op(op)
        out: list[Result] = []
        with self._lock:
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
        namespace = tuple(op.namespace)
        it = self._find(namespace, op.key)
        now = self.memory.now()
        if it is None or self._hidden(it, now):
            return None
        if getattr(op, "refresh_ttl", False):
            self._refresh([it], now)
        return self._item(it, namespace)

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        ns = self.namespace_name(namespace)
        mid = self.item_id(namespace, op.key)
        mem = self.memory
        existing = self._find(namespace, op.key)
        if op.value is None:
            if existing is not None:
                mem.forget([existing.id])
            return
        if not isinstance(op.value, Mapping):
            raise TypeError(f"a value must be a dict, got {type(op.value).__name__}")
        value = dict(op.value)
        ttl = getattr(op, "ttl", None)
        now = mem.now()
        lg: dict[str, Any] = {"key": op.key, "value": value, "updated_at": now}
        if ns != _full_name(namespace):
            lg["namespace"] = list(namespace)
        if ttl is not None:
            lg["ttl"] = self._check_ttl(ttl)
            lg["expires_at"] = now + lg["ttl"] * 60
        meta = {"langgraph": lg}
        text = self._text(value, op.index) if op.index is not False else None
        home = ns if text is not None else ns + UNINDEXED
        if text is None:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        kind = (_usable_name(_path(value, self.kind_field)) if self.kind_field else None) \
            or DEFAULT_KIND
        source = _usable_name(_path(value, self.source_field)) if self.source_field else None
        fields: dict[str, Any] = {"text": text, "kind": kind, "source": source, "metadata": meta}
        if existing is not None and existing.id != mid:
            existing = None  # a memory added by other means: the put makes the adapter's own
        if existing is None:
            try:
                mem.add(id=mid, namespace=home, created_at=now, **self._place(value), **fields)
                return
            except DuplicateIdError:  # another connection put it just now
                existing = mem.get(mid)
                if existing is None:
                    raise
        if existing.namespace == home:
            # an update: same memory, new text and value (its recall log and links stay)
            mem.update(mid, importance=None, **fields)
        else:  # into or out of the unindexed twin: same id, creation time and thread
            mem.forget([mid])
            place = {"thread": existing.thread, "turn": existing.turn}
            mem.add(id=mid, namespace=home, created_at=existing.created_at, **place, **fields)

    def _place(self, value: Mapping[str, Any]) -> dict[str, Any]:
        """The thread and turn a new item's value gives (thread_field,
        turn_field): a turn only with a thread, a usable one only."""
        thread = _usable_name(_path(value, self.thread_field)) if self.thread_field else None
        turn = _path(value, self.turn_field) if self.turn_field and thread else None
        if isinstance(turn, bool) or not isinstance(turn, int) or not 0 <= turn <= MAX_TURN:
            turn = None
        return {"thread": thread, "turn": turn}

    def _spaces(self, prefix: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
        """(heapmem name, namespace tuple) of every namespace under prefix,
        the unindexed twins included."""
        prefix = tuple(prefix)
        n = len(prefix)
        out = []
        for name in self.memory.namespaces:
            ns = self.namespace_tuple(name)
            if ns[:n] == prefix:
                out.append((name, ns))
        return out

    def _config(self, k: int) -> Any:
        """The Memory's scoring config, re-ranking at least k candidates."""
        config = self.memory.config
        return dataclasses.replace(config, candidates=max(config.candidates, k))

    def _ranked(self, query: str, spaces: list[tuple[str, tuple[str, ...]]], k: int,
                now: float, track: bool) -> list[tuple[float, str, int, Any]]:
        """The indexed namespaces' top k for query, ranked by the core across
        them on one scale, as (score, heapmem namespace, rank in its
        namespace, result)."""
        names = [name for name, _ in spaces if not name.endswith(UNINDEXED)]
        res = self.memory.recall(query, k=k, namespace=names if len(names) > 1 else names[0],
                                 now=now, config=self._config(k), track=track)
        for name, part in res.parts.items():
            if part.recall_id is not None:
                self.last_recalls[name] = part.recall_id
        ranks: dict[str, int] = {}
        out = []
        for r in res:
            ranks[r.namespace] = ranks.get(r.namespace, 0) + 1
            out.append((r.score, r.namespace, ranks[r.namespace], r))
        return out

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError("limit and offset must be 0 or more")
        spaces = self._spaces(op.namespace_prefix)
        want = op.offset + op.limit
        if want == 0 or not spaces:
            return []
        mem = self.memory
        now = mem.now()
        keep = (lambda v: all(_compare(_path(v, k), f) for k, f in op.filter.items())) \
            if op.filter else (lambda v: True)
        tuples = dict(spaces)
        found: list[tuple[Any, str, float | None, int]] = []  # memory, namespace, score, rank
        seen: set[str] = set()
        indexed = [s for s in spaces if not s[0].endswith(UNINDEXED)]
        one = len(indexed) == 1 and not op.filter
        k = min(MAX_K, want) if not op.filter else MAX_K
        if op.query and indexed:
            # with a filter, rank all a recall can (the filter must see every match);
            # else what the page needs.  One namespace, no filter: that recall is
            # the one logged; else the page's namespaces are recalled again below,
            # down to the page's last item, so that only what was shown is logged
            for score, name, rank, r in self._ranked(op.query, indexed, k, now, track=one):
                seen.add(r.id)
                found.append((r, name, score, rank))
        found = [f for f in found if keep(self._value(f[0])) and not self._hidden(f[0], now)]
        if len(found) < want:
            # the rest, newest update first (a put's time is in its metadata)
            rest = [(it, name) for name, _ in spaces for it in mem.list(name)
                    if it.id not in seen]
            rest.sort(key=lambda p: (-self._updated_at(p[0]), -self._created_at(p[0]), p[0].id))
            found += [(it, name, None, 0) for it, name in rest
                      if keep(self._value(it)) and not self._hidden(it, now)]
        page = found[op.offset:want]
        if op.query and page:
            self._log_page(op.query, page, now, k, again=not one)
        if getattr(op, "refresh_ttl", False):
            self._refresh([f[0] for f in page], now)
        return [self._item(it, tuples[name], score=score, search=True)
                for it, name, score, _ in page]

    def _log_page(self, query: str, page: list, now: float, k: int, again: bool) -> None:
        """Log the recall of each namespace on the page, down to its last item
        there, and remember which of its memories the page showed."""
        deepest: dict[str, int] = {}
        shown: dict[str, list[str]] = {}
        for it, name, score, rank in page:
            if score is not None:
                deepest[name] = max(deepest.get(name, 0), rank)
                shown.setdefault(name, []).append(it.id)
        config = self._config(k)  # as the search ranked them
        for name, depth in deepest.items():
            if again:
                res = self.memory.recall(query, k=depth, namespace=name, now=now, config=config)
                if res.recall_id is None:
                    continue
                self.last_recalls[name] = res.recall_id
            rid = self.last_recalls.get(name)
            if rid is not None:
                self._pages[rid] = shown[name]
        while len(self._pages) > PAGES_KEPT:
            del self._pages[next(iter(self._pages))]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        out = sorted({ns for _, ns in self._spaces(())})
        for cond in op.match_conditions or ():
            out = [ns for ns in out if _matches(cond, ns)]
        if op.max_depth is not None:
            out = sorted({ns[:op.max_depth] for ns in out})
        return out[op.offset:op.offset + op.limit]

    # -- feedback ------------------------------------------------------------------

    def _ids(self, namespace: Sequence[str], keys: Sequence[str]) -> list[str]:
        if isinstance(keys, str):
            raise TypeError("keys must be a list of keys, not one string; wrap it: [key]")
        ids = []
        for key in keys:
            it = self._find(tuple(namespace), key)
            if it is None:
                raise ValueError(f"no item {key!r} in namespace {tuple(namespace)}")
            ids.append(it.id)
        return ids

    def mark_used(self, namespace: Sequence[str], keys: Sequence[str], *,
                  recall_id: int | None = None) -> Feedback:
        """Report the items of a search that the answer used (heapmem learns
        from it).  recall_id (a search of this namespace) defaults to the
        newest search that showed them."""
        ids = self._ids(namespace, keys)
        return self.memory.mark_used(ids, recall_id=recall_id,
                                     namespace=self.namespace_name(namespace))

    def mark_ignored(self, namespace: Sequence[str], keys: Sequence[str], *,
                     recall_id: int | None = None) -> Feedback:
        """Report items that a search showed and the answer did not use."""
        ids = self._ids(namespace, keys)
        return self.memory.mark_ignored(ids, recall_id=recall_id,
                                        namespace=self.namespace_name(namespace))

    def feedback(self, namespace: Sequence[str], used: Sequence[str], *,
                 recall_id: int | None = None) -> Feedback:
        """Report the used items; every other item the search returned counts
        as ignored.  recall_id (a search of this namespace) defaults to the
        namespace's latest search."""
        ids = self._ids(namespace, used)
        if recall_id is None:
            recall_id = self.last_recalls.get(self.namespace_name(namespace))
        recall_id = check_recall_id(recall_id)  # "7" is recall 7's page, as feedback reads it
        page = self._pages.get(recall_id) if recall_id is not None else None
        ignored = None if page is None else [i for i in page if i not in ids]
        return self.memory.feedback(ids, recall_id=recall_id, ignored=ignored,
                                    namespace=self.namespace_name(namespace))

    def report_answer(self, namespace: Sequence[str], answer: str, *,
                      recall_id: int | None = None) -> Feedback:
        """Report the answer written from a search (by default the namespace's
        latest; a recall_id must be a search of this namespace): heapmem works
        out from its text which of the returned items it used, and learns
        from that; no keys needed.  The result's judgements say, for each
        returned item, what was decided and why."""
        if recall_id is None:
            recall_id = self.last_recalls.get(self.namespace_name(namespace))
            if recall_id is None:
                raise ValueError(f"no search in namespace {tuple(namespace)} to report an "
                                 "answer on: search it first, or pass recall_id")
        return self.memory.feedback(recall_id=recall_id, answer=answer,
                                    namespace=self.namespace_name(namespace))

    async def areport_answer(self, namespace: Sequence[str], answer: str, *,
                             recall_id: int | None = None) -> Feedback:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.report_answer(namespace, answer, recall_id=recall_id))

    async def amark_used(self, namespace: Sequence[str], keys: Sequence[str], *,
                         recall_id: int | None = None) -> Feedback:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.mark_used(namespace, keys, recall_id=recall_id))

    async def amark_ignored(self, namespace: Sequence[str], keys: Sequence[str], *,
                            recall_id: int | None = None) -> Feedback:
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.mark_ignored(namespace, keys, recall_id=recall_id))

    async def asweep_ttl(self) -> int:
        return await asyncio.get_running_loop().run_in_executor(None, self.sweep_ttl)
