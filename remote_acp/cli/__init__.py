"""The ``remote-acp`` command. The library never imports this package."""

__all__: list[str] = []
