"""Vector math the CPU has no instruction for, written out in LLVM IR: exp and tanh of float32.

LLVM's ``llvm.exp.v16f32`` has no vector library behind it on x86: it becomes sixteen calls of
the scalar ``expf``, so a vectorized softmax or GELU runs at the speed of scalar code (slower
than numpy, whose exp is vectorized). ``exp_f32`` computes exp of every lane at once, as the
Cephes library's expf does:

    n = round(x / ln 2)                 x = n ln 2 + r,  |r| <= ln 2 / 2
    r = x - n * C1 - n * C2             ln 2 split in two so that n * C1 is exact
    exp(r) ~ 1 + r + r^2 (P0 r^5 + ... + P5)   (degree-7 polynomial, error < 1 ulp on the range)
    exp(x) = exp(r) * 2^n               2^n built from its exponent bits

Inputs are clamped to [-88.38, 88.72] first. A result below 2^-126 (x under about -87.3) is 0,
not a subnormal number (as with flush-to-zero); above 88.72 it is +inf, and a NaN stays NaN.
Elsewhere the result is within 1 ulp of the exact value.
"""
from __future__ import annotations

import llvmlite.ir as ir

LOG2E = 1.44269504088896341
C1, C2 = 0.693359375, -2.12194440e-4
POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
        1.6666665459e-1, 5.0000001201e-1)
LOW, OVERFLOW = -88.3762626647949, 88.72283935546875


def exp_f32(builder: ir.IRBuilder, x, floor, flags=("contract",)):
    """exp of a float32 vector ``x``; ``floor(v)`` emits ``llvm.floor`` of a vector like it."""
    typ = x.type
    lanes = typ.count

    def splat(value, element=ir.FloatType()):
        return ir.Constant(ir.VectorType(element, lanes), [ir.Constant(element, value)] * lanes)

    def arith(op, a, b):
        instr = getattr(builder, op)(a, b)
        instr.flags.extend(flags)
        return instr

    def fmul_add(a, b, c):
        return arith("fadd", arith("fmul", a, b), c)

    clamped = builder.select(builder.fcmp_ordered("<", x, splat(LOW)), splat(LOW), x)
    clamped = builder.select(builder.fcmp_ordered(">", clamped, splat(OVERFLOW)), splat(OVERFLOW),
                             clamped)
    n = floor(fmul_add(clamped, splat(LOG2E), splat(0.5)))
    r = arith("fsub", clamped, arith("fmul", n, splat(C1)))
    r = arith("fsub", r, arith("fmul", n, splat(C2)))
    p = splat(POLY[0])
    for coefficient in POLY[1:]:
        p = fmul_add(p, r, splat(coefficient))
    r2 = arith("fmul", r, r)
    e = arith("fadd", fmul_add(p, r2, r), splat(1.0))
    # 2^n from its exponent bits; n = 128 (x near the top) has none: 2^127 times 2
    top = builder.select(builder.fcmp_ordered(">", n, splat(127.0)), splat(127.0), n)
    e = arith("fmul", e, arith("fadd", arith("fsub", n, top), splat(1.0)))
    int32 = ir.IntType(32)
    exponent = builder.add(builder.fptosi(top, ir.VectorType(int32, lanes)), splat(127, int32))
    scale = builder.bitcast(builder.shl(exponent, splat(23, int32)), typ)
    result = arith("fmul", e, scale)
    result = builder.select(builder.fcmp_ordered(">", x, splat(OVERFLOW)), splat(float("inf")), result)
    return builder.select(builder.fcmp_unordered("uno", x, x), x, result)


TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
             -3.33332819422e-1)


def tanh_f32(builder: ir.IRBuilder, x, floor, flags=("contract",)):
    """tanh of a float32 vector, as Cephes' tanhf: ``x + x^3 P(x^2)`` where |x| < 0.625, else
    ``1 - 2 / (exp(2|x|) + 1)`` with the sign of x (within 2 ulp; +-1 beyond |x| = 44)."""
    typ = x.type
    lanes = typ.count

    def splat(value):
        return ir.Constant(typ, [ir.Constant(ir.FloatType(), value)] * lanes)

    def arith(op, a, b):
        instr = getattr(builder, op)(a, b)
        instr.flags.extend(flags)
        return instr

    magnitude = builder.select(builder.fcmp_ordered("<", x, splat(0.0)), builder.fneg(x), x)
    s = exp_f32(builder, arith("fmul", magnitude, splat(2.0)), floor, flags)
    far = arith("fsub", splat(1.0), arith("fdiv", splat(2.0), arith("fadd", s, splat(1.0))))
    far = builder.select(builder.fcmp_ordered("<", x, splat(0.0)), builder.fneg(far), far)
    z = arith("fmul", x, x)
    p = splat(TANH_POLY[0])
    for coefficient in TANH_POLY[1:]:
        p = arith("fadd", arith("fmul", p, z), splat(coefficient))
    near = arith("fadd", arith("fmul", arith("fmul", p, z), x), x)
    return builder.select(builder.fcmp_ordered("<", magnitude, splat(0.625)), near, far)
