"""PyTorch + PEFT side of bench/train_speed.sh: LoRA training steps on the
same rows tuneline trains on. Usage: peft_train.py MODEL.gguf TRAIN.parquet STEPS
BATCH [DEVICE]. Prints `tokens_per_second peak_mib` (real, unpadded tokens over
the steps after the first, as tuneline counts them): the
process's peak RSS on the CPU, the peak allocated on a CUDA device."""
import os
import resource
import sys
import time

import pyarrow.parquet as pq
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

gguf, shard, steps, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
device = torch.device(sys.argv[5] if len(sys.argv) > 5 else "cpu")
torch.manual_seed(0)
torch.set_num_threads(os.cpu_count())
model = AutoModelForCausalLM.from_pretrained(
    os.path.dirname(os.path.abspath(gguf)), gguf_file=os.path.basename(gguf), torch_dtype=torch.float32
)
modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=modules, task_type="CAUSAL_LM")).to(device)
model.train()
params = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(params, lr=2e-4)
table = pq.read_table(shard).to_pydict()
rows = list(zip(table["input_ids"], table["labels"]))
timed = []
for step in range(steps):
    chunk = [rows[(step * batch + i) % len(rows)] for i in range(batch)]
    width = max(len(ids) for ids, _ in chunk)
    ids = torch.tensor([list(i) + [0] * (width - len(i)) for i, _ in chunk], device=device)
    labels = torch.tensor([list(l) + [-100] * (width - len(l)) for _, l in chunk], device=device)
    start = time.perf_counter()
    model(input_ids=ids, labels=labels).loss.backward()
    # max_grad_norm = 1.0, as transformers' Trainer and both tuneline engines clip.
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    optimizer.zero_grad()
    if device.type == "cuda":
        torch.cuda.synchronize()
    # Real tokens, as tuneline counts them: padding is not work done.
    timed.append((time.perf_counter() - start, sum(len(i) for i, _ in chunk)))
rate = sum(n for _, n in timed[1:]) / sum(t for t, _ in timed[1:])
if device.type == "cuda":
    peak = torch.cuda.max_memory_allocated(device) / 2**20
else:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{rate:.0f} {peak:.0f}")
