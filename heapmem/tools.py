"""heapmem's tools for a model: JSON schemas for tool calling, and one
dispatcher that runs a call.

Owns: the tool table (TOOLS: each tool's name, description and JSON schema,
every parameter described, required ones required, `kind` an enum of the
kinds heapmem knows) and what each tool does (`call`).  Every tool door is
built from it: the MCP server (adapters.mcp_server), LangChain's tools
(adapters.langchain), the OpenAI Agents SDK's (adapters.openai_agents), and
any framework that takes plain tool schemas:

    import heapmem
    from heapmem import tools

    mem = heapmem.open("agent.db")
    openai_tools = tools.schemas("openai")         # Chat Completions' tools=
    anthropic_tools = tools.schemas("anthropic")   # Messages' tools=
    # for each tool call the model makes:
    result = tools.call(mem, name, arguments, namespace="user:maya")

Each tool is a thin call of the Memory method it is named after: add,
recall, report_answer (feedback(recall_id, answer=...)), mark_used,
mark_ignored, forget and list.  A door serves one namespace (call's
namespace=), so a model can neither read nor change another's memories: an
id or recall_id of another namespace is as unknown as one never made.
Bad input (an unknown tool, an argument the schema does not list, one it
requires missing, a value of the wrong type or out of range) raises
ValueError or TypeError with one sentence and writes nothing.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Optional

from .config import DEFAULT_KIND, KIND_IMPORTANCE
from .errors import HeapmemError
from .results import Result
from .store import Memory
from .validate import MAX_K, check_namespace

#: The kinds a memory may have through a tool (their default importance:
#: config.KIND_IMPORTANCE).
KINDS: tuple[str, ...] = tuple(KIND_IMPORTANCE)
#: The most memories `list` returns in one call.
MAX_LIST = 200

INSTRUCTIONS = """\
heapmem is the user's long-term memory (namespace {namespace}).

- Before answering anything that may depend on what you were told before, call
  recall with the user's question in their words.  It returns the most useful
  memories, each with its id and a one-line explanation of its rank, and a
  recall_id.
- Right after you answer, call report_answer with the recall_id and your
  answer's text, every time: heapmem works out from it which of the shown
  memories you used.  This is how heapmem learns which kinds of memory answer
  which kinds of question.  (If you know exactly which ids you used, mark_used
  with those ids and the recall_id does the same; mark_ignored reports the
  ones that did not help.)
- Call add for each fact, preference, instruction or event worth keeping,
  one per call, in plain words (kind: fact, preference, instruction, episode or
  note).
- forget erases memories by id (when the user asks you to); list shows the
  newest memories.
"""


@dataclass(frozen=True)
class Param:
    """One parameter of a tool: its JSON schema (with its description) and
    whether a call must give it."""

    name: str
    schema: dict[str, Any]
    required: bool = False


@dataclass(frozen=True)
class Tool:
    """One tool: its name, what it tells the model, its parameters, and the
    function that runs it (mem, namespace, arguments) -> a JSON object."""

    name: str
    description: str
    params: tuple[Param, ...]
    run: Callable[[Memory, str, dict[str, Any]], dict[str, Any]]

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments (an object)."""
        return {"type": "object",
                "properties": {p.name: copy.deepcopy(p.schema) for p in self.params},
                "required": [p.name for p in self.params if p.required],
                "additionalProperties": False}


def _iso(t: Optional[float]) -> Optional[str]:
    """A Unix time as ISO 8601 in UTC; one no datetime holds (before year 1,
    after 9999, infinite: a value from the file) is the earliest or latest."""
    if t is None:
        return None
    try:
        when = datetime.fromtimestamp(t, timezone.utc)
    except (OverflowError, ValueError, OSError, TypeError):
        when = (datetime.max if isinstance(t, (int, float)) and t > 0 else datetime.min
                ).replace(tzinfo=timezone.utc)
    return when.isoformat(timespec="seconds")


def _own(mem: Memory, namespace: str, ids: Any) -> list[str]:
    """ids (a list of ids, or one id), after checking each is a memory of
    this namespace."""
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"ids must be a list of memory ids, got {type(ids).__name__}")
    if not ids:
        raise ValueError("ids must name at least one memory")
    for i in ids:
        it = mem.get(i) if isinstance(i, str) else None
        if it is None or it.namespace != namespace:
            raise ValueError(f"unknown memory id {i!r}")
    return list(ids)


def _recall_id(args: Mapping[str, Any]) -> int | None:
    """The recall_id a tool was given: an integer, as its schema says (whose
    recall it is, the core checks: another namespace's is unknown)."""
    v = args.get("recall_id")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
        raise TypeError(f"recall_id must be an integer, got {type(v).__name__}")
    return v


def _int(args: Mapping[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    v = args.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be from {lo} to {hi}, got {v}")
    return v


def _kind(v: Any, name: str = "kind") -> str:
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a string, got {type(v).__name__}")
    if v not in KINDS:
        raise ValueError(f"{name} must be one of {', '.join(KINDS)}; got {v!r}")
    return v


def _add(mem: Memory, ns: str, a: dict[str, Any]) -> dict[str, Any]:
    it = mem.add(a["text"], kind=_kind(a.get("kind", DEFAULT_KIND)), source=a.get("source"),
                 key=a.get("key"), importance=a.get("importance"), namespace=ns,
                 thread=a.get("thread"), turn=a.get("turn"))
    out: dict[str, Any] = {"id": it.id, "kind": it.kind, "importance": it.importance}
    if it.thread is not None:
        out.update(thread=it.thread, turn=it.turn)
    return out


def _shown(r: Result) -> dict[str, Any]:
    """What a tool's caller sees of a recalled memory: its id, text, score
    (to 6 places) and the line that explains the score."""
    d = r.to_dict(("id", "text", "score", "explain"))
    d["score"] = round(d["score"], 6)
    return d


def _recall(mem: Memory, ns: str, a: dict[str, Any]) -> dict[str, Any]:
    k = _int(a, "k", 5, 1, MAX_K)
    kinds = a.get("kinds")
    if kinds is not None:
        if not isinstance(kinds, list):
            raise TypeError(f"kinds must be a list of kinds, got {type(kinds).__name__}")
        kinds = [_kind(x, "each of kinds") for x in kinds]
    res = mem.recall(a["query"], k=k, namespace=ns, kinds=kinds, since=a.get("since"),
                     until=a.get("until"))
    out: dict[str, Any] = {
        "recall_id": res.recall_id,
        "memories": [_shown(r) for r in res]}
    if res.recall_id is not None:
        out["next"] = (f"after answering, call report_answer(recall_id={res.recall_id}, "
                       "answer=<your answer>)")
    return out


def _report_answer(mem: Memory, ns: str, a: dict[str, Any]) -> dict[str, Any]:
    fb = mem.feedback(recall_id=_recall_id(a), answer=a["answer"], namespace=ns)
    return {"recall_id": fb.recall_id, "used": list(fb.used), "ignored": list(fb.ignored),
            "links_updated": fb.links_updated,
            "judgements": [{"id": j.id, "verdict": j.verdict, "why": j.reason}
                           for j in fb.judgements]}


def _mark_used(mem: Memory, ns: str, a: dict[str, Any]) -> dict[str, Any]:
    rid = _recall_id(a)
    fb = mem.mark_used(_own(mem, ns, a["ids"]), recall_id=rid, namespace=ns)
    return {"recall_id": fb.recall_id, "used": list(fb.used), "links_updated": fb.links_updated}


def _mark_ignored(mem: Memory, ns: str, a: dict[str, Any]) -> dict[str, Any]:
    rid = _recall_id(a)
    fb = mem.mark_ignored(_own(mem, ns, a["ids"]), recall_id=rid, namespace=ns)
    return {"recall_id": fb.recall_id, "ignored": list(fb.ignored),
            "links_updated": fb.links_updated}


def _forget(mem: Memory, ns: str, a: dict[str, Any]) -> dict[str, Any]:
    return {"forgotten": mem.forget(_own(mem, ns, a["ids"]))}


def _list(mem: Memory, ns: str, a: dict[str, Any]) -> dict[str, Any]:
    limit = _int(a, "limit", 20, 1, MAX_LIST)
    offset = _int(a, "offset", 0, 0, 2**62)
    total = mem.stats().namespace(ns).memories
    rows = mem.list(ns, limit=limit, offset=offset)
    return {"total": total, "memories": [
        {"id": it.id, "text": it.text, "kind": it.kind, "source": it.source,
         "created_at": _iso(it.created_at), "last_used_at": _iso(it.last_used_at)}
        for it in rows]}


_IDS = {"type": "array", "items": {"type": "string"}, "minItems": 1}
_RECALL_ID = {"type": "integer", "description": (
    "The recall_id that recall returned for the recall that showed these memories; "
    "omitted: the newest recall that showed them all.")}

#: The tools, in the order they are listed.
TOOLS: tuple[Tool, ...] = (
    Tool("add", "Store one memory: a fact, preference, instruction, episode or note, in "
         "plain words, one per call. Returns its id.", (
             Param("text", {"type": "string", "description": (
                 "The memory in plain words, as you would want to read it later.")},
                   required=True),
             Param("kind", {"type": "string", "enum": list(KINDS), "default": DEFAULT_KIND,
                            "description": (
                                "What sort of memory it is; it sets the default importance ("
                                + ", ".join(f"{k} {v:g}" for k, v in KIND_IMPORTANCE.items())
                                + ").")}),
             Param("source", {"type": "string", "description": (
                 "Who said it: the user's name, or \"tool\" for a tool's output. "
                 "Omitted: unknown.")}),
             Param("key", {"type": "string", "description": (
                 "A name for what the memory is about (\"home_city\"); a newer memory with "
                 "the same key supersedes the older ones. Omitted: none.")}),
             Param("importance", {"type": "number", "exclusiveMinimum": 0, "maximum": 10,
                                  "description": (
                                      "How much the memory matters, above 0 and at most 10; "
                                      "omitted: the kind's default.")}),
            Param("thread", {"type": "string", "description": (
                "The conversation this memory is a turn of (a chat or session id); recall "
                "then finds a reply by the words of the turn it answers. Omitted: none.")}),
            Param("turn", {"type": "integer", "minimum": 0, "description": (
                "Its place in the thread (needs thread). Omitted: the thread's next turn.")})),
         _add),
    Tool("recall", "The k memories most worth knowing to answer a question, best first, each "
         "with its id, text, score and a one-line explanation of the score, and a recall_id. "
         "After answering, call report_answer with your answer and this recall_id.", (
             Param("query", {"type": "string", "description": (
                 "The user's question, in their words.")}, required=True),
             Param("k", {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 5,
                         "description": f"How many memories to return, 1 to {MAX_K}."}),
             Param("kinds", {"type": "array", "minItems": 1,
                             "items": {"type": "string", "enum": list(KINDS)},
                             "description": "Keep only memories of these kinds. "
                                            "Omitted: every kind."}),
             Param("since", {"type": "string", "description": (
                 "Keep only memories created at or after this time (ISO 8601, e.g. "
                 "2025-03-01). Omitted: no lower bound.")}),
             Param("until", {"type": "string", "description": (
                 "Keep only memories created before this time (ISO 8601). "
                 "Omitted: no upper bound.")})),
         _recall),
    Tool("report_answer", "Report your answer, right after answering, with the recall_id of "
         "the recall it was written from. heapmem judges from its text which of the shown "
         "memories it used, and learns from that; the reply says, for each, what was decided "
         "and why. Each recall takes one report.", (
             Param("recall_id", {"type": "integer", "description": (
                 "The recall_id that recall returned for the recall your answer was "
                 "written from.")}, required=True),
             Param("answer", {"type": "string", "description": (
                 "Your answer's text, as you gave it to the user.")}, required=True)),
         _report_answer),
    Tool("mark_used", "Report the memories your answer used (ids from recall), right after "
         "answering; the others stay unjudged. heapmem learns from this which kinds of memory "
         "answer which questions.", (
             Param("ids", {**_IDS, "description": "The ids of the memories your answer used."},
                   required=True),
             Param("recall_id", dict(_RECALL_ID))),
         _mark_used),
    Tool("mark_ignored", "Report memories that recall showed but your answer did not use.", (
        Param("ids", {**_IDS, "description": "The ids of the memories your answer did not use."},
              required=True),
        Param("recall_id", dict(_RECALL_ID))),
         _mark_ignored),
    Tool("forget", "Erase memories by id, for good (their text leaves the store). Use it when "
         "the user asks you to forget something.", (
             Param("ids", {**_IDS, "description": "The ids of the memories to erase."},
                   required=True),),
         _forget),
    Tool("list", "The newest memories, newest first, and how many there are.", (
        Param("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIST, "default": 20,
                        "description": f"How many memories to return, 1 to {MAX_LIST}."}),
        Param("offset", {"type": "integer", "minimum": 0, "default": 0,
                         "description": "How many of the newest to skip first."})),
         _list),
)

_BY_NAME = {t.name: t for t in TOOLS}
NAMES: tuple[str, ...] = tuple(_BY_NAME)


def tool(name: str) -> Tool:
    """The tool called name (ValueError for a name no tool has)."""
    if not isinstance(name, str) or name not in _BY_NAME:
        raise ValueError(f"unknown tool {name!r}: the tools are {', '.join(NAMES)}")
    return _BY_NAME[name]


#: The shapes schemas() writes: OpenAI's Chat Completions, its Responses API,
#: Anthropic's Messages, and the plain (name, description, parameters).
FORMATS = ("openai", "openai-responses", "anthropic", "plain")


def schemas(format: str = "openai", *, names: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """The tools' schemas in a framework's shape (FORMATS): "openai" for
    Chat Completions' tools=, "openai-responses" for the Responses API,
    "anthropic" for Messages' tools=, "plain" for anything else.  names: only
    those tools (default: all)."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}: use one of {', '.join(FORMATS)}")
    out = []
    for t in (TOOLS if names is None else [tool(n) for n in names]):
        if format == "openai":
            out.append({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}})
        elif format == "openai-responses":
            out.append({"type": "function", "name": t.name, "description": t.description,
                        "parameters": t.parameters})
        elif format == "anthropic":
            out.append({"name": t.name, "description": t.description,
                        "input_schema": t.parameters})
        else:
            out.append({"name": t.name, "description": t.description,
                        "parameters": t.parameters})
    return out


def arguments(name: str, args: Any) -> dict[str, Any]:
    """A call's arguments (a dict, or the JSON text of one, as OpenAI sends
    them), checked against the tool's parameters: none it does not list,
    every one it requires (a null counts as omitted)."""
    t = tool(name)
    if isinstance(args, (str, bytes)):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise ValueError(f"{name}: the arguments are not valid JSON") from None
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise TypeError(f"{name}: the arguments must be a JSON object, got "
                        f"{type(args).__name__}")
    known = {p.name for p in t.params}
    extra = sorted(str(k) for k in args if k not in known)
    if extra:
        raise ValueError(f"{name} takes no argument {extra[0]!r}; it takes "
                         f"{', '.join(p.name for p in t.params)}")
    out = {k: v for k, v in args.items() if v is not None}
    missing = [p.name for p in t.params if p.required and p.name not in out]
    if missing:
        raise ValueError(f"{name} needs {' and '.join(missing)}"
                         + (": recall's reply gives the recall_id" if "recall_id" in missing
                            else ""))
    return out


def call(mem: Memory, name: str, args: Any = None, *,
         namespace: str = "default") -> dict[str, Any]:
    """Run the tool name with args (a dict or its JSON text) on mem, in
    namespace; returns the tool's reply as a JSON-ready dict.  Bad input
    raises ValueError/TypeError (HeapmemError for the store's own refusals)
    with one sentence, and nothing is written."""
    namespace = check_namespace(namespace)
    checked = arguments(name, args)
    return tool(name).run(mem, namespace, checked)


def call_json(mem: Memory, name: str, args: Any = None, *, namespace: str = "default") -> str:
    """call(), its reply as JSON text; bad input is the reply {"error": "..."}
    (what a model reads back as the tool's output, so that it can correct
    the call)."""
    try:
        return json.dumps(call(mem, name, args, namespace=namespace))
    except (ValueError, TypeError, HeapmemError) as e:
        return json.dumps({"error": " ".join(str(e).split())})
