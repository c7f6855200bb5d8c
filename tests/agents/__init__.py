"""ACP agents used as subprocesses by the test suite."""
