"""Author's own sanity check for the held-out pool (independent of any checker).

For every candidate in pool/manifest.json that lists "cpu":
  * correctness against an fp32 reference written from the task semantics;
  * intended "violating": some sample's output bits differ between running it
    alone (batch 1) and inside a larger batch at some position;
  * intended "invariant": a sample's bits are the same alone and inside
    batches of several sizes, positions and batchmates.
CUDA-only candidates are only imported.

Usage: TRITON_INTERPRET=1 python author_check.py [key-substring ...]
  CHECK_FP16=1  also check correctness with fp16 inputs
  BI_FP16=1     also check the invariant candidates with fp16 inputs
"""
import importlib.util
import json
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
POOL = os.path.join(HERE, "pool")


def load(key):
    path = os.path.join(POOL, key + ".py")
    name = "heldout2_" + key.replace("/", "__")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------- tasks
class Task:
    sizes_violate = (2, 4, 8, 16, 33, 40)
    sizes_invariant = (1, 3, 8, 17, 40)
    rtol = 1e-4
    atol = 1e-4

    def shared(self, g, dtype):
        return {}

    def sample(self, g, dtype, sh):
        raise NotImplementedError

    def run(self, mod, samples, sh):
        """Compose samples into one batch, call kernel, return per-sample outputs."""
        raise NotImplementedError

    def ref(self, samples, sh):
        raise NotImplementedError

    def close(self, out, ref):
        return all(torch.allclose(o.float(), r.float(), rtol=self.rtol, atol=self.atol)
                   for o, r in zip(_flat(out), _flat(ref)))


def _flat(x):
    if isinstance(x, (list, tuple)):
        out = []
        for e in x:
            out.extend(_flat(e))
        return out
    return [x]


def bits_equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(_flat(a), _flat(b)))


def rn(g, *shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def rms_ref(x, w, eps):
    xf = x.double()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.double()).float()


class RMSNorm(Task):
    H = 1024

    def shared(self, g, dtype):
        return {"w": (1 + 0.1 * torch.randn(self.H, generator=g)).to(dtype), "eps": 1e-6}

    def sample(self, g, dtype, sh):
        return rn(g, self.H, dtype=dtype)

    def run(self, mod, samples, sh):
        y = mod.kernel(torch.stack(samples), sh["w"], sh["eps"])
        return [y[i] for i in range(len(samples))]

    def ref(self, samples, sh):
        return [rms_ref(s, sh["w"], sh["eps"]) for s in samples]


class AddRMSNorm(RMSNorm):
    def sample(self, g, dtype, sh):
        return (rn(g, self.H, dtype=dtype), rn(g, self.H, dtype=dtype))

    def run(self, mod, samples, sh):
        x = torch.stack([s[0] for s in samples])
        r = torch.stack([s[1] for s in samples])
        x0, r0 = x.clone(), r.clone()
        y, ro = mod.kernel(x, r, sh["w"], sh["eps"])
        # some fused kernels update in place; the returned tensors are what counts
        del x0, r0
        return [(y[i].clone(), ro[i].clone()) for i in range(len(samples))]

    def ref(self, samples, sh):
        out = []
        for x, r in samples:
            ro = (x.float() + r.float()).to(x.dtype)
            out.append((rms_ref(ro, sh["w"], sh["eps"]), ro.float()))
        return out


class Gemm(Task):
    K, N = 384, 256
    sizes_violate = (2, 4, 8, 16, 33, 48, 70)
    sizes_invariant = (1, 5, 16, 33, 70)

    def shared(self, g, dtype):
        return {"b": rn(g, self.K, self.N, dtype=dtype, scale=0.1)}

    def sample(self, g, dtype, sh):
        return rn(g, self.K, dtype=dtype)

    def run(self, mod, samples, sh):
        c = mod.kernel(torch.stack(samples), sh["b"])
        return [c[i] for i in range(len(samples))]

    def ref(self, samples, sh):
        return [(s.double() @ sh["b"].double()).float() for s in samples]


class Prefill(Task):
    Hq, Hkv, S, D = 4, 2, 48, 16
    sizes_violate = (2, 3, 5, 8)
    sizes_invariant = (1, 2, 5)
    atol = 2e-4

    def shared(self, g, dtype):
        return {"causal": True, "sm_scale": 1.0 / math.sqrt(self.D)}

    def sample(self, g, dtype, sh):
        return (rn(g, self.Hq, self.S, self.D, dtype=dtype),
                rn(g, self.Hkv, self.S, self.D, dtype=dtype),
                rn(g, self.Hkv, self.S, self.D, dtype=dtype))

    def run(self, mod, samples, sh):
        q = torch.stack([s[0] for s in samples])
        k = torch.stack([s[1] for s in samples])
        v = torch.stack([s[2] for s in samples])
        o = mod.kernel(q, k, v, sh["causal"], sh["sm_scale"])
        return [o[i] for i in range(len(samples))]

    def ref(self, samples, sh):
        out = []
        for q, k, v in samples:
            rep = self.Hq // self.Hkv
            kk = k.double().repeat_interleave(rep, 0)
            vv = v.double().repeat_interleave(rep, 0)
            s = q.double() @ kk.transpose(-1, -2) * sh["sm_scale"]
            if sh["causal"]:
                S = q.shape[1]
                m = torch.ones(S, S, dtype=torch.bool).tril()
                s = s.masked_fill(~m, float("-inf"))
            out.append((s.softmax(-1) @ vv).float())
        return out


class PrefillNonCausal(Prefill):
    def shared(self, g, dtype):
        return {"causal": False, "sm_scale": 1.0 / math.sqrt(self.D)}


class Decode(Task):
    Hq, Hkv, D, PAGE = 4, 2, 32, 8
    sizes_violate = (2, 4, 8, 16, 33)
    sizes_invariant = (1, 3, 8, 17)
    atol = 2e-4

    def shared(self, g, dtype):
        return {"sm_scale": 1.0 / math.sqrt(self.D)}

    def sample(self, g, dtype, sh):
        L = int(torch.randint(1, 200, (1,), generator=g).item())
        return (rn(g, self.Hq, self.D, dtype=dtype), rn(g, L, self.Hkv, self.D, dtype=dtype),
                rn(g, L, self.Hkv, self.D, dtype=dtype), L)

    def run(self, mod, samples, sh, g=None):
        g = g or torch.Generator().manual_seed(len(samples) * 7919)
        npages = [math.ceil(s[3] / self.PAGE) for s in samples]
        P = sum(npages) + 3
        perm = torch.randperm(P, generator=g)
        kc = torch.randn(P, self.PAGE, self.Hkv, self.D, generator=g).to(samples[0][0].dtype)
        vc = torch.randn(P, self.PAGE, self.Hkv, self.D, generator=g).to(samples[0][0].dtype)
        maxp = max(npages) + 1
        bt = torch.zeros(len(samples), maxp, dtype=torch.int32)
        used = 0
        for i, (q, k, v, L) in enumerate(samples):
            for j in range(npages[i]):
                pg = int(perm[used]); used += 1
                bt[i, j] = pg
                n = min(self.PAGE, L - j * self.PAGE)
                kc[pg, :n] = k[j * self.PAGE:j * self.PAGE + n]
                vc[pg, :n] = v[j * self.PAGE:j * self.PAGE + n]
        q = torch.stack([s[0] for s in samples])
        sl = torch.tensor([s[3] for s in samples], dtype=torch.int32)
        o = mod.kernel(q, kc, vc, bt, sl, sh["sm_scale"])
        return [o[i] for i in range(len(samples))]

    def ref(self, samples, sh):
        out = []
        rep = self.Hq // self.Hkv
        for q, k, v, L in samples:
            kk = k.double().transpose(0, 1).repeat_interleave(rep, 0)  # [Hq,L,D]
            vv = v.double().transpose(0, 1).repeat_interleave(rep, 0)
            s = (kk @ q.double().unsqueeze(-1)).squeeze(-1) * sh["sm_scale"]
            out.append((s.softmax(-1).unsqueeze(1) @ vv).squeeze(1).float())
        return out


class MoE(Task):
    H, I, E, TOPK = 64, 96, 8, 2
    sizes_violate = (2, 4, 8, 16, 24, 33, 40)
    sizes_invariant = (1, 3, 12, 33)
    atol = 2e-4

    def shared(self, g, dtype):
        return {"wgu": rn(g, self.E, 2 * self.I, self.H, dtype=dtype, scale=0.15),
                "wd": rn(g, self.E, self.H, self.I, dtype=dtype, scale=0.15),
                "top_k": self.TOPK}

    def sample(self, g, dtype, sh):
        return (rn(g, self.H, dtype=dtype), torch.randn(self.E, generator=g) * 1.5)

    def run(self, mod, samples, sh):
        x = torch.stack([s[0] for s in samples])
        lg = torch.stack([s[1] for s in samples]).float()
        y = mod.kernel(x, lg, sh["wgu"], sh["wd"], sh["top_k"])
        return [y[i] for i in range(len(samples))]

    def ref(self, samples, sh):
        out = []
        for x, lg in samples:
            p = lg.double().softmax(-1)
            w, idx = p.topk(sh["top_k"])
            w = w / w.sum()
            y = torch.zeros(self.H, dtype=torch.float64)
            for wi, e in zip(w.tolist(), idx.tolist()):
                wg = sh["wgu"][e, :self.I].double()
                wu = sh["wgu"][e, self.I:].double()
                h = torch.nn.functional.silu(wg @ x.double()) * (wu @ x.double())
                y += wi * (sh["wd"][e].double() @ h)
            out.append(y.float())
        return out


class Sampling(Task):
    V = 2000
    sizes_violate = (2, 4, 8, 16, 33)
    sizes_invariant = (1, 3, 8, 17, 33)

    def sample(self, g, dtype, sh):
        logits = torch.randn(self.V, generator=g) * 2.0
        r = int(torch.randint(0, 4, (1,), generator=g).item())
        T = [0.0, 0.7, 1.0, 1.3][r]
        k = [0, 5, 50, 0][int(torch.randint(0, 4, (1,), generator=g).item())]
        p = [1.0, 0.9, 0.5, 0.95][int(torch.randint(0, 4, (1,), generator=g).item())]
        seed = int(torch.randint(0, 2 ** 40, (1,), generator=g).item())
        return (logits, T, k, p, seed)

    def run(self, mod, samples, sh):
        lg = torch.stack([s[0] for s in samples])
        T = torch.tensor([s[1] for s in samples], dtype=torch.float32)
        k = torch.tensor([s[2] for s in samples], dtype=torch.int32)
        p = torch.tensor([s[3] for s in samples], dtype=torch.float32)
        sd = torch.tensor([s[4] for s in samples], dtype=torch.int64)
        tok = mod.kernel(lg, T, k, p, sd)
        return [tok[i] for i in range(len(samples))]

    @staticmethod
    def allowed_probs(logits, T, k, p):
        lg = logits.double()
        if T == 0:
            z = torch.zeros_like(lg)
            z[int(lg.argmax())] = 1
            return z
        probs = (lg / T).softmax(-1)
        sp, si = probs.sort(descending=True)
        if k > 0:
            sp[k:] = 0
        sp = sp / sp.sum()
        cs = sp.cumsum(0)
        keep = (cs - sp) < p  # smallest prefix reaching p
        sp = torch.where(keep, sp, torch.zeros_like(sp))
        sp = sp / sp.sum()
        out = torch.zeros_like(probs)
        out[si] = sp
        return out

    def ref(self, samples, sh):
        return [self.allowed_probs(*s[:4]) for s in samples]

    def close(self, out, ref):
        for tok, pr in zip(out, ref):
            t = int(tok)
            if not (0 <= t < self.V) or pr[t] <= 0:
                return False
        return True


class GDN(Task):
    T, Hh, Dk, Dv = 24, 2, 16, 32
    sizes_violate = (2, 4, 8, 16, 33)
    sizes_invariant = (1, 3, 8, 17)
    atol = 3e-4

    def shared(self, g, dtype):
        return {"scale": 1.0 / math.sqrt(self.Dk)}

    def sample(self, g, dtype, sh):
        k = torch.nn.functional.normalize(torch.randn(self.T, self.Hh, self.Dk, generator=g), dim=-1)
        return (rn(g, self.T, self.Hh, self.Dk, dtype=dtype), k.to(dtype),
                rn(g, self.T, self.Hh, self.Dv, dtype=dtype),
                -torch.rand(self.T, self.Hh, generator=g) * 0.5 - 0.01,
                torch.rand(self.T, self.Hh, generator=g) * 0.9 + 0.05)

    def run(self, mod, samples, sh):
        args = [torch.stack([s[i] for s in samples]) for i in range(5)]
        o = mod.kernel(*args, sh["scale"])
        return [o[i] for i in range(len(samples))]

    def ref(self, samples, sh):
        out = []
        for q, k, v, g, b in samples:
            q, k, v, g, b = (t.double() for t in (q, k, v, g, b))
            o = torch.zeros(self.T, self.Hh, self.Dv, dtype=torch.float64)
            for h in range(self.Hh):
                S = torch.zeros(self.Dk, self.Dv, dtype=torch.float64)
                for t in range(self.T):
                    S = S * math.exp(g[t, h])
                    u = b[t, h] * (v[t, h] - k[t, h] @ S)
                    S = S + torch.outer(k[t, h], u)
                    o[t, h] = sh["scale"] * (q[t, h] @ S)
            out.append(o.float())
        return out


TASKS = {"rmsnorm": RMSNorm(), "add_rmsnorm": AddRMSNorm(), "gemm": Gemm(),
         "attention_prefill": Prefill(), "attention_decode": Decode(), "moe": MoE(),
         "sampling": Sampling(), "gdn": GDN()}


# ----------------------------------------------------------------- checks
def check_correct(task, mod, dtype=torch.float32, n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    sh = task.shared(g, dtype)
    samples = [task.sample(g, dtype, sh) for _ in range(n)]
    out = task.run(mod, samples, sh)
    ok = task.close(out, task.ref(samples, sh))
    if ok and isinstance(task, Sampling):
        ok = check_sampling_distribution(task, mod)
    if ok and isinstance(task, Prefill):
        t2 = PrefillNonCausal()
        t2.rtol, t2.atol = task.rtol, task.atol
        sh2 = t2.shared(g, dtype)
        ok = t2.close(t2.run(mod, samples, sh2), t2.ref(samples, sh2))
    return ok


def check_sampling_distribution(task, mod, n=256):
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(task.V, generator=g) * 2.0
    logits[:6] += torch.tensor([6.0, 5.5, 5.0, 4.5, 4.0, 3.5])
    samples = [(logits, 1.0, 4, 0.9, 1000 + i) for i in range(n)]
    toks = torch.stack(task.run(mod, samples, {})).long()
    emp = torch.bincount(toks, minlength=task.V).double() / n
    ref = task.allowed_probs(logits, 1.0, 4, 0.9)
    tv = 0.5 * (emp - ref).abs().sum().item()
    return tv < 0.12


def bi_trial(task, mod, size, pos, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    sh = task.shared(g, dtype)
    s0 = task.sample(g, dtype, sh)
    alone = task.run(mod, [s0], sh)[0]
    mates = [task.sample(g, dtype, sh) for _ in range(size - 1)]
    batch = mates[:pos] + [s0] + mates[pos:]
    inside = task.run(mod, batch, sh)[pos]
    return bits_equal(alone, inside)


def check_violating(task, mod, dtype=torch.float32, seeds=8):
    for seed in range(seeds):
        for size in task.sizes_violate:
            for pos in sorted({0, size // 2, size - 1}):
                if not bi_trial(task, mod, size, pos, 100 * seed + size, dtype):
                    return f"differs at batch {size} pos {pos} seed {seed}"
    return None


def check_invariant(task, mod, dtype=torch.float32):
    for seed in range(2):
        for size in task.sizes_invariant:
            for pos in sorted({0, size // 2, size - 1}):
                if not bi_trial(task, mod, size, pos, 100 * seed + size, dtype):
                    return f"DIFFERS at batch {size} pos {pos} seed {seed}"
    return None


def main(filters):
    with open(os.path.join(POOL, "manifest.json")) as f:
        man = json.load(f)
    bad = 0
    for c in man["candidates"]:
        key = c["key"]
        if filters and not any(s in key for s in filters):
            continue
        t0 = time.time()
        mod = load(key)
        if _needs_cuda(mod):
            print(f"{key:55s} import-only (native CUDA source)")
            continue
        task = TASKS[c["task"]]
        ok = check_correct(task, mod)
        ok16 = True
        if os.environ.get("CHECK_FP16"):
            t16 = type(task)()
            t16.rtol, t16.atol = 2e-2, 2e-2
            ok16 = check_correct(t16, mod, dtype=torch.float16)
        if c["intended"] == "violating" and "cpu" not in c["observable_on"]:
            good, msg = True, "cuda-only threshold: BI not checked on cpu"
        elif c["intended"] == "violating":
            msg = check_violating(task, mod)
            good = msg is not None
            msg = msg or "NO DIFFERENCE FOUND"
        else:
            msg = check_invariant(task, mod)
            good = msg is None
            msg = msg or "bits equal"
        if os.environ.get("BI_FP16") and c["intended"] == "invariant":
            m16 = check_invariant(task, mod, dtype=torch.float16)
            good = good and m16 is None
            msg += "; fp16 " + (m16 or "bits equal")
        status = "ok " if (ok and ok16 and good) else "BAD"
        bad += status == "BAD"
        print(f"{key:55s} {status} correct={ok} fp16={ok16} {c['intended']:9s} {msg} "
              f"({time.time() - t0:.1f}s)", flush=True)
    print("bad:", bad)
    return bad


def _needs_cuda(mod):
    return "load_inline" in open(mod.__file__).read()


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1:]) else 0)
