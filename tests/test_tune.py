"""tune(): replay the feedback log, deploy only what is significantly better;
and heap_tune, the same tune in the C core: the same decision and replay MRRs
through raw apsw, the real sqlite3 shell and Memory.tune(); the tuned config
saved as set_config(save=True) saves it; bad options and read-only stores
refused with nothing written."""
import json
import random
import re
import shutil
import subprocess

import apsw
import pytest

import heapmem
from heapmem.db import schema
from heapmem.learning import tune


def _teach(mem, users=12, noise=False, seed=1):
    rng = random.Random(seed)
    for u in range(users):
        ns = f"u{u}"
        items = []
        for i in range(8):
            items.append({"text": f"appointment {i} with Dr Lee on Friday at {i + 1}pm",
                          "namespace": ns, "id": f"{ns}-t{i}"})
            items.append({"text": f"appointment {i} with Dr Lee is great, I really like "
                                  f"appointment {i} and appointment {i} again",
                          "namespace": ns, "id": f"{ns}-x{i}", "kind": "episode"})
        mem.add_many(items)
        for i in range(8):
            res = mem.recall(f"When is appointment {i} with Dr Lee?", namespace=ns, k=5)
            if noise:
                used = [rng.choice(res.ids)]
            else:
                used = [r for r in res.ids if r.startswith(f"{ns}-t")][:1]
            mem.feedback(used=used, recall_id=res.recall_id)


def test_tune_deploys_a_significantly_better_weight(tmp_path, clock):
    path = str(tmp_path / "t.db")
    cfg = heapmem.ScoringConfig(w_usefulness=0.0)  # learning switched off by hand
    mem = heapmem.open(path, clock=clock, config=cfg, embedder=None)  # lexical: as _teach expects
    _teach(mem)
    rep = mem.tune()
    assert rep.recalls == 96 and rep.folds == "namespace"
    assert rep.current == {"w_usefulness": 0.0, "mrr": pytest.approx(0.5)}
    assert rep.best["mrr"] == 1.0 and rep.gain[1] > 0
    assert rep.deployed and mem.config.w_usefulness == rep.best["w_usefulness"]
    assert "deployed: w_usefulness 0 ->" in str(rep)
    mem.close()
    # the tuned weight is the store's default from now on
    with heapmem.open(path, clock=clock) as again:
        assert again.config.w_usefulness == rep.best["w_usefulness"]
    # an explicit config still wins
    with heapmem.open(path, clock=clock, config=cfg) as explicit:
        assert explicit.config.w_usefulness == 0.0


def test_tune_leaves_chance_feedback_alone(tmp_path, clock):
    mem = heapmem.open(str(tmp_path / "n.db"), clock=clock)
    _teach(mem, noise=True)
    before = mem.config
    rep = mem.tune()
    assert not rep.deployed and mem.config == before
    mem.close()


def test_tune_needs_enough_feedback(mem):
    mem.add("appointment on Friday at 3pm", id="a")
    res = mem.recall("When is the appointment?")
    mem.feedback(used=["a"], recall_id=res.recall_id)
    rep = mem.tune()
    assert not rep.deployed and rep.recalls == 1 and "needs 30" in rep.reason


# -- heap_tune, in the C core -------------------------------------------------------
START = heapmem.ScoringConfig(w_usefulness=0.0)  # learning off by hand: tune has a gain to find


@pytest.fixture(scope="module")
def taught(tmp_path_factory):
    """A store of 96 judged recalls whose saved config has w_usefulness 0
    (so every door starts from it), closed."""
    path = tmp_path_factory.mktemp("taught") / "t.db"
    mem = heapmem.open(str(path), clock=lambda: 1_700_000_000.0, config=START, embedder=None)
    _teach(mem)
    mem.set_config(START, save=True)
    mem.close()
    return path


def _copy(taught, tmp_path, name):
    dst = tmp_path / name
    shutil.copy(taught, dst)
    return dst


def _raw(path, readonly=False):
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    c = apsw.Connection(str(path), flags=flags)
    heapmem.load(c)
    return c


def _tuned(path):
    c = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    rows = c.execute("SELECT value FROM heapmem_meta WHERE key = ?", (schema.META_TUNED,))
    out = rows.fetchall()
    c.close()
    return out[0][0] if out else None


def _refused(path, function, arg, says, error, readonly=False):
    """function(arg) on path fails with one sentence, and meta 'tuned' is as
    it was; returns path."""
    before = _tuned(path)
    c = _raw(path, readonly)
    with pytest.raises(error, match=f"^{function}: " + re.escape(says)):
        c.execute(f"SELECT {function}(?)", (arg,)).fetchall()
    c.close()
    assert _tuned(path) == before
    return path


def _what(report):
    """What a door's report holds, as plain values (a TuneReport or heap_tune's JSON)."""
    if isinstance(report, dict):
        report = tune.from_json(report)
    return (report.deployed, report.reason, report.recalls, report.folds, report.current,
            report.best, report.gain, report.table, report.after)


def test_every_door_tunes_alike(taught, tmp_path):
    with heapmem.open(str(_copy(taught, tmp_path, "py.db")), clock=lambda: 1_700_000_000.0) as mem:
        assert mem.config.w_usefulness == 0.0
        py = mem.tune()
    c = _raw(_copy(taught, tmp_path, "raw.db"))
    raw = json.loads(c.execute("SELECT heap_tune()").fetchall()[0][0])
    c.close()
    assert py.deployed and py.folds == "namespace" and py.recalls == 96
    assert py.current == {"w_usefulness": 0.0, "mrr": 0.5} and py.best["mrr"] == 1.0
    assert _what(raw) == _what(py)
    # what is saved: set_config(save=True)'s JSON of the config with the tuned weight
    saved = json.dumps(START.replace(w_usefulness=py.after).to_dict(), sort_keys=True)
    assert _tuned(tmp_path / "py.db") == _tuned(tmp_path / "raw.db") == saved
    with heapmem.open(str(tmp_path / "raw.db")) as again:
        assert again.config == START.replace(w_usefulness=py.after)


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_the_sqlite3_shell_tunes_too(taught, tmp_path):
    c = _raw(_copy(taught, tmp_path, "raw.db"))
    opts = '{"seed": 7, "deploy": false, "level": 0.99}'
    raw = json.loads(c.execute("SELECT heap_tune(?)", (opts,)).fetchall()[0][0])
    c.close()
    path = _copy(taught, tmp_path, "shell.db")
    out = subprocess.run(["sqlite3", str(path), "-cmd", f".load {heapmem.loadable_path()}",
                          f"SELECT heap_tune('{opts}');", "SELECT heap_tune();"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    measured, deployed = json.loads(out[0]), json.loads(out[1])
    assert measured == raw and measured["reason"] == "significant, but deploy=False"
    assert not measured["deployed"]
    assert deployed["deployed"] and deployed["after"] == measured["best"]["w_usefulness"]
    assert _tuned(path) == json.dumps(START.replace(w_usefulness=deployed["after"]).to_dict(),
                                      sort_keys=True)
    with heapmem.open(str(_copy(taught, tmp_path, "py.db"))) as mem:
        py = tune.tune(mem, seed=7, deploy=False, level=0.99)
    assert _what(py) == _what(measured)


@pytest.mark.parametrize("options, says", [
    ("[1]", "options must be a JSON object like '{\"seed\": 0, \"deploy\": false}'"),
    ("not json", "options must be a JSON object"),
    ('{"bogus": 1}', "unknown option 'bogus'; the options are against, auto, boot, config, "
                     "deploy, grid, level, newest, pending, seed"),
    ('{"pending": 1}', "pending must be true or false"),
    ('{"pending": true, "seed": 1}', "pending takes no other option but config"),
    ('{"auto": 1}', "auto must be true or false"),
    ('{"boot": 0}', "boot must be an integer from 1 to 100000"),
    ('{"seed": 1.5}', "seed must be an integer"),
    ('{"grid": []}', "grid must be an array of 1 to 64 weights from 0 to 100"),
    ('{"grid": [0.1, -1]}', "grid must be an array of 1 to 64 weights from 0 to 100"),
    ('{"level": 1}', "level must be a number above 0 and below 1"),
    ('{"deploy": "yes"}', "deploy must be true or false"),
    ('{"newest": 0}', "newest must be an integer from 1 to"),
    ('{"against": 101}', "against must be a weight from 0 to 100"),
    ('{"config": "w_usefulness=-1"}', "config: w_usefulness must be a number from 0 to 100"),
])
def test_bad_options_are_one_sentence_and_write_nothing(taught, tmp_path, options, says):
    path = _refused(_copy(taught, tmp_path, "bad.db"), "heap_tune", options, says,
                    apsw.SQLError)
    with heapmem.open(str(path)) as mem, pytest.raises(ValueError, match="boot must be"):
        tune.tune(mem, boot=0)


def test_a_read_only_store_refuses_to_deploy(taught, tmp_path):
    path = _copy(taught, tmp_path, "ro.db")
    before = _tuned(path)
    c = _raw(path, readonly=True)
    with pytest.raises(apsw.ReadOnlyError, match="heap_tune: the store is read-only here"):
        c.execute("SELECT heap_tune()").fetchall()
    measured = json.loads(c.execute("SELECT heap_tune('{\"deploy\": false}')").fetchall()[0][0])
    c.close()
    assert measured["best"]["mrr"] == 1.0 and not measured["deployed"]
    with heapmem.open(str(path), readonly=True) as mem:
        with pytest.raises(heapmem.ReadOnlyError):
            mem.tune()
        assert mem.tune(deploy=False).best["mrr"] == 1.0
    assert _tuned(path) == before


def test_too_few_judged_recalls_is_tune_py_s_minimum(tmp_path):
    mem = heapmem.open(str(tmp_path / "few.db"), embedder=None)
    mem.add("appointment on Friday at 3pm", id="a")
    res = mem.recall("When is the appointment?")
    mem.feedback(used=["a"], recall_id=res.recall_id)
    out = json.loads(mem.connection.execute("SELECT heap_tune()").fetchall()[0][0])
    assert out["reason"] == f"only 1 judged recalls in the log; tune() needs {tune.MIN_RECALLS}"
    assert out["folds"] == "-" and out["current"]["mrr"] is None and not out["deployed"]
    mem.close()


def test_deltas_in_any_json_spelling_replay_alike(taught, tmp_path):
    """heap_tune reads the deltas the C core writes with a parser of its own;
    the same JSON spelled otherwise (escapes, spaces) goes through SQLite's
    JSON and replays the same."""
    plain = _raw(_copy(taught, tmp_path, "plain.db"))
    opts = '{"deploy": false}'
    want = plain.execute("SELECT heap_tune(?)", (opts,)).fetchall()[0][0]
    plain.close()
    c = _raw(_copy(taught, tmp_path, "spelled.db"))
    rows = c.execute("SELECT id, deltas FROM events").fetchall()
    with c:
        for i, d in rows:
            spelled = re.sub(r'\["(.)', lambda m: '[ "\\u%04x' % ord(m.group(1)), d)
            assert json.loads(spelled) == json.loads(d) and spelled != d
            c.execute("UPDATE events SET deltas = ? WHERE id = ?", (spelled, i))
    assert c.execute("SELECT heap_tune(?)", (opts,)).fetchall()[0][0] == want
    c.close()


def test_a_damaged_recall_log_is_one_sentence_and_writes_nothing(taught, tmp_path):
    path = _copy(taught, tmp_path, "damaged.db")
    before = _tuned(path)
    c = _raw(path)
    with c:
        c.execute("UPDATE recalls SET rest = '[\"x\"]' WHERE id = (SELECT min(id) FROM recalls)")
    with pytest.raises(apsw.CorruptError, match="heap_tune: the recall log is damaged"):
        c.execute("SELECT heap_tune()").fetchall()
    c.close()
    with heapmem.open(str(path)) as mem, pytest.raises(heapmem.CorruptStoreError,
                                                       match="the recall log is damaged"):
        mem.tune()
    assert _tuned(path) == before


def test_its_reads_use_the_events_index(taught, tmp_path):
    """heap_tune reads the newest judged recalls a chunk at a time from the
    newest down by rowid, each looked up in events by its recall_id; the first
    event of the recalls from the oldest replayed on through the same index,
    and the events from there a span of rowids at a time (so that a step of
    auto-tune reads only what it is given; heap_statement gives their text)."""
    c = _raw(_copy(taught, tmp_path, "plans.db"))

    def plan(name, *params):
        statement = c.execute("SELECT heap_statement(?)", (name,)).fetchall()[0][0]
        return [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + statement, params)]

    idx = "USING INDEX sqlite_autoindex_events_1 (recall_id=?)"
    recalls = plan("tune_recalls", 1 << 40, 5, 1 << 40)
    assert "SEARCH q USING INTEGER PRIMARY KEY (rowid<?)" in recalls
    assert "SEARCH e EXISTS " + idx in recalls
    assert plan("tune_first_event", 4) == [
        "SEARCH events USING COVERING INDEX sqlite_autoindex_events_1 (recall_id>?)"]
    assert plan("tune_events", 0, 32, 4) == [
        "SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"]
    c.close()


def _almost_30(path):
    """A store with 27 judged recalls (auto-tune off: counted, not tuned) and
    three tracked recalls not judged yet: [(recall_id, the memory to use)]."""
    from test_authority import TOPICS, add_user
    from test_autotune import _world
    with heapmem.open(str(path), clock=lambda: 1_700_000_000.0, embedder=None,
                      auto_tune=False) as mem:
        _world(mem, 9)
        ns = add_user(mem, 9)
        out = []
        for t, (q, *_rest) in enumerate(TOPICS):
            res = mem.recall(q, namespace=ns, k=3)
            out.append((res.recall_id, f"{ns}-{t}-user"))
        assert schema.autotune_state(mem.connection) == (0, 27)
    return out


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_feedback_from_the_sqlite3_shell_runs_auto_tune(tmp_path):
    """The sqlite3 shell's feedback claims the point and steps the tune as
    Python's does: a session that keeps judging ends it (here with feedbacks
    that judge nothing), or heap_tune('{"pending": true}') ends it at once;
    both give Python's report and deploy its weight."""
    pending = _almost_30(tmp_path / "shell.db")
    for name in ("steps.db", "py.db"):
        shutil.copy(tmp_path / "shell.db", tmp_path / name)
    rid = pending[-1][0]
    calls = [f"SELECT heap_feedback({rid}, '[\"{used}\"]');" for rid, used in pending]

    def shell(name, *more):
        out = subprocess.run(["sqlite3", str(tmp_path / name), "-cmd",
                              f".load {heapmem.loadable_path()}", *calls, *more],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        return [json.loads(line) for line in out]

    now = shell("shell.db", "SELECT heap_tune('{\"pending\": true}');")
    assert [r["auto_tune"] for r in now[:3]] == [None, None, None]
    assert now[3]["point"] == 30 and now[3]["judged"] == 30
    steps = [r["auto_tune"] for r in shell("steps.db", *[f"SELECT heap_feedback({rid}, '[]', "
                                                         "'[]');"] * 60)]
    done = [r for r in steps if r is not None]
    assert len(done) == 1 and steps.index(done[0]) > 3 and done[0]["point"] == 30
    with heapmem.open(str(tmp_path / "py.db"), clock=lambda: 1_700_000_000.0) as mem:
        reports = [mem.feedback(used=[used], recall_id=rid).auto_tune for rid, used in pending]
        assert reports == [None, None, None] and mem.auto_tune.pending == 30
        report = mem.auto_tune.finish()
        assert mem.auto_tune.pending is None and mem.auto_tune.finish() is None
    assert _what(now[3]["report"]) == _what(done[0]["report"]) == _what(report)
    assert _tuned(tmp_path / "shell.db") == _tuned(tmp_path / "steps.db") == \
        _tuned(tmp_path / "py.db")
    with heapmem.open(str(tmp_path / "shell.db")) as mem:  # claimed: not again
        assert schema.autotune_state(mem.connection) == (30, 30)


def test_auto_tune_in_steps_decides_as_heap_tune_right_after_the_claim(tmp_path):
    """Auto-tune's steps read the log as it was when the 30th judged recall
    claimed the point: however many feedbacks later its last step comes, its
    report and the weight it deploys are heap_tune('{"auto": true}')'s right
    after that claim (in a copy where auto-tune only counted), and no step
    takes more than a bounded share of the work (the tune takes many)."""
    pending = _almost_30(tmp_path / "a.db")
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    with heapmem.open(str(tmp_path / "b.db"), clock=lambda: 1_700_000_000.0,
                      auto_tune=False) as mem:
        for rid, used in pending:
            mem.feedback(used=[used], recall_id=rid)
        now = tune.from_json(json.loads(mem.connection.execute(
            "SELECT heap_tune('{\"auto\": true}')").fetchall()[0][0]))
    from test_authority import TOPICS, add_user
    with heapmem.open(str(tmp_path / "a.db"), clock=lambda: 1_700_000_000.0) as mem:
        ran = [mem.feedback(used=[used], recall_id=rid).auto_tune for rid, used in pending]
        for u in range(20, 30):  # more users judge meanwhile: the log grows past the claim
            ns = add_user(mem, u)
            for q, *_rest in TOPICS:
                res = mem.recall(q, namespace=ns, k=3)
                ran.append(mem.feedback(used=[res.ids[0]], recall_id=res.recall_id).auto_tune)
                if ran[-1] is not None:
                    tuned = _tuned(tmp_path / "a.db")
                    break
            if ran[-1] is not None:
                break
        assert [r for r in ran if r is not None] == [ran[-1]] and len(ran) > 4
        assert _what(ran[-1]) == _what(now) and now.deployed
        assert mem.config.w_usefulness == now.after
    assert tuned == _tuned(tmp_path / "b.db")


def test_a_bad_autotune_argument_is_one_sentence_and_writes_nothing(tmp_path):
    (rid, used), *_ = _almost_30(tmp_path / "a.db")
    c = _raw(tmp_path / "a.db")
    with pytest.raises(apsw.SQLError, match=r"^heap_feedback: autotune must be 1 \(tune at 30"):
        c.execute("SELECT heap_feedback(?, ?, NULL, NULL, NULL, NULL, 2)",
                  (rid, json.dumps([used]))).fetchall()
    assert c.execute("SELECT count(*) FROM events WHERE recall_id = ?", (rid,)).fetchall() == [(0,)]
    c.close()


# -- heap_save_config: the one writer of meta 'tuned' besides heap_tune's deploy ----------

SAVED = heapmem.ScoringConfig(w_usefulness=0.5, max_lift=4.0, candidates=40)


def test_save_config_is_what_set_config_saves_and_every_door_reads(taught, tmp_path):
    """set_config(save=True) is heap_save_config: the same JSON in the file
    (ScoringConfig.to_dict's, sorted), and a raw heap_recall without a
    config and a later open both use it."""
    py, raw = _copy(taught, tmp_path, "py.db"), _copy(taught, tmp_path, "raw.db")
    with heapmem.open(str(py)) as mem:
        mem.set_config(SAVED, save=True)
    c = _raw(raw)
    out = c.execute("SELECT heap_save_config(?)", (SAVED.to_sql(),)).fetchall()[0][0]
    assert out == _tuned(raw) == _tuned(py) == json.dumps(SAVED.to_dict(), sort_keys=True)
    ns, q = c.execute("SELECT namespace, query FROM recalls LIMIT 1").fetchall()[0]
    got = c.execute('SELECT "explain" FROM heap_recall(?, ?, 3, 1700000000, NULL, 0)',
                    (q, ns)).fetchall()
    want = c.execute('SELECT "explain" FROM heap_recall(?, ?, 3, 1700000000, ?, 0)',
                     (q, ns, SAVED.to_sql())).fetchall()
    c.close()
    assert got == want
    with heapmem.open(str(raw)) as again:
        assert again.config == SAVED
    # a config string over the defaults: what it leaves out is the default
    c = _raw(raw)
    c.execute("SELECT heap_save_config('w_usefulness=0.25')").fetchall()
    c.close()
    with heapmem.open(str(raw)) as again:
        assert again.config == heapmem.ScoringConfig(w_usefulness=0.25)


@pytest.mark.parametrize("config, says", [
    ("nope=1", "unknown config key 'nope'"),
    ("w_usefulness=-1", "w_usefulness must be a number from 0 to 100"),
    ("candidates=2.5", "candidates must be an integer from 1 to 1000"),
    ("w_usefulness", "expected key=value in the config, got 'w_usefulness'"),
    (None, "config must be text such as 'w_usefulness=0.5'"),
    (0.5, "config must be text such as 'w_usefulness=0.5'"),
    (b"w_usefulness=0.5", "config must be text such as 'w_usefulness=0.5'"),
])
def test_a_bad_config_is_one_sentence_and_writes_nothing(taught, tmp_path, config, says):
    _refused(_copy(taught, tmp_path, "bad.db"), "heap_save_config", config, says, apsw.Error)


def test_save_config_refuses_a_read_only_store_and_a_database_that_is_not_one(taught, tmp_path):
    _refused(_copy(taught, tmp_path, "ro.db"), "heap_save_config", "w_usefulness=0.5",
             "the store is read-only here", apsw.ReadOnlyError, readonly=True)
    other = apsw.Connection(str(tmp_path / "other.db"))
    heapmem.load(other)
    other.execute("CREATE TABLE t(x)")
    with pytest.raises(apsw.Error, match="^heap_save_config: .*not a heapmem store"):
        other.execute("SELECT heap_save_config('w_usefulness=0.5')").fetchall()
    assert other.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
    other.close()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_the_sqlite3_shell_saves_the_config_python_opens_with(taught, tmp_path):
    path = _copy(taught, tmp_path, "shell.db")
    subprocess.run(["sqlite3", str(path), "-cmd", f".load {heapmem.loadable_path()}",
                    f"SELECT heap_save_config('{SAVED.to_sql()}');"],
                   capture_output=True, text=True, check=True)
    with heapmem.open(str(path)) as mem:
        assert mem.config == SAVED


def test_auto_takes_auto_tunes_settings_and_the_keys_given_override_them(taught, tmp_path):
    """'{"auto": true}' is auto-tune's choice for the log as it is now (seed 0,
    20,000 resamples, 99% split among the grid, against the default weight),
    from any door; any other key given still counts."""
    c = _raw(_copy(taught, tmp_path, "auto.db"))

    def run(**opts):
        return tune.from_json(json.loads(c.execute(
            "SELECT heap_tune(?)", (json.dumps(dict(deploy=False, **opts)),)).fetchall()[0][0]))

    auto = run(auto=True)
    default = heapmem.ScoringConfig().w_usefulness
    assert auto.against == default and auto.current["w_usefulness"] == 0.0
    assert _what(auto) == _what(run(seed=0, boot=20000, level=0.99, against=default))
    assert _what(run(auto=False)) == _what(run())
    narrow = run(auto=True, grid=[1.0], against=None)
    assert narrow.against is None and [w for w, _ in narrow.table] == [0.0, 1.0]
    c.close()
