"""Trust, round two, item 8: a links-only prior moved rankings invisibly and
for good.  A prior now has provenance (mem.priors.list()), explain() marks the
lift it adds to, mem.priors.remove() takes it out again (the rankings exactly as
without it), and max_lift bounds how far usefulness can move any score."""
import json

import pytest
from test_trust import T0, _prior, _store

import heapmem
from heapmem import ScoringConfig
from heapmem.adapters.cli import main
from heapmem.io import transfer

from conftest import back_to_schema_7

Q = "When is my flight to Lisbon?"
# five rows, each within the 100 observations a prior may weigh per link: for
# "when" questions, URL-bearing tool results are always used, nothing else
FIVE = [{"feature": f, "qtype": "when", "alpha": 100.0, "beta": 0.0, "n": 100}
        for f in ("when/url:1", "when/kind:tool_result", "when/src:tool", "when/clock:0")] + [
    {"feature": "when/base", "qtype": "when", "alpha": 1.0, "beta": 99.0, "n": 100}]
UNBOUNDED = ScoringConfig(max_lift=1e12)


def _scores(m, config=None):
    return [(r.id, r.score) for r in m.recall(Q, namespace="user:maya", track=False, config=config)]


@pytest.fixture
def maya(tmp_path):
    m = _store(tmp_path / "a.db", close=False)
    _prior(tmp_path / "five.jsonl", FIVE)
    yield m
    m.close()


def test_without_the_bound_five_prior_rows_put_a_url_above_the_booking(maya, tmp_path):
    maya.set_config(UNBOUNDED)
    assert _scores(maya)[0][0] == "booking"
    transfer.import_file(maya, str(tmp_path / "five.jsonl"))
    top = maya.recall(Q, namespace="user:maya", track=False)[0]
    # the attack as it was: a tool result lifted some twenty-fold over the booking
    assert top.id == "spam" and top.usefulness ** 0.3 > 20


def test_max_lift_bounds_what_any_evidence_does_to_a_score(maya, tmp_path):
    transfer.import_file(maya, str(tmp_path / "five.jsonl"))
    bound = maya.config.max_lift
    assert 1 < bound < 20
    for r in maya.recall(Q, namespace="user:maya", track=False, k=5):
        lift = r.usefulness ** maya.config.w_usefulness
        base = r.score / min(max(lift, 1 / bound), bound)
        assert 1 / bound - 1e-12 <= r.score / base <= bound + 1e-12
        if lift > bound:
            assert f"(bounded to x{bound:g})" in r.explain()


def test_a_prior_is_listed_marked_in_explain_and_removed_exactly(maya, tmp_path):
    day_one = _scores(maya, UNBOUNDED)
    assert maya.priors.list() == []
    rep = transfer.import_file(maya, str(tmp_path / "five.jsonl"))
    (p,) = maya.priors.list()
    assert p.name == "five.jsonl" and p.link_rows == 5 and p.observations == 500
    assert p.merged_at == T0 and len(p.digest) == 64
    spam = next(r for r in maya.recall(Q, namespace="user:maya", track=False, k=5)
                if r.id == "spam")
    assert "(prior in when/base when/clock:0 when/kind:tool_result +2: see mem.priors.list())" \
        in spam.explain()
    assert _scores(maya, UNBOUNDED) != day_one
    assert maya.check().ok
    gone = maya.priors.remove(p.digest[:10])
    assert gone == p and maya.priors.list() == [] and rep.link_rows == 5
    assert _scores(maya, UNBOUNDED) == day_one  # exactly: as if never merged
    assert "prior" not in maya.recall(Q, namespace="user:maya", track=False)[0].explain()
    assert maya.check().ok
    # and the file may be merged again later
    transfer.import_file(maya, str(tmp_path / "five.jsonl"))
    assert len(maya.priors.list()) == 1


def test_removing_one_of_two_priors_leaves_what_the_other_alone_gives(tmp_path):
    other = [{"feature": "when/date:1", "qtype": "when", "alpha": 80.0, "beta": 10.0, "n": 90},
             {"feature": "when/url:1", "qtype": "when", "alpha": 70.0, "beta": 0.0, "n": 70}]
    _prior(tmp_path / "five.jsonl", FIVE)
    _prior(tmp_path / "other.jsonl", other)
    with _store(tmp_path / "both.db", close=False) as both, \
            _store(tmp_path / "one.db", close=False) as one:
        transfer.import_file(both, str(tmp_path / "other.jsonl"))
        transfer.import_file(both, str(tmp_path / "five.jsonl"))
        transfer.import_file(one, str(tmp_path / "other.jsonl"))
        five = next(p for p in both.priors.list() if p.name == "five.jsonl")
        both.priors.remove(five.digest)
        assert _scores(both, UNBOUNDED) == _scores(one, UNBOUNDED)
        assert [(r.feature, r.alpha, r.beta, r.n) for r in both.links()] == \
            [(r.feature, r.alpha, r.beta, r.n) for r in one.links()]
        assert both.check().ok


def test_an_unknown_digest_changes_nothing(maya, tmp_path):
    transfer.import_file(maya, str(tmp_path / "five.jsonl"))
    before = _scores(maya)
    for bad, words in (("0" * 64, "no prior with digest"), ("abc", "no prior with digest")):
        with pytest.raises(ValueError, match=words):
            maya.priors.remove(bad)
    with pytest.raises(TypeError, match="digest must be a string"):
        maya.priors.remove(5)
    assert len(maya.priors.list()) == 1 and _scores(maya) == before


def test_a_prior_survives_an_export_and_its_removal_there_too(maya, tmp_path):
    transfer.import_file(maya, str(tmp_path / "five.jsonl"))
    transfer.export(maya, str(tmp_path / "all.jsonl"))
    with heapmem.open(str(tmp_path / "copy.db"), clock=lambda: T0) as copy:
        transfer.import_file(copy, str(tmp_path / "all.jsonl"))
        assert copy.priors.list() == maya.priors.list()
        copy.priors.remove(copy.priors.list()[0].digest)
        assert copy.priors.list() == [] and copy.check().ok


def test_a_schema_6_prior_becomes_one_record_that_can_be_removed(tmp_path):
    import apsw
    path = tmp_path / "old.db"
    m = _store(path, close=False)
    day_one = _scores(m, UNBOUNDED)
    _prior(tmp_path / "five.jsonl", FIVE)
    transfer.import_file(m, str(tmp_path / "five.jsonl"))
    m.close()
    c = apsw.Connection(str(path))  # what schema 6 kept: the sum and the digests only
    back_to_schema_7(c)
    c.execute("DELETE FROM heapmem_meta WHERE key = 'prior_records'; PRAGMA user_version = 6")
    c.close()
    with heapmem.open(str(path), clock=lambda: T0, embedder=None) as m:
        (p,) = m.priors.list()
        assert p.digest == "merged-before-schema-7" and p.link_rows == 5
        m.priors.remove("merged-before-schema-7")
        assert _scores(m, UNBOUNDED) == day_one and m.check().ok


def test_the_cli_lists_and_removes_priors(maya, tmp_path, capsys):
    transfer.import_file(maya, str(tmp_path / "five.jsonl"))
    digest = maya.priors.list()[0].digest
    path = str(tmp_path / "a.db")
    assert main(["--db", path, "prior", "list"]) == 0
    out = capsys.readouterr().out
    assert digest[:12] in out and "five.jsonl" in out
    assert main(["--db", path, "--json", "prior", "list"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["digest"] == digest
    assert main(["--db", path, "prior", "remove", "f" * 64]) != 0
    assert "no prior with digest" in capsys.readouterr().err
    assert main(["--db", path, "prior", "remove", digest[:12]]) == 0
    assert "removed" in capsys.readouterr().out
    assert maya.priors.list() == []


def test_a_full_import_never_files_a_prior_under_another_files_digest(maya, tmp_path):
    """issue 33, seen 11: a full export's prior records are the file's claims.
    One filed under the real five.jsonl's digest and name, with links of its
    own, showed that provenance in priors() and made five.jsonl refused as
    'already merged'.  Now it is filed under its links' own digest, its name
    says so, and the real file merges."""
    with heapmem.open(str(tmp_path / "donor.db"), clock=lambda: T0) as donor:
        transfer.import_file(donor, str(tmp_path / "five.jsonl"))
        real = donor.priors.list()[0].digest
        transfer.export(donor, str(tmp_path / "all.jsonl"))
    lines = [json.loads(x) for x in (tmp_path / "all.jsonl").read_text().splitlines() if x]
    for rec in lines:
        if rec.get("type") == "meta" and rec.get("key") == "prior_records":
            recs = json.loads(rec["value"])
            forged = {f: [1.0, 99.0, 100] for f in recs[real]["links"]}  # other links
            recs[real]["links"] = forged
            rec["value"] = json.dumps(recs)
    (tmp_path / "forged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    transfer.import_file(maya, str(tmp_path / "forged.jsonl"))
    (p,) = maya.priors.list()
    assert p.digest != real and "did not match" in p.name
    transfer.import_file(maya, str(tmp_path / "five.jsonl"))  # the real file: merged
    assert sorted(x.digest for x in maya.priors.list()) == sorted([p.digest, real])
    assert maya.check().ok
