"""``remote-acp validate [FILE]``: check a workflow file and say what is wrong, by code, key and line.

The check is :func:`remote_acp.config.check_file`, the same one ``run --config``, ``check host
--config`` and :func:`remote_acp.config.load_workflow` run, so a finding reads the same in each.
It reads the file only: no session, no process, no connection.

Exit status: 0 no error (warnings allowed); 1 some error; 2 usage (no such file); 141 the
output was closed.
"""

from __future__ import annotations

import os
import sys

import click

from ..config import check_file
from .jsonl import json_line
from .local_files import output_gone

__all__ = ["validate"]

DEFAULT_FILE = "WORKFLOW.md"


@click.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the file, whether it is valid, the findings.")
def validate(file: str | None, as_json: bool) -> None:
    """Check the workflow FILE (a YAML file, or a WORKFLOW.md's front matter) [./WORKFLOW.md].

    Each finding is printed as FILE:LINE: severity: key: message [code]. Nothing is started.

    Exit status: 0 valid (warnings allowed); 1 errors; 2 usage error (no such file).
    """
    if file is None:
        file = DEFAULT_FILE
    if not os.path.exists(file):
        raise click.UsageError(f"no workflow file {file!r}")
    checked = check_file(file)
    errors, warnings = len(checked.errors), len(checked.warnings)
    try:
        if as_json:
            document = {
                "file": checked.source,
                "valid": errors == 0,
                "errors": errors,
                "warnings": warnings,
                "findings": [f.to_json() for f in checked.findings],
            }
            sys.stdout.write(json_line(document) + "\n")
        else:
            for finding in checked.findings:
                sys.stdout.write(finding.text + "\n")
            summary = "valid" if errors == 0 else "not valid"
            sys.stdout.write(f"{checked.source}: {summary}: {_count(errors, 'error')}, {_count(warnings, 'warning')}\n")
        sys.stdout.flush()
    except BrokenPipeError:
        output_gone()
    sys.exit(1 if errors else 0)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"
