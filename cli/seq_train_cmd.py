"""``attn-dyn train-seq``: train one LSTM attention model of Snell et al. (2021), resumable."""

import os

import click

from minimal_attn.backends.snell.config import ATTENTIONS, SeqTrainConfig
from minimal_attn.cli.options import (
    CONTEXT,
    ProgressBar,
    default,
    echo_line,
    on_interrupt,
    resume_note,
)
from minimal_attn.cli.seq_options import agreement_config, data_and_model_options, paradigm_options


@click.command(context_settings=CONTEXT)
@data_and_model_options
@paradigm_options
@click.option("--attention", type=click.Choice(ATTENTIONS),
              default=default(SeqTrainConfig, "attention"), show_default=True,
              help="learned (standard), uniform over real tokens (A.7) or frozen: only the "
                   "attention layer trains (A.6).")
def train_seq(out, progress, paradigm, switch_step, attention, **options):
    """Train one translation or classification model with attention.

    Evaluates at the paper's steps and writes, in --out: history.json
    (validation accuracy / token accuracy / BLEU per step), eval_<step>.npz
    (alpha, probe beta, saliency delta per validation example), config.json and
    checkpoint.pt; running again with the same --out continues the run.

    \b
    Example:
      attn-dyn train-seq --dataset sst2 --data-dir DIR --attention uniform \\
          --out runs/sst2_uniform --steps 1000 --hidden 64
    """
    from minimal_attn.backends.snell.agreement import train_one

    config = agreement_config(options, paradigm, switch_step)
    on_interrupt(lambda: resume_note(out))      # running the same command continues
    with ProgressBar(progress) as bar:
        result = train_one(config, attention, out, progress=bar, log=echo_line)
    click.echo("step\tval_perf\tval_bleu")
    for h in result["history"]:
        bleu_text = "" if h["val_bleu"] is None else f"{h['val_bleu']:.4f}"
        click.echo(f"{h['step']}\t{h['val_perf']:.4f}\t{bleu_text}")
    if result["stopped_at"] is not None:
        click.echo(f"Stopped at step {result['stopped_at']} of {result['config']['steps']} by "
                   "--time-limit; the same command without it continues.")
    click.echo(f"Wrote {os.path.join(out, 'history.json')} and eval_<step>.npz")
