"""``attn-dyn train-seq``: train one LSTM attention model of Snell et al. (2021), resumable."""

import os

import click

from minimal_attn.cli.options import CONTEXT, ProgressBar, echo_line, on_interrupt, resume_note
from minimal_attn.cli.seq_options import (
    data_and_model_options,
    infer_task,
    paradigm_kwargs,
    paradigm_options,
)


@click.command(context_settings=CONTEXT)
@data_and_model_options
@paradigm_options
@click.option("--attention", type=click.Choice(["learned", "uniform", "frozen"]),
              default="learned", show_default=True,
              help="learned (standard), uniform over real tokens (A.7) or frozen: only the "
                   "attention layer trains (A.6).")
def train_seq(task, dataset, data_dir, out, steps, hidden, emb, out_hidden, batch_size, lr,
              lr_schedule, warmup, clip, dropout, max_len,
              eval_every, max_train, max_val, vocab_size, seed, train_eval, bleu, embeddings,
              device, progress, paradigm, switch_step, attention):
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
    from minimal_attn.backends.snell.agreement import AgreementConfig, train_one

    config = AgreementConfig(task=infer_task(task, dataset), dataset=dataset, data_dir=data_dir,
                             steps=steps, hidden=hidden, emb=emb, out_hidden=out_hidden,
                             batch_size=batch_size, lr=lr, eval_every=eval_every,
                             lr_schedule=lr_schedule, warmup=warmup, clip=clip,
                             dropout=dropout, max_len=max_len,
                             max_train=max_train, max_val=max_val, vocab_size=vocab_size,
                             seed=seed, train_eval=train_eval, bleu=bleu, embeddings=embeddings,
                             device=device, **paradigm_kwargs(paradigm, switch_step))
    on_interrupt(lambda: resume_note(out))      # running the same command continues
    with ProgressBar(progress) as bar:
        result = train_one(config, attention, out, progress=bar, log=echo_line)
    click.echo("step\tval_perf\tval_bleu")
    for h in result["history"]:
        bleu_text = "" if h["val_bleu"] is None else f"{h['val_bleu']:.4f}"
        click.echo(f"{h['step']}\t{h['val_perf']:.4f}\t{bleu_text}")
    click.echo(f"Wrote {os.path.join(out, 'history.json')} and eval_<step>.npz")
