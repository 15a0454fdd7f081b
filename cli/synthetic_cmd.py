r"""``attn-dyn synthetic``: Snell et al. (2021) synthetic tasks, many seeds as one batched model.

Secs. 3.3, 5.2, 6.1, 6.2 and App. A.3; see
:mod:`minimal_attn.backends.snell.synthetic_experiments`. torch is imported
only when the command runs.
"""

import statistics

import click

from minimal_attn.backends.snell.config import (
    SYNTHETIC_COMPILE,
    SYNTHETIC_SIZES,
    SyntheticConfig,
    sized_config,
)

# the configs live in the library; these modules import torch only inside functions
from minimal_attn.backends.snell.synthetic_experiments import TASKS, run_synthetic, saved_eval_every
from minimal_attn.cli.options import (
    CONTEXT,
    ProgressBar,
    default,
    device_option,
    echo_line,
    on_interrupt,
    progress_option,
    resume_note,
)
from minimal_attn.cli.seq_options import PARADIGM_CHOICES, PARADIGM_HELP, paradigm_kwargs
from minimal_attn.experiments.run_folders import check_run_folder

CPU, PAPER = SYNTHETIC_SIZES["cpu"], SYNTHETIC_SIZES["paper"]


def _sizes(name):
    """``[CPU 1000, paper 3000]`` for a help text, from the presets."""
    cpu, paper = CPU[name], PAPER[name]
    return f"[CPU {cpu:g}, paper size {paper:g}]" if cpu != paper else f"[{cpu:g}]"


@click.command(context_settings=CONTEXT,
               short_help="Snell et al.'s synthetic tasks: copy, permutations, "
                          "multi-head, keyword.")
@click.argument("task", type=click.Choice(list(TASKS)))
@click.option("--seeds", type=int, default=None, help="Seeds per condition " + _sizes("seeds"))
@click.option("--steps", type=int, default=None, help="Adam steps " + _sizes("steps"))
@click.option("--hidden", type=int, default=None, help="LSTM width H " + _sizes("hidden"))
@click.option("--embed", type=int, default=None, help="Embedding size [= --hidden].")
@click.option("--batch-size", type=int, default=None,
              help="Sequences per step and seed " + _sizes("batch_size"))
@click.option("--lr", type=float, default=None, help="Adam learning rate " + _sizes("lr"))
@click.option("--eval-every", type=int, default=None,
              help="Steps between test evaluations and checkpoints [steps/20; with "
                   "--resume: the checkpointed run's].")
@click.option("--n-test", type=int, default=default(SyntheticConfig, "n_test"),
              show_default=True, help="Fixed test sequences per seed.")
@click.option("--heads", type=int, default=default(run_synthetic, "heads"), show_default=True,
              help="multihead: heads K.")
@click.option("--pool", type=int, default=default(run_synthetic, "pool"), show_default=True,
              help="multihead: candidate heads screened for good/bad.")
@click.option("--first-seed", type=int, default=default(run_synthetic, "first_seed"),
              show_default=True)
@click.option("--vocab", type=int, default=None,
              help="Word ids 1..N of the seq2seq model [the largest of the task's conditions: "
                   "40 multihead and permute-only, 60 copy]; multihead --vocab 60 screens "
                   "heads in the model size the copy task uses.")
@click.option("--paper-size", is_flag=True,
              help=f"Paper sizes (H = E = {PAPER['hidden']}, {PAPER['seeds']} seeds, "
                   f"{PAPER['steps']} steps, lr {PAPER['lr']:g}) unless given explicitly.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Folder for results.json, figures and checkpoints/.")
@click.option("--resume", is_flag=True, help="Continue from the checkpoints in --out.")
@device_option(default(SyntheticConfig, "device"))
@click.option("--paradigm", type=click.Choice(PARADIGM_CHOICES),
              default=SyntheticConfig.paradigm, show_default=True,
              help=PARADIGM_HELP.replace(" [sa].", "; one-head seq2seq tasks only."))
@click.option("--switch-step", default=None, metavar="N|auto",
              help="hybrid: first HA step, or auto (each seed when its SA focus stalls) "
                   "[steps/2].")
@click.option("--time-limit", type=float, default=default(SyntheticConfig, "time_limit"),
              help="Seconds of training: it ends at the first evaluation after them, is "
                   "scored as it stands and results.json gives stopped_at (--resume goes "
                   "on); multihead's head screening always runs to its end.")
@click.option("--compile", "compile_mode", type=click.Choice(SYNTHETIC_COMPILE),
              default=default(SyntheticConfig, "compile"), show_default=True,
              help="cudagraph (with --device cuda): replay each training step as a CUDA "
                   "graph, checked against an eager step first; if it differs the run goes "
                   "on eagerly and says so. Same numbers, fewer launches.")
@progress_option("A progress bar per phase (head screening, training) on stderr on a "
                 "terminal.")
def synthetic(task, seeds, steps, hidden, embed, batch_size, lr, eval_every, n_test, heads,
              pool, first_seed, vocab, paper_size, out, resume, device, paradigm, switch_step,
              time_limit, compile_mode, progress):
    """Snell et al. (2021) synthetic experiments, all seeds trained as one batched model.

    \b
    copy          permutations of 40 words vs the 40-of-60 control (Fig. 3 left, Fig. 4)
    copy-control  the control alone (Sec. 3.3)
    copy-mixture  permutations of two disjoint sets vs control (Fig. 3 right, Fig. 8)
    multihead     8 heads: all-bad, one-good, independent initialisations (Fig. 6)
    keyword       keyword toy under uniform attention: gamma curves (Fig. 7)
    permute       a fixed permutation function vs copy on the same inputs (Sec. 6.2)

    Writes OUT/results.json ("seeds": per-seed "step"/"accuracy" curves of the
    first condition, "converged_fraction" > 0.95, "failed_fraction" < 0.60, and
    every condition under "conditions"), OUT/accuracy.png and the task's figures.
    """
    import torch

    from minimal_attn.backends.snell.synthetic_experiments import check_synthetic
    from minimal_attn.backends.torch_backend import get_device

    device = str(get_device(device, param="device"))   # auto -> cpu or cuda, as everywhere
    if resume and eval_every is None and out is not None:
        eval_every = saved_eval_every(out)         # the cadence the run started with
    config, seeds = sized_config("paper" if paper_size else "cpu", seeds=seeds, steps=steps,
                                 hidden=hidden, embed=embed, batch_size=batch_size, lr=lr,
                                 eval_every=eval_every, n_test=n_test, device=device,
                                 vocab=vocab, time_limit=time_limit, compile=compile_mode,
                                 **paradigm_kwargs(paradigm, switch_step))
    options = dict(seeds=seeds, first_seed=first_seed, heads=heads, pool=pool, out_dir=out)
    check_synthetic(task, config, **options)
    check_run_folder(out, "synthetic", resume)
    if device == "cpu":
        torch.set_num_threads(1)    # small batched matmuls gain nothing from threads
    on_interrupt(lambda: resume_note(out, "--resume"))
    with ProgressBar(progress) as bar:
        result = run_synthetic(task, config, resume=resume, progress=bar, log=echo_line,
                               **options)
    for name, entry in result["conditions"].items():
        final = [s["final_accuracy"] for s in entry["seeds"]]
        click.echo(f"{task} {name:22s} seeds {len(final):3d}  converged "
                   f"{entry['converged_fraction']:.2f}  failed {entry['failed_fraction']:.2f}  "
                   f"final accuracy min/median/max {min(final):.3f}/"
                   f"{statistics.median(final):.3f}/{max(final):.3f}")
    for name, why in result.get("skipped", {}).items():
        click.echo(f"{task} {name}: skipped ({why})")
    if result.get("stopped_at") is not None:
        click.echo(f"time limit: stopped at step {result['stopped_at']} of {config.steps} "
                   "(partial; --resume goes on)")
    click.echo(f"wrote {out}/results.json")
