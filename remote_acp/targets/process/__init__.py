"""A local agent process: its pipes, its containing supervisor and the fork server that starts them.

:mod:`.agent` owns the process and its pipes, :mod:`.containment` the supervisor that keeps its
whole tree in bounds, :mod:`.fork_server` the per-controller process that forks supervisors,
:mod:`._supervisor` the supervisor's own code (run with ``python -I -S``), and :mod:`.tree` the
``/proc`` reading that finds an agent's descendants.
"""

__all__: list[str] = []
