"""``captum-prxai train``: fine-tune an encoder on an offline dataset (seeded, CPU)."""

from __future__ import annotations

import argparse
import os
import sys

HELP = "Fine-tune an encoder into a classifier on an offline dataset; saves it with a model card."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder", default="minilm",
                        help="encoder name (minilm, mpnet, smollm2) or local model folder (default: minilm)")
    parser.add_argument("--dataset", default="movie-sentences",
                        help="dataset name, see `captum-prxai datasets` (default: movie-sentences)")
    parser.add_argument("--name", help="model name in the cache (default: <encoder>-<dataset>)")
    parser.add_argument("--method", choices=("lora", "full"), default="lora",
                        help="low-rank adaptation (default) or full fine-tuning")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=None,
                        help="peak learning rate (default 1e-3 for lora, 5e-5 for full)")
    parser.add_argument("--max-length", type=int, default=None,
                        help="wordpiece budget (default: 64 for sentences, 512 for documents)")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-train", type=int, default=None, help="use only N training examples")
    parser.add_argument("--max-test", type=int, default=None, help="evaluate on N test examples")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after N steps")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--export-default", action="store_true",
                        help="write the adapter into captum_prxai/models/default (the shipped model)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a model already saved under --name (otherwise refused)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--pin-kernels", action="store_true",
                        help="pin the CPU kernels to AVX2 (ATEN_CPU_CAPABILITY, MKL_CBWR, ONEDNN_MAX_CPU_ISA), so that "
                             "the weights do not depend on whether the CPU has AVX-512; reruns the command in a fresh "
                             "process with them set")


def run(args: argparse.Namespace) -> int:
    from captum_prxai.models.train import TrainConfig, train_classifier

    lr = args.lr if args.lr is not None else (1e-3 if args.method == "lora" else 5e-5)
    cfg = TrainConfig(
        method=args.method, epochs=args.epochs, batch_size=args.batch_size, lr=lr,
        max_length=args.max_length, lora_rank=args.lora_rank, lora_alpha=2.0 * args.lora_rank,
        seed=args.seed, max_train=args.max_train, max_test=args.max_test,
        max_steps=args.max_steps, threads=args.threads, pin_kernels=args.pin_kernels,
    )
    cfg.validate()  # every number, before anything is loaded (the messages name the setting)
    if args.pin_kernels:
        from captum_prxai.models._cpu import PINNED_ENV, missing_pins

        if missing_pins():
            return _rerun_pinned(args._argv, PINNED_ENV)
    result = train_classifier(args.encoder, args.dataset, name=args.name, config=cfg,
                              export_default=args.export_default, progress=not args.no_progress,
                              overwrite=args.overwrite)
    card = result.card
    print(f"held-out accuracy: {result.accuracy:.4f} on {card['n_eval']} {card['dataset']} "
          f"{card['eval_split']} examples ({card['train_seconds']:.0f} s training)")
    print(f"saved: {result.path}")
    if result.adapter_path is not None:
        print(f"default adapter: {result.adapter_path} ({card['adapter_bytes'] / 1e6:.2f} MB), "
              f"accuracy after reload {card['exported_accuracy']:.4f}")
    return 0


def _rerun_pinned(argv: list, pins: dict) -> int:
    """Run ``captum-prxai <argv>`` again in a fresh Python process with ``pins`` in its environment.

    The kernel libraries read their variables at their first use, so they
    cannot be changed inside this process once it has computed anything.
    """
    import subprocess

    code = "import sys; from captum_prxai.cli import main; sys.exit(main(sys.argv[1:]))"
    print(f"pinning the CPU kernels ({' '.join(f'{k}={v}' for k, v in pins.items())}): training in a fresh process",
          file=sys.stderr, flush=True)
    child = subprocess.Popen([sys.executable, "-c", code, *argv], env={**os.environ, **pins})
    try:
        return child.wait()
    except KeyboardInterrupt:  # the child got the same signal: let it stop and report
        child.wait()
        return 130
