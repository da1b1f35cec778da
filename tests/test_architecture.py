"""The package's shape: one owner per invariant, checked from the source.

- no heapmem module reaches a private name (_x) another module defines;
- no import cycle between heapmem's modules;
- SQL text lives in heapmem.sql (statements) and heapmem.schema (DDL) only,
  and meta keys are spelled only in heapmem.schema;
- every module opens with a docstring that says what it owns;
- the cffi declarations are the C header's, and the config fields too;
- no function in heapmem/ is longer than MAX_FUNCTION_LINES but the listed
  ones, each with its reason;
- in csrc/: each unit's functions carry its prefix (hm_ for pure code only),
  a function of more than four parameters names each one in a comment, every
  error function takes printf's arguments, and no SQLite message is matched.
"""
from __future__ import annotations

import ast
import glob
import os
import re
from dataclasses import fields

import pytest

import heapmem
from heapmem.config import ScoringConfig
from heapmem.db import native, schema

PKG = os.path.dirname(os.path.abspath(heapmem.__file__))
ROOT = os.path.dirname(PKG)


def _modules() -> dict[str, str]:
    """heapmem's modules, walked through its subpackages, by dotted name under
    heapmem ('store', 'db.schema'; a subpackage's __init__ is its own name,
    'db', and heapmem's own is '__init__'): their files."""
    out = {}
    for folder, dirs, files in os.walk(PKG):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        rel = os.path.relpath(folder, PKG).replace(os.sep, ".")
        pkg = "" if rel == "." else rel
        for f in files:
            if f.endswith(".py"):
                name = f[:-3]
                if name == "__init__" and pkg:
                    dotted = pkg
                else:
                    dotted = f"{pkg}.{name}" if pkg else name
                out[dotted] = os.path.join(folder, f)
    return dict(sorted(out.items()))


FILES = _modules()
MODULES = sorted(FILES)
#: a module's own last name (_version: a private module, fine to import)
LEAVES = {m.rsplit(".", 1)[-1] for m in MODULES}
#: the subpackages (their __init__ modules)
PACKAGES = {m for m in MODULES if FILES[m].endswith(os.sep + "__init__.py") and m != "__init__"}


def _tree(mod: str) -> ast.Module:
    with open(FILES[mod], encoding="utf-8") as f:
        return ast.parse(f.read())


def _where(mod: str) -> str:
    return os.path.relpath(FILES[mod], ROOT)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_here(tree: ast.Module) -> set[str]:
    """Private names a module defines: functions, classes, assignments and
    attributes it sets (self._x = ..., object.__setattr__(self, "_x", ...))."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "__setattr__":
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                out.add(str(node.args[1].value))
        elif isinstance(node, ast.alias) and node.asname:
            out.add(node.asname)
    return {n for n in out if _private(n)}


def _reached(tree: ast.Module) -> list[tuple[int, str]]:
    """Private names a module uses: x._name, getattr(x, "_name"), and
    `from .mod import _name` (a private module itself, like _version, is fine)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                "getattr", "hasattr", "setattr") and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
                and _private(node.args[1].value):
            out.append((node.lineno, node.args[1].value))
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                "heapmem")):
            for a in node.names:
                if _private(a.name) and a.name not in LEAVES:  # a module: _version
                    out.append((node.lineno, a.name))
    return out


def test_no_module_reaches_another_modules_private_names():
    bad = []
    for mod in MODULES:
        tree = _tree(mod)
        own = _defined_here(tree)
        for line, name in _reached(tree):
            if name not in own:
                bad.append(f"{_where(mod)}:{line} uses {name}")
    assert bad == []


def _package_of(mod: str) -> str:
    """The package a module's relative imports start from ('' for heapmem)."""
    if mod in PACKAGES:
        return mod
    return mod.rpartition(".")[0] if "." in mod else ""


def _resolve(target: str) -> str | None:
    """A dotted name under heapmem, as the module it is (or lies in)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _imports(mod: str) -> set[str]:
    """The heapmem modules mod imports, anywhere but under TYPE_CHECKING,
    relative imports resolved through the subpackages."""
    tree = _tree(mod)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(mod).split(".") if _package_of(mod) else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                head = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "heapmem":
                head = (node.module or "").partition(".")[2]
            else:
                continue
            for a in node.names:  # a module of the package, or a name in one
                sub = f"{head}.{a.name}" if head else a.name
                found.add(sub if sub in MODULES else (head or "__init__"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("heapmem."):
                    found.add(a.name.partition(".")[2])
    out = {_resolve(m) for m in found}
    return {m for m in out if m and m != mod}


def test_no_import_cycles():
    graph = {m: _imports(m) for m in MODULES if m != "__init__"}
    # __init__ imports everything; nothing may import it back
    cycles = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt != "__init__":
                walk(nxt, path + [nxt])

    for m in graph:
        walk(m, [m])
    assert cycles == []
    assert not any("__init__" in deps for deps in graph.values())


def _layer(mod: str) -> str:
    head = mod.split(".")[0]
    return head if head in PACKAGES else "core"


#: Which layers each layer may import (issue 25): the file at the bottom,
#: then the core (Memory and its values), what feedback teaches, the doors.
#: db.connect alone reaches the server client from below, lazily, to choose a
#: store's connection at open.
LAYERS = {
    "db": {"db", "core"},
    "core": {"db", "core", "learning"},
    "learning": {"db", "core", "learning"},
    "io": {"db", "core", "learning", "io"},
    "remote": {"db", "core", "remote"},
    "adapters": {"db", "core", "learning", "io", "remote", "adapters"},
}
#: the modules of the core that db may import (errors, checks, config, version)
CORE_BELOW_DB = {"errors", "validate", "config", "_version"}


def test_each_layer_imports_only_the_layers_below_it():
    bad = []
    for mod in MODULES:
        if mod in ("__init__", "__main__"):
            continue
        for dep in sorted(_imports(mod)):
            here, there = _layer(mod), _layer(dep)
            if mod == "db.connect" and there == "remote":
                continue
            if there not in LAYERS[here] or (here == "db" and there == "core"
                                             and dep not in CORE_BELOW_DB):
                bad.append(f"{mod} ({here}) imports {dep} ({there})")
    assert bad == []
    # the core chooses its connection once, at open, and never asks the server client
    assert "remote" not in {_layer(d) for d in _imports("store")}
    assert "db.connect" in _imports("store")


_SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|WITH)\s+\S")


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    return out


def test_sql_lives_in_sql_and_schema_only():
    bad = []
    for mod in MODULES:
        if mod in ("db.sql", "db.schema"):
            continue
        tree = _tree(mod)
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs and _SQL.match(node.value) \
                    and not node.value.startswith(("SELECT count(*) FROM memories\"",)):
                bad.append(f"{_where(mod)}:{node.lineno}: {node.value[:60]!r}")
    # transactions are the open connection's own words (db.connect.Handle), not
    # statements of the schema
    bad = [b for b in bad if "heapmem/db/connect.py" not in b or not re.search(
        r"'(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)", b)]
    assert bad == []


def test_meta_keys_are_spelled_only_in_schema():
    # ('format' is also a field of an export's header line: too common a word to check)
    keys = set(schema.META_KEYS) - {schema.META_FORMAT}
    bad = []
    for mod in MODULES:
        if mod == "db.schema":
            continue
        for line, s in _strings(_tree(mod)):
            if s in keys:
                bad.append(f"{_where(mod)}:{line}: {s!r}")
    assert bad == []


def test_the_tuned_config_has_one_writer_the_c_core_s_tune_c():
    """meta 'tuned' (the saved config) is written by csrc/tune.c alone:
    heap_tune's deploy and heap_save_config, which set_config(save=True)
    and a restore call.  No Python module writes it, and no other C file."""
    bad = []
    for mod in MODULES:
        for node in ast.walk(_tree(mod)):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "meta_set"
                    and len(node.args) > 1 and "META_TUNED" in ast.dump(node.args[1])):
                bad.append(f"{_where(mod)}:{node.lineno}")
    for path in sorted(glob.glob(os.path.join(ROOT, "csrc", "*.c"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if re.search(r"INSERT[^;]*heapmem_meta[^;]*HM_META_TUNED", text) and \
                not path.endswith("tune.c"):
            bad.append(os.path.relpath(path, ROOT))
    assert bad == []


def test_every_module_says_what_it_owns():
    for mod in MODULES:
        if mod in ("__init__", "_version", "__main__") or mod in PACKAGES:
            continue  # (a subpackage's __init__ says what its modules are for)
        doc = ast.get_docstring(_tree(mod)) or ""
        assert "Owns:" in doc, f"{_where(mod)}'s docstring does not say what it owns"


# -- the C header and its two readers ---------------------------------------------

HEADER = os.path.join(ROOT, "csrc", "heapmem.h")
SOURCE = os.path.join(ROOT, "csrc", "heapmem.c")


def test_the_shipped_header_is_csrc_heapmem_h():
    if not os.path.exists(HEADER):
        pytest.skip("no source tree here (an installed heapmem)")
    with open(HEADER, encoding="utf-8") as a, open(native.HEADER_PATH, encoding="utf-8") as b:
        assert a.read() == b.read(), "heapmem/heapmem.h is stale: rebuild (pip install -e .)"


def test_cdef_declares_every_exported_c_function_and_the_library_has_them():
    if not os.path.exists(SOURCE):
        pytest.skip("no source tree here (an installed heapmem)")
    # heapmem.c and the units it includes (text.c, score.c, ...): one translation unit
    src = ""
    for path in sorted(glob.glob(os.path.join(ROOT, "csrc", "*.c"))):
        with open(path, encoding="utf-8") as f:
            src += f.read()
    defined = set(re.findall(r"^HM_API\s+[\w\s\*]+?\b(hm_\w+)\(", src, re.M))
    declared = set(re.findall(r"\b(hm_\w+)\(", native.CDEF))
    assert defined, "no HM_API definitions found in csrc/*.c"
    assert defined == declared
    for name in declared:
        assert getattr(native.lib, name) is not None
    # the C file declares no second copy of what the header holds
    assert "typedef struct {\n  double w_relevance" not in src
    assert "#define HM_MAX_FEATURES" not in src


def test_buffer_sizes_come_from_the_header():
    assert native.lib.HM_ACTIVE_LEN == 2 * native.lib.HM_MAX_FEATURES * (
        2 * native.lib.HM_MAX_WORD + 16)
    assert native.MAX_FEATURES == 2 * native.lib.HM_MAX_FEATURES
    assert native.lib.HM_SCORE_COLUMNS == 8 == len(native.SCORE_COLUMN_NAMES)
    # score_batch's named columns are the header's, in its order (the shipped copy)
    with open(native.HEADER_PATH, encoding="utf-8") as f:
        said = re.search(r"per candidate \(n x HM_SCORE_COLUMNS in all\): ([^.]*?), and lift",
                         " ".join(f.read().split()))
    assert said, "csrc/heapmem.h no longer lists hm_score_batch's columns"
    listed = [w.strip(" *") for w in said.group(1).split(",")] + ["lift"]
    assert tuple(listed) == native.SCORE_COLUMN_NAMES


def test_config_fields_are_the_headers():
    names = [f.name for f in native.CONFIG_FIELDS]
    assert names == ["w_relevance", "w_recency", "w_importance", "w_usefulness",
                     "half_life_days", "recency_floor", "superseded_factor", "prior_alpha",
                     "prior_beta", "model", "gate_z", "combine", "backoff", "max_lift",
                     "w_evidence", "candidates", "lexical_weight", "min_cosine", "w_context",
                     "context_min_sim", "context_z", "context_prior", "pooled_pseudocount",
                     "explore", "w_thread", "thread_turns", "w_time"]
    cfg = ScoringConfig()
    mine = {f.name for f in fields(ScoringConfig)}
    for f in native.CONFIG_FIELDS:
        assert f.name in mine
        assert float(getattr(cfg, f.name)) == f.default
        # the C struct's default agrees, and its field is where the header says
        c = native.ffi.new("hm_config *")
        native.lib.hm_config_default(c)
        assert getattr(c, f.name) == f.default
    # every C field reaches the C parser through to_sql(), in the header's order
    assert [kv.split("=")[0] for kv in cfg.to_sql().split()] == names


#: String constants that are a vocabulary word by chance, each with its reason.
VOCABULARY_WORDS_ALLOWED = {
    ("io.report", "base"): "the CSS class of the base-rate line, not the feature",
    ("tools", "why"): "a key of the feedback tool's JSON answer",
    ("adapters.llamaindex", "note"): "the kind this door gives a user's message it keeps (a "
                                     "field the caller sets)",
    ("adapters.llamaindex", "user"): "the source this door records for the user's own "
                                     "words, as LlamaIndex's role names them",
}
_OPS = {ast.LShift: lambda a, b: a << b, ast.Mult: lambda a, b: a * b,
        ast.Pow: lambda a, b: a ** b}


def _constant(node: ast.AST) -> object:
    """node's value when it is a constant or arithmetic on constants (1 << 20)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _constant(node.left), _constant(node.right)
        if isinstance(a, int) and isinstance(b, int):
            return _OPS[type(node.op)](a, b)
    return None


def test_the_vocabulary_is_spelled_only_in_the_header():
    """issue 33: the limits, the kinds, the question types and the feature
    grammar are csrc/heapmem.h's tables; Python reads them through
    native.VOCABULARY and spells none of them: no string constant is a kind, a
    question type, a source role or a feature; no name of a limit is assigned
    a number; and the distinctive limits (the text and metadata size, the
    latest time) appear in no constant."""
    from heapmem.io import transfer
    v = native.VOCABULARY
    words = (set(v.kinds) | set(v.qtypes) | set(v.source_roles) | set(transfer.FEATURES)
             | {v.default_kind, v.ctx_feature, v.base_feature, v.relate_slot})
    numbers = {v.limits[n] for n in ("MAX_TEXT_BYTES", "MAX_METADATA_BYTES", "MAX_TIME")}
    found = []
    for mod in MODULES:
        if mod == "db.native":
            continue
        for node in ast.walk(_tree(mod)):
            value = _constant(node)
            if isinstance(value, str) and value in words \
                    and (mod, value) not in VOCABULARY_WORDS_ALLOWED:
                found.append(f"{_where(mod)}:{node.lineno} spells {value!r}")
            elif isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and value in numbers and isinstance(node, (ast.Constant, ast.BinOp)):
                found.append(f"{_where(mod)}:{node.lineno} spells the limit {value!r}")
            if isinstance(node, ast.Assign) and _constant(node.value) is not None:
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id in v.limits:
                        found.append(f"{_where(mod)}:{node.lineno} sets {t.id} itself")
    assert not found, ("read these from heapmem.h through native.VOCABULARY: "
                       + "; ".join(found))
    # and what Python reads is what C makes
    assert transfer.QTYPES == v.qtypes and set(v.qtypes) >= {native.qtype("When?")}
    assert native.features("Paid $5 on 3/14", "fact", "Ana").split()[0] == "kind:fact"


def test_a_bad_config_value_gets_the_headers_message():
    for f in native.CONFIG_FIELDS:
        with pytest.raises(ValueError) as e:
            native.config(f"{f.name}=nan")
        assert f.message in str(e.value)


#: issue 25: no function in heapmem/ over this many lines, or a one-line reason for it
MAX_FUNCTION_LINES = 80
#: The functions over it (module.qualified name), each with its reason (none today)
LONG_FUNCTIONS: dict[str, str] = {}


def _function_lines() -> dict[str, int]:
    """Every function and method in heapmem/, by module.qualified name: its
    lines, from def (decorators left out) to its last line."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + ch.name] = ch.end_lineno - ch.lineno + 1
                walk(ch, prefix + ch.name + ".")
            elif isinstance(ch, ast.ClassDef):
                walk(ch, prefix + ch.name + ".")

    for mod in MODULES:
        walk(_tree(mod), mod + ".")
    return out


def test_long_functions_are_the_listed_ones():
    long = {name: n for name, n in _function_lines().items() if n > MAX_FUNCTION_LINES}
    new = {name: n for name, n in long.items() if name not in LONG_FUNCTIONS}
    assert not new, (f"functions over {MAX_FUNCTION_LINES} lines: {new}; split them, or list "
                     "each in LONG_FUNCTIONS with its reason")
    gone = sorted(set(LONG_FUNCTIONS) - set(long))
    assert not gone, f"no longer over {MAX_FUNCTION_LINES} lines: take {gone} off LONG_FUNCTIONS"


#: issue 25: no function in csrc/ over this many lines
MAX_C_FUNCTION_LINES = 120
#: The C functions over it, each with its reason (none today)
LONG_C_FUNCTIONS: dict[str, str] = {}


def _c_function_lines() -> dict[str, int]:
    """Every function defined in csrc/*.c, by file:name: its lines, from the
    line that names it to its closing brace (a brace in column 0, as
    clang-format leaves every function's)."""
    out = {}
    head = re.compile(r"^(?:static\s+|HM_API\s+)?[A-Za-z_][\w\s\*]*?\b(\w+)\(")
    for path in sorted(glob.glob(os.path.join(ROOT, "csrc", "*.c"))):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        start = name = None
        for i, line in enumerate(lines):
            m = head.match(line)
            if start is None and m and not line.startswith(("#", "typedef", "return")) \
                    and not line.rstrip().endswith(";"):
                j = i  # a definition: its body opens on this line or the next ones
                while j < len(lines) and "{" not in lines[j] and ";" not in lines[j]:
                    j += 1
                if j < len(lines) and lines[j].rstrip().endswith("{"):
                    start, name = i, m.group(1)
            elif start is not None and line.startswith("}"):
                out[f"{os.path.basename(path)}:{name}"] = i - start + 1
                start = None
    return out


def test_long_c_functions_are_the_listed_ones():
    if not os.path.exists(SOURCE):
        pytest.skip("no source tree here (an installed heapmem)")
    found = _c_function_lines()
    assert "recall.c:hr_filter" in found and "score.c:hm_explain" in found  # it reads them
    long = {n: k for n, k in found.items() if k > MAX_C_FUNCTION_LINES}
    assert set(long) == set(LONG_C_FUNCTIONS), (
        f"C functions over {MAX_C_FUNCTION_LINES} lines: {long}; split them, or list each in "
        "LONG_C_FUNCTIONS with its reason")


def _class(mod: str, name: str) -> ast.ClassDef:
    return next(n for n in _tree(mod).body if isinstance(n, ast.ClassDef) and n.name == name)


def _decorated(cls: ast.ClassDef, decorator: str) -> set[str]:
    return {f.name for f in cls.body if isinstance(f, ast.FunctionDef)
            and any(ast.unparse(d) == decorator for d in f.decorator_list)}


#: What a Memory holds besides its verbs (issue 37): attribute -> (module, class),
#: and the verbs of each that carry the error net
HELD = {"log": ("log", "Log", {"get", "judged", "events"}),
        "pool": ("learning.pool", "Pool", {"set"}),
        "priors": ("learning.priors", "Priors", {"list", "remove"}),
        "vectors": ("vectors", "Vectors", {"index", "settings", "embedder_name"}),
        "auto_tune": ("learning.tune", "AutoTune", {"pending", "finish"})}


def test_memorys_verbs_show_their_error_contract_where_they_are_defined():
    """issue 25: the error net (guarded: SQLite's failures as HeapmemError) is
    a decorator on each verb's def, not attached from afar by setattr; issue
    37: so it is on the verbs of the objects a Memory holds (mem.log, ...),
    whose error sentences name them as the caller reaches them ("log.get: ...")."""
    tree = _tree("store")
    cls = _class("store", "Memory")
    assert {"add", "recall", "feedback", "forget", "stats", "close", "count"} <= _decorated(
        cls, "guarded")
    assert not any(isinstance(n, ast.For) for n in tree.body), "no setattr loops over Memory"
    held = {n.target.id: ast.unparse(n.annotation) for n in cls.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert held == {attr: name for attr, (_, name, _) in HELD.items()}
    for attr, (mod, name, verbs) in HELD.items():
        c = _class(mod, name)
        assert verbs <= _decorated(c, "guarded"), name
        door = [ast.literal_eval(n.value) for n in c.body if isinstance(n, ast.Assign)
                and [ast.unparse(t) for t in n.targets] == ["_door"]]
        assert door == [attr + "."], name


def test_a_held_objects_error_names_the_verb_as_the_caller_reaches_it(tmp_path, monkeypatch):
    """issue 37: a failure from SQLite inside mem.log.events() says "log.events: ..."."""
    import apsw

    from heapmem.db import sql
    with heapmem.open(str(tmp_path / "a.db"), embedder=None) as m:
        monkeypatch.setattr(sql, "EVENTS", "SELECT * FROM no_such_table")
        with pytest.raises(heapmem.HeapmemError, match=r"^log\.events: SQLite failed") as e:
            m.log.events()
        assert isinstance(e.value.__cause__, apsw.SQLError)


#: issue 37: Memory holds its verbs; what is about the store rather than its
#: memories lives in the objects it holds (HELD)
MAX_MEMORY_LINES = 600
#: Memory's public members: the verbs a user reaches for, the facts about the
#: store (count, namespaces, schema_version), its connection and transactions
#: for code that writes what the verbs do not (heapmem.io.transfer), and the
#: file's format (set_portable: the CLI's `portable` verb is a thin call of it)
MEMORY_MEMBERS = {
    "add", "add_many", "get", "update", "list", "forget", "recall", "recall_sql", "feedback",
    "mark_used", "mark_ignored", "links", "tune", "set_config", "stats", "check", "count",
    "namespaces", "schema_version", "now", "close", "connection", "transaction", "snapshot",
    "set_portable"}


def test_memory_is_about_memories():
    cls = _class("store", "Memory")
    lines = cls.end_lineno - cls.lineno + 1
    assert lines < MAX_MEMORY_LINES, (
        f"class Memory is {lines} lines (under {MAX_MEMORY_LINES}, issue 37): move what is "
        "not a verb into an object it holds (mem.log, mem.pool, ...) or a module")
    public = {n for n in vars(heapmem.Memory) if not n.startswith("_")}
    assert public == MEMORY_MEMBERS


def test_rows_are_read_by_the_names_their_statements_give(tmp_path):
    """issue 25: recall's and get's rows are read by column name (sql.RECALL_COLUMNS,
    sql.ITEM_COLUMNS), and those names are the statements' own columns, so a
    column added or moved in the SQL cannot shift another's meaning unseen."""
    from heapmem.db import sql
    with heapmem.open(str(tmp_path / "a.db"), clock=lambda: 1.7e9) as m:
        m.add("Booked the flight to Lisbon", id="b")
        cur = m.connection.cursor()
        cur.execute(sql.RECALL, {"question": "flight", "namespace": "default", "k": 1,
                                 "now": 1.7e9, "config": m.config.to_sql(), "qvec": None,
                                 "tracked": 0, "kinds": None, "since": None, "until": None})
        assert tuple(d[0] for d in cur.getdescription()) == sql.RECALL_COLUMNS
        cur.fetchall()
        cur.execute(sql.GET_MEMORY, {"id": "b"})
        assert tuple(d[0] for d in cur.getdescription()) == sql.ITEM_COLUMNS
        cur.fetchall()
        assert [f.name for f in fields(heapmem.Item)] == list(sql.ITEM_COLUMNS)
        r = m.recall("flight")
        cur.execute(sql.GET_RECALL, {"id": r.recall_id})
        assert tuple(d[0] for d in cur.getdescription()) == sql.LOGGED_RECALL_COLUMNS
        cur.fetchall()
        assert [f.name for f in fields(heapmem.LoggedRecall)] == list(sql.LOGGED_RECALL_COLUMNS)


def test_one_name_one_meaning_in_the_values_verbs_return():
    """issue 25: "features" is a memory's features (a tuple) and "links" the
    learned LinkRows; the counts have names of their own (links_updated,
    pooled_features, link_rows), and the old names are gone (issue 37)."""
    from heapmem import results
    for cls in (results.Feedback, results.Stats, results.CheckReport):
        names = {f.name: f.type for f in fields(cls)}
        assert "features" not in names and "links" not in names, cls
    assert fields(results.Item)[10].name == "features" and fields(results.Item)[10].type in (
        "tuple[str, ...]", tuple[str, ...])
    # and no old name kept as an alias: an unreleased package has no one to keep it for
    for cls in (results.Feedback, results.Stats, results.CheckReport):
        assert not hasattr(cls, "features") and not hasattr(cls, "links"), cls


def test_a_bug_surfaces_as_itself_not_as_damage(tmp_path, monkeypatch):
    """issue 25: the error net turns SQLite's failures into HeapmemErrors, and
    values decoded from the file into CorruptStoreError only where they are
    decoded (_from_file); an IndexError anywhere else is heapmem's bug and
    reaches the caller as one."""
    from heapmem import store as store_module

    def broken(*args, **kwargs):
        raise IndexError("a bug")

    with heapmem.open(str(tmp_path / "a.db"), clock=lambda: 1.7e9) as m:
        m.add("Booked the flight to Lisbon")
        monkeypatch.setattr(store_module, "log_params", broken)
        with pytest.raises(IndexError, match="a bug"):
            m.recall("flight")


@pytest.mark.parametrize("old", ["heapmem.cli", "heapmem.schema", "heapmem.sql", "heapmem._native",
                                 "heapmem.db._native", "heapmem.langgraph_store",
                                 "heapmem.transfer", "heapmem.hrana"])
def test_a_module_has_one_path(old):
    """issue 37: no import hook serves the paths before the subpackages (issue 25)
    in an unreleased package: each module is imported by its one path (the
    library's door is heapmem.db.native, public within db: config, embedders,
    results and the store import it)."""
    import importlib
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def _c_function_bodies():
    """(unit, name, body) of every function csrc/*.c defines (the body
    found by matching braces after the signature)."""
    import re
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "csrc", "*.c"))):
        src = open(path, encoding="utf-8").read()
        for m in re.finditer(r"^[A-Za-z_][\w \*]*?\b(h[a-z]?_\w+|heap_\w+)\s*\([^;{]*\)\s*\{",
                             src, re.M):
            depth, i = 1, m.end()
            while depth and i < len(src):
                depth += {"{": 1, "}": -1}.get(src[i], 0)
                i += 1
            out.append((os.path.basename(path), m.group(1), src[m.end():i]))
    return out


def test_hm_names_pure_code():
    """issue 37: hm_ is the prefix of pure code, callable from Python without
    a database: no hm_ function's body calls SQLite (sqlite3_*); the others
    carry their unit's prefix (csrc/heapmem.c lists them)."""
    import re
    bodies = _c_function_bodies()
    assert len([b for b in bodies if b[1].startswith("hm_")]) > 100, "the scan found too little"
    calls = sorted(f"{unit}: {name}" for unit, name, body in bodies
                   if name.startswith("hm_") and re.search(r"\bsqlite3_\w+\s*\(", body))
    assert not calls, calls


#: Parameters whose meaning one convention gives for every C function, so a
#: comment need not say it again: (a word of the type, the name) -> meaning
C_PARAM_CONVENTIONS = {
    ("hc_ctx", "x"): "the call's context (call.c)",
    ("hr_lex", "x"): "recall's lexical search under way",
    ("hr_vtab", "t"): "heap_recall's table, whose call this is",
    ("hr_cursor", "c"): "the recall's cursor",
    ("hm_config", "c"): "the config in force",
    ("sqlite3", "db"): "the connection",
    ("sqlite3_context", "ctx"): "the SQL function's context",
    ("int", "argc"): "the SQL function's argument count",
    ("sqlite3_value", "argv"): "the SQL function's arguments",
    ("char", "err"): "the error buffer the sentence goes into",
    ("int", "errlen"): "its size",
}
#: Signatures SQLite gives (an xConnect, an xFilter, an FTS5 token callback or
#: auxiliary function): their parameters mean what SQLite's documents say
C_CALLBACK_PARAMS = [
    ["db", "aux", "argc", "argv", "out", "err"],
    ["cur", "idxNum", "idxStr", "argc", "argv"],
    ["p", "flags", "t", "n", "start", "end"],
    ["ctx", "flags", "t", "n", "start", "end"],
    ["api", "fts", "ctx", "nval", "val"],
]


def _c_parameters():
    """(unit, name, [(type, name, has its own comment)], the comment above)
    of every function csrc/*.c defines."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "csrc", "*.c"))):
        src = open(path, encoding="utf-8").read()
        for m in re.finditer(r"^(?:static |HM_API )[\w \*]*?\b(\w+)\("
                             r"((?:[^;{)]|/\*.*?\*/|\([^)]*\))*)\)\s*\{", src, re.M | re.S):
            params = []
            for part in re.split(r",(?![^(]*\))", m.group(2)):
                said = "/*" in part
                part = re.sub(r"/\*.*?\*/", " ", part, flags=re.S).strip()
                if not part or part in ("void", "..."):
                    continue
                name = re.search(r"\(\s*\*\s*(\w+)\s*\)|(\w+)\s*(?:\[[^\]]*\])*\s*$", part)
                params.append((part, name.group(1) or name.group(2), said))
            above = src[:m.start()].rstrip()
            comment = above[above.rindex("/*"):] if above.endswith("*/") else ""
            out.append((os.path.basename(path), m.group(1), params, comment))
    return out


def test_c_functions_of_more_than_four_parameters_say_what_each_is():
    """issue 37: fts5_aux.c says what each parameter of a long signature is; a
    C function of more than four parameters names every one of them in the
    comment above it (or in a comment beside it in the signature), but those a
    convention gives (C_PARAM_CONVENTIONS) and those of SQLite's callbacks."""
    if not os.path.exists(SOURCE):
        pytest.skip("no source tree here (an installed heapmem)")
    found = _c_parameters()
    assert len(found) > 500 and any(n == "hm_score_batch" for _, n, _, _ in found)
    unsaid = []
    for unit, name, params, comment in found:
        if len(params) <= 4 or [p[1] for p in params] in C_CALLBACK_PARAMS:
            continue
        for decl, pname, said in params:
            conventional = any(pname == n and re.search(rf"\b{t}\b", decl)
                               for t, n in C_PARAM_CONVENTIONS)
            if not (said or conventional or re.search(rf"\b{re.escape(pname)}\b", comment)):
                unsaid.append(f"{unit}: {name}({pname})")
    assert not unsaid, f"parameters no comment names: {unsaid}"


#: Each unit's prefix (csrc/heapmem.c lists them); hm_ (pure code), heap_ (an
#: SQL function) and the entry point may stand in any unit
UNIT_PREFIXES = {
    "attribute.c": ("ha_",), "bm25.c": ("hb_",), "call.c": ("hc_",), "embed.c": ("he_", "hv_"),
    "feedback.c": ("hf_",), "register.c": ("hg_",), "pool.c": ("hp_",), "sqlfuncs.c": ("hq_",),
    "recall.c": ("hr_",), "place.c": ("hr_",), "store.c": ("hs_",), "tune.c": ("ht_",),
    "when.c": ("hw_",), "vindex.c": ("hx_",),
}


def test_each_c_unit_s_functions_carry_its_prefix():
    """issue 37: a prefix names a unit (sqlite-vec's vec0_, vec_npy_): hc_ is the
    call runtime's (call.c), hf_ feedback.c's own, and so on."""
    if not os.path.exists(SOURCE):
        pytest.skip("no source tree here (an installed heapmem)")
    found = _c_parameters()
    assert any(u == "call.c" and n == "hc_fail" for u, n, _, _ in found)
    strays = sorted(f"{unit}: {name}" for unit, name, _, _ in found
                    if not (name.startswith(("hm_", "heap_")) or name == "sqlite3_heapmem_init"
                            or name.startswith(UNIT_PREFIXES.get(unit, ()))))
    assert not strays, f"functions without their unit's prefix: {strays}"


def test_damage_is_told_by_result_codes_not_by_matching_error_text():
    """issue 37: fts5 recognises damage by result codes, never by the words of
    an error: no strstr (or strcmp, strncmp) on SQLite's message in csrc/, read
    directly or through a name it was given."""
    if not os.path.exists(SOURCE):
        pytest.skip("no source tree here (an installed heapmem)")
    bodies = _c_function_bodies()
    assert any(name == "hc_sqlfail" for _, name, _ in bodies)
    matched = []
    for unit, name, body in bodies:
        msgs = set(re.findall(r"(\w+)\s*=\s*(?:\([^)]*\)\s*)?sqlite3_err(?:msg|str)\s*\(", body))
        for call in re.finditer(r"\b(?:strstr|strcmp|strncmp|strcasestr)\s*\(([^,]*),([^,)]*)",
                                body):
            args = call.group(1) + "," + call.group(2)
            if "sqlite3_err" in args or any(re.search(rf"\b{m}\b", args) for m in msgs):
                matched.append(f"{unit}: {name}")
    assert not matched, f"SQLite's error text matched in {matched}"


def test_every_c_error_function_takes_printfs_arguments():
    """issue 37: one printf-style error per kind (hc_fail for a call, hm_errf
    for the pure code): no C function takes a format with a single argument
    for it (hr_fail(t, "...%s", ""), hm_seterr(err, errlen, fmt, a))."""
    if not os.path.exists(SOURCE):
        pytest.skip("no source tree here (an installed heapmem)")
    found = _c_parameters()
    formats = {name: [p[1] for p in params] for _, name, params, _ in found
               if any(p[1] in ("fmt", "format") and "char" in p[0] for p in params)}
    assert "hc_fail" in formats and "hm_errf" in formats
    src = "\n".join(open(p, encoding="utf-8").read()
                    for p in glob.glob(os.path.join(ROOT, "csrc", "*.c")))
    single = sorted(n for n in formats
                    if not re.search(rf"\b{n}\([^;{{]*\.\.\.\s*\)", src))
    assert not single, f"error functions with a format but not printf's arguments: {single}"
    assert not re.search(r'\b\w*(?:fail|err)\w*\([^;]*%s",\s*""\)', src), \
        "an error's %s filled with an empty string"
