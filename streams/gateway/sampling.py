"""Which exchanges the gateway captures, decided on the request's path from its headers alone (no body read).

With experiments (``shadow.experiments_file``), an exchange is captured when the shadow stage would draw it into at
least one experiment: the gateway names the capture's id and makes the stage's own draw (``agents.shadow.drawn``:
a hash of the capture id and the experiment id), on the selectors it can test from the headers (routes, tags,
header values; the model is in the body, so the stage tests it). Every capture sent is then one the stage keeps
(unless the model does not match), and the stage's draw on it agrees with the gateway's. Without experiments,
``gateway.share`` of all exchanges, drawn by capture id in the same way.

Live changes to the experiments (``pairjudge control set shadow_paused|shadow_shares``) reach the stage, not the
gateway: the gateway draws on the file's shares. An experiment whose share went up live gets only the file's
share of captures until the gateway restarts; one paused live still gets captures, which the stage ignores.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pairjudge.agents.shadow import admits, drawn
from pairjudge.schemas.experiments import Experiment
from pairjudge.streams.capture.sink import CaptureMeta

#: The pseudo-experiment the draw uses without an experiments file.
ALL_EXCHANGES: Final = "gateway"
#: Request headers that say what an exchange is, read by the gateway (and passed on to the champion unchanged).
ROUTE_HEADER: Final = "X-Pairjudge-Route"
PROMPT_VERSION_HEADER: Final = "X-Pairjudge-Prompt-Version"
TAGS_HEADER: Final = "X-Pairjudge-Tags"


def new_capture_id() -> str:
    return os.urandom(16).hex()


@dataclass(frozen=True, slots=True)
class Sampler:
    """The draw (``draw``) and the capture's meta (``meta``) of one gateway."""

    experiments: tuple[Experiment, ...]
    share: float
    route: str = ""
    prompt_version: str = ""
    #: Lower-case header names whose values go into the capture's hints.
    hint_headers: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        experiments: Sequence[Experiment],
        *,
        share: float,
        route: str = "",
        prompt_version: str = "",
        hint_headers: Sequence[str] = (),
    ) -> Sampler:
        live = tuple(e for e in experiments if not e.paused and e.share > 0)
        # Without any experiment the file selects nothing: with one that is all paused, nothing is captured.
        return cls(
            live if experiments else (),
            share if not experiments else 0.0,
            route,
            prompt_version,
            tuple(h.lower() for h in hint_headers),
        )

    @property
    def captures_any(self) -> bool:
        return bool(self.experiments) or self.share > 0

    def meta(self, headers: Mapping[str, str]) -> CaptureMeta:
        tags = headers.get(TAGS_HEADER)
        found = {name: value for name in self.hint_headers if (value := headers.get(name)) is not None}
        return CaptureMeta(
            prompt_version=headers.get(PROMPT_VERSION_HEADER) or self.prompt_version,
            route=headers.get(ROUTE_HEADER) or self.route,
            tags=tuple(t.strip() for t in tags.split(",") if t.strip()) if tags else (),
            headers=found,
        )

    def draw(self, meta: CaptureMeta) -> str | None:
        """The new capture's id when this exchange is to be captured, else None."""
        capture_id = new_capture_id()
        if not self.experiments:
            return capture_id if self.share > 0 and drawn(capture_id, ALL_EXCHANGES, self.share) else None
        for experiment in self.experiments:
            if admits(experiment.select, model=None, route=meta.route, tags=meta.tags, headers=meta.headers) and drawn(
                capture_id, experiment.id, experiment.share
            ):
                return capture_id
        return None
