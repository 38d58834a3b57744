"""Renders each conversation of CASES (a JSON file) with the tokenizer and
chat template of each directory in DIRS, as the pinned transformers does,
and prints, as JSON, one list per directory: for each case the text and its
token ids, or the error the template raised. Llama 3's templates get the
date tuneline renders (`date_string`, the template's own default)."""

import json
import sys

from transformers import AutoTokenizer

cases = json.load(open(sys.argv[1]))
out = []
for d in sys.argv[2:]:
    tokenizer = AutoTokenizer.from_pretrained(d)
    rendered = []
    for case in cases:
        try:
            text = tokenizer.apply_chat_template(
                case["messages"], tokenize=False,
                add_generation_prompt=case["add_generation_prompt"], date_string="26 Jul 2024",
            )
        except Exception as e:  # a template's raise_exception
            rendered.append({"error": str(e)})
            continue
        rendered.append({"text": text, "ids": tokenizer(text, add_special_tokens=False)["input_ids"]})
    out.append(rendered)
print(json.dumps(out))
