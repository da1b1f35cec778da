"""AsyncMemory: every verb of Memory as a coroutine, many tasks on one store
at once (a connection per worker thread), nothing lost."""
import asyncio
import inspect

import pytest

import heapmem
from heapmem import AsyncMemory, Memory

#: Memory's members that hand out a connection, or are not verbs
NO_TWIN = {"close", "transaction", "snapshot", "connection", "now"}


#: members of what a Memory holds (mem.log, ...) that are not verbs: whether
#: this connection's embedder runs in Python; the pool's settings read on a
#: connection check() holds
HELD_NO_TWIN = {"vectors": {"in_python"}, "pool": {"read"}}


def _verbs(cls):
    return {n for n, v in vars(cls).items()
            if not n.startswith("_") and (callable(v) or isinstance(v, property))}


def test_every_verb_and_property_of_memory_has_a_coroutine_twin(tmp_path):
    missing = sorted(n for n in _verbs(Memory) - NO_TWIN if not inspect.iscoroutinefunction(
        getattr(AsyncMemory, n, None)))
    assert missing == []
    # and so has every verb of what a Memory holds: await mem.log.events()
    with heapmem.open(str(tmp_path / "a.db"), embedder=None) as m:
        held = {n: type(getattr(m, n)) for n in Memory.__annotations__}
    assert set(held) == {"log", "pool", "priors", "vectors", "auto_tune"}
    amem = AsyncMemory(str(tmp_path / "a.db"), embedder=None)
    try:
        for name, cls in held.items():
            twin = getattr(amem, name)
            missing = sorted(f"{name}.{n}" for n in _verbs(cls) - HELD_NO_TWIN.get(name, set())
                             if not inspect.iscoroutinefunction(getattr(twin, n, None)))
            assert missing == []
    finally:
        asyncio.run(amem.aclose())


def test_many_tasks_on_one_store_lose_nothing(tmp_path, clock):
    db = str(tmp_path / "agent.db")
    users = [f"user:{i}" for i in range(6)]
    facts = [f"Appointment number {j} is on day {j + 1} at {j % 12 + 1}pm" for j in range(20)]

    async def one_user(mem, ns):
        added = await asyncio.gather(*(mem.add(t, namespace=ns) for t in facts))
        fbs = []
        for j in range(0, 20, 4):  # recall and answer, interleaved with the other users
            res = await mem.recall(f"When is appointment number {j}?", k=3, namespace=ns)
            assert res.recall_id is not None
            fbs.append(await mem.feedback(used=[res[0].id], recall_id=res.recall_id,
                                          namespace=ns))
        return added, fbs

    async def main():
        async with AsyncMemory(db, workers=4, clock=clock) as mem:
            out = await asyncio.gather(*(one_user(mem, ns) for ns in users))
            assert 2 <= len(mem._all) <= 4  # a connection per worker, at most
            return out, await mem.count(), await mem.check()

    out, count, report = asyncio.run(main())
    assert count == len(users) * len(facts)
    assert report.ok, report
    with heapmem.open(db) as mem:
        for (added, fbs), ns in zip(out, users):
            assert {it.id for it in added} == {it.id for it in mem.list(ns)}
            assert len({f.recall_id for f in fbs}) == len(fbs) == 5
        assert len(mem.log.judged()) == len(users) * 5
        assert mem.check().ok


def test_errors_and_the_shared_config(tmp_path, clock):
    async def main():
        mem = AsyncMemory(str(tmp_path / "a.db"), workers=3, clock=clock)
        with pytest.raises(ValueError, match="empty"):
            await mem.add("   ")
        with pytest.raises(ValueError, match="k must be"):
            await mem.recall("x", k=0)
        await mem.set_config(w_usefulness=0.5)
        # every connection runs with it (run more calls at once than one connection takes)
        got = await asyncio.gather(*(mem._call(lambda m: m.config.w_usefulness)
                                     for _ in range(12)))
        assert set(got) == {0.5} and mem.config.w_usefulness == 0.5
        await mem.aclose()
        await mem.aclose()
        with pytest.raises(heapmem.HeapmemError, match="closed"):
            await mem.count()
    asyncio.run(main())
    with pytest.raises(ValueError, match="workers"):
        AsyncMemory(str(tmp_path / "b.db"), workers=0)
