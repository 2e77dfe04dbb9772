"""How ``depthwise3x3_f32`` should walk a plane: a 16-column block down bands of output rows, for
several band heights, interleaved in one process, on inputs in cache and on inputs rotating out
of it (as a model's are: written by the kernel before).  The figures behind
``kernels/depthwise.DW3_BANDS``.

    python tools/depthwise_bands.py [--threads 1] [--rounds 8]

Each band height compiles ``_dw3_planes`` with the band given instead of chosen (its own source,
the band line replaced); "plane" is one band of the whole plane, what DW3_BANDS gives small
planes.  Prints, per layer shape, the median us per call warm / rotating for each walk.
"""
import argparse
import inspect
import time

import numba
import numpy as np

SHAPES = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (384, 14, 1)]
BANDS = [0, 1, 2, 4, 8]       # 0: the whole plane


def walk_with_band():
    """_dw3_planes compiled with `band` as its first argument (0: the whole plane)."""
    from onnxjit.kernels import depthwise
    src = inspect.getsource(depthwise._dw3_planes.py_func)
    choose = src[src.index("    band = OH"):src.index("    for nc in range(p0, p1):")]
    src = src.replace(choose, "    band = band if band > 0 else OH\n")
    src = src.replace("@njit(**_JIT)\n", "").replace("def _dw3_planes(xf", "def walk(band, xf")
    namespace = dict(vars(depthwise))
    exec(src, namespace)         # our own kernel's source, not model data
    return numba.njit(error_model="numpy")(namespace["walk"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args(argv)
    numba.set_num_threads(args.threads)
    walk = walk_with_band()
    rng = np.random.default_rng(0)
    print("C x H x W, stride: band rows warm/rotating us (0 = whole plane)")
    for c, h, s in SHAPES:
        oh = (h + 2 - 3) // s + 1
        xs = [rng.random((c * h * h,), dtype=np.float32) for _ in range(6)]
        wf, bf = rng.random(c * 9, dtype=np.float32), rng.random(c, dtype=np.float32)
        y = np.empty(c * oh * oh, np.float32)

        def call(band, x):
            walk(band, x, wf, bf, y, 0, c, c, h, h, oh, oh, s, 1, 1, 2, (0.0, 6.0))
        call(0, xs[0])
        want = y.copy()
        for band in BANDS:
            call(band, xs[0])
            assert np.array_equal(y, want), band
        times = {(b, m): [] for b in BANDS for m in ("warm", "rotating")}
        for _ in range(args.rounds):
            for band in BANDS:
                for mode in ("warm", "rotating"):
                    for i in range(len(xs)):
                        x = xs[0] if mode == "warm" else xs[i]
                        t = time.perf_counter()
                        call(band, x)
                        times[band, mode].append(time.perf_counter() - t)
        cells = [f"{b or 'plane'} {np.median(times[b, 'warm']) * 1e6:.0f}/"
                 f"{np.median(times[b, 'rotating']) * 1e6:.0f}" for b in BANDS]
        print(f"{c}x{h}x{h} s{s}: " + "  ".join(cells))


if __name__ == "__main__":
    main()
