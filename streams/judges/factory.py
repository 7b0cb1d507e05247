"""Build the configured judge. The offline judge is the embedded default; it needs no network."""

from __future__ import annotations

from agents.judge import Judge
from agents.offline import OfflineJudge
from streams.settings import JudgeSettings


def build_judge(settings: JudgeSettings) -> Judge:
    if settings.kind == "offline":
        return OfflineJudge()
    from streams.judges.openai import OpenAICompatibleJudge

    return OpenAICompatibleJudge(
        base_url=settings.base_url,
        model=settings.model,
        version=settings.version,
        api_key=settings.resolved_api_key(),
        response_format=settings.response_format,
        temperature=settings.temperature,
        seed=settings.seed,
        max_tokens=settings.max_tokens,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_retries=settings.max_retries,
        max_concurrency=settings.max_concurrency,
    )
