r"""``attn-dyn train-text``: the HateXplain text FCAM with SA, HA, LV and the hybrid.

Vashisht & Ramaswamy (2023), Section 5, Appendix A.3 and Table 1 (rows
HateXplain-1 and -2). Parses options into a
:class:`~minimal_attn.backends.text_fcam_train.HateXplainConfig`, calls
:func:`~minimal_attn.backends.text_fcam_train.run_hatexplain` and prints.
torch is imported only when the command runs.
"""

import click

from minimal_attn.cli.options import parse_paradigms
from minimal_attn.errors import InputError


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--backend", type=click.Choice(["torch"]), default="torch", show_default=True,
              help="The text FCAM is trained with torch only.")
@click.option("--dataset", type=click.Choice(["hatexplain"]), default="hatexplain",
              show_default=True)
@click.option("--data-dir", type=click.Path(), required=True,
              help="Folder (or file) with hatexplain_binary.jsonl or the original "
                   "dataset.json, and post_id_divisions.json.")
@click.option("--embedding", type=click.Choice(["standard", "self-attention"]),
              default="standard", show_default=True,
              help="standard: HateXplain-1; self-attention: HateXplain-2 (Appendix A.3).")
@click.option("--paradigm", default="all", show_default=True,
              help="sa, ha, lv, hybrid (comma-separated) or all.")
@click.option("--epochs", type=int, default=10, show_default=True,
              help="Epochs for every paradigm (the hybrid: SA then HA).")
@click.option("--seeds", type=int, default=1, show_default=True,
              help="Number of training seeds (0..S-1): initialisation and batch order.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for results.json, config.json, summary.csv/.md, heat maps, "
                   "per-post scores and checkpoints/.")
@click.option("--resume", is_flag=True,
              help="Continue from the checkpoints in --out (runs without one start fresh).")
@click.option("--device", default="auto", show_default=True,
              help="torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:K.")
@click.option("--threads", type=int, default=None,
              help="torch CPU threads [default: torch's choice].")
@click.option("--lr", type=float, default=None,
              help="Learning rate for every paradigm (hybrid: its SA phase) [default: "
                   "Appendix A.3: SA 0.1, HA 0.1, LV 0.3].")
@click.option("--hybrid-lr", type=float, default=None,
              help="Hybrid: learning rate of its HA phase [default: 0.01].")
@click.option("--batch-size", type=int, default=128, show_default=True,
              help="Posts per step (not in the paper; smaller batches make LV at lr 0.3 "
                   "diverge).")
@click.option("--switch-epoch", type=int, default=None,
              help="Hybrid: first epoch of HA (SA before) [default: epochs // 2].")
@click.option("--threshold", type=float, default=0.8, show_default=True,
              help="SAIF threshold tau (a_z* > tau and s_y > tau).")
@click.option("--min-count", type=int, default=2, show_default=True,
              help="Words seen fewer times in the training split become <unk>.")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="A progress bar over all epochs of all runs (stderr).")
def train_text(backend, dataset, data_dir, embedding, paradigm, epochs, seeds, out, resume,
               device, threads, lr, hybrid_lr, batch_size, switch_epoch, threshold, min_count,
               progress):
    """Train the HateXplain text FCAM with sa/ha/lv/hybrid; accuracy and SAIF (Table 1).

    The annotators' rationale is the true foreground: a_z* is the attention
    summed over the rationale tokens. Posts without a rationale count for
    accuracy and are left out of SAIF. The table puts the paper's Table 1 row
    (HateXplain-1 or -2, 3-class) beside ours (binary on the shared data).

    \b
    Example:
      attn-dyn train-text --data-dir ../shared/data/hatexplain --embedding standard
          --paradigm all --epochs 10 --seeds 3 --out runs/hatexplain1
    """
    paradigms = parse_paradigms(paradigm)
    try:
        from minimal_attn.backends.text_fcam_train import (
            HateXplainConfig,
            TextTrainConfig,
            run_hatexplain,
        )
    except ImportError as exc:
        raise InputError(f"train-text needs torch ({exc}); install it (pip install torch)") \
            from None
    config = HateXplainConfig(
        train=TextTrainConfig(embedding=embedding, epochs=epochs, lr=lr, hybrid_lr=hybrid_lr,
                              batch_size=batch_size, switch_epoch=switch_epoch,
                              device=device, threshold=threshold),
        paradigms=tuple(paradigms), seeds=seeds, min_count=min_count, threads=threads)
    total = len(paradigms) * max(seeds, 1) * max(epochs, 1)
    bars = []                            # opened at the first epoch: an early error prints alone

    def report(record):
        if record["event"] == "epoch":
            if progress and not bars:
                bars.append(click.progressbar(length=total, label="training",
                                              file=click.get_text_stream("stderr")))
                bars[0].__enter__()
            if bars:
                bars[0].update(1)
            return
        click.echo(("\n" if bars else "") + f"{record['paradigm']} seed {record['seed']}: "
                   + ", ".join(
            f"{s} accuracy {100 * record[s + '_accuracy']:.1f}% SAIF "
            f"{100 * record[s + '_saif']:.1f}%" for s in ("train", "test"))
            + f" ({record['seconds']:.1f} s)", err=True)

    from minimal_attn.hatexplain_report import summary_markdown

    try:
        results, meta = run_hatexplain(config, data_dir, out, resume, report)
    finally:
        if bars:
            bars[0].__exit__(None, None, None)
    click.echo(summary_markdown(results, meta), nl=False)
    if out is not None:
        click.echo(f"wrote results.json, config.json, summary.csv, summary.md, "
                   f"heatmap_<paradigm>_<split>.png, instances_*.npz and checkpoints/ to {out}")
