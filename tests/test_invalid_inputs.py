"""Thousands of generated invalid calls (tests/_invalid_driver.py), run in a subprocess: a
crash of the interpreter fails this test (with the case that caused it) instead of killing
pytest. tests/test_errors.py pins individual messages; this covers the space."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_every_invalid_call_is_a_clear_error():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [HERE, os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "_invalid_driver"], cwd=HERE, env=env,
                          capture_output=True, text=True, timeout=600)
    last = proc.stderr.strip().splitlines()[-1:] if proc.stderr else []
    assert proc.returncode == 0, f"driver died ({proc.returncode}) at case {last}"
    summary = json.loads(proc.stdout)
    assert summary["cases"] >= 3000, summary["cases"]
    assert summary["failures"] == 0, "\n".join(summary["report"][:50])
