"""vmplane: production-shape VM environments from one JSONC file."""

__version__ = "0.2.0"
