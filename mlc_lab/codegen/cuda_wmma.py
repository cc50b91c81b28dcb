"""CUDA C for tensor-core code: the ``wmma`` fragment API of ``<mma.h>``.

A buffer in a wmma scope becomes an array of fragments, each the slice of one tile a thread
holds in its registers::

    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> A_f[2];

and the builtins become calls of the API, the fragment chosen by where the tile starts in its
buffer (the element offset of ``A_f.data``, divided by the largest granule every such offset in
the kernel is provably a multiple of, so distinct tiles get distinct fragments)::

    nvcuda::wmma::load_matrix_sync(A_f[0], &A_shared[ty * 256], 16);
    nvcuda::wmma::mma_sync(C_f[j * 1], A_f[0], B_f[j * 1], C_f[j * 1]);
    nvcuda::wmma::store_matrix_sync(&C[...], C_f[j * 1], 64, nvcuda::wmma::mem_row_major);

The operand layout (row- or column-major) is part of an A/B fragment's type: it is taken from
the loads of that buffer, which must agree.

The warp-level PTX instructions ``ptx_ldmatrix`` and ``ptx_mma`` (see
``runtime.cuda_sim.ptx_mma`` for their arguments) become inline PTX on each thread's registers,
its 16-bit elements taken two at a time as 32-bit registers::

    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(((unsigned*)(A_r + 0))[0]), ... : "r"((unsigned)__cvta_generic_to_shared(&A_s[...])));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, ...}, ...;\n" : ...);
"""
from __future__ import annotations

from ..arith import is_multiple_of, simplify
from ..tir import expr as E
from ..tir.buffer import BUFFER_DATA
from ..tir.functor import StmtExprVisitor
from .c_expr import MUL, CSourceError

NS = "nvcuda::wmma::"
WMMA_OPS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync")
PTX_OPS = ("ptx_ldmatrix", "ptx_mma")
_PTX_TYPES = {"fp16": "f16", "fp32": "f32"}


def ptx_call(call) -> str | None:
    """The builtin's name when ``call`` is ``ptx_ldmatrix`` or ``ptx_mma``, else None."""
    if (isinstance(call, E.Call) and call.op == "call_extern" and call.args
            and isinstance(call.args[0], E.StringImm) and call.args[0].value in PTX_OPS):
        return call.args[0].value
    return None


def wmma_call(call) -> str | None:
    """The builtin's name when ``call`` is one of the wmma builtins, else None."""
    if (isinstance(call, E.Call) and call.op == "call_extern" and call.args
            and isinstance(call.args[0], E.StringImm) and call.args[0].value in WMMA_OPS):
        return call.args[0].value
    return None


def data_pointer(e):
    """(buffer, element offset) of ``A.data`` as lowering leaves it (``buffer_data(A[offset])``)."""
    if isinstance(e, E.Call) and e.op == "call_extern" and e.args[0].value == "tvm_access_ptr":
        buffer, offset = data_pointer(e.args[2])
        return buffer, offset + e.args[3]
    if not (isinstance(e, E.Call) and e.op == BUFFER_DATA):
        raise CSourceError(f"a wmma builtin takes a buffer's address (A.data), got {e}")
    return e.args[0].buffer, e.args[0].indices[0]


class _Fragments(StmtExprVisitor):
    """For each fragment buffer (by id): its use (kind, m, n, k, layout) and its offsets."""

    def __init__(self):
        self.found: dict = {}
        self.registers: set = set()   # ids of the buffers ptx instructions use (aligned arrays)

    def visit_Call(self, call):
        if ptx_call(call) is not None:
            self.registers.update(id(a.args[0].buffer) for a in call.args
                                  if isinstance(a, E.Call) and a.op == BUFFER_DATA)
            return None
        name = wmma_call(call)
        if name is None:
            return self.generic_visit(call)
        args = call.args[1:]
        if name == "tvm_mma_sync":
            for i in (0, 2, 4, 6):
                self.note(args[i], None, None)
            return None
        shape = tuple(int(a.value) for a in args[1:4])
        layout = args[7].value if name == "tvm_load_matrix_sync" else None
        self.note(args[0], shape, layout)
        return None

    def note(self, pointer, shape, layout):
        buffer, offset = data_pointer(pointer)
        entry = self.found.setdefault(id(buffer), {"buffer": buffer, "shape": None, "layout": None,
                                                   "offsets": []})
        entry["offsets"].append(offset)
        if shape is not None:
            if entry["shape"] not in (None, shape):
                raise CSourceError(f"fragment {buffer.name} is used with the shapes {entry['shape']} "
                                   f"and {shape}; one fragment array has one type")
            entry["shape"] = shape
        kind = buffer.scope.partition(".")[2]
        if layout is not None and kind != "accumulator":
            if entry["layout"] not in (None, layout):
                raise CSourceError(f"fragment {buffer.name} is loaded both {entry['layout']} and "
                                   f"{layout}; the layout is part of a fragment's type")
            entry["layout"] = layout


class WmmaPrinter:
    """Mixin of ``CUDASource``: fragment declarations and the wmma builtins."""

    def scan_fragments(self, body) -> None:
        scan = _Fragments()
        scan.visit(body)
        self.fragments, self.aligned = {}, scan.registers
        for key, entry in scan.found.items():
            buffer = entry["buffer"]
            if entry["shape"] is None:
                raise CSourceError(f"fragment {buffer.name} is only used by mma_sync: no load or "
                                   "fill says its shape")
            m, n, k = entry["shape"]
            kind = buffer.scope.partition(".")[2]
            rows, cols = {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}[kind]
            size = int(buffer.shape[0].value)
            granule = next(g for g in range(rows * cols, 0, -1)
                           if size % g == 0 and all(is_multiple_of(o, g) for o in entry["offsets"]))
            self.fragments[key] = dict(entry, kind=kind, granule=granule,
                                       count=-(-size // granule))
        if self.fragments:
            self.features.add("wmma")

    def declare_fragment(self, buffer) -> None:
        info = self.fragments.get(id(buffer))
        name = self.bind(buffer, buffer.name)
        if info is None:   # allocated but never used by a wmma builtin
            return
        m, n, k = info["shape"]
        ctype = self.ctype(buffer.dtype)
        layout = f", {NS}{info['layout'] or 'row_major'}" if info["kind"] != "accumulator" else ""
        self.line(f"{NS}fragment<{NS}{info['kind']}, {m}, {n}, {k}, {ctype}{layout}> "
                  f"{name}[{info['count']}];")

    def fragment(self, pointer) -> str:
        buffer, offset = data_pointer(pointer)
        info = self.fragments[id(buffer)]
        index = offset if info["granule"] == 1 else E.FloorDiv(offset, E.const(info["granule"], offset.dtype))
        return f"{self.buffer(buffer)}[{self.expr(simplify(index))}]"

    def address(self, pointer) -> str:
        buffer, offset = data_pointer(pointer)
        return f"&{self.buffer(buffer)}[{self.expr(offset)}]"

    def wmma_statement(self, call) -> str:
        name, args = wmma_call(call), call.args[1:]
        if name == "tvm_fill_fragment":
            return f"{NS}fill_fragment({self.fragment(args[0])}, {self.expr(args[5])});"
        if name == "tvm_mma_sync":
            d, a, b, c = (self.fragment(args[i]) for i in (0, 2, 4, 6))
            return f"{NS}mma_sync({d}, {a}, {b}, {c});"
        frag, ptr, ldm = self.fragment(args[0]), self.address(args[5]), self.expr(args[6])
        layout = args[7].value
        kind = self.fragments[id(data_pointer(args[0])[0])]["kind"]
        if name == "tvm_load_matrix_sync":
            if kind == "accumulator":
                return f"{NS}load_matrix_sync({frag}, {ptr}, {ldm}, {NS}mem_{layout});"
            return f"{NS}load_matrix_sync({frag}, {ptr}, {ldm});"
        return f"{NS}store_matrix_sync({ptr}, {frag}, {ldm}, {NS}mem_{layout});"


    # -- mma.sync and ldmatrix -----------------------------------------------------------------
    def registers(self, pointer, offset, count: int, bits: int) -> list:
        """C lvalues of ``count`` 32-bit registers at element ``offset`` of a register array."""
        buffer, base = data_pointer(pointer)
        start = self.expr(simplify(base + offset))
        kind = "unsigned" if bits == 32 else "float"
        return [f"(({kind}*)({self.buffer(buffer)} + {start}))[{i}]" for i in range(count)]

    def ptx_statement(self, call) -> str:
        name, args = ptx_call(call), call.args[1:]
        if name == "ptx_ldmatrix":
            trans, num = bool(args[0].value), int(args[1].value)
            outs = self.registers(args[3], args[4], num, 32)
            buffer, base = data_pointer(args[5])
            address = f"(unsigned)__cvta_generic_to_shared(&{self.buffer(buffer)}[{self.expr(simplify(base + args[6]))}])"
            regs = ", ".join(f"%{i}" for i in range(num))
            text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
                    f"{{{regs}}}, [%{num}];\\n")
            outputs = ", ".join(f'"=r"({r})' for r in outs)
            return f'asm volatile("{text}" : {outputs} : "r"({address}));'
        shape, a_layout, b_layout, a_t, b_t, c_t = (a.value for a in args[:6])
        if (shape, a_layout, b_layout, a_t, b_t) != ("m16n8k16", "row", "col", "fp16", "fp16") or \
                c_t not in _PTX_TYPES:
            raise CSourceError(f"ptx_mma: only m16n8k16.row.col with fp16 inputs is printed, got "
                               f"{shape}.{a_layout}.{b_layout} {a_t} {b_t} {c_t}")
        c_regs = 4 if c_t == "fp32" else 2
        a = self.registers(args[6], args[7], 4, 32)
        b = self.registers(args[8], args[9], 2, 32)
        c = self.registers(args[10], args[11], c_regs, 32 if c_t == "fp16" else 0)
        kind = "f" if c_t == "fp32" else "r"
        numbers = iter(range(64))
        groups = [", ".join(f"%{next(numbers)}" for _ in regs) for regs in (c, a, b, c)]
        ctype = _PTX_TYPES[c_t]
        text = (f"mma.sync.aligned.m16n8k16.row.col.{ctype}.f16.f16.{ctype} "
                + ", ".join(f"{{{g}}}" for g in groups) + ";\\n")
        outputs = ", ".join(f'"={kind}"({r})' for r in c)
        inputs = ", ".join([f'"r"({r})' for r in a + b] + [f'"{kind}"({r})' for r in c])
        return f'asm volatile("{text}" : {outputs} : {inputs});'


__all__ = ["WmmaPrinter", "data_pointer", "ptx_call", "wmma_call", "MUL"]
