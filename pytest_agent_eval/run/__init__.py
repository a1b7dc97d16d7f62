"""Running one case without pytest: its trials, the agent calls, the event loops, the results.

The runner (trials, turns, checks, verdict), one agent call, the event loops, eager start, blocking
calls, stalls, the conversation trial, and what running produces (``results``).
"""
