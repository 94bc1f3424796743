"""A minimal hand-written Horovod training loop (the reference for horovod_overhead.py).

horovodrun -np N -H localhost:N --gloo python benchmarks/minimal_horovod_loop.py OUT.json \
    MODEL IMAGE_SIZE BATCH STEPS WARMUP THREADS [STEP_TIMES.json]
Rank 0 writes {"images_per_sec": ...} to OUT.json, and with STEP_TIMES.json the wall-clock time
(Unix seconds) at which each step, warm-up included, ended (horovod_autotune.py reads when
Horovod's autotuner finished from them).

It has no --smoke flag of its own: horovod_overhead.py launches it, and
`python benchmarks/horovod_overhead.py --smoke` runs it once at the smallest sizes
(tests/test_benchmarks.py does that).
"""

import json
import sys
import time

import horovod.torch as hvd
import torch
import torchvision.models as tvm


def main() -> None:
    out, model_name, size, batch, steps, warmup, threads = sys.argv[1:8]
    step_times = sys.argv[8] if len(sys.argv) > 8 else None
    ended = []
    size, batch, steps, warmup = int(size), int(batch), int(steps), int(warmup)
    torch.set_num_threads(int(threads))
    hvd.init()
    model = getattr(tvm, model_name)(weights=None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 1000, (batch,))

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if step_times:
            ended.append(time.time())

    for _ in range(warmup):
        step()
    hvd.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    hvd.barrier()
    elapsed = time.perf_counter() - start
    if hvd.rank() == 0:
        with open(out, "w") as fh:
            json.dump({"images_per_sec": hvd.size() * batch * steps / elapsed}, fh)
        if step_times:
            with open(step_times, "w") as fh:
                json.dump(ended, fh)


if __name__ == "__main__":
    main()
