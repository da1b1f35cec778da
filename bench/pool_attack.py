"""How much one or two tenants can steer another namespace through the pooled
layer, against how much honest transfer keeps working, for each pool cap.

    python bench/pool_attack.py            # about a minute

A victim namespace holds its real answer (a dated appointment) and a spam
memory shaped like what attackers reward (a tool result with a URL).
Attacker namespaces mark their own URL tool results used, over and over;
honest namespaces mark their dated answers used, 20 times each.  For each
pool cap and scenario the table gives the victim's real-to-spam score ratio
(> 1: the real answer stays first) with the store's pool as built by default
(mem.pool.set: min 5 namespaces, trim 2 at each end) and with the robust
parts off (min 1, trim 0: a plain capped sum), and the real answer's
usefulness with the defaults.
Deterministic: a fixed clock, no randomness.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import heapmem  # noqa: E402

T0 = 1_741_910_400
Q = "When is my dentist appointment?"
VICTIM = "victim"


def tenants(path: str, attackers: int, *, honest: int = 0) -> heapmem.Memory:
    """A new store: a victim with its real answer and a spam memory shaped like
    what the attackers reward; attacker and honest namespaces that hold the same
    shapes (tests/test_trust.py builds its scenarios with this too)."""
    m = heapmem.open(path, clock=lambda: T0)
    m.add_many([
        {"text": "Dentist appointment on Tuesday May 6 at 3pm with Dr. Silva", "id": "real",
         "namespace": VICTIM},
        {"text": "Win a free dentist appointment at https://spam.example/dentist now",
         "id": "spam", "kind": "tool_result", "source": "tool", "namespace": VICTIM}])
    for a in range(attackers + honest):
        ns = f"tenant{a}"
        m.add_many([
            {"text": f"Dentist appointment on Friday June {a + 1} at 10am", "namespace": ns,
             "id": f"{ns}-real"},
            {"text": f"Dentist coupons at https://deals{a}.example/dentist", "kind": "tool_result",
             "source": "tool", "namespace": ns, "id": f"{ns}-url"}])
    return m


def attack(m: heapmem.Memory, attackers: int, rounds: int, *, honest: int = 0) -> None:
    """Attackers mark their URL tool result used `rounds` times each; honest
    namespaces mark their dated answer used 20 times each."""
    for a in range(attackers + honest):
        ns = f"tenant{a}"
        want = f"{ns}-url" if a < attackers else f"{ns}-real"
        for _ in range(rounds if a < attackers else 20):
            res = m.recall(Q, namespace=ns)
            m.feedback(used=[want], recall_id=res.recall_id)


def build(path: str, attackers: int, rounds: int, honest: int, cap: float) -> heapmem.Memory:
    m = tenants(path, attackers, honest=honest)
    m.pool.set(cap=cap)
    attack(m, attackers, rounds, honest=honest)
    return m


def ratio(m: heapmem.Memory) -> float:
    res = {r.id: r.score for r in m.recall(Q, namespace=VICTIM, track=False)}
    return res["real"] / res["spam"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--caps", default="100,300,1000,1e9")
    args = p.parse_args()
    caps = [float(x) for x in args.caps.split(",")]
    scenarios = [(1, 10, 0), (1, 300, 0), (1, 3000, 0), (2, 300, 0), (2, 3000, 0),
                 (2, 300, 1), (2, 3000, 1), (2, 3000, 3), (3, 300, 0), (0, 0, 5)]
    print("| pool cap | attackers | rounds each | honest | real/spam, defaults | "
          "real/spam, plain capped sum | real's usefulness |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for cap in caps:
            for i, (att, rounds, honest) in enumerate(scenarios):
                m = build(os.path.join(tmp, f"{cap}-{i}.db"), att, rounds, honest, cap)
                d = ratio(m)
                use = next(r.usefulness for r in m.recall(Q, namespace=VICTIM, track=False)
                           if r.id == "real")
                m.pool.set(min_namespaces=1, trim=0)
                off = ratio(m)
                m.close()
                print(f"| {cap:g} | {att} | {rounds} | {honest} "
                      f"| {d:.3f}{'' if d > 1 else ' FLIPPED'}"
                      f" | {off:.3f}{'' if off > 1 else ' FLIPPED'} | {use:.3f} |")


if __name__ == "__main__":
    main()
