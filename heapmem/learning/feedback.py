"""The door onto the C core's feedback: heap_feedback and heap_answer.

Owns: one feedback run for Memory's feedback, mark_used and mark_ignored:
its arguments checked (the TypeErrors a Python caller expects), the core's
statement chosen (the used and ignored ids, or the answer to judge from) and
run in one write transaction, its answer read there (answers.Reader: one that
is not the core's rolls the transaction back), and auto-tune's report when
the feedback ran or ended a tune.  What feedback does (the recall, the
events, the fold, the pooled layer, auto-tune's claim and steps) is the C
core's, in one savepoint (csrc/feedback.c, csrc/tune.c).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import apsw

from .. import answers
from ..db import sql
from ..guard import c_sentence
from ..results import Feedback
from ..validate import Timestamp, check_ids, check_namespace, check_recall_id
from . import tune

if TYPE_CHECKING:
    from ..store import Memory


def judge(mem: Memory, reader: answers.Reader, recall_id: Any, used: Any, ignored: Any,
          rest_ignored: bool, now: Timestamp | None, answer: str | None,
          namespace: str | None, *, remote: bool) -> Feedback:
    """One feedback in mem's store (reader: how mem reads the core's
    answers; remote: mem is on a libSQL server).  rest_ignored: every shown
    memory not in used counts as ignored; answer: judge from this text
    instead of used and ignored (already checked)."""
    used_ids = check_ids(used, "used")
    ignored_ids = check_ids(ignored, "ignored") if ignored is not None else []
    both = set(used_ids) & set(ignored_ids)
    if both:
        raise ValueError(f"ids both used and ignored: {sorted(both)}")
    t = mem.now(now)
    if namespace is not None:
        namespace = check_namespace(namespace)
    args = {"rid": check_recall_id(recall_id), "now": t, "namespace": namespace,
            "config": mem.config.to_sql(), "tune": 1 if mem.auto_tune.enabled else 0}
    if answer is not None:
        statement, function = sql.ANSWER, "heap_answer"
        args["answer"] = answer
    else:
        statement, function = sql.FEEDBACK, "heap_feedback"
        args["used"] = json.dumps(used_ids)
        args["ignored"] = None if rest_ignored else json.dumps(ignored_ids)
    with mem.transaction() as c:  # (which tells mem its links may have changed)
        try:
            rows = c.execute(statement, args).fetchall()
        except apsw.SQLError as e:  # the C core's sentence: a bad argument
            raise ValueError(c_sentence(e)) from None
        # read inside the transaction: an answer that is not the core's rolls it back
        out, judgements = reader.judged(c, rows, function)
    ran = out["auto_tune"]
    if ran is None and out["claimed"] and remote:
        # a server's connections are not this store's to step a tune with
        # (csrc/tune.c): the tune this feedback claimed ends now
        ran = tune.finish(mem)
    return Feedback(out["recall_id"], tuple(out["used"]), tuple(out["ignored"]),
                    out["links_updated"], judgements,
                    tune.auto_report(mem, ran, stacklevel=6) if ran else None)
