"""Writers for the Hugging Face GPT-2 directory layout: config.json and
model.safetensors (via safetensors_io). vocab.json / merges.txt come from
bpe.save."""
import json


def hf_config(vocab_size, n_ctx, n_embd, n_layer, n_head, eot_id, layer_norm_epsilon=1e-5, extra=None):
    cfg = {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.0,
        "bos_token_id": eot_id,
        "embd_pdrop": 0.0,
        "eos_token_id": eot_id,
        "initializer_range": 0.02,
        "layer_norm_epsilon": layer_norm_epsilon,
        "model_type": "gpt2",
        "n_ctx": n_ctx,
        "n_embd": n_embd,
        "n_head": n_head,
        "n_inner": None,
        "n_layer": n_layer,
        "n_positions": n_ctx,
        "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.0,
        "scale_attn_by_inverse_layer_idx": False,
        "scale_attn_weights": True,
        "summary_activation": None,
        "summary_first_dropout": 0.0,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": vocab_size,
    }
    if extra:
        cfg.update(extra)
    return cfg


def write_config(path, cfg):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def f32_list(a):
    """Nested Python lists of floats from a float32 array, each written with
    the shortest decimal that reads back as the same float32 (keeps JSON
    small and exact)."""
    import numpy as np
    a = np.asarray(a, dtype=np.float32)
    if a.ndim == 0:
        v = a[()]
        return float(np.format_float_scientific(v, unique=True)) if np.isfinite(v) else float(v)
    if a.ndim == 1:
        return [float(np.format_float_scientific(v, unique=True)) if np.isfinite(v) else float(v) for v in a]
    return [f32_list(x) for x in a]
