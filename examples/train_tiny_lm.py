"""A real tiny transformer language model trained with MindSpore, monitored by mstop.

    python examples/train_tiny_lm.py --run-dir runs/demo --ranks 2 --steps 300

Each rank is its own process (``RANK_ID``/``RANK_SIZE`` set as msrun sets them)
training on its own shard of synthetic token sequences: the ranks stand in for
data-parallel ranks without needing a cluster (no collective communication
runs on CPU here). Sequences follow ``x[t] = (a*t + b) mod vocab`` with random
``a`` and ``b``, so attention can learn them and the loss falls well below
``ln(vocab)``. ``--data-delay SEC`` slows the input pipeline (to see data wait);
``--resume`` continues an earlier run from its last checkpoint.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--run-dir", required=True, help="where mstop's files go (created if missing)")
    ap.add_argument("--ranks", type=int, default=1, help="processes to start, one per rank (default: 1)")
    ap.add_argument("--steps", type=int, default=200, help="optimizer steps per rank (default: 200)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs the steps are split into (default: 2)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank per step (default: 8)")
    ap.add_argument("--seq-len", type=int, default=32, help="tokens per sequence (default: 32)")
    ap.add_argument("--vocab", type=int, default=64, help="vocabulary size (default: 64)")
    ap.add_argument("--dim", type=int, default=64, help="model width (default: 64)")
    ap.add_argument("--layers", type=int, default=2, help="transformer blocks (default: 2)")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (default: 4)")
    ap.add_argument("--lr", type=float, default=1e-2, help="peak learning rate (default: 1e-2)")
    ap.add_argument("--mode", choices=("graph", "pynative"), default="graph", help="MindSpore mode (default: graph)")
    ap.add_argument("--data-delay", type=float, default=0.0, metavar="SEC",
                    help="sleep per batch in the input pipeline, in seconds (default: 0)")
    ap.add_argument("--profile-steps", default=None, metavar="A:B",
                    help="run MindSpore's Profiler for steps A to B (mstop's profiler window)")
    ap.add_argument("--ckpt-every", type=int, default=0, metavar="STEPS",
                    help="save a checkpoint every STEPS steps (default: 0, never)")
    ap.add_argument("--resume", action="store_true", help="resume from the newest checkpoint in RUN_DIR/ckpt")
    ap.add_argument("--run-name", default="tiny-lm", help="run name recorded in the events (default: tiny-lm)")
    ap.add_argument("--note", default=None, help="a note recorded in the events")
    ap.add_argument("--seed", type=int, default=0, help="data and init seed (default: 0)")
    return ap.parse_args(argv)


def launch(args: argparse.Namespace, argv: list[str]) -> int:
    """Start one process per rank with msrun's environment and wait for all of them."""
    import signal
    import time

    # stopped from outside (mstop demo quitting, a dropped terminal): stop the ranks too, in the finally below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    procs = []
    for rank in range(args.ranks):
        env = dict(os.environ, RANK_ID=str(rank), RANK_SIZE=str(args.ranks), DEVICE_ID=str(rank))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv], env=env))
    try:
        while any(p.poll() is None for p in procs):  # poll() reaps each rank as it ends (no <defunct>)
            time.sleep(0.2)
        return max(p.returncode for p in procs)
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        return 130
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def train(args: argparse.Namespace) -> int:
    """Train this process's rank."""
    import mindspore as ms
    import numpy as np
    from mindspore import dataset as ds
    from mindspore import nn, ops
    from mindspore.train import CheckpointConfig, Model, ModelCheckpoint

    from mstop_writer import MstopCallback

    rank = int(os.environ.get("RANK_ID", "0"))
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(args.seed)

    class Block(nn.Cell):
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.heads, self.head_dim = heads, dim // heads
            self.ln1, self.ln2 = nn.LayerNorm((dim,)), nn.LayerNorm((dim,))
            self.qkv, self.proj = nn.Dense(dim, 3 * dim), nn.Dense(dim, dim)
            self.fc1, self.fc2, self.act = nn.Dense(dim, 4 * dim), nn.Dense(4 * dim, dim), nn.GELU()
            self.scale = 1.0 / math.sqrt(self.head_dim)

        def construct(self, x, mask):
            b, t, d = x.shape
            q, k, v = ops.split(self.qkv(self.ln1(x)), d, axis=-1)
            q = q.reshape(b, t, self.heads, self.head_dim).transpose(0, 2, 1, 3)
            k = k.reshape(b, t, self.heads, self.head_dim).transpose(0, 2, 3, 1)
            v = v.reshape(b, t, self.heads, self.head_dim).transpose(0, 2, 1, 3)
            att = ops.softmax(ops.matmul(q, k) * self.scale + mask, axis=-1)
            y = ops.matmul(att, v).transpose(0, 2, 1, 3).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    class TinyLM(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(args.vocab, args.dim)
            self.pos = nn.Embedding(args.seq_len, args.dim)
            self.blocks = nn.CellList([Block(args.dim, args.heads) for _ in range(args.layers)])
            self.ln = nn.LayerNorm((args.dim,))
            self.head = nn.Dense(args.dim, args.vocab)
            causal = np.triu(np.full((args.seq_len, args.seq_len), -1e9, np.float32), k=1)
            self.mask = ms.Tensor(causal)
            self.positions = ms.Tensor(np.arange(args.seq_len, dtype=np.int32))

        def construct(self, tokens):
            x = self.tok(tokens) + self.pos(self.positions)
            for block in self.blocks:
                x = block(x, self.mask)
            return self.head(self.ln(x))

    class LMLoss(nn.Cell):
        def __init__(self, net: nn.Cell) -> None:
            super().__init__(auto_prefix=False)
            self.net = net
            self.ce = nn.CrossEntropyLoss()

        def construct(self, tokens, targets):
            logits = self.net(tokens)
            return self.ce(logits.reshape(-1, args.vocab), targets.reshape(-1))

    steps_per_epoch = max(1, args.steps // args.epochs)

    class Sequences:
        """Random access (with a length), so MindSpore does not iterate it to count its size."""

        def __len__(self) -> int:
            return steps_per_epoch * args.batch

        def __getitem__(self, i: int):
            rng = np.random.default_rng((args.seed * 1000 + rank) * 10_000_019 + i)
            a, b = rng.integers(1, args.vocab), rng.integers(0, args.vocab)
            seq = ((a * np.arange(args.seq_len + 1) + b) % args.vocab).astype(np.int32)
            if args.data_delay:
                time.sleep(args.data_delay / args.batch)
            return seq[:-1], seq[1:]

    data = ds.GeneratorDataset(Sequences(), ["tokens", "targets"], shuffle=False).batch(args.batch)
    net = TinyLM()
    total = steps_per_epoch * args.epochs
    warm = max(1, total // 10)
    lrs = [args.lr * min(1.0, (i + 1) / warm) * 0.5 * (1 + math.cos(math.pi * i / total)) for i in range(total)]
    opt = nn.AdamWeightDecay(net.trainable_params(), learning_rate=lrs, weight_decay=0.01)
    model = Model(LMLoss(net), optimizer=opt)

    ckpt_dir = os.path.join(args.run_dir, "ckpt", f"rank{rank}")
    initial_epoch = 0
    if args.resume and os.path.isdir(ckpt_dir):
        files = sorted((f for f in os.listdir(ckpt_dir) if f.endswith(".ckpt")),
                       key=lambda f: os.path.getmtime(os.path.join(ckpt_dir, f)))
        if files:
            params = ms.load_checkpoint(os.path.join(ckpt_dir, files[-1]))
            params.pop("learning_rate", None)  # the schedule is rebuilt for the new step count
            ms.load_param_into_net(model.train_network, params)
            initial_epoch = int(params["global_step"].asnumpy().reshape(-1)[0]) // steps_per_epoch
    callbacks = []
    if args.ckpt_every:
        callbacks.append(ModelCheckpoint(prefix="tinylm", directory=ckpt_dir, config=CheckpointConfig(
            save_checkpoint_steps=args.ckpt_every, keep_checkpoint_max=3)))
    world = int(os.environ.get("RANK_SIZE", "1"))
    callbacks.append(MstopCallback(
        args.run_dir, run_name=args.run_name, note=args.note, seq_len=args.seq_len,
        samples_per_step=args.batch * world,  # global: every rank stands for a data-parallel rank
        n_layers=args.layers, n_heads=args.heads, head_dim=args.dim // args.heads,
        profile_steps=tuple(int(x) for x in args.profile_steps.split(":")) if args.profile_steps else None,
    ))
    if initial_epoch >= args.epochs:
        return 0
    model.train(args.epochs, data, callbacks=callbacks, dataset_sink_mode=False, initial_epoch=initial_epoch)
    callbacks[-1].close()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.ranks < 1 or args.steps < 1:
        print(f"{sys.argv[0]}: --ranks and --steps must be at least 1", file=sys.stderr)
        return 2
    if "RANK_ID" not in os.environ:
        return launch(args, argv)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
