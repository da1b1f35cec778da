"""Auto-tune (issues 24, 34): feedback tunes the store by itself when its judged
recalls reach 30, 60, 120, ... (once per point and store, across reopens and
processes), not with auto_tune=False or an explicit config; the tune runs in
steps, one after each feedback, and the feedback whose step ends it returns
the report; clean feedback in an authority world deploys a larger usefulness
weight, shuffled feedback deploys nothing; a failed tune leaves the feedback
saved and says so."""
import io
import json
import os
import random
import warnings

import pytest
from test_authority import TOPICS, add_user

import heapmem
from heapmem.adapters import cli
from heapmem.db import schema, sql
from heapmem.io import transfer
from heapmem.learning import tune

T = 1_700_000_000.0


def _open(path, **kw):
    return heapmem.open(str(path), clock=lambda: T, **kw)


def _world(mem, users, mode="clean", seed=0, first=0):
    """test_authority's world: one tracked recall per topic of each user, and
    feedback on it (the user's memory, or a random shown one); the
    Feedback.auto_tune of each feedback, in order."""
    rng = random.Random(seed)
    out = []
    for u in range(first, first + users):
        ns = add_user(mem, u)
        for t, (q, *_rest) in enumerate(TOPICS):
            res = mem.recall(q, namespace=ns, k=3)
            target = f"{ns}-{t}-user"
            used = rng.choice(list(res.ids)) if mode == "shuffled" else target
            out.append(mem.feedback(used=[used], recall_id=res.recall_id).auto_tune)
    return out


def _ran(reports):
    """The feedbacks (1-based) whose step ended a tune (returned its report)."""
    return [i for i, r in enumerate(reports, 1) if r is not None]


def _replayed(reports):
    """How many judged recalls each tune that ended replayed, in order."""
    return [r.recalls for r in reports if r is not None]


def _finish(mem, recall_id):
    """Feedback on recall_id that judges nothing (each one a step of the tune
    under way) until a tune ends: (its report, how many calls it took)."""
    assert schema.autotune_pending(mem.connection) is not None, "no tune under way"
    for i in range(1, 100_000):
        rep = mem.feedback(used=[], ignored=[], recall_id=recall_id).auto_tune
        if rep is not None:
            return rep, i
    raise AssertionError("no tune under way ended")


def test_the_schedule_30_60_120_and_nothing_in_between(tmp_path):
    mem = _open(tmp_path / "a.db", embedder=None)
    claimed = []
    reports = []
    for u in range(50):  # 150 feedbacks, each judging a recall of its own
        reports += _world(mem, 1, first=u)
        claimed.append(schema.autotune_state(mem.connection)[0])
    assert sorted(set(claimed)) == [0, 30, 60, 120]
    assert claimed.index(30) == 9 and claimed.index(60) == 19 and claimed.index(120) == 39
    # each tune ends in steps after its point, and before the next one is reached
    if schema.autotune_pending(mem.connection) is not None:  # (the last may run on)
        reports.append(_finish(mem, mem.log.judged(newest=1)[0].id)[0])
    ends = _ran(reports)
    assert _replayed(reports) == [30, 60, 120] and 30 < ends[0] < 60 < ends[1] < 120 < ends[2]
    assert schema.autotune_pending(mem.connection) is None
    mem.close()


def test_reopening_does_not_tune_again_and_close_ends_the_tune(tmp_path):
    """A tune under way when its Memory closes ends at the close (a
    connection opened per request judges no more); its point is not claimed
    again."""
    path = tmp_path / "a.db"
    with _open(path, embedder=None) as mem:
        assert _ran(_world(mem, 10)) == []  # 30 judged recalls: claimed by the last
        pending = schema.autotune_pending(mem.connection)
        assert pending["point"] == 30 and pending["epoch"] == 1
    with _open(path, embedder=None) as mem:
        assert schema.autotune_pending(mem.connection) is None
        assert schema.autotune_state(mem.connection) == (30, 30)
        reports = _world(mem, 10, first=10)  # 31st .. 60th: the next point claimed
        assert _replayed(reports) == [] and schema.autotune_state(mem.connection) == (60, 60)


def test_a_tune_whose_owner_went_away_is_taken_over(tmp_path):
    """A connection that claimed a point and went away without ending it (a
    client that is not heapmem's Python, killed, or never back) leaves it
    under way: another connection's feedback takes it over from the start of
    the log it pinned, after HT_TAKEOVER (8) of its feedbacks, and ends it."""
    import apsw
    path = tmp_path / "a.db"
    with _open(path, embedder=None, auto_tune=False) as mem:  # counted, never tuned
        _world(mem, 9)  # 27
        ns = add_user(mem, 9)
        pending = [(mem.recall(q, namespace=ns, k=3).recall_id, f"{ns}-{t}-user")
                   for t, (q, *_rest) in enumerate(TOPICS)]
    c = apsw.Connection(str(path))
    heapmem.load(c)
    for rid, used in pending:  # the 30th claims the point, its first step done
        c.execute("SELECT heap_feedback(?, ?)", (rid, json.dumps([used]))).fetchall()
    c.close()
    with _open(path, embedder=None) as mem:
        assert mem.auto_tune.pending == 30
        reports = _world(mem, 9, first=10)  # 31st .. 57th
        assert _replayed(reports) == [30] and _ran(reports)[0] > 8
        assert schema.autotune_pending(mem.connection) is None


def test_mark_used_counts_and_mark_ignored_does_not(tmp_path):
    mem = _open(tmp_path / "a.db", embedder=None)
    ran = []
    for u in range(15):
        ns = add_user(mem, u)
        for t, (q, *_rest) in enumerate(TOPICS):
            res = mem.recall(q, namespace=ns, k=3)
            if t == 2:  # a recall judged only ignored is no judged recall
                mem.mark_ignored([res.ids[0]], recall_id=res.recall_id)
            else:
                mem.mark_used([f"{ns}-{t}-user"], recall_id=res.recall_id)
            ran.append(schema.autotune_state(mem.connection)[0])
    assert ran.index(30) == 14 * 3 + 1  # claimed by the 30th marked used
    assert len(mem.log.judged()) == 30
    rep, _ = _finish(mem, res.recall_id)
    assert rep.recalls == 30
    mem.close()


def test_off_with_auto_tune_false_and_with_an_explicit_config(tmp_path):
    for name, kw in (("off", {"auto_tune": False}),
                     ("config", {"config": heapmem.ScoringConfig()})):
        mem = _open(tmp_path / f"{name}.db", embedder=None, **kw)
        assert mem.auto_tune.enabled is False
        assert _ran(_world(mem, 21)) == []
        assert mem.config == heapmem.ScoringConfig()
        assert schema.meta_get(mem.connection, schema.META_TUNED) is None
        mem.close()
    # the count is kept with auto-tune off, so a later open with it on catches up
    with _open(tmp_path / "off.db", embedder=None) as mem:
        assert mem.auto_tune.enabled is True
        reports = _world(mem, 1, first=21)
        assert _replayed(reports) == [] and schema.autotune_state(mem.connection) == (60, 66)
        assert _finish(mem, mem.log.judged(newest=1)[0].id)[0].recalls == 64


@pytest.mark.parametrize("bad", [1, 0, "yes", None, 1.0])
def test_a_bad_auto_tune_is_a_type_error_and_writes_nothing(tmp_path, bad):
    path = tmp_path / "a.db"
    with pytest.raises(TypeError, match="auto_tune must be True or False"):
        _open(path, auto_tune=bad)
    assert not os.path.exists(path)
    _open(path, auto_tune=False).close()
    size = os.path.getsize(path)
    with pytest.raises(TypeError, match="auto_tune must be True or False"):
        heapmem.Memory(str(path), auto_tune=bad)
    assert os.path.getsize(path) == size


def test_clean_feedback_deploys_a_larger_weight_and_the_report_says_so(tmp_path):
    path = tmp_path / "a.db"
    default = heapmem.ScoringConfig().w_usefulness
    with _open(path) as mem:
        reports = _world(mem, 10)
        assert reports == [None] * 30  # claimed at the 30th, a step of it done
        rep, _ = _finish(mem, mem.log.judged(newest=1)[0].id)
        assert isinstance(rep, heapmem.TuneReport)
        assert rep.deployed and rep.recalls == 30 and rep.folds == "namespace"
        assert rep.current["w_usefulness"] == default
        assert rep.best["w_usefulness"] > default and rep.gain[1] > 0
        assert mem.config.w_usefulness == rep.best["w_usefulness"]
        # held out: the user's less relevant wording now comes first
        ns = add_user(mem, 99)
        assert all(mem.recall(q, namespace=ns, k=3, track=False).ids[0] == f"{ns}-{t}-user"
                   for t, (q, *_rest) in enumerate(TOPICS))
    with _open(path) as again:  # deployed: saved in the store
        assert again.config.w_usefulness == rep.best["w_usefulness"]


@pytest.mark.parametrize("seed", [0, 1])
def test_shuffled_feedback_deploys_nothing(tmp_path, seed):
    mem = _open(tmp_path / "a.db")
    reports = _world(mem, 20, mode="shuffled", seed=seed)
    reports.append(_finish(mem, mem.log.judged(newest=1)[0].id)[0])
    assert _replayed(reports) == [30, 60]
    assert not any(r.deployed for r in reports if r is not None)
    assert mem.config == heapmem.ScoringConfig()
    assert schema.meta_get(mem.connection, schema.META_TUNED) is None
    mem.close()


def test_runs_repeat_exactly(tmp_path):
    got = []
    for name in ("a", "b"):
        with _open(tmp_path / f"{name}.db") as mem:
            reports = _world(mem, 20, mode="shuffled")
            got.append(([r for r in reports if r is not None], _ran(reports)))
    assert got[0] == got[1] and _replayed(got[0][0])[:1] == [30]


def test_two_connections_tune_once_for_a_point(tmp_path):
    a = _open(tmp_path / "a.db", embedder=None)
    b = _open(tmp_path / "a.db", embedder=None)
    ran = []
    for u in range(10):  # the 30th judged recall is b's (user 9's last)
        m = (a, b)[u % 2]
        ns = add_user(m, u)
        for t, (q, *_rest) in enumerate(TOPICS):
            res = m.recall(q, namespace=ns, k=3)
            ran.append(m.feedback(used=[f"{ns}-{t}-user"], recall_id=res.recall_id).auto_tune)
    assert _replayed(ran) == [] and schema.autotune_pending(a.connection)["point"] == 30
    # claimed once, by whichever connection judged the 30th (b, user 9): its
    # steps run after b's own feedbacks, a's count idle (3 at most in a row:
    # no takeover), and b's step ends it
    rid = a.log.judged(newest=1)[0].id
    by = None
    for i in range(300):
        m = (a, b)[i // 3 % 2]
        rep = m.feedback(used=[], ignored=[], recall_id=rid).auto_tune
        ran.append(rep)
        if rep is not None:
            by = m
            break
    assert _replayed(ran) == [30] and by is b
    assert schema.autotune_state(a.connection) == (30, 30)
    assert schema.autotune_pending(a.connection) is None
    a.close()
    b.close()


def test_a_failed_tune_warns_and_keeps_the_feedback(tmp_path):
    mem = _open(tmp_path / "a.db", embedder=None)
    _world(mem, 9)  # 27 judged recalls
    with mem.transaction() as c:  # a logged recall heap_tune cannot replay
        c.execute("UPDATE recalls SET rest = '[\"x\"]' WHERE id = (SELECT min(id) FROM recalls)")
    with pytest.warns(heapmem.AutoTuneWarning, match="auto-tune at 30 judged recalls failed "
                      r"\(the recall log is damaged .*\); the feedback was saved"):
        reports = _world(mem, 1, first=9)  # the 30th claims the point
        if schema.autotune_pending(mem.connection) is not None:
            reports.append(_finish(mem, mem.log.judged(newest=1)[0].id)[0])
        rep = [r for r in reports if r is not None][0]  # the step that read the damage
    assert not rep.deployed and rep.reason.startswith("auto-tune failed: the recall log is damaged")
    assert len(mem.log.judged()) == 30  # saved
    assert mem.config == heapmem.ScoringConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the point stays claimed: no retry on each feedback
        assert _ran(_world(mem, 2, first=10)) == []
    assert schema.autotune_pending(mem.connection) is None
    mem.close()


def test_past_the_window_it_replays_the_newest(tmp_path):
    path = tmp_path / "a.db"
    with _open(path, embedder=None, auto_tune=False) as mem:  # counted, never tuned
        _world(mem, 680)  # 2,040 judged recalls
        assert schema.autotune_state(mem.connection) == (0, 2040)
        newest = mem.log.judged(newest=40)
        assert [r.id for r in newest] == [r.id for r in mem.log.judged()][-40:]
        events = mem.log.events(first_recall=newest[0].id)
        assert events and {e.recall_id for e in events} == {r.id for r in newest}
        for bad, err in ((0, ValueError), (-1, ValueError), (True, TypeError), ("5", TypeError)):
            with pytest.raises(err, match="newest must be"):
                mem.log.judged(newest=bad)
        with pytest.raises(TypeError, match="first_recall must be an integer"):
            mem.log.events(first_recall="1")
    with _open(path, embedder=None) as mem:
        assert _ran(_world(mem, 1, first=680)) == []  # 2,041: the point 1,920 claimed, once
        assert schema.autotune_pending(mem.connection)["point"] == 1920
        rep, steps = _finish(mem, mem.log.judged(newest=1)[0].id)
        assert rep.recalls == 2000 and steps > 10  # csrc/tune.c's HT_AUTO_WINDOW, in steps


def test_an_import_is_counted_at_the_next_feedback(tmp_path):
    with _open(tmp_path / "src.db", embedder=None, auto_tune=False) as src:
        _world(src, 10, first=50)  # 30 judged recalls
        buf = io.StringIO()
        transfer.export(src, buf)
    with _open(tmp_path / "dst.db", embedder=None) as dst:
        assert _ran(_world(dst, 1)) == []  # 3 judged recalls, counted
        transfer.import_file(dst, io.StringIO(buf.getvalue()))
        _world(dst, 1, first=1)
        assert schema.autotune_state(dst.connection) == (30, 36)
        assert _finish(dst, dst.log.judged(newest=1)[0].id)[0].recalls == 34


def test_the_state_is_checked_and_never_exported(tmp_path):
    with _open(tmp_path / "a.db", embedder=None) as mem:
        _world(mem, 10)
        assert schema.autotune_state(mem.connection) == (30, 30)
        assert mem.check().ok
        buf = io.StringIO()
        transfer.export(mem, buf)
        assert schema.META_AUTOTUNE not in {json.loads(line).get("key")
                                           for line in buf.getvalue().splitlines()}
        with mem.transaction() as c:
            schema.meta_set(c, schema.META_AUTOTUNE, '{"point": "x"}')
        assert any("autotune" in p for p in mem.check().problems)
        # a value heapmem cannot read: counted again, from the start of the schedule
        _world(mem, 1, first=10)
        assert schema.autotune_state(mem.connection) == (30, 33)
        assert schema.autotune_pending(mem.connection)["point"] == 30
        with mem.transaction() as c:  # a tune under way is checked too
            state = json.loads(schema.meta_get(c, schema.META_AUTOTUNE))
            state["tune"]["idle"] = -1
            schema.meta_set(c, schema.META_AUTOTUNE, json.dumps(state))
        assert any("tune must hold" in p for p in mem.check().problems)


def test_counting_is_an_index_lookup(tmp_path):
    with _open(tmp_path / "a.db", embedder=None) as mem:
        _world(mem, 3)
        c = mem.connection

        def plan(statement, params=None):
            return [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + statement, params)]

        idx = "USING INDEX sqlite_autoindex_events_1 (recall_id=?)"
        used = c.execute("SELECT heap_statement('autotune_used')").fetchall()[0][0]
        assert plan(used, (1,)) == ["SEARCH events " + idx]  # heap_feedback's running count
        assert plan(sql.NEWEST_JUDGED_RECALLS, {"n": 5}) == ["SCAN r", "SEARCH e EXISTS " + idx]
        assert plan(sql.EVENTS_FROM, {"first": 4})[0] == (
            "SEARCH events USING INDEX sqlite_autoindex_events_1 (recall_id>?)")


def test_the_cli_says_what_auto_tune_did(tmp_path):
    path = str(tmp_path / "a.db")
    with _open(path, embedder=None) as mem:
        _world(mem, 9, first=1)
        ns = add_user(mem, 0)
        ids = [mem.recall(q, namespace=ns, k=3).recall_id for q, *_rest in TOPICS]

    def run(*argv):
        out = io.StringIO()
        assert cli.main(["--db", path, "--lexical", "-n", ns, *map(str, argv)], clock=lambda: T,
                        stdout=out, stderr=io.StringIO(), env={}) == 0
        return out.getvalue()

    assert "auto-tune" not in run("feedback", ids[0], "--used", f"{ns}-0-user")
    plain = json.loads(run("feedback", ids[1], "--used", f"{ns}-1-user", "--json"))
    assert "auto_tune" not in plain  # as before when it does not run
    d = json.loads(run("feedback", ids[2], "--used", f"{ns}-2-user", "--json"))
    assert d["auto_tune"]["recalls"] == 30 and isinstance(d["auto_tune"]["deployed"], bool)
    assert d["auto_tune"]["reason"] and len(d["auto_tune"]["table"]) >= 9


def test_the_cli_tunes_by_hand_and_dry_runs_on_a_read_only_store(tmp_path):
    """`heapmem tune` is Memory.tune(): --dry-run measures only (a read-only
    open, nothing deployed), the plain verb deploys what the report says, and
    a store with too few judged recalls says so in one line."""
    path = str(tmp_path / "a.db")
    with _open(path, embedder=None, auto_tune=False) as mem:
        _world(mem, 10)
        expected = tune.tune(mem, deploy=False)

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(["--db", path, "--lexical", *argv], clock=lambda: T, stdout=out,
                        stderr=err, env={})
        return code, out.getvalue(), err.getvalue()

    code, out, _ = run("tune", "--dry-run")
    assert code == 0 and out == str(expected) + "\n" and expected.best["w_usefulness"] > 0.3
    assert "significant, but deploy=False" in out
    with _open(path, embedder=None) as mem:
        assert mem.config.w_usefulness == 0.3  # nothing deployed
    code, out, _ = run("tune", "--json")
    d = json.loads(out)
    assert code == 0 and d["deployed"] and d["after"] == expected.best["w_usefulness"]
    assert d["table"] == [list(x) for x in expected.table] and d["against"] is None
    with _open(path, embedder=None) as mem:
        assert mem.config.w_usefulness == expected.best["w_usefulness"]
    small = str(tmp_path / "small.db")
    with _open(small, embedder=None, auto_tune=False) as mem:
        _world(mem, 2)
    code, out, _ = run("--db", small, "tune")
    assert code == 0 and out == "not deployed: only 6 judged recalls in the log; tune() " \
                                "needs 30\n"
    code, out, err = run("--db", str(tmp_path / "none.db"), "tune")
    assert code == 1 and out == "" and "no store at" in err
    assert not os.path.exists(tmp_path / "none.db")


def test_a_forget_is_counted_at_the_next_feedback(tmp_path):
    mem = _open(tmp_path / "a.db", embedder=None)
    _world(mem, 9)  # 27 judged recalls
    mem.forget(namespace="user0")  # and the 3 recalls of user0 with it
    assert schema.autotune_state(mem.connection) == (0, None)
    _world(mem, 2, first=9)  # 25, 26, ... 30 at the 6th
    assert schema.autotune_state(mem.connection) == (30, 30)
    assert _finish(mem, mem.log.judged(newest=1)[0].id)[0].recalls == 30
    mem.close()


def test_a_forget_while_it_runs_starts_it_again_on_the_log_left(tmp_path):
    """A forget in the middle of a tune marks the count unknown: the next
    feedback takes the tune over (a new epoch) from the start of the log it
    pinned, less what was forgotten, and its report is heap_tune's on that
    log."""
    path = tmp_path / "a.db"
    mem = _open(path, embedder=None)
    _world(mem, 10)  # claimed by the 30th, the last
    before = schema.autotune_pending(mem.connection)
    mem.forget(namespace="user1")  # 3 recalls of the pinned log
    rid = mem.log.judged(newest=1)[0].id
    rep, _ = _finish(mem, rid)
    assert rep.recalls == 27
    after = schema.autotune_state(mem.connection)
    mem.close()
    assert before["epoch"] == 1 and after == (30, 27)


def test_against_the_default_a_weight_nothing_supports_goes_back_to_it(tmp_path):
    """Auto-tune measures each gain against the default weight, so a weight
    deployed on an earlier, smaller replay stays only while the feedback
    supports it; otherwise the default comes back."""
    default = heapmem.ScoringConfig().w_usefulness
    mem = _open(tmp_path / "a.db", auto_tune=False)
    _world(mem, 20, mode="shuffled")
    mem.set_config(w_usefulness=1.0, save=True)  # as if a chance pass had deployed it
    rep = tune.tune(mem, against=default, deploy=False)
    assert not rep.deployed and rep.after == 1.0 and rep.against == default
    assert rep.reason.startswith(f"back to {default:g} (no weight is significantly better")
    rep = tune.tune(mem, against=default)
    assert rep.deployed and rep.after == default == mem.config.w_usefulness
    assert f"over w_usefulness={default:g}" in str(rep)
    mem.close()
    with _open(tmp_path / "a.db") as again:
        assert again.config.w_usefulness == default


def test_its_interval_is_99_percent_split_among_the_grids_other_weights(tmp_path):
    """Auto-tune deploys the best of the grid's weights, so each is tested at
    1% / 8 (Bonferroni: 99.875%, 20,000 resamples), as tune() by hand splits
    its level: its report is tune()'s at 99%, and a grid of the best weight
    alone (nothing to split) gives a narrower interval."""
    path = tmp_path / "a.db"
    with _open(path) as mem:
        _world(mem, 10)
        rep, _ = _finish(mem, mem.log.judged(newest=1)[0].id)
        assert rep.against == heapmem.ScoringConfig().w_usefulness
        assert len(rep.table) == 9  # heap_tune's grid: 0 to 1, 0.3 among them
        same, alone = (tune.from_json(json.loads(mem.connection.execute(
            "SELECT heap_tune(?)", (json.dumps(dict(auto=True, deploy=False, **kw)),)
        ).fetchall()[0][0])) for kw in ({}, {"grid": [rep.best["w_usefulness"]]}))
        by_hand = tune.tune(mem, seed=0, boot=20000, level=0.99, against=0.3, deploy=False)
    assert same.gain == rep.gain == by_hand.gain and same.best == rep.best
    assert alone.best == rep.best and len(alone.table) == 2
    assert alone.gain[1] > rep.gain[1]  # one comparison: a plain 99% interval lies higher


def test_tune_by_hand_splits_its_level_among_the_grids_weights(tmp_path):
    """tune() deploys the best of its grid, so its 95% is for that choice:
    the best of eight other weights is tested at 99.375%.  In this world (5
    users' clean feedback, 7 users' shuffled) w_usefulness=1 gains +0.10 MRR;
    tested alone its 95% interval lies above 0, chosen among eight it does
    not, and nothing is deployed."""
    with _open(tmp_path / "a.db", auto_tune=False) as mem:
        _world(mem, 5, mode="clean", seed=3)
        _world(mem, 7, mode="shuffled", seed=3, first=5)
        chosen = mem.tune()
        alone = tune.tune(mem, grid=[1.0], deploy=False)
        assert chosen.best["w_usefulness"] == 1.0 and chosen.gain[0] == alone.gain[0] > 0.1
        assert chosen.gain[1] < 0 < alone.gain[1]
        assert not chosen.deployed and mem.config.w_usefulness == 0.3
        assert chosen.reason == ("the gain's 99.375% interval (95% for the choice among 8 "
                                 "weights) includes 0: not significant")
        assert alone.reason == "significant, but deploy=False"
