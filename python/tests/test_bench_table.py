"""bench/table.py writes the table at the top of bench/RESULTS.md from one run's outputs
(bench/latest.sh on a GPU machine); here from a saved run (bench/testdata, the H100 run of
2026-11-25)."""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "testdata"


def table():
    spec = importlib.util.spec_from_file_location("bench_table", ROOT / "bench" / "table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_reads_every_ratio_and_every_benchmark_pair():
    t = table()
    text = t.section((DATA / "python_bench.txt").read_text(), (DATA / "c.txt").read_text(),
                     (DATA / "go.txt").read_text(), "one H100", "2026-11-25")
    assert ("| query | streambridge | 288 | cuda.core Event.is_done (it has no stream query) 289 | cuda.core "
            "Event.is_done (it has no stream query) 289, cupy 310, torch 723 | 225 | 0.99 (0.81) | 1.28 |  | 1.2 |") in text
    assert ("| host callback into Python, enqueue to run (median of 2000, idle stream) | streambridge | 16665 | "
            "cupy 17106 | cupy launch_host_func 17106 | 10864 | 0.97 | 1.53 |  | 1.2 |") in text
    assert ("| wrap | streambridge | 235 | cupy.from_external 812 | cupy.from_external 812, cupy 2822, torch 6606, "
            "cuda.core 10209 |  | 0.29 (0.31) |  |  | 1.2 |") in text, "no C floor for a wrap: the columns stay empty"
    assert "| Query | 224.9 | 480.9 | 2.14 |" in text
    assert "| WaitStream | 364.6 | 421.1 | 1.16 |" in text  # against C's record+wait, the same two calls
    ratios = sum(line.startswith("  ratio ") for line in (DATA / "python_bench.txt").read_text().splitlines())
    assert text.count("\n| ") - 2 - 7 == ratios  # a row per ratio; two header rows; seven Go/C pairs


OVER_C = "\nstreambridge over C in this process (the same objects, the same driver state, the same rounds):\n"


@pytest.mark.parametrize("py, c, row", [
    # python_bench.py's lines for bench/inproc.c, the C floor run inside its own process (a
    # row of its operation, no peer), and their ratio lines after the profile
    ("record+wait:\n  C in this process: record+wait on the same streams and event    500 ns\n"
     "  cuda.core    1000 ns\n  streambridge    800 ns\n"
     "  ratio streambridge / fastest peer (cuda.core): 0.80 (best rounds: 0.79)  [bar 1.2]\n" + OVER_C +
     "  record+wait (streambridge): 800 ns against C's 500 ns: 1.60 (best rounds: 1.55)  [bar 1.5]\n",
     "BenchmarkRecordWait\t1\t400.0 ns/op\n",
     "| record+wait | streambridge | 800 | cuda.core 1000 | cuda.core 1000 | 400 | 0.80 (0.79) | 2.00 | 1.60 (1.55) | 1.2 |"),
    # the callback section: C's host function takes turns with the two, and its ratio line
    # has no best rounds (the samples take turns instead of rounds)
    ("host callback into Python, enqueue to run (median of 2000, idle stream):\n"
     "  C in this process: a C host function on the same stream    10000 ns\n"
     "  streambridge launch_host_func    12500 ns\n  cupy launch_host_func    15000 ns\n"
     "  ratio streambridge / cupy: 0.83  [bar 1.2]\n" + OVER_C +
     "  host callback into Python, enqueue to run (median of 2000, idle stream) (streambridge): "
     "12500 ns against C's 10000 ns: 1.25  [bar 1.5]\n",
     "BenchmarkHostFuncLatency\t1\t9000.0 ns/op\n",
     "| host callback into Python, enqueue to run (median of 2000, idle stream) | streambridge | 12500 | "
     "cupy 15000 | cupy launch_host_func 15000 | 9000 | 0.83 | 1.39 | 1.25 | 1.2 |"),
    # a spelling with parentheses of its own (the borrowed streams' C floor, on torch's streams)
    ("record+wait:\n  C in this process: record+wait on torch's two streams, as the borrowed spelling    550 ns\n"
     "  cuda.core    1000 ns\n  streambridge, borrowed streams (identity checked)    900 ns\n"
     "  ratio streambridge, borrowed streams (identity checked) / fastest peer (cuda.core): 0.90 (best rounds: 0.88)"
     "  [bar 1.2]\n" + OVER_C +
     "  record+wait (streambridge, borrowed streams (identity checked)): 900 ns against C's 550 ns: 1.64 "
     "(best rounds: 1.60)  [bar 1.5]\n",
     "BenchmarkRecordWait\t1\t450.0 ns/op\n",
     "| record+wait | streambridge, borrowed streams (identity checked) | 900 | cuda.core 1000 | cuda.core 1000 | 450 "
     "| 0.90 (0.88) | 2.00 | 1.64 (1.60) | 1.2 |"),
    # each round's ratio's median (by round) beside the best rounds', in the same brackets
    ("record+wait:\n  C in this process: record+wait on the same streams and event    500 ns\n"
     "  cuda.core    1000 ns\n  streambridge    800 ns\n"
     "  ratio streambridge / fastest peer (cuda.core): 0.80 (best rounds: 0.79; by round: 0.81)  [bar 1.2]\n" + OVER_C +
     "  record+wait (streambridge): 800 ns against C's 500 ns: 1.60 (best rounds: 1.55; by round: 1.58)  [bar 1.5]\n",
     "BenchmarkRecordWait\t1\t400.0 ns/op\n",
     "| record+wait | streambridge | 800 | cuda.core 1000 | cuda.core 1000 | 400 | 0.80 (0.79; 0.81) | 2.00 | "
     "1.60 (1.55; 1.58) | 1.2 |"),
])
def test_the_c_loops_in_the_benchmarks_process_give_their_own_column(py, c, row):
    assert row in table().section(py, c, "", "one H100", "2026-11-26")


def test_throughput_rows_pair_by_goroutine_count():
    # bench/run.sh's throughput rounds, in the shapes the C program and Go's testing print
    c = "BenchmarkRecordWaitThroughput/goroutines=4\t2000000\t150.0 ns/op\t6666667 calls/s\n"
    go = ("BenchmarkRecordWaitThroughput/goroutines=4-16\t2000000\t165.0 ns/op\t6060606 calls/s\t0 B/op\t0 allocs/op\n"
          "BenchmarkQueryThroughput/goroutines=16-16\t2000000\t40.0 ns/op\t25000000 calls/s\t0 B/op\t0 allocs/op\n")
    text = table().section("", c, go, "one H100", "2026-11-25")
    assert "| RecordWaitThroughput/goroutines=4 | 150.0 | 165.0 | 1.10 |" in text
    assert "QueryThroughput" not in text  # no C row to pair it with


def test_the_c_loops_in_gos_process_pair_with_gos_rows():
    # bench/run.sh's Go rounds: Go's BenchmarkInProcessC runs bench/inproc.c's loops taking turns
    # with Go's (its go-ns/op), and BenchmarkInProcessCThroughput C's threads with Go's goroutines
    c = "BenchmarkRecordWait\t2000000\t574.0 ns/op\nBenchmarkQuery\t2000000\t290.0 ns/op\n"
    go = ("BenchmarkRecordWait\t2000000\t605.0 ns/op\t0 B/op\t0 allocs/op\n"
          "BenchmarkInProcessC/RecordWait\t2000000\t400.0 ns/op\t520.0 go-ns/op\t480.0 raw-ns/op\n"
          "BenchmarkQuery\t2000000\t290.0 ns/op\t0 B/op\t0 allocs/op\n"
          "BenchmarkRecordWaitThroughput/goroutines=2\t2000000\t500.0 ns/op\t0 B/op\t0 allocs/op\n"
          "BenchmarkInProcessCThroughput/RecordWaitThroughput/goroutines=2\t2000000\t400.0 ns/op\t480.0 go-ns/op\n")
    c += "BenchmarkRecordWaitThroughput/goroutines=2\t2000000\t450.0 ns/op\t4444444 calls/s\n"
    text = table().section("", c, go, "one H100", "2026-11-26")
    # Go, and its driver calls without the layer (Raw), over C in the same turns
    assert "| RecordWait | 574.0 | 605.0 | 1.05 | 400.0 | 1.30 | 1.20 |" in text
    assert "| RecordWaitThroughput/goroutines=2 | 450.0 | 500.0 | 1.11 | 400.0 | 1.20 |  |" in text  # in turns too
    assert "| Query | 290.0 | 290.0 | 1.00 |  |  |  |" in text  # no loop of C's beside it in Go's process
    assert "relaxed around it" not in text  # no relaxed query of C's in these turns
    assert "| InProcessC/" not in text  # a column of Go's rows, not a row of its own
    # rounds: each round's Go over C in its own turns, then their median (not a ratio of medians)
    turns = "".join(f"BenchmarkInProcessC/Query\t100\t{c_ns} ns/op\t{go_ns} go-ns/op\t{rel_ns} relaxed-ns/op\n"
                    for c_ns, go_ns, rel_ns in [(200.0, 230.0, 210.0), (100.0, 200.0, 110.0), (300.0, 330.0, 360.0)])
    assert table().beside_go(turns) == {"Query": (200.0, {"go": 1.15, "relaxed": 1.1})}
    assert "took 1.10 of C's bare query" in table().section("", "BenchmarkQuery\t1\t200.0 ns/op\n", turns, "x", "y")


def test_the_update_replaces_the_section_and_nothing_else(tmp_path):
    results = tmp_path / "RESULTS.md"
    shutil.copy(ROOT / "bench" / "RESULTS.md", results)
    before = results.read_text()
    args = [sys.executable, str(ROOT / "bench" / "table.py"), "--python", str(DATA / "python_bench.txt"),
            "--c", str(DATA / "c.txt"), "--go", str(DATA / "go.txt"), "--machine", "a test", "--date", "2000-01-01",
            "--update", str(results)]
    subprocess.run(args, check=True)
    once = results.read_text()
    subprocess.run(args, check=True)
    assert results.read_text() == once
    t = table()
    outside = lambda s: s[:s.index(t.BEGIN)] + s[s.index(t.END):]  # noqa: E731
    assert outside(once) == outside(before)
    assert "## Latest: a test, 2000-01-01" in once


def test_by_round_is_the_median_of_each_rounds_ratio():
    spec = importlib.util.spec_from_file_location("python_bench", ROOT / "bench" / "python_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # a host at two speeds, the peer's third round at the slow one: the medians' ratio says
    # 0.53 (310 over 580), each round's 1.03
    ours, theirs = [300.0, 600.0, 310.0], [290.0, 580.0, 600.0]
    assert bench.by_round(ours, theirs) == pytest.approx(300 / 290)
    assert bench.by_round([300.0, 100.0, 200.0], [100.0, 200.0, 300.0]) == pytest.approx(2 / 3)  # paired by round, not by rank
    with pytest.raises(ValueError):
        bench.by_round([1.0], [1.0, 2.0])  # a round without its pair


def test_threads_ns_runs_every_pair_on_the_threads_own_objects():
    spec = importlib.util.spec_from_file_location("python_bench", ROOT / "bench" / "python_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import threading
    made, seen, entered, made_on = [], [], [], []

    def make():  # on each worker, after its enter(): its objects are its own (docs/lifetimes.md)
        made_on.append((threading.get_ident(), threading.get_ident() in entered))
        made.append(object())
        return (made[-1],)

    def pairs(o, k):  # k pairs, in one call on the thread
        for _ in range(k):
            seen.append((threading.get_ident(), o))

    ns = bench.threads_ns(make, pairs, 4, 1000, enter=lambda: entered.append(threading.get_ident()))
    assert ns > 0 and len(seen) == 1000 and len(made) == 4 and len(set(entered)) == 4
    assert sorted(ident for ident, _ in made_on) == sorted(entered) and all(after for _, after in made_on)
    assert {ident for ident, _ in seen} == set(entered)
    by_thread = {}
    for ident, o in seen:
        by_thread.setdefault(ident, set()).add(id(o))
    assert sorted(map(len, by_thread.values())) == [1, 1, 1, 1]  # each thread used one object, its own
    assert len({next(iter(v)) for v in by_thread.values()}) == 4


def test_where_gives_each_sample_to_the_driver_the_interpreter_or_the_core():
    # bench/where.py over py-spy's raw samples (bench/profile.sh): libc and CPython belong
    # to whoever called them; the import is left out
    spec = importlib.util.spec_from_file_location("bench_where", ROOT / "bench" / "where.py")
    where = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(where)
    raw = "\n".join([
        "<module> (hot_loops.py:21);stream_record (stream_calls.inc:176);0x7f01 (libcuda.so.580.159.04);"
        "pthread_mutex_lock (libc.so.6) 6",
        "<module> (hot_loops.py:21);stream_record (stream_calls.inc:176);gate (gate.inc:18);"
        "__tls_get_addr (ld-linux-x86-64.so.2) 2",
        "<module> (hot_loops.py:22);_PyObject_MakeTpCall (python3.12);malloc (libc.so.6) 3",
        "0x7f02 (libc.so.6) 1",
        "<module> (hot_loops.py:9);_find_and_load (<frozen importlib._bootstrap>:1178);<module> (x.py:1) 50",
        "",
    ])
    owners, core, total = where.attribute(raw)
    assert total == 12
    assert owners == {where.DRIVER: 6, where.CORE: 2, where.INTERPRETER: 3, where.UNKNOWN: 1}
    assert core == {"gate": 2}


def test_the_c_loops_python_calls_are_declared_once_in_inproc_c():
    # python_bench.py takes each function's ctypes signature from bench/inproc.c's definition
    # (Go's TestInprocessCSignatures holds Go's declarations to the same): every loop it calls
    # is defined there, with as many arguments as it passes
    import ctypes
    import re

    spec = importlib.util.spec_from_file_location("python_bench", ROOT / "bench" / "python_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    signatures = bench.inproc_signatures((ROOT / "bench" / "inproc.c").read_text())
    assert signatures["record_wait_ns"] == (ctypes.c_double, [ctypes.c_void_p] * 3 + [ctypes.c_long])
    source = (ROOT / "bench" / "python_bench.py").read_text()
    calls = re.findall(r"floor\.(\w+)\(([^()]*(?:\([^()]*\))?[^()]*)\)", source)
    assert {name for name, _ in calls} >= {"record_wait_ns", "query_ns", "event_query_ns", "host_func_latency_once_ns"}
    for name, args in calls:
        assert len(args.split(",")) == len(signatures[name][1]), (name, args)
    assert "floor.event_create_destroy_ns" in source  # passed as a function of n, not called here
    assert signatures["event_create_destroy_ns"][1] == [ctypes.c_long]


def test_each_hot_loop_runs_as_profile_sh_runs_it(driver_name):
    # bench/profile.sh asks hot_loops.py for its loops (--list) and runs each alone in a
    # process, on the driver the tests run on: each must run, but the borrowed query where
    # the layout cannot be learned, which must be refused as unprovable, as designed; an
    # unknown loop must be refused with the names of those there are
    script = str(ROOT / "bench" / "hot_loops.py")
    listed = subprocess.run([sys.executable, script, "--list"], capture_output=True, text=True, check=True)
    loops = listed.stdout.split()
    assert {"record-wait", "wait-stream", "query", "query-borrowed", "event-create"} <= set(loops)
    for loop in loops:
        ran = subprocess.run([sys.executable, script, loop, "5"], capture_output=True, text=True)
        if loop == "query-borrowed" and os.environ.get("STREAMBRIDGE_LAYOUT") == "unlearnable":
            assert ran.returncode == 1 and "could not be learned" in ran.stderr, (driver_name, ran.stderr)
        else:
            assert ran.returncode == 0, (driver_name, loop, ran.stderr)
    # as perf sampled it (docs/lifetimes.md): on a worker thread of its own, pinned, its mean printed
    cpu = str(min(os.sched_getaffinity(0)))
    worker = subprocess.run([sys.executable, script, "record-wait", "5", "--worker", "--cpu", cpu],
                            capture_output=True, text=True)
    assert worker.returncode == 0, (driver_name, worker.stderr)
    assert worker.stdout.startswith("record-wait: ") and " ns a round, CPython " in worker.stdout, worker.stdout
    refused = subprocess.run([sys.executable, script, "no-such-loop", "5"], capture_output=True, text=True)
    assert refused.returncode == 2
    assert "no loop 'no-such-loop'" in refused.stderr and ", ".join(loops) in refused.stderr


def test_call_parts_measures_every_column_and_sets_bare_back(tmp_path):
    # bench/call_parts.py on the software driver, C's pair and the context stubbed, and
    # bench/bare_ext.c built here over a stub libcuda.so.1 that counts its calls: every column
    # is measured, and bare's own columns (by name, and with atomics) call the stub, the one
    # through the core's entry points does not (use() set back after it).
    if shutil.which("cc") is None:
        pytest.fail("no C compiler here: bench/bare_ext.c is built with cc")
    (tmp_path / "stub.c").write_text(
        "long calls;\n"
        "int cuEventRecord(void *e, void *s) { calls++; return 0; }\n"
        "int cuStreamWaitEvent(void *s, void *e, unsigned f) { calls++; return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", str(tmp_path / "stub.c"), "-o", str(tmp_path / "libcuda.so.1")], check=True)
    program = f"""
import ctypes, sys
sys.path.insert(0, {str(ROOT / "bench")!r})
import call_parts
class Floor:
    def throughput_ns(self, ctx, query, threads, n):
        return 100.0
call_parts.inprocess_c = lambda: Floor()
class Context:
    def cuCtxGetCurrent(self, out):
        out._obj.value = 1
        return 0
cdll = ctypes.CDLL
ctypes.CDLL = lambda name, *a, **k: Context() if name == "libcuda.so.1" else cdll(name, *a, **k)
sys.argv = ["call_parts.py", "--rounds", "2", "--n", "500"]
call_parts.main()
print("stub calls", ctypes.c_long.in_dll(cdll("libcuda.so.1"), "calls").value)
"""
    env = dict(os.environ, STREAMBRIDGE_DRIVER="sim", LD_LIBRARY_PATH=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    header, _, values = done.stdout.splitlines()[1:4]
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns == ["record_wait", "records", "waits", "queries", "sizeofs", "counts", "record_wait, inherited",
                       "bare record_wait", "bare, the core's entries", "bare, 1 atomic a call", "bare, 4 atomics a call"]
    assert all(float(v) > 0 for v in values.strip("|").split("|"))
    assert done.stdout.splitlines()[-1] == f"stub calls {2 * 2 * 500 * 3}"  # 2 rounds, 500 pairs, 3 columns
