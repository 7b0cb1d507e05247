"""The composition root: settings in, a wired Faust app out.

``create_app(settings)`` builds the judge, the policy, telemetry, the topics and the agents. Nothing
else reads settings or builds these parts, so a test can hand in a scripted judge and an in-memory
span exporter and get the same wiring the worker runs.
"""

from __future__ import annotations

import dataclasses
import logging
import tomllib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import faust
from pydantic import TypeAdapter

from agents.judge import Judge
from schemas import InlineRubric
from streams.control import follow_control as follow_control_topic
from streams.judges.factory import JudgeStack, build_judge_stack
from streams.pipeline import JudgePanel, Origin, Outgoing, Pipeline, PolicyHolder
from streams.settings import Settings
from streams.telemetry import Telemetry

log = logging.getLogger(__name__)


@dataclass
class PairjudgeApp:
    faust_app: faust.App
    pipeline: Pipeline
    topics: dict[str, faust.TopicT]
    judge_agent: Any
    tiebreak_agent: Any
    telemetry: Telemetry
    settings: Settings
    stacks: tuple[JudgeStack, ...] = ()

    async def aclose(self) -> None:
        for stack in self.stacks:
            await stack.aclose()


def _broker_url(bootstrap_servers: str) -> str:
    hosts = [h.strip() for h in bootstrap_servers.split(",") if h.strip()]
    return ";".join(f"kafka://{h}" for h in hosts)


def load_catalog(settings: Settings) -> dict[str, InlineRubric]:
    """Named rubrics: those in the config file, plus a TOML file of ``[rubrics.<name>]`` tables."""
    catalog = dict(settings.rubrics)
    if settings.rubrics_file is not None:
        data = tomllib.loads(settings.rubrics_file.read_text(encoding="utf-8"))
        adapter: TypeAdapter[InlineRubric] = TypeAdapter(InlineRubric)
        catalog.update({name: adapter.validate_python(body) for name, body in data.get("rubrics", {}).items()})
    return catalog


def build_panel(settings: Settings) -> tuple[JudgePanel, tuple[JudgeStack, ...]]:
    """The configured judge, or jury, each wrapped for cost, resilience and caching."""
    main = build_judge_stack(settings.judge)
    jurors = tuple(build_judge_stack(juror) for juror in settings.jury)
    stacks = (main, *jurors)
    panel = JudgePanel(
        primary=tuple(s.judge for s in jurors) or (main.judge,),
        tiebreak=main.judge,
        breakers=tuple(s.breaker for s in stacks if s.breaker is not None),
    )
    return panel, stacks


def create_app(
    settings: Settings,
    *,
    judge: Judge | None = None,
    telemetry: Telemetry | None = None,
    catalog: Mapping[str, InlineRubric] | None = None,
    follow_control: bool = True,
) -> PairjudgeApp:
    """Wire the app. ``follow_control`` makes every worker read ``pairjudge.control`` for live settings
    (tests that drive agents through ``test_context()`` turn it off: no broker, no control topic)."""
    telemetry = telemetry or Telemetry(settings.telemetry)
    stacks: tuple[JudgeStack, ...] = ()
    if judge is not None:
        panel = JudgePanel.single(judge)
    else:
        panel, stacks = build_panel(settings)
    policy = settings.policy.to_policy()
    if settings.jury_quorum is not None:
        policy = dataclasses.replace(policy, jury_quorum=settings.jury_quorum)
    holder = PolicyHolder(policy, follows_control=follow_control)
    pipeline = Pipeline(
        judges=panel,
        policy=holder,
        telemetry=telemetry,
        catalog=catalog if catalog is not None else load_catalog(settings),
        max_event_bytes=settings.max_event_bytes,
    )
    kafka = settings.kafka
    app = faust.App(
        settings.worker.app_id,
        broker=_broker_url(kafka.bootstrap_servers),
        datadir=str(settings.worker.data_dir),
        # Topics are created explicitly (streams.topics); faust must not declare anything itself,
        # and the leader topic is not used.
        topic_allow_declare=False,
        topic_disable_leader=True,
        topic_partitions=kafka.partitions,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=kafka.session_timeout_s,
        broker_heartbeat_interval=kafka.heartbeat_interval_s,
        broker_commit_every=50,
        broker_commit_interval=1.0,
        web_enabled=settings.worker.web_enabled,
        web_bind=settings.worker.web_host,
        web_host=settings.worker.web_host,
        web_port=settings.worker.web_port,
        # Bounded per-partition buffers: when judges are slow the worker stops fetching, it does not queue.
        stream_buffer_maxsize=max(64, settings.worker.concurrency * 4),
        producer_acks=-1,
    )

    def raw_topic(kind: str) -> faust.TopicT:
        return app.topic(
            settings.topics.name(kind),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=kafka.partitions,
        )

    topics = {kind: raw_topic(kind) for kind in ("pairs", "verdicts", "tiebreak", "review", "deadletter")}

    async def publish(messages: list[Outgoing]) -> None:
        # Wait for the broker's ack before the input offset can be committed: at-least-once.
        for message in messages:
            fut = await topics[message.kind].send(key=message.key, value=message.value, headers=message.headers)
            await fut

    async def consume(stream: faust.StreamT[bytes], handler: Any) -> AsyncIterator[None]:
        async for event in stream.events():
            msg = event.message
            origin = Origin(topic=msg.topic, partition=msg.partition, offset=msg.offset, key=msg.key)
            await publish(await handler(event.value, event.headers, origin))
            yield None

    @app.agent(topics["pairs"], name="pairjudge.judge", concurrency=settings.worker.concurrency)
    async def judge_agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, pipeline.on_pair):
            yield None

    @app.agent(topics["tiebreak"], name="pairjudge.tiebreak", concurrency=settings.worker.concurrency)
    async def tiebreak_agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, pipeline.on_tiebreak):
            yield None

    async def control_follower() -> None:
        try:
            await follow_control_topic(settings, holder)
        except Exception as exc:
            # Without its control state the worker must not judge: stop it loudly instead of stalling.
            log.exception("following %s failed", settings.topics.name("control"))
            await app.crash(exc)

    if follow_control:
        app.task(control_follower)

    return PairjudgeApp(
        faust_app=app,
        pipeline=pipeline,
        topics=topics,
        judge_agent=judge_agent,
        tiebreak_agent=tiebreak_agent,
        telemetry=telemetry,
        settings=settings,
        stacks=stacks,
    )
