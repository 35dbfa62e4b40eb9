"""Quantization as the models do it (REFERENCE §5), in PyTorch, into flashindexer's layouts:
fp8 e4m3 with one fp32 scale per vector (amax / 448), and mxfp4 (E2M1 values, one UE8M0
scale 2^ceil(log2(amax / 6)) per 32 elements). Paged pools hold, per page, page_size token
values then their scales (docs/layouts.md)."""
import torch

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def fp8_rows(x):
    """x [..., D] float -> (float8_e4m3fn [..., D], float32 scale [...]), scale = amax / 448."""
    x = x.float()
    scale = x.abs().amax(-1).clamp(min=1e-30) / 448.0
    return (x / scale.unsqueeze(-1)).to(torch.float8_e4m3fn), scale


def mxfp4(x, chunk=4096):
    """x [..., 128] float -> (packed E2M1 uint8 [..., 64], UE8M0 uint8 [..., 4], dequantized float32).
    Element 2i sits in the low nibble of byte i; bit 3 of a code is the sign."""
    lead = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1]).float()
    parts = [_mxfp4(flat[i:i + chunk]) for i in range(0, flat.shape[0], chunk)] or [_mxfp4(flat)]
    packed, scales, deq = (torch.cat([p[j] for p in parts]) for j in range(3))
    return packed.reshape(*lead, -1), scales.reshape(*lead, -1), deq.reshape(x.shape)


def _mxfp4(x):
    d = x.shape[-1]
    xb = x.reshape(x.shape[0], d // 32, 32)
    amax = xb.abs().amax(-1, keepdim=True).clamp(min=2.0 ** -120)
    e = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = xb / torch.exp2(e)
    mags = torch.tensor(E2M1, device=x.device)
    idx = torch.bucketize(scaled.abs(), (mags[1:] + mags[:-1]) / 2)
    neg = scaled < 0
    code = (idx | (neg.to(idx.dtype) << 3)).to(torch.uint8).reshape(x.shape[0], d)
    deq = (mags[idx] * torch.where(neg, -1.0, 1.0) * torch.exp2(e)).reshape(x.shape[0], d)
    return (code[:, 0::2] | (code[:, 1::2] << 4)).contiguous(), (e.squeeze(-1) + 127).to(torch.uint8), deq


def dequant_mxfp4(packed, scales):
    """(packed uint8 [..., D/2], UE8M0 uint8 [..., D/32]) -> float32 [..., D]; scale 0xFF is NaN."""
    lo, hi = packed & 0xF, packed >> 4
    codes = torch.stack([lo, hi], -1).reshape(*packed.shape[:-1], packed.shape[-1] * 2).long()
    mags = torch.tensor(E2M1, device=packed.device)
    vals = mags[codes & 7] * torch.where((codes & 8) != 0, -1.0, 1.0)
    e = scales.float() - 127
    f = torch.where(scales == 255, torch.tensor(float("nan"), device=packed.device), torch.exp2(e))
    return vals * f.repeat_interleave(32, -1)


def fp8_pool(values, scales, page_size=64):
    """values float8_e4m3fn [tokens, 128], scales float32 [tokens] -> uint8 pool [pages, page_size * 132]."""
    return _pool(values.view(torch.uint8), scales.contiguous().view(torch.uint8).reshape(-1, 4), page_size)


def mxfp4_pool(packed, scales, page_size=64):
    """packed uint8 [tokens, 64], scales uint8 [tokens, 4] -> uint8 pool [pages, page_size * 68]."""
    return _pool(packed, scales, page_size)


def _pool(values, scales, page_size):
    tokens = values.shape[0]
    pages = -(-tokens // page_size)
    pad = pages * page_size - tokens
    if pad:
        values = torch.cat([values, values.new_zeros(pad, values.shape[1])])
        scales = torch.cat([scales, scales.new_zeros(pad, scales.shape[1])])
    vb, sb = values.shape[1], scales.shape[1]
    pool = torch.empty(pages, page_size * (vb + sb), dtype=torch.uint8, device=values.device)
    pool[:, :page_size * vb] = values.reshape(pages, page_size * vb)
    pool[:, page_size * vb:] = scales.reshape(pages, page_size * sb)
    return pool
