"""The package version, in one place: pyproject.toml reads it (setuptools dynamic version), model files and
reports record it."""

__version__ = "0.2.0"
