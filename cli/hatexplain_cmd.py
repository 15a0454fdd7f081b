r"""``attn-dyn train --dataset hatexplain``: the text FCAMs' half of the ``train`` command.

Vashisht & Ramaswamy (2023), Section 5, Appendix A.3 and Table 1 (rows
HateXplain-1 and -2). ``train`` (:mod:`.train_cmd`) parses every option and
hands the ones given here: :func:`train_hatexplain` fills a
:class:`~minimal_attn.backends.vr.hatexplain_table1.HateXplainConfig` (the
options not given keep its defaults), calls
:func:`~minimal_attn.backends.vr.hatexplain_table1.run_hatexplain` and prints.
torch is imported only when the run starts.
"""

import click

from minimal_attn.cli.options import (
    ProgressBar,
    config,
    echo_after,
    on_interrupt,
    parse_lr,
    parse_paradigms,
    parse_switch,
    resume_note,
    unused_warnings,
)
from minimal_attn.errors import InputError
from minimal_attn.experiments.run_folders import check_run_folder

#: TextTrainConfig's fields among the options (the others fill HateXplainConfig).
RUN_OPTIONS = ("embedding", "epochs", "hybrid_lr", "batch_size", "device", "threshold")


def train_hatexplain(given, out, resume, progress):
    """Train and report HateXplain's Table 1 rows from the options ``given`` (name -> value)."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise InputError(f"--dataset hatexplain needs torch ({exc}); install it (pip install "
                         "torch==2.13.0, then pip install \".[torch]\")") from None
    from minimal_attn.backends.vr.hatexplain_table1 import (
        HateXplainConfig,
        TextTrainConfig,
        run_hatexplain,
    )
    from minimal_attn.experiments.hatexplain_report import summary_markdown

    paradigms = parse_paradigms(given.get("paradigm"))
    train = config(TextTrainConfig, switch_epoch=parse_switch(given.get("switch_epoch")),
                   **{k: given.get(k) for k in RUN_OPTIONS})
    lr = given.get("lr")
    hx = config(HateXplainConfig, train=train, paradigms=paradigms and tuple(paradigms),
                seeds=given.get("seeds"), min_count=given.get("min_count"),
                threads=given.get("threads"), lr=None if lr is None else parse_lr(lr))
    warnings = unused_warnings(hx.paradigms, hx.lr, train.switch_epoch, train.hybrid_lr,
                               hybrid_uses=("sa",))
    check_run_folder(out, "train", resume)
    on_interrupt(lambda: resume_note(out, "--resume"))
    with ProgressBar(progress) as bar:
        results, meta = run_hatexplain(hx, given.get("data_dir"), out, resume, progress=bar,
                                       log=echo_after(warnings))
    click.echo(summary_markdown(results, meta), nl=False)
    if out is not None:
        click.echo(f"wrote results.json, config.json, history.jsonl, summary.csv, summary.md, "
                   f"heatmap_<paradigm>_<split>.png, instances_*.npz and checkpoints/ to {out}")
