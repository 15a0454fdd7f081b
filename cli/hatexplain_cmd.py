r"""``attn-dyn train-text``: the HateXplain text FCAM with SA, HA, LV and the hybrid.

Vashisht & Ramaswamy (2023), Section 5, Appendix A.3 and Table 1 (rows
HateXplain-1 and -2). ``attn-dyn train --dataset hatexplain ...`` is routed
here by the group (cli/main.py). Parses options into a
:class:`~minimal_attn.backends.vr.text_train.HateXplainConfig`, calls
:func:`~minimal_attn.backends.vr.text_train.run_hatexplain` and prints.
torch is imported only when the command runs.
"""

import click

from minimal_attn.cli.options import (
    ProgressBar,
    echo_after,
    on_interrupt,
    parse_lr,
    parse_paradigms,
    parse_switch,
    progress_option,
    resume_note,
    unused_warnings,
)
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
@click.option("--lr", default=None,
              help="Learning rate: one number for every paradigm, or per paradigm, e.g. "
                   "sa=0.05,lv=0.2 (hybrid: its SA phase, else sa's) [default: Appendix "
                   "A.3: SA 0.1, HA 0.1, LV 0.3].")
@click.option("--hybrid-lr", type=float, default=None,
              help="Hybrid: learning rate of its HA phase [default: 0.01].")
@click.option("--batch-size", type=int, default=128, show_default=True,
              help="Posts per step (not in the paper; smaller batches make LV at lr 0.3 "
                   "diverge).")
@click.option("--switch-epoch", default=None,
              help="Hybrid: first epoch of HA (SA before), or auto: when SA's mean a_z* has "
                   "risen and stalled [default: epochs // 2].")
@click.option("--threshold", type=float, default=0.8, show_default=True,
              help="SAIF threshold tau (a_z* > tau and s_y > tau).")
@click.option("--min-count", type=int, default=2, show_default=True,
              help="Words seen fewer times in the training split become <unk>.")
@progress_option("A progress bar per epoch (stderr, on a terminal); one line per epoch is "
                 "printed either way (and appended to OUT/history.jsonl).")
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
        from minimal_attn.backends.vr.text_train import (
            HateXplainConfig,
            TextTrainConfig,
            run_hatexplain,
        )
    except ImportError as exc:
        raise InputError(f"train-text needs torch ({exc}); install it (pip install torch)") \
            from None
    from minimal_attn.experiments.hatexplain_report import summary_markdown

    config = HateXplainConfig(
        train=TextTrainConfig(embedding=embedding, epochs=epochs, hybrid_lr=hybrid_lr,
                              batch_size=batch_size, switch_epoch=parse_switch(switch_epoch),
                              device=device, threshold=threshold),
        paradigms=tuple(paradigms), seeds=seeds, min_count=min_count, threads=threads,
        lr=None if lr is None else parse_lr(lr))
    warnings = unused_warnings(paradigms, config.lr, switch_epoch, hybrid_lr,
                               hybrid_uses=("sa",))
    on_interrupt(lambda: resume_note(out, "--resume"))
    with ProgressBar(progress) as bar:
        results, meta = run_hatexplain(config, data_dir, out, resume, progress=bar,
                                       log=echo_after(warnings))
    click.echo(summary_markdown(results, meta), nl=False)
    if out is not None:
        click.echo(f"wrote results.json, config.json, history.jsonl, summary.csv, summary.md, "
                   f"heatmap_<paradigm>_<split>.png, instances_*.npz and checkpoints/ to {out}")
