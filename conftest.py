"""Root conftest: collect convt/dask.py's doctests only where dask is installed (the module
itself requires it; ``pip install -e ".[test]"`` installs it)."""
import importlib.util

collect_ignore = [] if importlib.util.find_spec("dask") else ["convt/dask.py"]
