"""Real logs for the imported protocol's self-checks: inspect_ai logs made here, lm-eval output committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from .inspect_logs import make_log

DATA = Path(__file__).resolve().parent / "data"
LMEVAL = DATA / "lmeval"


@pytest.fixture(scope="session")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One real inspect_ai run of the tiny task, written as a ``.eval`` and as a ``.json`` log."""
    folder = tmp_path_factory.mktemp("inspect-logs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INSPECT_LOG_DIR", str(folder))
        return {"eval": make_log(folder / "eval", patch), "json": make_log(folder / "json", patch, log_format="json")}
