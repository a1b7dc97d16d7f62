"""Running one case without pytest: the runner (trials, turns, checks, verdict), one agent call, the
event loops, eager start, blocking calls, stalls, the conversation trial, and what running produces
(``results``).
"""
