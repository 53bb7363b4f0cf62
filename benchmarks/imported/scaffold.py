"""``preregbench new NAME --from-import LOG``: a protocol folder over imported samples, its prereg drawn from a log.

The log (an exploratory or pilot run) gives the task, the scorer, whether
its scores are 0 or 1 (metric ``accuracy``) or any number (``mean``), the
epochs and the planned size; the thresholds are placeholders to set before
freezing.  The folder holds the prereg, a ``protocol.py`` that instantiates
:class:`benchmarks.imported.protocol.ImportedProtocol` on it, the conftest,
a copy of the imported protocol's rescorer and a README.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Mapping, Sequence

from .spec import HERE, ImportedSample, score_number


def _scorer(samples: Sequence[ImportedSample]) -> str:
    for sample in samples:
        if sample.scores:
            return next(iter(sample.scores))
    raise ValueError("no sample of the log carries a score")


def _toml_string(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def prereg_text(header: Mapping[str, Any], samples: Sequence[ImportedSample], name: str,
                today: _dt.date | None = None) -> str:
    scorer = _scorer(samples)
    values = [score_number(s.scores.get(scorer)) for s in samples if s.error is None]
    metric = "accuracy" if all(v in (0.0, 1.0) for v in values if v is not None) else "mean"
    today = today or _dt.date.today()
    return f"""# {name}: a frozen decision over the samples of an imported {header['format']} evaluation.
# Drawn from the log {header['source']['name']} (sha256 {header['source']['sha256'][:12]}, created {header.get('created_at')}).
# Before freezing: set the thresholds, the planned size and the rules to what you decide BEFORE the confirmatory
# log exists; a log created before this file is committed is decided as EXPLORATORY by preregbench verify.
# Freeze: the sha256 of this file belongs in your frozen-material snapshot; any later edit is a deviation.

[protocol]
name = {_toml_string(name)}
title = {_toml_string(f"{name}: {header.get('task')} ({header['format']})")}
registered = {today.isoformat()}
seed_document = "README.md"

[model]
id = "imported-log"               # the stand-in that reads the imported samples; no model runs
device = "cpu"

[source]
format = {_toml_string(header['format'])}
task = {_toml_string(header.get('task'))}
{f"scorer = {_toml_string(scorer)}".ljust(33)} # the per-sample score the rules read
{f'metric = "{metric}"'.ljust(33)} # accuracy: scores of 0 or 1 (Wilson); mean: any number (cluster-robust)
planned_samples = {int(header.get('samples') or 0)}
epochs = {int(header.get('epochs') or 1)}
cluster = "sample"                # the epochs of one sample share a cluster ("metadata.<field>" for a field)
subset_field = ""                 # a metadata field naming subsets, "" for none
subsets = []                      # subsets with metrics of their own: subset.<name>.{metric}
confidence = 0.95

[thresholds]
max_error_share = 0.02            # errored or unscored units, of all units
min_{metric} = 0.5                # SET BEFORE FREEZING

[classification]
name = "decision"
passing = "PASSED"

[[classification.rules]]
label = "INCOMPLETE"
all = ["planned_share < 1"]

[[classification.rules]]
label = "TOO_MANY_ERRORS"
all = ["error_share > max_error_share"]

[[classification.rules]]
label = "LOW_{metric.upper()}"
all = ["{metric}_low < min_{metric}"]
"""


PROTOCOL_PY = '''"""{name}: a frozen decision over imported samples (the science of benchmarks.imported, this folder's prereg)."""

from pathlib import Path

from benchmarks.imported import ImportedProtocol

PROTOCOL = ImportedProtocol(Path(__file__).resolve().parent)
'''

CONFTEST_PY = '''"""{name}: options, fixtures and the generated rule and completeness tests come from benchmarks.core."""

from benchmarks.core import install, preregistration_checked

with preregistration_checked(globals()):  # a refused prereg is one usage line, exit status 4
    from .protocol import PROTOCOL

    install(PROTOCOL, globals())
'''

README_MD = """# {name}

A frozen decision over the samples of an imported {fmt} evaluation of task `{task}` (the protocol
`imported` of preregbench, with this folder's `prereg.toml`).

1. Set the thresholds and rules in `prereg.toml`, commit it and freeze its sha256, before the confirmatory log exists.
2. Run the evaluation; import its log: `preregbench import {fmt} LOG --out IMPORT_DIR`.
3. Decide: `pytest {folder} -m cpu --{name}-source IMPORT_DIR` (or `preregbench run {folder} --{name}-source IMPORT_DIR`).
4. Check: `preregbench verify RESULTS/{name}/RUN_ID` (EXPLORATORY when the log is older than the prereg's commit).

## Changelog of frozen material

- {today}: written by `preregbench new {name} --from-import`.
"""


def files(header: Mapping[str, Any], samples: Sequence[ImportedSample], name: str, folder: str,
          today: _dt.date | None = None) -> dict[str, str]:
    """Relative path -> text of every file of the scaffolded protocol folder."""
    today = today or _dt.date.today()
    return {
        "__init__.py": "",
        "prereg.toml": prereg_text(header, samples, name, today),
        "protocol.py": PROTOCOL_PY.format(name=name),
        "conftest.py": CONFTEST_PY.format(name=name),
        "rescore.py": (HERE / "rescore.py").read_text(encoding="utf-8"),
        "README.md": README_MD.format(name=name, fmt=header["format"], task=header.get("task"), folder=folder,
                                      today=today.isoformat()),
    }


__all__ = ["files", "prereg_text"]
