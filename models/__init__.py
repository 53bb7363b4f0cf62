"""Model backends behind one contract: transformers (local, hub, bundled), OpenAI-compatible HTTP, scripted.

This package stands alone: it imports nothing from ``benchmarks``, ``fixtures`` or ``worlds``.
"""

__all__: list[str] = []
