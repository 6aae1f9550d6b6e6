"""vmplane: production-shape VM environments from one JSONC file."""

__version__ = "0.1.0"
