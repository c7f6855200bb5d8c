"""Test support code: a mock of the OpenAI chat-completions API and helpers to launch qwen-code."""
