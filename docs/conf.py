"""Sphinx configuration for convt's documentation.

Build (from the repository root, after ``pip install -e ".[docs]"``)::

    sphinx-build -W -b html docs docs/_build/html

``-W`` turns every warning into an error; CI (``.ci/run``) builds it that way. The pages are
Markdown (MyST) so that they also read well on GitHub; the API reference is reStructuredText
because it is only autodoc directives.
"""
import os
import re
import sys

# Document the convt of this checkout (pytest imports it from here too), not whichever one
# happens to be installed; the kernels must be built (pip install -e . or build_ext --inplace).
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import convt  # noqa: E402

project = "convt"
author = "the convt developers"
copyright = "2026, the convt developers"
version = release = convt.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# `name` in a docstring links to that object when Sphinx knows it, else reads as emphasis.
default_role = "autolink"
exclude_patterns = ["_build", "scripts", "data", "README.md"]

# API reference: one stub page per public name, generated at build time into api/generated
# (git-ignored), so adding a name to the reference is one line in api.rst.
autosummary_generate = True
autodoc_default_options = {"members": False}
# numpydoc renders the members of a class from its own autosummary template
# (_templates/autosummary/class.rst), so it must not add a second list.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Docstring checks (numpydoc's validation codes) run on every documented public object; with
# -W a missing section fails the build. GL08: no docstring; PR01/PR02: a parameter missing
# from / unknown to Parameters; RT01: no Returns; EX01: no Examples; SS03: summary line
# without a final period.
numpydoc_validation_checks = {"GL08", "PR01", "PR02", "RT01", "EX01", "SS03"}
numpydoc_validation_exclude = {r"\.__init__$", r"\.__repr__$"}

# Markdown: the pages link to each other as plain .md files (which works on GitHub too), and
# headings get anchors for cross-page links.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]

templates_path = ["_templates"]
html_theme = "alabaster"
html_static_path = []
html_theme_options = {"description": "Transposed convolution, exactly as the specs define it",
                      "page_width": "1100px", "sidebar_width": "230px"}


# Docstrings write shapes the house way, "ndarray of shape (N, C_in, *spatial)". In reST a
# lone "*" opens emphasis, so a "*name" that ends at "," / ")" / "]" is escaped on the way
# into Sphinx (after numpydoc, so the docstrings stay plain text for help()).
_STAR_NAME = re.compile(r"(?<![*\\\w])\*(?=[A-Za-z_]\w*(?:\.\.\.)?[,)\]])")


def _escape_line(line):
    if line.lstrip().startswith((">>>", "...")):
        return line  # doctest source is shown verbatim
    parts = line.split("``")  # odd parts are inline literals
    return "``".join(p if i % 2 else _STAR_NAME.sub(r"\\*", p) for i, p in enumerate(parts))


def _escape_star_names(app, what, name, obj, options, lines):
    lines[:] = [_escape_line(line) for line in lines]


# convt.onnx.ConvTransposeOp is the public name of a class that must be named ConvTranspose
# (onnx.reference looks new operators up by class name). autodoc documents a class under a
# name other than its __name__ as an alias: "alias of ...", without the class's docstring, and
# that line, appended right after the class template's autosummary, is a docutils warning.
# These names are documented as the classes they are. Sphinx >= 9 keeps the decision in a
# private property; where it is missing the alias page (and its warning) comes back, loudly.
_PUBLIC_CLASS_NAMES = {"convt.onnx.ConvTransposeOp"}


def _document_public_class_names_as_classes():
    try:
        from sphinx.ext.autodoc._property_types import _ClassDefProperties
    except ImportError:
        return
    as_alias = _ClassDefProperties.doc_as_attr
    _ClassDefProperties.doc_as_attr = property(
        lambda props: props.full_name not in _PUBLIC_CLASS_NAMES and as_alias.fget(props))


def setup(app):
    _document_public_class_names_as_classes()
    app.connect("autodoc-process-docstring", _escape_star_names, priority=900)
