"""The supervisor's pure parts: what a worker's exit status leads to, the restart backoff, and the merged metrics.

``streams.worker.supervision`` decides from a worker process's exit status whether it is restarted or everything
stops (and with which status); ``streams.worker.merged_metrics`` turns several workers' Prometheus pages into one
that a scrape accepts.
"""

from __future__ import annotations

import re
import signal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pairjudge.streams.cli.worker import EXIT_DATA_DIR_IN_USE, EXIT_UNVERIFIED_RUNTIME
from pairjudge.streams.faust_compat.recovery_watch import EXIT_RECOVERY_STALLED
from pairjudge.streams.worker.error_budget import BROKEN_DEPLOY_EXIT
from pairjudge.streams.worker.merged_metrics import merge, render, supervisor_families
from pairjudge.streams.worker.supervision import (
    EXIT_START_UP_REFUSED,
    EXIT_UNCLEAN_STOP,
    Backoff,
    after_exit,
    describe,
    shutdown_status,
)

# --- exit statuses --------------------------------------------------------------------------------------


def test_the_statuses_are_the_ones_the_worker_exits_with() -> None:
    assert EXIT_UNVERIFIED_RUNTIME == EXIT_DATA_DIR_IN_USE == EXIT_START_UP_REFUSED == 2
    assert (EXIT_RECOVERY_STALLED, BROKEN_DEPLOY_EXIT) == (3, 4)


@pytest.mark.parametrize(
    ("status", "restart", "stop_with"),
    [
        (2, False, 2),  # a start-up refusal: it would be refused again
        (4, False, 4),  # a broken deploy: every process runs the same code
        (3, True, None),  # a stalled table recovery: a restart is the cure
        (1, True, None),  # a crash
        (0, True, None),  # stopped though nobody asked it to
        (-signal.SIGKILL, True, None),  # killed from outside (the OOM killer, a person)
        (-signal.SIGSEGV, True, None),
    ],
)
def test_which_exits_are_restarted_and_which_stop_everything(status: int, restart: bool, stop_with: int | None) -> None:
    decision = after_exit(status, stopping=False)
    assert (decision.restart, decision.stop_with) == (restart, stop_with)
    assert decision.why == describe(status)


@pytest.mark.parametrize("status", [0, 1, 2, 3, 4, -signal.SIGKILL])
def test_nothing_is_restarted_or_decided_while_everything_stops(status: int) -> None:
    decision = after_exit(status, stopping=True)
    assert (decision.restart, decision.stop_with) == (False, None)


def test_exits_are_described_as_people_read_them() -> None:
    assert describe(3) == "exit status 3 (table recovery stalled)"
    assert describe(4) == "exit status 4 (stopped by a run of unexpected errors: a broken deploy)"
    assert describe(2) == "exit status 2 (refused to start)"
    assert describe(1) == "exit status 1 (crashed)"
    assert describe(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe(-200) == "killed by signal 200"


def test_the_supervisors_status_after_everything_stopped() -> None:
    # A worker's decision wins over how the others stopped.
    assert shutdown_status([0, -signal.SIGKILL], stop_with=4) == 4
    assert shutdown_status([0], stop_with=2) == 2
    # A signal stopped it: clean when every worker stopped on SIGTERM (0 from Faust, or the signal itself when it
    # came before Faust's handler), unclean when one had to be killed or failed on the way out.
    assert shutdown_status([0, 0], stop_with=None) == 0
    assert shutdown_status([0, -signal.SIGTERM, -signal.SIGINT], stop_with=None) == 0
    assert shutdown_status([], stop_with=None) == 0  # every worker was waiting for a restart
    assert shutdown_status([0, -signal.SIGKILL], stop_with=None) == EXIT_UNCLEAN_STOP
    assert shutdown_status([1], stop_with=None) == EXIT_UNCLEAN_STOP


def test_the_backoff_doubles_on_quick_exits_and_resets_after_a_stable_run() -> None:
    backoff = Backoff(first_s=1.0, max_s=8.0, stable_s=60.0)
    assert [backoff.delay(ran_for_s=0.5) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff.delay(ran_for_s=60.0) == 1.0  # it had run long enough: the failures are not a loop
    assert backoff.delay(ran_for_s=3.0) == 2.0
    # Its first exit, however quick, waits first_s.
    assert Backoff(first_s=0.5).delay(ran_for_s=0.0) == 0.5


# --- merged metrics ----------------------------------------------------------------------------------------

PAGE = """\
# HELP pairjudge_outcomes_total Outcomes published
# TYPE pairjudge_outcomes_total counter
pairjudge_outcomes_total{{pairjudge_outcome="verdict",pairjudge_stage="primary"}} {verdicts}
# HELP pairjudge_worker_ready 1 when /readyz answers 200, else 0
# TYPE pairjudge_worker_ready gauge
pairjudge_worker_ready {ready}
# HELP gen_ai_client_operation_duration_seconds Judge call latency
# TYPE gen_ai_client_operation_duration_seconds histogram
gen_ai_client_operation_duration_seconds_bucket{{le="0.5"}} {fast}
gen_ai_client_operation_duration_seconds_bucket{{le="+Inf"}} {calls}
gen_ai_client_operation_duration_seconds_count {calls}
gen_ai_client_operation_duration_seconds_sum 3.5
"""

_META = re.compile(r"^# (HELP|TYPE) (\S+)")


def exposition_problems(text: str) -> list[str]:
    """What a Prometheus scrape would refuse in ``text``: a family described twice, or its samples not together."""
    problems: list[str] = []
    described: set[tuple[str, str]] = set()
    finished: set[str] = set()
    current: str | None = None
    for line in text.splitlines():
        meta = _META.match(line)
        if meta:
            kind, name = meta.groups()
            if (kind, name) in described:
                problems.append(f"second {kind} line for {name}")
            described.add((kind, name))
            if name != current:
                if name in finished:
                    problems.append(f"{name} described again after other families")
                if current is not None:
                    finished.add(current)
                current = name
    return problems


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_check_refuses_pages_simply_put_together() -> None:
    """The negative control: concatenated pages describe every family twice."""
    one = PAGE.format(verdicts=1, ready=1, fast=1, calls=2)
    problems = exposition_problems(one + one)
    assert "second TYPE line for pairjudge_outcomes_total" in problems
    assert "pairjudge_outcomes_total described again after other families" in problems
    assert exposition_problems(one) == []


def test_pages_are_merged_with_each_sample_labelled_by_its_process() -> None:
    pages = {
        "0": PAGE.format(verdicts=5, ready=1, fast=3, calls=4),
        "1": PAGE.format(verdicts=7, ready=0, fast=1, calls=6),
    }
    text = render(merge(pages) + supervisor_families({"0": True, "1": False}, {"0": 0, "1": 2})).decode()
    assert exposition_problems(text) == [], text
    assert text.count("# TYPE pairjudge_outcomes_total counter") == 1
    samples = _samples(text)
    verdicts = "pairjudge_outcomes_total"
    labels = (("pairjudge_outcome", "verdict"), ("pairjudge_stage", "primary"))
    assert samples[(verdicts, (*labels, ("process", "0")))] == 5
    assert samples[(verdicts, (*labels, ("process", "1")))] == 7
    assert samples[("pairjudge_worker_ready", (("process", "1"),))] == 0
    bucket = "gen_ai_client_operation_duration_seconds_bucket"
    assert samples[(bucket, (("le", "0.5"), ("process", "0")))] == 3
    assert samples[(bucket, (("le", "+Inf"), ("process", "1")))] == 6
    assert samples[("gen_ai_client_operation_duration_seconds_count", (("process", "1"),))] == 6
    # The supervisor's own series.
    assert samples[("pairjudge_supervisor_processes", ())] == 2
    assert samples[("pairjudge_supervisor_process_up", (("process", "1"),))] == 0
    assert samples[("pairjudge_supervisor_restarts_total", (("process", "1"),))] == 2
    # Every sample says which process it came from (the supervisor's count is the one exception: it is the whole's).
    unlabelled = {name for (name, labels) in samples if "process" not in dict(labels)}
    assert unlabelled == {"pairjudge_supervisor_processes"}


def test_a_page_that_does_not_parse_or_disagrees_is_left_out() -> None:
    good = PAGE.format(verdicts=1, ready=1, fast=1, calls=1)
    disagreeing = "# TYPE pairjudge_worker_ready counter\npairjudge_worker_ready 3\n"
    families = merge({"0": good, "1": "pairjudge_outcomes_total{unclosed 1\n", "2": disagreeing})
    text = render(families).decode()
    assert exposition_problems(text) == []
    processes = {s.labels["process"] for f in text_string_to_metric_families(text) for s in f.samples}
    assert processes == {"0"}
