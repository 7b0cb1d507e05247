"""The settings' sections: one pydantic model per ``PAIRJUDGE_<SECTION>__*`` group, with its checks.

``streams.config.settings.Settings`` nests them; each field's comment is its documentation (the docs' settings
reference is generated from these models).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from pairjudge.agents.audit import GuardBounds
from pairjudge.agents.policy import Policy
from pairjudge.agents.redaction import builtin_detectors, custom_detector
from pairjudge.streams.judges.cost import ModelPrice

#: An HTTP header name (RFC 9110 token), lower-cased: what an OTLP header entry may be called.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9a-z-]+$")


class _Section(BaseModel):
    # hide_input_in_errors: a validation error must never echo a value, which may be a secret.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:9092"
    #: Partitions for every pairjudge topic. Scaling out = more partitions and more workers in one group.
    partitions: int = Field(default=4, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    #: Tansu holds group joins for half the session timeout, so the demo uses 5 s; Kafka can go higher.
    session_timeout_s: float = Field(default=10.0, gt=0)
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    #: How clients reach the brokers (streams.security.kafka_clients turns these into client configuration).
    #: ``SSL`` is TLS, with a client certificate for mutual TLS; ``SASL_SSL`` is a user name and password
    #: over TLS. ``SASL_PLAINTEXT`` is for loopback brokers only with ``PLAIN`` (it sends the password).
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    #: A file holding the password (Docker/Kubernetes secrets); wins over ``sasl_password`` when set.
    sasl_password_file: Path | None = None
    #: The CA bundle (PEM) the brokers' certificates are checked against; unset: the system's CAs.
    ssl_cafile: Path | None = None
    #: A client certificate and its private key (PEM) for mutual TLS; give both.
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    #: The private key's password, if it is encrypted (or a file holding it).
    ssl_key_password: SecretStr | None = None
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
    prefix: str = "pairjudge"

    def name(self, kind: str) -> str:
        return f"{self.prefix}.{kind}"


class WorkerSettings(_Section):
    app_id: str = "pairjudge"
    #: Pairs judged at once per worker (agent concurrency); each pair makes two judge calls at a time.
    concurrency: int = Field(default=16, ge=1, le=1024)
    data_dir: Path = Path(".pairjudge-data")
    web_enabled: bool = False
    #: Faust binds every interface by default; we never do unless told to.
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    log_level: str = "WARNING"
    #: How long a published outcome is kept for redeliveries of its pair (streams.worker.published).
    outcome_retention_s: float = Field(default=86_400.0, gt=0)
    #: A table recovery that reads no changelog record for this long while records remain makes the worker
    #: stop and exit with status 3, so its supervisor restarts it and the group rebalances
    #: (streams.faust_compat.recovery_watch). 0 turns the watch off.
    recovery_stall_s: float = Field(default=120.0, ge=0)
    #: On SIGTERM, how long pairs already being judged may take to finish (and be committed) before
    #: the rest are handed back uncommitted (streams.worker.shutdown). An orchestrator's own grace must exceed it.
    shutdown_grace_s: float = Field(default=30.0, ge=0, le=3600)


class HealthSettings(_Section):
    """The worker's health and metrics server (streams.worker.health_server): ``/livez``, ``/readyz``, ``/metrics``."""

    #: Loopback unless told otherwise; a container sets 0.0.0.0 so its orchestrator's probes reach it.
    host: str = Field(default="127.0.0.1", min_length=1)
    #: 0 (the default) turns the server off, and with it the metrics (no reader: no-op instruments).
    port: int = Field(default=0, ge=0, le=65535)


class JudgeSettings(_Section):
    #: ``anthropic`` speaks the Messages API: set ``base_url`` to the API root, e.g. https://api.anthropic.com.
    kind: Literal["offline", "openai", "anthropic"] = "offline"
    base_url: str = "http://127.0.0.1:8080/v1"
    model: str = "pairjudge-heuristic"
    version: str = ""
    api_key: SecretStr | None = None
    #: A file holding the key (Docker/Kubernetes secrets); wins over ``api_key`` when set.
    api_key_file: Path | None = None
    response_format: Literal["auto", "json_schema", "json_object_schema", "none"] = "json_schema"
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = Field(default=1024, ge=16)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    max_concurrency: int = Field(default=32, ge=1)
    #: The persistent response cache (streams.judges.cache): one directory shared by a host's workers.
    #: Never used for the offline judge, which is cheap and deterministic.
    cache_enabled: bool = True
    cache_dir: Path = Path(".pairjudge-cache")
    cache_size_mb: int = Field(default=512, ge=1)
    #: Drop cached replies after this long (e.g. when a model alias may be re-pointed); None keeps them.
    cache_ttl_s: float | None = Field(default=None, gt=0)
    #: The circuit breaker (streams.judges.breaker): consecutive outages that open it, and its cooldown,
    #: which doubles on every failed probe up to the maximum.
    breaker_failures: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=5.0, gt=0)
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


class PolicySettings(_Section):
    primary_confidence_threshold: float = Field(default=0.7, ge=0, le=1)
    tiebreak_enabled: bool = True
    tiebreak_confidence_threshold: float = Field(default=0.6, ge=0, le=1)
    max_reasks: int = Field(default=2, ge=0, le=5)
    #: ``PAIRJUDGE_POLICY__AUDIT_SHARE``: the share of confident verdicts sent to audit (seed 001: 5-10 %);
    #: 0 switches auditing off altogether. The sampling rule is in ``agents.sampling``.
    audit_share: float = Field(default=0.05, ge=0, le=1)
    audit_seed: str = Field(default="", max_length=200)
    #: ``PAIRJUDGE_POLICY__AUDIT_UNCERTAIN_SHARE``: the share of uncertain verdicts sent to audit (from the
    #: tie-break stage, a split jury, or a confidence less than the margin above its threshold).
    audit_uncertain_share: float = Field(default=0.10, ge=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_UNCERTAIN_MARGIN``: a primary verdict less than this above its threshold is uncertain.
    audit_uncertain_margin: float = Field(default=0.1, ge=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_FLOOR``: no verdict's inclusion probability goes below this while auditing
    #: is on, whatever the label budget does (it bounds the estimates' 1/probability weights).
    audit_floor: float = Field(default=0.01, gt=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_DOUBLE_SHARE``: the share of audit items also given to a second reviewer.
    audit_double_share: float = Field(default=0.1, ge=0, le=1)
    #: ``PAIRJUDGE_POLICY__AUDIT_LABEL_BUDGET``: audit labels the fleet may ask for per
    #: ``audit_budget_period``; when the measured verdict rate would ask for more, every worker scales
    #: both shares down (never below the floor; ``streams.audit.budget``). 0: no budget.
    audit_label_budget: int = Field(default=0, ge=0)
    #: ``PAIRJUDGE_POLICY__AUDIT_BUDGET_PERIOD``: "hour" or "day".
    audit_budget_period: Literal["hour", "day"] = "day"
    max_output_chars: int = Field(default=20_000, ge=1)
    max_prompt_chars: int = Field(default=20_000, ge=1)
    #: Pairs whose outputs carry text aimed at the judge go to review "suspected_injection" (agents.injection).
    injection_guard: bool = True

    def to_policy(self) -> Policy:
        return Policy(
            primary_confidence_threshold=self.primary_confidence_threshold,
            tiebreak_enabled=self.tiebreak_enabled,
            tiebreak_confidence_threshold=self.tiebreak_confidence_threshold,
            max_reasks=self.max_reasks,
            audit_share=self.audit_share,
            audit_seed=self.audit_seed,
            audit_uncertain_share=self.audit_uncertain_share,
            audit_uncertain_margin=self.audit_uncertain_margin,
            audit_floor=self.audit_floor,
            audit_double_share=self.audit_double_share,
            max_output_chars=self.max_output_chars,
            max_prompt_chars=self.max_prompt_chars,
            injection_guard=self.injection_guard,
        )


class AuditSettings(_Section):
    """The drift audit (streams.audit.handlers): windows, the label join's retention, and the guards' bounds."""

    #: Run the audit join and series agents on this worker.
    enabled: bool = True
    #: Tumbling window size. Statistics, guards and alerts are per series and window.
    window_s: float = Field(default=3600.0, ge=1.0)
    #: How often the open windows' running snapshots are published (only those that changed).
    snapshot_interval_s: float = Field(default=30.0, ge=0.1)
    #: How long a pair waits in the join for its label (or its decision). The bound on the join
    #: table: about (pairs per second on a worker's partitions) x this x 1 KB.
    join_retention_s: float = Field(default=3 * 86_400.0, ge=1.0)
    kappa_min: float = Field(default=0.7, ge=-1, le=1)
    #: Labels a window needs before the kappa guard (and the ECE bound) may act.
    min_labels: int = Field(default=50, ge=1)
    #: The kappa guard's floor: "absolute" (``kappa_min``, seed 001) or "relative" to the human ceiling,
    #: ``relative_kappa_ratio`` x the kappa of reviewers against each other on doubly labelled audit pairs,
    #: once a window has ``min_human_pairs`` of them (the absolute floor until then). agents.audit.guards.
    guard_mode: Literal["absolute", "relative"] = "absolute"
    relative_kappa_ratio: float = Field(default=0.9, gt=0, le=1)
    min_human_pairs: int = Field(default=30, ge=1)
    tiebreak_rate_max: float = Field(default=0.2, ge=0, le=1)
    flip_rate_max: float = Field(default=0.3, ge=0, le=1)
    invalid_reply_rate_max: float = Field(default=0.1, ge=0, le=1)
    ece_max: float = Field(default=0.2, ge=0, le=1)
    canary_accuracy_min: float = Field(default=0.7, ge=0, le=1)
    min_canaries: int = Field(default=20, ge=1)
    #: Pairs (or judge calls) a window needs before the rate bounds may act.
    min_pairs: int = Field(default=20, ge=1)
    #: Labels needed before an auto-decision threshold is calibrated; the configured one applies until then.
    calibration_min_labels: int = Field(default=100, ge=1)
    #: The calibrated threshold's promise: auto-decided pairs agree with humans at ``calibration_target``
    #: or better, with probability at least 1 - ``calibration_risk`` (agents.stats.calibrate_threshold).
    calibration_target: float = Field(default=0.9, gt=0, lt=1)
    calibration_risk: float = Field(default=0.1, gt=0, lt=1)
    #: Where alerts are also POSTed (Slack- or Alertmanager-style receivers; streams.telemetry.alerts). The URL
    #: often carries a token: give it here from the environment, or in a secret file.
    webhook_url: SecretStr | None = None
    webhook_url_file: Path | None = None
    webhook_attempts: int = Field(default=5, ge=1, le=20)
    #: Allow an ``http://`` webhook URL to a host that is not loopback (its token would travel in clear).
    webhook_allow_cleartext: bool = False

    def resolved_webhook_url(self) -> SecretStr | None:
        return read_secret(self.webhook_url, self.webhook_url_file, "PAIRJUDGE_AUDIT__WEBHOOK_URL_FILE")

    def bounds(self) -> GuardBounds:
        return GuardBounds(
            kappa_min=self.kappa_min,
            min_labels=self.min_labels,
            guard_mode=self.guard_mode,
            relative_kappa_ratio=self.relative_kappa_ratio,
            min_human_pairs=self.min_human_pairs,
            tiebreak_rate_max=self.tiebreak_rate_max,
            flip_rate_max=self.flip_rate_max,
            invalid_reply_rate_max=self.invalid_reply_rate_max,
            ece_max=self.ece_max,
            canary_accuracy_min=self.canary_accuracy_min,
            min_canaries=self.min_canaries,
            min_pairs=self.min_pairs,
        )


class ScoreSettings(_Section):
    """The champion-challenger scoreboard and its deployment gates (``streams.scores.handlers``): the judge basis's
    and the human basis's (``agents.scores.human``); ``alpha`` and ``min_effect`` apply to both."""

    enabled: bool = True
    #: The gate's error level: an equal challenger is promoted at most this often, however often it is checked.
    alpha: float = Field(default=0.05, gt=0, lt=1)
    #: The smallest win-probability margin over 1/2 worth shipping for.
    min_effect: float = Field(default=0.05, gt=0, lt=0.5)
    #: The human gate decides nothing below this many labels (its confidence sequence is asymptotic;
    #: ``agents.scores.human.MIN_LABELS``).
    human_min_labels: int = Field(default=30, ge=1)
    #: The number of labels at which the human gate's confidence sequence is tightest
    #: (``agents.scores.human.DEFAULT_TARGET_LABELS``): about the labels an experiment expects to get.
    human_target_labels: int = Field(default=500, ge=1)
    #: ``PAIRJUDGE_SCORES__HUMAN_MISSING_LABELS``: how the human gate treats audit labels that have not come
    #: (pending or expired). ``at_random`` (the default): as unlabelled pairs of their stratum, assuming
    #: whether a label comes does not depend on what it says. ``worst_case``: assume nothing; promote only
    #: if every missing label set against the challenger would still promote (and reject likewise).
    human_missing_labels: Literal["at_random", "worst_case"] = "at_random"
    snapshot_interval_s: float = Field(default=30.0, ge=0.1)
    #: Bootstrap resamples for the Bradley-Terry intervals.
    bootstrap: int = Field(default=100, ge=10, le=2000)


class TelemetrySettings(_Section):
    #: ``file`` writes one JSON span per line (readable, for the embedded demo); ``otlp`` exports to any backend.
    exporter: Literal["none", "console", "file", "otlp"] = "none"
    file_path: Path = Path("pairjudge-traces.jsonl")
    otlp_endpoint: str = "http://127.0.0.1:4318"
    otlp_protocol: Literal["http/protobuf"] = "http/protobuf"
    #: Output text goes into spans only when this is switched on.
    capture_content: bool = False
    service_name: str = "pairjudge"
    #: Headers sent with every OTLP export, in the W3C/OTel form ``key=value,key2=value2`` (values may be
    #: percent-encoded), e.g. ``authorization=Bearer%20abc``. A secret: never logged, never on a span.
    otlp_headers: SecretStr | None = None
    #: A secret file holding the same; wins over ``otlp_headers`` when set.
    otlp_headers_file: Path | None = None
    #: Allow sending ``otlp_headers`` over plain ``http://`` to a collector that is not loopback.
    otlp_allow_cleartext_headers: bool = False
    #: A CA bundle (PEM) to verify the collector's certificate with, instead of the system's.
    otlp_certificate_file: Path | None = None
    #: A client certificate and its key (PEM) presented to the collector (mutual TLS); give both.
    otlp_client_certificate_file: Path | None = None
    otlp_client_key_file: Path | None = None

    def resolved_otlp_headers(self) -> dict[str, str]:
        """The OTLP export headers, parsed (``ValueError`` naming the setting, never a value)."""
        raw = read_secret(self.otlp_headers, self.otlp_headers_file, "PAIRJUDGE_TELEMETRY__OTLP_HEADERS_FILE")
        if raw is None:
            return {}
        return parse_otlp_headers(raw.get_secret_value(), "PAIRJUDGE_TELEMETRY__OTLP_HEADERS")

    @model_validator(mode="after")
    def _tls_files_paired(self) -> TelemetrySettings:
        if (self.otlp_client_certificate_file is None) != (self.otlp_client_key_file is None):
            raise ValueError(
                "PAIRJUDGE_TELEMETRY__OTLP_CLIENT_CERTIFICATE_FILE and __OTLP_CLIENT_KEY_FILE go together: set both"
            )
        return self


def parse_otlp_headers(text: str, setting: str) -> dict[str, str]:
    """``key=value,key2=value2`` (W3C baggage form, as ``OTEL_EXPORTER_OTLP_HEADERS``) to a dict.

    Keys are lower-cased; values are percent-decoded and stripped. A malformed entry is an error naming
    ``setting`` and the entry's position, never its text (which may hold a token).
    """
    headers: dict[str, str] = {}
    for n, entry in enumerate(text.split(","), start=1):
        if not entry.strip():
            continue
        name, sep, value = entry.partition("=")
        name = urllib.parse.unquote(name).strip().lower()
        value = urllib.parse.unquote(value).strip()
        if not sep or not name or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{setting}: entry {n} is not a key=value pair with a valid header name")
        if any(ch in value for ch in "\r\n\0"):
            raise ValueError(f"{setting}: entry {n} has a line break or NUL in its value")
        headers[name] = value
    return headers


class RedactionSettings(_Section):
    """Redaction of dead letters and review requests before they are published (streams.security.redaction_hook).

    Off by default. ``patterns`` names built-in detectors (``email``, ``phone``, ``credit_card`` with a
    Luhn check, ``ipv4``, ``iban`` with its check digits), comma-separated; ``custom`` adds regexes by name
    (``PAIRJUDGE_REDACTION__CUSTOM='{"ticket": "TCK-[0-9]{6}"}'``); ``hook`` names a callable
    ``module:function`` taking and returning a ``str``, applied after the patterns.
    """

    enabled: bool = False
    patterns: str = "email,phone,credit_card,ipv4,iban"
    custom: dict[str, str] = Field(default_factory=dict)
    hook: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

    def pattern_names(self) -> list[str]:
        return [n.strip() for n in self.patterns.split(",") if n.strip()]

    @model_validator(mode="after")
    def _patterns_known(self) -> RedactionSettings:
        # Unknown names and bad regexes stop start-up, naming the setting (the hook is loaded by the edge).
        try:
            builtin_detectors(self.pattern_names())
            for name, regex in self.custom.items():
                custom_detector(name, regex)
        except ValueError as exc:
            raise ValueError(f"PAIRJUDGE_REDACTION__PATTERNS / __CUSTOM: {exc}") from None
        return self


class ReviewUser(_Section):
    """One person who may use the review service. ``password_hash`` comes from ``pairjudge review
    hash-password`` (scrypt); the password itself is never configured."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.@-]+$")
    password_hash: SecretStr
    role: Literal["reviewer", "operator"] = "reviewer"


class ReviewSettings(_Section):
    """``pairjudge review``: the human-review queue and its web UI."""

    host: str = "127.0.0.1"
    port: int = Field(default=8088, ge=0, le=65535)
    #: SQLite is the embedded default; PostgreSQL (``postgresql+psycopg://…``) lets several instances share one queue.
    database_url: SecretStr = SecretStr("sqlite+aiosqlite:///pairjudge-review.db")
    database_url_file: Path | None = None
    #: A claim not submitted within this long goes back to the queue.
    claim_ttl_s: float = Field(default=900.0, ge=1.0)
    group_id: str = "pairjudge-review"
    #: Users, inline (``PAIRJUDGE_REVIEW__USERS='[{"name": …, "password_hash": …, "role": …}]'``) or in a
    #: JSON secret file of the same shape.
    users: tuple[ReviewUser, ...] = ()
    users_file: Path | None = None
    #: Signs the session cookie. Unset: a random key per process (sessions end when it restarts).
    session_secret: SecretStr | None = None
    session_secret_file: Path | None = None
    session_max_age_s: int = Field(default=8 * 3600, ge=60)
    #: Secure cookies need HTTPS, except on localhost (browsers treat it as secure); switch off only for plain
    #: HTTP beyond loopback, which you should not run.
    cookie_secure: bool = True
    #: Failed logins per user (and per client address) within ``login_window_s`` before logins are refused.
    login_max_failures: int = Field(default=5, ge=1)
    login_window_s: float = Field(default=300.0, ge=1.0)

    def resolved_database_url(self) -> str:
        url = read_secret(self.database_url, self.database_url_file, "PAIRJUDGE_REVIEW__DATABASE_URL_FILE")
        assert url is not None
        return url.get_secret_value()

    def resolved_users(self) -> tuple[ReviewUser, ...]:
        if self.users_file is None:
            return self.users
        try:
            data = json.loads(self.users_file.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"PAIRJUDGE_REVIEW__USERS_FILE: cannot read users from {self.users_file}: {exc}") from None
        return self.users + tuple(ReviewUser.model_validate(u) for u in data)

    def resolved_session_secret(self) -> SecretStr | None:
        return read_secret(self.session_secret, self.session_secret_file, "PAIRJUDGE_REVIEW__SESSION_SECRET_FILE")
