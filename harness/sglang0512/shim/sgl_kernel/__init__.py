"""STAND-IN, not SGLang's code: a pure-torch `sgl_kernel` for the patched SGLang 0.5.12
CPU harness (tests/test_v1_sglang0512.py). The CPU-only ops that SGLang's CPU engine
(SGLANG_USE_CPU_ENGINE=1) imports unconditionally, plus the 0.5.12 names it calls
(`verify_tree_greedy`, a `sgl_kernel.kvcacheio` stub). Semantics ported from
sgl-kernel/csrc/cpu/spec.cpp and kvcache.cpp. Only what a Llama + EAGLE-3
(topk=1, page_size=1, torch_native attention, no AMX) run needs."""
import ctypes
import sys

import torch

__version__ = "0.0.0+pure-torch-shim"

# --- 0.5.12 additions ------------------------------------------------------
# sglang 0.5.12 imports submodules such as sgl_kernel.kvcacheio unconditionally
# (mem_cache/memory_pool_host.py). Serve any sgl_kernel.<sub> as a stub module whose
# attributes raise NotImplementedError only if they are actually called.
import importlib.abc, importlib.machinery, types


# Only submodules that 0.5.12 imports unconditionally; others must keep raising
# ImportError so SGLang's own try/except fallbacks (e.g. sgl_kernel.scalar_type) work.
_STUB_SUBMODULES = {"sgl_kernel.kvcacheio"}


class _StubSubmoduleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in _STUB_SUBMODULES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []

        def _ga(name, _mod=spec.name):
            if name.startswith("__"):
                raise AttributeError(name)

            def _missing(*a, **k):
                raise NotImplementedError(f"sgl_kernel shim: {_mod}.{name} is not implemented")

            _missing.__name__ = name
            return _missing

        m.__getattr__ = _ga
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _StubSubmoduleFinder())



def copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc):
    ptrs, strd = data_ptrs.tolist(), strides.tolist()
    pairs = list(zip(tgt_loc.tolist(), src_loc.tolist()))
    for base, stride in zip(ptrs, strd):
        for t, s in pairs:
            if t != s:
                ctypes.memmove(base + t * stride, base + s * stride, stride)


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    off = 0
    for r, s, e in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()):
        n = e - s
        req_to_token[r, s:e] = out_cache_loc[off:off + n].to(torch.int32)
        off += n


def assign_extend_cache_locs_cpu(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    off = 0
    for r, s, e in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()):
        n = e - s
        out_cache_loc[off:off + n] = req_to_token[r, s:e].to(torch.int64)
        off += n


def assign_draft_cache_locs_contiguous_cpu(req_pool_indices, req_to_token, seq_lens, out_cache_loc, pool_len, topk, num_steps):
    n = topk * num_steps
    for i, (r, s) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        out_cache_loc[i * n:(i + 1) * n] = req_to_token[r, s:s + n].to(torch.int64)


def build_draft_decode_metadata_cpu(req_to_token, req_pool_indices, seq_lens, topk, num_steps, pool_len):
    out = torch.empty((req_pool_indices.numel() * topk, pool_len), dtype=req_to_token.dtype)
    for b, (r, sl) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        for tk in range(topk):
            row = out[b * topk + tk]
            row[:sl] = req_to_token[r, :sl]
            row[sl:sl + num_steps] = req_to_token[r, sl + tk * num_steps: sl + (tk + 1) * num_steps]
    return out


def fill_bonus_tokens_cpu(accept_tokens, accept_lens, bonus_tokens, accept_stride):
    flat = accept_tokens.reshape(-1)
    for pid, al in enumerate(accept_lens.tolist()):
        bonus_tokens[pid] = flat[accept_stride * pid + al - 1]


def fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, accept_out_cache_loc, size=None):
    ai = accept_index.reshape(-1)
    if size is not None:
        ai = ai[:size]
    keep = ai[ai > -1].long()
    accept_out_cache_loc[: keep.numel()] = out_cache_loc[keep]


def rotate_input_ids_cpu(input_ids, extend_start_loc, extend_seq_lens, topk_index, select_index=None):
    for pid, (st, n) in enumerate(zip(extend_start_loc.tolist(), extend_seq_lens.tolist())):
        if n > 1:
            input_ids[st:st + n - 1] = input_ids[st + 1:st + n].clone()
        if n > 0:
            pos = select_index[pid].item() if select_index is not None else st + n - 1
            input_ids[pos] = topk_index[pid]


def verify_tree_greedy_cpu(predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict):
    bs, ndt = candidates.shape
    steps = accept_index.shape[1]
    cand, ri = candidates.reshape(-1).tolist(), retrive_index.reshape(-1).tolist()
    rnt, rns = retrive_next_token.reshape(-1).tolist(), retrive_next_sibling.reshape(-1).tolist()
    tp = target_predict.reshape(-1).tolist()
    for bx in range(bs):
        off = bx * ndt
        last = ri[off]
        accept_index[bx, 0] = last
        n_ok, cur = 0, 0
        for _ in range(1, steps):
            cur = rnt[off + cur]
            while cur != -1:
                didx, dtok, ttok = ri[off + cur], cand[off + cur], tp[last]
                if dtok == ttok:
                    predicts[last] = ttok
                    n_ok += 1
                    accept_index[bx, n_ok] = didx
                    last = didx
                    break
                cur = rns[off + cur]
            if cur == -1:
                break
        accept_token_num[bx] = n_ok
        predicts[last] = tp[last]


def build_tree_kernel_efficient_cpu(parent_list, selected_index, verified_seq_len, tree_mask, positions,
                                    retrive_index, retrive_next_token, retrive_next_sibling,
                                    topk, depth, draft_token_num, tree_mask_mode):
    assert tree_mask_mode in (0, 1), "QLEN_ONLY_BITPACKING unsupported on CPU"
    bs = parent_list.shape[0]
    par = parent_list.reshape(bs, -1).tolist()
    sel = selected_index.reshape(bs, -1).tolist()
    seqlens = verified_seq_len.tolist()
    pos, ri = positions.view(-1), retrive_index.view(-1)
    rnt, rns, mask = retrive_next_token.view(-1), retrive_next_sibling.view(-1), tree_mask.view(-1)
    D = draft_token_num
    acc, mask_off = 0, []
    for i in range(bs):
        mask_off.append(i * D * D + acc)
        acc += seqlens[i] * D
    for bid in range(bs):
        off, sl, s, p = bid * D, seqlens[bid], sel[bid], par[bid]
        pos[off] = sl
        ri[off] = off
        for i in range(D - 1, 0, -1):
            ri[off + i] = off + i
            ptb = s[i - 1] // topk
            ppos = 0
            if ptb > 0:
                tok = p[ptb]
                while ppos < D:
                    if s[ppos] == tok:
                        ppos += 1
                        break
                    ppos += 1
            if ppos == D:
                continue
            if rnt[off + ppos].item() == -1:
                rnt[off + ppos] = i
            else:
                origin = rnt[off + ppos].item()
                rnt[off + ppos] = i
                rns[off + i] = origin
        for tid in range(D):
            if tree_mask_mode == 1:
                row = (off + tid) * D
            else:
                row = mask_off[bid] + (sl + D) * tid + sl
            mask[row] = True
            mask[row + 1: row + D] = False
            if tid == 0:
                continue
            position, cur = 0, tid - 1
            while True:
                position += 1
                mask[row + cur + 1] = True
                ptb = s[cur] // topk
                if ptb == 0:
                    break
                tok = p[ptb]
                cur = next((c for c in range(D) if s[c] == tok), D)
            pos[off + tid] = position + sl


# 0.5.12 names (CUDA-op names used by sglang.srt.speculative.eagle_utils)
def verify_tree_greedy(**kw):
    return verify_tree_greedy_cpu(**kw)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def _missing(*a, **k):
        raise NotImplementedError(f"sgl_kernel shim: {name} is not implemented")

    _missing.__name__ = name
    print(f"[sgl_kernel shim] stub for {name}", file=sys.stderr)
    return _missing


# ---------------------------------------------------------------------------
# Attention ops used by sglang's IntelAMXAttnBackend (the only CPU attention
# backend SGLang's EAGLE draft factory accepts). Reference math, no AMX.
# ---------------------------------------------------------------------------
def _attend(q, k, v, scaling, logit_cap, mask=None, sinks=None):
    # q [T, H, D], k [S, Hkv, D], v [S, Hkv, Dv], mask [T, S] bool (True = keep)
    H, Hkv = q.shape[1], k.shape[1]
    if Hkv != H:
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
    s = torch.einsum("thd,shd->hts", q.float(), k.float()) * scaling
    if logit_cap and logit_cap > 0:
        s = logit_cap * torch.tanh(s / logit_cap)
    if mask is not None:
        s = s.masked_fill(~mask.unsqueeze(0), float("-inf"))
    if sinks is not None:
        sink = sinks.float().view(H, 1, 1).expand(H, s.shape[1], 1)
        p = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1)
    return torch.einsum("hts,shd->thd", p, v.float())


def _window_mask(mask, qpos, kpos, window):
    if window is not None and window > 0:
        mask &= (qpos.unsqueeze(1) - kpos.unsqueeze(0)) < window
    return mask


def decode_attention_cpu(q, k_buffer, v_buffer, k_scale, v_scale, o, k_new, v_new, cache_loc,
                         attn_logits, req_to_token, req_pool_indices, seq_lens, scaling, logit_cap,
                         is_cross_attention=False, sliding_window_size=0, encoder_lens=None, sinks=None):
    if k_new is not None and v_new is not None:
        k_buffer[cache_loc] = k_new.view(-1, *k_buffer.shape[1:]).to(k_buffer.dtype)
        v_buffer[cache_loc] = v_new.view(-1, *v_buffer.shape[1:]).to(v_buffer.dtype)
    for i, (r, sl) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        idx = req_to_token[r, :sl].long()
        kk = k_buffer[idx].float() * (k_scale or 1.0)
        vv = v_buffer[idx].float() * (v_scale or 1.0)
        mask = _window_mask(torch.ones(1, sl, dtype=torch.bool), torch.tensor([sl - 1]),
                            torch.arange(sl), sliding_window_size)
        o[i] = _attend(q[i:i + 1], kk, vv, scaling, logit_cap, mask, sinks)[0].to(o.dtype)


def extend_attention_cpu(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, k_scale, v_scale,
                         req_to_token, req_pool_indices, seq_lens, extend_seq_lens, extend_start_loc,
                         max_len_extend, sm_scale, logit_cap, is_cross_attention=False,
                         sliding_window_size=0, encoder_lens=None, sinks=None, tree_mask=None,
                         is_causal=True):
    mask_off = 0
    for i, (r, sl, ext, st) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(),
                                             extend_seq_lens.tolist(), extend_start_loc.tolist())):
        pre = sl - ext
        idx = req_to_token[r, :pre].long()
        if k_extend is not None:
            kk = torch.cat([k_buffer[idx].float(), k_extend[st:st + ext].float()])
            vv = torch.cat([v_buffer[idx].float(), v_extend[st:st + ext].float()])
        else:
            idx = req_to_token[r, :sl].long()
            kk, vv = k_buffer[idx].float(), v_buffer[idx].float()
        kk, vv = kk * (k_scale or 1.0), vv * (v_scale or 1.0)
        qpos, kpos = torch.arange(pre, sl), torch.arange(sl)
        if tree_mask is not None:
            tm = tree_mask[mask_off: mask_off + ext * ext].view(ext, ext).bool()
            mask_off += ext * ext
            mask = torch.cat([torch.ones(ext, pre, dtype=torch.bool), tm], dim=1)
        elif is_causal:
            mask = qpos.unsqueeze(1) >= kpos.unsqueeze(0)
        else:
            mask = torch.ones(ext, sl, dtype=torch.bool)
        mask = _window_mask(mask, qpos, kpos, sliding_window_size)
        o_extend[st:st + ext] = _attend(q_extend[st:st + ext], kk, vv, sm_scale, logit_cap, mask,
                                        sinks).to(o_extend.dtype)



# Optional: SGL_KERNEL_SHIM_TRACE=<file> appends each op's name on its first call.
def _traced(fn):
    import functools, os
    seen = []
    @functools.wraps(fn)
    def inner(*a, **k):
        out = os.environ.get("SGL_KERNEL_SHIM_TRACE")
        if out and not seen:
            seen.append(1)
            with open(out, "a") as f:
                f.write(fn.__name__ + "\n")
        return fn(*a, **k)
    return inner


for _n in [n for n, v in list(globals().items()) if n.endswith("_cpu") and callable(v)]:
    globals()[_n] = _traced(globals()[_n])

# IntelAMXAttnBackend looks these up as torch.ops.sgl_kernel.<name>; the op
# namespace object is cached on torch.ops, so plain attributes are enough.
for _n in ("decode_attention_cpu", "extend_attention_cpu"):
    setattr(torch.ops.sgl_kernel, _n, globals()[_n])
