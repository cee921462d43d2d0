"""Build convt's Cython kernels, with OpenMP when the compiler that really builds has it.

Every ``convt/_kernels/*.pyx`` becomes the extension ``convt._kernels.<name>``. Environment
switches (``1``, ``true``, ``yes`` or ``on`` turn one on):

CONVT_CYTHON_DEBUG    boundscheck, wraparound and initializedcheck back on; -O0 -g instead of -O3.
CONVT_DISABLE_OPENMP  build serially even if the compiler has OpenMP (to exercise the fallback).
CONVT_REQUIRE_OPENMP  fail the build rather than fall back to a serial one (CI sets it).
CONVT_SANITIZE        -fsanitize=address,undefined -fno-omit-frame-pointer on compile and link.
                      Python itself is not instrumented, so preload the runtime to run it:
                      LD_PRELOAD="$(gcc -print-file-name=libasan.so)" python -m pytest

The configuration is written to ``convt/_build_info.py`` in the build output (and in the source
tree for ``build_ext --inplace`` and editable installs); ``convt._config.show_config`` reports it.
"""

import glob
import json
import os
import pprint
import subprocess
import sys
import tempfile
import textwrap

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError, LinkError


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _env_flag("CONVT_CYTHON_DEBUG")
SANITIZE = _env_flag("CONVT_SANITIZE")
DISABLE_OPENMP = _env_flag("CONVT_DISABLE_OPENMP")
REQUIRE_OPENMP = _env_flag("CONVT_REQUIRE_OPENMP")

# The only place compiler directives are set (STYLE.md): kernels trust their inputs.
DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "nonecheck": False,
}
# No -ffast-math (it breaks the reference tolerances and NaN propagation) and no -march=native
# (a wheel must run on any CPU of its platform tag).
BASE_COMPILE_ARGS = ["-O0", "-g"] if DEBUG else ["-O3"]
SANITIZE_ARGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"] if SANITIZE else []

_OPENMP_PROBE = textwrap.dedent(
    """\
    #include <omp.h>
    #include <stdio.h>

    int main(void) {
        int n = 0;
        #pragma omp parallel
        {
            #pragma omp atomic
            n += 1;
        }
        printf("max_threads=%d team=%d\\n", omp_get_max_threads(), n);
        return n < 1;
    }
    """
)

_NO_OPENMP_WARNING = """
********************************************************************************
*  WARNING: convt is being built WITHOUT OpenMP.                               *
*  Reason: {reason:<68}*
*  The kernels will run on ONE thread whatever `workers` asks for.             *
*  Fix: use a compiler with OpenMP (gcc with libgomp; clang with libomp), or   *
*  set CONVT_REQUIRE_OPENMP=1 to make this an error instead of a warning.      *
********************************************************************************
"""


def _openmp_flag(compiler):
    return "/openmp" if compiler.compiler_type == "msvc" else "-fopenmp"


def _has_openmp(compiler, flag):
    """Compile, link and run a tiny OpenMP program with the compiler object that builds convt."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="convt-openmp-probe-") as tmp:
        os.chdir(tmp)  # distutils places objects relative to the source path
        try:
            with open("probe.c", "w") as f:
                f.write(_OPENMP_PROBE)
            objects = compiler.compile(["probe.c"], output_dir="obj", extra_postargs=[flag])
            exe = compiler.executable_filename("probe")
            compiler.link_executable(objects, "probe", extra_postargs=[flag])
            # Running it catches a header without a loadable runtime (libgomp / libomp).
            subprocess.run([os.path.join(tmp, exe)], check=True, capture_output=True, timeout=60)
        except (CompileError, LinkError, OSError, subprocess.SubprocessError):
            return False
        finally:
            os.chdir(cwd)
    return True


def _compiler_description(compiler):
    command = getattr(compiler, "compiler_so", None) or [compiler.compiler_type]
    try:
        out = subprocess.run([command[0], "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    first = out.strip().splitlines()[0] if out.strip() else "version unknown"
    return f"{command[0]}: {first}"


class BuildExt(build_ext):
    """Probe OpenMP on ``self.compiler``, cythonize, build, then write ``_build_info.py``."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def _openmp_link_flags(self):
        flag = _openmp_flag(self.compiler)
        if DISABLE_OPENMP:
            reason = "CONVT_DISABLE_OPENMP is set"
        elif _has_openmp(self.compiler, flag):
            return [flag]
        else:
            reason = f"the compiler failed an OpenMP probe with {flag}"
        if REQUIRE_OPENMP:
            raise CompileError(f"convt: OpenMP is required (CONVT_REQUIRE_OPENMP=1) but {reason}")
        print(_NO_OPENMP_WARNING.format(reason=reason), file=sys.stderr, flush=True)
        return []

    def _stamp_is_current(self, info):
        # A changed configuration (OpenMP, debug, sanitizer, compiler) must rebuild everything,
        # although no source is newer than its output: otherwise a stale .so survives.
        try:
            with open(os.path.join(self.build_temp, "convt_build_config.json")) as f:
                return f.read() == json.dumps(info, sort_keys=True)
        except OSError:
            return False

    def build_extensions(self):
        import Cython
        import numpy
        from Cython.Build import cythonize

        openmp = self._openmp_link_flags()
        compile_args = BASE_COMPILE_ARGS + openmp + SANITIZE_ARGS
        link_args = openmp + SANITIZE_ARGS
        self._convt_info = {
            "openmp": bool(openmp),
            "compiler": _compiler_description(self.compiler),
            "compile_args": compile_args,
            "link_args": link_args,
            "cython_version": Cython.__version__,
            "numpy_build_version": numpy.__version__,
            "debug": DEBUG,
            "sanitize": SANITIZE,
        }
        stamp = dict(self._convt_info, directives=DIRECTIVES)
        self.force = self.force or not self._stamp_is_current(stamp)
        for ext in self.extensions:
            ext.include_dirs.append(numpy.get_include())
            ext.extra_compile_args = compile_args + ext.extra_compile_args
            ext.extra_link_args = link_args + ext.extra_link_args
        # Only the sources change: setuptools keeps per-extension state set in finalize_options.
        cythonized = cythonize(self.extensions, compiler_directives=DIRECTIVES, force=self.force)
        sources = {ext.name: ext.sources for ext in cythonized}
        for ext in self.extensions:
            ext.sources = sources[ext.name]
        super().build_extensions()
        os.makedirs(self.build_temp, exist_ok=True)
        with open(os.path.join(self.build_temp, "convt_build_config.json"), "w") as f:
            f.write(json.dumps(stamp, sort_keys=True))

    def run(self):
        super().run()  # clears self.inplace while it runs, so the in-place copy is decided here
        if not hasattr(self, "_convt_info"):
            return
        targets = [os.path.join(self.build_lib, "convt")]
        if self.inplace:
            targets.append(self.get_finalized_command("build_py").get_package_dir("convt"))
        text = ("# Generated by setup.py when convt was built; not tracked by git.\n"
                f"BUILD_INFO = {pprint.pformat(self._convt_info, sort_dicts=False)}\n")
        for target in targets:
            os.makedirs(target, exist_ok=True)
            with open(os.path.join(target, "_build_info.py"), "w") as f:
                f.write(text)


# Per-extension macros: _amxemu is _micro.pyx again, with the AMX instructions emulated in C
# (convt/_kernels/_amxkernel.h), to test the AMX tiles where the CPU has none.
_MACROS = {"_amxemu": [("CONVT_AMX_EMU", "1")]}


def _extensions():
    exts = []
    for pyx in sorted(glob.glob(os.path.join("convt", "_kernels", "*.pyx"))):
        name = os.path.splitext(os.path.basename(pyx))[0]
        exts.append(Extension(
            "convt._kernels." + name,
            [pyx],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
            + _MACROS.get(name, []),
            depends=sorted(glob.glob(os.path.join("convt", "_kernels", "*.h"))
                           + glob.glob(os.path.join("convt", "_kernels", "*.pxd"))
                           + ([os.path.join("convt", "_kernels", "_micro.pyx")]
                              if name == "_amxemu" else [])),
        ))
    return exts


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
