"""Options shared by ``attn-dyn agreement`` and ``attn-dyn train-seq`` (Snell et al. 2021).

Every default is read from :class:`~minimal_attn.backends.snell.config.AgreementConfig`.
"""

import click

from minimal_attn import PARADIGMS
from minimal_attn.backends.snell.config import AgreementConfig
from minimal_attn.cli.options import device_option, progress_option, threads_option
from minimal_attn.datasets.seq import DATASETS
from minimal_attn.errors import PARADIGM_ALIASES, InputError

D = AgreementConfig()


def data_and_model_options(f):
    """Data set, sizes and optimiser options, in the order ``--help`` shows them."""
    options = [
        click.option("--task", type=click.Choice(["classify", "translate"]), default=None,
                     help="classify (Sec. 2.4) or translate (Sec. 2.1); default: the "
                          "data set's task."),
        click.option("--dataset", type=click.Choice(sorted(DATASETS)), required=True,
                     help="sst2, hatexplain, tsv (train.tsv + dev.tsv rows text<TAB>0|1) "
                          "classify; multi30k (en->de), parallel (train.src/.tgt, "
                          "val.src/.tgt) translate."),
        click.option("--data-dir", required=True, metavar="DIR", help="Folder of the data set."),
        click.option("--out", required=True, metavar="DIR",
                     help="Output folder; a run already in it is continued or reused."),
        click.option("--steps", type=int, default=None,
                     help="Adam steps per model [paper: 4000 classify; 20000 translate]."),
        click.option("--hidden", type=int, default=D.hidden, show_default=True,
                     help="LSTM width (A.8)."),
        click.option("--emb", type=int, default=None,
                     help="Embedding width [classify: 300; translate: --hidden]."),
        click.option("--out-hidden", type=int, default=D.out_hidden, show_default=True,
                     help="translate: width of N's hidden layer."),
        click.option("--batch-size", type=int, default=None,
                     help="[paper: 32 classify, 16 translate]."),
        click.option("--lr", type=float, default=D.lr, show_default=True, help="Adam step size."),
        click.option("--lr-schedule", type=click.Choice(["constant", "cosine"]),
                     default=D.lr_schedule, show_default=True,
                     help="cosine: decay from --lr to --lr/100 over the steps."),
        click.option("--warmup", type=int, default=D.warmup, show_default=True,
                     help="Steps of linear learning-rate warm-up."),
        click.option("--clip", type=float, default=None,
                     help="Clip the gradient norm to this [no clipping]."),
        click.option("--dropout", type=float, default=D.dropout, show_default=True,
                     help="translate: dropout on embeddings and between LSTM layers (A.8)."),
        click.option("--max-len", type=int, default=None,
                     help="Train only on pairs of at most N ids on each side (validation "
                          "kept whole) [all]."),
        click.option("--eval-every", type=int, default=None,
                     help="Evaluate every N steps after the paper's first points "
                          "[250 classify, 2000 translate]."),
        click.option("--max-train", type=int, default=None, help="Use the first N training "
                     "examples."),
        click.option("--max-val", type=int, default=None, help="Use the first N validation "
                     "examples."),
        click.option("--vocab-size", type=int, default=D.vocab_size, show_default=True,
                     help="translate: SentencePiece pieces shared by both sides (A.8)."),
        click.option("--seed", type=int, default=D.seed, show_default=True),
        click.option("--train-eval", type=int, default=D.train_eval, show_default=True,
                     help="Also evaluate on the first N training examples (Table 7)."),
        click.option("--bleu/--no-bleu", default=D.bleu, show_default=True,
                     help="translate: greedy-decoding BLEU (sacrebleu) at every evaluation."),
        click.option("--embeddings", default=None, metavar="FILE",
                     help="classify: GloVe-format text vectors (width --emb) for known words."),
        device_option(None),
        threads_option(then=" agreement: shared out among --workers."),
        click.option("--time-limit", type=float, default=None, metavar="SECONDS",
                     help="Stop training at the first evaluation after this many seconds "
                          "(agreement: shared out among the models, all of it to each when "
                          "--workers runs them side by side); the results say where each "
                          "stopped, and the same command without it continues [no limit]."),
        progress_option("A progress bar per model on stderr on a terminal."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


PARADIGM_CHOICES = [*PARADIGMS, *PARADIGM_ALIASES]
PARADIGM_HELP = ("sa (Snell's model), ha, lv or hybrid: V&R's losses and inference rules per "
                 "output over the source positions (the probe's per-position outputs); "
                 "aliases soft, hard, lvml [sa].")


def paradigm_options(f):
    """``--paradigm`` and ``--switch-step``; None leaves the library config's default."""
    f = click.option("--switch-step", default=None, metavar="N|auto",
                     help="hybrid: first HA step, or auto (when SA's focus stalls) "
                          "[steps/2].")(f)
    return click.option("--paradigm", type=click.Choice(PARADIGM_CHOICES), default=None,
                        help=PARADIGM_HELP)(f)


def paradigm_kwargs(paradigm, switch_step):
    """The given paradigm options as config fields (an alias such as ``lvml`` -> ``lv``).

    A ``--switch-step`` without ``--paradigm hybrid`` is refused rather than ignored: the
    command runs one paradigm, and only the hybrid has a switch. (The library's configs
    set a switch aside for a non-hybrid paradigm, so that one sweep grid can span several.)
    """
    out = {}
    if paradigm is not None:
        out["paradigm"] = PARADIGM_ALIASES.get(paradigm, paradigm)
    if switch_step is not None and paradigm != "hybrid":
        raise InputError(f"--switch-step applies to the hybrid only, and the paradigm is "
                         f"{out.get('paradigm', 'sa')}: add --paradigm hybrid or drop "
                         "--switch-step", param="switch_step")
    if switch_step is not None:
        out["switch_step"] = switch_step if switch_step.strip().lower() == "auto" else \
            _int_or_text(switch_step)
    return out


def _int_or_text(text):
    try:
        return int(text)
    except ValueError:
        return text             # the library refuses it by name


def infer_task(task, dataset):
    return DATASETS[dataset] if task is None else task


def agreement_config(options, paradigm=None, switch_step=None):
    """The :class:`AgreementConfig` of the shared options (``data_and_model_options``, and
    the agreement's own) and the paradigm options; the task inferred from the data set.

    ``--emb`` is refused for translation, whose embedding width is ``--hidden`` (A.8),
    rather than ignored.
    """
    options = dict(options)
    options["task"] = infer_task(options.get("task"), options["dataset"])
    emb, hidden = options.get("emb"), options.get("hidden")
    if options["task"] == "translate" and emb is not None and emb != hidden:
        raise InputError(f"--emb {emb} applies to classification; translation embeds with "
                         f"the LSTM width (--hidden {hidden}): drop --emb or set --hidden",
                         param="emb")
    return AgreementConfig(**options, **paradigm_kwargs(paradigm, switch_step))
