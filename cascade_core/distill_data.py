"""Training data for a distilled draft: the target's own answers and its reading of Python's docs.

Every example stores the token ids and, for each position to learn, the target's top-k log-probabilities
(temperature 1), so training never runs the target again. Instructions are composed from templates and
topics; the held-out evaluation uses its own templates and topics, never seen in training.
"""
import inspect
import itertools
import pkgutil
import random
import sys

import torch

TOP_K = 32

TEMPLATES = [
    "Explain {t} to a beginner.", "Write a short poem about {t}.", "List three facts about {t}.",
    "What are the pros and cons of {t}?", "Give me one practical tip about {t}.", "Summarise the history of {t}.",
    "Describe {t} in two sentences.", "Why do people care about {t}?", "Write a tweet about {t}.",
    "What is a common misconception about {t}?", "Compare {t} with something similar.",
    "Write a haiku about {t}.", "How would you teach a child about {t}?", "What questions should I ask about {t}?",
    "Write a short story that involves {t}.", "Give a step-by-step guide related to {t}.",
    "What are the main ideas behind {t}?", "Write a product description for something related to {t}.",
    "Tell me a fun fact about {t}.", "What will {t} look like in the future?", "Define {t} in simple words.",
    "Write an email to a friend about {t}.", "What skills are needed for {t}?", "Give an example of {t}.",
]
TOPICS = [
    "photosynthesis", "the moon", "volcanoes", "honey bees", "the French Revolution", "black holes", "recycling",
    "chess", "coffee", "the human heart", "rainbows", "electric cars", "the Roman Empire", "jazz music", "gardening",
    "machine learning", "the ocean", "friendship", "mountains", "bread baking", "the internet", "dinosaurs",
    "climate change", "sleep", "the piano", "football", "the Great Wall of China", "vaccines", "solar panels",
    "penguins", "time management", "origami", "the water cycle", "earthquakes", "the printing press", "tea",
    "public speaking", "the stock market", "cats", "dogs", "bicycles", "the Olympic Games", "deserts", "snow",
    "democracy", "the violin", "spiders", "the Moon landing", "chocolate", "libraries", "trains", "robots",
    "the Amazon rainforest", "meditation", "magnets", "the alphabet", "birds' migration", "pizza", "castles",
    "the Renaissance", "saving money", "learning a language", "clouds", "the brain", "fire", "glaciers",
    "video games", "Shakespeare", "the periodic table", "rivers", "camping", "painting", "running", "whales",
    "bridges", "the sun", "smartphones", "fungi", "kindness", "maps", "airplanes", "the Egyptian pyramids",
    "cooking pasta", "the immune system", "lighthouses", "wind energy", "comets", "the guitar", "sushi",
    "yoga", "ants", "mathematics", "poetry", "the Internet of Things", "oceans' tides", "forests", "umbrellas",
    "Python programming", "sorting algorithms", "databases", "prime numbers", "gravity", "the human skeleton",
]
# Held out: used only by evaluate(), never composed into training instructions.
EVAL_PROMPTS = [
    "Who is Buzz Aldrin?", "How do I boil an egg?", "What causes the seasons on Earth?",
    "Write a limerick about a lazy cat.", "Explain what a compiler does.", "Give me three ideas for a rainy day.",
    "Why is the sky blue?", "What is the capital of Australia and why was it chosen?",
    "Describe how a rainbow forms.", "Suggest a name for a bakery and explain it.",
    "How do airplanes stay in the air?", "What should I pack for a weekend hike?",
]


def instructions(seed=0):
    """Every template x topic, shuffled: ~2,400 distinct instructions."""
    combos = [tpl.format(t=topic) for tpl, topic in itertools.product(TEMPLATES, TOPICS)]
    random.Random(seed).shuffle(combos)
    return combos


# Importing these prints, opens a browser or a window.
SIDE_EFFECT_MODULES = {"this", "antigravity", "idlelib", "turtledemo", "tkinter", "turtle"}


def python_doc_texts(min_chars=400):
    """Docstrings of the standard library's modules and their public members: plain English technical text."""
    texts = []
    for info in sorted(pkgutil.iter_modules(), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in sys.builtin_module_names or info.name in SIDE_EFFECT_MODULES \
                or "test" in info.name:
            continue
        if not str(getattr(info.module_finder, "path", "")).startswith(sys.base_prefix):
            continue
        try:
            module = __import__(info.name)
        except Exception:  # some stdlib modules need a display, a database or a platform feature
            continue
        parts = [inspect.getdoc(module) or ""]
        parts += [inspect.getdoc(obj) or "" for name, obj in vars(module).items()
                  if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                  and getattr(obj, "__module__", None) == info.name]
        text = "\n\n".join(p for p in parts if p)
        if len(text) >= min_chars:
            texts.append(text)
    return texts


def top_k(logits, k=TOP_K):
    """(ids int32, log-probabilities float16) of the k most likely tokens, at temperature 1."""
    logp = torch.log_softmax(logits.float(), -1)
    values, ids = logp.topk(k, dim=-1)
    return ids.to(torch.int32), values.to(torch.float16)


def sampled_answers(pair, prompts, max_new_tokens, batch_size, seed, progress):
    """The target's own answers (T = 1), with its top-k at every answer position, from generate()'s logits."""
    from .engine import encode_prompt

    tok = pair.tokenizer
    examples = []
    for start in range(0, len(prompts), batch_size):
        batch = [encode_prompt(tok, p) for p in prompts[start : start + batch_size]]
        width = max(map(len, batch))
        pad = tok.pad_token_id if tok.pad_token_id is not None else min(pair.eos_token_ids)
        ids = torch.tensor([[pad] * (width - len(b)) + b for b in batch])
        mask = torch.tensor([[0] * (width - len(b)) + [1] * len(b) for b in batch])
        torch.manual_seed(seed + start)
        with torch.inference_mode():
            out = pair.target.generate(ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                       max_new_tokens=max_new_tokens, output_logits=True, return_dict_in_generate=True,
                                       pad_token_id=pad)
        logits = torch.stack(out.logits, 1)[..., : pair.vocab_size]  # [batch, steps, V]
        for row, prompt_ids in enumerate(batch):
            answer = out.sequences[row, width:].tolist()
            n = next((i + 1 for i, t in enumerate(answer) if t in pair.eos_token_ids), len(answer))
            ids_k, logp_k = top_k(logits[row, :n])
            # position j of the answer is predicted from prompt + answer[:j]
            examples.append(dict(input_ids=prompt_ids + answer[:n], first=len(prompt_ids) - 1,
                                 top_ids=ids_k, top_logp=logp_k, kind="answer"))
        progress(f"sampled answers: {min(start + batch_size, len(prompts))}/{len(prompts)} prompts")
    return examples


def read_texts(pair, texts, chunk_tokens, batch_size, progress):
    """The target reading text (teacher forcing): top-k at every position of chunk_tokens-long pieces."""
    ids = [i for text in texts for i in pair.tokenizer(text + "\n\n")["input_ids"]]
    chunks = [ids[s : s + chunk_tokens] for s in range(0, len(ids) - chunk_tokens + 1, chunk_tokens)]
    examples = []
    for start in range(0, len(chunks), batch_size):
        batch = torch.tensor(chunks[start : start + batch_size])
        with torch.inference_mode():
            logits = pair.target(batch).logits[..., : pair.vocab_size]
        for row in range(len(batch)):
            ids_k, logp_k = top_k(logits[row, :-1])
            examples.append(dict(input_ids=batch[row].tolist(), first=0, top_ids=ids_k, top_logp=logp_k, kind="text"))
        progress(f"read text: {min(start + batch_size, len(chunks))}/{len(chunks)} chunks")
    return examples
