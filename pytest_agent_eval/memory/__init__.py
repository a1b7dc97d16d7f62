"""Memory (SPEC §24): the run journal, the store that keeps every run, the viewer of runs over time.

The journal is the file a run appends each finished case to. A floor above ``report`` (it reads
records and builds reports) and below ``plugin`` (whose ``plugin/memory.py`` registers it) and
``cli`` (``agent-eval report``, ``runs``, ``import``, ``view``).
"""
