#!/usr/bin/env python3
"""Writes tests/data/decode_step.json: a synthetic but realistic CUDA-graph decode step.

The model is a 32-layer Llama-style FP8 model as an inference engine captures it: per layer
19 nodes (RMSNorm, per-token FP8 quantization, CUTLASS FP8 GEMMs for the QKV, output,
gate/up and down projections, RoPE, KV-cache write, a contiguous copy of q, split-KV flash
attention and its combine, SiLU-and-mul, residual adds, a memset of split-K semaphores), with kernel arguments laid out
like CUTLASS, cuBLASLt and FlashAttention parameter blocks (pointers mixed with scalars, 48
to 256 bytes, 8-byte aligned). Three epochs tell the story DESIGN.md describes:

  capture       graph captured; derived tensors kept as plain attributes are unregistered
  after_sleep   sleep level 2 and wake: the weights pool and the KV cache were discarded
                (generation 1 -> 2); parameters are reloaded and buffers restored by the
                contract, the derived tensors and the RoPE cache in a module global are lost
  after_reload  an RL weight update rebinds layer 7's projection weights to new addresses
                (stale) and the sampler reallocates its workspace (dangling)

Every reference's verdict in each epoch is known by construction; the counts are written to
the top-level "expect" (last epoch) and "expect_epochs" (all epochs) keys, which the reader
ignores and tests/unit/data_test.cc compares with check().

Python 3 standard library only, deterministic: running it twice gives identical bytes.
Usage: scripts/make_decode_step.py [OUTPUT]   (default: tests/data/decode_step.json)
"""

import json
import os
import struct
import sys
from collections import Counter

NUM_LAYERS = 32
HIDDEN = 4096
INTERMEDIATE = 14336
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
QKV_OUT = (HEADS + 2 * KV_HEADS) * HEAD_DIM
VOCAB = 128256
BATCH = 8  # decode batch size the graph was captured for
BLOCK_SIZE, NUM_BLOCKS = 16, 2048
REBOUND_LAYER = 7  # the layer whose weights after_reload rebinds

EPOCHS = ["capture", "after_sleep", "after_reload"]
VERDICTS = ["registered", "runtime", "graph", "input", "allowed",
            "unregistered", "dangling", "stale", "lost"]
ALLOW = ["model.layers.*.mlp.quant_method.workspace",  # matches 32 workspaces: allowed
         "model.layers.*.self_attn.mla_attn.W_UV"]     # matches nothing: stale_allow

# Address ranges (plausible for a 64-bit CUDA process; all below 2^47).
WEIGHTS_BASE = 0x7F2000000000  # "weights" pool: parameters, buffers, derived tensors
RELOAD_BASE = 0x7F2800000000   # where after_reload puts the rebound tensors
KV_BASE = 0x7E4000000000       # "kv_cache" pool
GRAPH_BASE = 0x7F6000000000    # the graph's private pool
GRAPH_POOL_SIZE = 256 << 20
DEFAULT_BASE = 0x7FA000000000  # "default" pool: runner buffers, workspaces
ALIGN = 512


def align(value, to=ALIGN):
    return (value + to - 1) // to * to


class Memory:
    """Spans and allocations per epoch, plus each target's verdict per epoch."""

    def __init__(self):
        self.spans = {e: [] for e in EPOCHS}
        self.allocations = {e: [] for e in EPOCHS}
        self.cursor = {"weights": WEIGHTS_BASE, "kv_cache": KV_BASE, "default": DEFAULT_BASE,
                       "reload": RELOAD_BASE}
        self.ranges = []  # capture-epoch ranges, to prove no scalar word falls inside one

    def carve(self, pool, size):
        begin = self.cursor[pool]
        self.cursor[pool] = align(begin + size, 2 << 20 if pool == "kv_cache" else ALIGN)
        return begin

    def add(self, epochs, begin, size, pool, generation, kind=None, name=None, reason=None,
            label=None):
        for epoch in epochs:
            allocation = {"begin": hex(begin), "size": size, "pool": pool,
                          "generation": generation(epoch) if callable(generation) else generation}
            if label:
                allocation["label"] = label
            self.allocations[epoch].append(allocation)
            if kind:
                span = {"begin": hex(begin), "size": size, "kind": kind, "name": name}
                if reason:
                    span["reason"] = reason
                self.spans[epoch].append(span)
        if "capture" in epochs:
            self.ranges.append((begin, begin + size))


def weights_generation(epoch):
    return 1 if epoch == "capture" else 2  # sleep level 2 discarded the pool


class Target:
    """Something a pointer can point at, with its verdict in each epoch."""

    def __init__(self, begin, size, verdicts):
        self.begin, self.size, self.verdicts = begin, size, verdicts

    def at(self, offset=0):
        assert 0 <= offset < self.size
        return Ptr(self, self.begin + offset)


class Ptr:
    def __init__(self, target, address):
        self.target, self.address = target, address


def same(verdict):
    return {e: verdict for e in EPOCHS}


def build_memory():
    mem = Memory()
    t = {}

    def weight(name, size, kind="parameter", rebind=False):
        begin = mem.carve("weights", size)
        if rebind:
            mem.add(["capture", "after_sleep"], begin, size, "weights", weights_generation,
                    kind, name)
            moved = mem.carve("reload", size)
            mem.add(["after_reload"], moved, size, "weights", 1, kind, name)
            verdicts = {"capture": "registered", "after_sleep": "registered",
                        "after_reload": "stale"}
        else:
            mem.add(EPOCHS, begin, size, "weights", weights_generation, kind, name)
            verdicts = same("registered")
        t[name] = Target(begin, size, verdicts)

    def derived(name, size):  # a plain attribute in the weights pool: not restored by sleep
        begin = mem.carve("weights", size)
        mem.add(EPOCHS, begin, size, "weights", weights_generation, label=name)
        t[name] = Target(begin, size, {"capture": "unregistered", "after_sleep": "lost",
                                       "after_reload": "lost"})

    weight("model.embed_tokens.weight", VOCAB * HIDDEN * 2)
    derived("vllm.model_executor.layers.rotary_embedding._ROPE_DICT"
            "[(128, 128, 131072, 500000.0, True)].cos_sin_cache", 131072 * HEAD_DIM * 4)
    for i in range(NUM_LAYERS):
        p = f"model.layers.{i}."
        rebind = i == REBOUND_LAYER
        weight(p + "input_layernorm.weight", HIDDEN * 2)
        for proj, (n, k) in [("self_attn.qkv_proj", (QKV_OUT, HIDDEN)),
                             ("self_attn.o_proj", (HIDDEN, HEADS * HEAD_DIM)),
                             ("mlp.gate_up_proj", (2 * INTERMEDIATE, HIDDEN)),
                             ("mlp.down_proj", (HIDDEN, INTERMEDIATE))]:
            weight(p + proj + ".weight", n * k, rebind=rebind)  # FP8: one byte each
            weight(p + proj + ".weight_scale", n * 4, rebind=rebind)
        weight(p + "self_attn.qkv_proj.bias", QKV_OUT * 2)
        weight(p + "post_attention_layernorm.weight", HIDDEN * 2)
        weight(p + "self_attn.attn.k_scale", 4, kind="buffer")
        weight(p + "self_attn.attn.v_scale", 4, kind="buffer")
        derived(p + "mlp.gate_up_proj.gemm1_alpha", 4)
        kv_size = 2 * NUM_BLOCKS * BLOCK_SIZE * KV_HEADS * HEAD_DIM
        kv = mem.carve("kv_cache", kv_size)
        mem.add(EPOCHS, kv, kv_size, "kv_cache", weights_generation, "runtime",
                p + "self_attn.attn.kv_cache",
                "KV cache: paged key/value blocks, rewritten every step")
        t[p + "kv_cache"] = Target(kv, kv_size, same("runtime"))
        ws_size = 4 << 20
        ws = mem.carve("default", ws_size)
        mem.add(EPOCHS, ws, ws_size, "default", 1, label=p + "mlp.quant_method.workspace")
        t[p + "workspace"] = Target(ws, ws_size, same("allowed"))
    weight("model.norm.weight", HIDDEN * 2)
    weight("lm_head.weight", VOCAB * HIDDEN * 2)

    ws = mem.carve("default", 32 << 20)
    mem.add(EPOCHS, ws, 32 << 20, "default", 1, label="lm_head.quant_method.workspace")
    t["lm_head.workspace"] = Target(ws, 32 << 20, same("unregistered"))
    ws = mem.carve("default", 1 << 20)
    mem.add(["capture", "after_sleep"], ws, 1 << 20, "default", 1, label="sampler.topk_workspace")
    grown = mem.carve("default", 4 << 20)
    mem.add(["after_reload"], grown, 4 << 20, "default", 1, label="sampler.topk_workspace")
    t["sampler.workspace"] = Target(ws, 1 << 20, {"capture": "unregistered",
                                                  "after_sleep": "unregistered",
                                                  "after_reload": "dangling"})

    for name, size in [("input_ids", BATCH * 4), ("positions", BATCH * 8),
                       ("slot_mapping", BATCH * 8), ("block_table", BATCH * 512 * 4),
                       ("seq_lens", BATCH * 4), ("logits", BATCH * VOCAB * 4),
                       ("sampled_token_ids", BATCH * 8)]:
        begin = mem.carve("default", size)
        role = "static graph output" if name in ("logits", "sampled_token_ids") else \
            "static graph input, copied in before each replay"
        mem.add(EPOCHS, begin, size, "default", 1, "input", name, role)
        t[name] = Target(begin, size, same("input"))

    mem.add(EPOCHS, GRAPH_BASE, GRAPH_POOL_SIZE, "graph:1", 1)
    cursor = GRAPH_BASE
    for name, size in [("hidden", BATCH * HIDDEN * 2), ("residual", BATCH * HIDDEN * 2),
                       ("normed", BATCH * HIDDEN * 2), ("act_fp8", BATCH * INTERMEDIATE),
                       ("act_scale", BATCH * 4), ("qkv", BATCH * QKV_OUT * 2), ("q", BATCH * HEADS * HEAD_DIM * 2),
                       ("attn_out", BATCH * HIDDEN * 2), ("o_accum", 16 * BATCH * HIDDEN * 4),
                       ("lse_accum", 16 * BATCH * HEADS * 4), ("gate_up", BATCH * 2 * INTERMEDIATE * 2),
                       ("mlp_act", BATCH * INTERMEDIATE * 2), ("semaphores", 4096),
                       ("argmax", BATCH * 8)]:
        t["g." + name] = Target(cursor, size, same("graph"))
        cursor = align(cursor + size, 1 << 16)
    assert cursor < GRAPH_BASE + GRAPH_POOL_SIZE
    return mem, t


# ---- argument encoding -------------------------------------------------------------------
def ptr(p):
    return ("ptr", p)


def i32x2(a, b=0):
    return ("raw", struct.pack("<ii", a, b))


def f32x2(a, b=0.0):
    return ("raw", struct.pack("<ff", a, b))


def f32i32(a, b):
    return ("raw", struct.pack("<fi", a, b))


def i64(a):
    return ("raw", struct.pack("<q", a))


def zeros(words):
    return [("raw", bytes(8))] * words


class Graph:
    def __init__(self, ranges):
        self.nodes, self.references, self.ranges = [], [], ranges

    def _check_scalar(self, data, where):
        for off in range(0, len(data) - 7, 8):
            (word,) = struct.unpack_from("<Q", data, off)
            assert not any(lo <= word < hi for lo, hi in self.ranges), (where, hex(word))

    def kernel(self, name, *args):
        params, offset = [], 0
        for arg in args:
            words = arg if isinstance(arg, list) else [arg]
            data = b""
            for kind, value in words:
                if kind == "ptr":
                    self.references.append(value.target)
                    data += struct.pack("<Q", value.address)
                else:
                    self._check_scalar(value, name)
                    data += value
            size = len(data)
            offset = align(offset, 8 if size >= 8 else size)
            params.append({"offset": offset, "size": size, "hex": data.hex()})
            offset += size
        assert offset <= 4096 and all(p["size"] <= 256 for p in params)
        self.nodes.append({"id": len(self.nodes), "type": "kernel", "name": name,
                           "params": params})

    def memset(self, dst, size):
        self.references.append(dst.target)
        self.nodes.append({"id": len(self.nodes), "type": "memset", "dst": hex(dst.address),
                           "size": size})

    def memcpy(self, dst, src, size):
        self.references += [src.target, dst.target]
        self.nodes.append({"id": len(self.nodes), "type": "memcpy", "src": hex(src.address),
                           "dst": hex(dst.address), "size": size})


# Kernel names as they appear in nsys traces of vLLM FP8 models (shortened templates).
K_EMBED = ("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, "
           "unsigned int, 2, 2, -2>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
           "at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, "
           "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, long)")
K_NORM = "void vllm::rms_norm_kernel<c10::BFloat16, 8>"
K_QUANT = "void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>"
K_GEMM = ("void cutlass::device_kernel<vllm::cutlass_3x_gemm<cutlass::float_e4m3_t, "
          "cutlass::bfloat16_t, vllm::c3x::ScaledEpilogue, Shape<_64, _128, _128>, "
          "KernelTmaWarpSpecializedPingpongFP8FastAccum>::GemmKernel>")
K_ROPE = "void vllm::rotary_embedding_kernel<c10::BFloat16, true>"
K_CACHE = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, 0>"
K_ATTN = ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
          "false, cutlass::bfloat16_t>, false, false, false, false, true, true, false, false>")
K_COMBINE = ("void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128,"
             " 4, false, false, cutlass::bfloat16_t>, 4, 4, false>")
K_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>,"
         " at::detail::Array<char*, 3> >")
K_COPY = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
          "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()"
          "() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}> >")
K_ACT = "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>"
K_LM_HEAD = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
             "execute_segment_k_off_kernel__5x_cublas")
K_SAMPLE = "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024, 4, 1, float, int>"


def tensor_info(p, sizes, strides):
    """at::cuda::detail::TensorInfo<T, unsigned int>: data, sizes[25], strides[25], dims: 216 B."""
    s = list(sizes) + [0] * (25 - len(sizes))
    st = list(strides) + [0] * (25 - len(strides))
    raw = struct.pack("<25I", *s) + struct.pack("<25I", *st) + struct.pack("<i", len(sizes))
    raw += bytes(align(len(raw), 8) - len(raw))
    return [ptr(p), ("raw", raw)]


def cutlass_gemm(g, a, a_scale, b, b_scale, d, m, n, k, alpha=None, bias=None, workspace=None):
    """A 256-byte CUTLASS 3.x GemmKernel::Params block."""
    block = [i32x2(m, n), i32x2(k, 1), ptr(a), i64(k), ptr(b), i64(k)]
    block += [ptr(bias) if bias else i64(0), i64(0), ptr(d), i64(n)]
    block += [ptr(a_scale), ptr(b_scale), ptr(alpha) if alpha else i64(0), f32x2(1.0, 0.0)]
    block += [ptr(workspace) if workspace else i64(0), i32x2(132, 1), i32x2(1, 8)]
    block += [("raw", struct.pack("<II", 0xAAAAAAAB, 33)), i32x2(2, 1)] + zeros(13)
    g.kernel(K_GEMM, block)


def flash_params(t, layer, q):
    """A 256-byte Flash_fwd_params prefix (pointers, 64-bit strides, shapes, softmax scale)."""
    kv = t[f"model.layers.{layer}.kv_cache"]
    half = kv.size // 2
    return [ptr(q), ptr(kv.at(0)), ptr(kv.at(half)), ptr(t["g.attn_out"].at(0)),
            i64(QKV_OUT), i64(KV_HEADS * HEAD_DIM), i64(KV_HEADS * HEAD_DIM), i64(HIDDEN),
            i32x2(HEADS, KV_HEADS), i32x2(HEADS // KV_HEADS, BATCH),
            i32x2(1, 8192), i32x2(HEAD_DIM, HEAD_DIM), f32i32(HEAD_DIM ** -0.5, 0),
            ptr(t["g.lse_accum"].at(0)), ptr(t["g.o_accum"].at(0)),
            ptr(t["block_table"].at(0)), i32x2(512, BLOCK_SIZE), ptr(t["seq_lens"].at(0)),
            i32x2(16, 0), f32x2(0.0, 1.0), i64(0), i64(0)] + zeros(10)


def build_graph(mem, t):
    g = Graph(mem.ranges)
    g.kernel(K_EMBED, tensor_info(t["g.hidden"].at(0), [BATCH, HIDDEN], [HIDDEN, 1]),
             tensor_info(t["model.embed_tokens.weight"].at(0), [VOCAB, HIDDEN], [HIDDEN, 1]),
             tensor_info(t["input_ids"].at(0), [BATCH], [1]),
             i32x2(1, 0), i32x2(BATCH * HIDDEN, 0), i64(VOCAB))
    rope = t["vllm.model_executor.layers.rotary_embedding._ROPE_DICT"
             "[(128, 128, 131072, 500000.0, True)].cos_sin_cache"]
    for i in range(NUM_LAYERS):
        p = f"model.layers.{i}."

        def quant(src):
            # (out, input, scales, scale_ub = nullptr, fp8 max, hidden size, tokens)
            g.kernel(K_QUANT, ptr(t["g.act_fp8"].at(0)), ptr(src), ptr(t["g.act_scale"].at(0)),
                     i64(0), f32i32(448.0, HIDDEN), i32x2(BATCH, 0))

        def residual_add():  # residual += hidden: (N, functor{alpha}, Array<char*, 3>)
            g.kernel(K_ADD, ("raw", struct.pack("<i", BATCH * HIDDEN)),
                     ("raw", struct.pack("<f", 1.0)),
                     [ptr(t["g.residual"].at(0)), ptr(t["g.residual"].at(0)),
                      ptr(t["g.hidden"].at(0))])

        g.kernel(K_NORM, ptr(t["g.normed"].at(0)),
                 ptr(t["g.hidden" if i == 0 else "g.residual"].at(0)),
                 ptr(t[p + "input_layernorm.weight"].at(0)), f32i32(1e-5, BATCH),
                 i32x2(HIDDEN, 0))
        quant(t["g.normed"].at(0))
        cutlass_gemm(g, t["g.act_fp8"].at(0), t["g.act_scale"].at(0),
                     t[p + "self_attn.qkv_proj.weight"].at(0),
                     t[p + "self_attn.qkv_proj.weight_scale"].at(0), t["g.qkv"].at(0),
                     BATCH, QKV_OUT, HIDDEN, bias=t[p + "self_attn.qkv_proj.bias"].at(0))
        g.kernel(K_ROPE, ptr(t["positions"].at(0)), ptr(t["g.qkv"].at(0)),
                 ptr(t["g.qkv"].at(BATCH * HEADS * HEAD_DIM * 2)), ptr(rope.at(0)),
                 i32x2(HEAD_DIM, 0), i64(QKV_OUT), i64(QKV_OUT), i32x2(HEADS, KV_HEADS),
                 i32x2(HEAD_DIM, 0))
        kv = t[p + "kv_cache"]
        g.kernel(K_CACHE, [ptr(t["g.qkv"].at(BATCH * HEADS * HEAD_DIM * 2)),
                           ptr(t["g.qkv"].at(BATCH * (HEADS + KV_HEADS) * HEAD_DIM * 2)),
                           ptr(kv.at(0)), ptr(kv.at(kv.size // 2)),
                           ptr(t["slot_mapping"].at(0)), i64(QKV_OUT), i64(QKV_OUT),
                           i32x2(KV_HEADS, HEAD_DIM), i32x2(BLOCK_SIZE, 0),
                           ptr(t[p + "self_attn.attn.k_scale"].at(0)),
                           ptr(t[p + "self_attn.attn.v_scale"].at(0))])
        g.memset(t["g.semaphores"].at(0), 4096)
        # q.contiguous(): an OffsetCalculator-style block (two pointers, sizes, strides).
        g.kernel(K_COPY, ("raw", struct.pack("<i", BATCH * HEADS * HEAD_DIM)),
                 [ptr(t["g.q"].at(0)), ptr(t["g.qkv"].at(0)), i32x2(2, HEADS * HEAD_DIM),
                  i32x2(BATCH, 0), i32x2(2, QKV_OUT * 2), i32x2(2, HEADS * HEAD_DIM * 2)]
                 + zeros(3))
        g.kernel(K_ATTN, flash_params(t, i, t["g.q"].at(0)))
        g.kernel(K_COMBINE, [ptr(t["g.attn_out"].at(0)), ptr(t["g.o_accum"].at(0)),
                             ptr(t["g.lse_accum"].at(0)), i32x2(16, BATCH),
                             i32x2(HEADS, HEAD_DIM), i64(HIDDEN)])
        quant(t["g.attn_out"].at(0))
        cutlass_gemm(g, t["g.act_fp8"].at(0), t["g.act_scale"].at(0),
                     t[p + "self_attn.o_proj.weight"].at(0),
                     t[p + "self_attn.o_proj.weight_scale"].at(0), t["g.hidden"].at(0),
                     BATCH, HIDDEN, HEADS * HEAD_DIM)
        residual_add()
        g.kernel(K_NORM, ptr(t["g.normed"].at(0)), ptr(t["g.residual"].at(0)),
                 ptr(t[p + "post_attention_layernorm.weight"].at(0)), f32i32(1e-5, BATCH),
                 i32x2(HIDDEN, 0))
        quant(t["g.normed"].at(0))
        cutlass_gemm(g, t["g.act_fp8"].at(0), t["g.act_scale"].at(0),
                     t[p + "mlp.gate_up_proj.weight"].at(0),
                     t[p + "mlp.gate_up_proj.weight_scale"].at(0), t["g.gate_up"].at(0),
                     BATCH, 2 * INTERMEDIATE, HIDDEN, alpha=t[p + "mlp.gate_up_proj.gemm1_alpha"].at(0),
                     workspace=t[p + "workspace"].at(0))
        g.kernel(K_ACT, ptr(t["g.mlp_act"].at(0)), ptr(t["g.gate_up"].at(0)),
                 i32x2(INTERMEDIATE, 0))
        quant(t["g.mlp_act"].at(0))
        cutlass_gemm(g, t["g.act_fp8"].at(0), t["g.act_scale"].at(0),
                     t[p + "mlp.down_proj.weight"].at(0),
                     t[p + "mlp.down_proj.weight_scale"].at(0), t["g.hidden"].at(0),
                     BATCH, HIDDEN, INTERMEDIATE, workspace=t[p + "workspace"].at(1 << 20))
        residual_add()
    g.kernel(K_NORM, ptr(t["g.normed"].at(0)), ptr(t["g.residual"].at(0)),
             ptr(t["model.norm.weight"].at(0)), f32i32(1e-5, BATCH), i32x2(HIDDEN, 0))
    g.kernel(K_LM_HEAD, [ptr(t["lm_head.weight"].at(0)), ptr(t["g.normed"].at(0)),
                         ptr(t["logits"].at(0)), ptr(t["logits"].at(0)), f32x2(1.0, 0.0),
                         i32x2(HIDDEN, HIDDEN), i32x2(VOCAB, 0), i32x2(VOCAB, BATCH),
                         i32x2(HIDDEN, 1), ptr(t["lm_head.workspace"].at(0)), i64(32 << 20),
                         i32x2(1, 0), i32x2(0, 132)] + zeros(11))
    g.kernel(K_SAMPLE, ptr(t["logits"].at(0)), ptr(t["g.argmax"].at(0)),
             ptr(t["sampler.workspace"].at(0)), i32x2(VOCAB, 50), f32i32(0.9, 0),
             i64(0x5EED))
    g.memcpy(t["sampled_token_ids"].at(0), t["g.argmax"].at(0), BATCH * 8)
    return g


def expectation(references, epoch):
    counts = Counter(target.verdicts[epoch] for target in references)
    summary = {"graphs": 1, "references": len(references)}
    summary.update({v: counts.get(v, 0) for v in VERDICTS})
    return {"epoch": epoch, "summary": summary, "stale_allow": ALLOW[1:]}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data",
                                                               "decode_step.json")
    mem, targets = build_memory()
    graph = build_graph(mem, targets)
    doc = {
        "format": "graphcheck-snapshot", "version": 1,
        "producer": {"backend": "synthetic", "tool": "scripts/make_decode_step.py"},
        "description": (f"Synthetic decode step of a {NUM_LAYERS}-layer Llama-style FP8 model "
                        f"(batch {BATCH}): capture, after_sleep (level 2), after_reload "
                        f"(layer {REBOUND_LAYER} rebound). See tests/data/README.md."),
        "epochs": [{"label": e, "spans": mem.spans[e], "allocations": mem.allocations[e]}
                   for e in EPOCHS],
        "graphs": [{"id": 1, "epoch": "capture", "nodes": graph.nodes}],
        "allow": ALLOW,
        "expect": expectation(graph.references, EPOCHS[-1]),
        "expect_epochs": [expectation(graph.references, e) for e in EPOCHS],
    }
    # One node, span or allocation per line: small enough for review, diffable by line.
    text = json.dumps(doc, separators=(",", ":"))
    for key in ('{"id":', '{"begin":', '{"label":', '{"epoch":'):
        text = text.replace(key, "\n" + key)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    s = doc["expect"]["summary"]
    print(f"{out}: {len(graph.nodes)} nodes, {len(graph.references)} references, "
          f"{len(text) // 1024} KiB; {EPOCHS[-1]}: " +
          ", ".join(f"{v} {s[v]}" for v in VERDICTS))


if __name__ == "__main__":
    main()
