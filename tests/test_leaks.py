"""Repeated calls, succeeding and failing, keep the process's memory and open
files flat: nothing the kernels, the bindings or the error paths allocate
outlives the call.

Each function runs in one fresh Python process: a warm-up (caches, the
thread pool, NumPy's allocator), then thousands of calls; the anonymous
resident memory (the heap, not mapped files) and the count of open file
descriptors must not grow.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from .conftest import skip_if_sanitized

# Each entry: (name, setup code, one call that succeeds, one that fails).
CASES = {
    "gather": (
        "t = np.ones((64, 64), np.float32); p = np.arange(256) % 64; "
        "o = np.empty((256, 64), np.float32)",
        "posembed.gather(t, p); posembed.gather(t, p, out=o)",
        "posembed.gather(t, p + 64, out=o)",  # IndexError from the kernel's check
    ),
    "gather_backward": (
        "g = np.ones((512, 64), np.float32); p = np.arange(512) % 64",
        "posembed.gather_backward(g, p, 64)",
        "posembed.gather_backward(g, p, 63)",
    ),
    "interpolate": (
        "t = np.ones((64, 64), np.float32)",
        "posembed.interpolate(t, 256)",
        "posembed.interpolate(t, 0)",
    ),
    "lerp": (
        "t = np.ones((64, 64), np.float32); q = np.linspace(0, 63, 300)",
        "posembed.lerp(t, q)",
        "posembed.lerp(t, q + 1)",  # ValueError from the kernel's range check
    ),
    "extend": (
        "t = np.ones((64, 64), np.float32)",
        "posembed.extend(t, 256, init='random', seed=1)",
        "posembed.extend(t, 10)",
    ),
    "resample_grid": (
        "t = np.ones((1 + 8 * 8, 128), np.float32)",
        "posembed.resample_grid(t, (8, 8), (16, 16), prefix=1)",
        "posembed.resample_grid(t, (8, 9), (16, 16), prefix=1)",
    ),
    "embed": (
        "tok = np.ones((1000, 256), np.float32); pos = np.ones((64, 256), np.float32); "
        "ids = np.arange(4 * 64).reshape(4, 64) % 1000",
        "posembed.embed(tok, ids, pos, dropout=0.1, seed=3)",
        "posembed.embed(tok, ids + 999, pos)",  # IndexError from the kernel's check
    ),
    "dropout_mask": (
        "",
        "posembed.dropout_mask((64, 256), 0.1, 5)",
        "posembed.dropout_mask((64, 256), 1.0, 5)",
    ),
    "windows": (
        "x = np.arange(20000, dtype=np.int32); off = np.array([0, 7000, 20000])",
        "posembed.windows(x, 512, step=384, offsets=off)",
        "posembed.windows(x, 512, step=384, offsets=off[::-1])",
    ),
    "window_layout": (
        "import dataclasses\n"
        "x = np.arange(20000, dtype=np.int32); off = np.array([0, 7000, 20000]); "
        "lay = posembed.window_layout(off, 512, step=384); "
        "long = np.where(np.arange(len(lay)) == 3, 513, lay.lengths); "
        "wrong = dataclasses.replace(lay, lengths=long)",
        "lay = posembed.window_layout(off, 512, step=384); "
        "lay.cut(x[7000:], windows=slice(int(lay.window_offsets[1]), None), token_start=7000)",
        "wrong.cut(x)",  # ValueError from the kernel's check of every window
    ),
    "gpt_samples": (
        "n = np.arange(1, 3000)",
        "s = posembed.gpt_samples(n, 64, num_samples=90_000, seed=3); "
        "s.samples(np.arange(8), (np.arange(int(n.sum())), np.cumsum(np.r_[0, n])))",
        "posembed.gpt_samples(n, 64, documents=np.array([0, 3000]))",  # the kernel's check
    ),
    "gpt_batch": (
        "import tempfile; n = np.arange(1, 300); off = np.cumsum(np.r_[0, n]); "
        "tok = (np.arange(int(n.sum())) % 7).astype(np.uint16); "
        "pre = tempfile.mkdtemp() + '/c'; posembed.write_indexed(pre, tok, off); "
        "ic = posembed.IndexedCorpus(pre, documents='sequences'); "
        "s = posembed.gpt_samples(n, 64, num_epochs=1, seed=3); "
        "bad = (tok, np.where(np.arange(len(off)) > 150, off + 1, off))",
        "posembed.gpt_batch(s, np.arange(16), (tok, off), eod=0, reset_attention_mask=True); "
        "s.batch(np.arange(4), ic, eod=0, reset_position_ids=True, attention_mask=True)",
        "posembed.gpt_batch(s, np.arange(len(s)), bad, eod=0)",  # the kernel's check
    ),
    "blending_indices": (
        "w = np.full(100, 1e-2)",
        "posembed.blending_indices(w, 5000)",
        "posembed.blending_indices(w * 2, 10)",
    ),
    "exhaustive_blending_indices": (
        "s = np.arange(100)",
        "posembed.exhaustive_blending_indices(s)",
        "posembed.exhaustive_blending_indices(s - 1)",
    ),
    "gpt_sample_index": (
        "n = np.arange(1, 3000, dtype=np.int32); d = np.arange(2999, dtype=np.int32)",
        "posembed.gpt_sample_index(n, d, 64, 1, int(n.sum()))",
        "posembed.gpt_sample_index(n, d + 1, 64, 1, int(n.sum()))",
    ),
    "stitch": (
        "w = posembed.windows(np.arange(5000), 256, step=192); v = np.ones(w.tokens.shape)",
        "posembed.stitch(v, w, reduce='mean')",
        "posembed.stitch(v, w, reduce='median')",
    ),
    "similarity": (
        "t = np.ones((128, 64), np.float32)",
        "posembed.similarity(t)",
        "posembed.similarity(t[0])",
    ),
    "resize_checkpoint": (
        "import os, tempfile\n"
        "from posembed.io import _safetensors\n"
        "d = tempfile.mkdtemp()\n"
        "src = os.path.join(d, 'a.safetensors')\n"
        "_safetensors.write_file(src, {'pos': np.zeros((16, 8), np.float32)})",
        "posembed.resize_checkpoint(src, os.path.join(d, 'b.safetensors'), 'pos', 40,"
        " overwrite=True)",
        "posembed.resize_checkpoint(src, os.path.join(d, 'c.safetensors'), 'nope', 40)",
    ),
    "merge_indexed": (
        "import tempfile; d = tempfile.mkdtemp(); n = np.arange(1, 40); "
        "off = np.cumsum(np.r_[0, n]); t = np.arange(int(n.sum())) % 9; "
        "posembed.write_indexed(d + '/a', t, off); posembed.write_indexed(d + '/b', t, off)",
        "posembed.merge_indexed([d + '/a', d + '/b'], d + '/m', force=True)",
        "posembed.merge_indexed([d + '/a', d + '/nothing'], d + '/n')",  # no such dataset
    ),
    "gpt_blend": (
        "a = np.arange(1, 400); b = np.arange(400, 1, -1)",
        "posembed.gpt_blend([('a', a), ('b', b)], [0.3, 0.7], split='90,8,2', "
        "sizes=[300, 20, 5], sequence_length=64)",
        "posembed.gpt_blend([a, b], [0.3, 0.7], split='90,-8', sizes=[3, 2, 1], "
        "sequence_length=64)",
    ),
    "split_ranges": (
        "",
        "posembed.split_ranges('969,30,1', 12345)",
        "posembed.split_ranges('969,30,1,5', 12345)",
    ),
    "write_megatron_cache": (
        "import tempfile; d = tempfile.mkdtemp(); a = np.arange(1, 300); "
        "blend = posembed.gpt_blend([('a', a), ('b', a)], [0.5, 0.5], split='90,8,2', "
        "sizes=[100, 10, 2], sequence_length=64)",
        "posembed.write_megatron_cache(blend, d, tokenizer={'class': 'tiny'})",
        "posembed.write_megatron_cache(blend, d, tokenizer=3)",
    ),
    "write_indexed": (
        "import os, tempfile\n"
        "d = tempfile.mkdtemp(); prefix = os.path.join(d, 'c')\n"
        "x = np.arange(5000) % 1000; off = np.array([0, 1000, 1000, 5000])",
        "posembed.write_indexed(prefix, x, off, append_eod=0, force=True)",
        "posembed.write_indexed(prefix, x, off[::-1], force=True)",
    ),
    "pack": (
        "n = np.arange(1, 3000) % 700; off = np.cumsum(np.r_[0, n]); x = np.arange(off[-1]) % 999; "
        "m = {'m': (x % 2).astype(np.uint8)}",
        "p = posembed.pack(n, 512); r = p.cut(x, off, labels=True); p.unpack(r.position_ids); "
        "p.cut(x, off, rows=[3, 1, 3], labels=True, columns=m, position_start=2)",
        "posembed.pack(n, 512).cut(x, off[::-1])",  # ValueError: the offsets do not fit
    ),
    "BatchOrder": (
        "o = posembed.BatchOrder(10**6, global_batch_size=4096, micro_batch_size=512, "
        "world_size=2, rank=1); s = o.state_dict(); bad = dict(s, consumed_samples=3)",
        "o.micro_batches(0, 16); o.global_batch(3); o.sample_at(np.arange(9000)); "
        "o.load_state_dict(s)",
        "o.load_state_dict(bad)",  # ValueError: not a micro-step boundary
    ),
    "Batches": (
        "n = np.arange(1, 300) % 70 + 1; off = np.cumsum(np.r_[0, n])\n"
        "x = np.arange(off[-1]) % 99\n"
        "s = posembed.gpt_samples(n, 64, num_samples=100)\n"
        "o = posembed.BatchOrder(s, global_batch_size=8, micro_batch_size=2, world_size=2)\n"
        "import itertools",
        "b = posembed.Batches(o, (x, off), prefetch=1, eod=0); "
        "list(itertools.islice(b, 3)); b.close(); b.load_state_dict(o.state_dict())",
        "posembed.Batches(o, (x, off[:-9]), eod=0)",  # ValueError: another corpus
    ),
    "IndexedCorpus": (
        "import os, tempfile\n"
        "d = tempfile.mkdtemp(); prefix = os.path.join(d, 'c')\n"
        "posembed.write_indexed(prefix, np.arange(5000) % 1000, [0, 1000, 1000, 5000])\n"
        "bad = os.path.join(d, 'bad')\n"
        "open(bad + '.idx', 'wb').write(open(prefix + '.idx', 'rb').read()[:-8])\n"
        "open(bad + '.bin', 'wb').close()",
        "c = posembed.IndexedCorpus(prefix); c[2]; c.read(10, 3000); c.to_arrays()",
        "posembed.IndexedCorpus(bad)",  # ValueError: the counts do not fit the file
    ),
}

PROBE = """
import gc, json, os
import numpy as np
import posembed
from posembed import _core

# small arrays, but every call above 4 KiB of output runs on a thread team,
# as large calls do
_core._probes.set_thresholds(4096, -1)

def anon_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

def fds():
    return len(os.listdir("/proc/self/fd"))

{setup}

def ok():
    {ok}

def bad():
    try:
        {bad}
    except (TypeError, ValueError, IndexError, FileNotFoundError):
        return
    raise AssertionError("the failing call did not fail")

def rounds(n):
    for _ in range(n):
        ok()
        bad()

rounds(200)  # warm-up
gc.collect()
before = (anon_kb(), fds())
rounds({calls})
gc.collect()
after = (anon_kb(), fds())
print(json.dumps({{"anon_kb": [before[0], after[0]], "fds": [before[1], after[1]]}}))
"""


def measure(setup: str, ok: str, bad: str) -> dict[str, list[int]]:
    code = PROBE.format(setup=setup, ok=ok, bad=bad, calls=2000)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, list[int]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@skip_if_sanitized
@pytest.mark.parametrize("name", sorted(CASES))
def test_repeated_calls_keep_memory_flat(name):
    result = measure(*CASES[name])
    before, after = result["anon_kb"]
    # 4000 calls: a leak of even 512 bytes a call would add 2 MB; allocator
    # noise (fragmentation, NumPy's caches) stays well within 1 MB
    assert after - before < 1024, f"{name}: anonymous memory grew by {after - before} KB"
    assert result["fds"][1] == result["fds"][0], f"{name}: open files {result['fds']}"


def test_every_public_function_is_covered():
    import posembed

    not_functions = {
        "GPTBatch",
        "GPTBlend",  # made by gpt_blend and measured with it
        "GPTBlendSplit",
        "GPTSamples",
        "LearnedPositionEmbedding",
        "MicroBatch",  # what iterating Batches gives, measured with it
        "PackPlan",  # made by pack and measured with it
        "PackedRows",
        "WindowLayout",
        "Windows",
        "__version__",
        "reference",
    }
    # runtime controls: no arrays, nothing allocated per call
    controls = {"config", "get_num_threads", "last_seed", "set_num_threads", "show_config"}
    assert set(posembed.__all__) - not_functions - controls == set(CASES)


@skip_if_sanitized
def test_the_probe_sees_a_planted_leak():
    # 512 bytes kept per call, and one file left open per failing call
    result = measure(
        "kept = []",
        "kept.append(bytearray(512))",
        "kept.append(open(os.devnull)); raise ValueError",
    )
    before, after = result["anon_kb"]
    assert after - before >= 1024
    assert result["fds"][1] - result["fds"][0] == 2000
