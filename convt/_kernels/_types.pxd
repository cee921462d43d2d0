# The one fused floating type of every convt kernel. float16 / bfloat16 never reach a kernel:
# the API layer widens them to float32 and narrows the result once (STYLE.md, Cython kernels).
ctypedef fused real:
    float
    double
