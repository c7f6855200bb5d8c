"""The ssh target: an agent on another host, reached through the local ``ssh`` binary.

One module per concern: :mod:`.target` (the launch target), :mod:`.settings`, :mod:`.argv` (ssh's
command line), :mod:`.config` (ssh_config and ``ssh -G``), :mod:`.loader` (how the remote side's
script and data reach ``/bin/sh``), :mod:`.script` (the remote side of a session),
:mod:`.ready_marker` (the login-proof step before the protocol), :mod:`.errors` (ssh's words read
into causes) and :mod:`.start_slots` (per-address start limits).
"""

__all__: list[str] = []
