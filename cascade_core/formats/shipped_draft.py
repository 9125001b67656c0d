"""The shipped-draft format: a few of a target's layers, trained apart from it (see the distill tool).

A draft built here shares the target's embeddings, final norm and tied head (the same tensors, never stored
again); only its own layers are saved, in float16, with a JSON description of how it was made. A file may also
hold the head's vocabulary (``head_token_ids``, ranked by distill/vocab.py): the draft then decodes with a head
over those tokens only (``SubVocabularyHead``)."""
import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

DRAFT_FILE = "draft.safetensors"
OWN = "model.layers."  # the parameters a draft stores: its own layers
HEAD_IDS = "head_token_ids"  # the head's vocabulary, where one was ranked


class SubVocabularyHead(torch.nn.Module):
    """An output head over a subset of the vocabulary (FR-Spec, Zhao et al., 2025; EAGLE-3): the subset's logits
    from their rows of the full head, -inf for every other token. The draft's q is then its softmax renormalised
    over the subset and zero elsewhere; verification stays exact, because a rejection samples the residual
    max(0, pi - q), which covers every token the draft cannot propose. The head's product shrinks by the
    vocabulary's ratio (49,152 -> 8,192 rows: most of a small draft's call)."""

    def __init__(self, weight, token_ids, vocab_size):
        super().__init__()
        token_ids = token_ids.long().to(weight.device)
        self.head = torch.nn.Linear(weight.shape[1], len(token_ids), bias=False, device=weight.device,
                                    dtype=weight.dtype)
        self.head.weight = torch.nn.Parameter(weight.detach()[token_ids].clone(), requires_grad=False)
        self.register_buffer("token_ids", token_ids)
        self.vocab_size = vocab_size

    def forward(self, hidden):
        return scattered(self.head(hidden), self.token_ids, self.vocab_size)


def scattered(logits, token_ids, vocab_size):
    """Logits over a sub-vocabulary placed at their token ids in a row of -inf: q is zero for every other token."""
    full = logits.new_full((*logits.shape[:-1], vocab_size), float("-inf"))
    return full.index_copy_(-1, token_ids, logits)


def build_draft(target, layers):
    """A model of the target's family with len(layers) layers copied from the target's; the rest is shared."""
    config = type(target.config)(**{**target.config.to_dict(), "num_hidden_layers": len(layers)})
    draft = type(target)(config).to(dtype=torch.float32, device=target.device)
    draft.model.embed_tokens = target.model.embed_tokens
    draft.model.norm = target.model.norm
    draft.lm_head = target.lm_head
    for new, old in enumerate(layers):
        draft.model.layers[new].load_state_dict(target.model.layers[old].state_dict())
    for name, param in draft.named_parameters():
        param.requires_grad = name.startswith(OWN)
    return draft


def own_state(draft):
    return {k: v for k, v in draft.state_dict().items() if k.startswith(OWN)}


def save_draft(draft, folder, meta):
    """The draft's own layers and meta; a head vocabulary the folder's file already has is kept (it is ranked
    apart from training, see distill/vocab.py)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous().cpu() for k, v in own_state(draft).items()}
    old = head_vocabulary(folder) if (folder / DRAFT_FILE).exists() else None
    if old is not None:
        tensors[HEAD_IDS], meta = old, {**meta, "head_vocabulary": draft_meta(folder)["head_vocabulary"]}
    save_file(tensors, folder / DRAFT_FILE, metadata={"meta": json.dumps(meta)})


def save_head_vocabulary(folder, token_ids, summary):
    """Store the head's vocabulary (int32 ids) and how it was ranked in the folder's draft file."""
    path = Path(folder) / DRAFT_FILE
    tensors = {k: v for k, v in load_file(path).items() if k != HEAD_IDS}
    tensors[HEAD_IDS] = token_ids.to(torch.int32).contiguous()
    save_file(tensors, path, metadata={"meta": json.dumps({**draft_meta(folder), "head_vocabulary": summary})})


def head_vocabulary(folder):
    """The head's token ids the file holds, or None (a head over the whole vocabulary)."""
    with safe_open(Path(folder) / DRAFT_FILE, "pt") as f:
        return f.get_tensor(HEAD_IDS) if HEAD_IDS in f.keys() else None


def draft_meta(folder):
    """What the shipped file says about itself: init layers, step, training positions, held-out scores."""
    with safe_open(Path(folder) / DRAFT_FILE, "pt") as f:
        return json.loads(f.metadata()["meta"])


def load_draft(target, folder, whole_vocabulary=False):
    """The shipped draft: its own layers from the file, everything else shared with the target; its head over
    the file's head vocabulary where it has one (``whole_vocabulary``: the tied head over every token)."""
    meta = draft_meta(folder)
    draft = build_draft(target, meta["init_layers"])
    own = load_file(Path(folder) / DRAFT_FILE)
    token_ids = own.pop(HEAD_IDS, None)
    draft.load_state_dict({k: v.to(target.dtype) for k, v in own.items()}, strict=False)
    if token_ids is not None and not whole_vocabulary:
        draft.lm_head = SubVocabularyHead(target.lm_head.weight, token_ids, target.config.vocab_size)
    for param in draft.parameters():
        param.requires_grad = False
    return draft.to(target.dtype).eval(), meta
