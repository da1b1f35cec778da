"""check() reports what a raw write (heapmem sql --write, any SQLite client)
leaves behind that heapmem's own writes never do (issue 33):

- seen 6: `UPDATE memories SET kind='preference', source='maya'`, or a text
  change with the same token count, left the stored shape features as they
  were, so recall and learning used the old shape, and check() said ok;
- seen 2: a field that is not UTF-8 (or a name with a NUL byte) made get,
  list, namespaces() and stats() raise a raw UnicodeDecodeError, and check()
  said ok.

Both fail on 95c101e.
"""
from __future__ import annotations

import heapmem


def test_check_reports_features_a_raw_update_left_stale(mem):
    mem.add("Maya likes green tea", id="a2", source="user")
    mem.add("Booked the flight for Friday", id="a3")
    mem.add("Untouched", id="a4")
    assert mem.check().ok
    c = mem.connection
    c.execute("UPDATE memories SET kind = 'preference', source = 'maya' WHERE id = 'a2'")
    report = mem.check()
    assert not report.ok
    (said,) = [p for p in report.problems if "stored features" in p]
    assert "'a2'" in said and "'a4'" not in said
    # a text change of the same token count: the shape moves (a date, a clock)
    c.execute("UPDATE memories SET text = 'Booked the flight for 9:40' WHERE id = 'a3'")
    (said,) = [p for p in mem.check().problems if "stored features" in p]
    assert "'a2', 'a3'" in said
    # update() rewrites both, and check() is ok again
    mem.update("a2", kind="preference", source="maya")
    mem.update("a3", text="Booked the flight for 9:40")
    assert mem.check().ok, mem.check().problems


def test_check_reports_fields_that_are_not_utf8(tmp_path):
    path = str(tmp_path / "s.db")
    with heapmem.open(path) as m:
        m.add("Cafe code 7", namespace="user:alice", id="c1")
        m.connection.execute("UPDATE memories SET source = CAST(x'61ff' AS TEXT) "
                             "WHERE id = 'c1'")
        report = m.check()
    assert not report.ok
    assert any("not valid UTF-8" in p for p in report.problems), report.problems
