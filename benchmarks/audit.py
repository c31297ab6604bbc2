"""nanguard audit: time and memory per program, beside the program's own first step.

    .venv/bin/python benchmarks/audit.py            # the programs below and GPT-2 small
    .venv/bin/python benchmarks/audit.py --quick    # without GPT-2 small

Each case runs in a fresh subprocess (so its peak memory is its own) which imports torch
and nanguard, then alternates, in the same process: the program's first training step run
plainly (the native baseline), and ``nanguard.audit`` of that step (trace up to the first
backward, the interval analysis, the witness search, 3 s per finding at most). Reported:
seconds beyond importing torch for each, their ratio (median over rounds), findings, ops
traced and the process's peak RSS.

Goals (issue 27): a program of the corpora's size audited in under 10 s beyond importing
torch; a GPT-2-small-sized model (124 M parameters) in under a minute, memory reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES = {
    "distance matrix (seed)": """
        import nanguard.stories, importlib
        mod = importlib.import_module(nanguard.stories.get("distance_matrix").module("nan"))
        def step():
            mod.main(steps=1)
    """,
    "classifier, CE by hand": """
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        opt = torch.optim.Adam(net.parameters())
        x, y = torch.randn(64, 20), torch.randint(0, 10, (64,))
        def step():
            p = torch.softmax(net(x), -1)
            loss = -(torch.nn.functional.one_hot(y, 10) * torch.log(p)).sum(1).mean()
            loss.backward(); opt.step(); opt.zero_grad()
    """,
    "VAE step": """
        torch.manual_seed(0)
        enc, dec = torch.nn.Linear(784, 2 * 20), torch.nn.Linear(20, 784)
        opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()))
        x = torch.rand(128, 784)
        def step():
            mu, logvar = enc(x).chunk(2, -1)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            recon = torch.sigmoid(dec(z))
            kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
            loss = torch.nn.functional.binary_cross_entropy(recon, x, reduction="sum") + kld
            loss.backward(); opt.step(); opt.zero_grad()
    """,
    "transformer encoder, clean": """
        torch.manual_seed(0)
        enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(128, 4, 256, batch_first=True), 4)
        opt = torch.optim.Adam(enc.parameters())
        x = torch.randn(16, 32, 128)
        pad = torch.zeros(16, 32, dtype=torch.bool); pad[:, 28:] = True
        def step():
            enc(x, src_key_padding_mask=pad).pow(2).mean().backward(); opt.step(); opt.zero_grad()
    """,
}
GPT2 = """
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())      # GPT-2 small, 124 M parameters
    ids = torch.randint(0, 50257, (2, 512))
    def step():
        model(input_ids=ids, labels=ids).loss.backward(); model.zero_grad()
"""

RUNNER = """
import json, resource, statistics, sys, time
t0 = time.perf_counter()
import torch
import nanguard
torch.set_num_threads(2)
import_s = time.perf_counter() - t0
{setup}
rounds = {rounds}
plain, audited, result = [], [], None
for r in range(rounds):
    t = time.perf_counter(); step(); plain.append(time.perf_counter() - t)
    t = time.perf_counter(); result = nanguard.audit(step); audited.append(time.perf_counter() - t)
print(json.dumps({{"import": import_s, "plain": statistics.median(plain), "audit": statistics.median(audited),
                  "ratio": statistics.median(a / p for a, p in zip(audited, plain)),
                  "findings": len(result.findings), "ops": result.ops_traced,
                  "witnessed": sum(1 for f in result.findings if f.witness),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run_case(setup: str, rounds: int) -> dict:
    code = RUNNER.format(setup=textwrap.dedent(setup), rounds=rounds)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"case failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip GPT-2 small")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cases = dict(CASES)
    if not args.quick:
        cases["GPT-2 small 2x512"] = GPT2
    header = ["case", "import torch s", "plain step s", "audit s", "audit/plain", "findings (witnessed)", "ops",
              "peak RSS MB"]
    rows = []
    for name, setup in cases.items():
        r = run_case(setup, 1 if "GPT-2" in name else args.rounds)
        rows.append([name, f"{r['import']:.2f}", f"{r['plain']:.3f}", f"{r['audit']:.2f}", f"{r['ratio']:.1f}x",
                     f"{r['findings']} ({r['witnessed']})", str(r["ops"]), f"{r['peak_mb']:.0f}"])
        print(" | ".join(rows[-1]), flush=True)
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
