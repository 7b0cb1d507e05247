"""The settings of what watches the judge: the drift audit, the scoreboard, telemetry, redaction and the
review service (one pydantic model per PAIRJUDGE_<SECTION>__* group, each field's comment its
documentation)."""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from pairjudge.agents.audit import GuardBounds
from pairjudge.agents.redaction import builtin_detectors, custom_detector
from pairjudge.streams.config.sections import _Section, read_secret

#: An HTTP header name (RFC 9110 token), lower-cased: what an OTLP header entry may be called.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9a-z-]+$")


class AuditSettings(_Section):
    """The drift audit (streams.audit.handlers): windows, the label join's retention, and the guards' bounds."""

    #: Run the audit join and series agents on this worker.
    enabled: bool = True
    #: Tumbling window size. Statistics, guards and alerts are per series and window.
    window_s: float = Field(default=3600.0, ge=1.0)
    #: How often the open windows' running snapshots are published (only those that changed).
    snapshot_interval_s: float = Field(default=30.0, ge=0.1)
    #: How often the join sends what it counted to the series agents and the scoreboard: one delta per series
    #: and window, one batch per experiment, instead of one event per pair. The inputs it covers are
    #: committed only after it, so a crash recounts them, never loses them; a series shows a pair this much later.
    flush_interval_s: float = Field(default=1.0, ge=0.05, le=60.0)
    #: How long a pair waits in the join for its label (or its decision). The bound on the join
    #: table: about (pairs per second on a worker's partitions) x this x 1 KB.
    join_retention_s: float = Field(default=3 * 86_400.0, ge=1.0)
    #: The kappa guard's absolute floor (seed 001): a window's Cohen's kappa against humans below it, once
    #: ``min_labels`` are in, pauses automatic decisions on every worker until a person resumes them.
    kappa_min: float = Field(default=0.7, ge=-1, le=1)
    #: Labels a window needs before the kappa guard (and the ECE bound) may act.
    min_labels: int = Field(default=50, ge=1)
    #: The kappa guard's floor: "absolute" (``kappa_min``, seed 001) or "relative" to the human ceiling,
    #: ``relative_kappa_ratio`` x the kappa of reviewers against each other on doubly labelled audit pairs,
    #: once a window has ``min_human_pairs`` of them (the absolute floor until then). agents.audit.guards.
    guard_mode: Literal["absolute", "relative"] = "absolute"
    #: In the relative mode, the kappa floor is this x the reviewers' kappa against each other.
    relative_kappa_ratio: float = Field(default=0.9, gt=0, le=1)
    #: Doubly labelled audit pairs a window needs before the relative floor replaces ``kappa_min``.
    min_human_pairs: int = Field(default=30, ge=1)
    #: The agreement guard's level (docs/guides/drift-audit.md#the-agreement-guard): a sequential test on the labels
    #: of pairs the judge decided alone (both orders agreeing) pauses automatic decisions as soon as the evidence
    #: that the judge agrees with people less often than the floor reaches 1 / this, at any number of labels.
    #: A judge at the floor or above is paused by it at most this often per window.
    agreement_alpha: float = Field(default=0.05, gt=0, lt=1)
    #: Run the agreement guard (false: only the kappa guard pauses, after ``min_labels``).
    agreement_guard: bool = True
    #: The agreement guard's floor on raw agreement. Unset: the kappa floor in force, read as an agreement
    #: (kappa is never above agreement, so a judge below it in agreement is below it in kappa too).
    agreement_min: float | None = Field(default=None, gt=0, lt=1)
    #: Alert when the tie-break ran on more than this share of a window's pairs (seed 002; ``min_pairs`` at least).
    tiebreak_rate_max: float = Field(default=0.2, ge=0, le=1)
    #: Alert when more than this share of the pairs with both orders valid flipped with the order shown.
    flip_rate_max: float = Field(default=0.3, ge=0, le=1)
    #: Alert when more than this share of a window's judge replies failed validation (``min_pairs`` calls at least).
    invalid_reply_rate_max: float = Field(default=0.1, ge=0, le=1)
    #: Alert when the expected calibration error of confidence against agreement with humans is above this.
    ece_max: float = Field(default=0.2, ge=0, le=1)
    #: Alert when the judge gets less than this share of a window's labelled canary pairs right.
    canary_accuracy_min: float = Field(default=0.7, ge=0, le=1)
    #: Canary labels a window needs before the canary bound may act.
    min_canaries: int = Field(default=20, ge=1)
    #: Pairs (or judge calls) a window needs before the rate bounds may act.
    min_pairs: int = Field(default=20, ge=1)
    #: Labels needed before an auto-decision threshold is calibrated; the configured one applies until then.
    calibration_min_labels: int = Field(default=100, ge=1)
    #: The calibrated threshold's promise: auto-decided pairs agree with humans at ``calibration_target``
    #: or better, with probability at least 1 - ``calibration_risk`` (agents.stats.calibrate_threshold).
    calibration_target: float = Field(default=0.9, gt=0, lt=1)
    #: The chance the calibrated threshold's promise fails: it holds with probability at least 1 - this.
    calibration_risk: float = Field(default=0.1, gt=0, lt=1)
    #: Where alerts are also POSTed (Slack- or Alertmanager-style receivers; streams.telemetry.alerts). The URL
    #: often carries a token: give it here from the environment, or in a secret file.
    webhook_url: SecretStr | None = None
    #: A secret file holding the webhook URL; wins over ``webhook_url`` when set.
    webhook_url_file: Path | None = None
    #: Tries per alert, the first included: 5xx, 408, 425, 429 and transport errors are retried with backoff, other
    #: 4xx are not. Delivery runs in the background and never holds up judging.
    webhook_attempts: int = Field(default=5, ge=1, le=20)
    #: Allow an ``http://`` webhook URL to a host that is not loopback (its token would travel in clear).
    webhook_allow_cleartext: bool = False
    #: The webhook's body: ``json`` (read by Slack-style and Alertmanager-style receivers alike) or ``slack`` (a
    #: Slack incoming webhook's message in Block Kit: title, series, value against its bound, links).
    webhook_format: Literal["json", "slack"] = "json"
    #: At most one alert per kind and series in this many seconds goes to the webhook; the ones held back are
    #: counted in the next one sent. 0: every alert. Alerts stay on ``pairjudge.audit`` and in the logs whatever.
    webhook_rate_window_s: float = Field(default=900.0, ge=0.0)
    #: The review service's address as people open it (``https://pairjudge.example.com``): alerts link to the
    #: page that shows their series. Unset: no page link.
    webhook_review_url: str | None = Field(default=None, pattern=r"^https?://")
    #: The runbooks' page of a published docs site (``https://docs.example.com/operations/alerts/``): alerts link
    #: to their entry on it. Unset: alerts name the entry in docs/operations/alerts.md instead.
    webhook_runbook_url: str | None = Field(default=None, pattern=r"^https?://")

    def resolved_webhook_url(self) -> SecretStr | None:
        return read_secret(self.webhook_url, self.webhook_url_file, "PAIRJUDGE_AUDIT__WEBHOOK_URL_FILE")

    def bounds(self) -> GuardBounds:
        return GuardBounds(
            kappa_min=self.kappa_min,
            min_labels=self.min_labels,
            guard_mode=self.guard_mode,
            relative_kappa_ratio=self.relative_kappa_ratio,
            min_human_pairs=self.min_human_pairs,
            agreement_alpha=self.agreement_alpha if self.agreement_guard else None,
            agreement_min=self.agreement_min,
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

    #: Run the scoreboard agent and its gates on this worker. It reads what the audit's join forwards, so it runs
    #: only with ``audit.enabled``.
    enabled: bool = True
    #: The gate's error level: an equal challenger is promoted at most this often, however often it is checked.
    alpha: float = Field(default=0.05, gt=0, lt=1)
    #: The smallest win-probability margin over 1/2 worth shipping for.
    min_effect: float = Field(default=0.05, gt=0, lt=0.5)
    #: The human gate decides nothing below this many labels (its confidence sequence is asymptotic;
    #: ``agents.scores.human.MIN_LABELS``).
    human_min_labels: int = Field(default=30, ge=1)
    #: ``PAIRJUDGE_SCORES__HUMAN_MIN_STRATUM_LABELS``: the labels every sampling stratum with pairs needs before
    #: the human gate decides (unset: ``human_min_labels``), so a decision never rests on a few labels of the
    #: stratum that holds most pairs while review labels make up the total.
    human_min_stratum_labels: int | None = Field(default=None, ge=1)
    #: The number of labels at which the human gate's confidence sequence is tightest
    #: (``agents.scores.human.DEFAULT_TARGET_LABELS``): about the labels an experiment expects to get.
    human_target_labels: int = Field(default=500, ge=1)
    #: ``PAIRJUDGE_SCORES__HUMAN_MISSING_LABELS``: how the human gate treats audit labels that have not come
    #: (pending or expired). ``at_random`` (the default): as unlabelled pairs of their stratum, assuming
    #: whether a label comes does not depend on what it says. ``worst_case``: assume nothing; promote only
    #: if every missing label set against the challenger would still promote (and reject likewise).
    human_missing_labels: Literal["at_random", "worst_case"] = "at_random"
    #: Seconds between publications of each changed experiment's ``ScoreSnapshot`` and its gates' decisions.
    snapshot_interval_s: float = Field(default=30.0, ge=0.1)
    #: Bootstrap resamples for the Bradley-Terry intervals.
    bootstrap: int = Field(default=100, ge=10, le=2000)


class TelemetrySettings(_Section):
    #: Where spans go: ``none`` (nowhere; trace context still propagates), ``console`` (stdout) and ``file``
    #: (``file_path``) write one JSON span per line (readable, for the embedded demo); ``otlp`` exports to any backend.
    exporter: Literal["none", "console", "file", "otlp"] = "none"
    #: The file the ``file`` exporter appends its spans to, created owner-only (0600).
    file_path: Path = Path("pairjudge-traces.jsonl")
    #: The OTLP/HTTP collector's base URL for the ``otlp`` exporter; spans go to ``<otlp_endpoint>/v1/traces``.
    otlp_endpoint: str = "http://127.0.0.1:4318"
    #: The OTLP transport; ``http/protobuf`` (OTLP over HTTP) is the only one supported.
    otlp_protocol: Literal["http/protobuf"] = "http/protobuf"
    #: Put the prompts sent to the judges, their replies and the verdicts' explanations on spans. They quote the
    #: outputs judged: switch it on only where the trace backend may hold them.
    capture_content: bool = False
    #: The ``service.name`` resource of the spans and of the ``/metrics`` metrics.
    service_name: str = "pairjudge"
    #: Headers sent with every OTLP export, in the W3C/OTel form ``key=value,key2=value2`` (values may be
    #: percent-encoded), e.g. ``authorization=Bearer%20abc``. A secret: never logged, never on a span.
    otlp_headers: SecretStr | None = None
    #: A secret file holding the same; wins over ``otlp_headers`` when set.
    otlp_headers_file: Path | None = None
    #: Allow sending ``otlp_headers`` over plain ``http://`` to a collector that is not loopback.
    otlp_allow_cleartext_headers: bool = False
    #: A CA bundle (PEM) to verify the collector's certificate with, instead of the system's (even when
    #: ``REQUESTS_CA_BUNDLE`` is set).
    otlp_certificate_file: Path | None = None
    #: A client certificate (PEM) presented to the collector for mutual TLS; give ``otlp_client_key_file`` with it.
    otlp_client_certificate_file: Path | None = None
    #: The client certificate's private key (PEM); give ``otlp_client_certificate_file`` with it.
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

    #: Redact the dead letters and review requests a worker publishes; a redacted event is marked so (a redacted
    #: dead letter cannot be replayed as it is).
    enabled: bool = False
    #: The built-in detectors to apply, comma-separated; each match becomes ``[redacted:<name>]``. An unknown
    #: name stops start-up.
    patterns: str = "email,phone,credit_card,ipv4,iban"
    #: More detectors, as JSON: a regex by name (1-40 of a-z, 0-9 and _); a bad regex stops start-up.
    custom: dict[str, str] = Field(default_factory=dict)
    #: A ``module:function`` taking and returning a ``str``, applied after the patterns. If it fails, the whole
    #: text is withheld (``[redacted:hook_failed]``).
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

    #: The sign-in name (letters, digits and ``_.@-``): recorded as the reviewer of the person's labels, and in the
    #: ``updated_by`` of an operator's control updates.
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.@-]+$")
    #: The scrypt hash ``pairjudge review hash-password`` prints (``scrypt$16384$8$1$…``).
    password_hash: SecretStr
    #: ``reviewer`` labels the queue; ``operator`` may do that too, and sets the live controls (``/operators``).
    role: Literal["reviewer", "operator"] = "reviewer"


class ReviewSettings(_Section):
    """``pairjudge review``: the human-review queue and its web UI."""

    #: Where the review web UI binds: loopback unless told otherwise.
    host: str = "127.0.0.1"
    #: The review web UI's port.
    port: int = Field(default=8088, ge=0, le=65535)
    #: The queue's database, as an SQLAlchemy URL (a secret: it may hold a password). SQLite is the embedded
    #: default; PostgreSQL (``postgresql+psycopg://…``) lets several instances share one queue.
    database_url: SecretStr = SecretStr("sqlite+aiosqlite:///pairjudge-review.db")
    #: A secret file holding the database URL; wins over ``database_url`` when set.
    database_url_file: Path | None = None
    #: A claim not submitted within this long goes back to the queue.
    claim_ttl_s: float = Field(default=900.0, ge=1.0)
    #: The consumer group in which the service's instances share the review topic's partitions.
    group_id: str = "pairjudge-review"
    #: Users, inline (``PAIRJUDGE_REVIEW__USERS='[{"name": …, "password_hash": …, "role": …}]'``) or in a
    #: JSON secret file of the same shape.
    users: tuple[ReviewUser, ...] = ()
    #: A JSON secret file of users, the same shape as ``users``; its users are added to those.
    users_file: Path | None = None
    #: Signs the session cookie. Unset: a random key per process (sessions end when it restarts).
    session_secret: SecretStr | None = None
    #: A secret file holding the session secret; wins over ``session_secret`` when set.
    session_secret_file: Path | None = None
    #: Seconds a sign-in lasts (the session cookie's max age); then the person signs in again.
    session_max_age_s: int = Field(default=8 * 3600, ge=60)
    #: Secure cookies need HTTPS, except on localhost (browsers treat it as secure); switch off only for plain
    #: HTTP beyond loopback, which you should not run.
    cookie_secure: bool = True
    #: Publish labels with an idempotent producer (a retried send is written once). Off only for a broker without
    #: idempotent producers (the embedded Tansu of ``pairjudge demo --serve``); a label sent twice is then counted
    #: once by the audit's join all the same.
    idempotent_labels: bool = True
    #: Failed logins per user (and per client address) within ``login_window_s`` before logins are refused.
    login_max_failures: int = Field(default=5, ge=1)
    #: The window, in seconds, in which ``login_max_failures`` are counted; a refused login may try again once
    #: its oldest failure in it is this old.
    login_window_s: float = Field(default=300.0, ge=1.0)
    #: The read API's bearer tokens (``/api/v1``): a file of ``sha256:<hex> <name> <roles>`` lines made by
    #: ``pairjudge review token new`` (hashes only). Read again when it changes, so deleting a line revokes a
    #: token. Unset: the read API accepts no token.
    api_tokens_file: Path | None = None

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
