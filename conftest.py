"""Collection rules for the doctests pytest gathers from ./convt (--doctest-modules).

convt's ONNX runner modules import the optional ``onnx`` package at import time (their
classes derive from onnx's); without it they are left out rather than failing collection.
"""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("onnx") is None:
    collect_ignore += ["convt/_onnx_ops.py", "convt/_onnx_backend.py"]
