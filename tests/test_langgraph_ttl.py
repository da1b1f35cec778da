"""HeapmemStore's TTLs (issue 15): put(ttl=minutes), refresh on read, the
sweep and its thread, TTLConfig's defaults, all on the Memory's clock."""
import asyncio
import threading

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import GetOp, PutOp, SearchOp  # noqa: E402

from heapmem.adapters.langgraph_store import HeapmemStore  # noqa: E402

T = 1_796_040_000.0
NS = ("session", "s1")


@pytest.fixture
def clock(clock):
    """conftest's settable clock (and with it its `mem`), at this file's T."""
    clock.t = T
    return clock


def keys(store, **kw):
    return sorted(h.key for h in store.search(NS, **kw))


def test_an_item_expires_after_its_ttl_and_the_sweep_forgets_it(mem, clock):
    s = HeapmemStore(mem)
    assert s.supports_ttl is True
    s.put(NS, "short", {"text": "the door code is 4412"}, ttl=1)
    s.put(NS, "forever", {"text": "Maya likes window seats"})
    lg = mem.get(s.item_id(NS, "short")).metadata["langgraph"]
    assert (lg["ttl"], lg["expires_at"]) == (1, T + 60)  # in the memory's metadata
    assert "ttl" not in mem.get(s.item_id(NS, "forever")).metadata["langgraph"]
    clock.t = T + 59
    assert s.sweep_ttl() == 0 and s.get(NS, "short", refresh_ttl=False) is not None
    clock.t = T + 60
    # expired: never served, by get or search, even before the sweep forgets it
    # (LangGraph's Postgres store's TTL test; issue 23, item 9)
    assert s.get(NS, "short", refresh_ttl=False) is None
    assert "short" not in [h.key for h in s.search(NS, query="door code")]
    assert s.sweep_ttl() == 1
    assert s.get(NS, "short") is None and keys(s) == ["forever"]
    assert mem.count == 1 and mem.check().ok
    assert s.sweep_ttl() == 0


def test_reads_refresh_the_ttl(mem, clock):
    s = HeapmemStore(mem)
    s.put(NS, "a", {"text": "alpha note"}, ttl=1)
    s.put(NS, "b", {"text": "beta note"}, ttl=1)
    clock.t = T + 50
    assert s.get(NS, "a").key == "a"  # refresh_ttl defaults to True: a expires at T + 110
    s.get(NS, "b", refresh_ttl=False)  # b still expires at T + 60
    clock.t = T + 100
    assert s.sweep_ttl() == 1 and keys(s, refresh_ttl=False) == ["a"]
    assert [h.key for h in s.search(NS, query="alpha")] == ["a"]  # a search refreshes: T + 160
    clock.t = T + 150
    assert s.sweep_ttl() == 0
    s.batch([GetOp(NS, "a", refresh_ttl=False), SearchOp(NS, refresh_ttl=False)])
    clock.t = T + 160
    assert s.sweep_ttl() == 1 and keys(s) == []


def test_a_put_resets_the_ttl_and_ttl_none_keeps_forever(mem, clock):
    s = HeapmemStore(mem)
    s.put(NS, "a", {"text": "v1"}, ttl=1)
    clock.t = T + 30
    s.put(NS, "a", {"text": "v2"}, ttl=2)
    s.put(NS, "b", {"text": "v1"}, ttl=1)
    s.put(NS, "b", {"text": "v2"})  # no TTL any more
    clock.t = T + 30 + 119
    assert s.sweep_ttl() == 0
    clock.t = T + 30 + 120
    assert s.sweep_ttl() == 1 and keys(s) == ["b"]


def test_ttl_config_defaults(mem, clock):
    s = HeapmemStore(mem, ttl={"default_ttl": 5, "refresh_on_read": False})
    s.put(NS, "default", {"text": "x"})
    s.put(NS, "short", {"text": "x"}, ttl=1)
    s.put(NS, "forever", {"text": "x"}, ttl=None)
    clock.t = T + 4 * 60
    s.get(NS, "default")  # no refresh: refresh_on_read is False
    assert s.sweep_ttl() == 1 and keys(s) == ["default", "forever"]
    clock.t = T + 5 * 60
    assert s.sweep_ttl() == 1 and keys(s) == ["forever"]
    # a PutOp in a batch takes no default (as in LangGraph, BaseStore.put applies it)
    s.batch([PutOp(NS, "op", {"text": "x"})])
    assert "ttl" not in mem.get(s.item_id(NS, "op")).metadata["langgraph"]
    with pytest.raises(ValueError, match="ttl"):
        HeapmemStore(mem, ttl={"default_ttl": -1})


def test_omit_expired_hides_what_no_sweep_has_forgotten(mem, clock):
    s = HeapmemStore(mem, ttl={"omit_expired": True})
    s.put(NS, "gone", {"text": "expired note"}, ttl=1)
    s.put(NS, "kept", {"text": "kept note"})
    clock.t = T + 60
    assert s.get(NS, "gone") is None
    assert keys(s) == ["kept"] and keys(s, query="note") == ["kept"]
    assert mem.count == 2  # still on file until the sweep
    assert s.sweep_ttl() == 1 and mem.count == 1


def test_the_sweep_leaves_other_memories_alone(mem, clock):
    s = HeapmemStore(mem)
    mem.add("added by other means", namespace="session/s1", id="plain")
    s.put(NS, "k", {"text": "x"}, index=False, ttl=1)  # the unindexed twin expires too
    clock.t = T + 3600
    assert s.sweep_ttl() == 1
    assert mem.get("plain") is not None and keys(s) == ["plain"]


def test_the_sweeper_thread(mem, clock):
    s = HeapmemStore(mem, ttl={"sweep_interval_minutes": 60})
    s.put(NS, "k", {"text": "x"}, ttl=1)
    clock.t = T + 120
    swept = threading.Event()
    sweep = s.sweep_ttl

    def counted():
        n = sweep()
        swept.set()
        return n

    s.sweep_ttl = counted
    fut = s.start_ttl_sweeper()  # sweeps at once, then every 60 minutes
    assert swept.wait(30)
    with pytest.raises(RuntimeError, match="running"):
        s.start_ttl_sweeper()
    assert s.stop_ttl_sweeper(timeout=30) is True
    assert fut.result(timeout=30) is None
    assert s.get(NS, "k") is None
    assert s.stop_ttl_sweeper() is True  # stopping twice is fine


def test_async_ttl(mem, clock):
    s = HeapmemStore(mem)

    async def main():
        await s.aput(NS, "k", {"text": "x"}, ttl=1)
        clock.t = T + 60
        assert await s.asweep_ttl() == 1
        assert await s.aget(NS, "k") is None

    asyncio.run(main())
