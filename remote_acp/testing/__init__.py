"""Test helpers shipped with remote_acp (see ``remote_acp.testing.scripted_agent``)."""

__all__: list[str] = []
