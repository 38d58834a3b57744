"""LoRA fine-tuning with Hugging Face transformers + PEFT, run by a tuneline
worker as a `command` job on a rented GPU.

The worker sets:
  TUNELINE_DATA_DIR    the dataset version prefetched from the store (tuneline's
                       parquet shards: input_ids, labels, position_ids, segment_ids)
  TUNELINE_OUTPUT_DIR  where `checkpoint-N/` directories go; each complete one
                       (trainer_state.json written, files stable) is committed
                       to runs/<run>/checkpoints/N in the store
  TUNELINE_RUN         the run's name
and, after a preemption, passes --resume_from_checkpoint with the latest
committed checkpoint, downloaded into the output dir.

On SIGTERM (the spot notice) the script saves a checkpoint at the end of the
current step and exits; the worker uploads it and releases the job, and the
next worker resumes from it. See README.md in this directory.
"""

import argparse
import glob
import os
import signal

import torch
from datasets import load_dataset
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, help="a Hugging Face model id or directory")
    p.add_argument("--max_steps", type=int, default=500)
    p.add_argument("--save_steps", type=int, default=50, help="tuneline plan's Young/Daly interval")
    p.add_argument("--per_device_train_batch_size", type=int, default=4)
    p.add_argument("--gradient_accumulation_steps", type=int, default=4)
    p.add_argument("--learning_rate", type=float, default=2e-4)
    p.add_argument("--lora_r", type=int, default=16)
    p.add_argument("--lora_alpha", type=float, default=32)
    p.add_argument("--lora_dropout", type=float, default=0.05)
    p.add_argument("--target_modules", default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
    p.add_argument("--load_in_4bit", action="store_true", help="QLoRA: a 4-bit base (needs bitsandbytes)")
    p.add_argument("--resume_from_checkpoint")
    return p.parse_args()


class SaveOnSigterm(TrainerCallback):
    """Ends training with a checkpoint at the next step boundary after SIGTERM."""

    def __init__(self):
        self.stop = False
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stop", True))

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop:
            control.should_save = True
            control.should_training_stop = True
        return control


def collate(rows):
    """Pads a batch of packed rows; -100 labels are not trained on."""
    width = max(len(r["input_ids"]) for r in rows)

    def pad(key, value):
        return torch.tensor([r[key] + [value] * (width - len(r[key])) for r in rows])

    return {
        "input_ids": pad("input_ids", 0),
        "labels": pad("labels", -100),
        "position_ids": pad("position_ids", 0),
        "attention_mask": torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rows]),
    }


def main():
    a = parse()
    data = os.environ["TUNELINE_DATA_DIR"]
    output = os.environ["TUNELINE_OUTPUT_DIR"]
    train = load_dataset("parquet", data_files=sorted(glob.glob(f"{data}/train-*.parquet")))["train"]
    kwargs = {"torch_dtype": torch.bfloat16, "attn_implementation": "sdpa"}
    if a.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(a.model, **kwargs)
    lora = LoraConfig(r=a.lora_r, lora_alpha=a.lora_alpha, lora_dropout=a.lora_dropout, target_modules=a.target_modules.split(","), task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    args = TrainingArguments(
        output_dir=output,
        max_steps=a.max_steps,
        save_steps=a.save_steps,
        per_device_train_batch_size=a.per_device_train_batch_size,
        gradient_accumulation_steps=a.gradient_accumulation_steps,
        learning_rate=a.learning_rate,
        bf16=torch.cuda.is_available(),
        gradient_checkpointing=True,
        logging_steps=1,
        report_to=[],
        remove_unused_columns=False,
        dataloader_num_workers=2,
    )
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=collate, callbacks=[SaveOnSigterm()])
    trainer.train(resume_from_checkpoint=a.resume_from_checkpoint)
    trainer.save_model(os.path.join(output, "final"))


if __name__ == "__main__":
    main()
