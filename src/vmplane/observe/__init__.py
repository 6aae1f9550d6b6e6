"""Metrics, structured logs and traces, all keyed by one scope (job, step, org, cloud, phase).

`scope` holds what is running; the log formatter, the metrics and the spans read it. This package sits
low in the layers (beside `vmplane.settings`): clouds, pipeline, api and cli all report through it, and
it imports nothing of theirs. prometheus-client and OpenTelemetry load only when first used.
"""
