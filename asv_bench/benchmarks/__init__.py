"""asv benchmarks for convt, one module per concern (README.md, "Tracking performance")."""
