"""The plugin's version: one place, read by the package, the reports and the caches."""

__version__ = "0.1.0"
