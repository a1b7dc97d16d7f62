"""Example agents and eval files for pytest-agent-eval."""
