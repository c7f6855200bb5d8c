"""Workflow configuration: a YAML file or a WORKFLOW.md's front matter, checked and loaded.

Importing this package loads pydantic and PyYAML; nothing else in ``remote_acp`` imports it
until a workflow is used, so a session started without one does not pay for them.

>>> workflow = load_workflow("WORKFLOW.md")            # doctest: +SKIP
>>> options = workflow.session_options()               # doctest: +SKIP
"""

from __future__ import annotations

from .load import ConfigError, SchedulingLimits, Workflow, check_file, load_workflow
from .models import AcpBlock, AgentBlock, WorkerBlock, WorkflowConfig
from .validate import Checked, Finding, Severity, check_text

__all__ = (
    "AcpBlock",
    "AgentBlock",
    "Checked",
    "ConfigError",
    "Finding",
    "SchedulingLimits",
    "Severity",
    "WorkerBlock",
    "Workflow",
    "WorkflowConfig",
    "check_file",
    "check_text",
    "load_workflow",
)
