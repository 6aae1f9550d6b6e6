"""The web dashboard `vmplane serve` serves at `/`: server-rendered pages over the same decisions as the
API (jobs.operations, api.actions), with htmx and server-sent events only as enhancements."""

from vmplane.dashboard.app import create_server

__all__ = ["create_server"]
