"""The LLM traffic layer (SPEC §14): a hook at the httpx transport.

It attributes each request to its case and trial, counts usage and cost, records and replays
per-case cassettes, keeps the run's rate limits and retries transient errors. Loaded and installed
only when an option needs it; ``clients`` (the known clients' infrastructure exceptions) is read
without it, when an agent or the plugin's LLM raised.
"""
