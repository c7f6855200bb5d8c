"""hostinv: host inventory and probing for fleets of build hosts.

It knows nothing of ACP and never imports ``remote_acp`` (DESIGN §2's dependency rule).
"""

__all__: list[str] = []
