"""The settings of the judging path: Kafka, control, topics, the worker, health, the judge and the policy.

One pydantic model per ``PAIRJUDGE_<SECTION>__*`` group, with its checks (what watches the judge is in
``streams.config.oversight``). ``streams.config.settings.Settings`` nests them; each field's comment is its
documentation (the docs' settings reference is generated from these models).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from pairjudge.agents.policy import Policy
from pairjudge.schemas.kinds import SpendAction
from pairjudge.streams.config.prices import ModelPrice

#: The fields ``PolicySettings.to_policy`` hands over.
_POLICY_FIELDS = frozenset(field.name for field in dataclasses.fields(Policy))
#: The policy's own defaults: ``PolicySettings`` takes each of its fields' default from here, so the two cannot
#: drift apart (what the settings add is the bounds, and the words for the reference).
_DEFAULTS = Policy()


class _Section(BaseModel):
    # hide_input_in_errors: a validation error must never echo a value, which may be a secret.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class KafkaSettings(_Section):
    #: The brokers every client (worker, CLI, review service) starts from: comma-separated ``host:port``.
    bootstrap_servers: str = "127.0.0.1:9092"
    #: Partitions of each pairjudge topic and table changelog (control, thresholds and gate have one), fixed when
    #: the topics are created. It caps the workers of one group that judge at once: scale out with both.
    partitions: int = Field(default=4, ge=1)
    #: Replicas of each topic and changelog pairjudge creates (3 on a real cluster); used only when creating them.
    replication_factor: int = Field(default=1, ge=1)
    #: Seconds without a heartbeat before the group drops a worker and hands its partitions to the others.
    #: Tansu holds group joins for half the session timeout, so the demo uses 5 s; Kafka can go higher.
    session_timeout_s: float = Field(default=10.0, gt=0)
    #: Seconds between a worker's heartbeats to its consumer group; keep it well below ``session_timeout_s``.
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    #: Milliseconds a worker's producer holds a batch for more records before sending it. One broker
    #: connection carries one produce request at a time, so under load each request already takes what came
    #: meanwhile; the linger caps how often a trickle pays a request (a syscall and a broker round trip each)
    #: for a latency of at most this, small beside a judge call. ``bench.speed`` measured the choice
    #: (docs/operations/sizing.md#producer-and-fetcher).
    producer_linger_ms: float = Field(default=5.0, ge=0, le=1000)
    #: Records a worker's consumer takes from one fetch at most; unset, whatever the fetch brought (Faust's
    #: default). A flood then arrives in large fetches, and a trickle as it comes (a fetch returns as soon as
    #: there is a record). A cap of 50 cost 10-20 % of the throughput in ``bench.speed``, one of 500 nothing
    #: measurable (docs/operations/sizing.md#producer-and-fetcher).
    max_poll_records: int | None = Field(default=None, ge=1)
    #: How clients reach the brokers (streams.security.kafka_clients turns these into client configuration).
    #: ``SSL`` is TLS, with a client certificate for mutual TLS; ``SASL_SSL`` is a user name and password
    #: over TLS. ``SASL_PLAINTEXT`` is for loopback brokers only with ``PLAIN`` (it sends the password).
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    #: The SASL mechanism, with the ``SASL_*`` protocols only. ``PLAIN`` sends the password itself: over TLS only,
    #: or to a loopback broker.
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    #: The SASL user: required with the ``SASL_*`` protocols, refused at start-up with the others.
    sasl_username: str | None = None
    #: The SASL user's password (or ``sasl_password_file``): required with the ``SASL_*`` protocols, never logged.
    sasl_password: SecretStr | None = None
    #: A file holding the password (Docker/Kubernetes secrets); wins over ``sasl_password`` when set.
    sasl_password_file: Path | None = None
    #: The CA bundle (PEM) the brokers' certificates are checked against; unset: the system's CAs.
    #: It, the certificate and the key apply to ``SSL`` and ``SASL_SSL`` only (refused with the other protocols).
    ssl_cafile: Path | None = None
    #: A client certificate (PEM) for mutual TLS; give ``ssl_keyfile`` with it.
    ssl_certfile: Path | None = None
    #: The client certificate's private key (PEM); give ``ssl_certfile`` with it.
    ssl_keyfile: Path | None = None
    #: The private key's password, if it is encrypted.
    ssl_key_password: SecretStr | None = None
    #: A file holding the key's password; wins over ``ssl_key_password`` when set.
    ssl_key_password_file: Path | None = None
    #: Check that a broker's certificate names the host connected to. Switch off only for a test cluster.
    ssl_check_hostname: bool = True

    def resolved_sasl_password(self) -> SecretStr | None:
        return read_secret(self.sasl_password, self.sasl_password_file, "PAIRJUDGE_KAFKA__SASL_PASSWORD_FILE")

    def resolved_ssl_key_password(self) -> SecretStr | None:
        return read_secret(self.ssl_key_password, self.ssl_key_password_file, "PAIRJUDGE_KAFKA__SSL_KEY_PASSWORD_FILE")

    @model_validator(mode="after")
    def _security_usable(self) -> KafkaSettings:
        # Fail at start-up naming the variable, never a value (streams.security.kafka_clients builds the clients).
        from pairjudge.streams.security.kafka_clients import check_kafka_security

        check_kafka_security(self)
        return self


class ControlSettings(_Section):
    """Signed control updates (streams.control.signing): HMAC-SHA256 with a key shared by the operators'
    tools and every worker. With a key, workers ignore unsigned or badly signed updates; without one,
    anyone who may write the control topic may change every worker's policy."""

    #: The shared HMAC-SHA256 key, at least 16 bytes; empty or unset: updates are neither signed nor checked.
    signing_key: SecretStr | None = None
    #: A file holding the key; wins over ``signing_key`` when set.
    signing_key_file: Path | None = None
    #: The name of the key, sent with each signature (so keys can be told apart when one is rotated).
    key_id: str = Field(default="default", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:@-]+$")

    def resolved_signing_key(self) -> SecretStr | None:
        key = read_secret(self.signing_key, self.signing_key_file, "PAIRJUDGE_CONTROL__SIGNING_KEY_FILE")
        if key is not None and not key.get_secret_value():
            return None
        return key

    @model_validator(mode="after")
    def _key_usable(self) -> ControlSettings:
        key = self.resolved_signing_key()
        if key is not None and len(key.get_secret_value().encode()) < 16:
            raise ValueError(
                "PAIRJUDGE_CONTROL__SIGNING_KEY (or its _FILE variant) is too short: use at least 16 random bytes"
            )
        return self


class TopicSettings(_Section):
    #: Topics are named ``<prefix>.<kind>``, one for each topic kind of the events reference (``schemas.kinds.TOPICS``);
    #: every process of a deployment shares it.
    prefix: str = "pairjudge"

    def name(self, kind: str) -> str:
        return f"{self.prefix}.{kind}"


class WorkerSettings(_Section):
    #: The Faust app id: the workers' consumer group (workers sharing the work share it) and the prefix of the
    #: tables' changelog topics, ``<app_id>-<table>-changelog``.
    app_id: str = "pairjudge"
    #: Pairs judged at once per worker and stage (the judge and tie-break agents' concurrency); each pair makes
    #: two judge calls at a time (two per juror).
    concurrency: int = Field(default=16, ge=1, le=1024)
    #: Worker processes ``pairjudge worker`` runs (its ``--processes`` wins over this). 1 runs the worker in the
    #: command's own process. More make the command a supervisor of that many worker processes in the one
    #: consumer group, each with ``<data_dir>/proc-<i>``, restarted when they fail, behind one health endpoint
    #: (streams.worker.supervisor): a worker judges on one core, so this is how one host or pod uses several.
    #: ``concurrency`` and the judge's ``max_concurrency`` stay per process.
    processes: int = Field(default=1, ge=1, le=64)
    #: Faust's data directory (its tables' local state), made owner-only (0700) when the worker starts.
    data_dir: Path = Path(".pairjudge-data")
    #: Where the worker's tables live: ``rocksdb`` (on disk under ``data_dir``, one RocksDB database per table and
    #: partition: memory stays flat whatever the retention, and a restart reads only the changelog written since
    #: the data was last there) or ``memory`` (every entry in memory, about 10 KB a pair kept, and every start
    #: re-reads the whole changelog). With ``rocksdb`` every worker needs a ``data_dir`` of its own.
    table_store: Literal["rocksdb", "memory"] = "rocksdb"
    #: Run Faust's own web server. Off, the worker binds nothing for Faust; probes and metrics are ``health``'s.
    web_enabled: bool = False
    #: Where Faust's web server binds, when on. Faust binds every interface by default; we never do unless told to.
    web_host: str = "127.0.0.1"
    #: The port of Faust's web server, when ``web_enabled``.
    web_port: int = 6066
    #: The worker's log level, a Python logging name (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``), Faust's too.
    log_level: str = "WARNING"
    #: How long a published outcome is kept for redeliveries of its pair (streams.worker.published).
    outcome_retention_s: float = Field(default=86_400.0, gt=0)
    #: A table recovery that reads no changelog record for this long while records remain makes the worker
    #: stop and exit with status 3, so its supervisor restarts it and the group rebalances
    #: (streams.faust_compat.recovery_watch). 0 turns the watch off.
    recovery_stall_s: float = Field(default=120.0, ge=0)
    #: On SIGTERM, how long pairs already being judged may take to finish (and be committed) before
    #: the rest are handed back uncommitted (streams.faust_compat.inflight). An orchestrator's own grace must exceed it.
    shutdown_grace_s: float = Field(default=30.0, ge=0, le=3600)
    #: Unexpected errors (bugs, not bad input) tolerated within ``internal_error_window_s``: each one dead-letters
    #: its pair as ``internal_error`` with an alert; the next one stops the worker without committing, exit status
    #: 4, because a run of them is a broken deploy, not bad input (streams.worker.error_budget).
    internal_error_limit: int = Field(default=5, ge=0, le=100_000)
    #: The window, in seconds, over which ``internal_error_limit`` counts unexpected errors.
    internal_error_window_s: float = Field(default=60.0, gt=0)
    #: A pair whose input offset has stopped a worker this many times is dead-lettered as ``crashed_worker``
    #: instead of being handled again, so one poison pill cannot stop its partition for ever.
    crash_loop_limit: int = Field(default=3, ge=1, le=100)
    #: Start even when faust-streaming, mode-streaming or aiokafka is not the version the Faust overrides were
    #: verified on (``streams.faust_compat.VERIFIED_VERSIONS``); a warning names them. Off, such a worker
    #: refuses to start (exit status 2): under another version an override may never be called and pairs can
    #: be lost. Turn on only after the hook tests pass on that runtime (docs/design.md §10).
    allow_unverified_runtime: bool = False


class ShadowSettings(_Section):
    """The shadow stage (``[shadow]``, docs/guides/production-traffic.md): captures in, pairs out."""

    #: The experiments file (TOML, YAML or JSON: a list under ``experiments``, ``schemas.experiments``). Unset: the
    #: stage reads the captures and makes no pair.
    experiments_file: Path | None = None
    #: Asks of a challenger whose answer a pair cannot hold (refused, filtered, empty, unreadable) or that stays
    #: down through its HTTP retries, before the capture is dead-lettered with the reason.
    attempts: int = Field(default=3, ge=1, le=20)
    #: Retries of one ask on a failed connection, a timeout or a 429/5xx (with backoff, ``Retry-After`` honoured).
    http_retries: int = Field(default=3, ge=0, le=20)
    #: The first backoff between asks and between HTTP retries, in seconds; it doubles up to ``backoff_max_s``.
    backoff_s: float = Field(default=1.0, gt=0)
    #: The longest backoff between two asks or two HTTP retries, in seconds.
    backoff_max_s: float = Field(default=30.0, gt=0)
    #: Seconds to connect to the challenger.
    connect_timeout_s: float = Field(default=10.0, gt=0)
    #: Seconds to wait for the challenger's whole reply, once connected.
    timeout_s: float = Field(default=120.0, gt=0)
    #: Challenger calls in flight at once per worker, per challenger.
    max_concurrency: int = Field(default=16, ge=1, le=1024)
    #: Allow a challenger key over plain HTTP to a host other than this machine (never in production).
    allow_cleartext_key: bool = False


class GatewaySettings(_Section):
    """``pairjudge gateway`` (``[gateway]``, docs/guides/gateway.md): a reverse proxy in front of the champion that
    captures a share of its exchanges."""

    #: The champion's base URL, without ``/v1``: a request for ``/v1/chat/completions`` goes to
    #: ``<upstream>/v1/chat/completions``. Required to start.
    upstream: str = ""
    #: Where the gateway listens: loopback unless told otherwise (a container sets 0.0.0.0).
    host: str = Field(default="127.0.0.1", min_length=1)
    #: The port the gateway listens on (0: any free one).
    port: int = Field(default=8090, ge=0, le=65535)
    #: The share of exchanges captured when there is no experiments file (``shadow.experiments_file``); with
    #: one, an exchange is captured when it is drawn into at least one experiment's share, by the shadow stage's
    #: own draw (so every capture sent is one the stage keeps).
    share: float = Field(default=1.0, ge=0.0, le=1.0)
    #: The app's route, as the experiments' ``routes`` select on; a request's ``X-Pairjudge-Route`` header wins.
    route: str = Field(default="", max_length=200)
    #: The app's prompt version; a request's ``X-Pairjudge-Prompt-Version`` header wins.
    prompt_version: str = Field(default="", max_length=100)
    #: Request headers whose values go into a capture's hints (comma-separated names), for the experiments'
    #: ``headers`` selectors. A name that looks like a credential is refused at start.
    hint_headers: str = ""
    #: Seconds to connect to the champion (then 502).
    connect_timeout_s: float = Field(default=10.0, gt=0)
    #: Seconds of silence from the champion before the gateway gives up on it (then 504, or the stream is cut).
    read_timeout_s: float = Field(default=600.0, gt=0)
    #: Connections kept open to the champion, per gateway process.
    max_connections: int = Field(default=1000, ge=1)
    #: Captures waiting for Kafka at most; more are dropped and counted (``buffer_full``). Bounds the memory.
    max_buffered: int = Field(default=1000, ge=1)
    #: The largest request or response body captured, in bytes; a larger exchange is passed through uncaptured
    #: and counted (``too_large``).
    max_capture_bytes: int = Field(default=1_000_000, ge=1024)


class HealthSettings(_Section):
    """The worker's health and metrics server (streams.worker.health_server): ``/livez``, ``/readyz``, ``/metrics``."""

    #: Where the server binds: loopback unless told otherwise; a container sets 0.0.0.0 so its orchestrator's
    #: probes reach it.
    host: str = Field(default="127.0.0.1", min_length=1)
    #: The server's port; 0 (the default) turns the server off, and with it the metrics (no reader: no-op instruments).
    port: int = Field(default=0, ge=0, le=65535)


class JudgeSettings(_Section):
    #: The judge: ``offline`` (the embedded heuristic judge, no network), ``openai`` (any OpenAI-compatible server)
    #: or ``anthropic`` (the Messages API: set ``base_url`` to the API root, e.g. https://api.anthropic.com).
    kind: Literal["offline", "openai", "anthropic"] = "offline"
    #: The endpoint: for ``openai`` the API prefix (requests go to ``<base_url>/chat/completions``), for
    #: ``anthropic`` the API root. The offline judge ignores it and every setting from here to ``max_concurrency``.
    base_url: str = "http://127.0.0.1:8080/v1"
    #: The model asked for; it names the judge in verdicts, drift series and cache keys. The offline judge is
    #: always ``pairjudge-heuristic``.
    model: str = "pairjudge-heuristic"
    #: Your label for this judge's version (a model snapshot, a deployment), recorded with every verdict: a new
    #: one opens new drift series and new cache keys.
    version: str = ""
    #: The API key (``Authorization: Bearer`` for ``openai``, ``x-api-key`` for ``anthropic``), never logged.
    #: Required for ``anthropic`` and for an OpenAI-compatible ``base_url`` that is not loopback.
    api_key: SecretStr | None = None
    #: A file holding the key (Docker/Kubernetes secrets); wins over ``api_key`` when set.
    api_key_file: Path | None = None
    #: How ``openai`` asks for the reply schema: ``json_schema`` (strict), ``json_object_schema`` (llama.cpp),
    #: ``none`` (plain JSON), or ``auto``: each in turn as far as the server refuses them. Anthropic ignores it.
    response_format: Literal["auto", "json_schema", "json_object_schema", "none"] = "json_schema"
    #: Ask an ``openai`` judge for token probabilities (``logprobs`` with ``top_logprobs``) so a verdict's confidence
    #: can come from the judge's probability for each side (docs/guides/judges.md). A server that refuses them is
    #: asked without, for good. Anthropic has none and ignores it.
    logprobs: bool = True
    #: How many alternatives per token to ask for (1 to 20); the other side's letter must be among them.
    top_logprobs: int = Field(default=5, ge=1, le=20)
    #: The sampling temperature sent with every call; part of the judge's identity and of the cache key.
    temperature: float = 0.0
    #: A sampling seed sent to OpenAI-compatible servers, which use it where they support it; unset: none is sent.
    #: The Messages API has no seed.
    seed: int | None = None
    #: The most tokens a reply may have, per call; a reply cut off by it fails validation and is re-asked.
    max_tokens: int = Field(default=1024, ge=16)
    #: Seconds to wait for a connection to the judge, per attempt.
    connect_timeout_s: float = Field(default=5.0, gt=0)
    #: Seconds to wait for each read of the reply, per attempt; a whole attempt gets at most connect + read.
    read_timeout_s: float = Field(default=60.0, gt=0)
    #: Retries after the first attempt of a call that failed in transport (a timeout, a refused connection) or got
    #: 408, 429, 500, 502, 503 or 504, with jittered backoff honouring ``Retry-After``; then the call is an outage.
    max_retries: int = Field(default=3, ge=0)
    #: Calls in flight at once from one worker to this judge (also its HTTP connection pool's size).
    max_concurrency: int = Field(default=32, ge=1)
    #: The persistent response cache (streams.judges.cache): one directory shared by a host's workers.
    #: Never used for the offline judge, which is cheap and deterministic.
    cache_enabled: bool = True
    #: The cache's directory, made owner-only (0700); workers on one host may share it (run them as one user).
    cache_dir: Path = Path(".pairjudge-cache")
    #: The cache's bound on disk, in MiB; past it, the least recently stored replies are evicted first.
    cache_size_mb: int = Field(default=512, ge=1)
    #: Drop cached replies after this long (e.g. when a model alias may be re-pointed); None keeps them.
    cache_ttl_s: float | None = Field(default=None, gt=0)
    #: The circuit breaker (streams.judges.breaker): consecutive outages (calls still failing after their retries)
    #: that open it. A refusal (4xx) or an invalid reply is an answer, not an outage.
    breaker_failures: int = Field(default=5, ge=1)
    #: Seconds an open breaker refuses calls before it lets one probe through; doubles on every failed probe.
    breaker_cooldown_s: float = Field(default=5.0, gt=0)
    #: The most, in seconds, that the doubling cooldown grows to (never less than ``breaker_cooldown_s``).
    breaker_max_cooldown_s: float = Field(default=60.0, gt=0)
    #: Once the cooldown has grown, how often the open breaker checks the judge with a GET of its model
    #: list; an answer lets the half-open probe go at once, so a judge back from a long outage is used
    #: within about this long instead of the rest of its cooldown. 0 turns the checks off. The offline
    #: judge has nothing to check.
    breaker_probe_interval_s: float = Field(default=2.0, ge=0)
    #: US dollars per million tokens by model name, as JSON:
    #: ``PAIRJUDGE_JUDGE__PRICES='{"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10}}'``.
    #: A model missing here has an unknown cost (None), not zero.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    #: The ``anthropic-version`` header sent by the Anthropic judge (``kind = "anthropic"`` only).
    anthropic_version: str = "2023-06-01"
    #: Allow sending the API key over plain ``http://`` to a host that is not loopback. Off: such a
    #: ``base_url`` with a key stops the worker at start-up (streams.security.cleartext).
    allow_cleartext_key: bool = False

    def resolved_api_key(self) -> SecretStr | None:
        return read_secret(self.api_key, self.api_key_file, "PAIRJUDGE_JUDGE__API_KEY_FILE")


def read_secret(value: SecretStr | None, path: Path | None, setting: str) -> SecretStr | None:
    """The secret in the file at ``path`` when one is given, else ``value``."""
    if path is None:
        return value
    try:
        return SecretStr(path.read_text().strip())
    except OSError as exc:
        # Name the setting and the path, never a value.
        raise ValueError(f"{setting}: cannot read {path}: {exc.strerror}") from None


class TierSettings(JudgeSettings):
    """One tier of the judge cascade (``[[tiers]]`` tables, cheap first; ``agents.cascade``): a judge, as in
    ``[judge]``, with a name and the confidence it needs to decide without passing the pair on."""

    #: The tier's name: in verdicts (``judge.tier``), decision records, drift series keys, spans and metrics.
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    #: This tier's floor on the confidence a verdict needs (the policy's threshold for the pair's risk level, and
    #: the tier's calibrated one, still apply when higher). Below it the pair goes to the next tier.
    threshold: float = Field(default=0.0, ge=0, le=1)
    #: The agreement with humans this tier's calibrated threshold promises; unset: ``audit.calibration_target``.
    calibration_target: float | None = Field(default=None, gt=0, lt=1)
    #: The chance this tier's promise fails; unset: ``audit.calibration_risk``. The tiers' risks add up to the
    #: cascade's (docs/guides/cascade.md).
    calibration_risk: float | None = Field(default=None, gt=0, lt=1)
    #: A jury as this tier (``[[tiers.jury]]`` tables, at least two): its judges vote as a jury does
    #: (``jury_quorum``), and the tier decides when the majority's mean confidence reaches its threshold. The tier's
    #: own judge settings (``kind``, ``model`` ...) are then not used, and must be left out.
    jury: tuple[JudgeSettings, ...] = ()

    @model_validator(mode="after")
    def _a_judge_or_a_jury(self) -> TierSettings:
        judge_fields = self.model_fields_set & set(JudgeSettings.model_fields)
        if self.jury and judge_fields:
            raise ValueError(
                f"tier {self.name!r} has a jury: its judges come from its jury tables only, so leave out "
                f"{', '.join(sorted(judge_fields))}"
            )
        if len(self.jury) == 1:
            raise ValueError(f"tier {self.name!r}: a jury needs at least two judges (or make the one judge the tier)")
        return self


class PolicySettings(_Section):
    """The judging policy (``agents.policy.Policy``). The settings whose name is a live control key
    (``schemas.kinds.CONTROLS``) can also be changed on running workers; the reference marks them."""

    #: The mean confidence (0-1; over both orders, in a jury the winner's voters') a primary verdict needs; below it
    #: the pair goes to the tie-break ("low_confidence"). A series' calibrated threshold may raise it.
    primary_confidence_threshold: float = Field(default=_DEFAULTS.primary_confidence_threshold, ge=0, le=1)
    #: Run the tie-break resolver; off, pairs bound for it go to review "tiebreak_disabled" instead.
    tiebreak_enabled: bool = _DEFAULTS.tiebreak_enabled
    #: The tie-break reply's confidence floor (0-1): below it, the tie-break re-asks once with a forced choice;
    #: still below, that order is unresolved and the pair goes to review.
    tiebreak_confidence_threshold: float = Field(default=_DEFAULTS.tiebreak_confidence_threshold, ge=0, le=1)
    #: The normal level's "review below" confidence (0-1; docs/guides/risk-levels.md): a pair without a
    #: ``risk_level`` (or "normal") that would go to the tie-break with a mean confidence below it goes to review
    #: "risk_review" instead. 0, the default, never does.
    review_below_confidence: float = Field(default=_DEFAULTS.review_below_confidence, ge=0, le=1)
    #: ``risk_level: "low"`` pairs: the confidence a primary verdict needs (the normal default: "low" loosens
    #: nothing until you lower it; a series' calibrated threshold still raises it).
    low_primary_confidence_threshold: float = Field(default=_DEFAULTS.low_primary_confidence_threshold, ge=0, le=1)
    #: ``risk_level: "low"`` pairs: the tie-break reply's confidence floor.
    low_tiebreak_confidence_threshold: float = Field(default=_DEFAULTS.low_tiebreak_confidence_threshold, ge=0, le=1)
    #: ``risk_level: "low"`` pairs: below this mean confidence a would-be tie-break goes to review "risk_review";
    #: 0 never.
    low_review_below_confidence: float = Field(default=_DEFAULTS.low_review_below_confidence, ge=0, le=1)
    #: ``risk_level: "high"`` pairs: the confidence a primary verdict needs. Never looser than the normal level's
    #: (the stricter of the two applies), and a series' calibrated threshold may raise it.
    high_primary_confidence_threshold: float = Field(default=_DEFAULTS.high_primary_confidence_threshold, ge=0, le=1)
    #: ``risk_level: "high"`` pairs: the tie-break reply's confidence floor (never below the normal one).
    high_tiebreak_confidence_threshold: float = Field(default=_DEFAULTS.high_tiebreak_confidence_threshold, ge=0, le=1)
    #: ``risk_level: "high"`` pairs: below this mean confidence a pair that is no verdict goes straight to review
    #: "risk_review", skipping the tie-break (never below the normal one; 0 never).
    high_review_below_confidence: float = Field(default=_DEFAULTS.high_review_below_confidence, ge=0, le=1)
    #: Which confidence the thresholds above, a series' calibrated one, the cascade's tiers and the risk levels read:
    #: ``token_probability`` (the judge's probability for each side at its verdict token, averaged over both orders,
    #: when both orders carry one; else the stated confidence) or ``stated`` (always the judge's stated number).
    #: docs/guides/judges.md#confidence-from-token-probabilities.
    confidence_source: Literal["token_probability", "stated"] = _DEFAULTS.confidence_source
    #: Re-asks after a reply that fails validation, each carrying the error, per order and judge (tie-break too);
    #: still invalid, the order counts as invalid.
    max_reasks: int = Field(default=_DEFAULTS.max_reasks, ge=0, le=5)
    #: ``PAIRJUDGE_POLICY__AUDIT_SHARE``: the share of confident verdicts sent to audit (seed 001: 5-10 %);
    #: 0 switches auditing off altogether. The sampling rule is in ``agents.sampling``.
    audit_share: float = Field(default=_DEFAULTS.audit_share, ge=0, le=1)
    #: Mixed into the hash of the pair id that draws the audit sample (and its second reviewers): a new seed draws
    #: a new sample; the same seed draws the same pairs on every worker and every redelivery.
    audit_seed: str = Field(default=_DEFAULTS.audit_seed, max_length=200)
    #: ``PAIRJUDGE_POLICY__AUDIT_UNCERTAIN_SHARE``: the share of uncertain verdicts sent to audit (from the
    #: tie-break stage, a split jury, or a confidence less than the margin above its threshold).
    audit_uncertain_share: float = Field(default=_DEFAULTS.audit_uncertain_share, ge=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_UNCERTAIN_MARGIN``: a primary verdict less than this above its threshold is uncertain.
    audit_uncertain_margin: float = Field(default=_DEFAULTS.audit_uncertain_margin, ge=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_FLOOR``: no verdict's inclusion probability goes below this while auditing
    #: is on, whatever the label budget does (it bounds the estimates' 1/probability weights).
    audit_floor: float = Field(default=_DEFAULTS.audit_floor, gt=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_DOUBLE_SHARE``: the share of audit items also given to a second reviewer.
    audit_double_share: float = Field(default=_DEFAULTS.audit_double_share, ge=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_LABEL_BUDGET``: audit labels the fleet may ask for per
    #: ``audit_budget_period``; when the measured verdict rate would ask for more, every worker scales
    #: both shares down (never below the floor; ``streams.audit.budget``). 0: no budget.
    audit_label_budget: int = Field(default=0, ge=0)
    #: ``PAIRJUDGE_POLICY__AUDIT_BUDGET_PERIOD``: the period ``audit_label_budget`` counts over, "hour" or "day".
    audit_budget_period: Literal["hour", "day"] = "day"
    #: The most characters a candidate output may have; a pair with a longer one is dead-lettered
    #: ("oversized_output") before any judge call.
    max_output_chars: int = Field(default=_DEFAULTS.max_output_chars, ge=1)
    #: The most characters the task's prompt, and its context, may each have; longer: dead-lettered
    #: ("oversized_prompt", "oversized_context") before any judge call.
    max_prompt_chars: int = Field(default=_DEFAULTS.max_prompt_chars, ge=1)
    #: Pairs whose outputs carry text aimed at the judge go to review "suspected_injection" (agents.injection).
    injection_guard: bool = _DEFAULTS.injection_guard
    #: ``PAIRJUDGE_POLICY__DATAMARK``: datamark the untrusted texts every judge prompt shows (outputs, turns, the
    #: task and its context: "ˆ" between words) and say in the system message that marked text is data, never
    #: instructions (spotlighting; docs/guides/prompt-injection.md). Marked prompts are their own drift series.
    datamark: bool = _DEFAULTS.datamark
    #: ``PAIRJUDGE_POLICY__SPEND_HOURLY_CAP_USD``: US dollars all workers together may spend on judge calls per UTC
    #: clock hour before ``spend_action`` applies to new pairs (docs/guides/cascade.md#the-spending-cap). 0: no cap.
    spend_hourly_cap_usd: float = Field(default=_DEFAULTS.spend_hourly_cap_usd, ge=0)
    #: The same cap for each experiment's pairs on its own. 0: no cap.
    spend_experiment_hourly_cap_usd: float = Field(default=_DEFAULTS.spend_experiment_hourly_cap_usd, ge=0)
    #: What a new pair over a cap meets; what each choice does: docs/guides/cascade.md#the-spending-cap ("review": a
    #: person decides it, no judge call). Never dropped; a "spend_cap" alert is raised.
    spend_action: SpendAction = _DEFAULTS.spend_action
    #: The share of a capped scope's pairs the "sample" action still judges (by pair id).
    spend_sample_share: float = Field(default=_DEFAULTS.spend_sample_share, ge=0, le=1)
    #: The shadow experiments paused, by id, comma-separated (docs/guides/production-traffic.md#live-changes): they
    #: make no pairs. Usually set live (``pairjudge control set shadow_paused support-v8``).
    shadow_paused: str = _DEFAULTS.shadow_paused
    #: The shadow experiments' shares, ``id=share`` pairs, comma-separated, replacing the experiments file's
    #: (``pairjudge control set shadow_shares support-v8=0.2``).
    shadow_shares: str = _DEFAULTS.shadow_shares

    def to_policy(self) -> Policy:
        """The policy these settings configure: every field ``Policy`` has (the rest, such as the label budget,
        is the edge's), so a new setting of both reaches the policy without a line here."""
        return Policy(**{name: getattr(self, name) for name in type(self).model_fields if name in _POLICY_FIELDS})


class InjectionScreenSettings(_Section):
    """The second injection detector, a classifier over HTTP (docs/guides/prompt-injection.md#the-screen)."""

    #: ``PAIRJUDGE_INJECTION_SCREEN__URL``: where each untrusted text is POSTed as ``{"text": ...}``, answered
    #: ``{"flagged": bool, "score": 0-1, "label": str}``; a flagged text sends its pair to review
    #: "suspected_injection". Unset: no screen, the pattern rules alone.
    url: str | None = None
    #: Sent as ``Authorization: Bearer <key>``, to ``url``'s origin only (never over plain HTTP off this machine).
    api_key: SecretStr | None = None
    #: Seconds one attempt may take, connecting included.
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    #: Retries after a timeout, a connection error or a 5xx, before the screen counts as unavailable.
    max_retries: int = Field(default=2, ge=0, le=10)
    #: An answer without ``flagged`` is flagged when its ``score`` is at least this.
    threshold: float = Field(default=0.5, ge=0, le=1)
    #: ``PAIRJUDGE_INJECTION_SCREEN__ON_FAILURE``: still no answer after the retries: ``review`` (fail closed: the
    #: pair goes to review "suspected_injection" with flag ``screen_unavailable``) or ``pass`` (judged without
    #: the screen; every failure is logged as a warning).
    on_failure: Literal["review", "pass"] = "review"
