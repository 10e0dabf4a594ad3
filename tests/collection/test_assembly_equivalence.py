"""The report assembly that keeps its objects by unit makes the same reports as the one before it (frozen in
reference_assembly.py): random collections of random due units, bodies returned again (spliced), bodies with their
own ``period``, ``error`` or ``fresh``, applications left out by a group, outside the scope, departed and
forgotten, and reloads that drop groups. One difference is meant: a departed application none of whose groups is
left (a reload removed them) gets no entry, where the reference wrote one with an empty ``report``."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.daemon import report as rpt
from neuron_monitor.daemon.collection.apps import ScopeApps
from neuron_monitor.daemon.collection.assembly import ReportAssembly
from neuron_monitor.daemon.config import Plan, plan_from_data
from neuron_monitor.neuron.app import App
from tests.collection.reference_assembly import ReportAssembly as ReferenceAssembly

RUNTIME = ("execution_stats", "memory_used", "neuroncore_counters")
SYSTEM = ("memory_info", "vcpu_usage")
PIDS = (1, 2, 3, 4, 5, 6)


def plan_of(runtime: tuple[tuple[str, ...], tuple[str, ...]], system: tuple[str, ...]) -> Plan:
    return plan_from_data(
        {
            "neuron_runtimes": [
                {"tag_filter": "^a", "metrics": [{"type": t} for t in runtime[0]]},
                {"tag_filter": ".*", "metrics": [{"type": t} for t in runtime[1]]},
            ],
            "system_metrics": [{"type": t} for t in system],
        },
        "t.conf",
    )


def body_pool(pid: int) -> list[dict[str, Any]]:
    """Bodies a group might return for ``pid``; the same objects come back across steps (spliced)."""
    return [
        {"v": pid},
        {"v": pid, "d": {"k": [pid, 2]}},
        {"period": 0.25, "v": pid},
        {"v": pid, "error": "partial"},
        {"error": "failed"},
        {"fresh": "theirs", "period": 3.0, "v": [pid]},
    ]


POOLS = {pid: body_pool(pid) for pid in PIDS}
subsets = st.frozensets(st.sampled_from(PIDS))
step = st.one_of(
    st.tuples(
        st.just("collect"),
        st.frozensets(st.sampled_from([(None, n) for n in SYSTEM] + [(i, n) for i in (0, 1) for n in RUNTIME])),
        st.dictionaries(st.sampled_from(PIDS), st.integers(0, 5)),  # the bodies each due runtime group returns
        st.integers(1, 7),  # report interval tenths
    ),
    st.tuples(st.just("apps"), st.integers(0, 1), subsets, subsets),  # a scope's present and departed pids
    st.tuples(st.just("forget"), st.integers(0, 1), st.sampled_from(PIDS)),
    st.tuples(
        st.just("reload"),
        st.frozensets(st.sampled_from(RUNTIME)),
        st.frozensets(st.sampled_from(RUNTIME)),
        st.frozensets(st.sampled_from(SYSTEM)),
    ),
)


def spliced(report: dict[str, Any]) -> list[tuple[int, str, list[str]]]:
    """Where the report splices encoded values: (pid, group, keys)."""
    return [
        (e["pid"], name, [k for k, v in obj.items() if isinstance(v, orjson.Fragment)])
        for e in report["neuron_runtime_data"]
        for name, obj in e["report"].items()
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=25))
def test_the_assembly_by_unit_makes_the_reference_reports(steps: list[tuple[Any, ...]]) -> None:
    groups: tuple[tuple[str, ...], tuple[str, ...]] = (RUNTIME, RUNTIME)
    system: tuple[str, ...] = SYSTEM
    new, ref = ReportAssembly(), ReferenceAssembly()
    scopes = {0: ScopeApps(), 1: ScopeApps()}
    for s in steps:
        if s[0] == "apps":
            _, index, present, departed = s
            scopes[index].apps = {pid: App(pid, f"t{pid}") for pid in sorted(present)}
            scopes[index].gone = {pid: (App(pid, f"t{pid}", "gone"), set()) for pid in departed - present}
        elif s[0] == "forget":
            _, index, pid = s
            new.forget(index, pid)
            ref.forget(index, pid)
            scopes[index].gone.pop(pid, None)
        elif s[0] == "reload":
            groups = (tuple(sorted(s[1])), tuple(sorted(s[2])))
            system = tuple(sorted(s[3]))
            plan = plan_of(groups, system)
            new.apply(plan)
            ref.apply(plan)
        else:
            _, due, choice, tenths = s
            due = {u for u in due if u[1] in (system if u[0] is None else groups[u[0]])}
            new.mark_stale(due)
            ref.mark_stale()
            window = tenths / 10
            for index, name in sorted(due, key=repr):
                if index is None:
                    body = {"n": tenths, "x": name}
                    new.put_system(name, rpt.group_object(body, window, "", True))
                    ref.put_system(name, rpt.group_object(body, window, "", True))
                else:
                    results = {pid: POOLS[pid][k] for pid, k in choice.items()}
                    new.put_runtime_group(index, name, results, window, scopes[index])
                    ref.put_runtime_group(index, name, results, window, scopes[index])
            made = rpt.encode(new.build(scopes, {}, {}, {}, 1.0))
            expected = ref.build(scopes, {}, {}, {}, 1.0)
            expected["neuron_runtime_data"] = [
                e for e in expected["neuron_runtime_data"] if e["report"] or e["error"] != "gone"
            ]
            assert made == rpt.encode(expected)
            assert spliced(new.build(scopes, {}, {}, {}, 1.0)) == spliced(expected)  # the same bodies reused
            assert orjson.loads(made)  # one JSON line
