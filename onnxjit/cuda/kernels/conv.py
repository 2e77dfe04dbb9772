"""Convolution as im2col + batched GEMM (kernels/gemm.py or cuBLAS), and pooling windows.

Spatial dims are padded to three (depth, height, width; missing ones of size 1), so 1-D, 2-D
and 3-D convolutions and pools share one kernel each. Geometry travels as integer arguments.
"""
from numba import cuda


@cuda.jit(cache=True)
def im2col(x, cols, total, c, id_, ih, iw, kd, kh, kw, od, oh, ow, sd, sh, sw, pd, ph, pw,
           dd, dh, dw):
    """cols (N, C*KD*KH*KW, OD*OH*OW) of x (N, C, ID, IH, IW); padding reads as 0."""
    kk = kd * kh * kw
    p_count = od * oh * ow
    for i in range(cuda.grid(1), total, cuda.gridsize(1)):
        p = i % p_count
        r = i // p_count
        q = r % kk
        r //= kk
        ch = r % c
        b = r // c
        ox = p % ow
        oy = (p // ow) % oh
        oz = p // (ow * oh)
        kx = q % kw
        ky = (q // kw) % kh
        kz = q // (kw * kh)
        z = oz * sd - pd + kz * dd
        y = oy * sh - ph + ky * dh
        xx = ox * sw - pw + kx * dw
        if 0 <= z < id_ and 0 <= y < ih and 0 <= xx < iw:
            cols[i] = x[(((b * c + ch) * id_ + z) * ih + y) * iw + xx]
        else:
            cols[i] = 0


@cuda.jit(cache=True)
def pool(x, y, total, id_, ih, iw, kd, kh, kw, od, oh, ow, sd, sh, sw, pd, ph, pw, dd, dh, dw,
         ed, eh, ew, is_max, count_pad):
    """Max or average pooling of x (N*C, ID, IH, IW) into y (N*C, OD, OH, OW). Padding never
    wins a max; averages divide by the window's elements inside the input, or with `count_pad`
    inside the padded input (begin pads p*, end pads e*)."""
    for i in range(cuda.grid(1), total, cuda.gridsize(1)):
        ox = i % ow
        oy = (i // ow) % oh
        oz = (i // (ow * oh)) % od
        nc = i // (ow * oh * od)
        base = nc * id_ * ih * iw
        acc = x[base] - x[base]
        count = 0
        padded = 0
        seen = False
        for kz in range(kd):
            z = oz * sd - pd + kz * dd
            for ky in range(kh):
                yy = oy * sh - ph + ky * dh
                for kx in range(kw):
                    xx = ox * sw - pw + kx * dw
                    if -pd <= z < id_ + ed and -ph <= yy < ih + eh and -pw <= xx < iw + ew:
                        padded += 1
                    if 0 <= z < id_ and 0 <= yy < ih and 0 <= xx < iw:
                        v = x[base + (z * ih + yy) * iw + xx]
                        if is_max:
                            if not seen or v > acc or v != v:
                                acc = v
                        else:
                            acc += v
                        seen = True
                        count += 1
        if is_max:
            y[i] = acc
        else:
            y[i] = acc / (padded if count_pad else max(count, 1))
