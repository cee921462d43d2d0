# The one fused floating type of every convt kernel. float16 / bfloat16 reach only the
# conversions (_half.pyx, _layout.to_padded_nxc16), which widen them to float32 as they read;
# the float32 result is rounded once (STYLE.md, Cython kernels).
ctypedef fused real:
    float
    double
