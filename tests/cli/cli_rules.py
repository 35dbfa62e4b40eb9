#!/usr/bin/env python3
"""The CLI's input rules (docs/cli.md), one case per row: exit code and message, end to end.
Standard library only.  usage: cli_rules.py path/to/flashindexer [work dir]"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

CLI = sys.argv[1]
WORK = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
PROBLEM = os.path.join(WORK, "rules_problem.safetensors")
FAILING = os.path.join(WORK, "rules_failing.safetensors")


def run(args, env=None):
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([CLI] + args, capture_output=True, text=True, env=e, timeout=600)
    return p.returncode, p.stdout, p.stderr


def make_failing_problem():
    """A decode problem whose page table points every request at page 10^6 (outside the pool)."""
    rc, _, err = run(["make-problem", "--preset", "v32", "--batch", "3", "--context", "300", "--k", "16",
                      "--out", FAILING])
    assert rc == 0, err
    data = bytearray(open(FAILING, "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    a, b = header["page_table"]["data_offsets"]
    for off in range(8 + n + a, 8 + n + b, 4):
        data[off:off + 4] = struct.pack("<i", 1000000)
    open(FAILING, "wb").write(data)


# (what, arguments, expected exit code, regex the output (stdout + stderr) must match)
CASES = [
    ("k below 1", ["run", "--k", "0"], 2, r"--k: Value 0 not in range 1 to 65536"),
    ("k negative", ["run", "--k", "-5"], 2, r"--k: Value -5 not in range 1 to 65536"),
    ("k above 65536", ["run", "--k", "100000"], 2, r"--k: Value 100000 not in range 1 to 65536"),
    ("rows below 1", ["run", "--rows", "0"], 2, r"--rows: Value 0 not in range"),
    ("context below 1", ["run", "--context", "0"], 2, r"--context: Value 0 not in range"),
    ("batch negative", ["run", "--batch", "-3"], 2, r"--batch: Value -3 not in range 1 to 2147483647"),
    ("next-n out of range", ["run", "--batch", "2", "--next-n", "5"], 2, r"--next-n: Value 5 not in range 1 to 4"),
    ("next-n without batch", ["run", "--next-n", "3"], 2, r"--next-n requires --batch"),
    ("rows with batch", ["run", "--rows", "3", "--batch", "2"], 2, r"--rows excludes --batch"),
    ("threads negative", ["run", "--threads", "-1"], 2, r"--threads: Value -1 not in range 0 to 4096"),
    ("unknown preset", ["run", "--preset", "v5"], 2, r"--preset: v5 not in"),
    ("unknown generator", ["run", "--generator", "zipf"], 2, r"--generator: zipf not in"),
    ("unknown order", ["run", "--order", "sideways"], 2, r"--order: sideways not in"),
    ("unknown accuracy", ["run", "--accuracy", "fp32"], 2, r"--accuracy: fp32 not in \{production,exact\}"),
    ("unknown backend", ["run", "--backend", "tpu"], 2, r"--backend: tpu not in"),
    ("unknown verify", ["run", "--verify", "some"], 2, r"--verify: some not in \{none,sample,full\}"),
    ("logits without out", ["run", "--logits"], 2, r"--logits requires --out"),
    ("logits with a sample check", ["run", "--rows", "2", "--context", "300", "--out", os.path.join(WORK, "r.st"),
                                    "--logits", "--verify", "sample"], 2, r"--logits: .* needs --verify full"),
    ("problem with k", ["run", "--problem", "@P", "--k", "5"], 2, r"--k excludes --problem"),
    ("problem with rows", ["run", "--problem", "@P", "--rows", "5"], 2, r"--rows excludes --problem"),
    ("problem with preset", ["run", "--problem", "@P", "--preset", "v32"], 2, r"--preset excludes --problem"),
    ("problem is a directory", ["run", "--problem", WORK], 3, r"expected a regular file, got a directory"),
    ("problem missing", ["run", "--problem", os.path.join(WORK, "none.safetensors")], 3, r"no such file"),
    ("problem malformed", ["run", "--problem", CLI], 3, r"format_error"),
    ("out not writable", ["run", "--out", "/nonexistent/dir/r.safetensors"], 2,
     r"--out: expected a writable file path, got /nonexistent/dir/r.safetensors"),
    ("more memory than the machine has", ["run", "--context", "1073741824", "--rows", "1"], 2,
     r"the run needs about [0-9.]+ GiB of host memory.* GiB are available"),
    ("every row fails closed", ["run", "--problem", "@F"], 4,
     r"3 of 3 rows failed closed: 3 page \(a page-table entry outside the pool"),
    ("json error object", ["run", "--json", "--k", "0"], 2,
     r'\{"error":\{"exit_code":2,"kind":"usage","message":"--k: Value 0 not in range 1 to 65536"\}\}'),
    ("json rows failed", ["run", "--json", "--problem", "@F"], 4, r'"kind":"rows_failed"'),
    ("cuda backend without a device", ["run", "--backend", "cuda", "--rows", "2", "--context", "300"], 6,
     r"--backend cuda: (no NVIDIA driver found|no CUDA device|not compiled in|driver too old|.*wrong architecture)"),
    ("a good run, sample check", ["run", "--rows", "70", "--context", "600", "--k", "32"], 0,
     r"checked vs dense\+topk  yes, bit-identical on 64 of 70 rows \(--verify sample\)"),
    ("k above the GPU's limit, on the CPU: no fallback message", ["run", "--k", "3000", "--rows", "2", "--context",
                                                                   "3100", "--backend", "cpu", "--verify", "none"], 0,
     r"^(?![\s\S]*running on the CPU)[\s\S]*rows=2 context=3100 k=3000"),
    ("a good run, no check", ["run", "--rows", "4", "--context", "600", "--k", "32", "--verify", "none"], 0,
     r"not checked \(--verify none\)"),
    ("a good decode run, json", ["run", "--json", "--preset", "v32", "--batch", "40", "--next-n", "2", "--context",
                                 "400", "--k", "32"], 0, r'"verified":true,"verified_rows":64,"verify":"sample"'),
    ("progress lines", ["run", "--rows", "64", "--context", "2000", "--k", "32", "--progress", "--verify", "full"], 0,
     r"flashindexer: fused on cpu: \d+ s elapsed, about \d+ s left \(estimate\)"),
    ("bench without a device", ["bench", "--json"], 6, r"bench needs a usable CUDA device: \S"),
    ("help cites the project's own docs", ["run", "--help"], 0, r"^(?![\s\S]*CONTRACT)[\s\S]*docs/semantics\.md"),
    ("info names why cuda is unusable", ["info"], 0,
     r"cuda +compiled=(yes usable=(yes|no) +\S|no usable=no +not compiled in)"),
]


def main():
    rc, _, err = run(["make-problem", "--rows", "4", "--context", "300", "--k", "16", "--out", PROBLEM])
    assert rc == 0, err
    make_failing_problem()
    has_gpu = "usable=yes" in run(["info"])[1].split("cuda", 1)[-1]
    bad = 0
    for what, args, code, pattern in CASES:
        args = [PROBLEM if a == "@P" else FAILING if a == "@F" else a for a in args]
        if has_gpu and what in ("cuda backend without a device", "bench without a device"):
            continue
        if what == "bench without a device" and "not compiled in" in run(["info"])[1]:
            continue  # CPU-only builds have no bench command
        got, out, err = run(args, {"FLASHINDEXER_PROGRESS_INTERVAL": "0.05"})
        text = out + err
        ok = got == code and re.search(pattern, text)
        print(f"{'ok  ' if ok else 'FAIL'} {what}: exit {got} (want {code})" + ("" if ok else f"\n     {text[:400]}"))
        bad += not ok
    print(f"{len(CASES) - bad} of {len(CASES)} rules hold")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
