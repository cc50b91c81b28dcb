"""Calls out of a compiled function, for the LLVM code generator: pointers into buffers
(``A.data``, ``A.access_ptr(...)``), functions called by name (``T.call_extern``), LLVM's own
intrinsics (``T.call_llvm_pure_intrin``, spelled as a call_extern of an ``llvm.*`` name) and
``T.reinterpret``.

* ``A.data`` as lowering leaves it, ``buffer_data(A[i])``, is the address of element ``i`` of
  A's storage (0 for a parameter or an allocation; for a view, where its region starts).
* ``T.tvm_access_ptr(T.type_annotation(dtype), data, offset, extent, mask)`` is ``data``
  advanced by ``offset`` elements of ``dtype``; the extent and mask only describe the access.
* Any other name is declared as an external function whose parameter types are those of the
  arguments (pointers, integers, floats, vectors) and whose result type is the call's dtype
  (a handle: a pointer). The JIT resolves it from LLVM IR linked into the module (a loop's
  ``pragma_import_llvm`` annotation, see ``import_llvm_texts``) or from the process.
* A name starting with ``llvm.`` is an LLVM intrinsic (``llvm.x86.avx512.vpdpbusd.512``): it
  is called with the argument values as they are; LLVM checks the types when it verifies.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..tir import dtype as dt
from ..tir import expr as E
from ..tir.functor import StmtExprVisitor

IMPORT_PRAGMA = "pragma_import_llvm"


class ExternCallError(NotImplementedError):
    """A call out of a compiled function that the llvm backend cannot make as written."""


class ExternCalls:
    """Mixin of the LLVM function emitter (see the module docstring)."""

    def data_pointer(self, e):
        from .llvm_expr import scalar_type
        load = e.args[0]
        base = self.lookup_buffer(load.buffer)
        if len(load.indices) != 1:
            raise ExternCallError(f"function {self.name}: {load.buffer.name}.data of a buffer that "
                                  "is not flat; the llvm backend takes lowered functions")
        index = load.indices[0]
        if isinstance(index, E.IntImm) and index.value == 0:
            return base
        return self.builder.gep(base, [self.expr(index)],
                                source_etype=scalar_type(load.buffer.dtype, in_memory=True))

    def access_ptr(self, e):
        from .llvm_expr import value_type
        if len(e.args) != 6:
            raise ExternCallError(f"function {self.name}: T.tvm_access_ptr takes (type annotation, "
                                  f"data, offset, extent, mask), got {len(e.args) - 1} arguments")
        _, annotation, data, offset, _extent, _mask = e.args
        pointer = self.expr(data)
        if isinstance(offset, E.IntImm) and offset.value == 0:
            return pointer
        return self.builder.gep(pointer, [self.expr(offset)],
                                source_etype=value_type(annotation.dtype, in_memory=True))

    def type_annotation(self, e):
        raise ExternCallError(f"function {self.name}: T.type_annotation({e.dtype!r}) stands for a "
                              "type only (the first argument of T.tvm_access_ptr); it has no value")

    def reinterpret(self, e):
        from .llvm_expr import value_type
        (value,) = e.args
        if dt.bits(value.dtype) * dt.lanes(value.dtype) != dt.bits(e.dtype) * dt.lanes(e.dtype):
            raise ExternCallError(f"function {self.name}: T.reinterpret of {value.dtype} as "
                                  f"{e.dtype}: the two types must have the same size in bits")
        return self.builder.bitcast(self.expr(value), value_type(e.dtype))

    def call_function(self, e):
        from .llvm_expr import value_type
        name = e.args[0].value
        if name in GPU_BUILTINS:
            raise ExternCallError(f"function {self.name}: T.{name} is a GPU tensor-core builtin; "
                                  "the llvm target runs on the CPU (build for 'cuda' or 'cuda-sim')")
        for arg in e.args[1:]:
            if isinstance(arg, E.StringImm):
                raise ExternCallError(f"function {self.name}: T.call_extern({name!r}) with the "
                                      f"string argument {arg.value!r}; the llvm backend passes "
                                      "numbers and pointers only")
        if name.startswith("llvm.x86."):
            self._check_x86(name)
        values = [self.expr(a) for a in e.args[1:]]
        ret = ir.VoidType() if e.dtype == "void" else value_type(e.dtype)
        known = self.codegen._externs.get(name)
        if known is None:
            fn = self.codegen.extern(name, ret, [v.type for v in values])
        else:
            fn = known
            values = self._fit_arguments(name, fn, values, e)
        result = self.builder.call(fn, values)
        if fn.function_type.return_type != value_type(e.dtype) and e.dtype != "void":
            raise ExternCallError(f"function {self.name}: {name} is called with result types "
                                  f"{fn.function_type.return_type} and {e.dtype}; call it with one "
                                  "dtype everywhere")
        return result

    def _check_x86(self, name: str) -> None:
        """Refuse an x86 intrinsic that the CPU code is generated for lacks (LLVM would stop the
        process when it cannot select the instruction)."""
        if name not in X86_INTRINSIC_FEATURES:
            raise NotImplementedError(f"function {self.name}: the x86 intrinsic {name} is not one "
                                      "the llvm backend knows the CPU features of "
                                      f"({', '.join(sorted(X86_INTRINSIC_FEATURES))})")
        mcpu = self.options.get("mcpu")
        import llvmlite.binding as llvm
        if mcpu and mcpu != llvm.get_host_cpu_name():
            raise ExternCallError(f"function {self.name}: {name} is generated only for the host CPU "
                                  f"(whose features are known), not for -mcpu={mcpu}")
        have = {k for k, on in llvm.get_host_cpu_features().items() if on}
        if not any(set(need) <= have for need in X86_INTRINSIC_FEATURES[name]):
            raise ExternCallError(f"function {self.name}: {name} needs the CPU feature(s) "
                                  f"{' or '.join('+'.join(n) for n in X86_INTRINSIC_FEATURES[name])}, "
                                  "which this CPU lacks; use a portable implementation (e.g. "
                                  "tensor_intrin.x86.select_dot_16x4('portable'))")

    def _fit_arguments(self, name, fn, values, e):
        """``values`` converted to the parameter types ``fn`` was declared with (integers of
        another width are extended or truncated, as C converts them)."""
        params = fn.function_type.args
        if len(params) != len(values):
            raise ExternCallError(f"function {self.name}: {name} is called with {len(params)} and "
                                  f"with {len(values)} arguments; call it the same way everywhere")
        fitted = []
        for arg, value, param in zip(e.args[1:], values, params):
            if value.type == param:
                fitted.append(value)
            elif isinstance(value.type, ir.IntType) and isinstance(param, ir.IntType):
                unsigned = dt.element_of(arg.dtype).startswith("uint")
                if param.width > value.type.width:
                    fitted.append((self.builder.zext if unsigned else self.builder.sext)(value, param))
                else:
                    fitted.append(self.builder.trunc(value, param))
            else:
                raise ExternCallError(f"function {self.name}: {name} takes {param} where it was "
                                      f"first called, but is given {value.type} ({arg})")
        return fitted


# The x86 intrinsics the backend calls, with the CPU features that run them (any one set).
X86_INTRINSIC_FEATURES = {
    "llvm.x86.avx512.vpdpbusd.512": (("avx512vnni",),),
    "llvm.x86.avx512.vpdpbusd.256": (("avx512vnni", "avx512vl"), ("avxvnni",)),
    "llvm.x86.avx512.vpdpbusd.128": (("avx512vnni", "avx512vl"), ("avxvnni",)),
    "llvm.x86.avx512.pmaddubs.w.512": (("avx512bw",),),
    "llvm.x86.avx512.pmaddw.d.512": (("avx512bw",),),
    "llvm.x86.avx512bf16.dpbf16ps.512": (("avx512bf16",),),
}

GPU_BUILTINS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync",
                "tvm_bmma_sync")

POINTER_BUILTINS = {"tvm_access_ptr": ExternCalls.access_ptr,
                    "type_annotation": ExternCalls.type_annotation}


class _Imports(StmtExprVisitor):
    def __init__(self):
        self.texts: list = []

    def visit_For(self, loop):
        for key, value in loop.annotations or ():
            if key == IMPORT_PRAGMA:
                text = value.value if isinstance(value, E.StringImm) else value
                if not isinstance(text, str):
                    raise ExternCallError(f"loop {loop.loop_var.name}: the {IMPORT_PRAGMA} "
                                          "annotation must be LLVM IR text (a str), as "
                                          "contrib.clang.create_llvm returns it")
                if text not in self.texts:
                    self.texts.append(text)
        self.generic_visit(loop)

    def visit_PrimExpr(self, e):
        pass


def import_llvm_texts(functions: dict) -> list:
    """The LLVM IR texts that loops of the lowered ``functions`` import (``pragma_import_llvm``
    annotations), each once, in order of appearance."""
    scan = _Imports()
    for func in functions.values():
        scan.visit(func.body)
    return scan.texts
