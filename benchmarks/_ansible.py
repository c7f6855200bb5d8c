"""Ansible for the fleet benchmark: ``ansible-core`` installed from PyPI into a venv of its own.

``$REMOTE_ACP_BENCH_ANSIBLE`` names another ``ansible`` executable instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ._programs import PY, REPO

__all__ = ["ANSIBLE_VERSION", "ansible"]

ANSIBLE_VERSION = "2.19.14"
"""The newest ansible-core whose controller runs on Python 3.11."""
ANSIBLE_ENV = "REMOTE_ACP_BENCH_ANSIBLE"
ANSIBLE_PREFIX = REPO / ".tools" / f"ansible-core-{ANSIBLE_VERSION}"


def ansible() -> tuple[str | None, str]:
    """The ``ansible`` executable (installed on first use) and a line saying which one."""
    explicit = os.environ.get(ANSIBLE_ENV)
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            return None, f"ansible: {explicit} (from ${ANSIBLE_ENV}) not found; ansible rows skipped"
        return found, f"ansible: {found} (from ${ANSIBLE_ENV})"
    exe = ANSIBLE_PREFIX / "bin" / "ansible"
    marker = ANSIBLE_PREFIX / ".installed"
    if not marker.exists():
        # A venv cannot be moved after it is made (its scripts name their interpreter), so it is
        # made in place; the marker, written last, tells a whole install from an interrupted one.
        shutil.rmtree(ANSIBLE_PREFIX, ignore_errors=True)
        print(f"installing ansible-core {ANSIBLE_VERSION} into {ANSIBLE_PREFIX} (once) ...", flush=True)
        try:
            subprocess.run([PY, "-m", "venv", str(ANSIBLE_PREFIX)], check=True, capture_output=True, timeout=300)
            subprocess.run(
                [
                    str(ANSIBLE_PREFIX / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    f"ansible-core=={ANSIBLE_VERSION}",
                ],
                check=True,
                capture_output=True,
                timeout=900,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            why = (
                exc.stderr.decode(errors="replace").strip().splitlines()[-1:]
                if isinstance(exc, subprocess.CalledProcessError)
                else [str(exc)]
            )
            shutil.rmtree(ANSIBLE_PREFIX, ignore_errors=True)
            return (
                None,
                f"ansible: not available, pip install ansible-core failed ({' '.join(why)}); ansible rows skipped",
            )
        marker.write_text(ANSIBLE_VERSION + "\n")
    return str(exe), f"ansible: ansible-core {ANSIBLE_VERSION} ({exe})"
