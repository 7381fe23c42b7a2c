# Writes a random-weight Llama 3 / Qwen 2 / Qwen 3 / Gemma 2 / Gemma 3 GGUF with llama.cpp's own writer (gguf-py from
# the llama.cpp source tree of the opt-in build, put on PYTHONPATH by families.ts): the "written by
# llama.cpp's tools" side of `npm run crosscheck -- families`. The vocabulary comes from a Hugging
# Face tokenizer directory (tokenizer.json, tokenizer_config.json, config.json) and is written as
# conversion/base.py get_vocab_base + _set_vocab_gpt2 do (tokens, token types, pre-tokenizer name),
# with gguf.SpecialVocab for merges, special ids, add_bos and the chat template. The hyper-parameters
# follow TextModel.set_gguf_parameters (and LlamaModel's vocab size / rope dimension count).
# Convert's own entry point needs torch and transformers, which this machine has no copy of.
#
#   python3 write-family.py --arch llama|qwen2|qwen3 --vocab-dir DIR --pre NAME --out F
#       [--seed N] [--dim 256] [--layers 2] [--heads 4] [--kv-heads 2] [--ffn 768]
#       [--head-dim N] [--tied] [--sliding-window N] [--swa-pattern N] [--head-scale F]
#       [--chat-template FILE]
# Gemma 2 / 3 follow Gemma2Model / Gemma3Model.set_gguf_parameters (key and value head sizes,
# soft-caps, sliding window) and store norm weights as 1 + w, as their modify_tensors does.
import argparse
import json
import os

import gguf
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--arch", required=True, choices=["llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen3moe", "qwen2moe"])
p.add_argument("--vocab-dir", required=True)
p.add_argument("--pre", required=True)
p.add_argument("--out", required=True)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--dim", type=int, default=256)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--kv-heads", type=int, default=2)
p.add_argument("--ffn", type=int, default=768)
p.add_argument("--head-dim", type=int, default=0)
p.add_argument("--vocab-size", type=int, default=0)
p.add_argument("--rope-theta", type=float, default=500000.0)
p.add_argument("--tied", action="store_true")
p.add_argument("--sliding-window", type=int, default=0)
p.add_argument("--swa-pattern", type=int, default=0)
p.add_argument("--head-scale", type=float, default=6.0)
p.add_argument("--chat-template", default="")
p.add_argument("--post-norm-scale", type=float, default=3.0)
# Phi-3 (Phi3MiniModel): partial rotary dims and longrope short/long factors with an attn factor.
p.add_argument("--rope-dims", type=int, default=0)
p.add_argument("--longrope", action="store_true")
# YaRN (rope_scaling {type: yarn, factor, original_max_position_embeddings}), as Qwen 2.5 / 3 use it.
p.add_argument("--yarn-factor", type=float, default=0.0)
p.add_argument("--orig-ctx", type=int, default=0)
# Mixture of experts (Qwen3MoeModel, Qwen2MoeModel, LlamaModel for Mixtral): experts, used per
# token, expert FFN size (Mixtral: feed_forward_length itself), router scale; qwen2moe's shared
# expert FFN size (ffn_{gate,up,down}_shexp, gated by the ffn_gate_inp_shexp vector).
p.add_argument("--experts", type=int, default=0)
p.add_argument("--experts-used", type=int, default=0)
p.add_argument("--expert-ffn", type=int, default=0)
p.add_argument("--router-scale", type=float, default=4.0)
p.add_argument("--shared-ffn", type=int, default=0)
a = p.parse_args()

# -- vocabulary, as get_vocab_base reads it through AutoTokenizer --------------------------------
tok = json.load(open(os.path.join(a.vocab_dir, "tokenizer.json"), encoding="utf-8"))
vocab = dict(tok["model"]["vocab"])
added = {t["content"]: t for t in tok["added_tokens"]}
for t in tok["added_tokens"]:
    vocab[t["content"]] = t["id"]
n_vocab = a.vocab_size or (max(vocab.values()) + 1)
reverse = {i: t for t, i in vocab.items()}


def looks_special(text):  # base.py does_token_look_special
    return (
        text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (text.startswith("<|") and text.endswith("|>"))
        or (text.startswith("<｜") and text.endswith("｜>"))
        or (text.startswith("<unused") and text.endswith(">"))
    )


tokens, types = [], []
for i in range(n_vocab):
    if i not in reverse:
        tokens.append(f"[PAD{i}]")
        types.append(gguf.TokenType.UNUSED)
        continue
    t = reverse[i]
    if t in added:
        types.append(gguf.TokenType.CONTROL if added[t]["special"] or looks_special(t) else gguf.TokenType.USER_DEFINED)
    else:
        types.append(gguf.TokenType.NORMAL)
    tokens.append(t)

# -- hyper-parameters ----------------------------------------------------------------------------
arch = {
    "llama": gguf.MODEL_ARCH.LLAMA,
    "qwen2": gguf.MODEL_ARCH.QWEN2,
    "qwen3": gguf.MODEL_ARCH.QWEN3,
    "gemma2": gguf.MODEL_ARCH.GEMMA2,
    "gemma3": gguf.MODEL_ARCH.GEMMA3,
    "phi3": gguf.MODEL_ARCH.PHI3,
    "qwen3moe": gguf.MODEL_ARCH.QWEN3MOE,
    "qwen2moe": gguf.MODEL_ARCH.QWEN2MOE,
}[a.arch]
if a.arch == "llama" and a.experts:
    a.ffn = a.expert_ffn  # LlamaModel writes intermediate_size, each expert's width
if a.arch == "qwen2moe":
    a.tied = False  # llama.cpp's qwen2moe loader requires output.weight
gemma = a.arch in ("gemma2", "gemma3")
if gemma:
    a.tied = True  # Gemma's head is token_embd
head_dim = a.head_dim or a.dim // a.heads
w = gguf.GGUFWriter(a.out, gguf.MODEL_ARCH_NAMES[arch])
w.add_type(gguf.GGUFType.MODEL)
# Not "phi3" in the name: llama.cpp then sets Phi-3 SentencePiece token attributes ("</s>"),
# which the Llama 3 stand-in vocabulary does not have (llama-vocab.cpp, by model name).
w.add_name(f"random {a.arch.replace('phi3', 'phi-family')} seed {a.seed}")
w.add_block_count(a.layers)
w.add_context_length(4096)
w.add_embedding_length(a.dim)
w.add_feed_forward_length(a.ffn)
w.add_head_count(a.heads)
w.add_head_count_kv(a.kv_heads)
w.add_rope_freq_base(a.rope_theta)
w.add_layer_norm_rms_eps(1e-6 if a.arch != "llama" else 1e-5)
if a.head_dim or gemma:
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
if a.arch == "llama":
    w.add_vocab_size(n_vocab)
    w.add_rope_dimension_count(head_dim)
if a.arch == "gemma2":
    w.add_attn_logit_softcapping(50.0)
    w.add_final_logit_softcapping(30.0)
    w.add_sliding_window(a.sliding_window or 4096)
if a.arch == "gemma3" and a.sliding_window:
    w.add_sliding_window(a.sliding_window)
if gemma and a.swa_pattern:
    w.add_uint32(f"{a.arch}.attention.sliding_window_pattern", a.swa_pattern)
if a.rope_dims:
    w.add_rope_dimension_count(a.rope_dims)
rope_dims = a.rope_dims or head_dim
if a.longrope:
    # Phi3MiniModel.set_gguf_parameters for rope_scaling type longrope: original context,
    # attn factor √(1 + ln(scale) / ln(orig)), short and long factor tensors (n_rot / 2 each).
    orig = a.orig_ctx or 4096
    scale = 131072 / orig
    w.add_rope_scaling_orig_ctx_len(orig)
    w.add_rope_scaling_attn_factors(float(np.sqrt(1 + np.log(scale) / np.log(orig))))
if a.yarn_factor:
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(a.yarn_factor)
    w.add_rope_scaling_orig_ctx_len(a.orig_ctx or 4096)
if a.experts:
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    if a.arch != "llama":
        w.add_expert_feed_forward_length(a.expert_ffn)
if a.shared_ffn:
    w.add_expert_shared_feed_forward_length(a.shared_ffn)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre(a.pre)
w.add_token_list(tokens)
w.add_token_types(types)
special = gguf.SpecialVocab(a.vocab_dir, load_merges=True, n_vocab=n_vocab)
if a.chat_template:
    special.chat_template = open(a.chat_template, encoding="utf-8").read()
special.add_to_gguf(w)

# -- peaked random weights -----------------------------------------------------------------------
# Uniform ±1/√fan_in matrices; the LM head's rows get log-normal scales so that a few tokens stand
# far out of the logits: greedy steps have clear margins, as a trained model's mostly do.
rng = np.random.default_rng(a.seed)


def mat(rows, cols, scale=1.0):  # [out, in] as Hugging Face stores it; GGUF dims are [in, out]
    return (rng.uniform(-1, 1, size=(rows, cols)) * (scale / np.sqrt(cols))).astype(np.float16)


def norm(n, scale=1.0):
    return (rng.uniform(0.8, 1.2, size=n) * scale).astype(np.float32)


def head(rows, cols):
    row_scale = np.exp(rng.normal(0, 0.6, size=(rows, 1))) * a.head_scale
    return (rng.uniform(-1, 1, size=(rows, cols)) * row_scale / np.sqrt(cols)).astype(np.float16)


q_dim, kv_dim = a.heads * head_dim, a.kv_heads * head_dim
if a.longrope:
    # Factors ≥ 1 as Phi-3's (short ≈ 1–3, long up to tens), random per pair.
    w.add_tensor("rope_factors_long.weight", rng.uniform(1, 30, size=rope_dims // 2).astype(np.float32))
    w.add_tensor("rope_factors_short.weight", rng.uniform(1, 3, size=rope_dims // 2).astype(np.float32))
w.add_tensor("token_embd.weight", head(n_vocab, a.dim) if a.tied else mat(n_vocab, a.dim, np.sqrt(a.dim)))
for b in range(a.layers):
    blk = f"blk.{b}."
    w.add_tensor(blk + "attn_norm.weight", norm(a.dim))
    if a.arch == "phi3":  # fused, as Phi-3's qkv_proj
        w.add_tensor(blk + "attn_qkv.weight", np.concatenate([mat(q_dim, a.dim), mat(kv_dim, a.dim), mat(kv_dim, a.dim)]))
    else:
        w.add_tensor(blk + "attn_q.weight", mat(q_dim, a.dim))
        w.add_tensor(blk + "attn_k.weight", mat(kv_dim, a.dim))
        w.add_tensor(blk + "attn_v.weight", mat(kv_dim, a.dim))
    if a.arch in ("qwen2", "qwen2moe"):
        for t, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
            w.add_tensor(blk + f"attn_{t}.bias", rng.uniform(-0.2, 0.2, size=n).astype(np.float32))
    if a.arch in ("qwen3", "gemma3", "qwen3moe"):
        w.add_tensor(blk + "attn_q_norm.weight", norm(head_dim))
        w.add_tensor(blk + "attn_k_norm.weight", norm(head_dim))
    w.add_tensor(blk + "attn_output.weight", mat(a.dim, q_dim))
    if gemma:
        # Larger post-norms, so the blocks' outputs outweigh the √dim-scaled tied embedding of the
        # input token (else the tied head's best token is the input token itself, every step).
        w.add_tensor(blk + "post_attention_norm.weight", norm(a.dim, a.post_norm_scale))
    w.add_tensor(blk + "ffn_norm.weight", norm(a.dim))
    if a.arch == "phi3":  # gate_up_proj: the gate rows, then the up rows
        w.add_tensor(blk + "ffn_up.weight", np.concatenate([mat(a.ffn, a.dim), mat(a.ffn, a.dim)]))
        w.add_tensor(blk + "ffn_down.weight", mat(a.dim, a.ffn))
    elif a.experts:
        # Router rows scaled up so that each token's top experts stand clear of the rest.
        w.add_tensor(blk + "ffn_gate_inp.weight", mat(a.experts, a.dim, a.router_scale).astype(np.float32))
        ex = lambda rows, cols: np.stack([mat(rows, cols) for _ in range(a.experts)])  # noqa: E731
        w.add_tensor(blk + "ffn_gate_exps.weight", ex(a.expert_ffn, a.dim))
        w.add_tensor(blk + "ffn_up_exps.weight", ex(a.expert_ffn, a.dim))
        w.add_tensor(blk + "ffn_down_exps.weight", ex(a.dim, a.expert_ffn))
        if a.shared_ffn:
            # The shared expert's gate is a vector (F32, as 1-D tensors stay); ±0.5 spreads sigmoid(w·x).
            w.add_tensor(blk + "ffn_gate_inp_shexp.weight", rng.uniform(-0.5, 0.5, size=a.dim).astype(np.float32))
            w.add_tensor(blk + "ffn_gate_shexp.weight", mat(a.shared_ffn, a.dim))
            w.add_tensor(blk + "ffn_up_shexp.weight", mat(a.shared_ffn, a.dim))
            w.add_tensor(blk + "ffn_down_shexp.weight", mat(a.dim, a.shared_ffn))
    else:
        w.add_tensor(blk + "ffn_gate.weight", mat(a.ffn, a.dim))
        w.add_tensor(blk + "ffn_up.weight", mat(a.ffn, a.dim))
        w.add_tensor(blk + "ffn_down.weight", mat(a.dim, a.ffn))
    if gemma:
        w.add_tensor(blk + "post_ffw_norm.weight", norm(a.dim, a.post_norm_scale))
if gemma:
    # Random signs on the final norm: with a tied head, the input token's own √dim-scaled
    # embedding would otherwise give that token the top logit at every step (a fixed point);
    # with the signs its self-product cancels out, and the greedy tokens follow the context.
    w.add_tensor("output_norm.weight", norm(a.dim) * rng.choice([-1.0, 1.0], size=a.dim).astype(np.float32))
else:
    w.add_tensor("output_norm.weight", norm(a.dim))
if not a.tied:
    w.add_tensor("output.weight", head(n_vocab, a.dim))

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
