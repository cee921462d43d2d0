"""Build and runtime configuration, for bug reports and for explaining a timing."""

import importlib.metadata
import os
import platform
import sys

__all__ = ["show_config", "config_dict"]

_UNKNOWN = "unknown"


def _build_info():
    try:
        from convt._build_info import BUILD_INFO
    except ImportError:  # an unbuilt source tree
        return {}
    return dict(BUILD_INFO)


def _openmp_runtime():
    try:
        from convt._kernels._openmp_helpers import max_threads, openmp_enabled
    except ImportError:
        return _UNKNOWN, _UNKNOWN
    return openmp_enabled(), max_threads()


def _wait_policy():
    try:
        from convt._kernels import WAIT_POLICY
    except ImportError:
        return _UNKNOWN
    return WAIT_POLICY


def _after_fork():
    try:
        from convt._dispatch.threads import state
    except ImportError:
        return _UNKNOWN
    single, _ = state()
    return "parallel" if single is None else f"single-threaded: {single}"


def _version(module_name):
    try:
        module = __import__(module_name)
    except ImportError:
        return "not installed"
    return getattr(module, "__version__", _UNKNOWN)


def _convt_version():
    version = getattr(sys.modules.get("convt"), "__version__", None)
    if version is not None:
        return version
    try:
        return importlib.metadata.version("convt")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0"


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or _UNKNOWN


def _numpy_blas():
    # show_config's dict layout is not a stable API, so any failure just means "unknown".
    try:
        import numpy as np

        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:
        return _UNKNOWN


def _gemm_blas():
    try:
        from convt._backends.blas import blas_info
        path, threads = blas_info()
    except ImportError:
        return _UNKNOWN, _UNKNOWN
    return (os.path.basename(path) if path else "not controllable"), threads or _UNKNOWN


def _bf16_kernel():
    # what runs bfloat16 storage: the AMX tiles (after their self-check), AVX512-BF16's, or
    # the float32 kernels
    try:
        from convt._backends.direct.micro_amx import bf16_kernel
    except ImportError:
        return _UNKNOWN
    from convt._geometry.geometry import Geometry
    any_geom = Geometry(batch=1, c_in=1, c_out=1, groups=1, in_shape=(1,), out_shape=(1,),
                        kernel=(1,), strides=(1,), dilations=(1,), pads_begin=(0,),
                        pads_end=(0,))
    return bf16_kernel(any_geom)


def _isa_section(max_threads):
    # The ISA level the kernels run at (convt._kernels._cpu) and the float32 FMA peak of that
    # level's widest vector per thread count (a few ms, run here, never at import).
    try:
        from convt._kernels import _cpu
    except ImportError:
        return {"isa": _UNKNOWN}
    from convt._dispatch import constants

    counts = range(1, (max_threads if isinstance(max_threads, int) else 1) + 1)
    peaks = [(t, _cpu.fma_peak(t)) for t in counts]
    constants.current()   # the cost model's rates, tied to the probe's peak (docs/dispatch.md)
    return {
        "isa": _cpu.name(),
        "cpu_isa": _cpu.name(_cpu.CPU_ISA),
        "CONVT_ISA": os.environ.get(_cpu.ENV, "unset"),
        "kernels": [f"{k}={v}" for k, v in _cpu.kernel_isas().items()],
        "bfloat16": _bf16_kernel(),
        # a CPU running zmm operations as two halves keeps the load-bound kernels on AVX2
        "zmm_halves": (f"yes: {', '.join(sorted(_cpu._YMM_ON_HALVES))} kept at avx2"
                       if _cpu.ZMM_HALVES else "no"),
        "fma_peak_gflops": [f"{t}t={p:.0f}" for t, p in peaks if p is not None],
        "cost_model_rates": [f"{k}: {v}" for k, v in constants.rate_sources().items()],
    }


def config_dict():
    """Return convt's build and runtime configuration.

    Returns
    -------
    dict
        Sections ``"threading"``, ``"build"``, ``"versions"``, ``"machine"`` and ``"isa"``
        (the instruction set each kernel runs at, the kernel that runs bfloat16 storage:
        AMX-BF16 or AVX512-BF16 tiles or the float32 kernels, the float32 FMA peak in GFLOP/s per
        thread count from a short probe, ``"1t=118"`` for one thread, and where the cost
        model's compute rates come from: that probe or a calibration), each a dict
        of str to str, int, bool or list. A value that cannot be determined (for instance
        when running from a source tree that was never built) is the string ``"unknown"``.

    Examples
    --------
    >>> from convt._config import config_dict
    >>> cfg = config_dict()
    >>> sorted(cfg)
    ['build', 'isa', 'machine', 'threading', 'versions']
    >>> cfg["machine"]["cpu_count"] == __import__("os").cpu_count()
    True
    """
    info = _build_info()
    openmp, max_threads = _openmp_runtime()
    if openmp == _UNKNOWN:
        openmp = info.get("openmp", _UNKNOWN)
    gemm_blas, gemm_blas_threads = _gemm_blas()
    return {
        "threading": {
            "openmp": openmp,
            "max_threads": max_threads,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
            # how long idle OpenMP threads spin before they sleep (docs/threads.md)
            "wait_policy": _wait_policy(),
            # "parallel", or why a forked child runs its kernels on one thread
            # (convt._dispatch.threads, docs/threads.md)
            "after_fork": _after_fork(),
            # the BLAS that runs the GEMM variant of the direct backend (scipy's cython_blas)
            "gemm_blas": gemm_blas,
            "gemm_blas_threads": gemm_blas_threads,
        },
        "build": {
            "compiler": info.get("compiler", _UNKNOWN),
            "compile_args": info.get("compile_args", _UNKNOWN),
            "link_args": info.get("link_args", _UNKNOWN),
            "debug": info.get("debug", _UNKNOWN),
            "sanitize": info.get("sanitize", _UNKNOWN),
            "cython": info.get("cython_version", _UNKNOWN),
            "numpy": info.get("numpy_build_version", _UNKNOWN),
        },
        "versions": {
            "convt": _convt_version(),
            "python": platform.python_version(),
            "numpy": _version("numpy"),
            "numpy_blas": _numpy_blas(),
            "scipy": _version("scipy"),
        },
        "machine": {
            "platform": platform.platform(),
            "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
        },
        "isa": _isa_section(max_threads),
    }


def show_config(file=None):
    """Print convt's build and runtime configuration.

    Parameters
    ----------
    file : file-like, optional
        Where to write; ``sys.stdout`` by default.

    Examples
    --------
    >>> import io
    >>> from convt._config import show_config
    >>> out = io.StringIO()
    >>> show_config(file=out)
    >>> out.getvalue().splitlines()[0]
    'threading:'
    """
    file = sys.stdout if file is None else file
    for section, values in config_dict().items():
        print(f"{section}:", file=file)
        for key, value in values.items():
            if isinstance(value, list):
                value = " ".join(value) or "(none)"
            print(f"  {key:<16} {value}", file=file)
