"""Training data for a distilled draft: the target's own sampled answers to instructions the project composes.

Instructions are composed from templates, topics and styles (40 x 323 x 7, ~90,000 distinct); the held-out
evaluation uses its own prompts, never composed here. Only token ids are stored: the target's distributions
are recomputed while training (see train.py), so the data is cheap and every round can be fresh.
"""
import copy
import itertools
import random

import torch
from transformers import StaticCache

from cascade_core.decoding.cached_model import cache_argument
from cascade_core.decoding.row import encode_prompt

from .precision import bfloat16_is_faster

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
    "What is {t}?", "How does {t} work?", "Who should learn about {t}, and why?", "Write a riddle about {t}.",
    "What are five words you associate with {t}?", "Write a dialogue between two people discussing {t}.",
    "What are the biggest challenges related to {t}?", "How has {t} changed over the last century?",
    "Give me a quiz question about {t}, with the answer.", "Write the opening paragraph of an essay on {t}.",
    "What would a scientist say about {t}?", "Suggest a weekend project involving {t}.",
    "Write a limerick about {t}.", "What are the safety concerns around {t}?", "Explain {t} using an analogy.",
    "Why is {t} important?",
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
    "coral reefs", "the Industrial Revolution", "nuclear power", "antibiotics", "the Silk Road", "elephants",
    "hurricanes", "the Vikings", "photography", "opera", "bees and flowers", "composting", "the stars",
    "Mars", "the Milky Way", "telescopes", "microscopes", "DNA", "evolution", "the ancient Greeks",
    "the Aztecs", "the Cold War", "world maps", "languages of the world", "sign language", "handwriting",
    "email etiquette", "job interviews", "writing a resume", "budgeting", "credit cards", "inflation",
    "taxes", "small businesses", "marketing", "teamwork", "leadership", "negotiation", "habits",
    "exercise", "nutrition", "vitamins", "drinking water", "breakfast", "vegetables", "fruit", "rice",
    "cheese", "baking cookies", "barbecue", "spices", "soup", "salads", "ice cream", "farming",
    "tractors", "chickens", "horses", "owls", "sharks", "octopuses", "butterflies", "frogs", "snakes",
    "wolves", "bears", "rabbits", "parrots", "dolphins", "jellyfish", "trees", "roses", "cactus plants",
    "seeds", "soil", "rain", "thunderstorms", "tornadoes", "the seasons", "winter", "summer holidays",
    "beaches", "islands", "caves", "waterfalls", "lakes", "the Arctic", "Antarctica", "the Sahara",
    "cities", "villages", "skyscrapers", "architecture", "museums", "theatre", "films", "cartoons",
    "comic books", "novels", "fairy tales", "mythology", "board games", "puzzles", "magic tricks",
    "dancing", "singing", "drums", "orchestras", "hip hop", "rock music", "radio", "television",
    "newspapers", "podcasts", "social media", "passwords", "computer viruses", "cloud computing",
    "smart homes", "3D printing", "virtual reality", "batteries", "electricity", "light bulbs", "rockets",
    "satellites", "the International Space Station", "submarines", "ships", "cars", "traffic", "roads",
    "public transport", "walking", "hiking", "swimming", "tennis", "basketball", "the marathon",
    "skiing", "cycling races", "teachers", "schools", "homework", "exams", "universities", "science fairs",
    "experiments", "the scientific method", "statistics", "probability", "geometry", "fractions",
    "algebra", "calculus", "infinity", "zero", "clocks", "calendars", "time zones", "money",
    "banks", "coins", "trade", "markets", "shopping", "advertising", "fashion", "shoes", "wool",
    "cotton", "paper", "glass", "plastic", "steel", "wood", "concrete", "gold", "diamonds", "salt",
    "sugar", "oxygen", "carbon", "water pollution", "air quality", "noise", "silence", "happiness",
    "curiosity", "patience", "courage", "honesty", "gratitude", "stress", "memory", "dreams", "emotions",
    "laughter", "pets", "grandparents", "birthdays", "weddings", "holidays", "gifts", "letters",
    "postcards", "stamps", "the post office", "firefighters", "doctors", "nurses", "hospitals",
    "first aid", "dentists", "the eye", "the ear", "the lungs", "muscles", "blood", "bones",
]
STYLES = ["", " Keep it short.", " Use simple words.", " Answer in a numbered list.", " Be friendly and upbeat.",
          " Answer in one paragraph.", " Include an example."]
# Held out: used only for evaluation, never composed into training instructions.
EVAL_PROMPTS = [
    "Who is Buzz Aldrin?", "How do I boil an egg?", "What causes the seasons on Earth?",
    "Write a limerick about a lazy cat.", "Explain what a compiler does.", "Give me three ideas for a rainy day.",
    "Why is the sky blue?", "What is the capital of Australia and why was it chosen?",
    "Describe how a rainbow forms.", "Suggest a name for a bakery and explain it.",
    "How do airplanes stay in the air?", "What should I pack for a weekend hike?",
    # the kinds of distill/kinds.py, never composed there either
    "Write a Python function that returns the median of a list.", "Name four oceans and one animal living in each.",
    "What is 125 minus 37? Show your working.", "Traduis en anglais : la voiture est rouge.",
    "Pretend you are a baker and describe your morning.", "Describe, step by step, how to make a paper aeroplane.",
]


def instructions(seed=0):
    """Every template x topic x style, shuffled."""
    combos = [tpl.format(t=topic) + style for tpl, topic, style in itertools.product(TEMPLATES, TOPICS, STYLES)]
    random.Random(seed).shuffle(combos)
    return combos


@torch.inference_mode()
def sample(model, ids, mask, max_new_tokens, eos_ids, pad, watch=None):
    """Ancestral sampling at T = 1 with a KV cache over left-padded rows: [rows, <= max_new_tokens] new ids, pad
    after a row's end of text. Each draw is the inverse CDF of one uniform (torch.multinomial's exponential draws
    over 256 rows x 49,152 tokens took 27% of generate's time here). ``watch(logits)`` sees every step's logits."""
    # a static cache: a growing one concatenated every layer's keys and values at every step (44% of the time)
    cache = StaticCache(config=model.config, max_cache_len=ids.shape[1] + max_new_tokens)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    call = dict(attention_mask=mask, position_ids=positions)
    eos = torch.tensor(sorted(eos_ids), device=ids.device)
    ended = torch.zeros(len(ids), dtype=torch.bool, device=ids.device)
    out = []
    inputs = ids
    for _ in range(max_new_tokens):
        # the LM head on [rows, H]: a bfloat16 product on the strided [rows, 1, H] slice copied the weight per row
        hidden = model.model(input_ids=inputs, **{cache_argument(type(model.model)): cache}, **call).last_hidden_state
        logits = model.lm_head(hidden[:, -1]).float()
        if watch is not None:
            watch(logits)
        cdf = torch.softmax(logits, -1).cumsum(-1)
        u = torch.rand(len(ids), 1, device=ids.device, dtype=cdf.dtype) * cdf[:, -1:]
        token = torch.searchsorted(cdf, u).squeeze(-1).clamp(max=logits.shape[-1] - 1)
        token = token.masked_fill(ended, pad)
        out.append(token)
        ended |= torch.isin(token, eos)
        if ended.all():
            break
        inputs = token[:, None]
        call["attention_mask"] = torch.cat([call["attention_mask"], torch.ones_like(inputs)], -1)
        call["position_ids"] = call["position_ids"][:, -1:] + 1
    return torch.stack(out, 1)


def sampler_model(model):
    """The model sampling runs on: a bfloat16 copy where this machine multiplies faster in bfloat16 (only the
    training inputs are sampled from it; every distribution trained against is the float32 target's)."""
    if not bfloat16_is_faster(model.device.type) or model.dtype != torch.float32:
        return model
    return copy.deepcopy(model).to(torch.bfloat16)


def sampled_answers(pair, prompts, max_new_tokens, batch_size, seed, progress, watch=None, model=None):
    """The target's own answers at T = 1: each example is prompt + answer ids (up to and including EOS) and
    ``first``, the position whose successor is the answer's first token (the positions to learn start there).
    ``watch``: called with every step's logits. ``model``: what samples (the target, or its sampler_model)."""
    tok = pair.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else min(pair.eos_token_ids)
    model = model or pair.target
    examples = []
    for start in range(0, len(prompts), batch_size):
        batch = [encode_prompt(tok, p) for p in prompts[start : start + batch_size]]
        width = max(map(len, batch))
        ids = torch.tensor([[pad] * (width - len(b)) + b for b in batch], device=model.device)
        mask = torch.tensor([[0] * (width - len(b)) + [1] * len(b) for b in batch], device=model.device)
        torch.manual_seed(seed + start)
        out = sample(model, ids, mask, max_new_tokens, pair.eos_token_ids, pad, watch)
        for row, prompt_ids in enumerate(batch):
            answer = out[row].tolist()
            n = next((i + 1 for i, t in enumerate(answer) if t in pair.eos_token_ids), len(answer))
            examples.append(dict(input_ids=prompt_ids + answer[:n], first=len(prompt_ids) - 1))
        progress(f"sampled answers: {min(start + batch_size, len(prompts))}/{len(prompts)} prompts")
    return examples
