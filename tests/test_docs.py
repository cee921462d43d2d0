"""The documentation's code runs and its links resolve.

Every ```python block of README.md and docs/*.md runs, the blocks of one page in one namespace
(a page is a script read top to bottom). The docstring examples are collected by pytest itself
(--doctest-modules); Sphinx checks the rest of the site (`sphinx-build -W`, in CI).
"""
import glob
import os
import re

import pytest

from conftest import IN_SOURCE_TREE, NEEDS_SOURCE_TREE

if not IN_SOURCE_TREE:  # the pages are read at collection, so the whole module skips
    pytest.skip(NEEDS_SOURCE_TREE, allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted([os.path.join(ROOT, "README.md")]
               + glob.glob(os.path.join(ROOT, "docs", "*.md")))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _name(path):
    return os.path.relpath(path, ROOT)


@pytest.mark.parametrize("path", [p for p in PAGES if BLOCK.search(open(p).read())], ids=_name)
def test_page_code_runs(path, capsys):
    namespace = {"__name__": "__docs__"}
    for i, block in enumerate(BLOCK.findall(open(path).read())):
        code = compile(block, f"{_name(path)} (python block {i + 1})", "exec")
        try:
            exec(code, namespace)
        except ModuleNotFoundError as e:  # a page about an optional extra
            pytest.skip(f"{_name(path)} needs {e.name}, which is not installed")


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_relative_links_resolve(path):
    text = open(path).read()
    missing = [target for target in LINK.findall(text)
               if "://" not in target and not target.startswith("mailto:")
               and not os.path.exists(os.path.join(os.path.dirname(path), target))]
    assert not missing, f"{_name(path)} links to missing files: {missing}"


def test_block_pattern_sees_the_quick_start():
    # Guards the regular expression: a pattern that matched nothing would pass every page.
    blocks = BLOCK.findall(open(os.path.join(ROOT, "docs", "quickstart.md")).read())
    assert len(blocks) >= 4 and all("convt" in b or "np." in b for b in blocks)
