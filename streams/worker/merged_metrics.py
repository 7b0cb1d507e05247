"""One Prometheus page from several worker processes' ``/metrics``: every sample labelled with its process.

Concatenating the pages would not do: each has its own ``# HELP`` and ``# TYPE`` line for every family, and a
scrape that sees a family described twice fails (Prometheus: "second TYPE line for metric name"), and the
processes' samples would be the same series. So each page is parsed, each sample gets ``process="<i>"``,
and the samples of a family from every process are rendered together under one description.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

#: The label that tells the processes' samples apart.
PROCESS_LABEL = "process"


def merge(pages: Mapping[str, str], *, label: str = PROCESS_LABEL) -> list[Metric]:
    """The families of every page (process id -> Prometheus text), each sample labelled ``label=<process id>``.

    A page that does not parse is left out (its process is then missing from the scrape, which the
    supervisor's own ``pairjudge_supervisor_process_up`` shows); a family whose type differs from the one
    another process gave it (two versions mid-upgrade) keeps the first process's type and drops the rest.
    """
    families: dict[str, Metric] = {}
    for process, text in pages.items():
        try:
            parsed = list(text_string_to_metric_families(text))
        except ValueError as exc:
            log.warning("process %s: its /metrics did not parse (%s); left out of this scrape", process, exc)
            continue
        for family in parsed:
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            elif merged.type != family.type:
                log.warning(
                    "process %s: %s is a %s, another process's a %s; left out",
                    process,
                    family.name,
                    family.type,
                    merged.type,
                )
                continue
            merged.samples.extend(s._replace(labels={**s.labels, label: process}) for s in family.samples)
    return list(families.values())


def supervisor_families(up: Mapping[str, bool], restarts: Mapping[str, int]) -> list[Metric]:
    """The supervisor's own series: how many processes it keeps, which run, and how often each was restarted."""
    processes = GaugeMetricFamily(
        "pairjudge_supervisor_processes", "Worker processes this supervisor keeps running (--processes)"
    )
    processes.add_metric([], len(up))
    running = GaugeMetricFamily(
        "pairjudge_supervisor_process_up",
        "1 while the worker process runs, 0 while it waits for a restart",
        labels=[PROCESS_LABEL],
    )
    restarted = CounterMetricFamily(
        "pairjudge_supervisor_restarts",
        "Times the supervisor started a worker process again after it exited",
        labels=[PROCESS_LABEL],
    )
    for process, is_up in up.items():
        running.add_metric([process], 1 if is_up else 0)
        restarted.add_metric([process], restarts.get(process, 0))
    return [processes, running, restarted]


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def render(families: Iterable[Metric]) -> bytes:
    """Prometheus text (``CONTENT_TYPE_LATEST``) for ``families``: one HELP and TYPE line each."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)
