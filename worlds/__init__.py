"""Finite certified worlds for Fiction-CWR: world model, world files, artifact grammar, strict checker.

A world W = (S, A, T, s0, G, C, B) is data: a TOML file validated against
``worlds/schema/world.schema.json`` and interpreted by a registered family
(``token_workshop``, ``schedule``, ``dataflow``; each a subpackage of
``worlds.families`` behind the ``Family`` interface).  ``check(world, text)`` returns a
``CheckResult`` and never raises on candidate text; ``reference_replay`` is an
independently written second interpreter for differential replay;
``enumerate_solutions(world, bounds)`` lists every valid bounded solution;
``motif_signature`` and ``solution_classes`` group solutions up to
independent-step order and renaming; ``instantiate_replica``,
``abstract_fingerprint`` and ``copy_solves`` compare replicas;
``build_showcase_pairs`` builds the F/C pairs (``Pair``, ``PairSide``) with
their manifests (replica names drawn by a label scheme, ``LABEL_SCHEMES``), and
``render_world`` writes a world as handbook text (``RENDERINGS``: prose or tables).

No language model is used anywhere in this package.
"""

from pathlib import Path

from ._checker import (
    CheckResult,
    Status,
    TraceEntry,
    canonical_state,
    check,
    check_steps,
    reference_replay,
)
from ._construct import build_pair
from ._copy_audit import copy_audit
from ._dataflow_reference import replay as dataflow_reference_replay
from ._enumerate import (
    Bounds,
    Enumeration,
    EnumerationLimitError,
    bounded_solutions,
    enumerate_solutions,
    grounded_steps,
)
from ._errors import (
    CheckerUsageError,
    FamilyRegistryError,
    PairConstructionError,
    WorldFileError,
    WorldsError,
)
from ._examples import example_states_on_solution_paths, examples_chain_to_goal
from ._grammar import ParseResult, Step, format_steps, parse_candidate
from ._graph import reachable_graph
from ._loader import SCHEMA_VERSION, load_world, world_from_mapping
from ._manifest import (
    MANIFEST_SCHEMA_PATH,
    TOKENIZERS,
    build_manifest,
    manifest_digest,
    prompt_token_counts,
    validate_manifest,
)
from ._model import (
    INT_TYPE,
    Budget,
    Example,
    Failure,
    Family,
    FamilyGenerator,
    Param,
    Primitive,
    Reason,
    StateLineFormat,
    World,
)
from ._pair_spec import PairSpec, load_pair_spec
from ._pair_types import (
    MOTIF_REQUIRED,
    WITNESS_ONLY,
    Demonstration,
    Pair,
    PairSide,
    PrimitiveExample,
)
from ._pairs import (
    LABEL_SCHEMES,
    Fingerprint,
    Replica,
    abstract_fingerprint,
    copy_solves,
    instantiate_replica,
    rename_mapping,
)
from ._prompt import render_prompt
from ._reference import Replay
from ._registry import family_names, get_family, register_family, registered_families, unregister_family
from ._render import GRAMMAR_TEXT, RENDERINGS, format_state, raw_of_world, render_world
from ._showcase import (
    PAIRS_DIR,
    build_pair_from_file,
    build_showcase_pairs,
    pair_spec_paths,
)
from ._signature import dependent, motif_signature, solution_classes
from ._steps import StepFamily
from ._structure import isomorphism_certificate, production_edges
from .families import (
    DATAFLOW_GRAMMAR_TEXT,
    Binding,
    Dataflow,
    DataflowState,
    Schedule,
    ScheduleState,
    TokenState,
    TokenWorkshop,
    enumerate_programs,
    parse_program,
    program_alphabet,
    render_dataflow_world,
)

#: ``check_steps`` under the name the dataflow family's documentation uses: already-parsed bindings.
check_bindings = check_steps

#: Folder holding the shipped world files.
DATA_DIR = Path(__file__).parent / "data"
#: The published JSON Schema of world files.
SCHEMA_PATH = Path(__file__).parent / "schema" / "world.schema.json"


def shipped_worlds() -> tuple[Path, ...]:
    """Paths of the world files shipped under ``worlds/data``, sorted."""
    return tuple(sorted(DATA_DIR.glob("*.toml")))


#: Folder holding the shipped worlds of family ``dataflow`` (kept apart from the
#: certification set of the step-sequence checker under ``data/*.toml``).
DATAFLOW_DIR = DATA_DIR / "dataflow"


def dataflow_worlds() -> tuple[Path, ...]:
    """Paths of the shipped dataflow world files under ``worlds/data/dataflow``, sorted."""
    return tuple(sorted(DATAFLOW_DIR.glob("*.toml")))


__all__ = [
    "LABEL_SCHEMES",
    "DATAFLOW_GRAMMAR_TEXT",
    "DATA_DIR",
    "GRAMMAR_TEXT",
    "RENDERINGS",
    "MANIFEST_SCHEMA_PATH",
    "MOTIF_REQUIRED",
    "PAIRS_DIR",
    "SCHEMA_PATH",
    "SCHEMA_VERSION",
    "TOKENIZERS",
    "WITNESS_ONLY",
    "Bounds",
    "bounded_solutions",
    "program_alphabet",
    "render_dataflow_world",
    "Budget",
    "CheckResult",
    "CheckerUsageError",
    "Demonstration",
    "Enumeration",
    "EnumerationLimitError",
    "Example",
    "Failure",
    "Family",
    "FamilyRegistryError",
    "Fingerprint",
    "Pair",
    "PairConstructionError",
    "PairSide",
    "PairSpec",
    "Param",
    "ParseResult",
    "Primitive",
    "PrimitiveExample",
    "Reason",
    "Replay",
    "Replica",
    "Schedule",
    "ScheduleState",
    "Status",
    "Step",
    "TokenState",
    "TokenWorkshop",
    "TraceEntry",
    "World",
    "WorldFileError",
    "WorldsError",
    "abstract_fingerprint",
    "build_manifest",
    "build_pair",
    "build_pair_from_file",
    "build_showcase_pairs",
    "canonical_state",
    "check",
    "check_steps",
    "copy_audit",
    "copy_solves",
    "dependent",
    "enumerate_solutions",
    "example_states_on_solution_paths",
    "examples_chain_to_goal",
    "family_names",
    "format_state",
    "format_steps",
    "get_family",
    "grounded_steps",
    "instantiate_replica",
    "isomorphism_certificate",
    "load_pair_spec",
    "load_world",
    "manifest_digest",
    "motif_signature",
    "pair_spec_paths",
    "parse_candidate",
    "production_edges",
    "prompt_token_counts",
    "raw_of_world",
    "reachable_graph",
    "reference_replay",
    "register_family",
    "rename_mapping",
    "render_prompt",
    "render_world",
    "shipped_worlds",
    "solution_classes",
    "validate_manifest",
    "world_from_mapping",
    "Binding",
    "DATAFLOW_DIR",
    "Dataflow",
    "DataflowState",
    "check_bindings",
    "dataflow_reference_replay",
    "dataflow_worlds",
    "enumerate_programs",
    "parse_program",
]

from ._generate import (  # noqa: E402
    GENERATOR_VERSION,
    GenerationResult,
    generate_pairs,
    generated_families,
    generated_tiers,
)
from ._interchange import interchangeable_edges  # noqa: E402
from ._tiers import TIERS, tier_of, tier_properties  # noqa: E402

#: Families the generator draws (the built-in families with a generator, in registration order).
GENERATED_FAMILIES = generated_families()
#: Tiers the generator draws for each family: those its bases can measure as.
GENERATED_TIERS = generated_tiers()

__all__ += ["GENERATED_FAMILIES", "GENERATED_TIERS", "GENERATOR_VERSION", "GenerationResult", "TIERS",
            "generate_pairs", "generated_families", "generated_tiers", "interchangeable_edges", "tier_of",
            "tier_properties", "FamilyGenerator", "StateLineFormat", "StepFamily", "registered_families",
            "unregister_family", "INT_TYPE"]
