"""What ssh writes to stderr in the cases the tests read (one line per ``|``-separated part)."""

from __future__ import annotations

__all__ = ["CHANGED_KEY", "LOGIN", "TRANSFER", "UNKNOWN_KEY"]

LOGIN = 'Authenticated to 10.0.0.5 ([10.0.0.5]:22) using "publickey".'
TRANSFER = "Transferred: sent 3512, received 3344 bytes, in 0.1 seconds | Bytes per second: sent 63115.9, received 1.0"
CHANGED_KEY = " | ".join(
    [
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
        "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
        "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!",
        "Add correct host key in /home/u/.ssh/known_hosts to get rid of this message.",
        "Offending ED25519 key in /home/u/.ssh/known_hosts:1",
        "remove with:",
        'ssh-keygen -f "/home/u/.ssh/known_hosts" -R "[build]:2222"',
        "Host key for [build]:2222 has changed and you have requested strict checking.",
        "Host key verification failed.",
    ]
)
UNKNOWN_KEY = (
    "No ED25519 host key is known for [build]:2222 and you have requested strict checking. | "
    "Host key verification failed."
)
