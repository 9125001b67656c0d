"""A draft that reads the target: an EAGLE-3 head (Li et al., 2025), in the format vLLM and SGLang load.

The head is one decoder layer over the target's own hidden states. Its input at position t is the pair
(g_t, embedding of token t + 1): g_t is ``fc`` of three of the target's residual streams at t (the features,
``aux_layers``: the streams entering those layers) or, while it drafts a block, its own previous output h.
Its output h_t predicts token t + 2 through its norm and an LM head over a sub-vocabulary (``d2t``: draft id ->
target id offsets); q is zero outside that vocabulary. The layer (``Midlayer``):

    x = cat(input_layernorm(embed), hidden_norm(g));  h = g + o_proj(attn(x));  h = h + mlp(post_norm(h))

This module is the head's format (the module, reading and writing the published files); how the engine drafts
with it is cascade_core/decoding/head_draft.py.
"""
import json
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding

from cascade_core.decoding.cached_model import cache_argument, hole_mask
from cascade_core.messages import shown

ARCHITECTURE = "LlamaForCausalLMEagle3"  # what we write; what we read: any architecture naming Eagle3
HEAD_FILES = ("model.safetensors", "pytorch_model.bin")
PREFIXES = (("model.layers.0.", "midlayer."), ("layers.0.", "midlayer."), ("model.", ""))


def is_head_config(config):
    """Whether a config.json (a dict) describes an EAGLE-3 head."""
    names = config.get("architectures") or []
    return any("eagle3" in name.lower() for name in names) or "eagle_config" in config


def default_aux_layers(target_layers):
    """The layers whose entering residual streams the head reads, as EAGLE-3, vLLM and SGLang default: 2, L//2, L-3."""
    return (2, target_layers // 2, target_layers - 3)


class Midlayer(torch.nn.Module):
    """The head's decoder layer: attention over [embedding, g] (twice the width), g as the residual."""

    def __init__(self, config):
        super().__init__()
        width = config.hidden_size
        self.input_layernorm = LlamaRMSNorm(width, eps=config.rms_norm_eps)
        self.hidden_norm = LlamaRMSNorm(width, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(width, eps=config.rms_norm_eps)
        self.self_attn = LlamaAttention(config, layer_idx=0)
        for name in ("q_proj", "k_proj", "v_proj"):  # they read [embedding, g]
            old = getattr(self.self_attn, name)
            setattr(self.self_attn, name, torch.nn.Linear(2 * width, old.out_features, bias=old.bias is not None))
        self.mlp = LlamaMLP(config)
        self.norm_before_residual = getattr(config, "norm_before_residual", False)

    def forward(self, embeds, g, position_embeddings, attention_mask, cache):
        normed_g = self.hidden_norm(g)
        x = torch.cat([self.input_layernorm(embeds), normed_g], -1)
        attended, _ = self.self_attn(x, position_embeddings=position_embeddings, attention_mask=attention_mask,
                                     **{cache_argument(LlamaAttention): cache})
        h = (normed_g if self.norm_before_residual else g) + attended
        return h + self.mlp(self.post_attention_layernorm(h))


@dataclass
class HeadOutput:
    logits: torch.Tensor  # [rows, kept, K] over the draft vocabulary (column k: target id token_ids[k])
    features: torch.Tensor  # [rows, slots, H]: h, what the next drafting step reads as g


class Eagle3Head(torch.nn.Module):
    """An EAGLE-3 head over a target: ``forward`` is called like a causal LM's (ids, a cache, an optional 4D mask
    and positions) plus the g it reads, either the target's ``features`` (fc applies) or its own ``hidden``
    outputs; with neither, g is zero (a row with nothing read yet, and the price of a drafting step)."""

    def __init__(self, config, embed_tokens, aux_layers, target_hidden_size, draft_vocab_size):
        super().__init__()
        self.config, self.aux_layers = config, tuple(aux_layers)
        width = config.hidden_size
        self.fc = torch.nn.Linear(len(self.aux_layers) * target_hidden_size, width, bias=False)
        self.midlayer = Midlayer(config)
        self.norm = LlamaRMSNorm(width, eps=config.rms_norm_eps)
        self.lm_head = torch.nn.Linear(width, draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(config.vocab_size, dtype=torch.bool))
        self.embed_tokens = embed_tokens  # the target's (the same module) unless the file has its own
        self.shares_embedding = True  # load_head: False where the file had its own (saving then keeps it)
        self.meta = {}  # how it was trained: load_head reads it from the file's metadata
        self.rotary_emb = LlamaRotaryEmbedding(config)

    @property
    def device(self):  # the norm's: fc may be stored in another precision (precision.py)
        return self.norm.weight.device

    @property
    def dtype(self):
        return self.norm.weight.dtype

    @property
    def token_ids(self):
        """The target id of each draft id."""
        return torch.arange(len(self.d2t), device=self.d2t.device) + self.d2t

    def set_vocabulary(self, token_ids):
        """The draft vocabulary as target ids (ascending), stored the published way: d2t offsets and t2d."""
        token_ids = torch.as_tensor(token_ids, dtype=torch.long, device=self.d2t.device).sort().values
        self.d2t.copy_(token_ids - torch.arange(len(token_ids), device=token_ids.device))
        self.t2d.zero_()
        self.t2d[token_ids] = True

    def draft_logits(self, h):
        """Logits over the draft vocabulary of h (normed here)."""
        return self.lm_head(self.norm(h))

    def forward(self, input_ids, cache=None, features=None, hidden=None, attention_mask=None, position_ids=None,
                logits_to_keep=0, use_cache=True):
        h = self.step(input_ids, cache, features, hidden, attention_mask, position_ids)
        kept = h[:, -logits_to_keep:] if logits_to_keep else h
        return HeadOutput(self.draft_logits(kept), h)

    def step(self, input_ids, cache=None, features=None, hidden=None, attention_mask=None, position_ids=None):
        """h for each pair (g, token): the layer alone, before the norm and LM head (training reads it too)."""
        embeds = self.embed_tokens(input_ids).to(self.dtype)
        if features is not None:
            g = self.fc(features.to(self.dtype))
        else:
            g = hidden if hidden is not None else embeds.new_zeros(embeds.shape[:-1] + (self.config.hidden_size,))
        rows, width = input_ids.shape
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            position_ids = torch.arange(past, past + width, device=input_ids.device)[None].expand(rows, -1)
        if attention_mask is None and width > 1:  # causal over what the cache holds and the new slots
            attention_mask = hole_mask(torch.ones(rows, past + width, dtype=torch.bool, device=input_ids.device),
                                       width, self.dtype)
        return self.midlayer(embeds, g, self.rotary_emb(embeds, position_ids), attention_mask, cache)


def new_head(target, token_ids, aux_layers=None, seed=0):
    """A head for ``target`` with the target's sizes, over the draft vocabulary ``token_ids`` (target ids): random
    layer and fc; its LM head and norm start as the target's rows and final norm (what h should become is the
    target's next hidden state, so the target's reading of it is the natural start)."""
    tc = target.config
    layers = tuple(aux_layers or default_aux_layers(tc.num_hidden_layers))
    if any(not 0 <= i < tc.num_hidden_layers for i in layers):
        raise ValueError(f"aux layers {layers} must lie in 0 .. {tc.num_hidden_layers - 1}, the target's layers")
    config = LlamaConfig(vocab_size=tc.vocab_size, hidden_size=tc.hidden_size, intermediate_size=tc.intermediate_size,
                         num_attention_heads=tc.num_attention_heads, num_key_value_heads=tc.num_key_value_heads,
                         head_dim=getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads,
                         rms_norm_eps=tc.rms_norm_eps, max_position_embeddings=tc.max_position_embeddings,
                         rope_parameters=getattr(tc, "rope_parameters", None), hidden_act=tc.hidden_act,
                         num_hidden_layers=1, target_num_hidden_layers=tc.num_hidden_layers)
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    head = Eagle3Head(config, target.get_input_embeddings(), layers, tc.hidden_size, len(token_ids))
    head.set_vocabulary(token_ids)
    with torch.no_grad():
        head.lm_head.weight.copy_(target.get_output_embeddings().weight[head.token_ids.to(target.device)].cpu())
        head.norm.weight.copy_(target.model.norm.weight.cpu())
    return head.to(device=target.device, dtype=target.dtype)


# --- the published format -------------------------------------------------------------------------------------

def _head_config(config):
    """The head's LlamaConfig from a config.json dict (the speculators format nests it)."""
    layer = config.get("transformer_layer_config", config)
    keep = {k: v for k, v in layer.items() if k not in ("architectures", "tie_word_embeddings", "torch_dtype", "dtype")}
    head = LlamaConfig(**{**keep, "num_hidden_layers": 1})
    head._attn_implementation = "sdpa"
    return head


def _canonical(name):
    for prefix, replacement in PREFIXES:
        if name.startswith(prefix):
            return replacement + name[len(prefix):]
    return name


def _read_weights(folder):
    for name in HEAD_FILES:
        path = Path(folder) / name
        if path.exists():
            if name.endswith(".safetensors"):
                with safe_open(path, "pt") as f:
                    return {_canonical(k): f.get_tensor(k) for k in f.keys()}, f.metadata() or {}
            return {_canonical(k): v for k, v in torch.load(path, map_location="cpu", weights_only=True).items()}, {}
    raise ValueError(f"{folder} has no head weights: expected one of {', '.join(HEAD_FILES)}")


def head_folder(source):
    """A local folder, or the Hub snapshot of an id (only its config and weights)."""
    if Path(source).is_dir():
        return Path(source)
    return Path(huggingface_hub.snapshot_download(source, allow_patterns=["config.json", *HEAD_FILES]))


def read_config(source):
    """config.json of a folder or Hub id (that file alone: a model's weights are for its loader), or None where
    there is none to read."""
    try:
        path = Path(source) / "config.json" if Path(source).is_dir() else Path(
            huggingface_hub.hf_hub_download(source, "config.json"))
        return json.loads(path.read_text()) if path.exists() else None
    except Exception:  # an id that is not a head's (or not reachable) is for the model loader to explain
        return None


def load_head(source, target):
    """An EAGLE-3 head from a folder or Hub id, over ``target`` (its embedding unless the file has one), in the
    target's dtype and device. The aux layer ids come from the config (``eagle_config``, read as vLLM does: the
    stream entering that layer) or the defaults; weight names may carry any of the published prefixes."""
    folder = head_folder(source)
    config = json.loads((folder / "config.json").read_text())
    head_config = _head_config(config)
    layers = head_config.target_num_hidden_layers = target.config.num_hidden_layers  # saving compares with defaults
    aux = (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or default_aux_layers(layers)
    weights, metadata = _read_weights(folder)
    draft_vocab = weights["lm_head.weight"].shape[0]
    target_hidden = config.get("target_hidden_size") or target.config.hidden_size
    embed = weights.pop("embed_tokens.weight", None)
    if embed is None:
        embed_tokens = target.get_input_embeddings()
    else:
        embed_tokens = torch.nn.Embedding.from_pretrained(embed.to(target.dtype), freeze=True)
    with torch.random.fork_rng(devices=[]):  # the weights initialised here are overwritten: leave the caller's
        head = Eagle3Head(head_config, embed_tokens, aux, target_hidden, draft_vocab)  # random stream as it was
    head.shares_embedding = embed is None
    if "d2t" not in weights:  # a head over the whole vocabulary
        weights["d2t"] = torch.zeros(draft_vocab, dtype=torch.long)
    weights.setdefault("t2d", torch.zeros(head_config.vocab_size, dtype=torch.bool))
    own = {k: v for k, v in head.state_dict().items() if not k.startswith("embed_tokens.")}
    missing = sorted(set(own) - set(weights))
    if missing:
        raise ValueError(f"{shown(str(source))} is not a complete EAGLE-3 head: missing {', '.join(missing[:4])}")
    head.load_state_dict({k: weights[k] for k in own}, strict=False)
    if not torch.equal(head.t2d.nonzero().squeeze(-1), head.token_ids.sort().values) and head.t2d.any():
        raise ValueError(f"{shown(str(source))}: its d2t and t2d name different draft vocabularies")
    head.meta = json.loads(metadata.get("meta", "{}"))
    for param in head.parameters():
        param.requires_grad = False
    return head.to(device=target.device, dtype=target.dtype).eval()


def save_head(head, folder, meta=None):
    """config.json + model.safetensors as vLLM and SGLang load them (fc, midlayer.*, norm, lm_head, d2t, t2d;
    the embedding only where it is not the target's); ``meta`` (how it was trained) in the file's metadata."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in head.config.to_dict().items() if not k.startswith("_")}
    config.update(architectures=[ARCHITECTURE], model_type="llama", num_hidden_layers=1,
                  draft_vocab_size=len(head.d2t), target_hidden_size=head.fc.in_features // len(head.aux_layers),
                  tie_word_embeddings=False, torch_dtype="float16",
                  # for transformers 4.x readers
                  rope_theta=(config.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    for key in ("id2label", "label2id", "return_dict", "output_attentions", "output_hidden_states", "problem_type",
                "chunk_size_feed_forward", "is_encoder_decoder", "dtype"):
        config.pop(key, None)
    config.pop("eagle_config", None)  # written again below, only where the layers are not the defaults
    if tuple(head.aux_layers) != default_aux_layers(config.pop("target_num_hidden_layers", 0) or -1):
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(head.aux_layers)}
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tensors = {}
    for name, value in head.state_dict().items():
        if name.startswith("embed_tokens.") and head.shares_embedding:
            continue
        tensors[name] = value.detach().cpu().contiguous()
        if value.is_floating_point():
            tensors[name] = tensors[name].to(torch.float16)
    save_file(tensors, folder / HEAD_FILES[0], metadata={"meta": json.dumps(meta or {})})
