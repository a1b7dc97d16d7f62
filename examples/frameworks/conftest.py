"""The framework examples talk to a scripted OpenAI-compatible server on a loopback port (offline, free); set
FRAMEWORKS_LLM_URL (and FRAMEWORKS_LLM_KEY, FRAMEWORKS_LLM_MODEL) to run them against a real endpoint."""

from __future__ import annotations

import os

from examples.frameworks.scripted_llm import start

if not os.environ.get("FRAMEWORKS_LLM_URL"):
    os.environ["FRAMEWORKS_LLM_URL"] = start()
