"""C-family source for GPU kernels: the part CUDA C and OpenCL C share.

A ``CSourcePrinter`` turns one kernel of a ``DeviceProgram`` (flat lowered TIR, see
``mlc_lab.tir.transform.split_host_device``) into C text. Dialects subclass it and fill in the
hooks: type names, the kernel signature, thread indices, barriers, vector accesses, math names.

Rules the printer keeps:

* Expressions (``c_expr``) get C's precedence, with parentheses only where C needs them, and
  floor division that is exact for negative values too.
* Shared arrays are declared once, at the top of the kernel (OpenCL requires it); local ones
  where the IR allocates them.
* A vector store (its index a ``Ramp``) becomes one ``float4``/``float2`` access when its lanes
  are contiguous (stride 1) and its base is provably a multiple of the lane count, so the
  address is aligned; otherwise it is written lane by lane. Vector loads follow the same rule.
* Names come from the IR; a name already visible in the current C scope gets a ``_1`` suffix.
"""
from __future__ import annotations

from ..arith import is_multiple_of, simplify
from ..tir import dtype as dt
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.functor import StmtExprMutator, StmtExprVisitor
from ..tir.stmt_functor import loads_in, stores_in
from ..tir.transform.inject_sync import is_sync
from .c_expr import MUL, PRIMARY, UNARY, CSourceError, ExprPrinter

_RESERVED = frozenset("auto break case char const continue default do double else enum extern "
                      "float for goto if inline int long register restrict return short signed "
                      "sizeof static struct switch typedef union unsigned void volatile while bool "
                      "true false half main min max kernel global local threadIdx blockIdx "
                      "blockDim gridDim".split())
_LANE_FIELDS = "xyzw"


class CSourcePrinter(ExprPrinter, StmtExprVisitor):
    """Prints kernels; one printer per source file, so helpers are defined once for all."""

    VECTOR_LANES = {"float32": (2, 4), "int32": (2, 4), "float64": (2,)}
    INDENT = "  "

    def __init__(self):
        self.helpers: dict[str, str] = {}
        self.features: set[str] = set()   # dtypes the source uses that need a header or pragma

    # -- what a dialect says ------------------------------------------------------------------
    def kernel_open(self, kernel, params: list) -> str:
        """The kernel's signature and ``{``; ``params`` holds (C type, name, is a buffer)."""
        raise NotImplementedError

    def array(self, scope: str, ctype: str, name: str, size: int, aligned: bool) -> str:
        """The declaration of a "shared" or "local" array (``aligned``: for vector access)."""
        raise NotImplementedError

    def thread_index(self, tag: str) -> str: raise NotImplementedError
    def barrier(self) -> str: raise NotImplementedError
    def vector_load(self, vtype: str, pointer: str) -> str: raise NotImplementedError
    def vector_store(self, vtype: str, pointer: str, value: str) -> str: raise NotImplementedError
    def vector_make(self, vtype: str, lanes: list) -> str: raise NotImplementedError

    def generic_visit(self, node):
        raise CSourceError(f"the C printer takes flat lowered kernels and has no rule for "
                           f"{type(node).__name__} nodes; lower the function first")

    def preamble(self) -> list[str]:
        """Lines after the launch comment: headers or pragmas for the ``features`` used."""
        return []

    def source(self, programs) -> str:
        """One source file with every kernel of ``programs`` (a DeviceProgram or a list of
        them): a comment with each kernel's launch configuration, the helpers, the kernels."""
        programs = list(programs) if isinstance(programs, (list, tuple)) else [programs]
        kernels = [self.kernel(k) for p in programs for k in p.kernels]
        header = []
        for program in programs:
            header.append(f"// {program.name}: {len(program.kernels)} kernel(s), launched in this "
                          "order")
            header += [f"//   {k.name}: grid {k.grid}, block {k.block}, {k.shared_bytes} bytes of "
                       "shared memory" for k in program.kernels]
        header += self.preamble()
        return "\n\n".join(["\n".join(header), *self.helpers.values(), *kernels]) + "\n"

    # -- kernels ------------------------------------------------------------------------------
    def kernel(self, kernel) -> str:
        """The C text of one kernel: signature, shared arrays, body."""
        self.lines, self.depth, self.scopes = [], 1, [set()]
        self.names: dict = {}      # Var or Buffer (by identity) -> (C text, precedence)
        self.lane_vars: dict = {}  # id of a vector let Var -> the scalar Vars of its lanes
        self.ranges: dict = {}     # Var -> Range, for bound analysis
        extents = dict(zip(("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x",
                            "threadIdx.y", "threadIdx.z"), kernel.grid + kernel.block))
        for tag, var in kernel.thread_vars.items():
            self.names[var] = (self.thread_index(tag), UNARY)
            self.ranges[var] = S.Range(E.const(0), E.const(extents[tag]))
        params = [(self.ctype(p.dtype, in_memory=isinstance(p, Buffer)), self.bind(p, p.name),
                   isinstance(p, Buffer)) for p in kernel.params]
        self.vectored = {id(x.buffer) for x in loads_in(kernel.body) + stores_in(kernel.body)
                         if self.vector_type(x.buffer, x.indices[0]) is not None}
        for buffer in kernel.shared:   # one per block: declared once, at the top of the kernel
            self.declare(buffer)
        self.visit(kernel.body)
        return "\n".join([self.kernel_open(kernel, params), *self.lines, "}"])

    def line(self, text: str) -> None:
        self.lines.append(self.INDENT * self.depth + text)

    def open(self, header: str) -> None:
        """``header {``, and a C scope for the names bound until ``close``."""
        self.line(header + " {")
        self.depth += 1
        self.scopes.append(set())

    def close(self, reopen: str | None = None) -> None:
        self.scopes.pop()
        self.depth -= 1
        if reopen is None:
            self.line("}")
        else:
            self.open(reopen)

    def bind(self, node, name: str) -> str:
        """A C name for ``node`` (a Var or Buffer), unique among the names in scope."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
        if base[0].isdigit() or base in _RESERVED or base in self.TYPES.values():
            base = "_" + base
        visible = set().union(*self.scopes)
        text, n = base, 0
        while text in visible:
            n += 1
            text = f"{base}_{n}"
        self.scopes[-1].add(text)
        self.names[node] = (text, PRIMARY)
        return text

    # -- statements ---------------------------------------------------------------------------
    def visit_SeqStmt(self, s):
        for stmt in s.seq:
            self.visit(stmt)

    def visit_For(self, loop):
        var = loop.loop_var
        self.ranges[var] = S.Range(loop.min, loop.extent)
        start, end = self.expr(loop.min), self.expr(simplify(loop.min + loop.extent))
        if loop.kind in ("unrolled", "vectorized"):
            self.line("#pragma unroll")
        self.scopes.append(set())   # the loop variable's scope, which the header opens
        name = self.bind(var, var.name)
        self.open(f"for ({self.ctype(var.dtype)} {name} = {start}; {name} < {end}; ++{name})")
        self.visit(loop.body)
        self.close()
        self.scopes.pop()

    def visit_IfThenElse(self, s):
        self.open(f"if ({self.expr(s.condition)})")
        self.visit(s.then_case)
        if s.else_case is not None:
            self.close(reopen="} else")
            self.visit(s.else_case)
        self.close()

    def visit_LetStmt(self, s):
        lanes = dt.lanes(s.value.dtype)
        if lanes == 1:
            value = self.expr(s.value)
            self.ranges[s.var] = S.Range(s.value, E.const(1, s.value.dtype))
            self.line(f"{self.ctype(s.var.dtype)} {self.bind(s.var, s.var.name)} = {value};")
        else:   # one scalar per lane, which lane reads of the vector Var find
            loaded = self.load_vectors(s.value)
            lane_vars = tuple(E.Var(f"{s.var.name}_{lane}", dt.element_of(s.var.dtype))
                              for lane in range(lanes))
            for lane, var in enumerate(lane_vars):
                value = self.expr(self.lane(s.value, lane, loaded))
                self.line(f"{self.ctype(var.dtype)} {self.bind(var, var.name)} = {value};")
            self.lane_vars[id(s.var)] = lane_vars
        self.visit(s.body)

    def visit_Allocate(self, s):
        buffer = s.buffer
        if not buffer.scope.startswith("shared"):   # shared arrays are declared at the top
            self.declare(buffer)
        self.visit(s.body)

    def declare(self, buffer: Buffer) -> None:
        name = self.bind(buffer, buffer.name)
        self.line(self.array(buffer.scope.partition(".")[0], self.ctype(buffer.dtype, True), name,
                             int(buffer.shape[0].value), id(buffer) in self.vectored))

    def visit_Evaluate(self, s):
        if is_sync(s):
            self.line(self.barrier())
        elif isinstance(s.value, E.Call):
            self.line(self.expr(s.value) + ";")

    def visit_BufferStore(self, s):
        index = s.indices[0]
        if dt.lanes(index.dtype) == 1:
            self.line(f"{self.buffer(s.buffer)}[{self.expr(index)}] = {self.expr(s.value)};")
            return
        vtype = self.vector_type(s.buffer, index)
        value = s.value
        if vtype is not None and isinstance(value, E.BufferLoad) and \
                self.vector_type(value.buffer, value.indices[0]) == vtype:   # a vector copy
            load = self.vector_load(vtype, self.pointer(value.buffer, value.indices[0].base))
            self.line(self.vector_store(vtype, self.pointer(s.buffer, index.base), load))
            return
        loaded = self.load_vectors(value)
        if vtype is not None:
            lanes = [self.expr(self.lane(value, lane, loaded)) for lane in range(index.lanes)]
            self.line(self.vector_store(vtype, self.pointer(s.buffer, index.base),
                                        self.vector_make(vtype, lanes)))
            return
        # Lane by lane. Each lane reads only its own element of the buffer it writes (the
        # vectorizer makes sure), so storing one lane cannot change what another computes.
        for lane in range(dt.lanes(index.dtype)):
            self.visit_BufferStore(S.BufferStore(s.buffer, self.lane(value, lane, loaded),
                                                 (self.lane(index, lane),)))

    # -- vectors ------------------------------------------------------------------------------
    def vector_type(self, buffer: Buffer, index) -> str | None:
        """``float4`` etc. where ``buffer[index]`` is one aligned vector access, else None."""
        if not (isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm)
                and index.stride.value == 1):
            return None
        elem = dt.element_of(buffer.dtype)
        if index.lanes not in self.VECTOR_LANES.get(elem, ()):
            return None
        if not is_multiple_of(index.base, index.lanes):
            return None
        return f"{self.TYPES[elem]}{index.lanes}"

    def load_vectors(self, value) -> dict:
        """Reads each aligned vector load in ``value`` into a vector temporary, declared just
        before the statement; returns {id(load): the Vars standing for ``A_vec.x`` ...}."""
        loaded = {}
        for load in loads_in(value):
            vtype = self.vector_type(load.buffer, load.indices[0])
            if vtype is None or id(load) in loaded:
                continue
            temp = E.Var(f"{load.buffer.name}_vec", load.dtype)
            text = self.vector_load(vtype, self.pointer(load.buffer, load.indices[0].base))
            self.line(f"{vtype} {self.bind(temp, temp.name)} = {text};")
            lane_vars = tuple(E.Var(temp.name, dt.element_of(load.dtype))
                              for _ in range(dt.lanes(load.dtype)))
            for lane, var in enumerate(lane_vars):
                self.names[var] = (f"{self.names[temp][0]}.{_LANE_FIELDS[lane]}", PRIMARY)
            loaded[id(load)] = lane_vars
        return loaded

    def lane(self, e, lane: int, loaded: dict | None = None):
        """Lane ``lane`` of the vector expression ``e``, as a scalar expression (vector lets,
        and the loads in ``loaded``, read from the scalars holding their lanes)."""
        return _Lane(lane, {**self.lane_vars, **(loaded or {})}).visit(e)

    def pointer(self, buffer: Buffer, base) -> str:
        offset = self.expr(base, MUL)
        return self.buffer(buffer) if offset == "0" else f"{self.buffer(buffer)} + {offset}"


class _Lane(StmtExprMutator):
    """One lane of a vector expression. ``lane_vars`` maps a vector let variable or a vector load
    already read into a temporary (by id) to the scalar Vars that hold its lanes."""

    def __init__(self, lane: int, lane_vars: dict):
        super().__init__()
        self.lane, self.lane_vars = lane, lane_vars

    def visit_Var(self, e):
        return self.lane_vars[id(e)][self.lane] if id(e) in self.lane_vars else e

    def visit_Ramp(self, e):
        return simplify(self.visit(e.base) + self.visit(e.stride) * self.lane)

    def visit_Broadcast(self, e):
        return self.visit(e.value)

    def visit_BufferLoad(self, e):
        if id(e) in self.lane_vars:
            return self.lane_vars[id(e)][self.lane]
        return E.BufferLoad(e.buffer, tuple(self.visit(i) for i in e.indices))

    def visit_Cast(self, e):
        return E.Cast(dt.element_of(e.dtype), self.visit(e.value))

    def visit_Call(self, e):
        return E.Call(dt.element_of(e.dtype), e.op, tuple(self.visit(a) for a in e.args))
