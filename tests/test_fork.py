"""convt after fork (tests/_fork_driver.py, run in a subprocess with a timeout: a hang fails the
test instead of stalling the suite). Every child result must equal the parent's bit for bit."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 120   # seconds for the whole case; a healthy one takes a few


def _run(case):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [HERE, os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("OMP_NUM_THREADS", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "_fork_driver", case], cwd=HERE, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: still running after {TIMEOUT} s (a child hangs)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
needs_openmp = pytest.mark.skipif(
    not __import__("convt._kernels._openmp_helpers", fromlist=["x"]).openmp_enabled(),
    reason="a build without OpenMP has no team to lose")


@needs_fork
@pytest.mark.parametrize("case", ["os.fork", "pool", "executor", "dask", "grandchild", "locks"])
def test_children_of_the_calling_thread_keep_their_threads(case):
    if case == "dask":
        pytest.importorskip("dask.array")
    children = _run(case)
    assert children
    for seen in children:
        assert all(seen["exact"].values()), seen["exact"]
        assert seen["single"] is None, seen
        assert seen["prepared_workers"] == 2
        assert not seen["warnings"], seen["warnings"]


@needs_fork
@needs_openmp
def test_a_team_of_another_thread_makes_the_child_single_threaded():
    (seen,) = _run("other_thread")
    assert all(seen["exact"].values()), seen["exact"]
    assert seen["single"].startswith("forked (parent pid "), seen["single"]
    assert seen["prepared_workers"] == 1
    # warned once for the whole process, not once per call
    assert len(seen["warnings"]) == 1
    assert seen["warnings"][0].startswith("convt: this process was forked (parent pid ")
    assert "its kernels run on one thread" in seen["warnings"][0]


def test_show_config_says_whether_the_process_is_a_single_threaded_child():
    from convt._config import config_dict

    assert config_dict()["threading"]["after_fork"] == "parallel"


def _policy_in_fresh_process(env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), env.get("PYTHONPATH", "")])
    code = ("import os, convt, convt._kernels as k\n"
            "print(k.WAIT_POLICY); print(os.environ.get('GOMP_SPINCOUNT'))\n"
            "print(convt._config.config_dict()['threading']['wait_policy'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.splitlines()


@needs_openmp
def test_convt_sets_a_short_spin_before_libgomp_loads_and_leaves_the_environment_alone():
    policy, variable, shown = _policy_in_fresh_process({})
    assert policy == shown == "GOMP_SPINCOUNT=10000 (set by convt)"
    assert variable == "None"   # removed once libgomp read it: children see the user's env


@needs_openmp
@pytest.mark.parametrize("env", [{"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "300000"}])
def test_the_users_wait_policy_wins(env):
    (name, value), = env.items()
    policy, variable, _ = _policy_in_fresh_process(env)
    assert policy == f"user: {name}={value}"
    assert variable == env.get("GOMP_SPINCOUNT", "None")
