"""``python -m benchmarks.core.report``: the ``preregbench report`` command."""

from benchmarks.core.report import main

raise SystemExit(main())
