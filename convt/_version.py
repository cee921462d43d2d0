"""convt's version, in one place (pyproject.toml holds the same for the build)."""
__version__ = "0.1.0"
