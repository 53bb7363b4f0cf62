"""Syrupy extension that keeps every snapshot under the suite's top-level ``snapshots/`` folder.

A test at ``<root>/benchmarks/core/tests/test_frozen.py`` stores its snapshots in
``<root>/snapshots/benchmarks/core/tests/test_frozen.ambr``, where ``<root>`` is
the nearest folder above the test holding ``pyproject.toml``.
"""

from __future__ import annotations

from pathlib import Path

from syrupy.extensions.amber import AmberSnapshotExtension


def _project_root(test_dir: Path) -> Path:
    for folder in [test_dir, *test_dir.parents]:
        if (folder / "pyproject.toml").is_file():
            return folder
    return test_dir


class SuiteSnapshotExtension(AmberSnapshotExtension):
    @classmethod
    def dirname(cls, *, test_location) -> str:
        test_dir = Path(test_location.filepath).resolve().parent
        root = _project_root(test_dir)
        return str(root / "snapshots" / test_dir.relative_to(root))
