"""What the compiled kernels know about OpenMP; the C declarations live in the .pxd."""


def openmp_enabled():
    """Whether the kernels were compiled with OpenMP.

    Returns
    -------
    bool
        True if ``_OPENMP`` was defined when this extension was compiled; False for the
        serial fallback build, where every kernel runs on one thread.

    Examples
    --------
    >>> from convt._kernels._openmp_helpers import openmp_enabled
    >>> isinstance(openmp_enabled(), bool)
    True
    """
    return bool(CONVT_OPENMP_ENABLED)


def max_threads():
    """The number of threads an OpenMP parallel region would use by default.

    Returns
    -------
    int
        ``omp_get_max_threads()``: ``OMP_NUM_THREADS`` if it is set when the OpenMP runtime
        starts, otherwise the number of usable cores; always 1 in a build without OpenMP.

    Examples
    --------
    >>> from convt._kernels._openmp_helpers import max_threads
    >>> max_threads() >= 1
    True
    """
    return omp_get_max_threads()


def release_threads():
    """End the calling thread's OpenMP team: its idle threads exit instead of waiting.

    ``omp_pause_resource_all(omp_pause_soft)`` (OpenMP 5.0). The next parallel region starts a
    new team. A process that forks right after this gives its child a runtime with no team to
    inherit, so the child can run threads of its own (libgomp's inherited team would hang it).

    Returns
    -------
    bool
        True when the runtime released its threads (or had none); False when it cannot (no
        OpenMP, a runtime without ``omp_pause_resource_all``, or a call from inside a parallel
        region).

    Examples
    --------
    >>> from convt._kernels._openmp_helpers import release_threads
    >>> isinstance(release_threads(), bool)
    True
    """
    return convt_release_threads() == 0
