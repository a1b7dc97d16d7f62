"""The words every layer speaks: the case model, run results, the trial's context, the errors.

The ground floor of the package: it imports nothing of the package but leaf helpers (``text``), so
every folder above (traffic, adapters, checks, mocks, conversation, cases, run, report, plugin) can
use it without importing the others. Reading files with their line positions (``document``,
``jsonl``, ``files``, ``parse_cache``) lives here too: cases and tool-mock response files are both
read through it.
"""
