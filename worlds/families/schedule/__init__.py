"""Family ``schedule``: typed tasks placed on machines at explicit start times (see docs/worlds-and-fixtures.md, section The three families)."""

from ._family import Schedule
from ._generate import SCHEDULE_TIERS, ScheduleTierParams, schedule_tier_params
from ._state import ScheduleSpec, ScheduleState, Task

__all__ = ["SCHEDULE_TIERS", "Schedule", "ScheduleSpec", "ScheduleState", "ScheduleTierParams", "Task",
           "schedule_tier_params"]
