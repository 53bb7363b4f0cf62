"""Finite certified worlds for Fiction-CWR: world model, world files, checker, enumerator, pair builder.

No language model is used anywhere in this package.
"""

__all__: list[str] = []
