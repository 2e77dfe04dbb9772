"""Generate onnxjit/kernels/microkernels.py (AVX-512) and microkernels_avx2.py (AVX2): the unrolled micro-kernels.

    python tools/gen_microkernels.py            # rewrite the module
    python tools/gen_microkernels.py --check    # exit 1 if the checked-in module differs
    python tools/gen_microkernels.py --stdout   # print it

Two families, each with 12 / 8 / 4 / 1 rows x 32 columns (2 vectors of 16 lanes per row; 12
rows = 24 accumulators + 2 B vectors + 1 broadcast fit the 32 zmm registers), k unrolled by 4:

- ``k<MR>`` (GEMM, kernels/sgemm.py and bmm.py): A rows at stride lda broadcast, B read from
  ``pack_b`` panels (32 floats per k), B prefetched 1024 floats ahead; sweeps npan panels.
- ``ck<MR>`` (1x1 conv and Winograd, kernels/sgemm.py and winograd.py): A element (r, k) at
  aoff + k*astr + r broadcast, B rows at stride ldb streamed in place with masked loads /
  stores for the ragged last tile, each row of B prefetched in the next 32-column tile (the
  same row one tile ahead: X read in place, 1x1 convs with few channels took their first rows
  of every tile at memory latency when the prefetch ran 8 rows ahead in the same tile;
  same process, one call of each in turn, inputs in L3: 32->16 at 112x112 0.93x the time,
  256->128 at 56x56 0.94x, 144->24 at 56x56 0.97x; Winograd, im2col and the transposed product
  unchanged, 0.99-1.02x).

Both end in a branch-free epilogue: accumulate into the output unless ``first``, add the
bias and apply relu (act == 1) when ``last``.  The emitted code is straight-line on purpose:
the accumulators are plain locals, so LLVM keeps them in registers.  Edit this generator,
never the generated module (tests/kernels/test_microkernels_generated.py checks they agree).

A third family, for AVX2 (16 ymm registers), goes to onnxjit/kernels/microkernels_avx2.py:

- ``k<MR>x16`` (6 / 4 / 2 / 1 rows x 16 columns: one <16 x float> per row, which LLVM splits
  into two ymm halves, so 6 rows = 12 ymm accumulators + 2 for the B row + 1 broadcast = 15 of
  16): A element (r, k) at aoff + r*lda + k broadcast, B row k of panel p at
  boff + p*bstep + k*ldb (16 floats, full loads: the callers pad ragged tiles), B prefetched
  pfd floats ahead; sweeps npan panels.  The 6-row kernel's k loop is not unrolled: unrolled
  by 4, LLVM's scheduler hoists the next steps' broadcasts and spills accumulators
  (24 GFLOP/s against 96 one step at a time, near the 2 x 256-bit FMA peak); the 4 / 2 / 1-row
  kernels are unrolled by 4 (83 / 68 / 37 GFLOP/s, against 63 / 66 / 23 not unrolled), and the
  1- and 2-row ones alternate two accumulator sets over k (one FMA chain per set is
  latency-bound).  Epilogue: accumulate into C unless ``first``; when ``last``, add the column
  bias (cbias[jb + p*jstep + ...]) and the row bias (rbias[ib + r]) and apply act
  (kernels/epilogue.py's codes, bounds lo/hi).  Used by kernels/gemm_avx2.py (packed-weight GEMM
  and 1x1 conv on AVX2).
"""
import argparse
import sys
from pathlib import Path

ROWS = (12, 8, 4, 1)   # micro-kernel heights, tallest first
LANES = 16             # float32 lanes of one vector (onnxjit.kernels.simd.LANES)
NR = 2 * LANES         # columns per micro-kernel tile: two vectors
KU = 4                 # k unroll
GEMM_PREFETCH = 1024   # floats of packed B ahead of the current k step
OUT = Path(__file__).resolve().parent.parent / "onnxjit" / "kernels" / "microkernels.py"
ROWS_AVX2 = (6, 4, 2, 1)   # AVX2 micro-kernel heights, tallest first
SPLIT_K_AVX2 = 2           # heights up to this alternate two accumulator sets over k
KU_AVX2 = {6: 1, 4: 4, 2: 4, 1: 4}   # k unroll per height (see the docstring)
OUT_AVX2 = OUT.parent / "microkernels_avx2.py"
COMMAND = "python tools/gen_microkernels.py"

# Intrinsic names used in the emitted code (onnxjit.kernels.simd).
NAMES = dict(vload="vload", vstore="vstore", vbcast="vbcast", vzero="vzero", vfma="vfma",
             vadd="vadd", vsel="vsel", vrelu_if="vrelu_if", prefetch="prefetch",
             vloadm="vloadm", vstorem="vstorem", jit="_JIT")


def _acc_init(mr, ind):
    return [f"{ind}c{r}_0 = {{vzero}}(); c{r}_1 = {{vzero}}()" for r in range(mr)]


def _fmas(r):
    return f"c{r}_0 = {{vfma}}(a, b0, c{r}_0); c{r}_1 = {{vfma}}(a, b1, c{r}_1)"


def gemm_kernel(mr):
    """The GEMM micro-kernel k<mr>: C[mr, npan*32] (+)= A[mr, kc] @ packed B."""
    L = [
        "@njit(**{jit})",
        (f"def {{k}}{mr}(af, aoff, lda, bpf, boff, bstep, npan, kc, cf, coff, ldc, first, last, "
         "biasf, jb, act):"),
        (f'    """C[{mr} rows, npan*{NR} cols] (+)= A[{mr} rows, kc] @ B[kc, npan*{NR}], '
         'panel by panel."""'),
        "    relu = last and act == 1",
        "    for _ in range(npan):",
    ]
    L += _acc_init(mr, " " * 8)
    L += ["        pa = aoff", "        pb = boff"]

    def kstep(kk, ind):
        out = [f"{ind}b0 = {{vload}}(bpf, pb + {kk * NR})",
               f"{ind}b1 = {{vload}}(bpf, pb + {kk * NR + LANES})",
               f"{ind}{{prefetch}}(bpf, pb + {GEMM_PREFETCH + kk * NR})",
               f"{ind}{{prefetch}}(bpf, pb + {GEMM_PREFETCH + kk * NR + LANES})"]
        for r in range(mr):
            row = "" if r == 0 else f" + {r} * lda"
            out += [f"{ind}a = {{vbcast}}(af, pa{row} + {kk})", ind + _fmas(r)]
        return out

    L.append(f"        for _ in range(kc // {KU}):")
    for kk in range(KU):
        L += kstep(kk, " " * 12)
    L += [f"            pa += {KU}", f"            pb += {KU * NR}"]
    L.append(f"        for _ in range(kc % {KU}):")
    L += kstep(0, " " * 12)
    L += ["            pa += 1", f"            pb += {NR}"]
    L += ["        # branch-free epilogue: (+C if not first) (+bias if last) (relu if last and act)",
          "        bb0 = {vsel}(last, {vload}(biasf, jb + 0), {vzero}())",
          f"        bb1 = {{vsel}}(last, {{vload}}(biasf, jb + {LANES}), {{vzero}}())"]
    for r in range(mr):
        for h in range(2):
            row = "" if r == 0 else f" + {r} * ldc"
            L += [f"        o = coff{row} + {h * LANES}",
                  f"        t = {{vsel}}(first, c{r}_{h}, {{vadd}}(c{r}_{h}, {{vload}}(cf, o)))",
                  f"        {{vstore}}(cf, o, {{vrelu_if}}({{vadd}}(t, bb{h}), relu))"]
    L += ["        boff += bstep", f"        coff += {NR}", f"        jb += {NR}"]
    return L


def conv_kernel(mr):
    """The conv micro-kernel ck<mr>: Y[mr, ncols] (+)= A[mr, kc] @ B[kc, ncols] (B in place)."""
    name = f"{{ck}}{mr}"
    cont = " " * (len(f"_ck{mr}") + 6)
    L = [
        "@njit(**{jit})",
        f"def {name}(af, aoff, astr, xf, boff, ldb, tstep, ncols, kc, yf, coff, ldc, first, last,",
        f"{cont}biasf, ib, act):",
        f'    """Y[{mr} rows, ncols] (+)= A[{mr} rows, kc] @ B[kc, ncols], {NR} columns at a time.',
        "",
        "    A (broadcast) element (r, k) is af[aoff + k*astr + r]: packed W (astr 32), or X itself",
        "    for the transposed product (astr H*W).  B row k starts at xf[boff + k*ldb], the next",
        "    32-column tile tstep floats further (X streamed in place: 32; packed W: C*32).  The",
        "    last tile of ncols % 32 columns uses masked loads / stores.",
        '    """',
        "    relu = last and act == 1",
        "    pfd = tstep  # B prefetch: the same row of the next tile",
    ]
    L += [f"    bi{r} = {{vsel}}(last, {{vbcast}}(biasf, ib + {r}), {{vzero}}())" for r in range(mr)]
    L += [f"    for j in range(0, ncols, {NR}):",
          f"        n0 = min({LANES}, ncols - j)",
          f"        n1 = min({LANES}, max(0, ncols - j - {LANES}))"]
    L += _acc_init(mr, " " * 8)
    L += ["        pa = aoff", f"        pb = boff + j // {NR} * tstep"]

    def kstep(kk, ind):
        pb = "pb" if kk == 0 else f"pb + {kk} * ldb"
        out = [f"{ind}b0 = {{vloadm}}(xf, {pb}, n0)",
               f"{ind}b1 = {{vloadm}}(xf, {pb} + {LANES}, n1)",
               f"{ind}{{prefetch}}(xf, {pb} + pfd)",
               f"{ind}{{prefetch}}(xf, {pb} + pfd + {LANES})"]
        for r in range(mr):
            pa = "pa" if kk == 0 else f"pa + {kk} * astr"
            out += [f"{ind}a = {{vbcast}}(af, {pa} + {r})", ind + _fmas(r)]
        return out

    L.append(f"        for _ in range(kc // {KU}):")
    for kk in range(KU):
        L += kstep(kk, " " * 12)
    L += [f"            pa += {KU} * astr", f"            pb += {KU} * ldb"]
    L.append(f"        for _ in range(kc % {KU}):")
    L += kstep(0, " " * 12)
    L += ["            pa += astr", "            pb += ldb"]
    L.append("        # epilogue: (+Y if not first) (+bias if last) (relu if last and act)")
    for r in range(mr):
        for h in range(2):
            L += [f"        o = coff + j + {r} * ldc + {h * LANES}",
                  f"        t = {{vsel}}(first, c{r}_{h}, {{vadd}}(c{r}_{h}, {{vloadm}}(yf, o, n{h})))",
                  f"        {{vstorem}}(yf, o, {{vrelu_if}}({{vadd}}(t, bi{r}), relu), n{h})"]
    return L


HEADER = f'''"""Unrolled AVX-512 micro-kernels (GENERATED: do not edit).

Generated by ``{COMMAND}`` (tools/gen_microkernels.py describes the
kernels); tests/kernels/test_microkernels_generated.py checks this file equals the generator's output.

GEMM family ``k12`` / ``k8`` / ``k4`` / ``k1`` (kernels/sgemm.py's driver, bmm.py):
  af/aoff/lda: A rows (flat, row stride lda); bpf/boff: first packed panel, 32 floats per k,
  next panel bstep floats further; npan panels; cf/coff/ldc: C tile; first: overwrite C (else
  accumulate into it); last: add biasf[jb:...] and apply act (0 none, 1 relu) before storing.
Conv family ``ck12`` / ``ck8`` / ``ck4`` / ``ck1`` (1x1 conv in sgemm.py, winograd.py): see
their docstrings.
"""
from numba import njit

from .simd import (prefetch, vadd, vbcast, vfma, vload, vloadm, vrelu_if, vsel, vstore, vstorem,
                   vzero)

from . import JIT as _JIT
'''


def render(names=None, k="k", ck="ck"):
    """The generated module's text (``names``/``k``/``ck``: identifiers, for comparisons)."""
    names = dict(NAMES, **(names or {}), k=k, ck=ck)
    parts = [HEADER]
    for mr in ROWS:
        parts.append("\n\n" + "\n".join(gemm_kernel(mr)).format(**names) + "\n")
    for mr in ROWS:
        parts.append("\n\n" + "\n".join(conv_kernel(mr)).format(**names) + "\n")
    return "".join(parts)


def _times(r, stride):
    """' + r * stride' (nothing for row 0)."""
    return "" if r == 0 else f" + {stride}" if r == 1 else f" + {r} * {stride}"


def avx2_kernel(mr, ku=None):
    """The AVX2 micro-kernel k<mr>x16: C[mr, npan*16] (+)= A[mr, kc] @ B[kc, npan*16]."""
    ku = KU_AVX2[mr] if ku is None else ku
    split = mr <= SPLIT_K_AVX2
    name = f"k{mr}x16"
    cont = " " * (len(name) + 5)
    L = [
        "@njit(**{jit})",
        f"def {name}(af, aoff, lda, bf, boff, ldb, bstep, npan, kc, cf, coff, ldc, first, last,",
        f"{cont}cbias, jb, jstep, rbias, ib, act, lo, hi, pfd):",
        f'    """C[{mr} rows, npan*{LANES} cols] (+)= A[{mr} rows, kc] @ B[kc, npan*{LANES}], '
        f'{LANES} columns at a time."""',
        "    eact = act if last else 0",
        "    for _ in range(npan):",
    ]
    L += [f"        c{r} = {{vzero}}()" for r in range(mr)]
    if split:
        L += [f"        d{r} = {{vzero}}()" for r in range(mr)]
    L += ["        pa = aoff", "        pb = boff"]

    def kstep(kk, ind, acc="c"):
        pb = "pb" + _times(kk, "ldb")
        out = [f"{ind}b = {{vload}}(bf, {pb})", f"{ind}{{prefetch}}(bf, {pb} + pfd)"]
        for r in range(mr):
            out += [f"{ind}a = {{vbcast}}(af, pa{_times(r, 'lda')} + {kk})",
                    f"{ind}{acc}{r} = {{vfma}}(a, b, {acc}{r})"]
        return out

    if ku > 1:
        L.append(f"        for _ in range(kc // {ku}):")
        for kk in range(ku):
            L += kstep(kk, " " * 12, "d" if split and kk % 2 else "c")
        L += [f"            pa += {ku}", f"            pb += {ku} * ldb"]
    L.append(f"        for _ in range(kc % {ku}):" if ku > 1 else "        for _ in range(kc):")
    L += kstep(0, " " * 12)
    L += ["            pa += 1", "            pb += ldb"]
    if split:
        L += [f"        c{r} = {{vadd}}(c{r}, d{r})" for r in range(mr)]
    L += ["        # epilogue: (+C if not first) (+ column and row bias, act if last)",
          "        cb = {vsel}(last, {vload}(cbias, jb), {vzero}())",
          "        lov = {vsplat}(lo)",
          "        hiv = {vsplat}(hi)"]
    for r in range(mr):
        L += [f"        o = coff{_times(r, 'ldc')}",
              f"        t = {{vsel}}(first, c{r}, {{vadd}}(c{r}, {{vload}}(cf, o)))",
              f"        bb = {{vadd}}(cb, {{vsel}}(last, {{vbcast}}(rbias, ib + {r}), {{vzero}}()))",
              "        {vstore}(cf, o, {vact}({vadd}(t, bb), eact, lov, hiv))"]
    L += ["        boff += bstep", f"        coff += {LANES}", "        jb += jstep"]
    return L


HEADER_AVX2 = f'''"""Unrolled AVX2 micro-kernels (GENERATED: do not edit).

Generated by ``{COMMAND}`` (tools/gen_microkernels.py describes the
kernels); tests/kernels/test_microkernels_generated.py checks this file equals the generator's output.

``k6x16`` / ``k4x16`` / ``k2x16`` / ``k1x16`` (kernels/gemm_avx2.py): C[mr, npan*16] (+)=
A[mr, kc] @ B[kc, npan*16].  af/aoff/lda: A rows (flat, row stride lda, k contiguous);
bf/boff/ldb: B rows of the first 16-column panel (row stride ldb), the next panel bstep floats
further; cf/coff/ldc: C tile, the next panel 16 floats further; first: overwrite C (else
accumulate into it); last: add cbias[jb:jb+16] (per column; the next panel's jstep further:
16, or 0 for one bias vector) and rbias[ib + r] (per row) and apply act (kernels/epilogue.py:
0 none, 1 relu, 2 clip to lo..hi, 3 hardswish alpha=lo, beta=hi) before storing; pfd: B
prefetch distance in floats.
"""
from numba import njit

from .epilogue import vact
from .simd import prefetch, vadd, vbcast, vfma, vload, vsel, vsplat, vstore, vzero

from . import JIT as _JIT
'''

NAMES_AVX2 = dict(vload="vload", vstore="vstore", vbcast="vbcast", vzero="vzero", vfma="vfma",
                  vadd="vadd", vsel="vsel", vsplat="vsplat", vact="vact", prefetch="prefetch",
                  jit="_JIT")


def render_avx2():
    """The generated AVX2 module's text."""
    parts = [HEADER_AVX2]
    for mr in ROWS_AVX2:
        parts.append("\n\n" + "\n".join(avx2_kernel(mr)).format(**NAMES_AVX2) + "\n")
    return "".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="exit 1 if the module is out of date")
    g.add_argument("--stdout", action="store_true", help="print instead of writing")
    args = p.parse_args(argv)
    for out, text in ((OUT, render()), (OUT_AVX2, render_avx2())):
        if args.stdout:
            sys.stdout.write(text)
        elif args.check:
            if not out.exists() or out.read_text() != text:
                print(f"{out} is out of date: run {COMMAND}", file=sys.stderr)
                return 1
        else:
            out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
