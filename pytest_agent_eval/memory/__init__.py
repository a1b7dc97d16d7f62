"""Memory (SPEC §24): the journal a run appends each finished case to, the store that keeps every
run, and the viewer of runs over time. A floor above ``report`` (it reads records and builds
reports) and below ``plugin`` (whose ``plugin/memory.py`` registers it) and ``cli`` (``agent-eval
report``, ``runs``, ``import``, ``view``).
"""
