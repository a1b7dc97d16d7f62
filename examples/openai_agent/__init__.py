"""A tool-calling agent loop on the official ``openai`` client, with evals that mock its tools.

The evals mock its tool dispatch. ``agent.run_agent`` is the loop (chat completions with
``tools``, a round limit); ``tools.dispatch_tool`` is the dispatch layer whose real tools would call
Reddit and a vector store, so the evals mock it (``tool_dispatch:`` in ``eval_openai_agent.yaml``).
The LLM stays live: set ``OPENAI_API_KEY`` (and ``OPENAI_BASE_URL`` for any OpenAI-compatible
endpoint, ``OPENAI_MODEL`` for the model).
"""
