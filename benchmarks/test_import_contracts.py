"""The layers of the suite hold: every import-linter contract of ``pyproject.toml`` is kept.

The contracts (``[tool.importlinter]``): no import cycle between sibling modules or packages; ``models``
imports nothing of the project; ``worlds`` and ``fixtures`` import neither ``models`` nor ``benchmarks``;
``benchmarks.core`` imports no protocol; protocols never import each other; the protocol shape imports nothing
of the runner or the report.  A change that breaks one fails here, with import-linter's own account of the
offending imports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.core.rundir import SUITE_ROOT


def test_every_import_contract_is_kept() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert command is not None, "import-linter is not installed: scripts/setup.sh installs the test extra"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SUITE_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([command, "--no-cache", "--no-logo", str(SUITE_ROOT / "pyproject.toml")], cwd=SUITE_ROOT,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and " KEPT" in done.stdout, done.stdout
