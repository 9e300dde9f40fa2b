"""examples/distributed.py under torchrun, one process per GPU: NCCL's all-reduce on torch's
stream, then a Go-compiled kernel and CuPy on a stream of streambridge, on both ranks."""

import os
import subprocess
import sys
from pathlib import Path

from _interop import framework
from test_two_gpus import two_devices

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "distributed.py"


def test_an_all_reduce_orders_a_go_kernel_and_cupy_on_every_rank():
    torch = framework("torch")
    framework("cupy")
    two_devices(torch)
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1",
               PYTHONUNBUFFERED="1")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(EXAMPLE)], capture_output=True, text=True, timeout=300, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    for rank in (0, 1):
        assert f"rank {rank} of 2: device {rank} (torch's {rank})" in r.stdout, out[-6000:]
    assert r.stdout.count(f"{1 << 22} of {1 << 22} elements equal 10") == 2, out[-6000:]
    print(r.stdout)
