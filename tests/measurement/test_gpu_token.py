"""The GPU shared by a token between the measuring kernel and the compile processes (``measurement.gpu_token``)."""

import subprocess
import sys
import textwrap
import time

from bench_utils.measurement import gpu_token
from bench_utils.measurement.gpu_token import COMPILING, MEASURING, GpuToken, holdings, overlaps

# another process: holds the token 8 times for 0.05 s, as a compile process holds it for its GPU phases
HOLDER = textwrap.dedent("""
    import sys, time
    from bench_utils.measurement import gpu_token
    gpu_token.use(sys.argv[1], gpu_token.COMPILING)
    for _ in range(8):
        with gpu_token.window("compiled code run"):
            time.sleep(0.05)
        time.sleep(0.01)
""")


def test_no_compile_phase_of_another_process_overlaps_a_measuring_window(tmp_path):
    path = tmp_path / gpu_token.TOKEN_FILE
    other = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)])
    try:
        gpu_token.use(path, MEASURING)
        deadline = time.monotonic() + 60
        while len(holdings(GpuToken(path, MEASURING).log_path)) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # the other process is holding it by now
        for _ in range(6):
            with gpu_token.window("timed runs"):
                with gpu_token.window("memory probe"):  # nested: the outer window's holding
                    time.sleep(0.04)
    finally:
        gpu_token.use(None, MEASURING)
        other.wait(timeout=60)
    entries = holdings(path.with_name(path.name + ".log"))
    roles = [entry["role"] for entry in entries]
    assert roles.count(COMPILING) == 8 and roles.count(MEASURING) == 6  # nested windows logged once
    assert overlaps(entries) == []
    # they did contend: someone waited for the other (the measuring side, at least once, or the compile side)
    assert sum(entry["waited_s"] for entry in entries) > 0.01
    assert min(e["start"] for e in entries if e["role"] == MEASURING) < max(e["end"] for e in entries
                                                                          if e["role"] == COMPILING)


def test_overlaps_name_each_compile_phase_inside_a_measuring_window():
    window = {"role": MEASURING, "what": "timed runs", "start": 10.0, "end": 20.0}
    inside = {"role": COMPILING, "what": "compiled code run", "start": 19.5, "end": 21.0}
    after = {"role": COMPILING, "what": "inductor benchmark", "start": 20.0, "end": 22.0}
    assert overlaps([window, inside, after]) == [(inside, window)]


def test_without_a_token_a_window_holds_nothing_and_waits_nothing(tmp_path):
    gpu_token.use(tmp_path / "used", MEASURING)
    gpu_token.use(None, MEASURING)  # a kernel without compile processes beside it: no token from now on
    with gpu_token.window("timed runs"):
        pass
    assert gpu_token.waited_s() == 0.0 and not (tmp_path / "used").exists() and not (tmp_path / "used.log").exists()
    token = GpuToken(tmp_path / "t", COMPILING)
    with token.held("a"):
        pass
    assert [entry["what"] for entry in holdings(token.log_path)] == ["a"] and token.waited_s < 0.5
    (tmp_path / "t.log").write_text('{"role": "compiling", "what": "b", "start": 1, "end": 2}\n{"role": "meas')
    assert len(holdings(token.log_path)) == 1  # a holder killed mid-write leaves half a line: left out
