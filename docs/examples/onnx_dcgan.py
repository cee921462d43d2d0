"""A DCGAN generator as an ONNX model, run by the ONNX reference evaluator with and without
convt computing its ConvTranspose nodes.

The network is the generator of Radford et al. (2016) as in PyTorch's DCGAN example: a
(N, nz, 1, 1) latent vector through four ConvTranspose (4x4) + BatchNormalization + Relu
layers (channels ngf*8, ngf*4, ngf*2, ngf; 4x4 up to 32x32) and a last ConvTranspose to 3
channels at 64x64 followed by Tanh. The convolutions have no bias (BatchNormalization follows
them), as in the original. The weights are random, scaled so that activations stay of order
one; BatchNormalization runs in inference mode with random running statistics.

Run from a checkout with convt and onnx installed (``pip install -e ".[onnx]"``):

    python docs/examples/onnx_dcgan.py              # ngf=64, batch 1: the real size
    python docs/examples/onnx_dcgan.py --ngf 16 --batch 4 --repeat 5

It prints the time of one model run with the plain ``ReferenceEvaluator`` and with
``new_ops=[convt.onnx.ConvTransposeOp]`` (best of ``--repeat`` runs, after one warm-up run
that also prepares convt's operators), and the largest difference between the two outputs;
it exits with status 1 if they disagree. docs/onnx.md shows a measured output.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import convt

# Layer table of the DCGAN generator: (output channels as a multiple of ngf, stride, pad).
LAYERS = [(8, 1, 0), (4, 2, 1), (2, 2, 1), (1, 2, 1)]
OUT_CHANNELS = 3
# float32 outputs in [-1, 1] after Tanh; the two evaluators sum in different orders.
ATOL = 1e-4


def build_generator(nz=100, ngf=64, opset=17, seed=0):
    """The generator as an onnx.ModelProto; its input is "z" of shape (N, nz, 1, 1)."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    x, c_in = "z", nz
    for i, (mult, stride, pad) in enumerate(LAYERS + [(None, 2, 1)]):
        last = mult is None
        c_out = OUT_CHANNELS if last else mult * ngf
        # Fan-in of one output of a stride-s 4x4 transposed convolution: c_in * (4 / s)^2.
        w = rng.standard_normal((c_in, c_out, 4, 4)) / np.sqrt(c_in * (4 / stride) ** 2)
        y = f"up{i}"
        nodes.append(helper.make_node("ConvTranspose", [x, init(f"w{i}", w)], [y], name=y,
                                      kernel_shape=[4, 4], strides=[stride, stride],
                                      pads=[pad] * 4))
        if last:
            nodes.append(helper.make_node("Tanh", [y], ["image"], name="tanh"))
            break
        bn = [init(f"bn{i}_{k}", v) for k, v in (
            ("scale", 1 + 0.1 * rng.standard_normal(c_out)),
            ("bias", 0.1 * rng.standard_normal(c_out)),
            ("mean", 0.1 * rng.standard_normal(c_out)),
            ("var", rng.uniform(0.5, 1.5, c_out)))]
        nodes.append(helper.make_node("BatchNormalization", [y, *bn], [f"bn{i}"],
                                      name=f"bn{i}", epsilon=1e-5))
        nodes.append(helper.make_node("Relu", [f"bn{i}"], [f"relu{i}"], name=f"relu{i}"))
        x, c_in = f"relu{i}", c_out
    side = 4 * 2 ** len(LAYERS)
    graph = helper.make_graph(
        nodes, "dcgan_generator",
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", nz, 1, 1])],
        [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                       ["N", OUT_CHANNELS, side, side])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             producer_name="convt docs/examples/onnx_dcgan.py")


def best_time(sess, feeds, repeat):
    """(output, best seconds over ``repeat`` runs), after one warm-up run."""
    out = sess.run(None, feeds)[0]
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, feeds)
        best = min(best, time.perf_counter() - t)
    return out, best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ngf", type=int, default=64, help="generator width (default 64)")
    p.add_argument("--nz", type=int, default=100, help="latent size (default 100)")
    p.add_argument("--batch", type=int, default=1, help="images per run (default 1)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs, best reported")
    p.add_argument("--opset", type=int, default=17, help="model opset (default 17)")
    args = p.parse_args(argv)

    model = build_generator(args.nz, args.ngf, args.opset)
    z = np.random.default_rng(1).standard_normal((args.batch, args.nz, 1, 1), np.float32)
    feeds = {"z": z}
    plain, t_plain = best_time(ReferenceEvaluator(model), feeds, args.repeat)
    fast, t_convt = best_time(ReferenceEvaluator(model, new_ops=[convt.onnx.ConvTransposeOp]),
                              feeds, args.repeat)
    diff = float(np.abs(fast - plain).max())
    ok = fast.shape == plain.shape and fast.dtype == plain.dtype and diff <= ATOL
    n_conv = sum(n.op_type == "ConvTranspose" for n in model.graph.node)
    print(f"DCGAN generator: ngf={args.ngf}, nz={args.nz}, batch={args.batch}, opset "
          f"{args.opset}, {len(model.graph.node)} nodes ({n_conv} ConvTranspose), "
          f"output {fast.shape}")
    print(f"ReferenceEvaluator          {t_plain * 1e3:10.1f} ms")
    print(f"ReferenceEvaluator + convt  {t_convt * 1e3:10.1f} ms   ({t_plain / t_convt:.1f}x)")
    print(f"max |difference| {diff:.2e} ({'agree' if ok else 'DISAGREE'}, atol {ATOL:g})")
    return {"ok": ok, "diff": diff, "plain_s": t_plain, "convt_s": t_convt,
            "shape": fast.shape}


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
