"""This machine's single-core limits, for reading the benchmark figures against them.

    python tools/machine_peak.py

Prints: fp32 FMA peak of one core (12 independent FMA chains of the target's vector width,
kernels/simd.py's ``native``: <16 x float> on AVX-512, <8 x float> on AVX2, so the 12
accumulators stay in registers), read bandwidth from L1 / L2 / L3 / DRAM-sized buffers (8 vector
accumulators), DRAM copy bandwidth (numpy), and what fraction of those the GEMM (onnxjit's
packed-weight GEMM for the target: sgemm_packed on AVX-512, gemm_avx2.sgemm16 on AVX2; and BLAS
np.dot, one thread), Conv and LSTM kernels reach at the sizes of the built-in models.
"""
import time

import numpy as np
from numba import njit

from onnxjit.tools.bench import limit_threads
from onnxjit.kernels.simd import native as V, vadd as _vadd, vfma as _vfma, vstore as _vstore

LANES = V.LANES           # the target's float32 lanes per register (16 AVX-512, 8 AVX2)
_vbcast, _vload, _vzero = V.bcast, V.load, V.zero

limit_threads(1)


@njit(cache=True)
def _fma_loop(a, n):
    """n iterations of 12 independent vector FMA chains: 12 * LANES * 2 flops each."""
    x = _vbcast(a, 0)
    y = _vbcast(a, 1)
    c0, c1, c2, c3, c4, c5 = _vzero(), _vzero(), _vzero(), _vzero(), _vzero(), _vzero()
    c6, c7, c8, c9, c10, c11 = _vzero(), _vzero(), _vzero(), _vzero(), _vzero(), _vzero()
    for _ in range(n):
        c0 = _vfma(x, y, c0)
        c1 = _vfma(x, y, c1)
        c2 = _vfma(x, y, c2)
        c3 = _vfma(x, y, c3)
        c4 = _vfma(x, y, c4)
        c5 = _vfma(x, y, c5)
        c6 = _vfma(x, y, c6)
        c7 = _vfma(x, y, c7)
        c8 = _vfma(x, y, c8)
        c9 = _vfma(x, y, c9)
        c10 = _vfma(x, y, c10)
        c11 = _vfma(x, y, c11)
    s = _vadd(_vadd(_vadd(c0, c1), _vadd(c2, c3)), _vadd(_vadd(c4, c5), _vadd(c6, c7)))
    s = _vadd(s, _vadd(_vadd(c8, c9), _vadd(c10, c11)))
    out = np.empty(LANES, np.float32)
    _vstore(out, 0, s)
    return out[0]


@njit(cache=True)
def _read_loop(a, reps):
    """Sum of a (length a multiple of 8 * LANES) `reps` times, 8 vector accumulators."""
    n = a.size
    s0, s1, s2, s3 = _vzero(), _vzero(), _vzero(), _vzero()
    s4, s5, s6, s7 = _vzero(), _vzero(), _vzero(), _vzero()
    for _ in range(reps):
        for i in range(0, n, 8 * LANES):
            s0 = _vadd(s0, _vload(a, i))
            s1 = _vadd(s1, _vload(a, i + LANES))
            s2 = _vadd(s2, _vload(a, i + 2 * LANES))
            s3 = _vadd(s3, _vload(a, i + 3 * LANES))
            s4 = _vadd(s4, _vload(a, i + 4 * LANES))
            s5 = _vadd(s5, _vload(a, i + 5 * LANES))
            s6 = _vadd(s6, _vload(a, i + 6 * LANES))
            s7 = _vadd(s7, _vload(a, i + 7 * LANES))
    s = _vadd(_vadd(_vadd(s0, s1), _vadd(s2, s3)), _vadd(_vadd(s4, s5), _vadd(s6, s7)))
    out = np.empty(LANES, np.float32)
    _vstore(out, 0, s)
    return out[0]


def best(f, n=7):
    f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def median(f, n=200):
    f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main():
    a = np.ones(16, np.float32) * 1e-3
    # Short calls, best of many: on a shared (time-sliced) VM a long loop measures the share of
    # the core this process gets, not the core.
    iters = 100_000
    peak = 12 * LANES * 2 * iters / best(lambda: _fma_loop(a, iters), 200) / 1e9
    print(f"fp32 FMA peak, 1 core ({LANES}-lane vectors): {peak:.1f} GFLOP/s")
    bw = {}
    for label, kib in (("L1 (16 KiB)", 16), ("L2 (256 KiB)", 256), ("L2 (768 KiB)", 768),
                       ("L3 (8 MiB)", 8192), ("DRAM (256 MiB)", 262144)):
        buf = np.ones(kib * 256, np.float32)
        reps = max(1, (1 << 22) // buf.nbytes)
        secs = best(lambda: _read_loop(buf, reps), 100 if kib < 100000 else 5)
        bw[label] = buf.nbytes * reps / secs / 1e9
        print(f"read bandwidth {label}: {bw[label]:.1f} GB/s")
    src = np.ones(1 << 26, np.float32)
    dst = np.empty_like(src)
    secs = best(lambda: np.copyto(dst, src), 10)
    print(f"copy bandwidth DRAM (numpy, 256 MiB -> 256 MiB): {2 * src.nbytes / secs / 1e9:.1f} GB/s "
          "(read + write)")

    # kernels at the built-in models' sizes
    from onnxjit.kernels import gemm_avx2, rnn, sgemm
    from onnxjit.target import host
    rng = np.random.default_rng(0)
    print("\nkernel                                   time       achieved      of the limit")
    m, k, n = 128, 256, 1024
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    if host().f32_gemm == "avx2":    # the GEMM a constant-weight MatMul runs on this target
        name, bp, gemm = "sgemm16 (AVX2)", gemm_avx2.pack_b16(w), gemm_avx2.sgemm16
    else:
        name, bp, gemm = "sgemm_packed", sgemm.pack_b(w), sgemm.sgemm_packed
    t = median(lambda: gemm(x, bp, n, None, 0))
    g = 2 * m * k * n / t / 1e9
    print(f"{name} {m}x{k}x{n} (transformer FFN)  {t * 1e6:8.1f} us  {g:6.1f} GFLOP/s  "
          f"{g / peak:5.0%} of FMA peak")
    t = median(lambda: np.dot(x, w))
    g = 2 * m * k * n / t / 1e9
    print(f"BLAS np.dot  {m}x{k}x{n}                  {t * 1e6:8.1f} us  {g:6.1f} GFLOP/s  "
          f"{g / peak:5.0%} of FMA peak")
    from onnxjit.kernels import qgemm
    if qgemm.has_vnni():
        a8 = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b8 = rng.integers(-127, 128, (k, n)).astype(np.int8)
        bq, colsum, zb = qgemm.pack_b_s8(b8, 0)
        za = np.array(3, np.uint8)
        t = median(lambda: qgemm.qgemm_u8s8(a8, za, bq, colsum, zb, n))
        g = m * k * n / t / 1e9
        # vpdpbusd: 64 multiply-adds per 512-bit instruction where an fp32 FMA does 16
        print(f"qgemm_u8s8 (VNNI) {m}x{k}x{n}          {t * 1e6:8.1f} us  {g:6.1f} GMAC/s    "
              f"{g / (peak / 2 * 4):5.0%} of 4x the FMA peak's MAC rate")
    if host().int8_dot is not None:
        # the AVX2 kernel: vpmaddubsw + vpmaddwd, 32 multiply-adds per two multiplier ops
        a8 = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b8 = np.clip(np.round(rng.standard_normal((k, n)) * 28), -127, 127).astype(np.int8)
        bq, colsum, zb, fix = qgemm.pack_b_madd(b8, 0)
        za = np.array(3, np.uint8)
        t = median(lambda: qgemm.qgemm_u8s8_madd(a8, za, bq, colsum, zb, n, fix))
        g = m * k * n / t / 1e9
        print(f"qgemm_u8s8_madd (AVX2) {m}x{k}x{n}     {t * 1e6:8.1f} us  {g:6.1f} GMAC/s    "
              f"{g / (peak / 2):5.2f}x the FMA peak's MAC rate (the multiplier ports' bound: 2x)")
    # Conv: the 3x3 conv path onnxjit picks for a 64-channel 56x56 map, through a one-node model
    from onnx import helper, numpy_helper, TensorProto
    import onnxjit
    wc = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 64, 56, 56])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 64, 56, 56])], [numpy_helper.from_array(wc, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    rep = onnxjit.prepare(model, tiered=False)
    xin = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    t = median(lambda: rep.run([xin]))
    g = 2 * 64 * 64 * 9 * 56 * 56 / t / 1e9
    print(f"Conv 3x3 64->64 at 56x56 (direct-equivalent flops)  {t * 1e6:8.1f} us  "
          f"{g:6.1f} GFLOP/s  {g / peak:5.0%} of FMA peak")
    # LSTM step: GEMV over R (L2-resident, read once per step) + gates
    seq, hs, ni = 100, 128, 128
    xs = rng.standard_normal((seq, 1, ni)).astype(np.float32)
    wl = (rng.standard_normal((1, 4 * hs, ni)) * 0.1).astype(np.float32)
    rl = (rng.standard_normal((1, 4 * hs, hs)) * 0.1).astype(np.float32)
    z = np.zeros((1, 1, hs), np.float32)
    args = (xs, rnn.pack_w_np(wl, 4), rnn.pack_r_np(rl, 4, 4), np.zeros((1, 8 * hs), np.float32), z, z,
            np.zeros((1, 3 * hs), np.float32), np.full(1, seq, np.int32), False)
    t = median(lambda: rnn.lstm_fast(*args))
    flops = 2 * seq * 4 * hs * (hs + ni)
    g = flops / t / 1e9
    rbytes = seq * rl.nbytes
    print(f"LSTM layer (100 steps, hidden 128, in 128)  {t * 1e6:8.1f} us  {g:6.1f} GFLOP/s  "
          f"{g / peak:5.0%} of FMA peak; recurrent weights {rbytes / t / 1e9:.0f} GB/s if all "
          f"the time went there ({rbytes / t / 1e9 / bw['L2 (256 KiB)']:.0%} of L2 read bw)")


if __name__ == "__main__":
    main()
