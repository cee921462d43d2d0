"""Collection rules for the doctests pytest gathers from ./convt (--doctest-modules).

convt's ONNX runner modules import the optional ``onnx`` package at import time (their
classes derive from onnx's), and convt/dask.py imports dask; without them they are left out
rather than failing collection.
"""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("onnx") is None:
    collect_ignore += ["convt/_onnx"]
if importlib.util.find_spec("dask") is None:
    collect_ignore += ["convt/dask.py"]
