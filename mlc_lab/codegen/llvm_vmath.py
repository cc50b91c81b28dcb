"""Vector math the CPU has no instruction for, written out in LLVM IR: exp, tanh and erf of
float32.

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


class _Vectors:
    """Emits float32 vector arithmetic of ``lanes`` lanes with the given fast-math ``flags``."""

    def __init__(self, builder: ir.IRBuilder, lanes: int, flags):
        self.builder, self.lanes, self.flags = builder, lanes, flags

    def splat(self, value, element=ir.FloatType()):
        return ir.Constant(ir.VectorType(element, self.lanes), [ir.Constant(element, value)] * self.lanes)

    def arith(self, op: str, a, b):
        instr = getattr(self.builder, op)(a, b)
        instr.flags.extend(self.flags)
        return instr

    def fmul_add(self, a, b, c):
        return self.arith("fadd", self.arith("fmul", a, b), c)

    def polynomial(self, coefficients, z):
        """``((c0 z + c1) z + c2) ...``: Horner's rule."""
        p = self.splat(coefficients[0])
        for coefficient in coefficients[1:]:
            p = self.fmul_add(p, z, self.splat(coefficient))
        return p

    def where(self, predicate: str, a, b, then, otherwise):
        """``then`` where ``a predicate b`` (ordered), else ``otherwise``."""
        return self.builder.select(self.builder.fcmp_ordered(predicate, a, b), then, otherwise)


def exp_f32(builder: ir.IRBuilder, x, floor, flags=("contract",)):
    """exp of a float32 vector ``x``; ``floor(v)`` emits ``llvm.floor`` of a vector like it."""
    v = _Vectors(builder, x.type.count, flags)
    clamped = v.where("<", x, v.splat(LOW), v.splat(LOW), x)
    clamped = v.where(">", clamped, v.splat(OVERFLOW), v.splat(OVERFLOW), clamped)
    n = floor(v.fmul_add(clamped, v.splat(LOG2E), v.splat(0.5)))
    r = v.arith("fsub", clamped, v.arith("fmul", n, v.splat(C1)))
    r = v.arith("fsub", r, v.arith("fmul", n, v.splat(C2)))
    r2 = v.arith("fmul", r, r)
    e = v.arith("fadd", v.fmul_add(v.polynomial(POLY, r), r2, r), v.splat(1.0))
    # 2^n from its exponent bits; n = 128 (x near the top) has none: 2^127 times 2
    top = v.where(">", n, v.splat(127.0), v.splat(127.0), n)
    e = v.arith("fmul", e, v.arith("fadd", v.arith("fsub", n, top), v.splat(1.0)))
    int32 = ir.IntType(32)
    exponent = builder.add(builder.fptosi(top, ir.VectorType(int32, v.lanes)), v.splat(127, int32))
    scale = builder.bitcast(builder.shl(exponent, v.splat(23, int32)), x.type)
    result = v.where(">", x, v.splat(OVERFLOW), v.splat(float("inf")), v.arith("fmul", e, scale))
    return builder.select(builder.fcmp_unordered("uno", x, x), x, result)


TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
             -3.33332819422e-1)


def tanh_f32(builder: ir.IRBuilder, x, floor, flags=("contract",)):
    """tanh of a float32 vector, as Cephes' tanhf: ``x + x^3 P(x^2)`` where |x| < 0.625, else
    ``1 - 2 / (exp(2|x|) + 1)`` with the sign of x (within 2 ulp; +-1 beyond |x| = 44)."""
    v = _Vectors(builder, x.type.count, flags)
    zero = v.splat(0.0)
    magnitude = v.where("<", x, zero, builder.fneg(x), x)
    s = exp_f32(builder, v.arith("fmul", magnitude, v.splat(2.0)), floor, flags)
    far = v.arith("fsub", v.splat(1.0), v.arith("fdiv", v.splat(2.0), v.arith("fadd", s, v.splat(1.0))))
    far = v.where("<", x, zero, builder.fneg(far), far)
    z = v.arith("fmul", x, x)
    near = v.arith("fadd", v.arith("fmul", v.arith("fmul", v.polynomial(TANH_POLY, z), z), x), x)
    return v.where("<", magnitude, v.splat(0.625), near, far)


# erf(x) = x P(x^2) for |x| < 1, and 1 - exp(-x^2) Q(1 / x) beyond, up to 3.925, where erf rounds
# to 1 in float32. P and Q are least-squares fits (relative error 1.4e-9 and 1.6e-8 in float64).
ERF_NEAR = (7.8981150293e-05, -8.0243274877e-04, 5.1900507884e-03, -2.6854807191e-02,
            1.1283612399e-01, -3.7612628841e-01, 1.1283791665e+00)
ERF_TAIL = (3.0863893838e-02, -1.8039243393e-01, 4.3946593981e-01, -5.3799506005e-01,
            2.3862120081e-01, 2.3061627199e-01, -3.7609616798e-01, 2.0626562051e-02,
            5.6175104857e-01, 1.2232772075e-04)
ERF_ONE = 3.925


def erf_f32(builder: ir.IRBuilder, x, floor, flags=("contract",)):
    """erf of a float32 vector: ``x P(x^2)`` where |x| < 1, else ``1 - exp(-x^2) Q(1/|x|)`` with
    the sign of x, and +-1 from |x| = 3.925 on (within 3 ulp; a NaN stays NaN)."""
    v = _Vectors(builder, x.type.count, flags)
    one = v.splat(1.0)
    magnitude = v.where("<", x, v.splat(0.0), builder.fneg(x), x)
    z = v.arith("fmul", magnitude, magnitude)
    near = v.arith("fmul", magnitude, v.polynomial(ERF_NEAR, z))
    t = v.arith("fdiv", one, v.where("<", magnitude, one, one, magnitude))   # no 1/0 below 1
    tail = v.arith("fmul", exp_f32(builder, builder.fneg(z), floor, flags), v.polynomial(ERF_TAIL, t))
    far = v.where("<", magnitude, v.splat(ERF_ONE), v.arith("fsub", one, tail), one)
    result = v.where("<", magnitude, one, near, far)
    result = v.where("<", x, v.splat(0.0), builder.fneg(result), result)
    return builder.select(builder.fcmp_unordered("uno", x, x), x, result)
