from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smollm():
    """The bundled SmolLM2, loaded once per session (converted into the cache on first use)."""
    from models import load_model

    model = load_model("smollm2-135m-instruct", batch_size=16)
    yield model
    model.close()


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach for the hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
