"""Family ``dataflow``: typed dataflow programs (circuits) over supplied primitives (see docs/worlds-and-fixtures.md, section The three families)."""

from ._enumerate import enumerate_programs, program_alphabet
from ._family import Dataflow
from ._generate import DATAFLOW_TIERS, DataflowTierParams, dataflow_tier_params, draw_world
from ._grammar import Binding, canonical_wire, parse_program
from ._pairs import (
    dataflow_isomorphism,
    instantiate_dataflow_replica,
    program_copy_audit,
    program_edges,
    program_signature,
)
from ._state import OPS, DataflowSpec, DataflowState, DfPrimitive
from ._text import DATAFLOW_GRAMMAR_TEXT, format_dataflow_state, render_dataflow_world

__all__ = [
    "DATAFLOW_GRAMMAR_TEXT",
    "DATAFLOW_TIERS",
    "OPS",
    "Binding",
    "Dataflow",
    "DataflowSpec",
    "DataflowState",
    "DataflowTierParams",
    "DfPrimitive",
    "canonical_wire",
    "dataflow_isomorphism",
    "dataflow_tier_params",
    "draw_world",
    "enumerate_programs",
    "format_dataflow_state",
    "instantiate_dataflow_replica",
    "parse_program",
    "program_alphabet",
    "program_copy_audit",
    "program_edges",
    "program_signature",
    "render_dataflow_world",
]
