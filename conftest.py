"""Root conftest: loads the suite's pytest plugin and nothing else."""

pytest_plugins = ["benchmarks.core.plugin"]
