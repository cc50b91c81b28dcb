"""Per-token decode latency of the small GPT (mlc_lab.frontend.gpt) at batch 1, in one run:

- mlc_lab: the module's ``prefill`` / ``decode`` built with the default pipeline for llvm, run
  on the VirtualMachine, keys and values in the ``vm.builtin.attention_kv_cache_*`` caches;
- numpy: the same model decoding incrementally with a cache (``NumpyDecoder``);
- torch eager: the same weights, the same incremental algorithm (skipped without torch).

Each runtime prefills a 32-token prompt and then decodes greedily; the tokens must agree.
Prints the median prefill time and the median time per decoded token, and each runtime's ratio
to mlc_lab (above 1: mlc_lab is faster).

At batch 1 every op is small: numpy's BLAS and torch run on one thread (more threads only
add synchronisation, and on a shared machine spinning threads distort every column).

Run: python bench/decode.py [--tokens 32] [--repeat 5] [--d-model 64]
"""
import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")   # before numpy (and torch) load their thread pools

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import mlc_lab  # noqa: E402
from mlc_lab import relax  # noqa: E402
from mlc_lab.frontend.gpt import GPT, GPTConfig, NumpyDecoder, as_tokens  # noqa: E402

PROMPT = b"The compiler turns loops into fa"   # 32 bytes


class Runner:
    """prefill(tokens) -> logits (1, vocab) numpy; decode(token, position) -> logits."""
    name = ""

    def greedy(self, prompt, steps: int, timings: list) -> list:
        out = [int(np.argmax(self.prefill(prompt)[0]))]
        for _ in range(steps - 1):
            start = time.perf_counter()
            logits = self.decode(out[-1], len(prompt) + len(out) - 1)
            timings.append(time.perf_counter() - start)
            out.append(int(np.argmax(logits[0])))
        return out


class MlcRunner(Runner):
    name = "mlc_lab (llvm, VM)"

    def __init__(self, model):
        start = time.perf_counter()
        self.vm = relax.VirtualMachine(relax.build(model.to_relax(), "llvm"), mlc_lab.cpu())
        self.build_s = time.perf_counter() - start

    def prefill(self, tokens):
        self.caches = self.vm["create_kv_cache"]()
        logits, self.caches = self.vm["prefill"](tokens.reshape(1, -1), self.caches)
        return logits.numpy()

    def decode(self, token, position):
        logits, self.caches = self.vm["decode"](np.array([[token]], "int32"),
                                                np.array([position], "int32"), (position + 1,),
                                                self.caches)
        return logits.numpy()


class NumpyRunner(Runner):
    name = "numpy (with a cache)"

    def __init__(self, model):
        self.decoder = NumpyDecoder(model)

    def prefill(self, tokens):
        return self.decoder.prefill(tokens)

    def decode(self, token, position):
        return self.decoder.decode(token)


class TorchRunner(Runner):
    name = "torch eager (with a cache)"

    def __init__(self, model):
        import torch
        torch.set_num_threads(1)
        self.torch, self.model = torch, model
        self.w = {k: torch.from_numpy(v) for k, v in model.weights.items()}
        self.inv_freq = torch.from_numpy(model.inv_freq)

    def _rotary(self, x, positions):
        angles = positions.float()[:, None] * self.inv_freq[None, :]
        angles = self.torch.cat([angles, angles], -1)
        cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
        half = x.shape[-1] // 2
        return x * cos + self.torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def _forward(self, tokens, start):
        torch, F, c, w = self.torch, self.torch.nn.functional, self.model.config, self.w
        t = tokens.shape[0]
        positions = torch.arange(start, start + t)
        x = w["embed"][tokens]
        for i in range(c.n_layers):
            p = f"l{i}."
            h = F.layer_norm(x, (c.d_model,), w[p + "ln1_g"], w[p + "ln1_b"], c.eps)
            q, k, v = ((h @ w[p + n]).view(t, c.n_heads, c.head_dim) for n in ("w_q", "w_k", "w_v"))
            q, k = self._rotary(q, positions), self._rotary(k, positions)
            if start:
                k = torch.cat([self.keys[i], k])
                v = torch.cat([self.values[i], v])
            self.keys[i], self.values[i] = k, v
            attn = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1),
                                                  v.transpose(0, 1), is_causal=t > 1)
            x = x + attn.transpose(0, 1).reshape(t, c.d_model) @ w[p + "w_o"] + w[p + "b_o"]
            h = F.layer_norm(x, (c.d_model,), w[p + "ln2_g"], w[p + "ln2_b"], c.eps)
            ff = F.gelu(h @ w[p + "w_fc"] + w[p + "b_fc"], approximate="tanh")
            x = x + ff @ w[p + "w_proj"] + w[p + "b_proj"]
        h = F.layer_norm(x[-1:], (c.d_model,), w["lnf_g"], w["lnf_b"], c.eps)
        return (h @ w["w_head"]).numpy()

    def prefill(self, tokens):
        self.keys = [None] * self.model.config.n_layers
        self.values = [None] * self.model.config.n_layers
        with self.torch.inference_mode():
            return self._forward(self.torch.from_numpy(tokens.astype("int64")), 0)

    def decode(self, token, position):
        with self.torch.inference_mode():
            return self._forward(self.torch.tensor([token]), position)


def measure(runner, prompt, tokens: int, repeat: int):
    prefill_times, decode_times, outputs = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        runner.prefill(prompt)
        prefill_times.append(time.perf_counter() - start)
        outputs.append(runner.greedy(prompt, tokens, decode_times))
    return statistics.median(prefill_times), statistics.median(decode_times), outputs[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per runtime")
    parser.add_argument("--d-model", type=int, default=64)
    args = parser.parse_args()
    config = GPTConfig(d_model=args.d_model, d_ff=4 * args.d_model)
    model = GPT(config, seed=0)
    prompt = as_tokens(PROMPT)
    print(f"small GPT: {config.n_layers} layers, d_model {config.d_model}, {config.n_heads} heads, "
          f"vocab {config.vocab_size}; prompt {len(prompt)} tokens, {args.tokens} generated, "
          f"batch 1, median of {args.repeat} runs")
    runners = [MlcRunner(model), NumpyRunner(model)]
    print(f"mlc_lab build: {runners[0].build_s:.1f} s")
    try:
        runners.append(TorchRunner(model))
        import torch
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    except ImportError:
        print("torch eager: skipped (torch is not installed; pip install torch)")
    rows = [(r.name, *measure(r, prompt, args.tokens, args.repeat)) for r in runners]
    reference = model.generate_numpy(prompt, args.tokens)
    ours_prefill, ours_decode = rows[0][1], rows[0][2]
    print(f"\n{'runtime':28s} {'prefill 32':>11s} {'ratio':>7s} {'decode/token':>13s} {'ratio':>7s}"
          "  tokens")
    for name, prefill, decode, out in rows:
        same = "same as the reference" if out == reference else "DIFFER from the reference"
        print(f"{name:28s} {prefill * 1e3:9.3f}ms {prefill / ours_prefill:6.2f}x "
              f"{decode * 1e3:11.3f}ms {decode / ours_decode:6.2f}x  {same}")
    print("\nratio: the runtime's time over mlc_lab's (above 1: mlc_lab is faster)")


if __name__ == "__main__":
    main()
