"""Traces in and out of the run (SPEC §23).

OpenTelemetry names, a trial's span tree, the run's tracing, trace files. A floor above
``traffic`` (it imports ``core`` and ``traffic`` only); the OpenTelemetry SDK is imported only by
``engine`` (the ``otel`` extra), loaded when a trace option or a span check asks for it.
"""
