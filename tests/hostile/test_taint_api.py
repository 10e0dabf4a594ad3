"""neuron-monitor-taint against a failing or slow API server: retries only what may pass (no answer, 429, 5xx),
each call within its total deadline (attempts and pauses share it), no hang, and SIGTERM ends the process while a
call is in progress."""

from __future__ import annotations

import signal
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_monitor.k8s.kubeapi import KubeApi, KubeApiError
from neuron_monitor.taint.rules import build_rule
from neuron_monitor.taint.writer import TaintApi
from tests.k8s.apiserver_stub import StubApiServer
from tests.taint.helpers import DEADLINE, DRIVER, NODE, TaintProcess, api_server, health_report, wait_for


@pytest.fixture
def server() -> Iterator[StubApiServer]:
    s = api_server()
    yield s
    s.stop()


def taint_api(server: StubApiServer, deadline: float, timeout: float = 5.0) -> TaintApi:
    return TaintApi(KubeApi(server.url, None, None, timeout=timeout), NODE, DRIVER, deadline=deadline, backoff=0.05)


def test_server_errors_are_retried_and_the_call_succeeds(server: StubApiServer) -> None:
    server.fail_next = [503, 429, 500]
    api = taint_api(server, deadline=DEADLINE)
    api.create(build_rule(NODE, DRIVER, NODE, "neurondevice1", "ecc_uncorrected", "None"))
    assert api.retries == 3 and server.writes == {"POST": 1}


def test_a_refusal_is_not_retried(server: StubApiServer) -> None:
    server.fail_next = [403, 403, 403]
    api = taint_api(server, deadline=DEADLINE)
    with pytest.raises(KubeApiError) as e:
        api.create(build_rule(NODE, DRIVER, NODE, "neurondevice1", "ecc_uncorrected", "None"))
    assert e.value.status == 403 and api.retries == 0 and server.fail_next == [403, 403]


def test_a_slow_server_meets_the_total_deadline_of_the_call(server: StubApiServer) -> None:
    server.rule_delay = 3.0  # every answer comes after the call's whole budget
    api = taint_api(server, deadline=1.0, timeout=0.6)
    start = time.monotonic()
    with pytest.raises(KubeApiError) as e:
        api.list_own()
    elapsed = time.monotonic() - start
    assert e.value.status == 0 and "within" in str(e.value)
    assert server.count("devicetaintrules") <= api.attempts
    assert elapsed < DEADLINE  # bounded (the deadline is 1 s; generous for a loaded machine)


def test_unanswered_calls_never_stop_the_loop_and_are_counted(server: StubApiServer, tmp_path: Path) -> None:
    server.rule_delay = 2.0
    taint = TaintProcess(server, tmp_path, "--grace", "0", "--api-deadline", "0.5")
    try:
        taint.feed({1: "unhealthy"}, lambda: 'status="no_answer"' in _m(taint), "a counted timeout")
        server.rule_delay = 0.0
        taint.feed({1: "unhealthy"}, lambda: server.taint_rules, "the rule once the server answers")
        summary = taint.close()
        assert summary["api_errors"]["no_answer"] >= 1 and summary["changes"]["create"] == 1
    finally:
        taint.kill()


def test_sigterm_ends_the_process_while_a_call_hangs(server: StubApiServer, tmp_path: Path) -> None:
    server.rule_delay = 600.0
    taint = TaintProcess(server, tmp_path, "--grace", "0", "--api-deadline", "600")
    try:
        taint.send(health_report({1: "unhealthy"}))
        wait_for("a request in progress", lambda: server.count("devicetaintrules") >= 1)
        taint.proc.send_signal(signal.SIGTERM)
        assert taint.proc.wait(DEADLINE) == 0
        assert taint.summary()["reason"] == "SIGTERM"
    finally:
        taint.kill()


# the command's main with one hook: the engine's first step frees an object whose finalizer takes SIGTERM, so the
# Stopped its handler raises there is dropped by Python ("Exception ignored in ...")
LOST_IN_A_FINALIZER = textwrap.dedent(
    """
    import signal, sys
    from neuron_monitor.taint import cli, engine

    class Freed:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)
            sum(range(100))

    step = engine.Engine.step
    def first_step(self, now):
        engine.Engine.step = step
        Freed()
        step(self, now)
    engine.Engine.step = first_step
    sys.exit(cli.main())
    """
)


def test_a_stop_lost_in_a_finalizer_still_ends_the_process(server: StubApiServer, tmp_path: Path) -> None:
    taint = TaintProcess(server, tmp_path, run=("-c", LOST_IN_A_FINALIZER))
    try:
        assert taint.proc.wait(DEADLINE) == 0, taint.stderr()[-2000:]
        assert taint.summary()["reason"] == "SIGTERM"
    finally:
        taint.kill()


# the same, and then the step hangs (an API call that never returns): nothing in the loop sees the stop flag again
LOST_AND_HANGING = textwrap.dedent(
    """
    import signal, sys, time
    from neuron_monitor.taint import cli, engine

    class Freed:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)
            sum(range(100))

    def hanging_step(self, now):
        Freed()
        time.sleep(600)
    engine.Engine.step = hanging_step
    sys.exit(cli.main())
    """
)


def test_a_stop_lost_in_a_finalizer_during_a_call_that_hangs_ends_at_the_watchdog(
    server: StubApiServer, tmp_path: Path
) -> None:
    taint = TaintProcess(server, tmp_path, run=("-c", LOST_AND_HANGING))
    try:
        assert taint.proc.wait(DEADLINE) == 0, taint.stderr()[-2000:]
        assert "neuron-monitor-taint: SIGTERM: stopping took over" in taint.stderr()
    finally:
        taint.kill()


def _m(taint: TaintProcess) -> str:
    try:
        return taint.metrics.read_text()
    except FileNotFoundError:
        return ""
