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
