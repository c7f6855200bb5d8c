"""The protocol core: framing, the JSON-RPC peer, wire shapes, the normalizer and the decision
tables. Nothing here does I/O or imports anyio; everything is fed bytes or messages and tested
without processes."""

__all__: list[str] = []
