"""What the C core's write functions answer, as Python reads it: heap_add's
id and the row it wrote, heap_feedback's and heap_answer's JSON (with
heap_attribute's verdicts and what auto-tune did), heap_tune's report, the
recall a feedback judged, heap_forget's count.

Owns: the shape of each of those answers, ForeignAnswerError's sentence, and
the Judgement each shown memory gets from heap_attribute's verdicts, with
its reason in words (judgements).
On a file the answers come from this heapmem's own library; on a libSQL
server from whatever answers there.  open() checks that the server runs this
library (heap_version() and its functions), but a hostile or broken server
can still answer valid Hrana with values the library never gives: '{}' for a
feedback, text that is not JSON, JSON nested 100,000 deep, an integer for an
id.  Each is one ForeignAnswerError naming the function and what was wrong,
raised inside the verb's own transaction, so the verb rolls back and writes
nothing, instead of a KeyError, IndexError or RecursionError from deep in a
verb.  Values read from the file itself (memories, the logs) are not answers:
guard.from_file decodes those.
"""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

from .db import sql
from .errors import ForeignAnswerError
from .results import Judgement

#: The longest answer text read (heap_tune's report on a grid of 8 weights is
#: about 1 KB; a feedback's with 100 verdicts about 20 KB).
MAX_ANSWER = 16 << 20


class _Bad(Exception):
    """What is wrong with an answer (words for the sentence)."""


def _show(v: Any) -> str:
    """v for a message: a container by its kind, anything else as a short repr."""
    if isinstance(v, (list, dict, tuple)):
        return {list: "a JSON list", dict: "a JSON object", tuple: "a row"}[type(v)]
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise _Bad(what)


def _one(rows: Sequence[Any], what: str) -> Any:
    """The one value of a statement's one row of one column."""
    _need(len(rows) == 1, f"{len(rows)} rows where one was expected")
    _need(len(rows[0]) == 1, f"a row of {len(rows[0])} columns where one was expected")
    return rows[0][0]


def _json(v: Any) -> Any:
    _need(type(v) is str, f"{_show(v)} where JSON text was expected")
    _need(len(v) <= MAX_ANSWER, f"{len(v)} characters of JSON, more than any answer holds")
    try:
        return json.loads(v)
    except RecursionError:
        raise _Bad("JSON nested too deeply") from None
    except ValueError:
        raise _Bad("text that is not JSON") from None


def _int(v: Any, what: str, low: int = 0) -> int:
    _need(type(v) is int and low <= v < 1 << 63, f"{what} that is not a whole number >= "
          f"{low}: {_show(v)}")
    return v


def _num(v: Any, what: str) -> float:
    """A number of the core's JSON (null: NaN, as the core writes NaN)."""
    if v is None:
        return math.nan
    _need(type(v) in (int, float), f"{what} that is not a number: {_show(v)}")
    return float(v)


def _text(v: Any, what: str) -> str:
    _need(type(v) is str, f"{what} that is not text: {_show(v)}")
    return v


def _texts(v: Any, what: str) -> list[str]:
    _need(type(v) is list, f"{what} that are not a list: {_show(v)}")
    for x in v:
        _text(x, f"{what} holding a value")
    return v


def _object(v: Any, what: str, keys: Sequence[str]) -> dict[str, Any]:
    _need(type(v) is dict, f"{what} that is not a JSON object: {_show(v)}")
    missing = [k for k in keys if k not in v]
    _need(not missing, f"{what} without {', '.join(missing)}")
    return v


def _flag(v: Any, what: str) -> int:
    _need(v in (0, 1) and type(v) is int, f"{what} that is not 0 or 1: {_show(v)}")
    return v


# -- the answers ------------------------------------------------------------------------


class Reader:
    """Reads the answers of one store's connection; where (the store's path
    or server URL) is said in each sentence."""

    def __init__(self, where: str):
        self.where = where

    def _fail(self, function: str, e: _Bad) -> ForeignAnswerError:
        return ForeignAnswerError(
            f"{function} on {self.where} answered {e}, which heapmem's library never does "
            "(a broken server, or one not running heapmem's library); nothing of this call "
            "was written")

    def added(self, id_rows: Sequence[Any], row: Sequence[Any] | None = None
              ) -> tuple[str, int, str, int | None]:
        """heap_add's answer (the new memory's id) and, with row, the
        memory's (seq, features, turn) as sql.ADDED reads them back."""
        try:
            mid = _one(id_rows, "heap_add's id")
            _need(type(mid) is str and mid != "", f"{_show(mid)} where an id was expected")
            if row is None:
                return mid, 0, "", None
            _need(len(row) == 1, f"no memory {mid!r} after adding it" if not row else
                  f"{len(row)} memories with id {mid!r}")
            _need(len(row[0]) == 3, "a memory row of the wrong width")
            seq = _int(row[0][0], "a memory number", 1)
            feats = _text(row[0][1], "features")
            turn = None if row[0][2] is None else _int(row[0][2], "a turn", 0)
            return mid, seq, feats, turn
        except _Bad as e:
            raise self._fail("heap_add", e) from None

    def feedback(self, rows: Sequence[Any], function: str = "heap_feedback"
                 ) -> dict[str, Any]:
        """heap_feedback's or heap_answer's JSON: recall_id, used, ignored,
        links_updated, attribution (null, or a list of verdict rows: see
        attribution()), auto_tune (null, or {point, judged, and report or
        error}) and claimed (the point of the schedule this call claimed, or
        null)."""
        try:
            out = _object(_json(_one(rows, function)), "JSON",
                          ("recall_id", "used", "ignored", "links_updated", "attribution",
                           "auto_tune", "claimed"))
            _int(out["recall_id"], "a recall_id", -(1 << 63))
            _texts(out["used"], "used ids")
            _texts(out["ignored"], "ignored ids")
            _int(out["links_updated"], "a links_updated")
            if out["attribution"] is not None:
                _need(type(out["attribution"]) is list,
                      f"an attribution that is not a list: {_show(out['attribution'])}")
            if out["claimed"] is not None:
                _int(out["claimed"], "a claimed point", 1)
            ran = out["auto_tune"]
            if ran is not None:
                _object(ran, "an auto_tune", ("point", "judged"))
                _int(ran["point"], "an auto-tune point")
                _int(ran["judged"], "a count of judged recalls")
                _need(("report" in ran) != ("error" in ran),
                      "an auto_tune with neither a report nor an error, or both")
                if "report" in ran:
                    _tune(ran["report"])
                else:
                    _need(type(ran["error"]) is str, "an auto-tune error that is not text")
            return out
        except _Bad as e:
            raise self._fail(function, e) from None

    def judged(self, c: Any, rows: Sequence[Any], function: str
               ) -> tuple[dict[str, Any], tuple[Judgement, ...]]:
        """heap_feedback's or heap_answer's answer (as feedback() reads it),
        and with an attribution each shown memory's Judgement: the recall's
        shown ids read on c, inside the feedback's own transaction."""
        out = self.feedback(rows, function)
        if out["attribution"] is None:
            return out, ()
        shown = self.shown(c.execute(sql.RECALL_SHOWN, {"id": out["recall_id"]}).fetchall(),
                           function)
        return out, judgements(self.attribution(out["attribution"], len(shown), function), shown)

    def shown(self, rows: Sequence[Any], function: str) -> list[str]:
        """The ids the judged recall showed (sql.RECALL_SHOWN's one row)."""
        try:
            return _texts(_json(_one(rows, "shown")), "shown ids")
        except _Bad as e:
            raise self._fail(function, e) from None

    def attribution(self, rows: Any, shown: int, function: str = "heap_answer"
                    ) -> list[dict[str, Any]]:
        """heap_attribute's verdicts, one per shown memory, each an object
        {verdict (1 used, 0 ignored, null unjudged), share, question_share,
        matched (words), dated, present, candidate (close to the bar)},
        each value checked."""
        keys = ("verdict", "share", "question_share", "matched", "dated", "present",
                "candidate")
        try:
            _need(type(rows) is list and len(rows) == shown,
                  f"{len(rows) if type(rows) is list else _show(rows)} verdicts for "
                  f"{shown} shown memories")
            out = []
            for r in rows:
                _need(type(r) is dict and sorted(r) == sorted(keys),
                      f"a verdict of the wrong shape: {_show(r)}")
                v = r["verdict"]
                _need(v in (None, 0, 1) and type(v) in (type(None), int),
                      f"a verdict that is not 1, 0 or null: {_show(v)}")
                out.append({"verdict": v, "share": _num(r["share"], "a share"),
                            "question_share": _num(r["question_share"], "a question share"),
                            "matched": _texts(r["matched"], "words"),
                            "dated": _flag(r["dated"], "a dated flag"),
                            "present": _flag(r["present"], "a present flag"),
                            "candidate": _flag(r["candidate"], "a close flag")})
            return out
        except _Bad as e:
            raise self._fail(function, e) from None

    def tune(self, rows: Sequence[Any]) -> dict[str, Any]:
        """heap_tune's report (tune.from_json reads it)."""
        try:
            return _tune(_json(_one(rows, "heap_tune")))
        except _Bad as e:
            raise self._fail("heap_tune", e) from None

    def count(self, rows: Sequence[Any], function: str) -> int:
        """A write function's count (heap_forget's memories forgotten)."""
        try:
            return _int(_one(rows, function), "a count")
        except _Bad as e:
            raise self._fail(function, e) from None


def _tune(d: Any) -> dict[str, Any]:
    """A TuneReport's JSON, checked: every field of the right type (null for
    a number the core had as NaN)."""
    _object(d, "a tune report", ("deployed", "reason", "recalls", "folds", "current", "best",
                                 "gain", "table", "after", "against"))
    _need(type(d["deployed"]) is bool, "a tune report whose deployed is not true or false")
    _text(d["reason"], "a reason")
    _int(d["recalls"], "a count of recalls")
    _text(d["folds"], "folds")
    for k in ("current", "best"):
        _object(d[k], f"a {k} weight", ("w_usefulness", "mrr"))
        _num(d[k]["w_usefulness"], "a weight")
        _num(d[k]["mrr"], "an MRR")
    _need(type(d["gain"]) is list and len(d["gain"]) == 3, "a gain that is not 3 numbers")
    for g in d["gain"]:
        _num(g, "a gain")
    _need(type(d["table"]) is list, "a table that is not a list")
    for row in d["table"]:
        _need(type(row) is list and len(row) == 2, "a table row that is not a weight and an MRR")
        _num(row[0], "a weight")
        _num(row[1], "an MRR")
    _num(d["after"], "a weight after")
    _num(d["against"], "a reference weight")
    return d


def judgements(rows: Sequence[Any], shown: Sequence[str]) -> tuple[Judgement, ...]:
    """Each shown memory's judgement from heap_attribute's verdicts (rows,
    as Reader.attribution read them), with the reason in words."""
    used = [i for i, r in enumerate(rows) if r["verdict"] == 1]
    close = [shown[i] for i, r in enumerate(rows) if r["candidate"]]  # reaching the bar
    out = []
    for mid, r in zip(shown, rows):
        verdict, share, words, dated = r["verdict"], r["share"], r["matched"], r["dated"]
        carried = ", ".join(words) if words else ""
        what = f"carries {share:.0%} of the answer's evidence" + (
            f" ({carried})" if carried else "") + (
            "; its time matches the answer's date" if dated else "")
        if verdict == 1:
            v, why = "used", what
        elif verdict == 0:
            v, why = "ignored", "carries none of the answer's words, nor its date"
        else:
            v = "unjudged"
            if not r["present"]:
                why = "forgotten since the recall"
            elif used:
                why = what + ": neither clearly used nor clearly unused"
            elif len(close) > 1:
                why = what + f": a tie between {', '.join(close)}, so nothing was judged"
            else:
                why = what + ": no memory carries enough of the answer's evidence to " \
                             "count as used, so nothing was judged"
        out.append(Judgement(mid, v, float(share), tuple(words), bool(dated), why))
    return tuple(out)
