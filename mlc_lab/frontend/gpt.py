"""A small GPT with random weights: one IRModule with ``prefill`` and ``decode`` over a KV cache,
the same model in numpy (with and without a cache), and greedy generation over either.

    model = GPT(GPTConfig(), seed=0)
    mod = model.to_relax()            # create_kv_cache, prefill, decode; weights are Constants
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlc_lab.cpu())
    model.generate(vm, b"Hello", steps=16)           # token ids, greedy
    model.generate_numpy(b"Hello", steps=16)         # the same ids, recomputed over the prefix

The model: byte tokens (vocab 256), ``n_layers`` pre-norm blocks of causal multi-head attention
with rotary position embedding (the angles are computed from the positions inside the graph,
so no table bounds the length) and a GELU (tanh form) MLP, a final layer_norm, and an output
projection. ``max_length`` bounds the text for memory planning: ``prefill`` and ``decode`` declare
n, m <= max_length (their ``"tir_var_upper_bound"`` attribute), so the tensors whose shapes grow
with the text get storages planned once, at their largest, instead of an allocation per call.
The functions of the module:

- ``create_kv_cache()``: a tuple of 2 * n_layers caches (keys then values of each layer), each
  holding rows of shape (heads, head_dim); made with ``vm.builtin.attention_kv_cache_create``.
- ``prefill(tokens: (1, n) int32, caches)``: runs the prompt (n symbolic: one build serves every
  length), appends its keys and values to the empty caches, returns (logits of the last
  token (1, vocab), caches).
- ``decode(token: (1, 1) int32, position: (1,) int32, total_len: Shape([m]), caches)``: one
  token at ``position`` (which must be m - 1: the caches hold the m - 1 rows before it);
  appends its key and value, attends over the m rows of each cache's view, returns
  (logits (1, vocab), caches). The position comes as a tensor, not as m - 1 computed in the
  graph: a fused kernel whose only use of m is a scalar (no buffer of size m) is not yet
  given m by FuseTIR.

Each view states the length its function expects, so a cache in the wrong state is an error
(prefill on caches that are not empty, decode with a total_len that is not the rows held plus
one). The append before that view has happened by then: after such an error, make new caches.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import relax, tir
from ..relax import op as R
from ..script.relax import call_packed, call_pure_packed

APPEND, VIEW = "vm.builtin.attention_kv_cache_append", "vm.builtin.attention_kv_cache_view"
CREATE = "vm.builtin.attention_kv_cache_create"


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 256
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 256
    eps: float = 1e-5
    reserve: int = 16   # rows each cache has room for before it first grows
    max_length: int = 512   # the longest text the functions plan memory for

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


LAYER_WEIGHTS = ("ln1_g", "ln1_b", "w_q", "w_k", "w_v", "w_o", "b_o",
                 "ln2_g", "ln2_b", "w_fc", "b_fc", "w_proj", "b_proj")


class GPT:
    """The weights (``weights``: name -> float32 array, drawn from ``seed``) and the model over
    them: in relax (``to_relax``) and in numpy (``forward_numpy``, ``NumpyDecoder``)."""

    def __init__(self, config: GPTConfig = GPTConfig(), seed: int = 0):
        if config.d_model % config.n_heads or config.head_dim % 2:
            raise ValueError(f"GPTConfig: d_model {config.d_model} must split into "
                             f"{config.n_heads} heads of an even size (rotary embedding rotates "
                             "pairs)")
        self.config = c = config
        rng = np.random.default_rng(seed)

        def normal(*shape, scale=None):
            scale = 1 / np.sqrt(shape[0]) if scale is None else scale
            return (rng.standard_normal(shape) * scale).astype("float32")

        w = {"embed": normal(c.vocab_size, c.d_model, scale=1.0)}
        for i in range(c.n_layers):
            w.update({f"l{i}.ln1_g": 1 + normal(c.d_model, scale=0.1),
                      f"l{i}.ln1_b": normal(c.d_model, scale=0.1),
                      f"l{i}.w_q": normal(c.d_model, c.d_model),
                      f"l{i}.w_k": normal(c.d_model, c.d_model),
                      f"l{i}.w_v": normal(c.d_model, c.d_model),
                      f"l{i}.w_o": normal(c.d_model, c.d_model),
                      f"l{i}.b_o": normal(c.d_model, scale=0.1),
                      f"l{i}.ln2_g": 1 + normal(c.d_model, scale=0.1),
                      f"l{i}.ln2_b": normal(c.d_model, scale=0.1),
                      f"l{i}.w_fc": normal(c.d_model, c.d_ff),
                      f"l{i}.b_fc": normal(c.d_ff, scale=0.1),
                      f"l{i}.w_proj": normal(c.d_ff, c.d_model),
                      f"l{i}.b_proj": normal(c.d_model, scale=0.1)})
        w.update({"lnf_g": 1 + normal(c.d_model, scale=0.1), "lnf_b": normal(c.d_model, scale=0.1),
                  "w_head": normal(c.d_model, c.vocab_size)})
        self.weights = w
        half = c.head_dim // 2
        self.inv_freq = (1.0 / 10000 ** (np.arange(half) / half)).astype("float32")

    # -- numpy ---------------------------------------------------------------------------------
    def rotary_numpy(self, positions: np.ndarray):
        """(cos, sin), each (len(positions), head_dim) float32, as the graph computes them."""
        angles = positions.astype("float32")[:, None] * self.inv_freq[None, :]
        angles = np.concatenate([angles, angles], -1)
        return np.cos(angles), np.sin(angles)

    def block_numpy(self, i: int, x: np.ndarray, positions: np.ndarray, past=None):
        """Layer ``i`` on rows ``x`` (t, d) at ``positions``; ``past``: (keys, values) of the
        earlier positions, each (s, heads, head_dim), or None. Returns (x, keys, values) with
        keys/values of every position so far."""
        c, w = self.config, self.weights
        p = f"l{i}."
        t = x.shape[0]
        h = layer_norm(x, w[p + "ln1_g"], w[p + "ln1_b"], c.eps)
        q, k, v = (np.reshape(h @ w[p + name], (t, c.n_heads, c.head_dim))
                   for name in ("w_q", "w_k", "w_v"))
        cos, sin = self.rotary_numpy(positions)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if past is not None:
            k, v = np.concatenate([past[0], k]), np.concatenate([past[1], v])
        s = k.shape[0]
        scores = np.einsum("thd,shd->hts", q, k) * np.float32(1 / np.sqrt(c.head_dim))
        if t > 1:   # causal: query j (position s - t + j) sees keys up to its own position
            scores = scores + np.triu(np.full((t, s), -1e9, "float32"), s - t + 1)
        probs = softmax(scores)
        attn = np.einsum("hts,shd->thd", probs, v).reshape(t, c.d_model)
        x = x + attn @ w[p + "w_o"] + w[p + "b_o"]
        h = layer_norm(x, w[p + "ln2_g"], w[p + "ln2_b"], c.eps)
        x = x + gelu_tanh(h @ w[p + "w_fc"] + w[p + "b_fc"]) @ w[p + "w_proj"] + w[p + "b_proj"]
        return x, k, v

    def head_numpy(self, x: np.ndarray) -> np.ndarray:
        w = self.weights
        return layer_norm(x, w["lnf_g"], w["lnf_b"], self.config.eps) @ w["w_head"]

    def forward_numpy(self, tokens) -> np.ndarray:
        """Logits (len(tokens), vocab) of every position, without a cache."""
        tokens = np.asarray(tokens).reshape(-1)
        positions = np.arange(len(tokens))
        x = self.weights["embed"][tokens]
        for i in range(self.config.n_layers):
            x, _, _ = self.block_numpy(i, x, positions)
        return self.head_numpy(x)

    def generate_numpy(self, prompt, steps: int) -> list:
        """Greedy generation recomputing the whole prefix at every step (the reference)."""
        tokens = list(as_tokens(prompt))
        for _ in range(steps):
            tokens.append(int(np.argmax(self.forward_numpy(tokens)[-1])))
        return tokens[len(as_tokens(prompt)):]

    # -- relax ---------------------------------------------------------------------------------
    def to_relax(self) -> "relax.IRModule":
        """The IRModule with ``create_kv_cache``, ``prefill`` and ``decode`` (module docstring)."""
        c = self.config
        bb = relax.BlockBuilder()
        caches_sinfo = relax.TupleStructInfo([relax.ObjectStructInfo()] * (2 * c.n_layers))
        row = (c.n_heads, c.head_dim)
        with bb.function("create_kv_cache", []):
            init = relax.const(np.zeros((1,) + row, "float32"))
            made = [bb.emit(call_pure_packed(CREATE, init, relax.ShapeExpr((c.reserve,) + row),
                                             relax.PrimValue(tir.IntImm("int64", 0)),
                                             sinfo_args=relax.ObjectStructInfo()))
                    for _ in range(2 * c.n_layers)]
            bb.emit_func_output(relax.Tuple(made))

        n = tir.Var("n", "int64")
        tokens = relax.Var("tokens", relax.TensorStructInfo((1, n), "int32"))
        caches = relax.Var("caches", caches_sinfo)
        bounds = {"tir_var_upper_bound": {"n": c.max_length, "m": c.max_length}}
        with bb.function("prefill", [tokens, caches], attrs=bounds):
            with bb.dataflow():
                out = bb.emit_output(self._emit_forward(bb, tokens, caches, n, n, R.arange(0, n)))
            bb.emit_func_output(out)

        m = tir.Var("m", "int64")
        token = relax.Var("token", relax.TensorStructInfo((1, 1), "int32"))
        position = relax.Var("position", relax.TensorStructInfo((1,), "int32"))
        total = relax.Var("total_len", relax.ShapeStructInfo([m]))
        caches = relax.Var("caches", caches_sinfo)
        with bb.function("decode", [token, position, total, caches], attrs=bounds):
            with bb.dataflow():
                out = bb.emit_output(self._emit_forward(bb, token, caches, 1, m, position))
            bb.emit_func_output(out)
        return bb.get()

    def _emit_forward(self, bb, tokens, caches, t, s, positions):
        """t new tokens at ``positions``; after appending, each cache holds s rows."""
        c, const = self.config, self._const
        x = bb.emit(R.take(const("embed"), tokens, axis=0))                 # (1, t, d)
        angles = bb.emit(R.multiply(R.expand_dims(R.astype(positions, "float32"), [1]),
                                    relax.const(self.inv_freq)))         # (t, head_dim / 2)
        angles = bb.emit(R.concat([angles, angles], axis=1))
        cos = bb.emit(R.reshape(R.cos(angles), (1, t, 1, c.head_dim)))
        sin = bb.emit(R.reshape(R.sin(angles), (1, t, 1, c.head_dim)))
        new_caches = []
        for i in range(c.n_layers):
            x = self._emit_block(bb, i, x, t, s, cos, sin, caches, new_caches)
        last = x if isinstance(t, int) else bb.emit(
            R.strided_slice(x, axes=[1], begin=[t - 1], end=[t], assume_inbound=True))
        h = bb.emit(R.nn.layer_norm(R.reshape(last, (1, c.d_model)), const("lnf_g"),
                                    const("lnf_b"), axes=[-1], epsilon=c.eps))
        logits = bb.emit(R.matmul(h, const("w_head")))
        return relax.Tuple([logits, relax.Tuple(new_caches)])

    def _emit_block(self, bb, i, x, t, s, cos, sin, caches, new_caches):
        c, p = self.config, f"l{i}."
        const = self._const
        heads = (1, t, c.n_heads, c.head_dim)
        h = bb.emit(R.nn.layer_norm(x, const(p + "ln1_g"), const(p + "ln1_b"), axes=[-1],
                                    epsilon=c.eps))
        q, k, v = (bb.emit(R.reshape(R.matmul(h, const(p + name)), heads))
                   for name in ("w_q", "w_k", "w_v"))
        q, k = (self._emit_rotary(bb, a, cos, sin) for a in (q, k))
        rows = (t, c.n_heads, c.head_dim)
        views = []
        for j, new in enumerate((k, v)):
            cache = bb.emit(call_packed(APPEND, relax.TupleGetItem(caches, 2 * i + j),
                                        bb.emit(R.reshape(new, rows)),
                                        sinfo_args=relax.ObjectStructInfo()))
            new_caches.append(cache)
            shape = (s, c.n_heads, c.head_dim)
            views.append(bb.emit(call_pure_packed(
                VIEW, cache, relax.ShapeExpr(shape),
                sinfo_args=relax.TensorStructInfo(shape, "float32"))))
        keys = R.permute_dims(R.reshape(views[0], (1, s, c.n_heads, c.head_dim)), [0, 2, 3, 1])
        values = R.permute_dims(R.reshape(views[1], (1, s, c.n_heads, c.head_dim)), [0, 2, 1, 3])
        scale = relax.const(np.float32(1 / np.sqrt(c.head_dim)))
        scores = bb.emit(R.multiply(R.matmul(R.permute_dims(q, [0, 2, 1, 3]), keys), scale))
        if not (isinstance(t, int) and t == 1):   # prefill starts on empty caches: s == t
            mask = R.triu(R.full_like(scores, relax.const(-1e9, "float32")), 1)
            scores = bb.emit(R.add(scores, mask))
        probs = bb.emit(R.nn.softmax(scores, axis=-1))
        attn = bb.emit(R.reshape(R.permute_dims(R.matmul(probs, values), [0, 2, 1, 3]),
                                 (1, t, c.d_model)))
        x = bb.emit(R.add(x, R.add(R.matmul(attn, const(p + "w_o")), const(p + "b_o"))))
        h = bb.emit(R.nn.layer_norm(x, const(p + "ln2_g"), const(p + "ln2_b"), axes=[-1],
                                    epsilon=c.eps))
        ff = bb.emit(R.nn.gelu_tanh(R.add(R.matmul(h, const(p + "w_fc")), const(p + "b_fc"))))
        return bb.emit(R.add(x, R.add(R.matmul(ff, const(p + "w_proj")), const(p + "b_proj"))))

    @staticmethod
    def _emit_rotary(bb, x, cos, sin):
        halves = bb.emit(R.split(x, 2, axis=-1))
        rotated = R.concat([R.negative(relax.TupleGetItem(halves, 1)),
                            relax.TupleGetItem(halves, 0)], axis=-1)
        return bb.emit(R.add(R.multiply(x, cos), R.multiply(rotated, sin)))

    def _const(self, name: str):
        if not hasattr(self, "_constants"):
            self._constants = {}
        if name not in self._constants:
            self._constants[name] = relax.const(self.weights[name])
        return self._constants[name]

    # -- running the module --------------------------------------------------------------------
    def generate(self, vm, prompt, steps: int) -> list:
        """Greedy generation on a VirtualMachine of ``to_relax()``'s module: prefill the prompt,
        then one decode per new token. Returns the new token ids."""
        prompt = as_tokens(prompt)
        caches = vm["create_kv_cache"]()
        logits, caches = vm["prefill"](prompt.reshape(1, -1), caches)
        out = []
        for _ in range(steps):
            out.append(int(np.argmax(logits.numpy()[0])))
            if len(out) == steps:
                break
            total = len(prompt) + len(out)
            logits, caches = vm["decode"](np.array([[out[-1]]], "int32"),
                                          np.array([total - 1], "int32"), (total,), caches)
        return out


class NumpyDecoder:
    """Incremental decoding in numpy with a cache of keys and values (a growing list per layer):
    the honest numpy baseline for per-token latency."""

    def __init__(self, model: GPT):
        self.model = model
        self.keys = self.values = None

    def prefill(self, tokens) -> np.ndarray:
        m = self.model
        tokens = as_tokens(tokens)
        x = m.weights["embed"][tokens]
        positions = np.arange(len(tokens))
        self.keys, self.values = [], []
        for i in range(m.config.n_layers):
            x, k, v = m.block_numpy(i, x, positions)
            self.keys.append(k)
            self.values.append(v)
        return m.head_numpy(x[-1:])

    def decode(self, token: int) -> np.ndarray:
        m = self.model
        position = self.keys[0].shape[0]
        x = m.weights["embed"][[token]]
        for i in range(m.config.n_layers):
            x, self.keys[i], self.values[i] = m.block_numpy(
                i, x, np.array([position]), (self.keys[i], self.values[i]))
        return m.head_numpy(x)


# -- numpy helpers ---------------------------------------------------------------------------------
def as_tokens(prompt) -> np.ndarray:
    """Bytes or a str (UTF-8) or a list of ids, as int32 token ids."""
    if isinstance(prompt, str):
        prompt = prompt.encode()
    if isinstance(prompt, (bytes, bytearray)):
        return np.frombuffer(bytes(prompt), np.uint8).astype("int32")
    return np.asarray(prompt, "int32").reshape(-1)


def layer_norm(x, g, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(eps)) * g + b


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gelu_tanh(x):
    inner = np.float32(np.sqrt(2 / np.pi)) * (x + np.float32(0.044715) * x ** 3)
    return 0.5 * x * (1 + np.tanh(inner))


def rotate(x, cos, sin):
    """Rotary embedding of x (t, heads, head_dim) with cos/sin (t, head_dim)."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


__all__ = ["GPT", "GPTConfig", "NumpyDecoder", "as_tokens"]
