"""A session that survives its link: the host side of a reattach window, and the controller's
side of its link protocol.

With a window, the agent does not run under the ssh connection's shell but under a relay that
the start step detaches (``setsid``) into a private session directory on the host. The relay
keeps the agent's output in bounded segment files and feeds it the input the controller sent;
each connection (the first one, and every reattach) is an attachment that replays the output
from the offset the controller has, and that appends the controller's input frames once. When no
connection has been attached for the window's length, the relay ends the agent's whole tree,
frees the slot and removes the directory.

One module per step: :mod:`.segments` (the shell helpers every step shares: segment files,
doorbells, the relay's poke), :mod:`.holder` (the relay), :mod:`.attach` (an attachment, and its
exit codes), :mod:`.start` (the first connection: session directory, secret, slot, relay; the
session script ends with it when the session has a window), :mod:`.login` (a reconnect's login,
which ends with an attachment), :mod:`.host_check` (whether the host keeps what a login leaves
behind) and :mod:`.link` (the controller's side of the protocol, without I/O).
"""

__all__: list[str] = []
