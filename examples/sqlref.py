"""docs/sql.md's reference of every heap_* function and heap_recall column,
generated from the C core itself: the functions, their numbers of arguments
and kinds (scalar or aggregate; reading, or writing the store) from the
registration table in csrc/register.c, the columns from heap_recall's
declaration in csrc/recall.c.  The words about each come from WORDS below,
and reference() refuses to write a reference that does not match the C: a
function registered without words here, words for one not registered, or
more arguments registered than named here.  examples/docs.py puts the
reference in docs/sql.md (python examples/docs.py docs/sql.md).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: name -> (its arguments in order, what it does).  Optional arguments are
#: those past the fewest the C registers.
WORDS: dict[str, tuple[list[str], str]] = {
    "heap_init": (["embed"], "Make an empty database a store (embed 1, the default: hybrid, "
                  "vectors from the library's own model; 0: lexical). On a store of this schema "
                  "it says so and changes nothing."),
    "heap_add": (["text", "namespace", "kind", "source", "id", "created_at", "importance", "key",
                  "metadata", "copy", "thread", "turn"], "Add one memory; returns its id. The "
                 "same text, namespace and key again returns that memory, nothing written (copy "
                 "1: a second one). thread: the conversation it is a turn of; turn: its place "
                 "there (default: the thread's next)."),
    "heap_time_window": (["question", "now"], "The window of time a question names ('last "
                         "week', 'in May 2023', as of now, unix seconds) as JSON, or NULL."),
    "heap_add_many": (["items", "copy"], "Add a JSON array of memories, each an object with "
                      "heap_add's arguments as fields (or an array of them in heap_add's order), "
                      "as heap_add adds each, in one savepoint, the FTS index taken once at the "
                      "end; returns their ids, a JSON array."),
    "heap_forget": (["ids_json"], "Erase the memories of a JSON array of ids (text, index, log); "
                    "returns how many."),
    "heap_forget_namespace": (["namespace"], "Erase every memory of a namespace; returns how "
                              "many."),
    "heap_feedback": (["recall_id", "used", "ignored", "now", "namespace", "config", "tune"],
                      "Judge a logged recall's memories: used and ignored are JSON arrays of "
                      "ids (ignored NULL: every other memory shown; '[]': the rest unjudged). "
                      "Returns what it did as JSON (auto_tune: the report of the tune this "
                      "call's step ended; claimed: the point of auto-tune's schedule it "
                      "claimed); tune 1, the default, claims the points 30, 60, 120, ... and "
                      "runs each point's tune in steps, one after each feedback; tune 0 keeps "
                      "auto-tune's count but never tunes."),
    "heap_answer": (["recall_id", "answer", "now", "namespace", "config", "tune"],
                    "Judge a logged recall from the answer's text: which shown memories carry "
                    "its evidence. Returns JSON with each memory's attribution, by name "
                    "(verdict, share, question_share, matched, dated, present, candidate)."),
    "heap_tune": (["options"], "Replay the judged recalls under other usefulness weights and "
                  "deploy a better one if it is significantly better; options a JSON object "
                  "('{\"deploy\": false, \"seed\": 1}'; '{\"auto\": true, \"deploy\": false}' "
                  "says what auto-tune would decide now; '{\"pending\": true}' ends the "
                  "auto-tune under way in steps and returns what it did, {point, judged, "
                  "report}, or null when none is); returns the report as JSON. What "
                  "mem.tune() runs."),
    "heap_save_config": (["config"], "Save a config (JSON) as the store's weights, used by "
                         "heap_recall and every open without a config (what mem.set_config(..., "
                         "save=True) runs)."),
    "heap_rebuild_pool": (["features"], "Work the pooled layer's rows out afresh (a JSON array "
                          "of features; all when absent), the pending changes folded first."),
    "heap_fold_pool": ([], "Fold the pooled layer's pending changes (pool_pending: feedback "
                       "folds them eight at a time) into its rows in the links table now, for "
                       "a reader of that table itself; returns how many there were."),
    "heap_pool_now": ([], "The pooled rows that pending changes touch, as every reader sees "
                      "them (the stored row with the changes applied), as JSON {feature: "
                      "[alpha, beta, n, support, low_rate, high_rate]}."),
    "heap_vector_settings": (["settings"], "The vector index's settings for big namespaces "
                             "(threshold, size, probe, seed) as JSON; with settings (a JSON "
                             "object), change those fields and return the whole."),
    "heap_vector_index": (["namespace"], "Build one namespace's vector index now (with no "
                          "argument: every namespace that is due one); returns what it built."),
    "heap_vector_maintain": (["namespace", "seq"], "What a batch of adds from seq on owes the "
                             "namespace's vector index: its first build, or a split of the "
                             "partitions it grew (add_many runs it)."),
    "heap_vector_part": (["namespace", "digest", "vector"], "The partition of the namespace's "
                         "index a vector belongs to (the triggers that keep the index call it)."),
    "heap_vector_top": (["question", "namespace", "n", "probe"], "The vector stage of recall "
                        "alone: the n memories nearest the question, as JSON (probe 1: the "
                        "exact scan)."),
    "heap_statement": (["name"], "The text of a statement heap_recall, heap_feedback or "
                       "heap_tune runs (candidates, hybrid, links, show, log, edges, before, "
                       "...), for EXPLAIN QUERY PLAN."),
    "heap_version": ([], "The library's version."),
    "heap_qtype": (["question"], "The question's type (when, who, howmany, ...)."),
    "heap_features": (["text", "kind", "source"], "A memory's shape features, as add computes "
                      "them."),
    "heap_match": (["question", "namespace"], "A safe FTS5 query for the question: its terms "
                   "quoted and OR-joined, stop words dropped (inside the namespace's tag)."),
    "heap_ns_tag": (["namespace"], "The namespace's token in the FTS index."),
    "heap_active": (["features", "qtype"], "The features a memory brings to a question of this "
                    "type, plain and crossed."),
    "heap_relate": (["question", "source"], "How a memory's source relates to the question "
                    "(srcq:0/1)."),
    "heap_cosine": (["a", "b"], "The cosine of two vectors (blobs)."),
    "heap_embed": (["text", "format"], "The text's vector from the library's own model "
                   "(potion-base-8M)."),
    "heap_tokens": (["text"], "The WordPiece tokens heap_embed read."),
    "heap_text_hash": (["text"], "The hash add uses to find a memory of the same text."),
    "heap_embedder": ([], "The name of the library's own embedder."),
    "heap_recency": (["age_days", "half_life", "floor"], "floor + (1 - floor) x "
                     "0.5^(age / half_life)."),
    "heap_score": (["relevance", "age_days", "importance", "superseded", "features", "qtype",
                    "links", "config"], "A memory's score from its inputs (what heap_recall "
                   "ranks by)."),
    "heap_explain": (["relevance", "age_days", "importance", "superseded", "features", "qtype",
                      "links", "config"], "heap_score's one line of explanation."),
    "heap_links": (["feature", "own_alpha", "own_beta", "pooled_alpha", "pooled_beta",
                    "pseudocount"], "The learned links as one blob (for heap_score)."),
    "heap_credit": (["features", "qtype", "age_days", "used", "links", "config"],
                    "What one judged memory teaches each feature: [[feature, d_alpha, d_beta], "
                    "...]."),
    "heap_fold": (["features", "qtype", "age_days", "used", "links", "config"],
                  "(aggregate) heap_credit's deltas summed per feature over many judged "
                  "memories."),
    "heap_bm25_top": (["rowid", "row", "docs", "tokens", "n", "fts_table"], "The best n "
                      "matches as JSON [[rowid, bm25], ...], by the namespace's own BM25 "
                      "(exact row lengths read only where a row can still reach the top)."),
    "heap_bm25_row": (["memories_fts", "weights"], "(FTS5 auxiliary function) one matching "
                      "row's term frequencies, for heap_bm25_top."),
    "heap_ntokens": (["text"], "FTS5's token count of the text."),
    "heap_bm25_tail": (["memories_fts", "n", "weights"], "(FTS5 auxiliary function) "
                       "heap_bm25_row's term frequencies for the query's last n phrases only "
                       "(the pruned search's rounds: a threshold's formula, then the "
                       "question's words)."),
    "heap_bm25_search": (["question", "namespace", "n", "small", "cache"], "The namespace's "
                         "exact BM25 top n as recall takes its lexical candidates, as JSON "
                         "[[seq, bm25], ...]: pruned by each word's bound in bm25_terms, not "
                         "every matching row scored (small: postings at or below which the "
                         "whole match set is read; 2048. cache: postings from which the "
                         "connection's posting cache answers, once three searches in a row "
                         "found the index unchanged; 2048; 0: wherever it can, at once)."),
    "heap_terms": (["text"], "(table-valued) each FTS5 term of the text and how often it "
                   "occurs (term, tf): what bm25_terms is kept from."),
    "heap_bm25_terms": (["first", "last"], "(table-valued) bm25_terms' rows for the memories "
                        "of seq first to last, summed (namespace, term, docs, maxtf, minlen): "
                        "what add_many and an upgrade add in one statement."),
    "heap_attribute": (["answer", "question", "position", "text", "created_at"], "Which of a "
                       "recall's shown memories an answer used: one object per position "
                       "(verdict, share, question_share, matched, dated, present, candidate)."),
}

#: heap_recall's columns -> what each holds (the hidden ones are its arguments)
COLUMNS: dict[str, str] = {
    "rank": "1 for the best", "id": "the memory's id", "text": "its text",
    "score": "the product of the factors", "kind": "its kind", "source": "who said it",
    "key": "its key (a newer memory with the same key supersedes it)",
    "relevance": "BM25 (and, hybrid, the cosine) as a share of the best candidate's",
    "recency": "the decay since last used or made (w_recency)",
    "importance": "given, or the kind's", "usefulness": "the learned lift over the base rate, "
    "before its weight and bound", "rules": "x superseded_factor when superseded, else 1",
    "bm25": "its namespace-local BM25", "age_days": "days since it was made",
    "superseded": "1 when a newer memory has its key", "features": "its shape features",
    "created_at": "unix seconds", "last_used_at": "when feedback last used it",
    "metadata": "its metadata (JSON)", "lexical": "hybrid: the BM25 part of relevance",
    "cosine": "hybrid: the cosine part of relevance", "explain": "the one-line reason",
    "recall_id": "set when the recall is logged", "qtype": "the question's type",
    "rest": "the score without usefulness (what tune() replays)",
    "links": "the link set it was scored with (a blob)",
    "context": "contextual utility's factor (1: none)",
    "context_n": "the weighted similar judgements behind it",
    "explore": "exploration's factor (1: none)",
    "lift": "every learned factor together (usefulness's lift x context x explore), within "
    "max_lift",
    "thread": "the conversation it is a turn of", "turn": "its place in its thread",
    "thread_lift": "the thread factor: a neighbour's match (1: none)",
    "thread_from": "the neighbour that lifted it", "thread_offset": "how many turns away "
    "(negative: before)", "time_lift": "the time factor: made in the window the question "
    "names (1: none)", "time_window": "that window (JSON), when the question names one",
    "query": "the question", "namespace": "default 'default'; each row's namespace",
    "k": "how many (5)",
    "now": "unix seconds (default: the current time)", "config": "a config (JSON; default: "
    "the store's tuned weights)", "track": "log the recall (1 on a writable connection)",
    "qvec": "the question's vector, for a store of another embedder",
    "tracked": "a caller logs it itself (explores as a tracked recall)",
    "kinds": "a kind, or a JSON array of kinds", "since": "created at or after (unix seconds)",
    "until": "created before (unix seconds)",
    "namespaces": "a JSON array of namespaces, instead of namespace: one ranking across them, "
    "BM25 over the best BM25 among them; tracked, each namespace's rows are logged as its "
    "own recall",
}


def registered() -> dict[str, tuple[str, list[int], str]]:
    """The registration table of csrc/register.c: name -> (scalar or
    aggregate, the numbers of arguments it takes, "reads" or "writes"), the
    FTS5 auxiliary functions and the table-valued functions."""
    src = (ROOT / "csrc" / "register.c").read_text()
    table = src[src.index("hm_functions[] = {"):]
    out: dict[str, tuple[str, list[int], str]] = {}
    for kind, name, n, flags in re.findall(
            r'HM_(SCALAR|AGGREGATE)\("(heap_\w+)", (\d+), (\w+)', table):
        k, ns, w = out.get(name, (kind.lower(), [], "reads"))
        out[name] = (k, ns + [int(n)], "writes" if flags == "HM_WRITE" else w)
    for name in re.findall(r'xCreateFunction\([^,]+, "(heap_\w+)"', src):
        out[name] = ("FTS5 auxiliary", [], "reads")
    # the table-valued functions beside heap_recall (its own section below):
    # their arguments are their hidden columns, all required
    for name in re.findall(r'sqlite3_create_module_v2\(db, "(heap_\w+)"', src):
        if name != "heap_recall":
            out[name] = ("table-valued", [len(WORDS.get(name, ([], ""))[0])], "reads")
    # the two registered beside FTS5's tokenizers (hg_register_fts5)
    for name, n in re.findall(r'hg_create_function\(db, slot, "(heap_\w+)", (\d+),', src):
        out[name] = ("aggregate" if "_step" in src[src.index(f'"{name}"'):][:300]
                     else "scalar", [int(n)], "reads")
    return out


def columns() -> list[tuple[str, bool]]:
    """heap_recall's columns as csrc/recall.c declares them: (name, hidden)."""
    src = (ROOT / "csrc" / "recall.c").read_text()
    start = src.rindex('"', 0, src.index("CREATE TABLE x("))
    decl = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', src[start:src.index(";", start)]))
    decl = decl.replace('\\"', '"')
    body = decl[decl.index("(") + 1:decl.rindex(")")]
    out = []
    for col in body.split(","):
        name, _, typ = col.strip().partition(" ")
        out.append((name.strip('"'), typ.strip() == "HIDDEN"))
    return out


def reference() -> str:
    """The reference, as markdown."""
    funcs = registered()
    missing = sorted(set(funcs) - set(WORDS))
    extra = sorted(set(WORDS) - set(funcs))
    if missing or extra:
        raise SystemExit(f"examples/sqlref.py is out of step with csrc/register.c: no words for "
                         f"{missing or 'none'}; words for unregistered {extra or 'none'}")
    lines = ["| function | kind | what it does |", "|---|---|---|"]
    for name in sorted(funcs):
        kind, ns, rw = funcs[name]
        args, what = WORDS[name]
        if ns and max(ns) > len(args):
            raise SystemExit(f"{name} takes up to {max(ns)} arguments in csrc/register.c; "
                             f"examples/sqlref.py names {len(args)}")
        lo = min(ns) if ns else max(1, len(args) - 1)  # (FTS5's: the weights optional)
        need, opt = args[:lo], args[lo:max(ns) if ns else len(args)]
        sig = ", ".join(need) + (f" [, {', '.join(opt)}]" if need and opt else
                                 f"[{', '.join(opt)}]" if opt else "")
        lines.append(f"| `{name}({sig})` | {kind}, {rw} | {what} |")
    cols = columns()
    unknown = sorted({c for c, _ in cols} - set(COLUMNS))
    if unknown:
        raise SystemExit(f"heap_recall declares columns examples/sqlref.py has no words for: "
                         f"{unknown}")
    args = [c for c, hidden in cols if hidden]
    lines += ["", f"`heap_recall({args[0]} [, {', '.join(args[1:])}])`, a table-valued "
              "function (an eponymous virtual table; it writes the recall log when track is "
              "on). Its arguments are its hidden columns:", "", "| column | holds |",
              "|---|---|"]
    lines += [f"| `{c}`{' (argument)' if hidden else ''} | {COLUMNS[c]} |" for c, hidden in cols]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference())
