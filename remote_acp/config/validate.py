"""The check of a workflow's text: findings with stable codes, key paths and lines.

One function, :func:`check_text`, is the whole check. ``remote-acp validate`` prints its
findings, ``run --config`` and ``check host --config`` run it before anything starts, and
:func:`~remote_acp.config.load_workflow` runs it for the library, so the text of a finding is the
same wherever it shows. It reads the text only: it builds no session and starts no process, and
a path the file names is not opened here (a missing MCP file fails at session start).

Codes (docs/configuration.md lists each with its severity):
``file.unreadable``, ``workflow.front_matter.unterminated``, ``yaml.syntax``, ``yaml.not_mapping``,
``key.unknown``, ``key.ignored``, ``value.missing``, ``value.wrong_type``, ``value.out_of_range``,
``value.invalid``, ``agent.kind.unsupported``, ``agent.command.empty``,
``agent-client-protocol.mcp_config.wrong_type``, ``agent.effort.not_forwarded``,
``agent.kind.no_usage_reporting``, ``agent.kind.no_cost_estimate``,
``agent-client-protocol.local_only``, ``worker.ssh_strict_host_key_checking.insecure``,
``worker.ssh_reattach_window_s.local_run``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import yaml
from pydantic import ValidationError

from .models import EFFORT_KEYS, KIND, AcpBlock, AgentBlock, WorkerBlock, WorkflowConfig, type_name

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pydantic_core import ErrorDetails

__all__ = ["Checked", "Finding", "Severity", "check_text", "key_path", "line_of", "split_front_matter"]

Severity = Literal["error", "warning"]

_BLOCKS: Final[dict[str, type[AgentBlock | AcpBlock | WorkerBlock]]] = {
    "agent": AgentBlock,
    KIND: AcpBlock,
    "worker": WorkerBlock,
}
_EXPECTED: Final = {
    "int_type": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}
_REQUIRED: Final[dict[tuple[str | int, ...], str]] = {
    ("agent",): " (the agent block, with at least its command)",
    ("agent", "command"): " (the runtime with its protocol switch, e.g. 'qwen --acp')",
}
_LOCAL_ONLY: Final = {
    "mcp_config": "tool servers are delivered to local launches only",
    "env_allowlist": "the environment allow-list applies to local launches only",
    "fs_read": "file-system access is never advertised over ssh (the files are on the host)",
    "fs_write": "file-system access is never advertised over ssh (the files are on the host)",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem of a workflow file: an ``error`` stops it from being used, a ``warning`` does not."""

    code: str
    """Stable: scripts may match on it."""
    severity: Severity
    key: str
    """The key path (``agent.max_turns``, ``worker.ssh_hosts[0]``); empty for the whole file."""
    message: str
    line: int | None
    """1-based line in the file (the front matter's lines count from the file's first line)."""
    source: str
    """The file as it was named."""

    @property
    def text(self) -> str:
        """``FILE:LINE: severity: key: message [code]``, the one rendering everywhere."""
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.severity}: {self.unlabelled}"

    @property
    def unlabelled(self) -> str:
        """``key: message [code]``: :attr:`text` without place and severity."""
        subject = f"{self.key}: " if self.key else ""
        return f"{subject}{self.message} [{self.code}]"

    @property
    def logged(self) -> str:
        """``FILE:LINE: key: message [code]``: :attr:`text` for a log record, whose level already
        says the severity (``warning: FILE:LINE: ...``, not ``warning: FILE:LINE: warning: ...``)."""
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.unlabelled}"

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity,
            "key": self.key,
            "line": self.line,
            "message": self.message,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class Checked:
    """What :func:`check_text` found: the configuration when there is no error, every finding, and
    the prompt a WORKFLOW.md's body holds."""

    source: str
    config: WorkflowConfig | None
    findings: tuple[Finding, ...]
    prompt: str | None = None

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")


def split_front_matter(text: str) -> tuple[str, int, str] | None:
    """A WORKFLOW.md's ``(front matter, lines before it, body)``; ``None`` when its ``---`` block is
    never closed. A file that does not open with ``---`` is all body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return "", 0, text
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            return "".join(lines[1:index]), 1, "".join(lines[index + 1 :])
    return None


def check_text(text: str, source: str, *, markdown: bool = False) -> Checked:
    """Check a workflow: a YAML document, or (``markdown``) a WORKFLOW.md whose YAML front matter is
    the configuration and whose body is the prompt. ``source`` names the file in the findings."""
    offset, prompt = 0, None
    if markdown:
        split = split_front_matter(text)
        if split is None:
            return Checked(
                source,
                None,
                (
                    Finding(
                        "workflow.front_matter.unterminated",
                        "error",
                        "",
                        "the front matter opened by '---' on line 1 is never closed by a '---' line",
                        1,
                        source,
                    ),
                ),
            )
        text, offset, body = split
        prompt = body.strip() or None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(part for part in (exc.context, exc.problem) if part) or "not valid YAML"
        line = None if mark is None else mark.line + 1 + offset
        return Checked(source, None, (Finding("yaml.syntax", "error", "", reason, line, source),), prompt)
    except yaml.YAMLError as exc:  # no mark: a reader error (a control character, say)
        return Checked(source, None, (Finding("yaml.syntax", "error", "", str(exc), None, source),), prompt)
    except (ValueError, OverflowError, RecursionError) as exc:
        # Raised by the constructors, not the parser: a date like 2024-13-45, or nesting deeper
        # than the interpreter's stack.
        reason = f"a value YAML cannot construct: {type(exc).__name__}: {str(exc)[:200]}"
        if isinstance(exc, RecursionError):
            reason = "the document nests too deeply"
        return Checked(source, None, (Finding("yaml.syntax", "error", "", reason, None, source),), prompt)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        found = f"the document is {type_name(data)}, not a mapping of blocks (agent, worker...)"
        return Checked(source, None, (Finding("yaml.not_mapping", "error", "", found, 1 + offset, source),), prompt)

    found_list: list[tuple[str, Severity, tuple[str | int, ...], str]] = []
    config: WorkflowConfig | None = None
    try:
        config = WorkflowConfig.model_validate(data)
    except ValidationError as exc:
        found_list.extend(_from_error(error) for error in exc.errors(include_url=False))
    found_list.extend(_advisories(data))

    findings = [
        Finding(code, severity, key_path(loc), message, _line(text, loc, offset), source)
        for code, severity, loc, message in found_list
    ]
    findings.sort(key=lambda f: (f.line or 0, f.severity != "error", f.code, f.key))
    return Checked(
        source, config if not any(f.severity == "error" for f in findings) else None, tuple(findings), prompt
    )


def _from_error(error: ErrorDetails) -> tuple[str, Severity, tuple[str | int, ...], str]:
    loc = tuple(part for part in error["loc"] if isinstance(part, str | int))
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if "." in kind:  # one of ours (models.py), its type the code
        return kind, "error", loc, error["msg"]
    if kind == "extra_forbidden":
        return "key.unknown", "error", loc, "unknown key" + _suggestion(loc)
    if kind == "missing":
        what = _REQUIRED.get(loc, "")
        return "value.missing", "error", loc, f"is required{what}"
    if kind in _EXPECTED:
        quoted = kind == "int_type" and isinstance(value, str) and value.strip().lstrip("-").isdigit()
        hint = " (write the number without quotes)" if quoted else ""
        return "value.wrong_type", "error", loc, f"must be {_EXPECTED[kind]}, got {type_name(value)}{hint}"
    if kind == "greater_than_equal":
        return "value.out_of_range", "error", loc, f"must be at least {ctx['ge']}, got {value!r}"
    if kind == "too_short":
        return "value.out_of_range", "error", loc, "must not be empty"
    if kind == "literal_error":
        return "value.invalid", "error", loc, f"must be one of {ctx['expected']}, got {value!r}"
    return "value.invalid", "error", loc, error["msg"]


def _suggestion(loc: Sequence[str | int]) -> str:
    """``; did you mean max_turns?`` for a key close to one the block knows."""
    if len(loc) != 2 or loc[0] not in _BLOCKS:
        return ""
    model = _BLOCKS[str(loc[0])]
    known = [f.alias or name for name, f in model.model_fields.items()]
    close = difflib.get_close_matches(str(loc[1]), known, n=1)
    return f"; did you mean {close[0]}?" if close else f" (known keys: {', '.join(sorted(known))})"


def _advisories(data: dict[Any, Any]) -> list[tuple[str, Severity, tuple[str | int, ...], str]]:
    """Warnings, read from the document as written (so they show beside its errors too)."""
    out: list[tuple[str, Severity, tuple[str | int, ...], str]] = []
    for key in data:
        if key not in _BLOCKS:
            close = difflib.get_close_matches(str(key), list(_BLOCKS), n=1, cutoff=0.7)
            hint = f"; did you mean {close[0]}?" if close else ""
            out.append(("key.ignored", "warning", (str(key),), f"is not read by remote-acp{hint}"))
    blocks: dict[str, dict[Any, Any]] = {}
    for name in _BLOCKS:
        block = data.get(name)
        blocks[name] = block if isinstance(block, dict) else {}
    for name in ("agent", KIND):
        for key in EFFORT_KEYS:
            if key in blocks[name]:
                message = f"effort setting has no effect for this agent kind ({KIND} forwards none to the runtime)"
                out.append(("agent.effort.not_forwarded", "warning", (name, key), message))
    hosts = blocks["worker"].get("ssh_hosts")
    if hosts:  # launched over ssh
        out.append(
            (
                "agent.kind.no_usage_reporting",
                "warning",
                ("agent", "kind"),
                f"{KIND} sessions launched over ssh report no token usage (it is measured where the agent runs)",
            )
        )
        out.append(
            (
                "agent.kind.no_cost_estimate",
                "warning",
                ("agent", "kind"),
                f"{KIND} sessions launched over ssh get no cost estimate (there is no token usage to price)",
            )
        )
        for key, why in _LOCAL_ONLY.items():
            value = blocks[KIND].get(key)
            if value is not None and value is not False:
                out.append(
                    ("agent-client-protocol.local_only", "warning", (KIND, key), f"has no effect over ssh: {why}")
                )
    elif blocks["worker"].get("ssh_reattach_window_s") is not None:
        out.append(
            (
                "worker.ssh_reattach_window_s.local_run",
                "warning",
                ("worker", "ssh_reattach_window_s"),
                "applies only to a run on a host: this workflow runs on this machine (no worker.ssh_hosts), "
                "where a session has no link to lose",
            )
        )
    if blocks["worker"].get("ssh_strict_host_key_checking") in (False, "no"):
        out.append(
            (
                "worker.ssh_strict_host_key_checking.insecure",
                "warning",
                ("worker", "ssh_strict_host_key_checking"),
                "'no' connects even to a host whose key changed (a host key policy of accept-new or yes refuses it)",
            )
        )
    return out


def key_path(loc: Sequence[str | int]) -> str:
    """``('worker', 'ssh_hosts', 0)`` as ``worker.ssh_hosts[0]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line(text: str, loc: Sequence[str | int], offset: int) -> int | None:
    line = line_of(text, loc)
    return None if line is None else line + offset


def line_of(text: str, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the key at ``loc`` in the YAML ``text``, as far down as the path exists
    (a key left out gives the line of the key whose block should hold it); ``None`` for an empty
    document.

    Much the walk of :func:`hostinv.inventory.yaml_text.line_of`, kept here because importing
    ``hostinv`` would cost a run from a workflow half a second of start-up.
    """
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(
                (kv for kv in node.value if isinstance(kv[0], yaml.ScalarNode) and kv[0].value == str(part)), None
            )
            if pair is None:
                break
            line = pair[0].start_mark.line + 1  # the key's line; a block value starts below it
            node = pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
