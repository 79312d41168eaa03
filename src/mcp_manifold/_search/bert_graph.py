"""A BERT encoder's weights (`model.safetensors` + `config.json`) as an ONNX graph for ONNX Runtime.

The bundled all-MiniLM-L6-v2 ships as safetensors only, and the usual exporters (torch.onnx, optimum)
need torch, which is what the light runtime is there to avoid. The graph is BERT's published
architecture, node for node: embeddings and LayerNorm, then per layer self-attention, residual and
LayerNorm, GELU feed-forward, residual and LayerNorm. It outputs the last hidden state; pooling happens
in `local_embedder`. Built in memory when a model is first loaded (about a second); nothing is written.

Only single-segment inputs are embedded here, so the token-type embedding is row 0 for every token and
is folded into the graph as a constant.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17  # LayerNormalization is a standard op from 17 on; ONNX Runtime 1.17+ runs it
WEIGHTS = "model.safetensors"


class UnsupportedModel(ValueError):
    """The folder holds something this builder does not know how to turn into a graph."""


def bert_onnx_model(folder: Path) -> bytes:
    """The serialized ONNX model of the BERT encoder in `folder` (inputs input_ids and attention_mask, int64)."""
    import onnx  # only needed while building: ONNX Runtime runs the result
    from safetensors.numpy import load_file

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert":
        raise UnsupportedModel(f"model_type {config.get('model_type')!r} is not 'bert'")
    if config.get("position_embedding_type", "absolute") != "absolute" or config.get("hidden_act", "gelu") != "gelu":
        raise UnsupportedModel("only absolute positions and the exact GELU are supported")
    weights_file = folder / WEIGHTS
    if not weights_file.is_file():
        raise UnsupportedModel(f"no {WEIGHTS}")
    raw = load_file(str(weights_file))
    # Saved from BertModel the names start with "embeddings."; from a task model, with "bert.".
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in raw else ""
    builder = _Graph(raw, prefix)
    output = builder.encoder(
        layers=int(config["num_hidden_layers"]),
        heads=int(config["num_attention_heads"]),
        hidden=int(config["hidden_size"]),
        eps=float(config.get("layer_norm_eps", 1e-12)),
    )
    graph = onnx.helper.make_graph(
        builder.nodes,
        "bert_encoder",
        [
            onnx.helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, ["batch", "sequence"]),
            onnx.helper.make_tensor_value_info("attention_mask", onnx.TensorProto.INT64, ["batch", "sequence"]),
        ],
        [onnx.helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, ["batch", "sequence", "hidden"])],
        builder.initializers,
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # the IR of opset 17, which every ONNX Runtime since 1.14 reads
    return model.SerializeToString()


class _Graph:
    """Collects nodes and initializers; each method adds one step and returns its output's name."""

    def __init__(self, weights: dict[str, np.ndarray], prefix: str) -> None:
        self.weights = weights
        self.prefix = prefix
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, name: str, *, transpose: bool = False) -> str:
        tensor = self.weights.get(self.prefix + name)
        if tensor is None:
            raise UnsupportedModel(f"weight {self.prefix + name} is missing")
        # torch's Linear stores (out, in); MatMul wants (in, out).
        return self.const(name, tensor.astype(np.float32).T if transpose else tensor.astype(np.float32))

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        from onnx import helper

        self._count += 1
        out = f"{kind.lower()}_{self._count}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attributes))
        return out

    def linear(self, x: str, name: str) -> str:
        return self.op(
            "Add", self.op("MatMul", x, self.weight(f"{name}.weight", transpose=True)), self.weight(f"{name}.bias")
        )

    def layer_norm(self, x: str, name: str, eps: float) -> str:
        return self.op(
            "LayerNormalization", x, self.weight(f"{name}.weight"), self.weight(f"{name}.bias"), axis=-1, epsilon=eps
        )

    def heads(self, x: str, name: str, split: str, perm: list[int]) -> str:
        """A projection split into attention heads: (batch, heads, sequence, head_dim), permuted by `perm`."""
        return self.op("Transpose", self.op("Reshape", self.linear(x, name), split), perm=perm)

    def encoder(self, *, layers: int, heads: int, hidden: int, eps: float) -> str:
        head_dim = hidden // heads
        # Embeddings: word + position + token type 0.
        words = self.op("Gather", self.weight("embeddings.word_embeddings.weight"), "input_ids")
        # Position ids 0..n-1 on every row, as a running count of ones (no shape arithmetic needed).
        int_one = self.const("int_one", np.array(1, dtype=np.int64))
        ones = self.op("Add", self.op("Mul", "input_ids", self.const("int_zero", np.array(0, dtype=np.int64))), int_one)
        counted = self.op("CumSum", ones, self.const("sequence_axis", np.array(1, dtype=np.int64)))
        positions = self.op("Sub", counted, int_one)
        position_vectors = self.op("Gather", self.weight("embeddings.position_embeddings.weight"), positions)
        type_row = self.weights[self.prefix + "embeddings.token_type_embeddings.weight"][0].astype(np.float32)
        summed = self.op("Add", self.op("Add", words, position_vectors), self.const("token_type_0", type_row))
        x = self.layer_norm(summed, "embeddings.LayerNorm", eps)
        # Padding: a large negative score before softmax, shaped (batch, 1, 1, sequence).
        mask = self.op("Cast", "attention_mask", to=1)  # 1 = FLOAT
        one = self.const("one", np.array(1.0, np.float32))
        blocked = self.op("Mul", self.op("Sub", one, mask), self.const("neg", np.array(-1e4, np.float32)))
        mask_bias = self.op("Unsqueeze", blocked, self.const("mask_axes", np.array([1, 2], dtype=np.int64)))
        split_heads = self.const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
        merge_heads = self.const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
        scale = self.const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
        half, root2 = (
            self.const("half", np.array(0.5, np.float32)),
            self.const("root2", np.array(math.sqrt(2), np.float32)),
        )
        for i in range(layers):
            layer = f"encoder.layer.{i}"

            q = self.heads(x, f"{layer}.attention.self.query", split_heads, [0, 2, 1, 3])
            k = self.heads(x, f"{layer}.attention.self.key", split_heads, [0, 2, 3, 1])  # transposed for q·kᵀ
            v = self.heads(x, f"{layer}.attention.self.value", split_heads, [0, 2, 1, 3])
            scores = self.op("Add", self.op("Mul", self.op("MatMul", q, k), scale), mask_bias)
            context = self.op("MatMul", self.op("Softmax", scores, axis=-1), v)
            context = self.op("Reshape", self.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
            attended = self.linear(context, f"{layer}.attention.output.dense")
            x = self.layer_norm(self.op("Add", attended, x), f"{layer}.attention.output.LayerNorm", eps)
            inner = self.linear(x, f"{layer}.intermediate.dense")
            # GELU, exact: 0.5·x·(1 + erf(x/√2)); ONNX Runtime fuses this pattern into one kernel.
            erf = self.op("Erf", self.op("Div", inner, root2))
            gelu = self.op("Mul", self.op("Mul", inner, half), self.op("Add", erf, one))
            out = self.linear(gelu, f"{layer}.output.dense")
            x = self.layer_norm(self.op("Add", out, x), f"{layer}.output.LayerNorm", eps)
        return x
