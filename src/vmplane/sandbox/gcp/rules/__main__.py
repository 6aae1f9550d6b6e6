"""`python -m vmplane.sandbox.gcp.rules`: print the README's table of the GCP fidelity catalogue."""

from vmplane.sandbox.gcp.rules import load, table

load()
print(table(), end="")
