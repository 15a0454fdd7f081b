r"""``attn-dyn train``: train FCAMs with SA, HA, LV and the hybrid; accuracy, SAIF, heat maps.

Vashisht & Ramaswamy (2023), Section 2.4, Section 5, Table 1 and Figure 1. One
command for every Table 1 data set: mosaics (synthetic, linear-orthogonal,
CIFAR-10/100) parse into an
:class:`~minimal_attn.backends.vr.table1.ExperimentConfig` for
:func:`~minimal_attn.backends.vr.table1.run_experiment`; ``--dataset
hatexplain`` into a :class:`~minimal_attn.backends.vr.hatexplain_table1.HateXplainConfig`
for :func:`~minimal_attn.backends.vr.hatexplain_table1.run_hatexplain`
(:mod:`.hatexplain_cmd`); both run the one Table 1 driver. An option given for
the other kind of data set is refused. ``attn-dyn train-text`` is this command
with ``--dataset hatexplain`` as its default. torch is imported only for
``--backend torch``.
"""

import copy

import click
from click.core import ParameterSource

from minimal_attn.backends.vr.hatexplain_table1 import (
    HYBRID_HA_LR,
    HateXplainConfig,
    TextTrainConfig,
)
from minimal_attn.backends.vr.table1 import (
    PROTOCOL_FIELDS,
    PROTOCOLS,
    ExperimentConfig,
    apply_protocol,
    recipe_text,
    resume_note,
    run_experiment,
)
from minimal_attn.cli.options import (
    CONTEXT,
    ProgressBar,
    default,
    device_option,
    echo_after,
    on_interrupt,
    parse_lr,
    parse_paradigms,
    parse_switch,
    progress_option,
    threads_option,
    unused_warnings,
)
from minimal_attn.cli.train_help import PROTOCOL_HELP
from minimal_attn.datasets.splits import TEST_IMAGES
from minimal_attn.errors import InputError
from minimal_attn.experiments.run_folders import check_run_folder
from minimal_attn.experiments.train_loop import COMPILE_MODES, CONV_MODES, PIXELS, PRECISIONS
from minimal_attn.experiments.train_report import summary_markdown

D = ExperimentConfig()          # the defaults live in the dataclasses, not here
MOSAICS = ("synthetic", "linear-orthogonal", "cifar10", "cifar100")
DATASETS = MOSAICS + ("hatexplain",)
#: The options of the HateXplain text FCAM; it refuses the others when given.
TEXT_OPTIONS = ("backend", "dataset", "data_dir", "embedding", "paradigm", "epochs", "seeds",
                "out", "resume", "device", "threads", "lr", "hybrid_lr", "batch_size",
                "switch_epoch", "threshold", "min_count", "progress")
TEXT_ONLY = ("embedding", "min_count")


def _task_belongs_to_train_seq(ctx, param, value):
    if value is not None:
        raise click.UsageError(
            f"--task {value}: Snell et al.'s LSTM models train with attn-dyn train-seq; run "
            f"attn-dyn train-seq --task {value} ... (attn-dyn train trains V&R's FCAMs)")


@click.command(context_settings=CONTEXT)
@click.option("--backend", type=click.Choice(["numpy", "torch"]), default=D.backend,
              show_default=True, help="torch: CNN FCAM (Appendix A.2) on image mosaics, or "
              "the text FCAM (A.3) on HateXplain; numpy: linear FCAM of the core on vector "
              "mosaics.")
@click.option("--dataset", type=click.Choice(DATASETS), default=D.dataset, show_default=True,
              help="synthetic needs no files (images for torch, Gaussian vectors for "
              "numpy); cifar10/cifar100 need --data-dir; hatexplain (posts, Section 5) "
              "needs --data-dir and takes --embedding and --min-count.")
@click.option("--data-dir", type=click.Path(), default=None,
              help="CIFAR folder: cifar-10-batches-py / cifar-100-python or its parent. "
                   "HateXplain: folder (or file) with hatexplain_binary.jsonl or the original "
                   "dataset.json, and post_id_divisions.json.")
@click.option("--embedding", type=click.Choice(["standard", "self-attention"]),
              default=default(TextTrainConfig, "embedding"), show_default=True,
              help="hatexplain: standard (Table 1 row HateXplain-1) or self-attention "
                   "(HateXplain-2), Appendix A.3.")
@click.option("--min-count", type=int, default=default(HateXplainConfig, "min_count"),
              show_default=True,
              help="hatexplain: words seen fewer times in the training split become <unk>.")
@click.option("--task", hidden=True, expose_value=False, is_eager=True,
              callback=_task_belongs_to_train_seq)
@click.option("--m", "m", type=int, default=D.m, show_default=True,
              help="Mosaics: segments per mosaic (>= 2).")
@click.option("--paradigm", default=default(ExperimentConfig, "paradigms"), show_default=True,
              help="sa, ha, lv, hybrid (comma-separated) or all; aliases soft, hard, lvml.")
@click.option("--epochs", type=int, default=D.epochs, show_default=True,
              help="Epochs of every paradigm (equal compute; the hybrid's SA + HA).")
@click.option("--seeds", type=int, default=D.seeds, show_default=True,
              help="Number of training seeds (F..F+S-1, F = --first-seed): initialisation "
                   "and batch order.")
@click.option("--first-seed", type=int, default=D.first_seed, show_default=True,
              help="Mosaics: the first training seed: split the seeds of one experiment over "
                   "runs (e.g. --seeds 3 --first-seed 3 trains seeds 3, 4, 5).")
@click.option("--n-train", type=int, default=D.n_train, show_default=True,
              help="Mosaics: training mosaics, built from training images (reused; CIFAR: at most "
                   "the number of training images).")
@click.option("--n-test", type=int, default=D.n_test, show_default=True,
              help="Mosaics: test mosaics, from test images (CIFAR: at most the test images; see "
                   "--test-images).")
@click.option("--protocol", type=click.Choice(sorted(PROTOCOLS)), default=None,
              help=PROTOCOL_HELP)
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default=D.optimizer,
              show_default=True, help="CNN: sgd with --momentum (the paper's A.2) or adam "
              "(the authors' code; default lr 5e-4 for every paradigm).")
@click.option("--focus-init", type=click.Choice(["zero", "mirror"]), default=D.focus_init,
              show_default=True, help="CNN: uniform start of the focus: output layer at "
              "zero, or mirror (the authors': the last hidden layer's halves cancel, every "
              "weight non-zero, every layer learns from the first step).")
@click.option("--classifier", type=click.Choice(["paper", "lenet"]), default=D.classifier,
              show_default=True, help="CNN: paper (A.2's 3 conv + fc layers) or lenet "
              "(the authors' released 2-conv LeNet).")
@click.option("--pixels", type=click.Choice(PIXELS), default=D.pixels,
              show_default=True, help="CIFAR: inputs standardised by the CIFAR-10 mean and std "
              "per channel, or half: (x - 0.5) / 0.5 of pixels in [0, 1], so in [-1, 1] (the "
              "authors' notebooks).")
@click.option("--test-images", type=click.Choice(TEST_IMAGES), default=D.test_images,
              show_default=True, help="CIFAR: the test mosaics' images come from the held-out "
              "test split, or from the training split as in the authors' notebooks (new "
              "mosaics of seen images: at 10,000 mosaics each about half the test "
              "foregrounds were in training mosaics).")
@click.option("--stop-loss", type=float, default=D.stop_loss,
              help="Mosaics: stop a run after the first epoch whose mean training loss is <= this "
                   "(the authors' rule: 0.05); the epoch is recorded. A hybrid stops in "
                   "its HA phase only (SA meeting it: an auto switch) [default: none].")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for results.json, config.json, history.jsonl, summary.csv/.md, "
                   "heat maps, per-instance scores and checkpoints/.")
@click.option("--resume", is_flag=True,
              help="Continue from the checkpoints in --out (runs without one start fresh).")
@device_option(D.device)
@threads_option()
@click.option("--lr", default=None,
              help="Learning rate: one number for every paradigm, or per paradigm, e.g. "
                   "sa=0.05,ha=0.01,lv=0.02 (hybrid: its SA phase, else sa's) [default: the "
                   "paper's for sgd; CIFAR-10 SA 0.01, HA 0.005, LV 0.01; CIFAR-100 SA "
                   "0.005, HA 0.001 (m = 20: 0.007), LV 0.01; adam: 5e-4; numpy: 0.5; "
                   "hatexplain: SA 0.1, HA 0.1, LV 0.3 (A.3)].")
@click.option("--hybrid-lr", type=float, default=None,
              help=f"Hybrid: learning rate of its HA phase [default: that of ha; hatexplain: "
                   f"{HYBRID_HA_LR:g}].")
@click.option("--batch-size", type=int, default=None,
              help=f"Mosaics (posts) per step [default: {D.batch_size}; hatexplain: "
                   f"{default(TextTrainConfig, 'batch_size')}, not in the paper; smaller "
                   "batches make LV at lr 0.3 diverge].")
@click.option("--momentum", type=float, default=D.momentum, show_default=True,
              help="CNN: SGD momentum (the numpy backend uses plain GD).")
@click.option("--switch-epoch", default=None,
              help="Hybrid: number N of SA epochs before HA (HA from the history's epoch "
                   "N+1; 0: HA throughout), or auto: when SA's mean a_z "
                   "(a_z* for hatexplain) has risen and stalled, or SA met --stop-loss "
                   "[default: epochs // 2].")
@click.option("--threshold", type=float, default=D.threshold, show_default=True,
              help="Focus/prediction threshold tau of SAIF (a_z > tau and s_y > tau; "
                   "hatexplain: a_z*, the attention on the rationale).")
@click.option("--chunk", type=int, default=None,
              help="CNN: images per network call [default: all on a GPU, 100 on a CPU].")
@click.option("--width", type=float, default=D.width, show_default=True,
              help="CNN: width multiplier of the convolutions and the wide fc layers "
                   "(narrow layers keep the paper's width).")
@click.option("--n-classes", type=int, default=D.n_classes, show_default=True,
              help="synthetic / linear-orthogonal: number of classes C.")
@click.option("--foreground", default=None,
              help="CIFAR: comma-separated foreground class names [default: airplane, "
                   "automobile, bird for cifar10; 50 animal classes for cifar100].")
@click.option("--data-seed", type=int, default=D.data_seed, show_default=True,
              help="Mosaics: seed of the mosaics (the same for every training seed).")
@click.option("--batch-seeds", is_flag=True,
              help="CNN: train all seeds of a paradigm as one stacked model (same "
                   "results and checkpoints as separate runs; faster on a GPU).")
@click.option("--eval-every", type=int, default=D.eval_every, show_default=True,
              help="Mosaics: score the test set every k epochs (and at a run's last epoch); the "
                   "epoch lines in between show no test numbers. Training is unchanged.")
@click.option("--checkpoint-every", type=int, default=D.checkpoint_every, show_default=True,
              help="Mosaics: with --out, checkpoint every k epochs (and at a run's last epoch).")
@click.option("--compile", type=click.Choice(COMPILE_MODES), default=D.compile,
              show_default=True,
              help="CNN, with --batch-seeds: run each step eagerly (none), through torch.compile, "
                   "or captured whole in a CUDA graph (cudagraph, CUDA only). Results agree "
                   "with none to float rounding.")
@click.option("--conv-mode", type=click.Choice(CONV_MODES), default=D.conv_mode,
              help="CNN, with --batch-seeds: how the seeds' convolutions run: each seed's own "
                   "(loop), one grouped convolution per layer (grouped: channels-last; "
                   "grouped_nchw), or one batched matrix product of image patches (unfold). "
                   "Results agree to float rounding [default: grouped_nchw on CUDA, loop "
                   "on the CPU].")
@click.option("--precision", type=click.Choice(PRECISIONS), default=D.precision,
              show_default=True,
              help="CNN, with --batch-seeds: the arithmetic. bf16: the networks under bfloat16 "
                   "autocast (softmaxes, losses and optimizer in float32; CPU or CUDA), "
                   "whose accuracy and SAIF agree with fp32 within seed noise "
                   "(tests/test_batched_precision.py), not to rounding; tf32: CUDA "
                   "matmuls in TF32 (needs a CUDA device).")
@click.option("--time-limit", type=float, default=D.time_limit,
              help="Mosaics: seconds per run (a seed; all seeds with --batch-seeds): end it at the "
                   "next epoch boundary, evaluate it as it stands and record time_limited "
                   "in config.json [default: none].")
@progress_option("A progress bar per epoch on stderr on a terminal; one line per epoch "
                 "is printed either way.")
@click.pass_context
def train(ctx, dataset, paradigm, lr, switch_epoch, foreground, protocol, out, resume, progress,
          **options):
    """Train FCAMs with SA, HA, LV and the hybrid; report accuracy and SAIF (Table 1).

    Each paradigm predicts with its own inference rule (the hybrid's SA epochs
    are scored with SA's); every paradigm trains for the same epochs. Reported
    per seed and as mean ± std over seeds beside the paper's Table 1, for train
    and test mosaics: accuracy, SAIF, the four focus-prediction fractions and
    the Figure 1 heat map of (a_z, s_y). One line per epoch goes to stdout and
    to OUT/history.jsonl; warnings go to stderr.

    With --out a checkpoint is written after every epoch (--checkpoint-every);
    --resume continues an interrupted run (on the CPU it ends exactly where an
    uninterrupted one does).

    --dataset hatexplain trains the text FCAM on posts (Section 5, Table 1 rows
    HateXplain-1/-2 with --embedding standard|self-attention): the annotators'
    rationale is the true foreground, a_z* the attention summed over it; posts
    without one count for accuracy only. It takes the options shared by every
    data set, --embedding and --min-count; a mosaic option (its help begins
    Mosaics:, CNN:, CIFAR: or synthetic / linear-orthogonal:) is refused. Snell et
    al.'s LSTM models are `attn-dyn train-seq`.

    \b
    Examples:
      attn-dyn train --threads 1             # synthetic images, all paradigms
      attn-dyn train --backend numpy --dataset linear-orthogonal --m 10
      attn-dyn train --dataset cifar10 --data-dir DIR --m 5 --protocol paper
          --device cuda --out runs/c10_m5    # resume: the same line + --resume
      attn-dyn train --dataset hatexplain --data-dir DIR --embedding standard
          --paradigm all --epochs 10 --seeds 3 --out runs/hx1
    """
    given = [p for p in ctx.command.params if p.expose_value and ctx.get_parameter_source(
        p.name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]
    if dataset == "hatexplain":
        from minimal_attn.cli.hatexplain_cmd import train_hatexplain

        _refuse(given, lambda p: p.name not in TEXT_OPTIONS, "applies to the mosaic data "
                f"sets ({', '.join(MOSAICS)}), not to --dataset hatexplain: drop it")
        if options["backend"] != "torch":
            raise InputError("--dataset hatexplain trains the text FCAM with torch: use "
                             "--backend torch", param="backend")
        text = {p.name: ctx.params[p.name] for p in given}     # the rest: the dataclasses'
        return train_hatexplain(text, out, resume, progress)
    _refuse(given, lambda p: p.name in TEXT_ONLY, f"applies to --dataset hatexplain only, not "
            f"to --dataset {dataset}: drop it or use --dataset hatexplain")
    for name in TEXT_ONLY:
        options.pop(name)
    if options["batch_size"] is None:
        options.pop("batch_size")                  # ExperimentConfig's (or the protocol's)
    config = ExperimentConfig(
        dataset=dataset, paradigms=parse_paradigms(paradigm),
        lr=None if lr is None else parse_lr(lr), switch_epoch=parse_switch(switch_epoch),
        foreground=None if foreground is None else [f.strip() for f in foreground.split(",")],
        **options)
    explicit = {p.name for p in given if p.name in PROTOCOL_FIELDS}
    config = apply_protocol(config, protocol, explicit)
    check_run_folder(out, "train", resume)
    on_interrupt(lambda: resume_note(out))  # the group's line after Ctrl-C, when it comes
    with ProgressBar(progress) as bar:
        results, meta = run_experiment(config, out=out, resume=resume, progress=bar,
                                       log=echo_after(unused_warnings(
                                           config.paradigms, config.lr, config.switch_epoch,
                                           config.hybrid_lr)))
    click.echo(f"{config.dataset}, m={config.m}, {config.seeds} seed(s), {config.epochs} "
               f"epochs, {config.backend} on {meta['device']}: mean ± std over seeds, in %")
    click.echo(recipe_text(meta), nl=False)
    click.echo(summary_markdown(results, config.m, config.dataset), nl=False)
    if out is not None:
        click.echo(f"wrote results.json, config.json, history.jsonl, summary.csv, summary.md, "
                   f"heatmap_<paradigm>_<split>.png and instances_*.npz to {out}")


def _refuse(given, wrong, why):
    """Refuse (one line) the first option given that ``wrong`` picks, saying ``why``."""
    for p in given:
        if wrong(p):
            raise InputError(f"{max(p.opts, key=len)} {why}")


def _hatexplain_default(param):
    """``param``, with hatexplain as the default where it is ``--dataset``."""
    if param.name != "dataset":
        return param
    param = copy.copy(param)
    param.default = "hatexplain"
    return param


train_text = click.Command(
    "train-text", callback=train.callback, context_settings=CONTEXT,
    params=[_hatexplain_default(p) for p in train.params],
    short_help="alias of train --dataset hatexplain (Table 1's HateXplain rows)",
    help="The HateXplain text FCAMs of Table 1: `attn-dyn train` with --dataset hatexplain "
         "as the default (the same options and code path; see attn-dyn train --help). The "
         "options whose help begins Mosaics:, CNN:, CIFAR: or synthetic / linear-orthogonal: "
         "are for --dataset synthetic, linear-orthogonal, cifar10 or cifar100 only.\n\n"
         "\b\nExample:\n  attn-dyn train-text --data-dir ../shared/data/hatexplain "
         "--embedding standard\n      --paradigm all --epochs 10 --seeds 3 --out "
         "runs/hatexplain1")
