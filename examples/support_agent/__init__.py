"""A small, offline, deterministic customer-support agent used by the example evals."""
