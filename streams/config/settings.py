"""Settings, read from the environment (``PAIRJUDGE_`` prefix, ``__`` for nesting) and secret files.

Read once, in the composition root (``streams.app.create_app``) and the CLI, nowhere else.
Examples::

    PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS=broker-1:9092,broker-2:9092
    PAIRJUDGE_JUDGE__KIND=openai
    PAIRJUDGE_JUDGE__API_KEY_FILE=/run/secrets/judge_key
    PAIRJUDGE_POLICY__PRIMARY_CONFIDENCE_THRESHOLD=0.75
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_core import to_json
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from pairjudge.schemas import InlineRubric
from pairjudge.streams.config.oversight import (
    AuditSettings,
    RedactionSettings,
    ReviewSettings,
    ReviewUser,
    ScoreSettings,
    TelemetrySettings,
    parse_otlp_headers,
)
from pairjudge.streams.config.sections import (
    ControlSettings,
    GatewaySettings,
    HealthSettings,
    InjectionScreenSettings,
    JudgeSettings,
    KafkaSettings,
    PolicySettings,
    ShadowSettings,
    TierSettings,
    TopicSettings,
    WorkerSettings,
    read_secret,
)
from pairjudge.streams.security.cleartext import check_cleartext, is_loopback


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PAIRJUDGE_",
        env_nested_delimiter="__",
        frozen=True,
        extra="ignore",
        hide_input_in_errors=True,
    )

    kafka: KafkaSettings = KafkaSettings()
    topics: TopicSettings = TopicSettings()
    worker: WorkerSettings = WorkerSettings()
    judge: JudgeSettings = JudgeSettings()
    policy: PolicySettings = PolicySettings()
    #: The optional second injection detector, a classifier over HTTP (``[injection_screen]``).
    injection_screen: InjectionScreenSettings = InjectionScreenSettings()
    audit: AuditSettings = AuditSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    review: ReviewSettings = ReviewSettings()
    scores: ScoreSettings = ScoreSettings()
    control: ControlSettings = ControlSettings()
    redaction: RedactionSettings = RedactionSettings()
    health: HealthSettings = HealthSettings()
    #: The shadow stage: experiments on production captures (docs/guides/production-traffic.md).
    shadow: ShadowSettings = ShadowSettings()
    #: The capturing gateway in front of the champion (docs/guides/gateway.md).
    gateway: GatewaySettings = GatewaySettings()
    #: Maximum bytes of one incoming event (a tie-break request may have 4x); larger ones are dead-lettered unread.
    max_event_bytes: int = Field(default=256_000, ge=1024)
    #: A TOML file of named rubrics (``[rubrics.<name>]``) that pairs may refer to with ``{"kind": "named"}``;
    #: its rubrics win over those of ``rubrics`` with the same name.
    rubrics_file: Path | None = None
    #: Named rubrics declared in the config file itself (``[rubrics.<name>]``).
    rubrics: dict[str, InlineRubric] = Field(default_factory=dict)
    #: Optional jury: several judges per pair (``[[jury]]`` tables). Empty means the single ``judge`` decides;
    #: with a jury, ``judge`` is still the tie-break resolver.
    jury: tuple[JudgeSettings, ...] = ()
    #: Votes a jury's winner needs, at most the jury's size; unset: a strict majority of all jurors, abstainers
    #: included. Ignored without a jury.
    jury_quorum: int | None = Field(default=None, ge=1)
    #: Optional judge cascade (``[[tiers]]`` tables, cheap to strong): each pair meets the first tier and goes
    #: on to the next only when a tier cannot decide it (docs/guides/cascade.md). Replaces the primary judge
    #: (and any jury); ``judge`` is still the tie-break resolver.
    tiers: tuple[TierSettings, ...] = ()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Precedence: explicit arguments, then the environment, then the config file, then defaults.
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings, file_secret_settings]
        config = os.environ.get(CONFIG_ENV)
        if config:
            if not Path(config).is_file():
                raise ValueError(f"{CONFIG_ENV}: no config file at {config}")
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config)))
        return tuple(sources)

    @model_validator(mode="after")
    def _judges_usable(self) -> Settings:
        # Fail at start-up, naming the variable and never its value, rather than on the first pair.
        check_api_key(self.judge, "PAIRJUDGE_JUDGE__API_KEY")
        for i, juror in enumerate(self.jury):
            check_api_key(juror, f"jury[{i}].api_key (PAIRJUDGE_JURY)")
        for i, tier in enumerate(self.tiers):
            if tier.jury:
                for j, juror in enumerate(tier.jury):
                    check_api_key(juror, f"tiers[{i}].jury[{j}].api_key (PAIRJUDGE_TIERS)")
            else:
                check_api_key(tier, f"tiers[{i}].api_key (PAIRJUDGE_TIERS)")
        names = [tier.name for tier in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"PAIRJUDGE_TIERS: tier names must be unique, got {names}")
        if self.tiers and self.jury:
            raise ValueError("PAIRJUDGE_TIERS and PAIRJUDGE_JURY: configure a cascade or a jury, not both")
        for tier in self.tiers:
            if tier.jury and self.jury_quorum is not None and self.jury_quorum > len(tier.jury):
                raise ValueError(
                    f"PAIRJUDGE_JURY_QUORUM: {self.jury_quorum} votes cannot come from tier {tier.name!r}'s "
                    f"{len(tier.jury)} jurors"
                )
        check_webhook_url(self.audit)
        check_otlp_settings(self.telemetry)
        if self.jury_quorum is not None and self.jury and self.jury_quorum > len(self.jury):
            raise ValueError(
                f"PAIRJUDGE_JURY_QUORUM: {self.jury_quorum} votes cannot come from {len(self.jury)} jurors"
            )
        return self


CONFIG_ENV = "PAIRJUDGE_CONFIG"


def check_api_key(judge: JudgeSettings, variable: str) -> None:
    """A remote judge needs a well-formed key; local servers (llama.cpp, vLLM on loopback) may go without."""
    if judge.kind == "offline":
        return
    key = judge.resolved_api_key()
    host = urllib.parse.urlsplit(judge.base_url).hostname or ""
    needs_key = judge.kind == "anthropic" or not is_loopback(host)
    where = f"{variable} (or its _FILE variant)"
    if key is None or not key.get_secret_value():
        if needs_key:
            raise ValueError(f"{where} is not set: the {judge.kind} judge at {host or judge.base_url} needs an API key")
        return
    value = key.get_secret_value()
    if any(ch.isspace() for ch in value) or not value.isascii() or not value.isprintable():
        raise ValueError(f"{where} is malformed: it contains whitespace or non-printable characters")
    if len(value) < 8:
        raise ValueError(f"{where} is malformed: it is shorter than any real API key")
    # PAIRJUDGE_JUDGE__API_KEY -> PAIRJUDGE_JUDGE__ALLOW_CLEARTEXT_KEY; jury[i].api_key -> jury[i].allow_cleartext_key
    allow = variable.replace("API_KEY", "ALLOW_CLEARTEXT_KEY").replace("api_key", "allow_cleartext_key")
    check_cleartext(
        judge.base_url, allowed=judge.allow_cleartext_key, what="the API key", setting=where, allow_setting=allow
    )


def check_webhook_url(audit: AuditSettings) -> None:
    """The alert webhook URL carries its token: never over plain HTTP off this machine unless allowed."""
    url = audit.resolved_webhook_url()
    if url is None:
        return
    check_cleartext(
        url.get_secret_value(),
        allowed=audit.webhook_allow_cleartext,
        what="the alert webhook URL (it carries its token)",
        setting="PAIRJUDGE_AUDIT__WEBHOOK_URL (or its _FILE variant)",
        allow_setting="PAIRJUDGE_AUDIT__WEBHOOK_ALLOW_CLEARTEXT",
    )


def check_otlp_settings(telemetry: TelemetrySettings) -> None:
    """OTLP headers parse, and never go over plain HTTP off this machine unless allowed."""
    if telemetry.exporter != "otlp":
        return
    if telemetry.resolved_otlp_headers():
        check_cleartext(
            telemetry.otlp_endpoint,
            allowed=telemetry.otlp_allow_cleartext_headers,
            what="the OTLP headers (PAIRJUDGE_TELEMETRY__OTLP_HEADERS)",
            setting="PAIRJUDGE_TELEMETRY__OTLP_ENDPOINT",
            allow_setting="PAIRJUDGE_TELEMETRY__OTLP_ALLOW_CLEARTEXT_HEADERS",
        )


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment, with explicit overrides (the CLI's flags) on top."""
    return Settings(**overrides)  # type: ignore[arg-type]


def environ_for(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process (a worker) read exactly these settings."""
    env = dict(os.environ)
    for section_name, section in settings:
        if isinstance(section, BaseModel):
            for field_name, value in section:
                _put(env, f"PAIRJUDGE_{section_name.upper()}__{field_name.upper()}", value)
        else:
            _put(env, f"PAIRJUDGE_{section_name.upper()}", section)
    return env


def _reveal(value: object) -> object:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, BaseModel):
        return {name: _reveal(v) for name, v in value}
    if isinstance(value, dict):
        return {k: _reveal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_reveal(v) for v in value]
    return value


def _put(env: dict[str, str], name: str, value: object) -> None:
    if value is None:
        env.pop(name, None)
    elif isinstance(value, SecretStr):
        # Only into the child's environment, which is where secrets are meant to live.
        env[name] = value.get_secret_value()
    elif isinstance(value, bool):
        env[name] = "true" if value else "false"
    elif isinstance(value, dict | list | tuple | BaseModel):
        # Complex fields (the price table, the jury) are read back from the environment as JSON, not
        # Python repr; secrets inside them are revealed only into the child's environment.
        env[name] = to_json(_reveal(value)).decode()
    else:
        env[name] = str(value)


#: The sections are re-exported: callers import every settings model from here (or ``streams.config``).
__all__ = [
    "CONFIG_ENV",
    "AuditSettings",
    "ControlSettings",
    "HealthSettings",
    "JudgeSettings",
    "KafkaSettings",
    "PolicySettings",
    "RedactionSettings",
    "ReviewSettings",
    "ReviewUser",
    "ScoreSettings",
    "Settings",
    "ShadowSettings",
    "TelemetrySettings",
    "TopicSettings",
    "WorkerSettings",
    "check_api_key",
    "check_otlp_settings",
    "check_webhook_url",
    "environ_for",
    "load_settings",
    "parse_otlp_headers",
    "read_secret",
]
