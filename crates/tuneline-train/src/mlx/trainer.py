"""tuneline's mlx engine: LoRA steps with MLX and mlx-lm's model and LoRA
layers (Metal on Apple Silicon, mlx-cpu elsewhere), driven by a tuneline
process over stdin and stdout.

The protocol is the torch engine's: tuneline keeps the run (the data order,
the learning rate, the SIGTERM grace, trainer_state.json and the commits),
this program holds the model, the adapter and the optimizer. Its requests
and answers are defined once, in tuneline-train's `protocol.rs`;
`tuneline_protocol` checks each request against them. It trains alone:
a gang's requests (`agree`, `dist`) are the torch engine's. It saves the
adapter in PEFT's layout and `optimizer.safetensors`.

Adapters cross in PEFT's layout both ways, so tuneline's delivery takes them
as they are: mlx-lm's `lora_a` is (in, r) where PEFT's `lora_A` is (r, in),
and its `lora_b` (r, out) where PEFT's `lora_B` is (out, r). mlx-lm scales
by `scale`, which is PEFT's lora_alpha / r (or / sqrt(r) with rsLoRA).
mlx-lm's own trainer saves no optimizer state; this loop saves AdamW's
moments and step, so a resumed run continues exactly.
"""

import math
import os
import resource
import shutil
import signal
import sys
import time
from pathlib import Path

import tuneline_protocol as protocol  # first: print goes to stderr from here on

signal.signal(signal.SIGTERM, signal.SIG_IGN)

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
import mlx.optimizers as optim  # noqa: E402
from mlx.utils import tree_flatten, tree_map, tree_unflatten  # noqa: E402
from mlx_lm.tuner.lora import LoRALinear  # noqa: E402
from mlx_lm.tuner.trainer import grad_checkpoint  # noqa: E402
from mlx_lm.utils import load_model  # noqa: E402

PEFT_PREFIX = "base_model.model."
ADAPTER = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
OPTIMIZER = "optimizer.safetensors"


class Run:
    def __init__(self, spec):
        self.spec = spec
        if spec["device"] == "gpu":
            mx.set_default_device(mx.gpu)
        model, _ = load_model(Path(spec["base"]))
        if spec["bf16"]:
            model.set_dtype(mx.bfloat16)
        model.freeze()
        lora = spec["lora"]
        r = lora["r"]
        scale = lora["lora_alpha"] / (math.sqrt(r) if lora["use_rslora"] else r)
        targets = set(lora["target_modules"])
        swaps = [
            (name, LoRALinear.from_base(module, r=r, dropout=lora["lora_dropout"], scale=scale))
            for name, module in model.named_modules()
            if name.rsplit(".", 1)[-1] in targets and isinstance(module, nn.Linear)
        ]
        if not swaps:
            raise ValueError(f"no linear layer of this model is named in target_modules {sorted(targets)}")
        model.update_modules(tree_unflatten(swaps))
        if spec["gradient_checkpointing"]:
            grad_checkpoint(model.layers[0])
        # PEFT's tensor name -> (mlx-lm's parameter path)
        self.names = {}
        for name, _ in swaps:
            self.names[f"{PEFT_PREFIX}{name}.lora_A.weight"] = f"{name}.lora_a"
            self.names[f"{PEFT_PREFIX}{name}.lora_B.weight"] = f"{name}.lora_b"
        self.model = model
        self.init_dir = spec["adapter"]
        self.load_adapter(spec["adapter"])
        a = spec["adamw"]
        self.optimizer = optim.AdamW(
            learning_rate=0.0,
            betas=[a["beta1"], a["beta2"]],
            eps=a["eps"],
            weight_decay=a["weight_decay"],
            bias_correction=True,
        )
        self.optimizer.init(model.trainable_parameters())
        self.gradient = nn.value_and_grad(model, self.summed_loss)
        model.train()

    def trainable(self):
        return sum(v.size for _, v in tree_flatten(self.model.trainable_parameters()))

    def load_adapter(self, directory):
        weights = mx.load(os.path.join(directory, ADAPTER))
        missing = sorted(set(self.names) - set(weights))
        unexpected = sorted(set(weights) - set(self.names))
        if missing or unexpected:
            raise ValueError(
                f"{directory}: the adapter does not match target_modules "
                f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        # Transposed into a fresh array, as a step leaves it, so a resumed run computes as an uninterrupted one.
        update = [(self.names[key], mx.contiguous(value.T)) for key, value in weights.items()]
        self.model.update(tree_unflatten(update))
        mx.eval(self.model.trainable_parameters())

    def batch(self, rows):
        """Packed rows as one padded batch of their samples, each from
        position 0, with the targets the rows' labels give each position:
        samples run apart exactly as a block-diagonal mask keeps them, and the
        loss is the same as over the packed rows."""
        samples = []
        for row in rows:
            ids, labels, segments, positions = row["ids"], row["labels"], row["segments"], row["positions"]
            n, start = len(ids), 0
            for end in range(1, n + 1):
                if end < n and segments[end] == segments[start]:
                    continue
                if positions[start:end] != list(range(end - start)):
                    raise ValueError(f"a packed row's sample at {start}..{end} does not restart its positions at 0")
                targets = labels[start + 1 : end + 1] + ([-100] if end == n else [])
                samples.append((ids[start:end], targets))
                start = end
        length = max(len(ids) for ids, _ in samples)
        ids = mx.array([s + [0] * (length - len(s)) for s, _ in samples])
        targets = mx.array([t + [-100] * (length - len(t)) for _, t in samples])
        return ids, targets

    def summed_loss(self, ids, targets, divisor):
        logits = self.model(ids).astype(mx.float32)
        counted = targets != -100
        losses = nn.losses.cross_entropy(logits, mx.where(counted, targets, 0), reduction="none")
        return (losses * counted).sum() / divisor

    def step(self, request):
        started = time.perf_counter()
        divisor = float(request["counted"])
        total, summed = 0.0, None
        for micro in request["micro"]:
            mx.random.seed(micro["seed"])
            ids, targets = self.batch(micro["rows"])
            loss, grads = self.gradient(ids, targets, divisor)
            summed = grads if summed is None else tree_map(mx.add, summed, grads)
            mx.eval(loss, summed)
            total += loss.item()
        limit = request["max_grad_norm"]
        if limit > 0:
            summed, norm = optim.clip_grad_norm(summed, limit)
        else:
            norm = mx.sqrt(sum(mx.sum(mx.square(g)) for _, g in tree_flatten(summed)))
        self.optimizer.learning_rate = request["lr"]
        self.optimizer.update(self.model, summed)
        mx.eval(self.model.trainable_parameters(), self.optimizer.state, norm)
        seconds = time.perf_counter() - started
        return {"loss": total, "grad_norm": norm.item(), "peak_memory": self.peak_memory(), "seconds": seconds}

    def eval(self, request):
        self.model.eval()
        total = 0.0
        for batch in request["batches"]:
            ids, targets = self.batch(batch["rows"])
            total += self.summed_loss(ids, targets, 1.0).item()
        self.model.train()
        counted = request["counted"]
        return {"loss": total / counted if counted else float("nan")}

    def save(self, request):
        directory = request["dir"]
        params = dict(tree_flatten(self.model.trainable_parameters()))
        weights = {key: mx.contiguous(params[name].T) for key, name in self.names.items()}
        mx.save_safetensors(os.path.join(directory, ADAPTER), weights, metadata={"format": "pt"})
        shutil.copyfile(os.path.join(self.init_dir, ADAPTER_CONFIG), os.path.join(directory, ADAPTER_CONFIG))
        mx.save_safetensors(os.path.join(directory, OPTIMIZER), dict(tree_flatten(self.optimizer.state)))
        return {}

    def load(self, request):
        self.load_adapter(request["dir"])
        state = mx.load(os.path.join(request["dir"], OPTIMIZER))
        self.optimizer.state = tree_unflatten(list(state.items()))
        mx.eval(self.optimizer.state)
        return {}

    def peak_memory(self):
        if self.spec["device"] == "gpu":
            return mx.get_peak_memory()
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    run = None
    for line in sys.stdin:
        try:
            request = protocol.read(line)
        except protocol.ProtocolError as e:
            protocol.answer(e.op, {"error": str(e), "kind": "train"})
            continue
        op = request["op"]
        try:
            if op == "init":
                run = Run(request)
                ready = {"trainable": run.trainable(), "base_share": 1.0, "liger": False}
                protocol.answer(op, {"ok": {**ready, "library": f"mlx {mx.__version__}"}})
            else:
                protocol.answer(op, {"ok": getattr(run, op)(request)})
        except (ValueError, KeyError, OSError) as e:
            kind = "input" if op in ("init", "load") else "train"
            protocol.answer(op, {"error": f"{type(e).__name__}: {e}", "kind": kind})
        except RuntimeError as e:
            protocol.answer(op, {"error": f"{type(e).__name__}: {e}", "kind": "train"})


if __name__ == "__main__":
    main()
