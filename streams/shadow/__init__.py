"""The shadow stage: captures in, pairs out (docs/guides/production-traffic.md).

``ShadowStage`` reads each capture on ``pairjudge.captures``, asks each experiment's challenger the same request
(``streams.shadow.challenger``), and publishes the ``CandidatePair`` on ``pairjudge.pairs``, where the judging
stages take it. The pure part (which experiments, the request, the reply, the pair) is ``agents.shadow``.
"""

from pairjudge.streams.shadow.challenger import ChallengerClient, ChallengerFailed
from pairjudge.streams.shadow.stage import ShadowStage, build_shadow_stage

__all__ = ["ChallengerClient", "ChallengerFailed", "ShadowStage", "build_shadow_stage"]
