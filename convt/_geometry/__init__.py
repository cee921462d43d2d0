"""The shared padding resolution: every convention's attributes -> ``PadRule`` -> one canonical
``Geometry`` (``geometry``), with the validation, dtype and front-end helpers all front ends use.
Imports nothing else of convt."""
