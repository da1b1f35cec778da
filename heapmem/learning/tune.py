"""Self-tuning from the store's own feedback log: the Python door onto the
C core's heap_tune (csrc/tune.c).

Owns: the TuneReport built from heap_tune's JSON (and from what auto-tune
did inside a feedback: auto_report), heap_tune's options from tune()'s
arguments, the weights a store's tune deployed read back at open
(saved_config), and a store's auto-tune as Python sees it (AutoTune:
mem.auto_tune, whether feedback runs it, the point under way, finish()).
What tune does (the replay, the folds, the bootstrap, the decision, the
deployment into meta 'tuned') and auto-tune itself (its schedule, seed,
window, baseline and interval: csrc/tune.c's ht_schedule_point and
ht_auto_opts; heap_feedback counts the judged recalls, claims the schedule's
points and runs heap_tune) are the C core's, so the sqlite3 shell's `SELECT
heap_tune()` and feedback tune as Memory.tune() and Memory.feedback do, and
`SELECT heap_tune('{"auto": true, "deploy": false}')` says what auto-tune
would decide now.

Every tracked recall logs what it showed (features, ages, the score without
usefulness); feedback logs which were used.  tune() replays those recalls
under other usefulness weights, with the links learned from the *other* folds
of the log only (grouped cross-validation: by namespace when there are enough
namespaces, else by recall), and deploys a new weight only if it ranks the
used memories higher than the current one with a paired bootstrap 95%
interval above zero, for the choice as a whole (split among the grid's
weights).  Otherwise nothing changes.

Auto-tune (heap_feedback; from Python unless the store was opened with
auto_tune=False or an explicit config): the feedback that brings the store's
judged recalls to the next point of a doubling schedule (30, 60, 120, ...)
claims it, and tune runs in steps, one after each feedback (so that no
feedback waits for a whole tune), on the log as it was at the claim, seeded,
against the default weight, at 99% split among the grid's weights; past 2,000
judged recalls it replays only the newest 2,000 (with the links learned from
the events of the recalls from the oldest of them on).  The feedback whose
step ends it returns the report; finish() ends it at once (a one-shot door
such as the CLI, which will not be back for the next step).
"""
from __future__ import annotations

import json
import math
import threading
import warnings
from typing import TYPE_CHECKING, Any, Sequence

import apsw

from .. import answers
from ..config import ScoringConfig
from ..db import schema, sql
from ..errors import AutoTuneWarning, CorruptStoreError, ReadOnlyError, from_sqlite
from ..guard import guarded, locked
from ..results import TuneReport

if TYPE_CHECKING:
    from ..store import Memory

#: Fewer judged recalls than this and tune() does not try (heap_tune's
#: HT_MIN_RECALLS; tests/test_tune.py checks that the two agree).
MIN_RECALLS = 30


def tune(mem: Any, *, grid: Sequence[float] | None = None, boot: int = 2000, seed: int = 0,
         deploy: bool = True, newest: int | None = None, against: float | None = None,
         level: float = 0.95) -> TuneReport:
    """Replay mem's (a heapmem.Memory) judged recalls under each weight of
    grid (None: heap_tune's, 0 to 1); deploy the best one if its gain is
    significant (see the module).  newest=N: only the newest N judged
    recalls, with the links learned from the events of the recalls from the
    oldest of them on.  against=W: the gain is measured against weight W
    rather than the weight in force, and where no weight is significantly
    better than W, W is deployed (auto-tune passes the default weight: each
    of its decisions then rests on all the recalls it replays, never on what
    an earlier, smaller replay deployed).  level: the bootstrap interval's
    coverage for the whole choice (its low end must lie above 0): the best
    of the n weights other than the reference is tested at 1 - (1 - level) / n
    (Bonferroni), since picking the best of eight at 95% each would pass by
    chance far more often than one time in twenty.  Bad values: ValueError, nothing
    written; deploy on a read-only store: ReadOnlyError."""
    options = options_json(mem.config, grid=grid, boot=boot, seed=seed, deploy=deploy,
                           newest=newest, against=against, level=level)
    # deploying writes meta 'tuned': one write transaction around the whole tune
    try:
        with (mem.transaction() if deploy else mem.snapshot()) as c:
            try:
                rows = c.execute(sql.TUNE, {"options": options}).fetchall()
            except apsw.SQLError as e:  # the C core's sentence: a bad option
                raise ValueError(str(e).split("heap_tune: ", 1)[-1]) from None
            # read inside the transaction: an answer that is not heap_tune's rolls it back
            report = from_json(answers.Reader(mem.path).tune(rows))
    except apsw.Error as e:  # the statement, or the COMMIT (a full disk, a failed sync)
        raise from_sqlite(e, "tune") from e
    if report.deployed:
        mem.set_config(w_usefulness=report.after)  # saved by heap_tune; in force here too
    return report


def finish(mem: Any) -> dict[str, Any] | None:
    """End the auto-tune under way in mem's store now, in one call
    (heap_tune('{"pending": true}'), with the config in force): what it did,
    as heap_feedback's auto_tune says it ({"point", "judged", "report"}), or
    None when no tune is under way."""
    options = json.dumps({"pending": True, "config": mem.config.to_sql()})
    with mem.transaction() as c:
        try:
            return json.loads(c.execute(sql.TUNE, {"options": options}).fetchall()[0][0])
        except apsw.Error as e:
            raise from_sqlite(e, "auto_tune.finish") from e


def saved_config(c: Any, path: str) -> ScoringConfig | None:
    """The weights tune() deployed in the store (meta 'tuned'), or None;
    weights heapmem cannot read: CorruptStoreError, saying how to open
    the store all the same."""
    tuned = schema.meta_get(c, schema.META_TUNED)
    if tuned is None:
        return None
    try:
        return ScoringConfig.from_dict(json.loads(tuned))
    except (ValueError, TypeError, RecursionError, AttributeError) as e:
        raise CorruptStoreError(
            f"{path!r} holds tuned weights heapmem cannot read ({e}); open it with "
            "config=heapmem.ScoringConfig() to ignore them, then set_config(..., "
            "save=True) replaces them") from None


def auto_report(mem: Any, ran: dict[str, Any], stacklevel: int) -> TuneReport:
    """The report of the auto-tune heap_feedback ran in mem's store (csrc/tune.c: it
    kept the count of judged recalls in the feedback's own savepoint, claimed the
    schedule's point there, so that two processes never tune for one, and tuned after
    it in a savepoint of its own: seeded, against the default weight, 99% split among
    the grid's other weights, on the newest 2,000 judged recalls at most).  A deployed
    weight is in force in mem from now on.  A failed tune never undid the feedback: it
    becomes an AutoTuneWarning and the report's reason, the weights unchanged; the
    point stays claimed (the next point tries again, or call tune()).  stacklevel:
    the warning's, so that it names the line that called the verb."""
    if "error" in ran:
        what = " ".join(str(ran["error"]).split())
        warnings.warn(f"heapmem: auto-tune at {ran['point']} judged recalls failed ({what}); "
                      "the feedback was saved and the weights did not change; call tune() "
                      "to retry", AutoTuneWarning, stacklevel=stacklevel)
        return not_run(f"auto-tune failed: {what}", 0, float(mem.config.w_usefulness))
    report = from_json(ran["report"])
    if report.deployed:
        mem.config = mem.config.replace(w_usefulness=report.after)
    return report


class AutoTune:
    """A store's auto-tune (mem.auto_tune): whether feedback runs it
    (enabled), the point under way in steps (pending), and finish()."""

    _door = "auto_tune."

    def __init__(self, mem: Memory, lock: threading.RLock, *, enabled: bool):
        self._mem = mem
        self._lock = lock
        #: whether feedback runs tune() at the points of its schedule: open()'s
        #: auto_tune, never with an explicit config
        self.enabled = enabled

    @property
    @guarded
    @locked
    def pending(self) -> int | None:
        """The point of auto-tune's schedule (judged recalls) whose tune is
        under way in steps, or None (see finish())."""
        pending = schema.autotune_pending(self._mem.connection)
        return None if pending is None else int(pending["point"])

    @guarded
    def finish(self) -> TuneReport | None:
        """End the auto-tune under way now.  A feedback that claims a point of
        auto-tune's schedule starts a tune that runs in steps, one after each
        feedback with auto-tune on (from any connection), so that no feedback
        waits for a whole tune; the feedback whose step ends it returns the
        report.  This runs its remaining work in one call (from the start of
        the log it pinned), deploys as auto-tune does, and returns the report,
        or None when no tune is under way.  The CLI calls it after a feedback
        that claimed a point.  On a read-only store: ReadOnlyError."""
        if self._mem.readonly:
            raise ReadOnlyError(f"{self._mem.path!r} was opened with readonly=True; writes "
                                "are refused")
        ran = finish(self._mem)
        return auto_report(self._mem, ran, stacklevel=4) if ran else None


def options_json(config: ScoringConfig, *, grid: Sequence[float] | None, boot: int, seed: int,
                 deploy: bool, newest: int | None, against: float | None, level: float) -> str:
    """heap_tune's options for tune()'s arguments, with config as the config
    in force (heap_tune checks every value)."""
    opts: dict[str, Any] = {"boot": boot, "seed": seed, "deploy": deploy, "newest": newest,
                            "against": against, "level": level, "config": config.to_sql()}
    if grid is not None:
        opts["grid"] = [float(w) for w in grid]
    try:
        return json.dumps(opts, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"tune(): the options must be plain numbers ({e})") from None


def from_json(d: dict[str, Any]) -> TuneReport:
    """The TuneReport heap_tune's JSON describes, as answers.Reader.tune
    checked it (null: a number the core had as NaN, such as the MRR of
    nothing replayed; against null: none)."""
    def num(v: Any) -> float:
        return math.nan if v is None else float(v)

    return TuneReport(bool(d["deployed"]), str(d["reason"]), int(d["recalls"]), str(d["folds"]),
                      {"w_usefulness": num(d["current"]["w_usefulness"]),
                       "mrr": num(d["current"]["mrr"])},
                      {"w_usefulness": num(d["best"]["w_usefulness"]),
                       "mrr": num(d["best"]["mrr"])},
                      (num(d["gain"][0]), num(d["gain"][1]), num(d["gain"][2])),
                      tuple((num(w), num(m)) for w, m in d["table"]), num(d["after"]),
                      None if d["against"] is None else float(d["against"]))


def not_run(reason: str, n: int, current_w: float) -> TuneReport:
    """The report of a tune that replayed nothing and changed nothing (from
    auto-tune, an error: reason says which)."""
    here = {"w_usefulness": current_w, "mrr": math.nan}
    return TuneReport(False, reason, n, "-", here, dict(here), (0.0, 0.0, 0.0), (), current_w)
