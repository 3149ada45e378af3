"""64-bit sizes and offsets: more than 2^31 output elements, and windows over
more than 2^31 tokens, with memory near the output's size.

Each case runs in a fresh Python process (so its peak memory is its own) and
checks the values at both ends, where a 32-bit index would wrap.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from .conftest import SANITIZED, run_peak_rss

MB = 1 << 20


def run_case(code: str) -> dict[str, int]:
    """Run code in a fresh interpreter, measured alone (conftest.run_peak_rss);
    code ends by printing a JSON object; add the process's peak RSS in MB."""
    done, peak_kb = run_peak_rss([sys.executable, "-c", textwrap.dedent(code)])
    assert done.returncode == 0, done.stderr
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    result["peak_mb"] = peak_kb // 1024
    return result


def test_gather_more_than_2_31_output_elements():
    # a uint8 table of 4 rows x 64 Ki columns; 32769 positions give
    # 2^31 + 2^16 output bytes, so element indices pass 2^31
    code = """
        import json
        import numpy as np
        import posembed

        d = 1 << 16
        table = np.arange(4 * d, dtype=np.uint64).reshape(4, d).astype(np.uint8)
        table[:, -1] = [11, 22, 33, 44]
        rows = (1 << 15) + 1
        positions = np.arange(rows) % 4
        positions[-1] = 3
        out = posembed.gather(table, positions)
        assert out.shape == (rows, d) and out.size > 2**31
        ok = (
            np.array_equal(out[0], table[0])
            and np.array_equal(out[-1], table[3])
            and np.array_equal(out[rows // 2], table[positions[rows // 2]])
            and int(out[-1, -1]) == 44
            and int(out[-2, -1]) == int(table[positions[-2], -1])
        )
        # every row, checked a slice at a time (the comparison itself stays small)
        for at in range(0, rows, 256):
            ok = ok and np.array_equal(out[at:at + 256], table[positions[at:at + 256]])
        print(json.dumps({"ok": bool(ok), "out_mb": out.nbytes >> 20}))
    """
    result = run_case(code)
    assert result["ok"]
    assert result["out_mb"] == 2048  # and 64 KiB
    if not SANITIZED:  # ASan's shadow memory is not the library's (see conftest)
        # the output, the interpreter and NumPy (about 35 MB), and the checks' slices
        assert result["peak_mb"] < result["out_mb"] + 160


def test_windows_over_more_than_2_31_tokens(tmp_path):
    # 2^31 + 2^20 uint8 tokens in a sparse file, memory-mapped, in two
    # documents, the second starting past 2^31; windows of 2^16 with no
    # overlap: about 2 GiB of output, offsets and starts past 2^31.
    path = tmp_path / "tokens.bin"
    n = (1 << 31) + (1 << 20)
    boundary = (1 << 31) + 5
    marks = {0: 7, (1 << 31) - 1: 8, 1 << 31: 9, boundary: 10, n - 1: 11}
    with open(path, "wb") as f:
        f.truncate(n)
        for at, value in marks.items():
            f.seek(at)
            f.write(bytes([value]))
    code = f"""
        import json
        import numpy as np
        import posembed

        def rss_anon_mb():
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        return int(line.split()[1]) // 1024

        tokens = np.memmap({str(path)!r}, dtype=np.uint8, mode="r")
        n = tokens.shape[0]
        size = 1 << 16
        w = posembed.windows(tokens, size, offsets=np.array([0, {boundary}, n]), tail="shift")
        at = w.doc_offsets[w.documents] + w.starts  # each window's first token in the file
        seen = {{}}
        for mark in {sorted(marks)!r}:
            i = int(np.flatnonzero((at <= mark) & (mark < at + w.lengths))[0])
            seen[str(mark)] = int(w.tokens[i, mark - at[i]])
        doc1 = np.flatnonzero(w.documents == 1)
        out = {{
            "windows": len(w),
            "out_mb": w.tokens.nbytes >> 20,
            "anon_mb": rss_anon_mb(),
            "seen": seen,
            "doc1_start": int(w.starts[doc1[0]]),
            "doc1_first": int(w.tokens[doc1[0], 0]),
            "last_end_token": int(w.tokens[-1, -1]),
            "max_offset": int(at.max()),
        }}
        print(json.dumps(out))
    """
    result = run_case(code)
    assert result["seen"] == {str(k): v for k, v in marks.items()}  # 2^31 - 1, 2^31, ...
    assert result["doc1_start"] == 0
    assert result["doc1_first"] == 10  # token 2^31 + 5, where document 1 starts
    assert result["last_end_token"] == 11  # the shifted last window ends at token n - 1
    assert result["max_offset"] > 2**31
    assert result["out_mb"] >= 2048
    if not SANITIZED:  # ASan's shadow memory is not the library's (see conftest)
        # anonymous memory is the output (plus the interpreter and NumPy); the
        # file's pages are the kernel's page cache, mapped, not copied
        assert result["anon_mb"] < result["out_mb"] + 120
        assert result["peak_mb"] < result["out_mb"] + (n >> 20) + 160


@pytest.mark.parametrize("dtype", ["uint8", "int64"])
def test_offsets_past_2_31_in_every_index_dtype(dtype):
    # windows' offsets and starts are int64 whatever the tokens' dtype
    import numpy as np

    import posembed

    tokens = np.zeros(100, dtype=dtype)
    w = posembed.windows(tokens, 8, step=8, offsets=np.array([0, 50, 100], dtype=np.uint64))
    assert w.starts.dtype == w.lengths.dtype == w.documents.dtype == np.int64
    assert w.doc_offsets.dtype == np.int64
