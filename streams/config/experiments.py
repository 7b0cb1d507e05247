"""The shadow stage's experiments file (``PAIRJUDGE_SHADOW__EXPERIMENTS_FILE``): TOML or JSON, read once at start.

TOML: one ``[[experiments]]`` table each; JSON: ``{"experiments": [...]}``. The contract is
``schemas.experiments.ExperimentFile``; a file that does not meet it stops the worker at start with the field that
failed, never starting with half its experiments.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from pairjudge.schemas.experiments import Experiment, ExperimentFile


class ExperimentsFileError(ValueError):
    """The experiments file cannot be read or does not meet the contract."""


def load_experiments(path: Path | None) -> tuple[Experiment, ...]:
    """The experiments in ``path`` (none without a file)."""
    if path is None:
        return ()
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
        return ExperimentFile.model_validate(data).experiments
    except OSError as exc:
        raise ExperimentsFileError(f"cannot read the experiments file {path}: {exc.strerror or exc}") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        if isinstance(exc, ValidationError):
            where = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)[:5]
            )
            raise ExperimentsFileError(f"the experiments file {path} is not valid: {where}") from None
        raise ExperimentsFileError(f"the experiments file {path} is not valid TOML or JSON: {exc}") from None
