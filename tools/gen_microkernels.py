"""Generate onnxjit/kernels/microkernels.py: the unrolled AVX-512 micro-kernels.

    python tools/gen_microkernels.py            # rewrite the module
    python tools/gen_microkernels.py --check    # exit 1 if the checked-in module differs
    python tools/gen_microkernels.py --stdout   # print it

Two families, each with 12 / 8 / 4 / 1 rows x 32 columns (2 vectors of 16 lanes per row; 12
rows = 24 accumulators + 2 B vectors + 1 broadcast fit the 32 zmm registers), k unrolled by 4:

- ``k<MR>`` (GEMM, kernels/sgemm.py and bmm.py): A rows at stride lda broadcast, B read from
  ``pack_b`` panels (32 floats per k), B prefetched 1024 floats ahead; sweeps npan panels.
- ``ck<MR>`` (1x1 conv and Winograd, kernels/sgemm.py and winograd.py): A element (r, k) at
  aoff + k*astr + r broadcast, B rows at stride ldb streamed in place with masked loads /
  stores for the ragged last tile, B prefetched 8 rows ahead.

Both end in a branch-free epilogue: accumulate into the output unless ``first``, add the
bias and apply relu (act == 1) when ``last``.  The emitted code is straight-line on purpose:
the accumulators are plain locals, so LLVM keeps them in registers.  Edit this generator,
never the generated module (tests/test_microkernels_generated.py checks they agree).
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
        "    pfd = 8 * ldb  # B prefetch distance: 8 k steps",
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
kernels); tests/test_microkernels_generated.py checks this file equals the generator's output.

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

_JIT = dict(cache=True, error_model="numpy")
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="exit 1 if the module is out of date")
    g.add_argument("--stdout", action="store_true", help="print instead of writing")
    args = p.parse_args(argv)
    text = render()
    if args.stdout:
        sys.stdout.write(text)
    elif args.check:
        if OUT.read_text() != text:
            print(f"{OUT} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
    else:
        OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
