"""The embedded Google Cloud sandbox: an emulated project on 127.0.0.1, checked against Google's own
discovery documents (see server.py; control endpoints in control.py)."""
