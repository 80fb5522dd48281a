"""Transformer pieces in the style of picoGPT (gpt2.py) and the attention tutorials."""

import numpy as np

from tests.realistic.registry import labels, normal, program


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + eps)
    return g * x + b


def linear(x, w, b):
    return x @ w + b


def ffn(x, c_fc, c_proj):
    a = gelu(linear(x, c_fc["w"], c_fc["b"]))
    return linear(a, c_proj["w"], c_proj["b"])


def attention(q, k, v, mask):
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):
    x = linear(x, c_attn["w"], c_attn["b"])
    qkv = np.split(x, 3, axis=-1)
    qkv_heads = list(map(lambda x: np.split(x, n_head, axis=-1), qkv))  # noqa: C417
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]
    x = np.hstack(out_heads)
    return linear(x, c_proj["w"], c_proj["b"])


def _block_params(rng, d):
    def lin(m, n):
        return {"w": normal(rng, m, n, scale=0.2), "b": normal(rng, n, scale=0.05)}

    return {
        "mlp": {"c_fc": lin(d, 4 * d), "c_proj": lin(4 * d, d)},
        "attn": {"c_attn": lin(d, 3 * d), "c_proj": lin(d, d)},
        "ln_1": {"g": np.ones(d), "b": np.zeros(d)},
        "ln_2": {"g": np.ones(d), "b": np.zeros(d)},
    }


def _block(rng):
    return _block_params(rng, 8), normal(rng, 5, 8)


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    x = x + ffn(layer_norm(x, **ln_2), **mlp)
    return x


@program(_block)
def picogpt_block_as_published(params, x):
    return np.sum(transformer_block(x, **params, n_head=2) ** 2)


def mha_explicit(x, c_attn, c_proj, n_head):
    h = linear(x, c_attn["w"], c_attn["b"])
    q, k, v = np.split(h, 3, axis=-1)
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10
    heads = []
    for qh, kh, vh in zip(
        np.split(q, n_head, axis=-1),
        np.split(k, n_head, axis=-1),
        np.split(v, n_head, axis=-1),
    ):
        heads.append(attention(qh, kh, vh, causal_mask))
    return linear(np.hstack(heads), c_proj["w"], c_proj["b"])


@program(_block)
def transformer_block_explicit_args(params, x):
    ln_1, ln_2 = params["ln_1"], params["ln_2"]
    x = x + mha_explicit(
        layer_norm(x, ln_1["g"], ln_1["b"]),
        params["attn"]["c_attn"],
        params["attn"]["c_proj"],
        2,
    )
    x = x + ffn(
        layer_norm(x, ln_2["g"], ln_2["b"]),
        params["mlp"]["c_fc"],
        params["mlp"]["c_proj"],
    )
    return np.sum(x**2)


def _gpt(rng):
    vocab, ctx, d = 11, 6, 8
    params = {
        "wte": normal(rng, vocab, d, scale=0.3),
        "wpe": normal(rng, ctx, d, scale=0.1),
        "blocks": [_block_params(rng, d)],
        "ln_f": {"g": np.ones(d), "b": np.zeros(d)},
    }
    return params, labels(rng, 5, vocab), labels(rng, 5, vocab)


@program(_gpt)
def tiny_gpt_next_token_loss(params, inputs, targets):
    x = params["wte"][inputs] + params["wpe"][np.arange(len(inputs))]
    for block in params["blocks"]:
        ln_1, ln_2 = block["ln_1"], block["ln_2"]
        x = x + mha_explicit(
            layer_norm(x, ln_1["g"], ln_1["b"]),
            block["attn"]["c_attn"],
            block["attn"]["c_proj"],
            2,
        )
        x = x + ffn(
            layer_norm(x, ln_2["g"], ln_2["b"]),
            block["mlp"]["c_fc"],
            block["mlp"]["c_proj"],
        )
    x = layer_norm(x, params["ln_f"]["g"], params["ln_f"]["b"])
    logits = x @ params["wte"].T
    logp = (
        logits
        - np.log(
            np.sum(np.exp(logits - logits.max(-1, keepdims=True)), -1, keepdims=True)
        )
        - logits.max(-1, keepdims=True)
    )
    return -np.mean(logp[np.arange(len(targets)), targets])


def _attn(rng):
    return normal(rng, 4, 6), normal(rng, 7, 6), normal(rng, 7, 3)


@program(_attn, argnums=(0, 1, 2))
def scaled_dot_product_attention(q, k, v):
    scores = q @ k.T / np.sqrt(k.shape[1])
    weights = softmax(scores)
    return np.sum(np.tanh(weights @ v))


def _mh(rng):
    B, T, D, H = 2, 4, 6, 2
    return (
        normal(rng, D, 3 * D, scale=0.3),
        normal(rng, D, D, scale=0.3),
        normal(rng, B, T, D),
        H,
    )


@program(_mh, argnums=(0, 1))
def batched_multihead_attention_reshape(w_qkv, w_out, x, n_head):
    B, T, D = x.shape
    qkv = x @ w_qkv
    q, k, v = qkv[..., :D], qkv[..., D : 2 * D], qkv[..., 2 * D :]
    q = q.reshape(B, T, n_head, D // n_head).transpose(0, 2, 1, 3)
    k = k.reshape(B, T, n_head, D // n_head).transpose(0, 2, 1, 3)
    v = v.reshape(B, T, n_head, D // n_head).transpose(0, 2, 1, 3)
    att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // n_head)
    att = np.where(np.tril(np.ones((T, T))) == 0, -np.inf, att)
    att = softmax(att)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    return np.mean((y @ w_out) ** 2)


def _ffn(rng):
    return (
        normal(rng, 6, 12, scale=0.3),
        normal(rng, 12, 6, scale=0.3),
        normal(rng, 5, 6),
    )


@program(_ffn, argnums=(0, 1, 2))
def gelu_feed_forward_residual(w1, w2, x):
    h = x + gelu(x @ w1) @ w2
    return np.sum(layer_norm(h, 1.0, 0.0) * np.arange(h.shape[1]))


def _rope(rng):
    return normal(rng, 6, 4), normal(rng, 6, 4)


@program(_rope, argnums=(0, 1))
def rotary_embedding_scores(q, k):
    T, D = q.shape
    pos = np.arange(T)[:, None]
    freqs = 1.0 / 10000 ** (np.arange(0, D, 2) / D)
    angles = pos * freqs[None, :]
    cos, sin = np.cos(angles), np.sin(angles)

    def rotate(x):
        x1, x2 = x[:, 0::2], x[:, 1::2]
        return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=1)

    return np.sum(softmax(rotate(q) @ rotate(k).T) ** 2)
