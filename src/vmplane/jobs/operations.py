"""The jobs layer's entry points for the CLI and the API, in one namespace.

The work is split by responsibility: `apply` (what a file means for the current job), `vmops`
(operations on a provisioned environment), `lookup` (finding jobs and VMs, exec), and the
workflow glue below in `pipeline/launch.py`.
"""

from __future__ import annotations

from vmplane.jobs.apply import (
    ApplyPlan,
    Decision,
    begin_destroy,
    begin_update,
    create_or_update_job,
    plan_apply,
    plan_destroy,
    plan_update,
    resume_phase,
)
from vmplane.jobs.listings import find_job
from vmplane.jobs.lookup import ExecTarget, current_job_for, exec_command, exec_target, session_hint
from vmplane.jobs.poolstate import stopped_reason
from vmplane.jobs.powerops import plan_start, plan_stop
from vmplane.jobs.secret_push import plan_push
from vmplane.jobs.vmops import (
    OperationError,
    OperationPlan,
    begin_operation,
    plan_attach_lb,
    plan_detach_lb,
    plan_rotate,
    plan_scale,
)
from vmplane.pipeline.launch import ACTIVE_WORKFLOW, enqueue, finish_recovered, run, start, workflow_kind

__all__ = [
    "ACTIVE_WORKFLOW",
    "ApplyPlan",
    "Decision",
    "ExecTarget",
    "OperationError",
    "OperationPlan",
    "begin_destroy",
    "begin_operation",
    "begin_update",
    "create_or_update_job",
    "current_job_for",
    "enqueue",
    "exec_command",
    "exec_target",
    "find_job",
    "finish_recovered",
    "plan_apply",
    "plan_attach_lb",
    "plan_destroy",
    "plan_detach_lb",
    "plan_push",
    "plan_rotate",
    "plan_scale",
    "plan_start",
    "plan_stop",
    "plan_update",
    "resume_phase",
    "run",
    "session_hint",
    "start",
    "stopped_reason",
    "workflow_kind",
]
