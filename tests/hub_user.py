"""A transformers user's script, run by test_hub_export in a clean folder where cascade_core is not importable:
the seed's call and generate's conventions through an exported custom_generate, by folder and by Hub repo id, and
the call with an EAGLE-3 head (draft_head=) in place of the draft model.

    python hub_user.py MODELS SOURCE [SOURCE ...] OUT.json
"""
import contextlib
import importlib.util
import io
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TextStreamer

assert importlib.util.find_spec("cascade_core") is None, "cascade_core must not be importable here"
models, sources, out = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
target = AutoModelForCausalLM.from_pretrained(f"{models}/target")
draft = AutoModelForCausalLM.from_pretrained(f"{models}/draft")
tokenizer = AutoTokenizer.from_pretrained(f"{models}/target")
tokenizer.pad_token, tokenizer.padding_side = tokenizer.eos_token, "left"
texts = ["Who is Buzz Aldrin?", "The cascade", "A somewhat longer prompt than the others"]
results = {"greedy_target": target.generate(**tokenizer(texts[0], return_tensors="pt"), do_sample=False,
                                            max_new_tokens=24).tolist()}
for source in sources:
    cascade = dict(assistant_model=draft, custom_generate=source, trust_remote_code=True)
    inputs = tokenizer(texts[0], return_tensors="pt")
    torch.manual_seed(5)
    seeded = target.generate(**inputs, do_sample=True, alpha=0.25, deferral="v3", max_new_tokens=32, **cascade)
    greedy = target.generate(**inputs, do_sample=False, deferral="lossless", max_new_tokens=24, **cascade)
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    batched = target.generate(**batch, do_sample=True, seed=11, max_new_tokens=20, **cascade)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        streamed = target.generate(**inputs, do_sample=True, seed=2, max_new_tokens=30, **cascade,
                                   streamer=TextStreamer(tokenizer, skip_prompt=True))
    as_dict = target.generate(**inputs, do_sample=True, seed=2, max_new_tokens=30, return_dict_in_generate=True,
                              **cascade)
    results[source] = dict(seeded=seeded.tolist(), greedy=greedy.tolist(), batch_input=batch["input_ids"].tolist(),
                           batched=batched.tolist(), streamed=streamed.tolist(), printed=printed.getvalue(),
                           dict_type=type(as_dict).__name__, dict_sequences=as_dict.sequences.tolist(),
                           module=target.generate.__module__ if hasattr(target.generate, "__module__") else None)
# the seed's call with an EAGLE-3 head in place of the draft model (by folder, through the first source)
inputs = tokenizer(texts[0], return_tensors="pt")
with_head = dict(draft_head=f"{models}/head", custom_generate=sources[0], trust_remote_code=True)
torch.manual_seed(5)
seeded = target.generate(**inputs, do_sample=True, alpha=0.25, deferral="v3", gamma=3, max_new_tokens=32, **with_head)
greedy = target.generate(**inputs, do_sample=False, deferral="lossless", max_new_tokens=24, **with_head)
results["head"] = dict(seeded=seeded.tolist(), greedy=greedy.tolist())
with open(out, "w") as f:
    json.dump(results, f)
