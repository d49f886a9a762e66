"""The stages of ``benchmarks/bench_student_summeval.py``, one module each, over ``benchmarks/harness.py``.

:data:`STAGES` maps each stage's name to its function ``stage(bench, train, test)``, in the order
a run takes them; each writes its figures into the :class:`~student_stages.common.Bench` and saves.
"""

from __future__ import annotations

from .baselines import stage_baselines
from .cv import stage_cv, stage_syscv
from .limits import stage_limits
from .speed import stage_speed
from .students import stage_curve, stage_disjoint, stage_students
from .throughput import stage_throughput

STAGES = {
    "speed": stage_speed,
    "cv": stage_cv,
    "syscv": stage_syscv,
    "baselines": stage_baselines,
    "students": stage_students,
    "disjoint": stage_disjoint,
    "curve": stage_curve,
    "limits": stage_limits,
    "throughput": stage_throughput,
}

__all__ = ["STAGES"]
