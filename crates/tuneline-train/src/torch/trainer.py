"""tuneline's torch engine: LoRA steps with PyTorch, transformers and PEFT
(bitsandbytes for 4-bit bases and 8-bit optimizers, Liger's fused kernels on
CUDA), driven by a tuneline process over stdin and stdout.

tuneline keeps the run: the data order, the learning rate, the SIGTERM grace,
trainer_state.json and the commits to the store. This program holds the model,
the adapter and the optimizer. Each request is one JSON line on stdin; each
answer is one JSON line on stdout (anything a library prints goes to stderr).
The requests, their fields and their answers are defined once, in
tuneline-train's `protocol.rs`; `tuneline_protocol` checks each request
against them. This program saves the PEFT adapter and `optimizer.pt`.

In a gang (torch.distributed: gloo on CPUs, NCCL on GPUs) each member gets
its share of a step's micro-batches, and the summed adapter gradients and
losses are all-reduced once per step, as DDP does under accumulation; the
loss of every micro-batch is divided by the labeled tokens of the whole step.

With `dist.fsdp` the frozen base is sharded over the gang, a decoder
layer at a time, and gathered a layer at a time in forward and backward:
a 16-bit base by FSDP2's `fully_shard`; a 4-bit one (QLoRA) by FSDP1,
since bitsandbytes' 4-bit weights implement none of FSDP2's hooks, with
their blocks stored in the base's dtype (`bnb_4bit_quant_storage`) so a
layer flattens into one tensor, as accelerate and TRL shard QLoRA. The
adapter and its optimizer are left out of the sharding (ignored): they
are small, stay whole on every member, and are all-reduced and saved as
without FSDP. A layer's gather is a collective, so every member runs
`rounds` forward passes (the most micro-batches any member has), padding
its own with passes that count no token.

The gang meets at rank 0's TCP store. Rank 0 waits up to `timeout_s` for
every member to check in and, when one does not, fails naming it (its node,
and its address from TUNELINE_NODE_IPS, which a plane's worker sets); a
collective that fails because a member is gone fails the same way. Both are
the machines' fault: kind "infra".

Requests are served in order, but for "save": it is
served at once, beside a step still running, so that tuneline can give up a
step that waits on a member gone silent (a cut link) and still save the last
step it finished. SIGTERM is tuneline's to handle: it finishes or abandons
the step and saves.
"""

import contextlib
import copy
import datetime
import ipaddress
import os
import queue
import resource
import signal
import socket
import sys
import threading
import time
import traceback

import tuneline_protocol as protocol  # first: print goes to stderr from here on

signal.signal(signal.SIGTERM, signal.SIG_IGN)

import torch  # noqa: E402
import torch.distributed  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


ADAPTER = "adapter_model.safetensors"


class GangError(RuntimeError):
    """The gang did not meet, or lost a member: the machines' fault."""


def member(rank, dist):
    """Rank `rank` as a person finds it: its machine, and that machine's address."""
    node = rank // dist["nproc_per_node"]
    ips = [ip for ip in os.environ.get("TUNELINE_NODE_IPS", "").split(",") if ip]
    where = f" ({ips[node]})" if node < len(ips) else ""
    return f"rank {rank} on node {node}{where}"


def listener(host, port):
    """Rank 0's socket for the gang's store, bound to `host` alone: loopback
    for a gang on one machine, the address the other machines reach it at
    for a gang of machines. torch's TCPStore would listen on every interface
    by itself, and it has no authentication."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise GangError(f"the gang's rendezvous address {host} does not resolve: {e}") from e
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise GangError(f"rank 0 cannot listen at {host}:{port} ({e.strerror}): "
                        "MASTER_ADDR must be an address of rank 0's machine on the gang's private network") from e
    sock.listen(128)
    return sock


def meet(dist):
    """Joins the gang at rank 0's TCP store (`init_method` tcp://host:port),
    which listens at that address alone: every member checks in, and rank 0
    names those that never do. A gang on one machine keeps gloo's own
    sockets on loopback too."""
    host, port = dist["init_method"].removeprefix("tcp://").rsplit(":", 1)
    host = host.removeprefix("[").removesuffix("]")
    rank, world, timeout_s = dist["rank"], dist["world"], dist["timeout_s"]
    timeout = datetime.timedelta(seconds=timeout_s)
    # The store takes the socket's descriptor (detached: Python no longer closes it).
    listen_fd = listener(host, int(port)).detach() if rank == 0 else None
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback and sys.platform == "linux":
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    try:
        store = torch.distributed.TCPStore(
            host, int(port), world, is_master=rank == 0, timeout=timeout, wait_for_workers=False,
            master_listen_fd=listen_fd,
        )
    except (RuntimeError, TimeoutError) as e:
        raise GangError(f"the gang's rendezvous at {host}:{port} timed out after {timeout_s} s: "
                        f"{member(0, dist)} never answered ({str(e).splitlines()[0]})") from e
    store.set(f"tuneline/joined/{rank}", "1")
    if rank == 0:
        deadline = time.monotonic() + timeout_s
        while missing := [r for r in range(1, world) if not store.check([f"tuneline/joined/{r}"])]:
            if time.monotonic() > deadline:
                names = ", ".join(member(r, dist) for r in missing)
                raise GangError(f"the gang's rendezvous timed out after {timeout_s} s: {names} never joined")
            time.sleep(0.2)
    torch.distributed.init_process_group(
        backend=dist["backend"], store=store, rank=rank, world_size=world, timeout=timeout
    )


@contextlib.contextmanager
def collectives():
    """A RuntimeError raised in torch.distributed's own code (a collective that
    fails or times out: gloo raises a plain one, as do FSDP's gathers inside a
    forward pass) is a member gone: GangError. Any other is the training's."""
    try:
        yield
    except GangError:
        raise
    except RuntimeError as e:
        frames = traceback.extract_tb(e.__traceback__)
        if frames and "/torch/distributed/" in frames[-1].filename.replace(os.sep, "/"):
            raise GangError(f"a member of the gang is gone or silent: {str(e).splitlines()[0]}") from e
        raise


def all_reduce(tensor, op):
    """`tensor` reduced in place over the gang."""
    with collectives():
        torch.distributed.all_reduce(tensor, op=op)


def import_peft(spec):
    """PEFT, imported once the run's spec is known. PEFT imports bitsandbytes
    when it is installed, which costs seconds of CPU at every start (it loads
    torch's compiler); a run with neither a 4-bit base nor an 8-bit optimizer
    never uses it, so it is left out."""
    if not spec["load_in_4bit"] and spec["optim"] == "adamw_torch":
        sys.modules.setdefault("bitsandbytes", None)
    import peft

    return peft


class Run:
    def __init__(self, spec):
        self.spec = spec
        peft = import_peft(spec)
        self.device = torch.device(spec["device"])
        cuda = self.device.type == "cuda"
        self.dist = spec.get("dist")
        if self.dist:
            if cuda:
                torch.cuda.set_device(self.device)
            meet(self.dist)
        dtype = torch.bfloat16 if spec["bf16"] else torch.float16 if spec["fp16"] else torch.float32
        self.autocast = dtype if dtype != torch.float32 else None
        self.sharded = bool(self.dist and self.dist.get("fsdp"))
        # A base to shard stays in host memory (quantized there when 4-bit):
        # FSDP moves it to the device a layer at a time, so no GPU holds it whole.
        home = torch.device("cpu") if self.sharded else self.device
        load = {"dtype": dtype, "attn_implementation": "sdpa"}
        if spec["load_in_4bit"]:
            from transformers import BitsAndBytesConfig

            load["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type=spec["bnb_4bit_quant_type"],
                bnb_4bit_use_double_quant=spec["bnb_4bit_use_double_quant"],
                bnb_4bit_compute_dtype=dtype,
                # FSDP flattens a layer into one tensor of one dtype.
                bnb_4bit_quant_storage=dtype if self.sharded else torch.uint8,
            )
            load["device_map"] = {"": home}
        model = AutoModelForCausalLM.from_pretrained(spec["base"], **load)
        if not spec["load_in_4bit"]:
            model.to(home)
        self.liger = spec["use_liger_kernel"] and cuda
        if self.liger:
            from liger_kernel.transformers import _apply_liger_kernel_to_instance

            _apply_liger_kernel_to_instance(model=model)
        model.config.use_cache = False
        if spec["load_in_4bit"] and not self.sharded:
            # It keeps norms and embeddings in f32; a base to shard keeps
            # them in its dtype, one per flattened layer, as TRL does.
            model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        if spec["gradient_checkpointing"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        lora = spec["lora"]
        config = peft.LoraConfig(
            r=lora["r"],
            lora_alpha=lora["lora_alpha"],
            lora_dropout=lora["lora_dropout"],
            target_modules=lora["target_modules"],
            use_rslora=lora["use_rslora"],
            bias="none",
            task_type="CAUSAL_LM",
        )
        # The PEFT model, which saves and loads the adapter; `self.model` is
        # what a pass goes through: it, or FSDP1's wrapper of it.
        self.peft = self.model = peft.get_peft_model(model, config)
        adapter = {n: p for n, p in self.peft.named_parameters() if p.requires_grad}
        self.params = list(adapter.values())
        # The adapter's parameters under the names PEFT saves them by, taken
        # before FSDP1 renames the modules they are in (FSDP leaves them
        # whole: they are its ignored states).
        self.saved = peft.get_peft_model_state_dict(self.peft, state_dict=adapter, save_embedding_layers=False)
        self.base_numel = sum(p.numel() for p in self.peft.parameters() if not p.requires_grad)
        # The adapter and the optimizer's state, at step `self.at`: a step
        # changes them, and a save reads them, holding `self.held`.
        self.held = threading.Lock()
        self.at = 0
        self.load_adapter(spec["adapter"])
        if self.sharded:
            self.shard(model)
        self.optimizer = self.make_optimizer()
        self.model.train()

    def shard(self, base):
        """The frozen base sharded over the gang: each decoder layer (the
        classes transformers keeps whole, `_no_split_modules`), then the rest."""
        whole = set(getattr(base, "_no_split_modules", None) or [])
        layers = [m for m in self.peft.modules() if type(m).__name__ in whole]
        if not layers:
            raise ValueError(f"fsdp: {type(base).__name__} names no decoder layer class to shard by")
        if self.spec["load_in_4bit"]:
            from torch.distributed.fsdp import FullyShardedDataParallel
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy

            self.model = FullyShardedDataParallel(
                self.peft,
                auto_wrap_policy=ModuleWrapPolicy({type(layer) for layer in layers}),
                ignored_states=self.params,
                use_orig_params=True,
                device_id=self.device,
            )
        else:
            from torch.distributed.fsdp import fully_shard

            adapter = set(self.params)
            for layer in layers:
                fully_shard(layer, ignored_params=adapter)
            fully_shard(self.peft, ignored_params=adapter)
        # FSDP moves what it shards to the device, and leaves the adapter where it is.
        for p in self.params:
            p.data = p.data.to(self.device)

    def base_share(self):
        """The share of the frozen base this member holds: 1 unsharded. A
        sharded parameter is FSDP2's DTensor, or FSDP1's view of this
        member's part of a flattened layer (empty where it holds none)."""
        from torch.distributed.tensor import DTensor

        frozen = [p for p in self.peft.parameters() if not p.requires_grad]
        held = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in frozen)
        return held / max(1, self.base_numel)

    def make_optimizer(self):
        a = self.spec["adamw"]
        kwargs = {"lr": 0.0, "betas": (a["beta1"], a["beta2"]), "eps": a["eps"], "weight_decay": a["weight_decay"]}
        optim = self.spec["optim"]
        if optim == "adamw_torch":
            return torch.optim.AdamW(self.params, foreach=False, **kwargs)
        import bitsandbytes as bnb

        kind = {"adamw_8bit": bnb.optim.AdamW8bit, "paged_adamw_8bit": bnb.optim.PagedAdamW8bit}[optim]
        return kind(self.params, **kwargs)

    def load_adapter(self, directory):
        """The adapter in `directory`, copied into the adapter's own
        parameters: loading through the model's state dict would gather a
        sharded base (a collective)."""
        weights = load_file(os.path.join(directory, ADAPTER))
        params = self.saved
        if unexpected := sorted(set(weights) - set(params)):
            raise ValueError(f"{directory}: tensors this adapter does not have: {unexpected[:3]}")
        if missing := sorted(set(params) - set(weights)):
            raise ValueError(f"{directory}: tensors missing from this adapter: {missing[:3]}")
        with torch.no_grad():
            for name, param in params.items():
                param.copy_(weights[name])

    def tensors(self, rows):
        """Packed rows as a padded batch: ids, labels, positions, and the
        block-diagonal causal mask that keeps packed samples apart (none
        when every row is one whole sample)."""
        length = max(len(r["ids"]) for r in rows)

        def pad(key, fill):
            return torch.tensor([r[key] + [fill] * (length - len(r[key])) for r in rows], device=self.device)

        ids, labels, positions, segments = pad("ids", 0), pad("labels", -100), pad("positions", 0), pad("segments", 0)
        if bool((segments == 1).all()):
            # One whole sample a row: plain causal attention, SDPA's fast path.
            return ids, labels, positions, None
        causal = torch.ones(length, length, dtype=torch.bool, device=self.device).tril()
        mask = (segments[:, :, None] == segments[:, None, :]) & causal & (segments[:, :, None] != 0)
        # A padding position attends to itself only, so no row of the mask is empty.
        mask |= torch.eye(length, dtype=torch.bool, device=self.device)
        return ids, labels, positions, mask[:, None]

    # A micro-batch that counts no token: a member's padding to the gang's rounds.
    NOTHING = [{"ids": [0, 0], "labels": [-100, -100], "positions": [0, 1], "segments": [1, 1]}]

    def padding(self, request, have):
        """Passes of nothing that bring `have` up to the gang's rounds (sharded only)."""
        return range(have, request["rounds"]) if self.sharded else range(0)

    def loss(self, rows, counted):
        """The summed loss of `rows`' labeled tokens, divided by `counted`."""
        ids, labels, positions, mask = self.tensors(rows)
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None):
            out = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                labels=labels,
                num_items_in_batch=torch.tensor(counted, device=self.device),
            )
        return out.loss

    def step(self, request):
        started = time.perf_counter()
        counted = request["counted"]
        total = 0.0
        with collectives():
            for micro in request["micro"]:
                torch.manual_seed(micro["seed"])
                loss = self.loss(micro["rows"], counted)
                loss.backward()
                total += loss.item()
            for _ in self.padding(request, len(request["micro"])):
                self.loss(self.NOTHING, counted).backward()
        if self.dist:
            self.all_reduce_grads()
            total = self.summed([total])[0]
        limit = request["max_grad_norm"] if request["max_grad_norm"] > 0 else float("inf")
        with self.held:
            norm = torch.nn.utils.clip_grad_norm_(self.params, limit, foreach=False).item()
            for group in self.optimizer.param_groups:
                group["lr"] = request["lr"]
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.at = request["step"]
        seconds = time.perf_counter() - started
        return {"loss": total, "grad_norm": norm, "peak_memory": self.peak_memory(), "seconds": seconds}

    def summed(self, values, op=None):
        """`values` summed (or reduced by `op`) over the gang."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        all_reduce(tensor, op or torch.distributed.ReduceOp.SUM)
        return tensor.tolist()

    def all_reduce_grads(self):
        """Every member's adapter gradients summed, in one all-reduce of one
        flat buffer (a member with no micro-batch this step adds zeros)."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        all_reduce(flat, torch.distributed.ReduceOp.SUM)
        offset = 0
        for p in self.params:
            p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def agree(self, request):
        if not self.dist:
            return {"stop": request["stop"]}
        return {"stop": self.summed([1.0 if request["stop"] else 0.0], torch.distributed.ReduceOp.MAX)[0] > 0}

    def eval(self, request):
        self.model.eval()
        total = 0.0
        with torch.no_grad(), collectives():
            for batch in request["batches"]:
                total += self.loss(batch["rows"], 1).item()
            for _ in self.padding(request, len(request["batches"])):
                self.loss(self.NOTHING, 1)
        self.model.train()
        if self.dist:
            total = self.summed([total])[0]
        counted = request["counted"]
        return {"loss": total / counted if counted else float("nan")}

    def save(self, request):
        # Beside a step whose collective hangs, the copies to the host go on a
        # stream of their own: the default one waits on that collective.
        side = torch.cuda.stream(torch.cuda.Stream(self.device)) if self.device.type == "cuda" else contextlib.nullcontext()
        with self.held, side:
            if self.at != request["step"]:
                raise RuntimeError(f"asked to save step {request['step']}, but step {self.at} finished meanwhile")
            # PEFT's adapter files, from the adapter's own tensors: the model's
            # state dict would gather a sharded base (a collective) that a
            # running step may hold, and `save_pretrained` finds an adapter's
            # tensors by module names that FSDP1 has changed.
            weights = {name: p.detach().contiguous() for name, p in self.saved.items()}
            save_file(weights, os.path.join(request["dir"], ADAPTER), metadata={"format": "pt"})
            config = copy.copy(self.peft.peft_config["default"])
            config.base_model_name_or_path, config.inference_mode = self.spec["base"], True
            config.save_pretrained(request["dir"])
            torch.save(self.optimizer.state_dict(), os.path.join(request["dir"], "optimizer.pt"))
        return {}

    def load(self, request):
        with self.held:
            self.load_adapter(request["dir"])
            state = torch.load(os.path.join(request["dir"], "optimizer.pt"), map_location=self.device)
            self.optimizer.load_state_dict(state)
            self.at = request["step"]
        return {}

    def peak_memory(self):
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def out_of_memory(self, error):
        total = torch.cuda.get_device_properties(self.device).total_memory if self.device.type == "cuda" else 0
        return {"error": str(error).splitlines()[0], "kind": "oom", "peak": self.peak_memory(), "total": total}


class Server:
    """Answers requests: one Run, made by "init"."""

    def __init__(self):
        self.run = None

    def serve(self, request):
        op = request["op"]
        run = self.run
        try:
            if op == "init":
                self.run = Run(request)
                trainable = sum(p.numel() for p in self.run.params)
                library = f"torch {torch.__version__}"
                return {"ok": {"trainable": trainable, "base_share": self.run.base_share(), "liger": self.run.liger, "library": library}}
            return {"ok": getattr(run, op)(request)}
        except torch.OutOfMemoryError as e:
            return run.out_of_memory(e) if run else {"error": str(e), "kind": "oom", "peak": 0, "total": 0}
        except (ValueError, KeyError, OSError) as e:
            return {"error": f"{type(e).__name__}: {e}", "kind": "input" if op in ("init", "load") else "train"}
        except (GangError, torch.distributed.DistBackendError) as e:
            return {"error": f"{type(e).__name__}: {e}", "kind": "infra"}
        except RuntimeError as e:
            return {"error": f"{type(e).__name__}: {e}", "kind": "train"}


def main():
    server = Server()
    waiting = queue.Queue()

    def read():
        # A save is served here, at once (see the module's doc); the rest in order, below.
        for line in sys.stdin:
            try:
                request = protocol.read(line)
            except protocol.ProtocolError as e:
                protocol.answer(e.op, {"error": str(e), "kind": "train"})
                continue
            if request["op"] == "save":
                protocol.answer("save", server.serve(request))
            else:
                waiting.put(request)
        waiting.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (request := waiting.get()) is not None:
        protocol.answer(request["op"], server.serve(request))
    if server.run is not None and server.run.dist:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
