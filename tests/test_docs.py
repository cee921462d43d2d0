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


README = os.path.join(ROOT, "README.md")


def test_readme_gives_the_commands_ci_runs():
    # .ci/run runs the README's test command verbatim; a user copies both lines as they stand.
    text = open(README).read()
    for command in ('pip install -e . && python -m convt demo',
                    'pip install -e ".[test]" && python -m pytest -q'):
        assert f"\n    {command}\n" in text, f"README lacks the command line {command!r}"
    assert 'pip install -e ".[test]" && python -m pytest -q' in open(
        os.path.join(ROOT, ".ci", "run")).read()


def test_readme_peer_table_is_the_committed_data():
    # Every figure of the README's performance table, its date and commit, and the geometric
    # means quoted under it come from docs/data/peers.json (none typed in by hand).
    import json
    import math

    text = open(README).read()
    data = json.load(open(os.path.join(ROOT, "docs", "data", "peers.json")))
    assert data["meta"]["date"] in text and data["meta"]["commit"] in text
    rows = dict(re.findall(r"^\| (\w+) \| ([\d.]+ \(\w+\) \| [\d.]+ \| [\d.]+) \|$", text, re.M))
    ratios = []
    for row in data["rows"]:
        ms = row["ms"]
        peers = {k: v for k, v in ms.items() if not k.startswith("convt")}
        peer = min(peers, key=peers.get)
        ratio = peers[peer] / ms["convt_prepared"]
        ratios.append(ratio)
        expected = f"{peers[peer]:.1f} ({peer}) | {ms['convt_prepared']:.1f} | {ratio:.2f}"
        assert rows.get(row["name"]) == expected, (row["name"], rows.get(row["name"]), expected)
    assert sorted(rows) == sorted(row["name"] for row in data["rows"]) and len(rows) == 14

    def gmean(values):
        return math.exp(sum(map(math.log, values)) / len(values))

    assert f"Geometric mean {gmean(ratios[:12]):.2f} over the first 12 layers" in text
    assert f"{gmean(ratios):.2f} over all 14" in text
