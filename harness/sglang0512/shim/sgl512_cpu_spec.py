"""STAND-INS, not SGLang's code: CPU patches that let SGLang 0.5.12's EAGLE workers run
on a CPU (page_size=1, topk=1). Whatever runs under them is a *patched* 0.5.12: the
attention backend, the draft decode backend, the spec Triton kernels and tree build /
greedy verify are replaced; the eagle workers' own control flow (what spectrace wraps) is
SGLang's. Copied from the shared 0.5.12 CPU recipe for tests/test_v1_sglang0512.py.

0.5.12 has no CPU path for EAGLE: its DraftBackendFactory has no CPU backend, the
spec bookkeeping uses Triton kernels, and tree build / greedy verify call CUDA-only
sgl_kernel ops (verify_tree_greedy_func is a silent no-op on CPU). This module replaces
those pieces with pure-torch code. Installed in every process (scheduler included) by
sitecustomize.py through wrapt post-import hooks.
"""
import sys

import torch


def _log(msg):
    print(f"[sgl512-cpu-spec] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Triton kernels -> torch.  `kernel[grid](*args)` keeps working.
# ---------------------------------------------------------------------------
class _Launch:
    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__

    def __getitem__(self, grid):
        n = grid[0] if isinstance(grid, tuple) else grid
        return lambda *a, **k: self.fn(n, *a, **k)


def _assign_req_to_token_pool(n, req_pool_indices, req_to_token, start_offset, end_offset,
                              out_cache_loc, pool_len, bs_upper):
    off = 0
    for r, s, e in zip(req_pool_indices[:n].tolist(), start_offset[:n].tolist(), end_offset[:n].tolist()):
        req_to_token[r, s:e] = out_cache_loc[off:off + e - s].to(req_to_token.dtype)
        off += e - s


def _create_extend_after_decode_spec_info(n, accept_tokens, seq_lens, accept_lens, positions,
                                          bonus_tokens, bs_upper):
    cum = 0
    for pid, (sl, al) in enumerate(zip(seq_lens[:n].tolist(), accept_lens[:n].tolist())):
        positions[cum:cum + al] = torch.arange(sl - al, sl, dtype=positions.dtype)
        bonus_tokens[pid] = accept_tokens[cum + al - 1]
        cum += al


def _assign_draft_cache_locs(n, req_pool_indices, req_to_token, seq_lens, extend_lens,
                             num_new_pages_per_topk, out_cache_loc, source_cache_loc,
                             target_cache_loc, last_page_lens_cumsum, duplicate_cache_len,
                             pool_len, topk, speculative_num_steps, page_size, bs_upper, iter_upper):
    assert page_size == 1 or topk == 1, "CPU patch: only page_size == 1 or topk == 1"
    m = topk * speculative_num_steps
    for pid, (r, s) in enumerate(zip(req_pool_indices[:n].tolist(), seq_lens[:n].tolist())):
        req_to_token[r, s:s + m] = out_cache_loc[pid * m:(pid + 1) * m].to(req_to_token.dtype)


def _copy_all_layer_kv_cache_tiled(n, data_ptrs, strides, tgt_loc, src_loc, num_locs, upper, **kw):
    import sgl_kernel
    sgl_kernel.copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc[:num_locs], src_loc[:num_locs])


# --- v2 (EAGLEWorkerV2 / eagle_info_v2) kernels ---
def _assign_draft_cache_locs_page_size_1(n, req_pool_indices, req_to_token, seq_lens, out_cache_loc,
                                         pool_len, topk, speculative_num_steps):
    m = topk * speculative_num_steps
    for pid, (r, s) in enumerate(zip(req_pool_indices[:n].tolist(), seq_lens[:n].tolist())):
        out_cache_loc[pid * m:(pid + 1) * m] = req_to_token[r, s:s + m].to(out_cache_loc.dtype)


def _fill_bonus_tokens(n, accept_tokens, accept_lens, bonus_tokens, num_draft_tokens):
    flat = accept_tokens.reshape(-1)
    for pid, al in enumerate(accept_lens[:n].tolist()):
        bonus_tokens[pid] = flat[num_draft_tokens * pid + al - 1]


def _fill_accepted_out_cache_loc(n, accept_index, out_cache_loc, accepted_out_cache_loc, size_upper):
    ai = accept_index.reshape(-1)[:n]
    keep = ai[ai > -1].long()
    accepted_out_cache_loc[:keep.numel()] = out_cache_loc[keep]


def _assign_extend_cache_locs(n, req_pool_indices, req_to_token, start_offset, end_offset,
                              out_cache_loc, pool_len, bs_upper):
    off = 0
    for r, s, e in zip(req_pool_indices[:n].tolist(), start_offset[:n].tolist(), end_offset[:n].tolist()):
        out_cache_loc[off:off + e - s] = req_to_token[r, s:e].to(out_cache_loc.dtype)
        off += e - s


TRITON = {
    "assign_draft_cache_locs_page_size_1": _Launch(_assign_draft_cache_locs_page_size_1),
    "fill_bonus_tokens": _Launch(_fill_bonus_tokens),
    "fill_accepted_out_cache_loc": _Launch(_fill_accepted_out_cache_loc),
    "assign_extend_cache_locs": _Launch(_assign_extend_cache_locs),
    "copy_all_layer_kv_cache_tiled": _Launch(_copy_all_layer_kv_cache_tiled),
    "assign_req_to_token_pool": _Launch(_assign_req_to_token_pool),
    "create_extend_after_decode_spec_info": _Launch(_create_extend_after_decode_spec_info),
    "assign_draft_cache_locs": _Launch(_assign_draft_cache_locs),
}


def patch_triton_names(mod):
    for name, launch in TRITON.items():
        if name in vars(mod):
            setattr(mod, name, launch)
            _log(f"{mod.__name__}.{name} -> torch")


# ---------------------------------------------------------------------------
# A pure-torch attention backend that knows EXTEND, DRAFT_EXTEND, TARGET_VERIFY (tree
# mask from spec_info.custom_mask) and DECODE (with a per-step seq_len offset for the
# multi-step draft).
# ---------------------------------------------------------------------------
def make_backend_classes():
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

    def _attend(q, k, v, scaling, mask):
        # q [T,H,D] k,v [S,Hkv,D]; mask [T,S] bool keep
        H, Hkv = q.shape[1], k.shape[1]
        if Hkv != H:
            k = k.repeat_interleave(H // Hkv, dim=1)
            v = v.repeat_interleave(H // Hkv, dim=1)
        s = torch.einsum("thd,shd->hts", q.float(), k.float()) * scaling
        s = s.masked_fill(~mask.unsqueeze(0), float("-inf"))
        return torch.einsum("hts,shd->thd", torch.softmax(s, -1), v.float())

    class CpuSpecAttnBackend(TorchNativeAttnBackend):
        def __init__(self, model_runner, seq_len_offset=0):
            super().__init__(model_runner)
            self.seq_len_offset = seq_len_offset

        def init_forward_metadata(self, forward_batch):
            pass

        def _kv(self, layer, fb, r, n):
            idx = fb.req_to_token_pool.req_to_token[r, :n].long()
            return (fb.token_to_kv_pool.get_key_buffer(layer.layer_id)[idx],
                    fb.token_to_kv_pool.get_value_buffer(layer.layer_id)[idx])

        def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kw):
            fb = forward_batch
            if save_kv_cache and k is not None:
                fb.token_to_kv_pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)
            H, D, Dv = layer.tp_q_head_num, layer.qk_head_dim, layer.v_head_dim
            q = q.reshape(-1, H, D)
            o = q.new_empty((q.shape[0], H, Dv))
            seq_lens = fb.seq_lens.tolist()
            rids = fb.req_pool_indices.tolist()
            if fb.forward_mode.is_target_verify():
                ndt = fb.spec_info.draft_token_num
                cm = fb.spec_info.custom_mask
                st, moff = 0, 0
                for r, sl in zip(rids, seq_lens):
                    kk, vv = self._kv(layer, fb, r, sl + ndt)
                    mask = cm[moff:moff + ndt * (sl + ndt)].view(ndt, sl + ndt).bool()
                    moff += ndt * (sl + ndt)
                    o[st:st + ndt] = _attend(q[st:st + ndt], kk, vv, layer.scaling, mask).to(o.dtype)
                    st += ndt
            else:
                ext = (fb.extend_seq_lens_cpu if fb.extend_seq_lens_cpu is not None
                       else fb.extend_seq_lens.tolist())
                ext = [int(x) for x in ext]
                st = 0
                for r, sl, n in zip(rids, seq_lens, ext):
                    pre = sl - n
                    kk, vv = self._kv(layer, fb, r, sl)
                    mask = torch.arange(pre, sl).unsqueeze(1) >= torch.arange(sl).unsqueeze(0)
                    o[st:st + n] = _attend(q[st:st + n], kk, vv, layer.scaling, mask).to(o.dtype)
                    st += n
            return o.reshape(-1, H * Dv)

        def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kw):
            fb = forward_batch
            if save_kv_cache and k is not None:
                fb.token_to_kv_pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)
            H, D, Dv = layer.tp_q_head_num, layer.qk_head_dim, layer.v_head_dim
            q = q.reshape(-1, H, D)
            o = q.new_empty((q.shape[0], H, Dv))
            for i, (r, sl) in enumerate(zip(fb.req_pool_indices.tolist(), fb.seq_lens.tolist())):
                n = sl + self.seq_len_offset
                kk, vv = self._kv(layer, fb, r, n)
                o[i:i + 1] = _attend(q[i:i + 1], kk, vv, layer.scaling,
                                     torch.ones(1, n, dtype=torch.bool)).to(o.dtype)
            return o.reshape(-1, H * Dv)

    class CpuMultiStepDraftBackend:
        def __init__(self, model_runner, topk, speculative_num_steps):
            assert topk == 1, "CPU patch: draft decode supports topk == 1 only"
            self.topk, self.speculative_num_steps = topk, speculative_num_steps
            self.attn_backends = [CpuSpecAttnBackend(model_runner, seq_len_offset=i + 1)
                                  for i in range(speculative_num_steps - 1)]

        def init_forward_metadata(self, forward_batch):
            pass

    return CpuSpecAttnBackend, CpuMultiStepDraftBackend


# ---------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------
def on_attention_registry(mod):
    Cpu, _ = make_backend_classes()
    mod.ATTENTION_BACKENDS["torch_native"] = lambda runner: Cpu(runner)
    _log("attention backend torch_native -> CpuSpecAttnBackend")


def on_draft_utils(mod):
    _, Multi = make_backend_classes()
    F = mod.DraftBackendFactory

    def create_decode_backend(self):
        if self.speculative_num_steps == 1:
            return None
        _log("draft decode backend -> CpuMultiStepDraftBackend")
        return Multi(self.draft_model_runner, self.topk, self.speculative_num_steps)

    F.create_decode_backend = create_decode_backend
    F.create_draft_extend_backend = lambda self: None  # draft runner's own backend
    _log("DraftBackendFactory patched")


def on_eagle_utils(mod):
    import sgl_kernel
    mod.sgl_build_tree_kernel_efficient = sgl_kernel.build_tree_kernel_efficient_cpu
    mod._is_cuda = True  # verify_tree_greedy_func then calls sgl_kernel.verify_tree_greedy (shim)
    _log("eagle_utils: build_tree/verify_tree_greedy -> shim")


def on_spec_module(mod):
    patch_triton_names(mod)


def on_worker(mod):
    patch_triton_names(mod)
    for cls_name in ("EAGLEWorker", "EAGLEWorkerV2"):
        cls = vars(mod).get(cls_name)
        if cls is not None and not getattr(cls, "_sgl512_logged", False):
            orig = cls.__init__

            def __init__(self, *a, __orig=orig, __n=cls_name, **k):
                _log(f"constructing {__n} ({type(self).__module__}.{type(self).__name__})")
                __orig(self, *a, **k)

            cls.__init__ = __init__
            cls._sgl512_logged = True


def on_torch_cuda(mod):
    # 0.5.12's LlamaForCausalLM.set_embed / set_embed_and_head call torch.cuda.synchronize()
    # unconditionally; with no GPU that raises. Make it a no-op when CUDA is absent.
    if not mod.is_available():
        mod.synchronize = lambda *a, **k: None
        mod.empty_cache = lambda *a, **k: None
        _log("torch.cuda.synchronize/empty_cache -> no-op (no CUDA)")


def on_llama(mod):
    import torch.cuda
    on_torch_cuda(torch.cuda)


def on_eagle_info_v2(mod):
    patch_triton_names(mod)
    mod._is_cuda = True  # assign_extend_cache_locs_func: take the (now torch) kernel branch
    _log("eagle_info_v2._is_cuda -> True")


def on_overlap_utils(mod):
    # Overlap scheduler calls Tensor.record_stream(current_stream) on CPU tensors.
    orig = torch.Tensor.record_stream
    if getattr(orig, "_sgl512", False):
        return

    def record_stream(self, stream):
        if self.device.type == "cpu":
            return None
        return orig(self, stream)

    record_stream._sgl512 = True
    torch.Tensor.record_stream = record_stream
    _log("Tensor.record_stream -> no-op on CPU tensors")
