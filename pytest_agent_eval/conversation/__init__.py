"""Conversations with a simulated user (SPEC §9): the spec, the loop, the scores and the assertions.

No pytest.
"""
