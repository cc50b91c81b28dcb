"""Loop kinds and annotations: parallel, vectorize, unroll, bind, annotate, unannotate."""
from __future__ import annotations

from .. import errors
from ... import stmt as S
from ..instruction import instruction
from ...stmt_functor import uses_var
from .injective import affine_problem
from .loop_independence import local_problem
from .scope import all_blocks_under, const_int, dataflow_violation


class ForKindPrimitives:

    def _set_kind(self, loop, primitive: str, kind: str, thread: str | None = None) -> None:
        func_name, node, index = self._resolve_loop(loop, primitive)
        func = self._func(func_name)
        # bind may rebind a bound loop (the checks below are those of a serial loop); making a
        # GPU-bound loop a CPU parallel or vector loop is refused as a likely mix-up of targets
        if node.kind == "thread_binding" and kind in ("parallel", "vectorized"):
            raise errors.ThreadBoundLoopError(
                primitive, f"loop {node.loop_var.name} is already bound to {node.thread_binding}",
                func, [node])
        if kind != "unrolled":
            self._check_loop_is_spatial(node, index, primitive, func)
        if kind == "parallel":
            _check_not_nested_in_parallel(node, index, func)
        if kind == "vectorized" and const_int(node.extent) is None:
            raise errors.SymbolicExtentError(
                primitive, f"loop {node.loop_var.name} has the symbolic extent {node.extent}; only "
                "loops of constant extent can be vectorized", func, [node])
        new = node.replace(kind=kind, thread_binding=thread)
        self._replace(func_name, {id(node): new}, primitive)

    def _check_loop_is_spatial(self, node: S.For, index, primitive: str, func) -> None:
        """The rule the reference compiler applies to parallel/vectorize/bind: every block under the
        loop is a complete or reduction block of its scope, or the dataflow is compact under the
        loop itself (loop_independence.local_problem, which also proves the iterations touch
        disjoint data); and the loop only feeds spatial iterators."""
        local, local_checked = None, False
        for realize in all_blocks_under(node):
            scope = index.parent_block(realize)
            problem = dataflow_violation(realize, scope) if scope is not None else None
            if problem and not local_checked:
                local, local_checked = local_problem(node, index), True
            if problem and local is not None:
                raise errors.NotCompactDataflowError(
                    primitive, f"{problem[1]}, and {local}; the iterations of loop "
                    f"{node.loop_var.name} may not run side by side (apply this primitive before "
                    "decompose_reduction or cache_write splits the writers)", func, [node, realize.block])
            # a reduction block must be affine in its loops (the reference compiler's
            # "reduction block" rule), so that the iterations the loop runs side by side update
            # distinct elements; its T.where only removes iterations (a guarded split of the
            # reduction, as over a symbolic length), and a spatial block may bind anything
            reduces = any(iv.iter_type != "spatial" for iv in realize.block.iter_vars)
            problem = affine_problem(realize, index.loops_above(realize), predicate=False) \
                if reduces else None
            if problem is not None:
                raise errors.NotAffineBindingError(
                    primitive, f'reduction block "{realize.block.name_hint}" under loop '
                    f"{node.loop_var.name} has bindings that are not affine in its loops ({problem}); "
                    "its iterations run side by side could update one element at once",
                    func, [node, realize.block])
            for iv, value in zip(realize.block.iter_vars, realize.iter_values):
                if iv.iter_type != "spatial" and uses_var(value, node.loop_var):
                    raise errors.WrongBlockIterTypeError(
                        primitive, f"loop {node.loop_var.name} is bound to the reduce iterator "
                        f'{iv.var.name} of block "{realize.block.name_hint}"; only loops over '
                        "spatial iterators can be parallelised, vectorized or bound to threads",
                        func, [node])

    @instruction
    def parallel(self, loop) -> None:
        """Run the iterations of ``loop`` in parallel on CPU threads.

        Requires: the loop only feeds spatial iterators of the blocks under it, and its
        iterations are independent: each block under it is the sole writer of its outputs in its
        scope (a complete or reduction block); or, as the reference compiler allows for such
        "locally compact" loops, each block directly under the loop is a complete or reduction
        block and the only one there writing its outputs, and no iteration can touch an element
        another one writes (one half of a scatter, the init block left by decompose_reduction;
        not the update block, which has reduce iterators and no init). The loop is not bound to
        a GPU thread.

        Raises: ThreadBoundLoopError, WrongBlockIterTypeError, NotCompactDataflowError,
        NotAffineBindingError, NestedParallelError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((64,), "float32")):
        ...     for i in range(64):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(64, i)
        ...             A[vi] = T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("A"))
        >>> sch.parallel(i)
        >>> print(sch.mod["main"].body.block.body)
        for i in T.parallel(64):
            with T.block("A"):
                vi = T.axis.remap("S", [i])
                T.reads()
                T.writes(A[vi])
                A[vi] = T.float32(1)
        """
        self._set_kind(loop, "parallel", "parallel")

    @instruction
    def vectorize(self, loop) -> None:
        """Mark ``loop`` to be executed with vector instructions.

        Requires: as parallel, and a constant extent.

        Raises: ThreadBoundLoopError, WrongBlockIterTypeError, SymbolicExtentError,
        NotCompactDataflowError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32")):
        ...     for i in range(8):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(8, i)
        ...             A[vi] = T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("A"))
        >>> sch.vectorize(i)
        >>> print(sch.mod["main"].body.block.body.script().splitlines()[0])
        for i in T.vectorized(8):
        """
        self._set_kind(loop, "vectorize", "vectorized")

    @instruction
    def unroll(self, loop) -> None:
        """Mark ``loop`` to be fully unrolled by the code generator.

        Requires: nothing beyond a live handle; unrolling is legal on any loop, reduction loops
        included, since it keeps the order of iterations.

        Raises: InvalidHandleError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4,), "float32")):
        ...     for i in range(4):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(4, i)
        ...             A[vi] = T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("A"))
        >>> sch.unroll(i)
        >>> print(sch.mod["main"].body.block.body.script().splitlines()[0])
        for i in T.unroll(4):
        """
        self._set_kind(loop, "unroll", "unrolled")

    @instruction
    def bind(self, loop, thread_axis: str) -> None:
        """Bind ``loop`` to a GPU thread axis: blockIdx.x/y/z, threadIdx.x/y/z or vthread(.x/y/z).

        Requires: as parallel; a known thread tag. A loop already bound is rebound to the new
        axis. Binding a loop that feeds a reduce iterator (a cross-thread reduction, which the
        reference compiler lowers to a warp/shared-memory allreduce) is refused: the GPU lowering
        here has no allreduce, so the threads would race on the accumulator. For threadIdx, no two
        iterations of the loop may run a block storing to shared or global memory at one iterator
        point (threads would store one element at once).

        Raises: ThreadBindingError, WrongBlockIterTypeError, NotCompactDataflowError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((256,), "float32")):
        ...     for i in range(256):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(256, i)
        ...             A[vi] = T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("A"))
        >>> bx, tx = sch.split(i, [None, 64])
        >>> sch.bind(bx, "blockIdx.x")
        >>> sch.bind(tx, "threadIdx.x")
        >>> print("\\n".join(sch.mod["main"].body.block.body.script().splitlines()[:2]))
        for i_0 in T.thread_binding(4, thread="blockIdx.x"):
            for i_1 in T.thread_binding(64, thread="threadIdx.x"):
        """
        if not isinstance(thread_axis, str):
            raise TypeError(f"sch.bind: parameter 'thread_axis' expects a str such as "
                            f"'threadIdx.x', got {thread_axis!r}")
        if thread_axis not in S.THREAD_TAGS:
            func_name, node, _ = self._resolve_loop(loop, "bind")
            raise errors.ThreadBindingError(
                "bind", f"unknown thread axis {thread_axis!r}; use one of {', '.join(S.THREAD_TAGS)}",
                self._func(func_name), [node])
        if thread_axis.startswith("threadIdx"):
            self._check_threads_store_apart(loop)
        self._set_kind(loop, "bind", "thread_binding", thread_axis)

    def _check_threads_store_apart(self, loop) -> None:
        """The threads of a block run at once: two iterations of ``loop`` that visit one point of
        a block storing to shared or global memory would store one element side by side (a block
        bound as ``p // 3`` copies the same tile three times)."""
        from .block_domain import loops_between
        from .injective import repeated_points
        func_name, node, index = self._resolve_loop(loop, "bind")
        outer = [anc for anc in index.path(node) if isinstance(anc, S.For)]
        for realize in index.child_blocks(node):   # (a nested block stores through its parent)
            if all(w.buffer.scope == "local" for w in realize.block.writes):
                continue
            # with every other loop held, two values of this one must reach two points
            held = outer + loops_between(index, realize, node)
            if repeated_points(realize, [node], held):
                raise errors.ThreadBindingError(
                    "bind", f'two iterations of loop {node.loop_var.name} run block '
                    f'"{realize.block.name_hint}" at the same iterator point (its bindings are not '
                    "one-to-one in the loop), so threads bound to it would store the same element "
                    "at once; bind a loop whose iterations reach distinct points",
                    self._func(func_name), [node, realize.block])

    @instruction
    def annotate(self, block_or_loop, ann_key: str, ann_val) -> None:
        """Attach ``ann_key: ann_val`` to a block or loop (e.g. pragmas read by code generators).

        Requires: ``ann_key`` is a str; the value is printable (str, int, float, bool, list).

        Raises: TypeError (a key that is not a str), InvalidHandleError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4,), "float32")):
        ...     for i in range(4):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(4, i)
        ...             A[vi] = T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("A"))
        >>> sch.annotate(i, "pragma_unroll_explicit", 1)
        >>> print(sch.mod["main"].body.block.body.script().splitlines()[0])
        for i in T.serial(4, annotations={"pragma_unroll_explicit": 1}):
        """
        if not isinstance(ann_key, str):
            raise TypeError(f"sch.annotate: parameter 'ann_key' expects a str, got {ann_key!r}")
        self._set_annotation(block_or_loop, "annotate", ann_key, ann_val)

    @instruction
    def unannotate(self, block_or_loop, ann_key: str) -> None:
        """Remove the annotation ``ann_key`` from a block or loop.

        Requires: the annotation is there.

        Raises: AnnotationNotFoundError naming the missing key.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4,), "float32")):
        ...     for i in T.serial(4, annotations={"pragma_unroll_explicit": 1}):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(4, i)
        ...             A[vi] = T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("A"))
        >>> sch.unannotate(i, "pragma_unroll_explicit")
        >>> print(sch.mod["main"].body.block.body.script().splitlines()[0])
        for i in range(4):
        """
        self._set_annotation(block_or_loop, "unannotate", ann_key, None, remove=True)

    def _set_annotation(self, target, primitive, key, value, remove=False) -> None:
        from ..rv import LoopRV
        if isinstance(target, LoopRV):
            func_name, node, _ = self._resolve_loop(target, primitive, "block_or_loop")
            holder = node
        else:
            func_name, node, _ = self._resolve_block(target, primitive, "block_or_loop")
            holder = node.block
        annotations = dict(holder.annotations)
        if remove:
            if key not in annotations:
                raise errors.AnnotationNotFoundError(
                    primitive, f"there is no annotation {key!r} to remove", self._func(func_name),
                    [holder])
            del annotations[key]
        else:   # a sampled int is stored as the plain int the script gives back
            annotations[key] = int(value) if isinstance(value, int) and not isinstance(value, bool) else value
        new_holder = holder.replace(annotations=tuple(sorted(annotations.items())))
        new = new_holder if holder is node else node.replace(block=new_holder)
        self._replace(func_name, {id(node): new}, primitive)


def _check_not_nested_in_parallel(node: S.For, index, func) -> None:
    """CPU targets run one level of parallel loops: a parallel loop may not enclose, or sit inside,
    another one."""
    pairs = [(anc, node) for anc in index.path(node)
             if isinstance(anc, S.For) and anc.kind == "parallel"]
    pairs += [(node, loop) for loop in index.order if isinstance(loop, S.For)
              and loop.kind == "parallel" and any(anc is node for anc in index.path(loop))]
    for pair in pairs:
        raise errors.NestedParallelError(
            "parallel", f"loop {pair[1].loop_var.name} would be a parallel loop nested inside the "
            f"parallel loop {pair[0].loop_var.name}; CPU targets run one level of parallel loops, "
            "so fuse the two loops and parallelise the fused loop, or keep one of them serial",
            func, list(pair))
