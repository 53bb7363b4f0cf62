"""The built-in world families, one subpackage each, registered here and nowhere else.

Generic world code never imports a family subpackage: it asks the registry
(``worlds.get_family``).  Adding a family is a new subpackage plus one entry
in ``BUILT_IN`` (see docs/worlds-and-fixtures.md, section Adding a world family).
"""

from .._registry import register_family
from .dataflow import (
    DATAFLOW_GRAMMAR_TEXT,
    Binding,
    Dataflow,
    DataflowState,
    enumerate_programs,
    parse_program,
    program_alphabet,
    render_dataflow_world,
)
from .schedule import Schedule, ScheduleState
from .token_workshop import TokenState, TokenWorkshop

#: The built-in families' names the public surface (``worlds``) re-exports.
__all__ = [
    "BUILT_IN",
    "DATAFLOW_GRAMMAR_TEXT",
    "Binding",
    "Dataflow",
    "DataflowState",
    "Schedule",
    "ScheduleState",
    "TokenState",
    "TokenWorkshop",
    "enumerate_programs",
    "parse_program",
    "program_alphabet",
    "render_dataflow_world",
]

#: The built-in families, in registration order (the order the generator lists the families it draws).
BUILT_IN = (TokenWorkshop(), Schedule(), Dataflow())

for _family in BUILT_IN:
    register_family(_family)
